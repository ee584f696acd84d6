"""The life of an index directory on disk: digests, temporary build, atomic swap.

An index is built in ``.NAME.building`` beside its target (a directory that
survives a killed build, so that ``--resume`` can continue it; other rebuilds
use ``.NAME.building-PID``) and put in place only when complete. On Linux the
new and the previous directory are exchanged in one atomic step
(``renameat2(RENAME_EXCHANGE)``), so ``NAME`` always holds a whole index, old
or new, even if the build is killed at that instant; elsewhere
the previous index moves aside to ``.NAME.old-PID`` for the moment between two
renames. A later build cleans up what a killed build left behind, and restores
the old index if a build died between the renames.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ..errors import IndexBusyError, UsageError
from .layout import CHUNKS_FILE, LEXICAL_DIR, MANIFEST, META_FILE, SHARDS, VECTORS_FILE

#: Files that may sit in an index directory without being part of the index
#: (the checkout's ``index/README.md``); they are carried over on rebuild.
FOREIGN_OK = {"README.md", ".gitkeep", ".gitignore"}
#: In the work directory: the process id of the build working in it.
OWNER_FILE = "owner"
#: Every name a build writes into an index or its work directory, and the only
#: ones ``remove_built`` removes: ceg deletes nothing it cannot prove it wrote.
BUILT_NAMES = frozenset({
    META_FILE, f"{META_FILE}.part", VECTORS_FILE, LEXICAL_DIR, MANIFEST, f"{MANIFEST}.part",
    SHARDS, OWNER_FILE, CHUNKS_FILE, f"{CHUNKS_FILE}-wal", f"{CHUNKS_FILE}-shm",
    f"{CHUNKS_FILE}-journal", *FOREIGN_OK,
})


def remove_built(path: Path) -> list[str]:
    """Remove what a build wrote in ``path``, and ``path`` itself if nothing else is left.

    Returns the names of what was left because no build writes such a name
    (the directory then stays, holding them); a missing ``path`` is no error.
    """
    try:
        entries = list(path.iterdir())
    except FileNotFoundError:
        return []
    from .layout import is_generation_name  # an update's folders (``gen-NNNNNN``)

    left = []
    for entry in entries:
        if entry.name not in BUILT_NAMES and not is_generation_name(entry.name):
            left.append(entry.name)
        elif entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    if not left:
        try:
            path.rmdir()
        except OSError:  # something appeared meanwhile: it stays
            return sorted(p.name for p in path.iterdir())
    return sorted(left)


def source_digest(path: Path) -> str:
    """sha256 of a file, or of a folder's sorted (relative path, file digest) list."""
    if path.is_dir():
        outer = hashlib.sha256()
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            outer.update(file.relative_to(path).as_posix().encode("utf-8") + b"\0")
            outer.update(_file_digest(file).encode("ascii") + b"\n")
        return "sha256:" + outer.hexdigest()
    return "sha256:" + _file_digest(path)


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as indented JSON, under a temporary name renamed into place."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(part, path)


#: A vectors file is recognised by its size and a digest of a sample: the
#: first and last block and ``SAMPLE_BLOCKS`` blocks evenly spaced between, so
#: opening a large index reads about 1 MiB of it, not all of it.
SAMPLE_BLOCK = 64 * 1024
SAMPLE_BLOCKS = 16


def sampled_digest(path: Path) -> str:
    """sha256 of a file's size and sampled blocks (the whole file when it is small)."""
    size = path.stat().st_size
    digest = hashlib.sha256(f"{size}\n".encode("ascii"))
    with open(path, "rb") as fh:
        for offset in _sample_offsets(size):
            fh.seek(offset)
            digest.update(fh.read(SAMPLE_BLOCK))
    return "sha256-sampled:" + digest.hexdigest()


def _sample_offsets(size: int) -> list[int]:
    if size <= SAMPLE_BLOCK * (SAMPLE_BLOCKS + 2):
        return list(range(0, size, SAMPLE_BLOCK))
    last = size - SAMPLE_BLOCK
    step = last // (SAMPLE_BLOCKS + 1)
    return [0, *(step * i for i in range(1, SAMPLE_BLOCKS + 1)), last]


def disk_full_errno(exc: BaseException) -> int | None:
    """ENOSPC or EDQUOT when ``exc`` says a write found no room, whoever raised it.

    The OS, SQLite ("database or disk is full") and FAISS (a RuntimeError that
    quotes the OS message) each report it their own way.
    """
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return exc.errno
    if isinstance(exc, sqlite3.Error):
        full = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
        return errno.ENOSPC if full else None
    if isinstance(exc, RuntimeError):
        for code in (errno.ENOSPC, errno.EDQUOT):
            if os.strerror(code) in str(exc):
                return code
    return None


def lock_path(target: Path) -> Path:
    return target.parent / f".{target.name}.lock"


@contextmanager
def build_lock(target: Path) -> Iterator[Path]:
    """Hold the lock file beside ``target`` while building it; fail at once if taken.

    Failing, not waiting: a second build would redo the first's work and then
    replace its result, and a CI job waiting on a lock cannot say for how
    long. The lock is the operating system's (``flock``): it goes with the
    process that holds it, so a killed build never leaves a stale lock.

    The lock file goes when the build ends (``_drop_lock``), and with it one a
    killed build left; a build that opened the file just before it went sees
    that the name no longer leads to what it locked and takes the name afresh
    (``_take_lock``), so two builds never hold two files of one name.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    path = lock_path(target)
    if sys.platform == "win32":  # no flock: filelock's lock, whose file stays
        with _filelock(target, path):
            yield path
        return
    fd = _take_lock(path)
    if fd is None:
        raise _busy(target, path)
    try:
        yield path
    finally:
        _drop_lock(fd, path)


def _take_lock(path: Path) -> int | None:
    """A descriptor of ``path`` holding its exclusive ``flock``; None when another holds it."""
    import fcntl

    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _names(path, fd):
                return fd
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise UsageError(
                    f"{path}: this file system cannot lock files ({exc.strerror}), and a "
                    "build holds a lock beside its index; build it on a local disk (--index)"
                ) from None
            raise
        except BaseException:
            os.close(fd)
            raise
        # A build that ended removed the file between our open and our flock: what we
        # hold is no longer anyone's lock. Take the name again.
        os.close(fd)


def _names(path: Path, fd: int, *, follow: bool = True) -> bool:
    """Whether ``path`` leads to the file open as ``fd`` (``follow=False``: is that file
    itself, not a symbolic link to it)."""
    try:
        found = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return False
    return os.path.samestat(found, os.fstat(fd))


def _drop_lock(fd: int, path: Path) -> None:
    """Remove the lock file while still holding it, then let go.

    Only the file this build locked (the name still leads to it) and only an empty
    one, as ceg's locks are: a file someone wrote under that name stays. Removed
    before it is unlocked, so no build can lock it after this one and find it gone.
    """
    try:
        if _names(path, fd, follow=False) and os.fstat(fd).st_size == 0:
            with suppress(OSError):  # left in place, it is harmless: the next build reuses it
                os.unlink(path)
    finally:
        os.close(fd)  # the flock goes with the last descriptor


def _busy(target: Path, path: Path) -> IndexBusyError:
    pids = [_pid_of(p) for p in target.parent.glob(f".{target.name}.building-*")]
    pids.append(_owner_of(work_path(target)))
    live = [pid for pid in pids if pid is not None and _pid_alive(pid)]
    holder = f" (process {live[0]})" if live else ""
    return IndexBusyError(
        f"another 'ceg index build' is writing the index at {target}{holder}: it holds "
        f"the lock {path}; run this build again when that one has finished (the lock "
        "goes when its process ends, even if it is killed)"
    )


@contextmanager
def _filelock(target: Path, path: Path) -> Iterator[None]:
    from filelock import FileLock, Timeout

    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise _busy(target, path) from None
    try:
        yield
    finally:
        lock.release()


def work_path(target: Path) -> Path:
    """Where a build of ``target`` works: one name, so that a killed build can resume.

    Only the holder of ``build_lock`` uses it, so the name needs no process id.
    """
    return target.parent / f".{target.name}.building"


def temp_dir(target: Path, resumable: bool = False) -> Path:
    """A new, empty directory beside ``target`` to build it in.

    ``resumable``: the build's stable ``work_path`` (anything an unfinished
    build left there is removed), else ``.NAME.building-PID``. Leftovers of
    dead builds are cleaned up first.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    stale_dirs = [
        *target.parent.glob(f".{target.name}.building-*"),
        *target.parent.glob(f".{target.name}.old-*"),
    ]
    for stale in stale_dirs:
        pid = _pid_of(stale)
        if pid is None or _pid_alive(pid):
            continue
        if ".old-" in stale.name and not target.exists():
            # A build died between its two renames: the old index is whole; restore it.
            os.rename(stale, target)
        else:
            remove_built(stale)  # anything else in it stays, and so does the folder
    if resumable:
        tmp = work_path(target)
    else:
        tmp = target.parent / f".{target.name}.building-{os.getpid()}"
    left = remove_built(tmp)
    if left:
        raise UsageError(
            f"{tmp}: ceg builds {target} there, and it holds files no build wrote "
            f"({', '.join(left[:3])}); move them away and run the build again"
        )
    tmp.mkdir()
    return tmp


def claim(work: Path) -> None:
    """Say, in ``work``, that this process builds there (for the lock's message)."""
    (work / OWNER_FILE).write_text(f"{os.getpid()}\n", encoding="ascii")


def _owner_of(work: Path) -> int | None:
    try:
        text = (work / OWNER_FILE).read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        return None
    return int(text) if text.isdigit() else None


def _pid_of(leftover: Path) -> int | None:
    """The process id that ends a ``.NAME.building-PID`` or ``.NAME.old-PID`` name."""
    tail = leftover.name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_tree(path: Path) -> None:
    for file in path.iterdir():
        if file.is_dir():  # the lexical index's folder
            _fsync_tree(file)
            continue
        with open(file, "rb") as fh:
            os.fsync(fh.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def swap_into_place(tmp: Path, target: Path) -> None:
    _fsync_tree(tmp)
    if not target.exists():
        os.rename(tmp, target)
        return
    for name in FOREIGN_OK:
        if (target / name).is_file():
            shutil.copy2(target / name, tmp / name)
    if _exchange(tmp, target):
        # tmp now holds the previous index. A reader that opened its files
        # keeps reading them: unlinking does not take them from under it.
        remove_built(tmp)
        return
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    remove_built(old)
    os.rename(target, old)
    os.rename(tmp, target)
    remove_built(old)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories atomically (Linux ``renameat2`` with ``RENAME_EXCHANGE``).

    False where the system cannot (another OS, a C library or kernel without
    it, a file system that does not support it): the caller then renames twice.
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    path_t = ctypes.c_char_p
    renameat2.argtypes = [ctypes.c_int, path_t, ctypes.c_int, path_t, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))
