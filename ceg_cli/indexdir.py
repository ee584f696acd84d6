"""The life of an index directory on disk: digests, temporary build, atomic swap.

An index is built in ``.NAME.building-PID`` beside its target and put in place
only when complete. On Linux the new and the previous directory are exchanged
in one atomic step (``renameat2(RENAME_EXCHANGE)``), so ``NAME`` always holds a
whole index, old or new, even if the build is killed at that instant; elsewhere
the previous index moves aside to ``.NAME.old-PID`` for the moment between two
renames. A later build cleans up what a killed build left behind, and restores
the old index if a build died between the renames.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import sys
from pathlib import Path

#: Files that may sit in an index directory without being part of the index
#: (the checkout's ``index/README.md``); they are carried over on rebuild.
FOREIGN_OK = {"README.md", ".gitkeep", ".gitignore"}


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


def temp_dir(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    stale_dirs = [
        *target.parent.glob(f".{target.name}.building-*"),
        *target.parent.glob(f".{target.name}.old-*"),
    ]
    for stale in stale_dirs:
        pid = stale.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or _pid_alive(int(pid)):
            continue
        if ".old-" in stale.name and not target.exists():
            # A build died between its two renames: the old index is whole; restore it.
            os.rename(stale, target)
        else:
            shutil.rmtree(stale, ignore_errors=True)
    tmp = target.parent / f".{target.name}.building-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    return tmp


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
        shutil.rmtree(tmp, ignore_errors=True)
        return
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    shutil.rmtree(old, ignore_errors=True)
    os.rename(target, old)
    os.rename(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


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
