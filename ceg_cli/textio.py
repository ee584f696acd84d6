"""Reading JSON-lines files line by line with bounded memory.

Shared by the readers of responses (``check.responses``) and of JSONL corpora
(``corpus.jsonl``): a line too long to be a record is skipped, not held.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

__all__ = ["MAX_LINE_BYTES", "capped_lines"]

#: A line longer than this is refused without being held in memory: a binary
#: file or a dump passed by mistake must not be read as one enormous line.
MAX_LINE_BYTES = 32 * 1024 * 1024


def capped_lines(fh: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, line)`` for each line; ``None`` for a line longer than
    ``MAX_LINE_BYTES``, whose rest is skipped without being held in memory."""
    number = 0
    while raw := fh.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield number, None
        else:
            yield number, raw
