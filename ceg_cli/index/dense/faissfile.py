"""FAISS's file format written in a stream: an index file from vectors read a batch at a time.

FAISS serializes an IndexFlatIP as a header (fourcc, d, ntotal, ...), the
length of its codes in 4-byte words, then the codes; an IndexRefineFlat as
its own header, the base index, the refine (flat) index, then k_factor. The
layout is read from FAISS's own serialization of small indexes each time and
checked, and ``vectors.write_vectors`` reads the written file back, so a FAISS
that writes another layout fails the build rather than writing a bad index.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ...progress import Counter
    from .vectorsource import VectorSource

_NTOTAL = slice(8, 16)  # after the fourcc and d (int32): ntotal, an int64
_K_FACTOR = struct.Struct("<f")
_FLAT_FOURCC = b"IxFI"


def _flat_layout(d: int) -> tuple[bytes, int]:
    """The empty ``IndexFlatIP(d)``'s bytes, and its codes' length field's words per vector."""
    import faiss

    empty = faiss.serialize_index(faiss.IndexFlatIP(d)).tobytes()
    one = faiss.IndexFlatIP(d)
    one.add(np.zeros((1, d), dtype=np.float32))
    single = faiss.serialize_index(one).tobytes()
    words = int.from_bytes(single[len(empty) - 8 : len(empty)], "little")
    if (
        not empty.startswith(_FLAT_FOURCC)
        or len(single) != len(empty) + 4 * d
        or single[_NTOTAL] != (1).to_bytes(8, "little")
        or empty[_NTOTAL] != bytes(8)
        or words * 4 != 4 * d
    ):
        raise RuntimeError(
            f"FAISS {faiss.__version__} serializes a flat index in a layout ceg does not know"
        )
    return empty, words


def _flat_header(d: int, n: int) -> bytes:
    empty, words = _flat_layout(d)
    header = bytearray(empty)
    header[_NTOTAL] = n.to_bytes(8, "little")
    header[-8:] = (n * words).to_bytes(8, "little")
    return bytes(header)


def write_flat_file(source: VectorSource, path: Path, counter: Counter) -> None:
    with FileWriter(path) as out:
        _write_flat_part(out, source, counter)


def _write_flat_part(out: FileWriter, source: VectorSource, counter: Counter) -> None:
    out.write(_flat_header(source.dimension, source.count))
    written = 0
    for batch in source.batches():
        out.write(np.ascontiguousarray(batch, dtype="<f4").tobytes())
        written += len(batch)
        counter.update(len(batch))
    if written != source.count:
        raise RuntimeError(f"{out.path}: {written} vectors read for {source.count}")


def refine_prefix(ivf: Any, n: int) -> bytes:
    """The bytes of an ``IndexRefineFlat`` of ``n`` vectors before its base index."""
    import faiss

    d = int(ivf.d)
    empty_base = faiss.clone_index(ivf)
    empty_base.reset()
    refine = faiss.IndexRefineFlat(empty_base)
    whole = faiss.serialize_index(refine).tobytes()
    base = faiss.serialize_index(empty_base).tobytes()
    flat, _ = _flat_layout(d)
    cut = len(whole) - len(base) - len(flat) - _K_FACTOR.size
    if cut <= 16 or whole[cut : cut + len(base)] != base or (
        whole[cut + len(base) : cut + len(base) + len(flat)] != flat
    ):
        raise RuntimeError(
            f"FAISS {faiss.__version__} serializes a refine index in a layout ceg does not know"
        )
    prefix = bytearray(whole[:cut])
    prefix[_NTOTAL] = n.to_bytes(8, "little")
    return bytes(prefix)


def write_refine_file(
    prefix: bytes, ivf: Any, k_factor: float, source: VectorSource, path: Path,
    counter: Counter,
) -> None:
    """An ``IndexRefineFlat`` over ``ivf`` whose flat vectors stream from ``source``."""
    with FileWriter(path) as out:
        out.write(prefix)
        _serialize_into(ivf, out.write)
        _write_flat_part(out, source, counter)
        out.write(_K_FACTOR.pack(k_factor))


def _serialize_into(index: Any, write: Any) -> int:
    """Write ``index`` in FAISS's format through ``write`` (no copy in memory); its bytes."""
    import faiss

    written = 0

    def counted(data: bytes) -> None:
        nonlocal written
        write(data)
        written += len(data)

    faiss.write_index(index, faiss.PyCallbackIOWriter(counted))
    return written


def rewrite_search_width(path: Path, prefix: int, ivf: Any, k_factor: float) -> None:
    """Save the widened search (nprobe in the IVF header, k_factor last) in place.

    The IVF index is written again over itself: only its nprobe differs, so it
    has the same length, which is checked against where the flat part begins.
    """
    with open(path, "r+b") as fh:
        fh.seek(prefix)
        written = _serialize_into(ivf, fh.write)
        if fh.read(len(_FLAT_FOURCC)) != _FLAT_FOURCC:
            raise RuntimeError(f"{path}: the IVF lists changed length ({written:,} bytes)")
        fh.seek(-_K_FACTOR.size, 2)
        fh.write(_K_FACTOR.pack(k_factor))
        fh.flush()
        os.fsync(fh.fileno())


class FileWriter:
    """A file written and fsynced; an OSError names the file (a full disk says where)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> FileWriter:
        try:
            self._fh = open(self.path, "wb")
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
        return self

    def write(self, data: bytes) -> None:
        try:
            self._fh.write(data)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc

    def __exit__(self, kind: object, *rest: object) -> None:
        try:
            if kind is None:
                self._fh.flush()
                os.fsync(self._fh.fileno())
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
        finally:
            self._fh.close()


def read_vectors(path: Path, mmap: bool = True) -> Any:
    """Read ``vectors.faiss``; with ``mmap`` its flat vectors stay in the file.

    ``IO_FLAG_MMAP_IFC`` maps the flat codes (of every type here) in place, so
    opening costs no read of the vectors and memory follows what searches
    touch; the rest (an HNSW graph, IVF lists of PQ codes) is read. The older
    ``IO_FLAG_MMAP`` maps only on-disk IVF lists and reads flat vectors whole.
    """
    import faiss

    flags = faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY if mmap else 0
    return faiss.read_index(str(path), flags)
