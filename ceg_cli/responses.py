"""Reading a responses file: one JSON object a line, bad lines kept as errors.

A bad line (not UTF-8, not JSON, not an object, no response, a wrong type)
becomes a ``ResponseInput`` with ``error`` set, naming the file, line and
field, and every other line is still read: nothing is lost silently.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .errors import InputError
from .pipeline import ResponseInput

#: A response longer than this is refused as a bad line. 200,000 characters
#: (some 2,000 sentences) is more than a chatbot answers at once; a 5 MB line
#: would be 50,000 segments or more, tens of minutes of embedding on a CPU.
MAX_RESPONSE_CHARS = 200_000
#: A line longer than this is refused without being held in memory: a binary
#: file or a dump passed by mistake must not be read as one enormous line.
MAX_LINE_BYTES = 32 * 1024 * 1024
# JSON can escape a lone UTF-16 surrogate ("\ud800"); Python decodes it into
# a str that cannot be encoded as UTF-8, which would crash the run later.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


@dataclass(frozen=True)
class FieldNames:
    response: str = "response"
    #: Tried in order; the first present names the question.
    question: tuple[str, ...] = ("question", "prompt")


def _type_name(value: Any) -> str:
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        type(None): "null",
        int: "number",
        float: "number",
    }.get(type(value), type(value).__name__)


def parse_line(
    raw: bytes, line: int, source: str, names: FieldNames = FieldNames()
) -> ResponseInput:
    """Turn one raw line into a ``ResponseInput`` (with ``error`` set if it is bad)."""
    where = f"{source}:{line}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ResponseInput(line, line, error=f"{where}: not valid UTF-8 (byte {exc.start})")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return ResponseInput(
            line, line, error=f"{where}: not valid JSON ({exc.msg}, column {exc.colno})"
        )
    except RecursionError:
        return ResponseInput(line, line, error=f"{where}: JSON nested too deeply")
    if not isinstance(obj, dict):
        return ResponseInput(
            line, line, error=f"{where}: expected a JSON object, got {_type_name(obj)}"
        )
    if _SURROGATE_ESCAPE.search(text) and (bad := _unpaired_surrogate(obj)) is not None:
        return ResponseInput(
            line,
            line,
            error=f"{where}: field '{bad}' holds an unpaired surrogate escape "
            "(such as \\ud800), which is not Unicode text",
        )
    rid: Any = obj.get("id", line)
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        return ResponseInput(
            line,
            line,
            fields=obj,
            error=f"{where}: field 'id' must be a string or an integer, got {_type_name(rid)}",
        )
    if names.response not in obj:
        return ResponseInput(
            rid, line, fields=obj, error=f"{where}: field '{names.response}' is missing"
        )
    response = obj[names.response]
    if not isinstance(response, str):
        return ResponseInput(
            rid,
            line,
            fields=obj,
            error=f"{where}: field '{names.response}' must be a string, got {_type_name(response)}",
        )
    if not response.strip():
        return ResponseInput(
            rid, line, fields=obj, error=f"{where}: field '{names.response}' is empty"
        )
    if len(response) > MAX_RESPONSE_CHARS:
        return ResponseInput(
            rid,
            line,
            fields=obj,
            error=f"{where}: field '{names.response}' is {len(response):,} characters long; "
            f"ceg checks responses of up to {MAX_RESPONSE_CHARS:,}",
        )
    question = None
    for key in names.question:
        if key in obj and obj[key] is not None:
            if not isinstance(obj[key], str):
                return ResponseInput(
                    rid,
                    line,
                    fields=obj,
                    error=f"{where}: field '{key}' must be a string, got {_type_name(obj[key])}",
                )
            question = obj[key]
            break
    return ResponseInput(rid, line, response, question or None, obj)


def read_responses(path: str | Path, names: FieldNames = FieldNames()) -> Iterator[ResponseInput]:
    """Stream the responses of ``path`` (``-`` for stdin), blank lines skipped.

    A missing or unreadable file raises ``InputError`` at once, not on the
    first iteration, so a caller can fail before it touches its output.
    """
    if str(path) == "-":
        return _read(sys.stdin.buffer, "<stdin>", names)
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not a responses file (JSONL)")
    try:
        fh = open(p, "rb")
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror})") from None
    return _read_and_close(fh, str(p), names)


def _read_and_close(fh: IO[bytes], source: str, names: FieldNames) -> Iterator[ResponseInput]:
    with fh:
        yield from _read(fh, source, names)


def _read(fh: IO[bytes], source: str, names: FieldNames) -> Iterator[ResponseInput]:
    number = 0
    while raw := fh.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass  # skip the rest of the line without holding it
            yield ResponseInput(
                number,
                number,
                error=f"{source}:{number}: line is longer than {MAX_LINE_BYTES:,} bytes; skipped",
            )
            continue
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # a UTF-8 byte order mark, as some editors write
        raw = raw.rstrip(b"\r\n")
        if not raw.strip():
            continue
        yield parse_line(raw, number, source, names)


def _unpaired_surrogate(obj: dict[str, Any]) -> str | None:
    """The first field whose name or value holds an unpaired surrogate, if any."""
    for key, value in obj.items():
        try:
            json.dumps([key, value], ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(key)[1:-1]  # escaped: the key may hold anything
    return None
