"""The life of an index directory on disk: digests, temporary build, atomic swap.

Every build, append and update goes through ``build_target``: it resolves
``--index`` once (a symbolic link builds into its target: the link stays a
link, and everything below happens beside the real directory), takes the
build lock, and hands out a ``BuildTarget`` that owns the work folders and
puts the new index in place.

An index is built in ``.NAME.building`` beside its target (a directory that
survives a killed build, so that ``--resume`` can continue it; other rebuilds
use ``.NAME.building-PID``) and put in place only when complete. On Linux the
new and the previous directory are exchanged in one atomic step
(``renameat2(RENAME_EXCHANGE)``), so ``NAME`` always holds a whole index, old
or new, even if the build is killed at that instant; elsewhere
the previous index moves aside to ``.NAME.old-PID`` for the moment between two
renames. A later build cleans up what a killed build left behind, and restores
the old index if a build died between the renames.

What ceg removes it must prove it made: a leftover is touched only when it is a
real directory (never a symbolic link, never followed) that carries ceg's mark
(``made_by_ceg``: the ``owner`` file every work folder gets when it is made, or
a ceg index's ``meta.json``), and within it only the names a build writes
(``BUILT_NAMES``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import IndexBusyError, UsageError
from .layout import CHUNKS_FILE, LEXICAL_DIR, MANIFEST, META_FILE, SHARDS, VECTORS_FILE
from .metacheck import file_problem

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
    Anything at ``path`` but a real directory (a symbolic link above all: ceg
    never removes through one) is left as it is, and its own name returned.
    """
    if not _is_real_dir(path):
        return [path.name] if os.path.lexists(path) else []
    from .layout import is_generation_name  # an update's folders (``gen-NNNNNN``)

    left = []
    for entry in list(path.iterdir()):
        if entry.name not in BUILT_NAMES and not is_generation_name(entry.name):
            left.append(entry.name)
        elif _is_real_dir(entry):
            shutil.rmtree(entry, ignore_errors=True)  # rmtree unlinks links, never follows
        else:
            entry.unlink(missing_ok=True)
    if not left:
        try:
            path.rmdir()
        except OSError:  # something appeared meanwhile: it stays
            return sorted(p.name for p in path.iterdir())
    return sorted(left)


def _is_real_dir(path: Path) -> bool:
    """A directory itself, not a symbolic link to one (``lstat``)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_real_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def holds_index(path: Path) -> bool:
    """A real directory holding a ceg index's ``meta.json`` (a real file, valid)."""
    meta = path / META_FILE
    return _is_real_dir(path) and _is_real_file(meta) and file_problem(meta) is None


def made_by_ceg(path: Path) -> bool:
    """Whether ``path`` is a real directory that carries ceg's mark.

    The mark is the ``owner`` file (a process id) that every work folder gets
    the moment it is made (``temp_dir``), or, once a build has finished, the
    ``meta.json`` of a ceg index (a whole index not yet in place, or the
    previous index moved aside by a swap).
    """
    if not _is_real_dir(path):
        return False
    if _is_real_file(path / OWNER_FILE) and _owner_of(path) is not None:
        return True
    return holds_index(path)


def sqlite_uri(path: Path, query: str = "") -> str:
    """An SQLite ``file:`` URI of ``path``, absolute and percent-encoded, with ``query``.

    Encoded because a folder named with ``#``, ``?`` or ``%`` would otherwise end the
    path early or be decoded into another name ("unable to open database"). Open it
    with ``uri=True``: a connection so opened also reads URIs in ``ATTACH``, whatever
    this SQLite was compiled with.
    """
    uri = Path(path).resolve().as_uri()
    return f"{uri}?{query}" if query else uri


def source_digest(path: Path) -> str:
    """sha256 of a file, or of a folder's sorted (relative path, file digest) list."""
    if path.is_dir():
        return folder_digests(path).digest
    return "sha256:" + file_sha256(path)


class FolderDigests(NamedTuple):
    """A folder read once: its ``source_digest``, each file's sha256 (hex) by relative
    POSIX path, and the bytes of those files (meta.json's ``size`` of the source)."""

    digest: str
    files: dict[str, str]
    size: int


def folder_digests(path: Path) -> FolderDigests:
    """Every regular file (or link to one) under ``path``, hidden ones too, linked
    folders not descended, digested in the order of their paths' parts (``sorted`` of
    ``Path``s, which the digests of indexes already built follow)."""
    found: list[tuple[tuple[str, ...], str]] = []
    size = 0
    for directory, _subdirs, files in os.walk(path):
        rel = Path(directory).relative_to(path).parts
        for name in files:
            full = os.path.join(directory, name)
            try:
                info = os.stat(full)
            except OSError:
                continue  # a dangling link, or gone: not a file (as is_file says)
            if stat.S_ISREG(info.st_mode):
                found.append(((*rel, name), full))
                size += info.st_size
    found.sort(key=lambda item: item[0])
    outer = hashlib.sha256()
    files_out: dict[str, str] = {}
    for parts, full in found:
        relative = "/".join(parts)
        digest = file_sha256(full)
        files_out[relative] = digest
        outer.update(relative.encode("utf-8") + b"\0")
        outer.update(digest.encode("ascii") + b"\n")
    return FolderDigests("sha256:" + outer.hexdigest(), files_out, size)


def file_sha256(path: Path | str) -> str:
    """The sha256 (hex) of a file's bytes."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


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
    pids: list[int | None] = [pid for _, kind, pid in leftovers(target) if kind == "building"]
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


def leftovers(target: Path) -> list[tuple[Path, str, int]]:
    """``(path, "building" or "old", pid)`` of each ``.NAME.building-PID`` and
    ``.NAME.old-PID`` entry beside ``target``, whatever it is (checked by the caller).

    Matched by exact prefix, not a glob: a name such as ``idx[12]`` must not
    take ``.idx1.old-7`` for its own.
    """
    prefix = f".{target.name}."
    try:
        entries = list(target.parent.iterdir())
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        kind, dash, pid = entry.name[len(prefix):].rpartition("-")
        if dash and kind in ("building", "old") and pid.isdigit():
            found.append((entry, kind, int(pid)))
    return sorted(found)


def clean_leftovers(target: Path) -> None:
    """Clean up what dead builds of ``target`` left beside it, touching only what
    ceg provably made (``made_by_ceg``): links, files and unmarked folders stay.

    A ``.NAME.old-PID`` holding a whole index while ``NAME`` is missing is a build
    that died between its two renames: that index goes back in place.
    """
    for stale, kind, pid in leftovers(target):
        if _pid_alive(pid) or not made_by_ceg(stale):
            continue
        if kind == "old" and not os.path.lexists(target) and holds_index(stale):
            os.rename(stale, target)
        else:
            remove_built(stale)  # anything else in it stays, and so does the folder


def temp_dir(target: Path, resumable: bool = False) -> Path:
    """A new, empty directory beside ``target`` to build it in, marked as ceg's (``claim``).

    ``resumable``: the build's stable ``work_path`` (anything an unfinished
    build left there is removed), else ``.NAME.building-PID``. Leftovers of
    dead builds are cleaned up first.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(target)
    if resumable:
        tmp = work_path(target)
    else:
        tmp = target.parent / f".{target.name}.building-{os.getpid()}"
    if os.path.lexists(tmp) and not _is_real_dir(tmp):
        raise UsageError(
            f"{tmp}: ceg builds {target} there, and it is a symbolic link or a file, not a "
            "folder ceg made; move it away and run the build again"
        )
    if _is_real_dir(tmp):
        mine = made_by_ceg(tmp)
        left = remove_built(tmp) if mine or not any(tmp.iterdir()) else \
            sorted(p.name for p in tmp.iterdir())
        if left:
            what = "files no build wrote" if mine else "files ceg cannot tell it wrote"
            raise UsageError(
                f"{tmp}: ceg builds {target} there, and it holds {what} "
                f"({', '.join(left[:3])}); move them away and run the build again"
            )
    tmp.mkdir()
    claim(tmp)
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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fsync_tree(path: Path) -> None:
    for file in path.iterdir():
        if file.is_dir():  # the lexical index's folder
            fsync_tree(file)
            continue
        with open(file, "rb") as fh:
            os.fsync(fh.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def swap_into_place(tmp: Path, target: Path) -> None:
    """Put the whole index in ``tmp`` at ``target`` (a resolved path: ``build_target``)."""
    # The mark goes: it says "a build works here", and an index holds no such file.
    # A kill from here on leaves a whole index, which its meta.json marks.
    (tmp / OWNER_FILE).unlink(missing_ok=True)
    fsync_tree(tmp)
    if not os.path.lexists(target):
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
    if os.path.lexists(old) and (not made_by_ceg(old) or remove_built(old)):
        raise UsageError(f"{old}: ceg moves the previous index of {target} there, and "
                         "something else is in the way; move it away and run the build again")
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


def resolve_target(target: Path) -> Path:
    """``--index`` as the real directory it names: every symbolic link on the way
    followed, once, so that a build works, locks and swaps beside the real target
    and never replaces a link (keeping a large index on another disk through a
    link is common)."""
    try:
        return Path(target).resolve()
    except (RuntimeError, OSError) as exc:  # a loop of links (RuntimeError before 3.13)
        raise UsageError(f"--index {target}: cannot be resolved ({exc}); name the index's "
                         "real directory") from None


class BuildTarget:
    """One build's hold on an index directory, from ``build_target``.

    ``given`` is ``--index`` as the user wrote it (for messages), ``path`` the
    real directory it resolves to, where the index is read and put. The work
    folders (``new_work``) are made beside ``path``; those not put in place
    (``swap_in``) or kept for ``--resume`` (``keep``) are removed when the
    ``with`` block ends, and only those: ceg's own, real directories.
    """

    def __init__(self, given: Path, path: Path) -> None:
        self.given = given
        self.path = path
        self._made: list[Path] = []
        self._kept: set[Path] = set()

    @property
    def work(self) -> Path:
        """The resumable work folder (``.NAME.building``), whether or not it exists."""
        return work_path(self.path)

    def new_work(self, resumable: bool = False) -> Path:
        """A new, empty work folder beside the target (``temp_dir``), owned by this build."""
        work = temp_dir(self.path, resumable)
        self._made.append(work)
        return work

    def swap_in(self, work: Path) -> None:
        """Put the whole index in ``work`` in place (``swap_into_place``)."""
        swap_into_place(work, self.path)

    def keep(self, work: Path) -> None:
        """Leave ``work`` behind when the build ends (committed work for ``--resume``)."""
        self._kept.add(work)

    def discard(self, work: Path) -> None:
        """Remove ``work`` now, if this build made it or it carries ceg's mark
        (``made_by_ceg``); a link or any other file is left."""
        if (work in self._made and _is_real_dir(work)) or made_by_ceg(work):
            remove_built(work)

    def close(self) -> None:
        for work in self._made:
            if work not in self._kept:
                self.discard(work)


@contextmanager
def build_target(target: Path) -> Iterator[BuildTarget]:
    """Hold the index directory ``target`` for one build, append or update.

    Resolves ``target`` once (``resolve_target``), takes the build lock beside
    the real directory, so that two builds through a link and its target are
    one lock's business, and on leaving removes this build's work folders that
    were neither put in place nor kept.

    Every writer of an index goes through it (a build, an ``--append``, an update)::

        with build_target(index) as site:
            old = site.path                 # read the current index here (not a link)
            work = site.new_work()          # beside it, empty, marked as ceg's
            ...                             # write the whole new index into work
            site.swap_in(work)              # in place at once; the previous one removed

    A failure before ``swap_in`` leaves the index as it was and removes ``work``
    (``site.keep(work)`` leaves it, for a resumable build).
    """
    site = BuildTarget(Path(target), resolve_target(target))
    with build_lock(site.path):
        try:
            yield site
        finally:
            site.close()
