"""What the index writers read vectors from: a ``VectorSource``, a batch at a time.

A protocol of its own, so that the byte format (``faissfile``) and the index
types (``vectors``) both depend on it and not on each other; and its two
implementations: vectors in memory (``ArraySource``) and a build's shard
files on disk (``ShardFiles``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

__all__ = ["ArraySource", "ShardFiles", "VectorSource"]


class VectorSource(Protocol):
    """Vectors to index, read a batch at a time: a build's shards, or an array."""

    dimension: int

    @property
    def count(self) -> int: ...

    def batches(self) -> Iterator[np.ndarray]:
        """Every vector in order, as C-contiguous float32 arrays of bounded size."""
        ...

    def take(self, ids: np.ndarray) -> np.ndarray:
        """The vectors at the sorted positions ``ids``."""
        ...


class ArraySource:
    """A ``VectorSource`` over vectors in memory (tests, benchmarks)."""

    def __init__(self, vectors: np.ndarray, batch: int = 65536) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.dimension = int(self.vectors.shape[1])
        self._batch = batch

    @property
    def count(self) -> int:
        return len(self.vectors)

    def batches(self) -> Iterator[np.ndarray]:
        for start in range(0, len(self.vectors), self._batch):
            yield self.vectors[start : start + self._batch]

    def take(self, ids: np.ndarray) -> np.ndarray:
        return self.vectors[ids]


class ShardFiles:
    """A ``VectorSource`` over ``.npy`` files of vectors, in order, then ``extra`` arrays.

    The files' sizes are read once, from their headers; the vectors are read
    a batch at a time (``batches``) or memory-mapped for a few rows (``take``).
    """

    def __init__(self, files: list[Path], dimension: int, extra: Sequence[np.ndarray] = (),
                 batch: int = 8192) -> None:
        self.files = files
        self.dimension = dimension
        self.extra = list(extra)
        self._batch = batch
        self._lengths = [np.load(f, mmap_mode="r").shape[0] for f in files]
        self._lengths += [len(e) for e in self.extra]

    @property
    def count(self) -> int:
        return sum(self._lengths)

    def batches(self) -> Iterator[np.ndarray]:
        # Read, not mapped: pages of a mapping stay in the process's resident
        # memory while it lives, which would show the whole file as used.
        for file in self.files:
            with open(file, "rb") as fh:
                fmt = np.lib.format
                header = (fmt.read_array_header_1_0 if fmt.read_magic(fh) == (1, 0)
                          else fmt.read_array_header_2_0)
                shape, fortran, dtype = header(fh)
                if fortran or dtype != np.dtype("<f4") or shape[1:] != (self.dimension,):
                    raise RuntimeError(f"{file}: not a C-order float32 array of "
                                       f"{self.dimension} columns")
                for start in range(0, shape[0], self._batch):
                    rows = min(self._batch, shape[0] - start)
                    batch = np.empty((rows, self.dimension), dtype=np.float32)
                    if fh.readinto(memoryview(batch).cast("B")) != batch.nbytes:
                        raise RuntimeError(f"{file}: shorter than its header says")
                    yield batch
        yield from self.extra

    def take(self, ids: np.ndarray) -> np.ndarray:
        ends = np.cumsum(self._lengths)
        which = np.searchsorted(ends, ids, side="right")
        out = np.empty((len(ids), self.dimension), dtype=np.float32)
        for number in np.unique(which):
            rows = which == number
            part = (np.load(self.files[number], mmap_mode="r") if number < len(self.files)
                    else self.extra[number - len(self.files)])
            out[rows] = part[ids[rows] - (ends[number] - self._lengths[number])]
        return out
