"""Reading a responses file: one JSON object a line, bad lines kept as errors.

A bad line (not UTF-8, not JSON, not an object, no response, a wrong type)
becomes a ``ResponseInput`` with ``error`` set, naming the file, line and
field, and every other line is still read: nothing is lost silently.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .errors import InputError
from .pipeline import ResponseInput


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
    """Stream the responses of ``path`` (``-`` for stdin), blank lines skipped."""
    if str(path) == "-":
        yield from _read(sys.stdin.buffer, "<stdin>", names)
        return
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not a responses file (JSONL)")
    try:
        fh = open(p, "rb")
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror})") from None
    with fh:
        yield from _read(fh, str(p), names)


def _read(fh: IO[bytes], source: str, names: FieldNames) -> Iterator[ResponseInput]:
    for number, raw in enumerate(fh, 1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # a UTF-8 byte order mark, as some editors write
        raw = raw.rstrip(b"\r\n")
        if not raw.strip():
            continue
        yield parse_line(raw, number, source, names)
