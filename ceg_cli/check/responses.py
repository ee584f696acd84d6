"""Reading a responses file: one JSON object a line, bad lines kept as errors.

A bad line (not UTF-8, not JSON, not an object, no response, a wrong type)
becomes a ``ResponseInput`` with ``error`` set, naming the file, line and
field, and every other line is still read: nothing is lost silently.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..corpus.contexts import CONTEXT_FIELDS, ContextsError, find_contexts
from ..corpus.contexts import json_type_name as _type_name
from ..errors import InputError
from ..textio import MAX_LINE_BYTES, capped_lines
from ..types import ResponseInput

#: A response longer than this is refused as a bad line. 200,000 characters
#: (some 2,000 sentences) is more than a chatbot answers at once; a 5 MB line
#: would be 50,000 segments or more, tens of minutes of embedding on a CPU.
MAX_RESPONSE_CHARS = 200_000
#: What a record may carry of its input's fields, as JSON, apart from the id,
#: response and question: larger fields are left out, largest first, with a
#: warning. Metadata, a reference answer or retrieved contexts fit easily.
MAX_CARRIED_BYTES = 1024 * 1024
# JSON can escape a lone UTF-16 surrogate ("\ud800"); Python decodes it into
# a str that cannot be encoded as UTF-8, which would crash the run later.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class FieldNames:
    response: str = "response"
    #: Tried in order; the first present names the question.
    question: tuple[str, ...] = ("question", "prompt")
    #: Then these, RAGAS's and DeepEval's names, read only when they hold a
    #: string: a field named ``input`` may well be something else.
    question_alternatives: tuple[str, ...] = ("user_input", "input")
    #: Tried in order; the first present holds the record's own evidence.
    contexts: tuple[str, ...] = CONTEXT_FIELDS
    #: Read when ``response`` is absent: DeepEval's name for the answer.
    response_alternatives: tuple[str, ...] = ("actual_output",)

    def response_in(self, obj: dict[str, Any]) -> str:
        """The field of ``obj`` that holds its response (``response`` if none does)."""
        if self.response in obj:
            return self.response
        return next((name for name in self.response_alternatives if name in obj), self.response)


def parse_line(
    raw: bytes, line: int, source: str, names: FieldNames = FieldNames()
) -> ResponseInput:
    """Turn one raw line into a ``ResponseInput`` (with ``error`` set if it is bad).

    What cannot be written back as standard JSON is repaired in the fields the
    record carries, with a warning naming the field: a field over
    ``MAX_CARRIED_BYTES`` is dropped, ``NaN`` and ``Infinity`` become strings,
    and an unpaired surrogate becomes U+FFFD (the line is then an error).
    """
    where = f"{source}:{line}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ResponseInput(line, line, error=f"{where}: not valid UTF-8 (byte {exc.start})")
    non_finite: list[str] = []
    try:
        obj = _loads(text, non_finite)
    except json.JSONDecodeError as exc:
        return ResponseInput(
            line, line, error=f"{where}: not valid JSON ({_json_problem(exc)}, column {exc.colno})"
        )
    except RecursionError:
        return ResponseInput(line, line, error=f"{where}: JSON nested too deeply")
    if not isinstance(obj, dict):
        return ResponseInput(
            line, line, error=f"{where}: expected a JSON object, got {_type_name(obj)}"
        )
    notes: list[str] = []
    fields = _bounded(obj, len(raw), names, where, notes)
    broken: list[str] = []
    if non_finite or _SURROGATE_ESCAPE.search(text):
        try:
            fields = _repaired(fields, where, notes, broken)
        except RecursionError:
            return ResponseInput(line, line, error=f"{where}: JSON nested too deeply")
    rid, response, question, error = _read_fields(obj, line, where, names)
    if broken:
        rid = _valid_id(fields.get("id", line), line)
        fields_named = ", ".join(f"'{name}'" for name in broken)
        error = (
            f"{where}: field{'s' if len(broken) > 1 else ''} {fields_named} "
            f"hold{'' if len(broken) > 1 else 's'} an unpaired surrogate escape (such as "
            "\\ud800), which is not Unicode text; kept with U+FFFD in its place"
        )
    contexts_field, contexts = None, None
    if error is None:
        try:
            contexts_field, contexts = find_contexts(obj, names.contexts)
        except ContextsError as exc:
            error = f"{where}: {exc}"
    if error is not None:
        return ResponseInput(rid, line, fields=fields, error=error, warnings=tuple(notes))
    read = {"response": names.response_in(obj)}
    asked = next((key for key in names.question if obj.get(key) is not None), None)
    if asked is None:
        asked = next(
            (key for key in names.question_alternatives if isinstance(obj.get(key), str)), None
        )
    if asked is not None:
        read["question"] = asked
    if contexts_field is not None:
        read["contexts"] = contexts_field
    return ResponseInput(
        rid, line, response, question, fields, warnings=tuple(notes), contexts=contexts, read=read
    )


def _read_fields(
    obj: dict[str, Any], line: int, where: str, names: FieldNames
) -> tuple[Any, str, str | None, str | None]:
    """The id, response and question ceg reads from ``obj``, or why they cannot be read."""
    rid: Any = obj.get("id", line)
    if _valid_id(rid, None) is None:
        return line, "", None, (
            f"{where}: field 'id' must be a string or an integer, got {_type_name(rid)}"
        )
    key = names.response_in(obj)
    if key not in obj:
        return rid, "", None, f"{where}: field '{key}' is missing"
    response = obj[key]
    if not isinstance(response, str):
        return rid, "", None, (
            f"{where}: field '{key}' must be a string, got {_type_name(response)}"
        )
    if not response.strip():
        return rid, "", None, f"{where}: field '{key}' is empty"
    if len(response) > MAX_RESPONSE_CHARS:
        return rid, "", None, (
            f"{where}: field '{key}' is {len(response):,} characters long; "
            f"ceg checks responses of up to {MAX_RESPONSE_CHARS:,}"
        )
    for key in names.question:
        value = obj.get(key)
        if value is not None:
            if not isinstance(value, str):
                return rid, "", None, (
                    f"{where}: field '{key}' must be a string, got {_type_name(value)}"
                )
            return rid, response, value or None, None
    for key in names.question_alternatives:
        value = obj.get(key)
        if isinstance(value, str):
            return rid, response, value or None, None
    return rid, response, None, None


def _valid_id(rid: Any, default: Any) -> Any:
    return default if isinstance(rid, bool) or not isinstance(rid, (str, int)) else rid


def _loads(text: str, non_finite: list[str]) -> Any:
    """``json.loads``, noting in ``non_finite`` each number JSON cannot hold.

    Python reads ``NaN``, ``Infinity`` and ``1e999`` (too large for a float) as
    numbers, and would write them back as bare ``NaN``/``Infinity``, which
    strict JSON parsers (``JSON.parse``) refuse.
    """

    def constant(name: str) -> float:
        non_finite.append(name)
        return float(name)

    def number(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            non_finite.append(literal)
        return value

    return json.loads(text, parse_constant=constant, parse_float=number)


def _json_problem(exc: json.JSONDecodeError) -> str:
    # Some messages end in "at", meant to be followed by a position:
    # "Invalid control character at".
    return exc.msg.removesuffix(" at")


def _field_name(key: str) -> str:
    return json.dumps(key)[1:-1]  # escaped: the key may hold anything


def _bounded(
    obj: dict[str, Any], size: int, names: FieldNames, where: str, notes: list[str]
) -> dict[str, Any]:
    """``obj`` without the largest fields, until what it carries fits ``MAX_CARRIED_BYTES``.

    Parsed JSON of many small values takes some twenty times its size in
    memory, and records are held a batch at a time: this keeps memory flat
    whatever the lines carry. The id, response and question, when they are
    strings, are not counted (they are checked, and held once).
    """
    if size <= MAX_CARRIED_BYTES:
        return obj
    read = {
        "id", names.response, *names.response_alternatives, *names.question,
        *names.question_alternatives,
    }
    sizes = {
        key: _json_size(value)
        for key, value in obj.items()
        if not (key in read and isinstance(value, (str, int)))
    }
    total = sum(sizes.values())
    dropped = set()
    for key in sorted(sizes, key=sizes.__getitem__, reverse=True):
        if total <= MAX_CARRIED_BYTES:
            break
        dropped.add(key)
        total -= sizes[key]
        notes.append(
            f"{where}: field '{_field_name(key)}' is {sizes[key]:,} bytes of JSON; a record "
            f"carries at most {MAX_CARRIED_BYTES:,} bytes of input fields, so it was left out"
        )
    return {key: value for key, value in obj.items() if key not in dropped}


def _json_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value) + 2
    try:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    except RecursionError:
        return MAX_LINE_BYTES


def _repaired(
    fields: dict[str, Any], where: str, notes: list[str], broken: list[str]
) -> dict[str, Any]:
    """``fields`` with non-finite numbers as strings and lone surrogates as U+FFFD.

    Each field holding a non-finite number gets a warning in ``notes``; each
    holding a lone surrogate (in its name or value) is named in ``broken``.
    """
    out: dict[str, Any] = {}
    for key, value in fields.items():
        found: set[str] = set()
        clean_key = _repair(key, found)
        out[clean_key] = _repair(value, found)
        name = _field_name(key)
        if "surrogate" in found:
            broken.append(name)
        if "number" in found:
            notes.append(
                f"{where}: field '{name}' holds NaN or Infinity, which JSON has no number for; "
                "written as a string"
            )
    return out


def _repair(value: Any, found: set[str]) -> Any:
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value
        found.add("surrogate")
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, float) and not math.isfinite(value):
        found.add("number")
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [_repair(item, found) for item in value]
    if isinstance(value, dict):
        return {_repair(k, found): _repair(v, found) for k, v in value.items()}
    return value


def read_responses(path: str | Path, names: FieldNames = FieldNames()) -> Iterator[ResponseInput]:
    """Stream the responses of ``path`` (``-`` for stdin), blank lines skipped.

    A missing or unreadable file raises ``InputError`` at once, not on the
    first iteration, so a caller can fail before it touches its output.
    """
    if str(path) == "-":
        # Python sets sys.stdin to None when the process starts with it closed.
        stdin = getattr(sys.stdin, "buffer", None)
        if stdin is None:
            raise InputError("-: standard input is closed; pipe the responses in, or name a file")
        return _read(stdin, "<stdin>", names)
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
    for number, raw in capped_lines(fh):
        if raw is None:
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
