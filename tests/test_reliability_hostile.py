"""Hostile and careless input to ``ceg check`` and ``ceg report`` (issue 17).

Outputs that are the input or each other (a hard link, a symlink, a side
output naming the input), ``--resume`` into an output made from another file,
lines that carry huge fields, numbers and text JSON cannot hold, and a closed
standard input. Each runs the real CLI on real files (in-process with the fake
model, or in a real subprocess where the case is about the process), and
records its row of the reliability table (``benchmarks/check/reliability.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from reliability_harness import ceg_command
from typer.testing import Result

from ceg_cli.check import responses as responses_module
from ceg_cli.check.pipeline import CheckOptions
from ceg_cli.check.responses import read_responses

Row = Callable[[str, int, str], None]

#: Lines shaped like a chatbot test set: id, question, response, metadata.
ROWS = [
    {"id": "apollo", "question": "Who was Aristotle?",
     "response": "Aristotle was a Greek philosopher. He taught Alexander the Great.",
     "model": "bot-7b", "tags": ["history"]},
    {"id": "connes", "response": "Alain Connes is a French mathematician.", "topic": "math"},
    {"id": "actrius", "question": "What is Actrius?",
     "response": "Actrius is a 1996 Catalan film directed by Ventura Pons."},
]


@pytest.fixture
def row(record_property: Callable[[str, object], None]) -> Row:
    def record(what: str, tries: int, outcome: str) -> None:
        record_property("reliability", {"what": what, "tries": tries, "outcome": outcome})

    return record


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def check(run_cli: Any, responses: Path | str, index: Path, *args: str | Path) -> Result:
    return run_cli("check", responses, "--index", index, "--quiet", *args)


def errors(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def warnings(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("warning:")]


def strict_json(line: bytes | str) -> Any:
    """``json.loads`` as a strict parser (``JSON.parse``) reads: no NaN, no Infinity."""

    def refuse(name: str) -> None:
        raise ValueError(f"not standard JSON: {name}")

    return json.loads(line, parse_constant=refuse)


# -- outputs that are the input, or each other ------------------------------------


def test_out_as_a_hard_link_to_the_input_is_refused(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """--out a hard link of the input: exit 2 naming both, and the input is not emptied."""
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    before = src.read_bytes()
    link = tmp_path / "out.jsonl"
    os.link(src, link)
    result = check(run_cli, src, hash_index, "--out", link)
    assert result.exit_code == 2
    assert errors(result) == [
        f"error: --out {link}: is the responses file itself ({src}); name another file"
    ]
    assert src.read_bytes() == before
    row("`--out` a hard link to the responses file", 1,
        "exit 2 before anything is written, naming both paths; the input intact")


def test_out_as_a_symlink_to_the_input_is_refused(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    before = src.read_bytes()
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "elsewhere" / "out.jsonl"
    link.symlink_to(src)
    result = check(run_cli, src, hash_index, "--out", link)
    assert result.exit_code == 2
    assert "is the responses file itself" in errors(result)[0]
    assert src.read_bytes() == before


SIDE_OUTPUTS = ["--report", "--junit", "--summary"]


@pytest.mark.parametrize("option", SIDE_OUTPUTS)
def test_a_side_output_naming_the_input_is_refused(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row, option: str
) -> None:
    """--report/--junit/--summary naming the input: exit 2; the input intact, no output made."""
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    before = src.read_bytes()
    out = tmp_path / "o.jsonl"
    result = check(run_cli, src, hash_index, "--out", out, option, src)
    assert result.exit_code == 2
    assert errors(result) == [f"error: {option} {src}: is the responses file itself; "
                              "name another file"]
    assert src.read_bytes() == before
    assert not out.exists()  # refused before anything was opened for writing
    row(f"`{option}` naming the responses file", 1, "exit 2 before anything is written; "
        "the input intact")


@pytest.mark.parametrize("option", SIDE_OUTPUTS)
def test_a_side_output_naming_the_output_is_refused(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row, option: str
) -> None:
    """A side output naming --out (here through a hard link): exit 2, the old --out kept."""
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "o.jsonl"
    out.write_bytes(b'{"schema_version": 1, "id": "from an earlier run"}\n')
    before = out.read_bytes()
    other_name = tmp_path / "side"
    os.link(out, other_name)
    result = check(run_cli, src, hash_index, "--out", out, option, other_name)
    assert result.exit_code == 2
    assert errors(result) == [f"error: {option} {other_name}: is the same file as --out {out}; "
                              "name another file"]
    assert out.read_bytes() == before
    row(f"`{option}` a hard link to `--out`", 1, "exit 2; the existing --out kept as it was")


def test_two_side_outputs_naming_one_new_file_are_refused(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    ci = tmp_path / "ci.txt"
    result = check(run_cli, src, hash_index, "--junit", ci, "--summary",
                   tmp_path / "sub" / ".." / "ci.txt")
    assert result.exit_code == 2
    assert "is the same file as --junit" in errors(result)[0]
    assert not ci.exists()


def test_devices_may_be_named_twice(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path
) -> None:
    """Discarding two CI files into /dev/null is not a collision."""
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    result = check(run_cli, src, hash_index, "--out", tmp_path / "o.jsonl",
                   "--junit", "/dev/null", "--summary", "/dev/null")
    assert result.exit_code == 0, result.stderr


def test_report_onto_a_hard_link_of_its_records_is_refused(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "o.jsonl"
    assert check(run_cli, src, hash_index, "--out", out).exit_code == 0
    before = out.read_bytes()
    link = tmp_path / "report.html"
    os.link(out, link)
    result = run_cli("report", out, "--out", link)
    assert result.exit_code == 2
    assert "is the records file itself" in errors(result)[0]
    assert out.read_bytes() == before


# -- --resume into an output made from another file ------------------------------------


def finished_run(run_cli: Any, index: Path, src: Path, out: Path) -> Path:
    result = check(run_cli, src, index, "--out", out)
    assert result.exit_code == 0, result.stderr
    return out


def refused_resume(run_cli: Any, src: Path, index: Path, out: Path) -> str:
    """Resume into ``out``: exit 2 with one error line (returned), ``out`` untouched."""
    before = out.read_bytes()
    result = check(run_cli, src, index, "--out", out, "--resume")
    assert result.exit_code == 2, result.stderr
    assert "resumed" not in result.stderr
    assert out.read_bytes() == before
    [line] = errors(result)
    return line


def test_resume_into_an_output_of_another_input_is_refused(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """--resume with a foreign output: exit 2 saying how to start over; nothing appended."""
    foreign_src = write_jsonl(tmp_path / "other.jsonl", [
        {"id": "x1", "response": "Plato taught Aristotle."},
        {"id": "x2", "response": "Aristotle was born in Stagira."},
    ])
    out = finished_run(run_cli, hash_index, foreign_src, tmp_path / "o.jsonl")
    # As an interrupted run leaves it: a torn last line, which must not be cut either.
    out.write_bytes(out.read_bytes() + b'{"schema_version": 1, "id": "x3", "li')
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    assert refused_resume(run_cli, src, hash_index, out) == (
        f"error: --resume: {out} was not made from {src}: its record 1 is line 1, id 'x1', "
        f"where {src} has line 1, id 'apollo'; to start over, run without --resume "
        f"(it replaces {out})"
    )
    # Starting over as the message says gives the run's own records.
    finished_run(run_cli, hash_index, src, out)
    assert [json.loads(line)["id"] for line in out.read_bytes().splitlines()] == [
        "apollo", "connes", "actrius"]
    row("`--resume` into an output made from another responses file", 1,
        "exit 2 naming the first record that differs and how to start over; "
        "the output untouched")


def test_resume_after_the_input_was_edited_is_refused(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path
) -> None:
    """Same ids, another response: the output was not made from this text."""
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out = finished_run(run_cli, hash_index, src, tmp_path / "o.jsonl")
    out.write_bytes(b"".join(out.read_bytes().splitlines(keepends=True)[:2]))
    write_jsonl(src, [{**ROWS[0], "response": "Aristotle was a Roman emperor."}, *ROWS[1:]])
    message = refused_resume(run_cli, src, hash_index, out)
    assert "line 1, id 'apollo', with another response" in message


def test_resume_with_more_records_than_input_lines_is_refused(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path
) -> None:
    out = finished_run(run_cli, hash_index, write_jsonl(tmp_path / "in.jsonl", ROWS),
                       tmp_path / "o.jsonl")
    short = write_jsonl(tmp_path / "short.jsonl", ROWS[:2])
    message = refused_resume(run_cli, short, hash_index, out)
    assert f"holds 3 records but {short} has only 2 response lines" in message


def test_resume_refusal_quotes_the_line_as_text(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    notes = finished_run(run_cli, hash_index, src, tmp_path / "notes.jsonl")
    notes.write_bytes(notes.read_bytes().splitlines(keepends=True)[0] + b"hello world\n")
    assert refused_resume(run_cli, src, hash_index, notes) == (
        f"error: {notes}: line 2 ('hello world') is not a ceg output record; "
        "refusing to resume into a file ceg did not write")


def test_resume_into_records_missing_their_keys_is_refused(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path
) -> None:
    """Lines that look like records but lack their keys: refused, not an internal error."""
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    notes = tmp_path / "notes.jsonl"
    notes.write_bytes(b'{"schema_version": 1, "id": "apollo", "line": 1}\n')
    assert refused_resume(run_cli, src, hash_index, notes) == (
        f"error: {notes}: record 1 is not a complete ceg output record; "
        "refusing to resume into a file ceg did not write")


# -- what a line may carry -----------------------------------------------------------


def many_small_objects(size: int) -> list[dict[str, int]]:
    return [{"a": 1}] * (size // 8)


def test_a_field_too_large_to_carry_is_left_out_with_a_warning(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over the carried-fields cap: the largest field is dropped, named; the line is checked."""
    monkeypatch.setattr(responses_module, "MAX_CARRIED_BYTES", 4096)
    big = {**ROWS[1], "trace": many_small_objects(20_000), "run": "nightly"}
    src = write_jsonl(tmp_path / "in.jsonl", [ROWS[0], big, ROWS[2]])
    out = tmp_path / "o.jsonl"
    result = check(run_cli, src, hash_index, "--out", out)
    assert result.exit_code == 0, result.stderr
    assert warnings(result) == [
        f"warning: {src}:2: field 'trace' is 20,001 bytes of JSON; a record carries at most "
        "4,096 bytes of input fields, so it was left out"
    ]
    records = [json.loads(line) for line in out.read_bytes().splitlines()]
    assert "trace" not in records[1]
    assert records[1]["run"] == "nightly" and records[1]["topic"] == "math"
    assert records[1]["label"] != "error" and records[1]["segments"]
    row("a line carrying a field over the carried-fields cap (lowered to 4 KiB)", 1,
        "the field left out with a warning naming file:line:field; the response checked")


def test_memory_stays_flat_over_lines_of_many_small_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row: Row
) -> None:
    """A batch of lines near the cap holds about what one line does, not a batch's worth."""
    monkeypatch.setattr(responses_module, "MAX_CARRIED_BYTES", 4096)
    batch = CheckOptions().batch_size
    line = {"id": "x", "response": "Aristotle was Greek.", "meta": many_small_objects(80_000)}

    def peak(lines: int) -> int:
        src = write_jsonl(tmp_path / f"{lines}.jsonl", [line] * lines)
        tracemalloc.start()
        try:
            held = list(read_responses(src))  # what a pipeline batch holds
            assert len(held) == lines
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    one, many = peak(1), peak(batch)
    assert many < 2 * one, (one, many)
    row(f"{batch} lines of 80 KB of small JSON objects (cap lowered to 4 KiB)", batch,
        f"peak {many / 1e6:.1f} MB for the batch, {one / 1e6:.1f} MB for one line")


def test_nan_and_infinity_are_written_as_strings(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """NaN, Infinity, 1e999 in carried fields: strict JSON out, a warning naming each field."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        json.dumps(ROWS[0]).encode() + b"\n"
        + b'{"id": "n", "response": "Plato taught Aristotle.", "score": NaN, '
          b'"stats": {"max": Infinity, "min": -Infinity, "big": [1e999, 2.5]}}\n'
        + b'{"id": "r", "response": NaN, "weight": 1e999}\n'
    )
    out = tmp_path / "o.jsonl"
    report = tmp_path / "r.html"
    result = check(run_cli, src, hash_index, "--out", out, "--report", report)
    assert result.exit_code == 2  # the line whose response is not a string
    assert warnings(result) == [
        f"warning: {src}:2: field 'score' holds NaN or Infinity, which JSON has no number for; "
        "written as a string",
        f"warning: {src}:2: field 'stats' holds NaN or Infinity, which JSON has no number for; "
        "written as a string",
        f"warning: {src}:3: field 'response' holds NaN or Infinity, which JSON has no number "
        "for; written as a string",
        f"warning: {src}:3: field 'weight' holds NaN or Infinity, which JSON has no number for; "
        "written as a string",
        f"warning: {src}:3: field 'response' must be a string, got number",
    ]
    records = [strict_json(line) for line in out.read_bytes().splitlines()]
    assert records[1]["score"] == "NaN"
    assert records[1]["stats"] == {"max": "Infinity", "min": "-Infinity",
                                   "big": ["Infinity", 2.5]}
    assert records[1]["label"] != "error"
    assert records[2]["input"] == {"response": "NaN"} and records[2]["weight"] == "Infinity"
    row("NaN, Infinity and 1e999 in carried fields", 5,
        "written as strings with a warning naming file:line:field; every record strict JSON")


def test_a_lone_surrogate_keeps_the_other_fields(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """An unpaired surrogate escape: an error record naming the field, the line's fields kept."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        json.dumps(ROWS[0]).encode() + b"\n"
        + b'{"id": "s", "question": "Who?", "response": "Plato \\ud800 taught.", '
          b'"model": "bot-7b", "tags": ["a\\udc00", "\\ud83d\\ude00"]}\n'
    )
    out = tmp_path / "o.jsonl"
    result = check(run_cli, src, hash_index, "--out", out)
    assert result.exit_code == 2
    assert warnings(result) == [
        f"warning: {src}:2: fields 'response', 'tags' hold an unpaired surrogate escape "
        "(such as \\ud800), which is not Unicode text; kept with U+FFFD in its place"
    ]
    record = strict_json(out.read_bytes().splitlines()[1])
    assert record["label"] == "error" and record["id"] == "s"
    assert record["model"] == "bot-7b"
    assert record["tags"] == ["a\ufffd", "\U0001f600"]  # the valid pair kept as it was
    assert record["input"] == {"question": "Who?", "response": "Plato \ufffd taught."}
    row("a JSON-escaped lone surrogate in the response and a field", 1,
        "an error record naming both fields; id and every field kept, U+FFFD in its place")


def test_a_control_character_message_reads_whole(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(json.dumps(ROWS[0]).encode() + b'\n{"id": "c", "response": "a\x01b"}\n')
    result = check(run_cli, src, hash_index, "--out", tmp_path / "o.jsonl")
    assert warnings(result) == [
        f"warning: {src}:2: not valid JSON (Invalid control character, column 27)"]


def test_markdown_links_in_responses_are_escaped_in_the_summary(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path
) -> None:
    """A flagged segment holding a link or an image: shown as text, never rendered."""
    src = write_jsonl(tmp_path / "in.jsonl", [{
        "id": "link",
        "response": "See [the proof](https://evil.example/x) that Zorblax invented gravity "
                    "in 3021. ![pixel](https://evil.example/p.png) Zorblax lives on Mars.",
    }])
    summary = tmp_path / "summary.md"
    result = check(run_cli, src, hash_index, "--out", tmp_path / "o.jsonl", "--summary", summary)
    assert result.exit_code in (0, 1), result.stderr
    # Read with the spans' bold marks taken out (issue 57 bolds the unsupported words):
    # the brackets must still be escaped around them.
    text = summary.read_text(encoding="utf-8").replace("**", "")
    assert "\\[the proof\\](https://evil.example/x)" in text
    assert "\\[pixel\\](https://evil.example/p.png)" in text
    assert "[the proof](" not in text and "[pixel](" not in text


# -- standard input ----------------------------------------------------------------------


def test_a_closed_stdin_is_a_usage_error(hash_index: Path, tmp_path: Path, row: Row) -> None:
    """``ceg check - <&-`` in a real process: exit 2, one line; not an internal error."""
    ceg = ceg_command(tmp_path)
    done = subprocess.run(
        ["bash", "-c", 'exec "$@" <&-', "ceg", *ceg, "check", "-", "--index", str(hash_index),
         "--quiet"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: -: standard input is closed; pipe the responses in, or name a file"]
    assert done.stdout == ""
    row("`ceg check -` with standard input closed", 1, "exit 2, one line; no output")

