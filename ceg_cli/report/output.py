"""Writing output records as they are finished, and resuming an interrupted run.

Each record is one line, written and flushed as soon as its response is
checked, so an interrupted run loses at most the line being written. A resumed
run checks that the finished records are the input's first lines, drops a torn
last line, and appends the rest in input order: the finished file equals what
an uninterrupted run writes. No output may be the input or another output
(``refuse_same_files``), nor a file of an index (``refuse_index_files``).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from ..errors import CegError, InputError, UsageError

#: How every line ``RecordWriter`` writes for ``report.to_record`` begins.
_RECORD_START = b'{"schema_version": '


class OutputError(CegError):
    """The output cannot be written (disk full, permissions): a runtime failure."""


def refuse_same_files(named: Sequence[tuple[str, str | Path | None]]) -> None:
    """Refuse two of ``named`` (an option, its path) that are one file, before any is written.

    The first is the input (``-``: standard input); a path of ``None`` is
    standard output. Files are compared by identity (device and inode), so a
    hard link or a symlink to the input is caught as surely as its own name;
    paths that do not exist yet by where they resolve. Devices and pipes
    (``/dev/null``) may be named more than once.
    """
    seen: dict[Any, tuple[str, str]] = {}
    for number, (option, path) in enumerate(named):
        identity = _identity(path, stdin=number == 0)
        if identity is None:
            continue
        shown = "" if path is None else str(path)
        if identity in seen:
            first, first_path = seen[identity]
            who = f"{option} {shown}".rstrip()
            if first == named[0][0]:
                also = "" if shown == first_path else f" ({first_path or 'standard input'})"
                raise UsageError(f"{who}: is the {first} itself{also}; name another file")
            other = f"{first} {first_path}".rstrip()
            raise UsageError(f"{who}: is the same file as {other}; name another file")
        seen[identity] = (option, "" if path is None or shown == "-" else shown)


#: What marks a folder as a ceg index: its meta.json beside one of its data files
#: (names from ``index.layout``, repeated here so that writing output loads no index code).
_INDEX_META = "meta.json"
_INDEX_DATA = ("vectors.faiss", "chunks.sqlite")


def refuse_index_files(
    outputs: Sequence[tuple[str, str | Path | None]], index: str | Path | None = None
) -> None:
    """Refuse an output that is a file of ``index`` (the index in use) or of any ceg index.

    Writing over ``meta.json`` or ``vectors.faiss`` leaves an index every
    later command calls unreadable, and a new file in an index folder makes
    the next build refuse it: so an output may not lie inside ``index`` (as
    it resolves, symlinks followed, whether it exists yet or not), nor be one
    of its files under another name (a hard link: device and inode), nor lie
    in any folder that holds a ceg index, nor be, by its own content, any
    index's file (a hard link to another index's file, whose other names no
    path leads to: ``indexfiles.index_file_kind``). ``outputs`` are (option,
    path); ``None`` (standard output) and ``-`` are skipped.
    """
    from .indexfiles import index_file_kind

    index_root = os.path.realpath(index) if index is not None else None
    index_files = _file_identities(Path(index)) if index is not None else {}
    for option, path in outputs:
        if path is None or str(path) == "-":
            continue
        where = os.path.realpath(path)
        for folder in _ancestors(where):
            if folder == index_root or _holds_index(folder):
                owner = index if folder == index_root else _near(folder)
                raise UsageError(
                    f"{option} {path}: lies inside the index {owner}; ceg never writes "
                    "into an index: name a file outside it"
                )
        identity = _identity(path, stdin=False)
        if identity is not None and identity in index_files:
            raise UsageError(
                f"{option} {path}: is the index's {index_files[identity]} under another "
                "name; name another file"
            )
        kind = index_file_kind(path)
        if kind is not None:
            raise UsageError(
                f"{option} {path}: is a ceg index's {kind}, by its content (a hard link to "
                "it, or a copy); ceg never writes over an index's file: name another file"
            )


def _near(folder: str) -> str:
    """``folder`` relative to the working folder when it lies below it."""
    relative = os.path.relpath(folder)
    return folder if relative.startswith("..") else relative


def _ancestors(path: str) -> list[str]:
    """``path`` and every folder above it, ``path`` first."""
    found = [path]
    while (parent := os.path.dirname(found[-1])) != found[-1]:
        found.append(parent)
    return found


def _holds_index(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, _INDEX_META)) and any(
        os.path.exists(os.path.join(folder, name)) for name in _INDEX_DATA
    )


def _file_identities(index: Path) -> dict[Any, str]:
    """(device, inode) of the index folder's files and its subfolders' (the lexical
    part), to their names there. Two levels only: a wrong ``--index /`` is not walked."""
    found: dict[Any, str] = {}
    for name in _listing(str(index)):
        full = os.path.join(index, name)
        names = [name]
        if os.path.isdir(full):
            names = [os.path.join(name, inner) for inner in _listing(full)]
        for relative in names:
            identity = _identity(os.path.join(index, relative), stdin=False)
            if identity is not None and identity[0] != "path":
                found[identity] = relative
    return found


def _listing(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []  # an index that cannot be listed fails where it is opened


def _identity(path: str | Path | None, *, stdin: bool) -> Any:
    """What makes a file itself: device and inode of a regular file, else None."""
    if path is None or (stdin and str(path) == "-"):
        stream = sys.stdin if stdin else sys.stdout
        try:
            info = os.fstat(stream.fileno())
        except (AttributeError, OSError, ValueError):
            return None  # closed, or not a real file (a test's captured stream)
    else:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return ("path", os.path.realpath(path))
        except OSError:
            return None
    return (info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) else None


def read_finished(path: Path, *, cut: bool = True) -> Iterator[dict[str, Any]]:
    """The complete records already in ``path``; a torn last line is cut off.

    With ``cut=False`` the file is left as it is; ``cut_torn_tail`` cuts it later.
    """
    if not path.exists():
        return
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            if not raw.endswith(b"\n"):
                # The line being written when the run was interrupted. Every
                # record ceg writes starts with its schema_version, so a tail
                # that does not is someone else's data: never cut it off.
                if not (raw.startswith(_RECORD_START) or _RECORD_START.startswith(raw)):
                    raise InputError(
                        f"{path}: last line ({number}: {_quote(raw)}) is not a ceg output "
                        "record; refusing to resume into a file ceg did not write"
                    )
                break
            try:
                record = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise InputError(
                    f"{path}: line {number} ({_quote(raw)}) is not a ceg output record; "
                    "refusing to resume into a file ceg did not write"
                ) from None
            if not isinstance(record, dict) or "schema_version" not in record:
                raise InputError(
                    f"{path}: line {number} is not a ceg output record (no schema_version); "
                    "refusing to resume into a file ceg did not write"
                )
            yield record
    if cut:
        cut_torn_tail(path)


def cut_torn_tail(path: Path) -> None:
    """Cut ``path`` after its last complete line (what ``read_finished`` cuts)."""
    if not path.exists():
        return
    with open(path, "rb") as fh:
        end = fh.seek(0, os.SEEK_END)
        at = end
        while at > 0:
            step = min(at, 1 << 16)
            fh.seek(at - step)
            newline = fh.read(step).rfind(b"\n")
            if newline >= 0:
                at = at - step + newline + 1
                break
            at -= step
    if at != end:
        _truncate(path, at)


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)


def _quote(raw: bytes, limit: int = 40) -> str:
    """The start of a raw line as text, for a message: ``hello world...``."""
    text = raw[:limit].decode("utf-8", "replace").rstrip("\r\n")
    text = "".join(c if c.isprintable() else " " for c in text)
    return f"'{text}...'" if len(raw) > limit else f"'{text}'"


#: Where records meant for standard output go while ``records_only_on_stdout`` holds
#: it (None: ``sys.stdout``).
_RECORDS_STREAM: IO[str] | None = None


@contextmanager
def records_only_on_stdout(quiet: bool = False) -> Iterator[None]:
    """Standard output for ceg's records alone, whatever else the process runs.

    Ray's driver threads and its C++ core write their own lines ("(raylet) Task ...
    failed. There are 3 retries remaining") to file descriptor 1, where they land
    between the records of ``ceg check --engine ray > out.jsonl``. Inside this block fd 1
    is the process's stderr (``/dev/null`` under ``--quiet``, whose stderr holds ceg's
    own lines alone), and records are written to a duplicate of the real stdout; at its
    end fd 1 is stdout again.
    """
    global _RECORDS_STREAM
    if _RECORDS_STREAM is not None:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    stream = os.fdopen(saved, "w", encoding="utf-8", closefd=False)
    if quiet:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    else:
        os.dup2(2, 1)
    _RECORDS_STREAM = stream
    try:
        yield
    finally:
        _RECORDS_STREAM = None
        try:
            stream.flush()
        except OSError:
            pass  # a reader gone (`| head`): nothing more can reach it
        try:
            sys.stdout.flush()
        except OSError:
            pass
        os.dup2(saved, 1)
        os.close(saved)


class RecordWriter:
    """Appends JSON records to a file (or stdout), one flushed line each."""

    def __init__(self, path: Path | None, *, append: bool = False) -> None:
        self.path = path
        self._failed = False  # a write failed, and said so
        self._fh: IO[str]
        if path is None:
            self._fh = _RECORDS_STREAM if _RECORDS_STREAM is not None else sys.stdout
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(path, "a" if append else "w", encoding="utf-8")
            except OSError as exc:
                raise OutputError(f"{path}: cannot write ({exc.strerror})") from None

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        try:
            self._fh.write(line)
            self._fh.flush()
        except OSError as exc:
            if self.path is None and isinstance(exc, BrokenPipeError):
                raise  # `ceg check ... | head`: the reader has gone; the CLI ends quietly
            self._failed = True
            where = self.path or "stdout"
            raise OutputError(
                f"{where}: cannot write ({exc.strerror}); the output is incomplete"
            ) from None

    def close(self) -> None:
        if self.path is None:
            return
        failed: OSError | None = None
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
        except OSError as exc:
            # A device or pipe (/dev/full, /dev/stdout) cannot be synced: EINVAL says
            # so, and is no failure of the output.
            if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
                failed = exc
        try:
            # After a failed write (disk full) the buffer still holds the line,
            # and closing retries it: that must end in this one clear error too.
            self._fh.close()
        except OSError as exc:
            failed = failed or exc
        if failed is not None and not self._failed:
            # A failed write has already said so, in the same words; its error is the one
            # the run ends with (a second here would replace it, naming another errno).
            raise OutputError(
                f"{self.path}: cannot write ({failed.strerror}); the output is incomplete"
            ) from None
