"""The message of a build that filled the disk: where, and how much room it needs.

Days of embedding must not end in a bare "No space left on device": the
message names the file being written, the room the new index needs beside what
is free, and whether the unfinished build was kept for ``--resume``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

from ..errors import DiskFullError
from .layout import CHUNKS_FILE, META_FILE, VECTORS_FILE

__all__ = ["disk_full_error"]


def disk_full_error(
    exc: BaseException,
    code: int,
    target: Path,
    tmp: Path | None,
    count: int,
    dimension: int,
    filled: bool,
    kept: bool = False,
) -> DiskFullError:
    """Say where the disk filled up and how much room the new index needs there.

    ``kept``: the unfinished build stays for ``--resume`` (it committed shards),
    so its room is not free again; the index file needs the vectors' room
    once more beside their shards.
    """
    where = target.parent.resolve()
    if isinstance(exc, sqlite3.Error):
        file = CHUNKS_FILE
    elif isinstance(exc, OSError) and exc.filename:
        file = Path(exc.filename).name
    else:
        file = VECTORS_FILE  # FAISS, the only writer that raises RuntimeError
    vector_bytes = count * dimension * 4
    store_bytes = 0
    if tmp is not None:
        # Until the build finishes, most new rows sit in the store's write-ahead log.
        for name in (CHUNKS_FILE, f"{CHUNKS_FILE}-wal"):
            if (tmp / name).exists():
                store_bytes += (tmp / name).stat().st_size
    # The partial build is removed next; the room it holds is the user's again.
    partial = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file()) if tmp else 0
    free = _bytes(shutil.disk_usage(where).free + (0 if kept else partial))
    if kept:
        what = "for the index file" if filled else "so far, and more to come"
        needs = (
            f"{'about' if filled else 'more than'} {_bytes(vector_bytes)} more in {where} "
            f"{what} ({count:,} vectors x {dimension} dimensions x 4 bytes), {free} is free "
            "there"
        )
        return DiskFullError(
            f"disk full ({os.strerror(code)}) while writing {file} of the new index for "
            f"{target}: it needs {needs}; the unfinished build is kept in {tmp}: free some "
            "space and run the same command with --resume"
        )
    if count or store_bytes:
        # Until every passage is read, the count is a floor: more were coming.
        total = _bytes(vector_bytes + store_bytes)
        needs = (
            f"{'about' if filled else 'more than'} {total} in {where} ({count:,} vectors x "
            f"{dimension} dimensions x 4 bytes = {_bytes(vector_bytes)}, and "
            f"{_bytes(store_bytes)} of passages{'' if filled else ' so far'}), {free} is free "
            "there without the partial build"
        )
    else:
        needs = f"more room in {where} than the {free} free there"
    kept = "the previous index is untouched" if (target / META_FILE).exists() else "nothing kept"
    return DiskFullError(
        f"disk full ({os.strerror(code)}) while writing {file} of the new index for "
        f"{target}: it needs {needs}; {kept}: free some space, or build elsewhere with --index"
    )


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{max(1, round(n / 1024)) if n else 0} KiB"
