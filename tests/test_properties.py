"""Property-based tests (hypothesis): arbitrary input never crashes the readers.

- Any text through ``segment_response``: no exception, every segment's offsets
  inside the response, ``text[start:end] == segment.text``, segments in order,
  never overlapping, no surrounding whitespace.
- Any JSON value (and any bytes) through ``parse_line``: no exception; either
  a response that can be checked and written back as UTF-8, or an error
  naming the file and line.
- Any cut of an output file: ``read_finished`` keeps exactly the complete
  records before the cut.

``CEG_HYPOTHESIS_EXAMPLES`` sets the examples per property (default 200; the
reliability benchmark runs more). Each test records its count for the table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ceg_cli.check.responses import parse_line
from ceg_cli.check.segment import has_claim, segment_response
from ceg_cli.report.output import read_finished

EXAMPLES = int(os.environ.get("CEG_HYPOTHESIS_EXAMPLES", "200"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,  # the first call loads Punkt; the shared machine's load varies
    derandomize=True,  # the same examples on every run: CI stays deterministic
    database=None,  # and no failure replayed from an earlier local run
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture
def row(record_property: Callable[[str, object], None]) -> Callable[[str, int, str], None]:
    """Record one row of the reliability table (``benchmarks/check/reliability.py``)."""

    def record(what: str, tries: int, outcome: str) -> None:
        record_property("reliability", {"what": what, "tries": tries, "outcome": outcome})

    return record


class Counter:
    def __init__(self) -> None:
        self.n = 0


# -- segmentation ----------------------------------------------------------------

# Characters that steer the segmenter: every line break str.splitlines knows,
# list markers, sentence ends, abbreviations, digits, odd spaces, combining marks.
_STEERING = list("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029 \t\u00a0\u3000.?!;:-*+•#()1234567890aAzZ")
_STEERING += ["Dr.", "e.g.", "U.S.", "1.", "(a)", "- ", "\r\n", "...", "\u0301", "🙂", "ǅ"]
steering_text = st.lists(
    st.one_of(st.sampled_from(_STEERING), st.text(max_size=8)), max_size=60
).map("".join)
any_text = st.one_of(st.text(max_size=400), steering_text)


def assert_well_formed_segments(text: str) -> None:
    segments = segment_response(text)
    previous_end = 0
    for i, seg in enumerate(segments):
        assert seg.index == i
        assert previous_end <= seg.start < seg.end <= len(text), (seg, len(text))
        assert text[seg.start : seg.end] == seg.text
        assert seg.text == seg.text.strip()
        previous_end = seg.end
        has_claim(seg.text)  # a bool for any segment, never an exception


def test_segment_response_on_arbitrary_text(row: Callable[..., None]) -> None:
    """Arbitrary text through segment_response: offsets always inside the response."""
    count = Counter()

    @PROPERTY
    @given(any_text)
    def prop(text: str) -> None:
        count.n += 1
        assert_well_formed_segments(text)

    prop()
    row("segment_response on arbitrary text (hypothesis)", count.n,
        "no exception; every segment inside the response, text[start:end] == segment text")


# -- reading response lines --------------------------------------------------------

# Strings with unpaired surrogates can only come from JSON escapes ("\ud800"):
# include them, they are what a buggy producer writes.
json_strings = (
    st.text(alphabet=st.characters(exclude_categories=()), max_size=40)
    | st.text(alphabet=st.characters(categories=["Cs"]) | st.sampled_from("Ab. "), max_size=6)
    | st.sampled_from(["", " ", "\n", "A claim.", "Aristotle was born in 384 BC."])
)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | json_strings
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_strings, inner, max_size=4),
    max_leaves=12,
)
# Objects with the fields parse_line looks at, holding values of any type.
response_objects = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values,
        "response": json_values,
        "question": json_values,
        "prompt": json_values,
        "extra": json_values,
    },
)


def assert_item_is_sound(item: Any, raw: bytes, line: int) -> None:
    if item.error is not None:
        assert item.error.startswith(f"f.jsonl:{line}: "), item.error
        assert "\n" not in item.error
        assert item.response == ""
        # An error record is written too: it must encode, as standard JSON.
        json.dumps(dict(item.fields), ensure_ascii=False, allow_nan=False).encode("utf-8")
        item.error.encode("utf-8")
        return
    assert isinstance(item.response, str) and item.response.strip()
    assert item.question is None or isinstance(item.question, str)
    assert isinstance(item.id, (str, int)) and not isinstance(item.id, bool)
    if b"NaN" not in raw and b"Infinity" not in raw:
        assert item.fields == json.loads(raw)
    # What is accepted can be segmented and written back as UTF-8, as standard JSON.
    json.dumps(dict(item.fields), ensure_ascii=False, allow_nan=False).encode("utf-8")
    item.response.encode("utf-8")


def test_parse_line_on_arbitrary_json(row: Callable[..., None]) -> None:
    """Arbitrary JSON values through parse_line: a checkable response, or an error."""
    count = Counter()

    @PROPERTY
    @given(st.one_of(json_values, response_objects), st.integers(1, 10**9), st.booleans())
    def prop(value: Any, line: int, ascii_only: bool) -> None:
        count.n += 1
        try:
            raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
        except (UnicodeEncodeError, ValueError):
            # A lone surrogate cannot be UTF-8 encoded unescaped: only the
            # escaped form exists in a file.
            raw = json.dumps(value, ensure_ascii=True).encode("utf-8")
        assert_item_is_sound(parse_line(raw, line, "f.jsonl"), raw, line)

    prop()
    row("parse_line on arbitrary JSON values (hypothesis)", count.n,
        "no exception; a valid response that encodes as UTF-8, or an error naming file:line")


def test_parse_line_on_arbitrary_bytes(row: Callable[..., None]) -> None:
    """Arbitrary bytes through parse_line: never an exception."""
    count = Counter()

    @PROPERTY
    @given(st.binary(max_size=300) | st.builds(lambda v: json.dumps(v).encode()[:-1], json_values))
    def prop(raw: bytes) -> None:
        count.n += 1
        item = parse_line(raw, 7, "f.jsonl")
        if item.error is None:
            assert_item_is_sound(item, raw, 7)
        else:
            assert item.error.startswith("f.jsonl:7: ")

    prop()
    row("parse_line on arbitrary bytes and cut JSON (hypothesis)", count.n,
        "no exception; every bad line an error naming file:line")


# -- resuming from any cut ------------------------------------------------------------

RECORDS = [
    {"schema_version": 1, "id": i, "line": i + 1, "response": text, "label": "factual"}
    for i, text in enumerate(["Short.", "Ünïcödé ✓ text.", "x" * 300, "Last one."])
]
OUTPUT = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in RECORDS)


def test_read_finished_after_a_cut_anywhere(tmp_path: Path, row: Callable[..., None]) -> None:
    """An output file cut at any byte: read_finished keeps exactly the complete records."""
    count = Counter()
    ends = [i + 1 for i, b in enumerate(OUTPUT) if b == ord("\n")]

    @PROPERTY
    @given(st.integers(0, len(OUTPUT)))
    def prop(cut: int) -> None:
        count.n += 1
        path = tmp_path / "out.jsonl"
        path.write_bytes(OUTPUT[:cut])
        kept = list(read_finished(path))
        complete = sum(1 for e in ends if e <= cut)
        assert kept == RECORDS[:complete]
        assert path.read_bytes() == OUTPUT[: ends[complete - 1] if complete else 0]

    prop()
    row("output file cut at an arbitrary byte, then resumed (hypothesis)", count.n,
        "exactly the complete records kept, the torn tail cut off")
