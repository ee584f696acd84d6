"""Resuming a run: the records already written must be the input's first lines."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..report.records import from_record
from ..types import CheckedResponse, ResponseInput


def _made_from(record: dict[str, Any]) -> tuple[Any, ...]:
    """What an output record says of its input line: number, id, readable, response."""
    error = record.get("label") == "error"
    return (record.get("line"), record.get("id"), error, _digest(record.get("response")))


def _input_made_from(item: ResponseInput) -> tuple[Any, ...]:
    error = item.error is not None
    return (item.line, item.id, error, _digest(None if error else item.response))


def _digest(text: str | None) -> bytes | None:
    if text is None:
        return None
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).digest()


def _finished_record(record: dict[str, Any], out: Path, number: int) -> CheckedResponse:
    try:
        return from_record(record)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise InputError(
            f"{out}: record {number} is not a complete ceg output record; "
            "refusing to resume into a file ceg did not write"
        ) from None


def _skip_finished(
    items: Iterator[ResponseInput], finished: list[tuple[Any, ...]], out: Path, responses: str
) -> None:
    """Consume the input lines ``finished`` holds records of; refuse any that differ."""
    source = "standard input" if responses == "-" else responses
    start_over = f"to start over, run without --resume (it replaces {out})"
    for number, made_from in enumerate(finished, 1):
        item = next(items, None)
        if item is None:
            raise InputError(
                f"--resume: {out} holds {len(finished)} records but {source} has only "
                f"{number - 1} response lines: it was made from another file; {start_over}"
            )
        if _input_made_from(item) != made_from:
            line, rid = made_from[0], made_from[1]
            there = f"line {item.line}, id {item.id!r}"
            if (item.line, item.id) == (line, rid):
                there += ", with another response"
            raise InputError(
                f"--resume: {out} was not made from {source}: its record {number} is "
                f"line {line}, id {rid!r}, where {source} has {there}; {start_over}"
            )
