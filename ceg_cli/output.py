"""Writing output records as they are finished, and resuming an interrupted run.

Each record is one line, written and flushed as soon as its response is
checked, so an interrupted run loses at most the line being written. A resumed
run first drops a torn last line, then skips the ids already written, and
appends the rest in input order: the finished file equals what an
uninterrupted run writes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .errors import CegError, InputError

#: How every line ``RecordWriter`` writes for ``report.to_record`` begins.
_RECORD_START = b'{"schema_version": '


class OutputError(CegError):
    """The output cannot be written (disk full, permissions): a runtime failure."""


def read_finished(path: Path) -> Iterator[dict[str, Any]]:
    """The complete records already in ``path``; a torn last line is cut off."""
    if not path.exists():
        return
    good_end = 0
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                # The line being written when the run was interrupted. Every
                # record ceg writes starts with its schema_version, so a tail
                # that does not is someone else's data: never cut it off.
                if not (raw.startswith(_RECORD_START) or _RECORD_START.startswith(raw)):
                    raise InputError(
                        f"{path}: last line {raw[:40]!r}... is not a ceg output record; "
                        "refusing to resume into a file ceg did not write"
                    )
                break
            try:
                record = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise InputError(
                    f"{path}: line {raw[:40]!r}... is not a ceg output record; "
                    "refusing to resume into a file ceg did not write"
                ) from None
            if not isinstance(record, dict) or "schema_version" not in record:
                raise InputError(
                    f"{path}: not a ceg output file (no schema_version); refusing to resume"
                )
            good_end = fh.tell()
            yield record
    if good_end != path.stat().st_size:
        with open(path, "r+b") as fh:
            fh.truncate(good_end)


class RecordWriter:
    """Appends JSON records to a file (or stdout), one flushed line each."""

    def __init__(self, path: Path | None, *, append: bool = False) -> None:
        self.path = path
        self._fh: IO[str]
        if path is None:
            self._fh = sys.stdout
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
            failed = exc
        try:
            # After a failed write (disk full) the buffer still holds the line,
            # and closing retries it: that must end in this one clear error too.
            self._fh.close()
        except OSError as exc:
            failed = failed or exc
        if failed is not None:
            raise OutputError(
                f"{self.path}: cannot write ({failed.strerror}); the output is incomplete"
            ) from None
