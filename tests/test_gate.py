from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ceg_cli.check.pipeline import CheckedResponse, ResponseInput, SegmentResult, response_label
from ceg_cli.errors import ExitStatus, UsageError
from ceg_cli.report.ci import (
    JUnitWriter,
    md_cell,
    render_markdown,
    write_junit,
    write_markdown_summary,
    xml_safe,
)
from ceg_cli.report.gate import GateOptions, GateResult, Summary, evaluate_gate
from ceg_cli.types import (
    CONTRADICTED,
    FACTUAL,
    JUDGE_ERROR,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    NOT_JUDGED,
    SUPPORTED,
    Segment,
    Verdict,
)

REPO = Path(__file__).resolve().parents[1]
LABEL_OF = {
    SUPPORTED: FACTUAL,
    NO_CLAIM: FACTUAL,
    CONTRADICTED: NONFACTUAL,
    NOT_ENOUGH_EVIDENCE: NONFACTUAL,
    JUDGE_ERROR: NOT_JUDGED,
}


def response(rid: object, *verdicts: str, texts: list[str] | None = None,
             reasons: list[str] | None = None, line: int = 1) -> CheckedResponse:
    """A checked response whose segments got ``verdicts``, labelled as ``check`` does."""
    results = []
    for i, verdict in enumerate(verdicts):
        text = texts[i] if texts else f"Sentence {i} of {rid}."
        reason = reasons[i] if reasons else f"because {verdict}"
        results.append(SegmentResult(Segment(i, 0, len(text), text),
                                     Verdict(LABEL_OF[verdict], verdict, 0.5, (), reason), ()))
    label = response_label([r.verdict for r in results])
    return CheckedResponse(ResponseInput(rid, line, "..."), tuple(results), label)


def bad_line(line: int, message: str = "not JSON") -> CheckedResponse:
    return CheckedResponse(ResponseInput(line, line, error=message), (), "error")


def summarize(*checked: CheckedResponse, **kwargs: object) -> Summary:
    summary = Summary(**kwargs)  # type: ignore[arg-type]
    for c in checked:
        summary.add(c)
    return summary


def mixed() -> list[CheckedResponse]:
    return [
        response("a", SUPPORTED, NO_CLAIM, line=1),
        response("b", SUPPORTED, CONTRADICTED, NOT_ENOUGH_EVIDENCE, line=2),
        response("c", SUPPORTED, JUDGE_ERROR, line=3),
        bad_line(4),
        response("e", line=5),  # an empty answer: no segments
    ]


# -- Summary ---------------------------------------------------------------


def test_summary_counts_responses_segments_and_verdicts() -> None:
    s = summarize(*mixed(), judge="offline", index="/idx")
    assert s.responses == 5
    assert s.responses_by_label == {FACTUAL: 2, NONFACTUAL: 1, NOT_JUDGED: 1, "error": 1}
    assert (s.checked_responses, s.error_responses, s.nonfactual_responses) == (4, 1, 1)
    assert s.segments == 7
    assert s.segments_by_label == {FACTUAL: 4, NONFACTUAL: 2, NOT_JUDGED: 1}
    assert s.segments_by_verdict == {SUPPORTED: 3, CONTRADICTED: 1, NOT_ENOUGH_EVIDENCE: 1,
                                     NO_CLAIM: 1, JUDGE_ERROR: 1}
    assert (s.judged_segments, s.nonfactual_segments, s.not_judged_segments) == (6, 2, 1)
    assert s.nonfactual_rate == pytest.approx(2 / 6)
    assert s.responses_not_fully_judged == 1
    assert s.first_error == "line 4: not JSON"
    assert s.first_not_judged == "response c: because judge_error"
    assert [e.id for e in s.examples] == ["b", "c", "4"]


def test_summary_to_dict_is_json_and_pins_its_keys() -> None:
    s = summarize(*mixed(), judge="offline", index="/idx")
    s.seconds = 1.5
    data = json.loads(json.dumps(s.to_dict()))
    assert sorted(data) == sorted([
        "responses", "responses_by_label", "nonfactual_responses", "error_responses",
        "segments", "judged_segments", "nonfactual_segments", "not_judged_segments",
        "responses_not_fully_judged", "segments_by_label", "segments_by_verdict",
        "nonfactual_rate", "seconds", "judge", "index",
        "evidence_sources", "citations", "citation_recall", "citation_precision",
    ])
    assert data["nonfactual_rate"] == pytest.approx(1 / 3)
    assert (data["seconds"], data["judge"], data["index"]) == (1.5, "offline", "/idx")


def test_rate_is_zero_without_segments_and_ignores_unjudged_ones() -> None:
    assert summarize().nonfactual_rate == 0.0
    assert summarize(response("x")).nonfactual_rate == 0.0
    s = summarize(response("x", CONTRADICTED, JUDGE_ERROR, JUDGE_ERROR, SUPPORTED))
    assert s.nonfactual_rate == 0.5


def test_summary_rejects_unknown_labels_but_counts_new_verdicts() -> None:
    odd = CheckedResponse(ResponseInput("x", 1, "t"), (), "maybe")
    with pytest.raises(ValueError, match="unknown label 'maybe'"):
        Summary().add(odd)
    seg = SegmentResult(Segment(0, 0, 1, "t"), Verdict("probably", SUPPORTED, 1.0), ())
    with pytest.raises(ValueError, match="unknown label 'probably'"):
        Summary().add(CheckedResponse(ResponseInput("x", 1, "t"), (seg,), FACTUAL))
    new = SegmentResult(Segment(0, 0, 1, "t"), Verdict(FACTUAL, "entailed", 1.0), ())
    s = summarize(CheckedResponse(ResponseInput("x", 1, "t"), (new,), FACTUAL))
    assert s.segments_by_verdict["entailed"] == 1 and s.segments_by_verdict[SUPPORTED] == 0


def test_examples_are_capped_per_label() -> None:
    s = summarize(*[response(i, CONTRADICTED) for i in range(5)],
                  *[bad_line(10 + i) for i in range(3)], max_examples=2)
    assert [e.id for e in s.examples] == ["0", "1", "10", "11"]
    assert s.nonfactual_responses == 5


# -- Gate ------------------------------------------------------------------


def rate_run() -> Summary:
    """1 nonfactual segment of 5 judged (rate 0.2), in 1 of 3 responses."""
    return summarize(response("a", SUPPORTED, SUPPORTED), response("b", SUPPORTED, CONTRADICTED),
                     response("c", NO_CLAIM))


@pytest.mark.parametrize(("limit", "passed"), [(0.21, True), (0.2, True), (0.19, False),
                                               (0.0, False), (1.0, True)])
def test_rate_threshold_is_at_most(limit: float, passed: bool) -> None:
    result = evaluate_gate(rate_run(), GateOptions(max_nonfactual_rate=limit))
    assert result.passed is passed
    assert result.exit_status == (ExitStatus.OK if passed else ExitStatus.GATE_FAILED)
    assert len(result.reasons) == (0 if passed else 1)


@pytest.mark.parametrize(("limit", "passed"), [(2, True), (1, True), (0, False)])
def test_response_threshold_is_at_most(limit: int, passed: bool) -> None:
    result = evaluate_gate(rate_run(), GateOptions(max_nonfactual_responses=limit))
    assert (result.passed, int(result.exit_status)) == (passed, 0 if passed else 1)


def test_gate_reasons_are_one_line_and_name_the_numbers() -> None:
    result = evaluate_gate(rate_run(), GateOptions(max_nonfactual_rate=0.1,
                                                   max_nonfactual_responses=0))
    assert result.reasons == [
        "nonfactual rate 0.2 (1 of 5 judged segments) exceeds --max-nonfactual-rate 0.1",
        "1 of 3 responses are nonfactual, more than --max-nonfactual-responses 0",
    ]
    assert result.to_dict() == {"passed": False, "exit_status": 1, "reasons": result.reasons}


def test_rate_just_above_the_threshold_never_reads_as_equal() -> None:
    s = summarize(*[response(i, CONTRADICTED) for i in range(2049)],
                  *[response(i, SUPPORTED) for i in range(10000 - 2049)])
    (reason,) = evaluate_gate(s, GateOptions(max_nonfactual_rate=0.2)).reasons
    assert reason.startswith("nonfactual rate 0.205 (2049 of 10000 judged segments) exceeds")


def test_without_thresholds_a_complete_run_passes() -> None:
    result = evaluate_gate(summarize(response("a", CONTRADICTED)))
    assert result == GateResult(True, ExitStatus.OK, [])


def test_not_judged_segments_are_a_runtime_failure_by_default() -> None:
    s = summarize(response("a", SUPPORTED, JUDGE_ERROR), response("b", CONTRADICTED, JUDGE_ERROR),
                  response("c", SUPPORTED))
    result = evaluate_gate(s, GateOptions(max_nonfactual_rate=0.5))
    assert result.exit_status == ExitStatus.RUNTIME and not result.passed
    assert result.reasons == [
        "2 of 5 segments (in 2 responses) could not be judged "
        "(first, response a: because judge_error)"
    ]
    lenient = GateOptions(max_nonfactual_rate=0.5, fail_on_not_judged=False)
    assert evaluate_gate(s, lenient).passed  # 1 of 3 judged segments


def test_a_run_with_nothing_judged_fails_even_when_lenient() -> None:
    s = summarize(response("a", JUDGE_ERROR, JUDGE_ERROR))
    result = evaluate_gate(s, GateOptions(max_nonfactual_rate=0.0, fail_on_not_judged=False))
    assert result.exit_status == ExitStatus.RUNTIME
    assert result.reasons[0].startswith("none of the 2 segments could be judged")


def test_no_responses_is_a_usage_error() -> None:
    result = evaluate_gate(Summary(), GateOptions(max_nonfactual_rate=1.0))
    assert result == GateResult(False, ExitStatus.USAGE,
                                ["no responses to check: the input has no lines"])


def test_empty_answers_pass() -> None:
    result = evaluate_gate(summarize(response("a"), response("b")),
                           GateOptions(max_nonfactual_rate=0.0, max_nonfactual_responses=0))
    assert result.passed and result.exit_status == ExitStatus.OK


def test_bad_lines_fail_by_default_and_only_then() -> None:
    s = summarize(response("a", SUPPORTED), bad_line(2, "missing 'response'"))
    result = evaluate_gate(s)
    assert result.exit_status == ExitStatus.USAGE
    assert result.reasons == ["1 of 2 input lines could not be read "
                              "(first, line 2: missing 'response')"]
    assert evaluate_gate(s, GateOptions(fail_on_errors=False)).passed


def test_all_lines_bad_fails_even_when_lenient() -> None:
    s = summarize(bad_line(1), bad_line(2))
    result = evaluate_gate(s, GateOptions(fail_on_errors=False))
    assert result.exit_status == ExitStatus.USAGE
    assert result.reasons == ["none of the 2 input lines could be read (first, line 1: not JSON)"]


def test_status_ranks_usage_then_runtime_then_gate_and_lists_every_reason() -> None:
    result = evaluate_gate(summarize(*mixed()), GateOptions(max_nonfactual_rate=0.1))
    assert result.exit_status == ExitStatus.USAGE
    assert [r.split()[0:2] for r in result.reasons] == [["1", "of"], ["1", "of"],
                                                       ["nonfactual", "rate"]]
    assert "input lines" in result.reasons[0]
    assert "segments (in 1 response) could not be judged" in result.reasons[1]
    s = summarize(response("a", JUDGE_ERROR, CONTRADICTED))
    assert evaluate_gate(s, GateOptions(max_nonfactual_rate=0.1)).exit_status == 3


@pytest.mark.parametrize("options", [{"max_nonfactual_rate": -0.1},
                                     {"max_nonfactual_rate": 1.5},
                                     {"max_nonfactual_rate": float("nan")},
                                     {"max_nonfactual_responses": -1}])
def test_invalid_options_are_usage_errors(options: dict[str, float]) -> None:
    with pytest.raises(UsageError, match="--max-nonfactual"):
        GateOptions(**options)  # type: ignore[arg-type]


# -- JUnit -----------------------------------------------------------------

HOSTILE = 'a <b> & "c" ]]> \x00\x1b\x0b\ud800 é'


def test_junit_counts_and_cases(tmp_path: Path) -> None:
    checked = mixed()
    s = summarize(*checked, judge="offline", index="/idx")
    s.seconds = 2.25
    path = tmp_path / "junit.xml"
    write_junit(path, iter(checked), s, suite_name="answers")
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root
    for el in (root, suite):
        assert (el.get("tests"), el.get("failures"), el.get("errors"), el.get("time")) == (
            "5", "1", "2", "2.250")
    assert suite.get("name") == "answers"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["judge"] == "offline" and props["nonfactual_rate"] == "0.333333"
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("ceg", "a"), ("ceg", "b"), ("ceg", "c"), ("ceg", "4"), ("ceg", "e")]
    assert [[child.tag for child in c] for c in cases] == [[], ["failure"], ["error"], ["error"],
                                                          []]
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("message") == (
        "2 of 3 segments flagged: [1] contradicted: because contradicted; "
        "[2] not_enough_evidence: because not_enough_evidence")
    assert failure.text == ("[1] nonfactual (contradicted): because contradicted\n"
                            "    Sentence 1 of b.\n"
                            "[2] nonfactual (not_enough_evidence): because not_enough_evidence\n"
                            "    Sentence 2 of b.")
    error = cases[3].find("error")
    assert error is not None and error.get("message") == "line 4: not JSON"
    assert error.get("type") == "bad_input"
    unjudged = cases[2].find("error")
    assert unjudged is not None and unjudged.get("type") == "not_judged"
    assert "judge_error" in (unjudged.text or "")


def test_junit_survives_hostile_text(tmp_path: Path) -> None:
    checked = [response(HOSTILE, CONTRADICTED, texts=[HOSTILE], reasons=[HOSTILE + "\nline 2"]),
               bad_line(2, HOSTILE)]
    path = tmp_path / "junit.xml"
    write_junit(path, checked, summarize(*checked, judge=HOSTILE))
    raw = path.read_bytes()
    assert raw.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    raw.decode("utf-8")
    root = ET.parse(path).getroot()
    safe = 'a <b> & "c" ]]> \ufffd\ufffd\ufffd\ufffd é'
    assert xml_safe(HOSTILE) == safe
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("name") == safe
    failure = case.find("failure")
    # segment text and reason are shortened to one line: \x0b is whitespace to str.split
    assert failure is not None
    one_line = 'a <b> & "c" ]]> \ufffd\ufffd \ufffd é'
    assert failure.text == f"[0] nonfactual (contradicted): {one_line} line 2\n    {one_line}"
    error = root.find("testsuite/testcase/error")
    assert error is not None and error.get("message") == "line 2: " + one_line
    assert {p.get("value") for p in root.iter("property")} >= {safe}


def test_junit_writer_streams_a_large_run(tmp_path: Path) -> None:
    path = tmp_path / "big.xml"
    writer = JUnitWriter(path)
    for i in range(3000):
        writer.add(response(i, CONTRADICTED if i % 3 == 0 else SUPPORTED))
    assert not path.exists()  # written only once the counts are known
    writer.close()
    suite = ET.parse(path).getroot()[0]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3000", "1000", "0")
    assert len(suite.findall("testcase")) == 3000


# -- Markdown --------------------------------------------------------------


def test_markdown_has_headline_table_reasons_and_examples(tmp_path: Path) -> None:
    checked = [response("q|1", SUPPORTED, CONTRADICTED,
                        texts=["Fine.", "Paris is in\nGermany | <b>x</b>"],
                        reasons=["", "passage 3 says France" + " very" * 100]),
               *mixed()]
    s = summarize(*checked, judge="offline", index="/idx")
    gate = evaluate_gate(s, GateOptions(max_nonfactual_rate=0.1, fail_on_errors=False,
                                        fail_on_not_judged=False))
    md = render_markdown(s, gate)
    lines = md.splitlines()
    assert lines[0] == "## ceg check: ❌ failed (exit 1)"
    assert "| Responses | 6 |" in lines
    assert "| Nonfactual rate | 37.5% (3 of 8 judged segments) |" in lines
    assert "- nonfactual rate 0.375 (3 of 8 judged segments) exceeds --max-nonfactual-rate 0.1" \
        in lines
    row = next(line for line in lines if line.startswith("| q\\|1 |"))
    assert row.startswith("| q\\|1 | 1 | Paris is in Germany \\| &lt;b&gt;x&lt;/b&gt; | "
                          "contradicted | passage 3 says France very")
    assert row.endswith("… |") and len(row) < 400
    assert "### Unreadable input lines" in lines and "| 4 | not JSON |" in lines
    assert "### Responses not judged" in lines
    # every table row has the same number of unescaped cell separators as its header
    table = [line for line in lines if line.startswith("| Response |")][0]
    body = [line for line in lines if line.startswith(("| q", "| b |"))]
    assert body and all(line.replace("\\|", "").count("|") == table.count("|") for line in body)

    out = tmp_path / "summary.md"
    out.write_text("earlier step\n", encoding="utf-8")
    write_markdown_summary(out, s, gate, append=True)
    assert out.read_text(encoding="utf-8") == "earlier step\n" + md
    write_markdown_summary(out, s, gate)
    assert out.read_text(encoding="utf-8") == md


def test_markdown_passed_run_and_capped_examples() -> None:
    s = summarize(*[response(i, CONTRADICTED) for i in range(5)], max_examples=2)
    gate = evaluate_gate(s)
    md = render_markdown(s, gate, title="answers")
    assert md.startswith("## answers: ✅ passed\n")
    assert "Why the gate failed" not in md
    assert "### Nonfactual responses (first 2 of 5)" in md
    assert md_cell("a\nb|c\\", 10) == "a b\\|c\\\\"


def test_ci_modules_import_no_cli_or_model_libraries() -> None:
    code = ("import sys, ceg_cli.report.gate, ceg_cli.report.ci; "
            "print(sorted(m for m in ('typer', 'rich', 'torch', 'faiss') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- spans: the unsupported words, quoted ---------------------------------------


def spanned() -> CheckedResponse:
    """A flagged segment with a name and a date unsupported (the date's passage says 1809),
    in a response whose segment carried a citation marker: "[1]" inside the response."""
    from ceg_cli.types import Span, SpanEvidence

    response = "Lincoln was born in  Springfield [1] in 1812."
    text = "Lincoln was born in  Springfield in 1812."
    at = response.index("Springfield")
    spans = (Span(at, at + 11, "Springfield", "name"),
             Span(response.index("1812"), response.index("1812") + 4, "1812", "date",
                  SpanEvidence("1809", 0)))
    result = SegmentResult(Segment(0, 0, len(response), text),
                           Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.2, (), "missing"), (),
                           spans=spans)
    return CheckedResponse(ResponseInput("lincoln", 1, response), (result,), NONFACTUAL)


def test_junit_and_the_step_summary_quote_the_spans(tmp_path: Path) -> None:
    checked = [spanned()]
    s = summarize(*checked)
    seg, = s.examples[0].flagged
    # Offsets into the shortened one-line text (the double blank is one now).
    assert seg.marked() == "Lincoln was born in [[Springfield]] in [[1812]]."
    assert seg.quoted() == "'Springfield' (name), '1812' (date; a passage has '1809')"
    path = tmp_path / "junit.xml"
    write_junit(path, iter(checked), s)
    failure = ET.parse(path).getroot().find(".//failure")
    assert failure is not None
    assert failure.get("message") == (
        "1 of 1 segments flagged: [0] not_enough_evidence (unsupported: 'Springfield' (name), "
        "'1812' (date; a passage has '1809')): missing")
    assert failure.text == (
        "[0] nonfactual (not_enough_evidence): missing\n"
        "    Lincoln was born in [[Springfield]] in [[1812]].\n"
        "    unsupported: 'Springfield' (name), '1812' (date; a passage has '1809')")
    md = render_markdown(s, evaluate_gate(s))
    assert ("| lincoln | 0 | Lincoln was born in **Springfield** in **1812**. | "
            "not_enough_evidence | missing |") in md.splitlines()


def test_a_span_the_shortened_text_cuts_off_is_not_shown() -> None:
    from ceg_cli.report.gate import shorten_spans

    text = "word " * 100 + "1812"
    short, spans = shorten_spans(text, [(text.index("1812"), len(text)), (0, 4), None])
    assert short.endswith("…") and spans == [(None, None), (0, 4), (None, None)]
