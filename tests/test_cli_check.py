"""``ceg check`` end to end through the CLI.

Plumbing (output files, gate, resume, CI files, errors) runs with a fake judge
whose verdicts follow keywords, on the mini dump indexed with fake vectors:
deterministic and free. The real pipeline (model, offline judge) runs on 12
FEVER claims about Aristotle against the real mini index, marked slow.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from ceg_cli import judges
from ceg_cli.check.pipeline import CheckOptions
from ceg_cli.index import open_index
from ceg_cli.report.records import SCHEMA_VERSION
from ceg_cli.types import (
    CONTRADICTED,
    FACTUAL,
    JUDGE_ERROR,
    NO_CLAIM,
    NONFACTUAL,
    NOT_JUDGED,
    SUPPORTED,
    JudgeItem,
    Verdict,
)

TESTS = Path(__file__).resolve().parent
FEVER = TESTS / "data" / "fever-aristotle.jsonl"


class FakeJudge:
    """Verdicts from keywords, for plumbing tests.

    A segment with "?" has no claim, "never" is contradicted, "UNJUDGED" makes
    the judge fail on it, anything else is supported by its first two passages.
    With ``block_at`` the judge hangs on that call (after touching ``ready``),
    so a test can kill a run at a known point.
    """

    name = "fake"
    method = "keyword rules, for tests"

    def __init__(self, block_at: int | None = None, ready: str | None = None) -> None:
        self.block_at = block_at
        self.ready = ready
        self.calls = 0
        self.judged = 0

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        self.calls += 1
        self.judged += len(items)
        if self.calls == self.block_at and self.ready:
            Path(self.ready).touch()
            time.sleep(120)  # the test kills the process long before
        return [self.decide(item) for item in items]

    @staticmethod
    def decide(item: JudgeItem) -> Verdict:
        text = item.segment.text
        if "?" in text:
            return Verdict(FACTUAL, NO_CLAIM, 1.0, (), "no claim")
        if "never" in text.lower():
            return Verdict(NONFACTUAL, CONTRADICTED, 0.1, (), "says never")
        if "UNJUDGED" in text:
            return Verdict(NOT_JUDGED, JUDGE_ERROR, 0.0, (), "fake failure")
        cited = tuple(range(min(2, len(item.evidence))))
        return Verdict(FACTUAL, SUPPORTED, 0.9, cited, f"question: {item.question}")


#: Instances created by the "fake" factory in this process, newest last.
CREATED: list[FakeJudge] = []


def create_fake(arg: str, options: Any) -> FakeJudge:
    judge = FakeJudge()
    CREATED.append(judge)
    return judge


@pytest.fixture(autouse=True)
def _fake_judge_and_model(monkeypatch: pytest.MonkeyPatch, hash_model: None) -> None:
    # A private copy of the registry: registering "fake" leaks into no other test.
    monkeypatch.setattr(judges, "_REGISTRY", dict(judges._REGISTRY))
    judges.register("fake", create_fake)
    CREATED.clear()


def jsonl(path: Path, *rows: dict[str, Any] | bytes) -> Path:
    path.write_bytes(
        b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows)
    )
    return path


def records(text: str | bytes) -> list[dict[str, Any]]:
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return [json.loads(line) for line in text.splitlines()]


#: 3 responses, 4 segments: one segment nonfactual (rate 0.25), one no claim.
MIXED = [
    {"id": "a", "response": "Aristotle was a philosopher. He taught Alexander.",
     "question": "Who was Aristotle?"},
    {"id": "b", "response": "Plato never lived."},
    {"id": "c", "response": "Who knows?", "prompt": "Anything to add?"},
]


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    return jsonl(tmp_path / "responses.jsonl", *MIXED)


def check(run_cli: Any, responses: Path | str, index: Path, *args: str | Path) -> Result:
    return run_cli("check", responses, "--index", index, "--judge", "fake", "--quiet", *args)


def invoke_with_stdin(args: Sequence[str | Path], data: bytes) -> Result:
    from ceg_cli.cli.main import app

    return CliRunner().invoke(app, [str(a) for a in args], input=data, catch_exceptions=False)


TIME_KEY = re.compile(r"time|date|second|elapsed|duration|clock", re.IGNORECASE)
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def assert_no_timestamps(value: Any, where: str = "record") -> None:
    """Nothing in a record may vary from run to run: no times, no dates."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert not TIME_KEY.search(key), f"{where}.{key}"
            assert_no_timestamps(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            assert_no_timestamps(item, f"{where}[{i}]")
    elif isinstance(value, str):
        assert not TIMESTAMP.search(value), f"{where}: {value[:80]}"


# -- output --------------------------------------------------------------------


def test_records_go_to_stdout_or_to_out(run_cli, hash_index: Path, mixed: Path,
                                        tmp_path: Path) -> None:
    to_stdout = check(run_cli, mixed, hash_index)
    assert to_stdout.exit_code == 0, to_stdout.stderr
    out = tmp_path / "out.jsonl"
    to_file = check(run_cli, mixed, hash_index, "--out", out)
    assert to_file.exit_code == 0, to_file.stderr
    assert to_file.stdout == ""
    assert out.read_text(encoding="utf-8") == to_stdout.stdout
    got = records(to_stdout.stdout)
    assert [r["id"] for r in got] == ["a", "b", "c"]
    assert [r["label"] for r in got] == [FACTUAL, NONFACTUAL, FACTUAL]
    assert [r["question"] for r in got] == ["Who was Aristotle?", None, "Anything to add?"]
    for r in got:
        assert r["schema_version"] == SCHEMA_VERSION
        # A judge with no cuts decides at none.
        assert r["judge"] == {"name": "fake", "method": FakeJudge.method, "threshold": None,
                              "threshold_source": None}
        assert_no_timestamps(r)
    # The summary table goes to stderr, never into the data.
    assert "nonfactual rate" in to_stdout.stderr
    assert "25.0%" in to_stdout.stderr


def test_records_from_the_hash_index_are_well_formed(run_cli, hash_index: Path,
                                                     mixed: Path) -> None:
    result = check(run_cli, mixed, hash_index, "--threshold", "-1", "-k", "3")
    assert result.exit_code == 0, result.stderr
    first = records(result.stdout)[0]
    assert [s["text"] for s in first["segments"]] == [
        "Aristotle was a philosopher.", "He taught Alexander."]
    for s in first["segments"]:
        assert first["response"][s["start"]:s["end"]] == s["text"]
        assert len(s["evidence"]) == 3  # threshold -1 keeps all top-k
        assert [c["passage_id"] for c in s["citations"]] == [
            e["passage_id"] for e in s["evidence"][:2]]
    assert first["annotated"].startswith("Aristotle was a philosopher. [1][2] ")


def test_field_mapping_flags(run_cli, hash_index: Path, tmp_path: Path) -> None:
    responses = jsonl(
        tmp_path / "r.jsonl",
        {"id": 1, "answer": "Aristotle taught.", "q": "Who taught?", "question": "other"},
        {"id": 2, "response": "Aristotle taught."},
    )
    result = check(run_cli, responses, hash_index, "--response-field", "answer",
                   "--question-field", "q")
    assert result.exit_code == 2, result.stderr  # line 2 has no "answer"
    first, second = records(result.stdout)
    assert (first["response"], first["question"]) == ("Aristotle taught.", "Who taught?")
    assert first["segments"][0]["reason"] == "question: Who taught?"
    assert first["input"] == {"question": "other"}
    assert second["label"] == "error"
    assert second["error"] == f"{responses}:2: field 'answer' is missing"


def test_stdin(run_cli, hash_index: Path, mixed: Path) -> None:
    from_file = check(run_cli, mixed, hash_index)
    from_stdin = invoke_with_stdin(
        ["check", "-", "--index", hash_index, "--judge", "fake", "--quiet"], mixed.read_bytes()
    )
    assert from_stdin.exit_code == 0, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout
    bad = invoke_with_stdin(
        ["check", "-", "--index", hash_index, "--judge", "fake", "--quiet"],
        mixed.read_bytes() + b"{oops\n",
    )
    assert bad.exit_code == 2
    assert "<stdin>:4: not valid JSON" in bad.stderr
    assert records(bad.stdout)[3]["error"].startswith("<stdin>:4: ")


# -- bad input lines -----------------------------------------------------------


def test_a_bad_line_among_good_ones(run_cli, hash_index: Path, tmp_path: Path) -> None:
    responses = jsonl(tmp_path / "r.jsonl", MIXED[0], b"{not json", MIXED[1],
                      {"id": "d", "response": 3}, MIXED[2])
    out = tmp_path / "out.jsonl"
    # A gate that the good lines pass: the bad lines alone decide the exit status.
    result = check(run_cli, responses, hash_index, "--out", out,
                   "--max-nonfactual-rate", "1")
    assert result.exit_code == 2
    got = records(out.read_bytes())
    assert [r["id"] for r in got] == ["a", 2, "b", "d", "c"]
    assert [r["label"] for r in got] == [FACTUAL, "error", NONFACTUAL, "error", FACTUAL]
    assert got[1]["error"].startswith(f"{responses}:2: not valid JSON")
    assert got[3]["error"] == f"{responses}:4: field 'response' must be a string, got number"
    assert f"warning: {responses}:2: not valid JSON" in result.stderr
    assert f"warning: {responses}:4: field 'response'" in result.stderr
    assert "2 of 5 input lines could not be read" in result.stderr


def test_bracketed_path_is_printed_as_it_is(run_cli, hash_index: Path, tmp_path: Path) -> None:
    # Paths and messages are user data: never read as console markup.
    folder = tmp_path / "[bold]runs"
    folder.mkdir()
    responses = jsonl(folder / "r.jsonl", MIXED[0], b"{oops")
    result = check(run_cli, responses, hash_index)
    assert result.exit_code == 2
    assert f"warning: {responses}:2:" in result.stderr


def test_an_empty_input_fails_the_gate(run_cli, hash_index: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    result = check(run_cli, empty, hash_index)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "no responses to check" in result.stderr


# -- the gate ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "status", "reasons"),
    [
        pytest.param([], 0, [], id="no-threshold"),
        pytest.param(["--max-nonfactual-rate", "0.25"], 0, [], id="rate-at"),
        pytest.param(["--max-nonfactual-rate", "0.3"], 0, [], id="rate-below"),
        pytest.param(["--max-nonfactual-rate", "0.2"], 1,
                     ["exceeds --max-nonfactual-rate 0.2"], id="rate-above"),
        pytest.param(["--max-nonfactual-rate", "0"], 1,
                     ["(1 of 4 judged segments) exceeds --max-nonfactual-rate 0"],
                     id="rate-zero"),
        pytest.param(["--max-nonfactual-responses", "1"], 0, [], id="responses-at"),
        pytest.param(["--max-nonfactual-responses", "0"], 1,
                     ["1 of 3 responses are nonfactual, more than --max-nonfactual-responses 0"],
                     id="responses-above"),
        pytest.param(["--max-nonfactual-rate", "0.1", "--max-nonfactual-responses", "0"], 1,
                     ["exceeds --max-nonfactual-rate 0.1", "--max-nonfactual-responses 0"],
                     id="both"),
    ],
)
def test_gate_exit_status(run_cli, hash_index: Path, mixed: Path, flags: list[str],
                          status: int, reasons: list[str]) -> None:
    result = check(run_cli, mixed, hash_index, *flags)
    assert result.exit_code == status, result.stderr
    assert len(records(result.stdout)) == 3  # written whatever the gate says
    assert ("gate: passed" in result.stderr) == (status == 0)
    assert ("gate: failed" in result.stderr) == (status != 0)
    for reason in reasons:
        assert reason in result.stderr


@pytest.mark.parametrize("flags", [["--max-nonfactual-rate", "1.5"],
                                   ["--max-nonfactual-responses", "-1"],
                                   ["--top-k", "0"], ["--threshold", "2"]])
def test_bad_thresholds_are_usage_errors(run_cli, hash_index: Path, mixed: Path,
                                         flags: list[str]) -> None:
    result = check(run_cli, mixed, hash_index, *flags)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert flags[0] in result.stderr


def test_unjudged_segments_are_a_runtime_failure(run_cli, hash_index: Path,
                                                 tmp_path: Path) -> None:
    responses = jsonl(tmp_path / "r.jsonl", MIXED[0], {"id": "u", "response": "UNJUDGED it."})
    result = check(run_cli, responses, hash_index, "--max-nonfactual-rate", "1")
    assert result.exit_code == 3
    second = records(result.stdout)[1]
    assert second["label"] == NOT_JUDGED
    assert second["annotated"] == "UNJUDGED it. [NOT JUDGED]"


# -- CI files ------------------------------------------------------------------


def test_junit_counts(run_cli, hash_index: Path, tmp_path: Path) -> None:
    responses = jsonl(tmp_path / "r.jsonl", *MIXED, b"[1]",
                      {"id": "u", "response": "UNJUDGED it."})
    junit = tmp_path / "ci" / "junit.xml"
    junit.parent.mkdir()
    result = check(run_cli, responses, hash_index, "--junit", junit)
    assert result.exit_code == 2
    root = ET.parse(junit).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    counts = {k: suite.get(k) for k in ("tests", "failures", "errors")}
    assert counts == {"tests": "5", "failures": "1", "errors": "2"}
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["a", "b", "c", "4", "u"]
    assert cases[1].find("failure") is not None
    assert cases[3].find("error") is not None and cases[4].find("error") is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["judge"] == "fake"
    assert props["nonfactual_segments"] == "1"


def test_markdown_summary_is_appended(run_cli, hash_index: Path, mixed: Path,
                                      tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    first = check(run_cli, mixed, hash_index, "--summary", summary)
    assert first.exit_code == 0
    after_first = summary.read_text(encoding="utf-8")
    assert after_first.startswith("# earlier step\n## ceg check: ✅ passed")
    assert "| Nonfactual segments | 1 |" in after_first
    second = check(run_cli, mixed, hash_index, "--summary", summary,
                   "--max-nonfactual-rate", "0.1")
    assert second.exit_code == 1
    after_second = summary.read_text(encoding="utf-8")
    assert after_second.startswith(after_first)
    assert after_second.count("## ceg check") == 2
    assert "## ceg check: ❌ failed (exit 1)" in after_second[len(after_first):]


# -- usage errors --------------------------------------------------------------


def test_resume_needs_out(run_cli, hash_index: Path, mixed: Path) -> None:
    result = check(run_cli, mixed, hash_index, "--resume")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "--resume needs --out" in result.stderr


def test_out_must_not_be_the_responses_file(run_cli, hash_index: Path, mixed: Path) -> None:
    before = mixed.read_bytes()
    result = check(run_cli, mixed, hash_index, "--out", mixed)
    assert result.exit_code == 2
    assert "is the responses file itself" in result.stderr
    assert mixed.read_bytes() == before


@pytest.mark.parametrize("resume", [[], ["--resume"]])
def test_out_must_not_be_a_directory(run_cli, hash_index: Path, mixed: Path, tmp_path: Path,
                                     resume: list[str]) -> None:
    result = check(run_cli, mixed, hash_index, "--out", tmp_path, *resume)
    assert result.exit_code == 2
    assert f"--out {tmp_path}: is a directory" in result.stderr


def test_unknown_judge_lists_the_valid_ones(run_cli, hash_index: Path, mixed: Path) -> None:
    result = run_cli("check", mixed, "--index", hash_index, "--judge", "xyz", "--quiet")
    assert result.exit_code == 2
    assert result.stdout == ""
    message = result.stderr.strip()
    assert message.startswith("error: --judge xyz: unknown judge; choose one of:")
    for valid in ("offline", "nli:MODEL", "fake"):
        assert valid in message


def test_missing_index(run_cli, mixed: Path, tmp_path: Path) -> None:
    result = run_cli("check", mixed, "--index", tmp_path / "nowhere", "--judge", "fake")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert f"no index at {tmp_path / 'nowhere'}" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_responses_file(run_cli, hash_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = check(run_cli, tmp_path / "nope.jsonl", hash_index, "--out", out)
    assert result.exit_code == 2
    assert "nope.jsonl: no such file" in result.stderr


# -- resume --------------------------------------------------------------------


def many(tmp_path: Path, n: int = 40) -> Path:
    """``n`` responses over several pipeline batches, with bad lines among them."""
    rows: list[dict[str, Any] | bytes] = []
    for i in range(n):
        if i % 13 == 5:
            rows.append(b'{"id": "broken"')
        elif i % 5 == 3:
            rows.append({"id": f"r{i}", "response": f"Plato never wrote {i} books. He taught."})
        elif i % 7 == 2:
            rows.append({"id": f"r{i}", "response": f"Is {i} right? Aristotle was born."})
        else:
            rows.append({"id": f"r{i}", "response": f"Aristotle wrote {i} books.",
                         "question": f"How many, {i}?"})
    return jsonl(tmp_path / "many.jsonl", *rows)


def run_uninterrupted(run_cli: Any, responses: Path, index: Path, out: Path,
                      *args: str | Path) -> Result:
    result = check(run_cli, responses, index, "--out", out, *args)
    assert result.exit_code in (0, 2), result.stderr
    return result


def timeless(junit: bytes) -> bytes:
    return re.sub(rb'time="[^"]*"', b'time=""', junit)


def test_resume_after_a_torn_write_equals_an_uninterrupted_run(
    run_cli, hash_index: Path, tmp_path: Path
) -> None:
    responses = many(tmp_path)
    full = tmp_path / "full.jsonl"
    full_junit = tmp_path / "full.xml"
    whole = run_uninterrupted(run_cli, responses, hash_index, full, "--junit", full_junit)
    lines = full.read_bytes().splitlines(keepends=True)
    assert len(lines) == 40
    for record in records(full.read_bytes()):
        assert_no_timestamps(record)

    out = tmp_path / "out.jsonl"
    out.write_bytes(b"".join(lines[:17]) + lines[17][: len(lines[17]) // 2])
    junit = tmp_path / "resumed.xml"
    resumed = check(run_cli, responses, hash_index, "--out", out, "--resume", "--junit", junit)
    assert resumed.exit_code == whole.exit_code
    assert out.read_bytes() == full.read_bytes()
    assert f"resumed: 17 responses were already in {out}" in resumed.stderr
    # The summary and the CI files count the resumed records too.
    assert timeless(junit.read_bytes()) == timeless(full_junit.read_bytes())
    # Only the 23 responses left were checked.
    assert CREATED[-1].judged == sum(len(r["segments"]) for r in records(full.read_bytes())[17:])


def test_resume_of_a_finished_run_checks_nothing(run_cli, hash_index: Path, mixed: Path,
                                                 tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    run_uninterrupted(run_cli, mixed, hash_index, out)
    before = out.read_bytes()
    again = check(run_cli, mixed, hash_index, "--out", out, "--resume",
                  "--max-nonfactual-rate", "0.2")
    assert again.exit_code == 1  # the gate still sees every record
    assert out.read_bytes() == before
    assert CREATED[-1].judged == 0
    assert "resumed: 3 responses" in again.stderr


def test_resume_into_a_file_ceg_did_not_write(run_cli, hash_index: Path, mixed: Path,
                                              tmp_path: Path) -> None:
    notes = tmp_path / "notes.jsonl"
    content = b"[/b] my notes, not ceg output"
    notes.write_bytes(content)
    result = check(run_cli, mixed, hash_index, "--out", notes, "--resume")
    assert result.exit_code == 2
    assert "refusing to resume" in result.stderr
    assert notes.read_bytes() == content


def test_resume_with_repeated_ids(run_cli, hash_index: Path, tmp_path: Path) -> None:
    # Ids need not be unique; a resumed run must still check every line once.
    responses = jsonl(tmp_path / "r.jsonl",
                      {"id": "x", "response": "Aristotle taught."},
                      {"id": "x", "response": "Plato never lived."},
                      {"id": "y", "response": "Who knows?"})
    full = tmp_path / "full.jsonl"
    run_uninterrupted(run_cli, responses, hash_index, full)
    out = tmp_path / "out.jsonl"
    out.write_bytes(full.read_bytes().splitlines(keepends=True)[0])
    check(run_cli, responses, hash_index, "--out", out, "--resume")
    assert out.read_bytes() == full.read_bytes()


KILLABLE = """\
import os, sys
sys.path.insert(0, {tests!r})
import ceg_cli.index.store
from conftest import HashEmbedder
ceg_cli.index.store.load_embedder = lambda name=None, **kwargs: HashEmbedder()
from ceg_cli.judges import register
from test_cli_check import FakeJudge
register("fake", lambda arg, options: FakeJudge(block_at=2, ready={ready!r}))
from ceg_cli.cli.main import app
app(sys.argv[1:], prog_name="ceg")
"""


def test_resume_after_the_process_is_killed(run_cli, hash_index: Path, tmp_path: Path) -> None:
    responses = many(tmp_path)
    full = tmp_path / "full.jsonl"
    run_uninterrupted(run_cli, responses, hash_index, full)

    ready = tmp_path / "judge-blocked"
    script = tmp_path / "killable.py"
    script.write_text(KILLABLE.format(tests=str(TESTS), ready=str(ready)), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(script), "check", str(responses), "--index", str(hash_index),
         "--judge", "fake", "--out", str(out), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the run never reached its second batch"
            time.sleep(0.05)
    finally:
        proc.kill()  # SIGKILL: no handler, no cleanup, like a crash or an OOM kill
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -9
    # The first batch was written and flushed before the second was judged.
    batch = CheckOptions().batch_size
    assert out.read_bytes() == b"".join(full.read_bytes().splitlines(keepends=True)[:batch])

    resumed = check(run_cli, responses, hash_index, "--out", out, "--resume")
    assert resumed.exit_code == 2  # the bad lines, as in the uninterrupted run
    assert f"resumed: {batch} responses" in resumed.stderr
    assert out.read_bytes() == full.read_bytes()
    lines = [r["line"] for r in records(out.read_bytes())]
    assert lines == list(range(1, 41))  # every line once, in input order


# -- the real pipeline: model, offline judge, FEVER claims -----------------------


def check_offline(run_cli: Any, responses: Path | str, index: Path, *args: str | Path) -> Result:
    return run_cli("check", responses, "--index", index, "--judge", "offline", "--quiet",
                   "--response-field", "claim", *args)


@pytest.mark.slow
def test_fever_claims_end_to_end(run_cli, mini_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    junit = tmp_path / "junit.xml"
    summary = tmp_path / "summary.md"
    result = check_offline(run_cli, FEVER, mini_index, "--out", out, "--junit", junit,
                           "--summary", summary)
    assert result.exit_code == 0, result.stderr
    claims = records(FEVER.read_bytes())
    got = records(out.read_bytes())
    assert [r["id"] for r in got] == [c["id"] for c in claims]
    assert [r["line"] for r in got] == list(range(1, 13))

    cited: list[dict[str, Any]] = []
    for claim, record in zip(claims, got):
        assert_no_timestamps(record)
        assert record["response"] == record["claim"] == claim["claim"]
        assert record["input"] == {"label": claim["label"]}  # FEVER's label, kept
        assert record["evidence"] == claim["evidence"]  # carried through
        assert record["label"] in (FACTUAL, NONFACTUAL)
        assert record["judge"]["name"] == "offline"
        assert record["judge"]["method"]
        assert record["error"] is None
        assert record["segments"], record["id"]
        for s in record["segments"]:
            assert record["response"][s["start"]:s["end"]] == s["text"]
            assert s["label"] in (FACTUAL, NONFACTUAL)
            assert s["evidence"], "the top passage is always kept"
            assert (s["label"] == FACTUAL) == (s["verdict"] in (SUPPORTED, NO_CLAIM))
            if s["label"] == NONFACTUAL:
                assert s["citations"] == []
                assert "[NONFACTUAL]" in record["annotated"]
            for c in s["citations"]:
                assert f"[{c['marker']}]" in record["annotated"]
            cited += s["citations"]
    assert cited, "no claim about Aristotle was supported by the Aristotle article"

    with open_index(mini_index) as index:
        passages = index.chunks(c["passage_id"] for c in cited)
    for c in cited:
        passage = passages[c["passage_id"]]
        assert c["title"] == passage.title == "Aristotle"
        assert c["doc_id"] == passage.doc_id
        assert c["text"] == passage.text

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    nonfactual = sum(r["label"] == NONFACTUAL for r in got)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == (
        "12", str(nonfactual), "0")
    assert f"| Nonfactual responses | {nonfactual} |" in summary.read_text(encoding="utf-8")

    # The same run through stdin, to stdout, gives the same records.
    piped = invoke_with_stdin(
        ["check", "-", "--index", mini_index, "--judge", "offline", "--quiet",
         "--response-field", "claim"], FEVER.read_bytes())
    assert piped.exit_code == 0, piped.stderr
    assert piped.stdout == out.read_text(encoding="utf-8")


@pytest.mark.slow
def test_fever_resume_equals_uninterrupted(run_cli, mini_index: Path, tmp_path: Path) -> None:
    full = tmp_path / "full.jsonl"
    assert check_offline(run_cli, FEVER, mini_index, "--out", full).exit_code == 0
    lines = full.read_bytes().splitlines(keepends=True)
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"".join(lines[:5]) + lines[5][:100])
    resumed = check_offline(run_cli, FEVER, mini_index, "--out", out, "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    assert out.read_bytes() == full.read_bytes()
    ids = [r["id"] for r in records(out.read_bytes())]
    assert len(ids) == len(set(ids)) == 12


@pytest.mark.slow
def test_fever_gate_follows_the_records(run_cli, mini_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert check_offline(run_cli, FEVER, mini_index, "--out", out).exit_code == 0
    segments = [s for r in records(out.read_bytes()) for s in r["segments"]]
    rate = sum(s["label"] == NONFACTUAL for s in segments) / len(segments)
    assert check_offline(run_cli, FEVER, mini_index, "--max-nonfactual-rate",
                         repr(rate)).exit_code == 0
    assert rate > 0, "the 6 REFUTES claims all passed"
    below = check_offline(run_cli, FEVER, mini_index, "--max-nonfactual-rate",
                          repr(rate * 0.99))
    assert below.exit_code == 1
    assert "exceeds --max-nonfactual-rate" in below.stderr


@pytest.mark.slow
def test_fever_claims_with_the_shipped_verifier(run_cli, mini_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = run_cli("check", FEVER, "--index", mini_index, "--judge", "verifier", "--quiet",
                     "--response-field", "claim", "--out", out)
    assert result.exit_code == 0, result.stderr
    got = records(out.read_bytes())
    assert len(got) == 12
    labels = set()
    for record in got:
        assert record["judge"]["name"] == "verifier"
        assert "cross-encoder" in record["judge"]["method"]
        # On an index: the protocol's cut for the index setting (0.5939 today).
        assert record["judge"]["threshold_source"] == "protocol, index setting"
        cut = record["judge"]["threshold"]
        for s in record["segments"]:
            labels.add(s["label"])
            assert 0.0 <= s["score"] <= 1.0
            assert "P(supported)" in s["reason"] and "entailment" in s["reason"]
            assert (s["label"] == FACTUAL) == (s["score"] >= cut)
            if s["label"] == FACTUAL:
                assert s["citations"] and all(c["title"] == "Aristotle" for c in s["citations"])
            else:
                assert s["citations"] == []
    assert labels == {FACTUAL, NONFACTUAL}, "12 claims, half of them false: both labels expected"
