"""The HTML report without a browser: the page, the embedded data, escaping, ``ceg report``.

``report_records()`` is the set of records the browser tests
(``test_report_browser.py``) also open: every verdict, a cited passage with a
URL, a hostile response, an unreadable line, text outside the BMP, a
regeneration.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from ceg_cli.check.pipeline import CheckedResponse, ResponseInput, SegmentResult
from ceg_cli.cli.report_cmd import report_command
from ceg_cli.report.gate import GateOptions, Summary, evaluate_gate
from ceg_cli.report.html import (
    ReportBuilder,
    _assets,
    csp_hash,
    embed_json,
    write_report,
)
from ceg_cli.report.records import to_record
from ceg_cli.types import (
    CONTRADICTED,
    FACTUAL,
    JUDGE_ERROR,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    NOT_JUDGED,
    SUPPORTED,
    Evidence,
    Segment,
    Verdict,
)

JUDGE = {"name": "test", "method": "a judge for tests"}
ARISTOTLE = Evidence(10, "308", "Aristotle", "Aristotle was a Greek philosopher and polymath.",
                     0.8123, "https://en.wikipedia.org/wiki/Aristotle")
TUTOR = Evidence(20, "308", "Aristotle", "Aristotle tutored Alexander the Great from 343 BC.",
                 0.71, "https://en.wikipedia.org/wiki/Aristotle")
HOSTILE_PASSAGE = Evidence(30, "<b>doc</b>", "<svg onload=window.__pwned=4>",
                           "<img src=x onerror=window.__pwned=5> passage", 0.5,
                           "javascript:window.__pwned=6")
HOSTILE_TEXT = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
HOSTILE_QUESTION = "</script><script>window.__pwned=3</script>\u2028<!--"


def response(
    rid: str, line: int, text: str, verdicts: list[tuple[str, Verdict, tuple[Evidence, ...]]],
    question: str | None = None, **fields: Any,
) -> CheckedResponse:
    """A checked response whose segments are the given pieces of ``text``."""
    results = []
    for i, (piece, verdict, evidence) in enumerate(verdicts):
        start = text.index(piece)
        results.append(SegmentResult(Segment(i, start, start + len(piece), piece), verdict,
                                     evidence))
    labels = {v.label for _, v, _ in verdicts}
    label = NOT_JUDGED if NOT_JUDGED in labels else NONFACTUAL if NONFACTUAL in labels else FACTUAL
    inp = ResponseInput(rid, line, text, question,
                        {"id": rid, "response": text, "question": question, **fields})
    return CheckedResponse(inp, tuple(results), label)


def report_records() -> list[dict[str, Any]]:
    supported = Verdict(FACTUAL, SUPPORTED, 0.9, (0,), "found in the passage")
    cited = response(
        "cited", 1, "🚀 Aristotle was a Greek philosopher. He tutored Alexander the Great.",
        [("Aristotle was a Greek philosopher.", supported, (ARISTOTLE, TUTOR)),
         ("He tutored Alexander the Great.", supported, (TUTOR, ARISTOTLE))],
        "Who was Aristotle?", model="gpt-test",
    )
    flagged = response(
        "flagged", 2, "Sure! Aristotle tutored Julius Caesar. He was born in 1990.",
        [("Sure!", Verdict(FACTUAL, NO_CLAIM, 1.0, (), "no claim"), ()),
         ("Aristotle tutored Julius Caesar.",
          Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.2, (), "'Julius Caesar' not in the evidence"),
          (TUTOR,)),
         ("He was born in 1990.",
          Verdict(NONFACTUAL, CONTRADICTED, 0.01, (), "the evidence says 384 BC"), (ARISTOTLE,))],
        "Whom did Aristotle teach?",
    )
    hostile = response(
        '"><script>window.__pwned=7</script>', 3, HOSTILE_TEXT + " Aristotle was Greek.",
        [(HOSTILE_TEXT, Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.1, (), "<i>reason</i>"),
          (HOSTILE_PASSAGE,)),
         ("Aristotle was Greek.", Verdict(FACTUAL, SUPPORTED, 0.8, (0,), ""), (HOSTILE_PASSAGE,))],
        HOSTILE_QUESTION,
    )
    unjudged = response(
        "unjudged", 4, "Aristotle wrote on logic.",
        [("Aristotle wrote on logic.", Verdict(NOT_JUDGED, JUDGE_ERROR, 0.0, (), "judge timeout"),
          (ARISTOTLE,))],
    )
    bad = CheckedResponse(
        ResponseInput("5", 5, error="r.jsonl:5: field 'response' must be a string, got number"),
        (), "error")
    records = [to_record(c, JUDGE) for c in (cited, flagged, hostile, unjudged, bad)]
    retry = to_record(response("flagged", 2, "Aristotle tutored Alexander the Great.",
                               [("Aristotle tutored Alexander the Great.", supported, (TUTOR,))]),
                      JUDGE)
    records[1]["regeneration"] = {"attempts": [retry]}
    return records


# -- records checked against their own contexts ------------------------------------

EIFFEL_CONTEXT = {"id": "eiffel", "title": "Eiffel Tower",
                  "url": "https://en.wikipedia.org/wiki/Eiffel_Tower",
                  "text": "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars "
                          "in Paris, France."}
# Text outside the BMP before the passage: Python and JavaScript count it differently.
BUILT_CONTEXT = "🗼🚀 Construction: the tower was finished in March 1889 for the World's Fair."
HOSTILE_CONTEXT = {"title": "<svg onload=window.__pwned=8>", "url": "javascript:window.__pwned=9",
                   "text": "<img src=x onerror=window.__pwned=10> Gustave Eiffel's company "
                           "designed and built the tower."}
RAG_CONTEXTS = [EIFFEL_CONTEXT, BUILT_CONTEXT, HOSTILE_CONTEXT]
UNRESOLVED_REASON = "[7] points past the 3 contexts"
IRRELEVANT_REASON = "context 3 supports no part of it"


def context_passage(contexts: list[Any], position: int, piece: str, sim: float,
                    passage_id: int) -> Evidence:
    """The passage ``piece`` of context ``position``, as a contexts check writes it."""
    ctx = contexts[position - 1]
    ctx = ctx if isinstance(ctx, dict) else {"text": ctx}
    start = ctx["text"].index(piece)
    return Evidence(passage_id, str(ctx.get("id") or position), ctx.get("title") or "", piece,
                    sim, ctx.get("url"), position, start, start + len(piece))


def rag_record(rid: str = "rag", line: int = 1) -> dict[str, Any]:
    """A RAGAS-shaped record checked against its contexts, its own ``[n]`` markers verified."""
    at_paris = context_passage(RAG_CONTEXTS, 1, "The Eiffel Tower is a wrought-iron lattice tower "
                               "on the Champ de Mars in Paris", 0.83, 0)
    built = context_passage(RAG_CONTEXTS, 2, "the tower was finished in March 1889", 0.77, 1)
    company = context_passage(RAG_CONTEXTS, 3, "Gustave Eiffel's company designed and built the "
                              "tower.", 0.74, 2)
    text = ("The Eiffel Tower is in Paris [1]. It was finished in 1889 [2][3]. "
            "It is 500 metres tall [7]. Gustave Eiffel's company built it.")
    checked = response(rid, line, text, [
        ("The Eiffel Tower is in Paris [1].", Verdict(FACTUAL, SUPPORTED, 0.93, (0,), "in Paris"),
         (at_paris, built)),
        ("It was finished in 1889 [2][3].", Verdict(FACTUAL, SUPPORTED, 0.88, (0,), "1889"),
         (built, company)),
        ("It is 500 metres tall [7].",
         Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.12, (), "'500 metres' not in the evidence"),
         (at_paris,)),
        ("Gustave Eiffel's company built it.", Verdict(FACTUAL, SUPPORTED, 0.9, (0,), ""),
         (company,)),
    ], "When was the Eiffel Tower built?", retrieved_contexts=RAG_CONTEXTS)
    checked = replace(checked, evidence_source="contexts", input=replace(
        checked.input, read={"response": "response", "question": "question",
                             "contexts": "retrieved_contexts"}))
    record = to_record(checked, JUDGE)
    checks = [
        {"refs": ["1"], "contexts": [1], "unresolved": [], "status": "supported",
         "irrelevant": [], "reason": "context 1 supports it"},
        {"refs": ["2", "3"], "contexts": [2, 3], "unresolved": [], "status": "supported",
         "irrelevant": [3], "reason": IRRELEVANT_REASON},
        {"refs": ["7"], "contexts": [], "unresolved": ["7"], "status": "unsupported",
         "irrelevant": [], "reason": UNRESOLVED_REASON},
        {"refs": [], "contexts": [], "unresolved": [], "status": "uncited", "irrelevant": [],
         "reason": "a claim with no citation"},
    ]
    for seg, check in zip(record["segments"], checks):
        seg["citation_check"] = check
    record["citation_check"] = {"sentences": 4, "supported": 2, "uncited": 1, "citations": 4,
                                "relevant": 2, "unresolved": 1, "recall": 0.5,
                                "precision": 0.5}
    return record


def empty_contexts_record() -> dict[str, Any]:
    """A record whose list of contexts was empty: judged on no evidence."""
    checked = response("empty", 2, "The tower is blue.",
                       [("The tower is blue.", Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.0, (),
                                                       "no evidence"), ())], contexts=[])
    checked = replace(checked, evidence_source="none",
                      input=replace(checked.input, read={"response": "response",
                                                         "contexts": "contexts"}))
    record = to_record(checked, JUDGE)
    record["citation_check"] = None
    record["segments"][0]["citation_check"] = None
    return record


def contexts_records() -> list[dict[str, Any]]:
    return [rag_record(), empty_contexts_record()]


class Elements(HTMLParser):
    """The page's script and style elements, with their text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str | None], str]] = []
        self._open: tuple[str, dict[str, str | None]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._open = (tag, dict(attrs))
            self.found.append((tag, dict(attrs), ""))

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            tag, attrs, text = self.found[-1]
            self.found[-1] = (tag, attrs, text + data)

    def handle_endtag(self, tag: str) -> None:
        self._open = None


def elements(page: str) -> list[tuple[str, dict[str, str | None], str]]:
    parser = Elements()
    parser.feed(page)
    return parser.found


@pytest.fixture
def builder() -> ReportBuilder:
    b = ReportBuilder()
    for record in report_records():
        b.add(record)
    return b


# -- safety --------------------------------------------------------------------


def test_embedded_json_cannot_end_its_script_block() -> None:
    value = {"t": "</script><!-- <script> & \u2028\u2029 \ud800 \\<", "n": [1, None]}
    text = embed_json(value)
    for unsafe in "<>&\u2028\u2029\ud800":
        assert unsafe not in text
    assert json.loads(text) == value
    text.encode("utf-8")  # a lone surrogate would not encode


def test_hostile_text_stays_data(builder: ReportBuilder) -> None:
    page = builder.render()
    found = elements(page)
    # Exactly the page's own two scripts: the data block and the code.
    scripts = [(attrs, text) for tag, attrs, text in found if tag == "script"]
    assert [attrs for attrs, _ in scripts] == [{"type": "application/json", "id": "ceg-data"}, {}]
    assert json.loads(scripts[0][1]) == json.loads(json.dumps(builder.data()))
    assert "__pwned" not in scripts[1][1]
    # Outside the data block nothing of the records appears unescaped.
    outside = page.replace(scripts[0][1], "")
    assert "__pwned" not in outside
    assert "<svg onload" not in outside and "<img" not in outside


def test_csp_allows_only_the_page_own_script_and_style(builder: ReportBuilder) -> None:
    page = builder.render()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp is not None
    policy = csp.group(1)
    code = [text for tag, attrs, text in elements(page) if tag == "script" and not attrs]
    style = [text for tag, _, text in elements(page) if tag == "style"]
    assert f"script-src {csp_hash(code[0])};" in policy
    assert f"style-src {csp_hash(style[0])};" in policy
    assert "default-src 'none'" in policy and "unsafe" not in policy


def test_script_never_parses_data_as_html() -> None:
    js = _assets("report.js")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "new Function", "srcdoc"):
        assert sink not in js, sink
    assert "textContent" in js


def test_the_core_imports_no_cli_or_model_library() -> None:
    code = ("import sys, ceg_cli.report.html; "
            "print(sorted(m for m in ('typer', 'rich', 'torch', 'faiss') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_overview_escapes_and_counts(builder: ReportBuilder) -> None:
    gate = evaluate_gate(builder.summary, GateOptions(max_nonfactual_rate=0.1))
    page = builder.render(gate=gate, index="<idx>", title="<b>t</b>")
    assert "<title>&lt;b&gt;t&lt;/b&gt;</title>" in page
    assert "&lt;idx&gt;" in page and "<idx>" not in page
    tile = re.search(r'<div class="tile gate failed">.*?exit status (\d)', page)
    assert tile is not None and tile.group(1) == str(int(gate.exit_status))
    # The first-ranked reason names the unreadable line; every reason is listed.
    assert page.count("<li>", page.index('class="reasons"')) >= len(gate.reasons) == 3
    # Responses: 1 factual, 2 nonfactual, 1 not judged, 1 error; radios for those present.
    radios = re.findall(r'value="(\w+)" id="filter-\w+"(?: checked)?> [\w ]+ <span class="n">(\d+)',
                        page)
    assert radios == [("all", "5"), ("nonfactual", "2"), ("not_judged", "1"), ("error", "1"),
                      ("factual", "1")]
    assert "Segments by verdict" in page and '<rect class="f-contradicted"' in page


# -- the embedded data -----------------------------------------------------------


def test_text_is_cut_along_segments_outside_the_bmp(builder: ReportBuilder) -> None:
    cited = builder.responses[0]
    assert cited["parts"] == [
        ["🚀 ", -1], ["Aristotle was a Greek philosopher.", 0], [" ", -1],
        ["He tutored Alexander the Great.", 1],
    ]
    assert "".join(p[0] for p in cited["parts"]) == report_records()[0]["response"]


def test_bad_offsets_fall_back_to_segment_texts() -> None:
    record = report_records()[1]
    record["segments"][1]["start"] += 1
    b = ReportBuilder()
    b.add(record)
    texts = [p for p in b.responses[0]["parts"] if p[1] >= 0]
    assert texts == [[s["text"], i] for i, s in enumerate(record["segments"])]


def test_passages_are_stored_once_and_evidence_kept_for_flagged_segments(
    builder: ReportBuilder,
) -> None:
    texts = [str(p[2]) for p in builder.passages]
    assert sorted(texts) == sorted({ARISTOTLE.text, TUTOR.text, HOSTILE_PASSAGE.text})
    cited, flagged = builder.responses[0], builder.responses[1]
    assert [[c[0], builder.passages[c[1]][2], c[2]] for c in cited["segs"][0]["c"]] == [
        [1, ARISTOTLE.text, 0.8123]]
    assert "e" not in cited["segs"][0]  # supported: citations only
    assert [builder.passages[e[0]][0] for e in flagged["segs"][1]["e"]] == ["Aristotle"]
    everything = ReportBuilder(all_evidence=True)
    everything.add(report_records()[0])
    assert len(everything.responses[0]["segs"][0]["e"]) == 2


def test_odd_numbers_and_fields() -> None:
    record = report_records()[0]
    record["segments"][0]["citations"][0]["similarity"] = math.nan
    record["segments"][0]["score"] = "high"
    record["extra"] = {"nested": [1, 2]}
    b = ReportBuilder()
    b.add(record)
    seg = b.responses[0]["segs"][0]
    assert seg["c"][0][2] is None and seg["s"] is None
    assert b.responses[0]["fields"] == {"model": "gpt-test", "extra": '{ "nested": [ 1, 2 ] }'}
    embed_json(b.data())  # allow_nan=False would raise on a NaN left behind


@pytest.mark.parametrize(
    ("regeneration", "expected"),
    [
        (["first try", "second try"],
         [{"label": "", "parts": [["first try", -1]], "segs": []},
          {"label": "", "parts": [["second try", -1]], "segs": [], "final": True}]),
        ({"attempts": ["a"], "final": {"response": "b", "label": "factual"}},
         [{"label": "", "parts": [["a", -1]], "segs": []},
          {"label": "factual", "parts": [["b", -1]], "segs": [], "final": True}]),
        ({"attempts": [42]}, [{"raw": "42", "final": True}]),
    ],
)
def test_regeneration_is_read_loosely(regeneration: Any, expected: list[Any]) -> None:
    record = report_records()[0]
    record["regeneration"] = regeneration
    b = ReportBuilder()
    b.add(record)
    assert b.responses[0]["regen"] == {"attempts": expected}


def test_unreadable_regeneration_is_shown_as_json() -> None:
    record = report_records()[0]
    record["regeneration"] = {"something": "<new>"}
    b = ReportBuilder()
    b.add(record)
    assert json.loads(b.responses[0]["regen"]["raw"]) == {"something": "<new>"}


def test_regeneration_attempt_keeps_its_segments(builder: ReportBuilder) -> None:
    attempt = builder.responses[1]["regen"]["attempts"][0]
    assert attempt["final"] and attempt["label"] == FACTUAL
    assert attempt["segs"][0]["c"][0][0] == 1


# -- files and the command ---------------------------------------------------------


def test_write_report_from_a_file_equals_from_records(tmp_path: Path) -> None:
    records = tmp_path / "checked.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in report_records()), encoding="utf-8")
    from_file = write_report(tmp_path / "a.html", records)
    from_list = write_report(tmp_path / "b.html", report_records())
    assert from_file.data() == from_list.data()
    assert from_file.summary.to_dict() == from_list.summary.to_dict()
    assert from_file.summary.responses == 5 and from_file.summary.nonfactual_segments == 3
    page = (tmp_path / "a.html").read_text(encoding="utf-8")
    assert "checked.jsonl" in page and not list(tmp_path.glob(".*.tmp"))


def cli(*args: str | Path) -> Result:
    app = typer.Typer()
    app.callback()(lambda: None)  # a group, so the command keeps its name
    app.command("report")(report_command)
    return CliRunner().invoke(app, ["report", *map(str, args)], catch_exceptions=False)


def test_report_command_writes_the_page(tmp_path: Path) -> None:
    records = tmp_path / "checked.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in report_records()), encoding="utf-8")
    out = tmp_path / "deep" / "report.html"
    result = cli(records, "-o", out, "--max-nonfactual-rate", "0.5", "--index", "idx")
    assert result.exit_code == 0, result.output
    assert "wrote" in result.stderr and "5 responses" in result.stderr
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # The gate, re-decided from the records: an unreadable line and an unjudged segment fail it.
    assert '<div class="tile gate failed">' in page and ">idx</dd>" in page


def test_report_command_skips_a_torn_last_line_and_leaves_the_file(tmp_path: Path) -> None:
    records = tmp_path / "checked.jsonl"
    content = json.dumps(report_records()[0]) + "\n" + '{"schema_version": 1, "id": "x", "li'
    records.write_text(content, encoding="utf-8")
    result = cli(records, "-o", tmp_path / "r.html")
    assert result.exit_code == 0, result.output
    assert "line 2 is incomplete" in result.stderr
    assert records.read_text(encoding="utf-8") == content
    assert "ceg report: 1 responses" in (tmp_path / "r.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"schema_version": 1}\n', "line 1: not a ceg check output record"),
        ("not json\n", "line 1: not JSON"),
        ('{"id": 1}\n', "no schema_version"),
    ],
)
def test_report_command_refuses_other_files(tmp_path: Path, content: str, message: str) -> None:
    records = tmp_path / "other.jsonl"
    records.write_text(content, encoding="utf-8")
    result = cli(records, "-o", tmp_path / "r.html")
    assert result.exit_code == 2
    assert message in result.stderr
    assert not (tmp_path / "r.html").exists()


def test_report_command_usage_errors(tmp_path: Path) -> None:
    records = tmp_path / "checked.jsonl"
    records.write_text(json.dumps(report_records()[0]) + "\n", encoding="utf-8")
    assert cli(tmp_path / "missing.jsonl").exit_code == 2
    same = cli(records, "-o", records)
    assert same.exit_code == 2 and "records file itself" in same.stderr
    assert cli(records, "-o", tmp_path).exit_code == 2


# -- records checked against their own contexts ------------------------------------


def test_contexts_are_stored_once_with_the_cited_spans() -> None:
    b = ReportBuilder()
    for n in range(3):  # many questions, the same retrieved contexts
        b.add(rag_record(f"rag{n}", n + 1))
    assert len(b.contexts) == 3
    assert b.contexts[0] == ["eiffel", "Eiffel Tower", EIFFEL_CONTEXT["url"],
                             EIFFEL_CONTEXT["text"]]
    assert b.contexts[1] == [None, None, None, BUILT_CONTEXT]
    ctx = b.responses[0]["ctx"]
    assert ctx["f"] == "retrieved_contexts" and ctx["n"] == [0, 1, 2]
    assert all(r["ctx"] == ctx for r in b.responses)
    # Each citation's span, in UTF-16 units as the page's script counts: the two
    # characters outside the BMP before the passage of context 2 count twice.
    record = rag_record()
    for pos, start, end, marker in ctx["hl"]:
        (cited,) = [c for s in record["segments"] for c in s["citations"]
                    if c["marker"] == marker]
        assert cited["context"] == pos
        text = b.contexts[ctx["n"][pos - 1]][3]
        assert text.encode("utf-16-le")[2 * start:2 * end].decode("utf-16-le") == cited["text"]
    assert ctx["hl"][1] == [2, 19, 55, 2]
    # A context's passage says which context it was cut from.
    assert [p[4] for p in b.passages] == [1, 2, 3]


def test_contexts_field_is_shown_as_contexts_not_as_a_field() -> None:
    b = ReportBuilder()
    b.add(rag_record())
    fields = b.responses[0].get("fields", {})
    assert "retrieved_contexts" not in fields and "citation_check" not in fields
    assert b.responses[0]["src"] == "contexts"


def test_citation_checks_are_kept_per_segment_and_record() -> None:
    b = ReportBuilder()
    b.add(rag_record())
    r = b.responses[0]
    assert [s["cc"] for s in r["segs"]] == [
        {"st": "supported", "refs": ["1"], "cx": [1], "r": "context 1 supports it"},
        {"st": "supported", "refs": ["2", "3"], "cx": [2, 3], "ir": [3], "r": IRRELEVANT_REASON},
        {"st": "unsupported", "refs": ["7"], "un": ["7"], "r": UNRESOLVED_REASON},
        {"st": "uncited", "r": "a claim with no citation"},
    ]
    assert r["cc"] == {"rec": 0.5, "prec": 0.5, "n": 4, "sup": 2, "unc": 1, "cit": 4, "rel": 2,
                       "un": 1}


def test_empty_contexts_and_a_dropped_field() -> None:
    b = ReportBuilder()
    b.add(empty_contexts_record())
    assert b.responses[0]["ctx"] == {"f": "contexts", "n": [], "hl": []}
    assert b.responses[0]["src"] == "none" and "cc" not in b.responses[0]
    assert "cc" not in b.responses[0]["segs"][0]
    # A contexts field dropped from the record (over 1 MiB): the passages alone.
    record = rag_record()
    del record["retrieved_contexts"]
    b = ReportBuilder()
    b.add(record)
    assert "ctx" not in b.responses[0] and b.passages[0][4] == 1


@pytest.mark.parametrize(
    "damage",
    [lambda c: c.update(start=c["start"] + 1), lambda c: c.update(context=9),
     lambda c: c.update(end="x"), lambda c: c.update(context=True)],
    ids=["span", "position", "type", "bool"],
)
def test_a_citation_whose_span_does_not_fit_is_not_highlighted(damage: Any) -> None:
    record = rag_record()
    damage(record["segments"][0]["citations"][0])
    b = ReportBuilder()
    b.add(record)
    assert [h[3] for h in b.responses[0]["ctx"]["hl"]] == [2, 3]


def test_unreadable_contexts_leave_the_passages() -> None:
    record = rag_record()
    record["retrieved_contexts"] = 42
    b = ReportBuilder()
    b.add(record)
    r = b.responses[0]
    assert "ctx" not in r and r["fields"]["retrieved_contexts"] == "42"
    assert b.passages[0][4] == 1


def test_index_mode_data_is_unchanged(builder: ReportBuilder) -> None:
    for r in builder.responses:
        assert not {"ctx", "src", "cc"} & set(r)
        assert all("cc" not in s for s in r["segs"])
    assert all(len(p) == 4 for p in builder.passages) and builder.contexts == []
    assert "Citation" not in builder.render()


def test_hostile_contexts_stay_data() -> None:
    b = ReportBuilder()
    b.add(rag_record())
    page = b.render()
    scripts = [text for tag, attrs, text in elements(page) if tag == "script"]
    assert len(scripts) == 2 and json.loads(scripts[0]) == json.loads(json.dumps(b.data()))
    outside = page.replace(scripts[0], "")
    assert "__pwned" not in outside and "<svg onload" not in outside and "<img" not in outside


def test_overview_shows_the_run_citation_figures() -> None:
    b = ReportBuilder()
    for record in contexts_records():
        b.add(record)
    # Counted from the records: 2 of 4 sentences supported, 2 of 4 citations relevant.
    tiles = re.findall(r'<div class="tile cite-rate"><div class="tile-name">([\w ]+)</div>'
                       r'<div class="tile-value">([^<]+)</div>', b.render())
    assert tiles == [("Citation recall", "50.0%"), ("Citation precision", "50.0%")]

    class RunSummary(Summary):
        """The run's own figures, as ``ceg check`` counted them."""

        citation_recall = 0.25
        citation_precision = None

    tiles = re.findall(r'<div class="tile-name">(Citation \w+)</div><div class="tile-value">'
                       r'([^<]+)</div>', b.render(RunSummary()))
    assert tiles == [("Citation recall", "25.0%"), ("Citation precision", "n/a")]


def test_a_run_on_contexts_alone_says_it_read_no_index() -> None:
    from ceg_cli.report.gate import Summary
    from ceg_cli.report.html import _index_info

    contexts_only = Summary(evidence_sources={"contexts": 3, "none": 1})
    assert _index_info(None, contexts_only) == (
        "none: each response was checked against its own contexts")
    assert _index_info(None, Summary(evidence_sources={"contexts": 2, "index": 1})) == (
        "not recorded")
    assert _index_info(None) == "not recorded"
