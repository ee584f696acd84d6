"""Spans of the unsupported words: offsets that hold in the response as given, in any
script and form, and the judges that fill them (issue 57)."""

from __future__ import annotations

import unicodedata

import pytest

from ceg_cli import Checker
from ceg_cli.judges.offline.offline import OfflineJudge
from ceg_cli.judges.offline.spanfill import fill_spans
from ceg_cli.judges.offline.spans import named_spans
from ceg_cli.spans import in_response, nfc_offsets
from ceg_cli.types import (
    FACTUAL,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    SUPPORTED,
    Evidence,
    JudgeItem,
    Segment,
    Span,
    Verdict,
)

LINCOLN = ("Abraham Lincoln was born on February 12, 1809, in Hodgenville, Kentucky. "
           "He was the 16th president of the United States.")


def item(text: str, *passages: str, language: str | None = None) -> JudgeItem:
    evidence = tuple(Evidence(n, f"d{n}", "", p, 0.5) for n, p in enumerate(passages))
    return JudgeItem(Segment(0, 0, len(text), text), evidence, None, text, language)


def offline(it: JudgeItem) -> Verdict:
    return fill_spans([it], OfflineJudge().judge([it]))[0]


def assert_offsets(response: str, spans: tuple[Span, ...] | list[dict]) -> None:
    for s in spans:
        start, end, text = (s.start, s.end, s.text) if isinstance(s, Span) else (
            s["start"], s["end"], s["text"])
        assert response[start:end] == text


def test_the_offline_judge_names_what_is_missing_with_its_kind_and_the_evidence_value() -> None:
    with Checker(judge="offline") as checker:
        response = ("Abraham Lincoln was born in Springfield, Massachusetts, in 1812 [1]. "
                    "He was the 16th president [1].")
        result = checker.check(response, contexts=[LINCOLN])
    first, second = result.segments
    assert first.label == NONFACTUAL and second.label == FACTUAL
    assert [(s.kind, s.text) for s in first.spans] == [
        ("name", "Springfield"), ("name", "Massachusetts"), ("date", "1812")]
    assert_offsets(response, first.spans)
    assert second.spans == ()  # supported: no spans
    record = result.to_dict()["segments"]
    assert record[1]["spans"] == []
    assert record[0]["spans"][2] == {
        "start": response.index("1812"), "end": response.index("1812") + 4, "text": "1812",
        "kind": "date", "evidence": {"value": "1809", "source": "context", "passage_id": 0,
                                     "context": 1, "title": ""}}


def test_a_number_that_is_not_a_date_and_a_missing_word() -> None:
    v = offline(item("Lincoln had 94 reactors in Kentucky.", LINCOLN))
    assert v.label == NONFACTUAL
    assert [(s.kind, s.text) for s in v.spans] == [("number", "94"), ("word", "reactors")]


def test_offsets_hold_in_nfd_text() -> None:
    text = unicodedata.normalize("NFD", "Lincoln lebte in Zürich und München, 1812.")
    v = offline(item(text, "Lincoln lebte in Wien.", language="de"))
    assert_offsets(text, v.spans)
    shown = [unicodedata.normalize("NFC", s.text) for s in v.spans]
    assert {"Zürich", "München", "1812"} <= set(shown)
    # The NFD "ü" is two characters: the span holds both.
    zurich = next(s for s in v.spans if unicodedata.normalize("NFC", s.text) == "Zürich")
    assert zurich.end - zurich.start == len("Zürich") + 1


@pytest.mark.parametrize("text, evidence, place, language", [
    ("林肯于1812年出生于波士顿。", "亚伯拉罕·林肯1809年出生于肯塔基州霍金维尔。", "波士顿", "zh"),
    ("ولد أبراهام لينكولن في بوسطن عام 1812.", "ولد أبراهام لينكولن في كنتاكي عام 1809.",
     "بوسطن", "ar"),
    ("נולד בשנת 1812 בבוסטון.", "נולד בשנת 1809 בקנטקי.", None, "he"),
    ("लिंकन का जन्म 1812 में बोस्टन में हुआ।", "लिंकन का जन्म 1809 में केंटकी में हुआ।", "बोस्टन",
     "hi"),
    ("リンカーンは1812年にボストンで生まれた。", "リンカーンは1809年にケンタッキーで生まれた。",
     "ボストン", "ja"),
])
def test_offsets_hold_in_cjk_and_right_to_left_text(
    text: str, evidence: str, place: str | None, language: str
) -> None:
    v = offline(item(text, evidence, language=language))
    assert v.label == NONFACTUAL
    assert_offsets(text, v.spans)
    number = next(s for s in v.spans if s.text == "1812")
    assert number.kind == "date" and number.evidence is not None
    assert number.evidence.value == "1809"
    if place is not None:  # the place the evidence lacks, whole (a stretch of CJK text)
        assert place in [s.text for s in v.spans]


def test_offsets_hold_in_segments_cut_by_the_length_bound() -> None:
    body = "Sie hat viele Häuser und Straßen und Brücken " * 40
    response = unicodedata.normalize("NFD", f"Die Stadt liegt am Fluss. {body}und 1812 in Zürich")
    with Checker(judge="offline", language="de") as checker:
        result = checker.check(response, contexts=["Die Stadt liegt am Fluss und hat Häuser."])
    cut = [s for s in result.segments if s.split is not None]
    assert len(cut) >= 2 and all(s.spans for s in cut)
    for s in result.segments:
        assert_offsets(response, s.spans)
        assert all(s.start <= sp.start < sp.end <= s.end for sp in s.spans)
    assert "1812" in [sp.text for sp in cut[-1].spans]


def test_nfc_offsets_map_conjoining_hangul_and_combining_marks_back() -> None:
    text = unicodedata.normalize("NFD", "서울은 1812년에 é")
    offsets = nfc_offsets(text)
    assert offsets.nfc == unicodedata.normalize("NFC", text)
    at = offsets.nfc.index("1812")
    start, end = offsets.original(at, at + 4)
    assert text[start:end] == "1812"
    start, end = offsets.original(0, 2)  # "서울": six jamo as given
    assert unicodedata.normalize("NFC", text[start:end]) == "서울"


def test_spans_of_a_segment_whose_markers_were_removed_point_into_the_response() -> None:
    response = "Lincoln [1] was born in 1812 [2] in Boston."
    segment = Segment(0, 0, len(response), "Lincoln was born in 1812 in Boston.")
    spans = (Span(20, 24, "1812", "date"), Span(0, 35, segment.text, "segment"))
    mapped = in_response(response, segment, spans)
    assert mapped[0].text == "1812" and response[mapped[0].start:mapped[0].end] == "1812"
    assert (mapped[1].start, mapped[1].end) == (0, len(response))
    assert_offsets(response, mapped)


class ModelJudge:
    """A judge that reads meaning (as nli:, minicheck:, hhem:) and gives no spans."""

    name = "model"
    method = "flags everything"

    def judge(self, items: list[JudgeItem]) -> list[Verdict]:
        return [Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.1, (), "no") for _ in items]


def test_a_judge_without_spans_gets_the_offline_ones_where_they_agree_else_the_segment() -> None:
    agree = item("Lincoln was born in 1812.", LINCOLN)
    disagree = item("Lincoln was born in Hodgenville, Kentucky.", LINCOLN)
    verdicts = fill_spans([agree, disagree], ModelJudge().judge([agree, disagree]))
    assert [(s.kind, s.text) for s in verdicts[0].spans] == [("date", "1812")]
    assert [(s.kind, s.text) for s in verdicts[1].spans] == [
        ("segment", "Lincoln was born in Hodgenville, Kentucky.")]
    # A supported verdict keeps no spans, whatever a judge gave.
    supported = Verdict(FACTUAL, SUPPORTED, 0.9, (0,), "", (Span(0, 1, "L", "word"),))
    assert fill_spans([agree], [supported])[0].spans == ()


def test_named_spans_find_words_as_written_and_drop_those_the_text_lacks() -> None:
    text = unicodedata.normalize("NFD", "Lincoln was born in Zürich in 1812.")
    spans, dropped = named_spans(text, ["zürich", "1812", "Boston", "1812"])
    assert [unicodedata.normalize("NFC", s.text) for s in spans] == ["Zürich", "1812"]
    assert_offsets(text, spans)
    assert dropped == 1


# -- the terminal ---------------------------------------------------------------


def spans_file(tmp_path) -> object:  # type: ignore[no-untyped-def]
    import json

    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps({
        "id": "lincoln", "contexts": [LINCOLN],
        "response": "Abraham Lincoln was born in Springfield, Massachusetts, in 1812. "
                    "He was the 16th president of the United States."}) + "\n",
        encoding="utf-8")
    return path


def test_ceg_check_prints_the_spans_plain_without_a_terminal(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("check", spans_file(tmp_path), "--judge", "offline", "--evidence",
                     "contexts", "--quiet")
    assert result.exit_code == 0, result.stderr
    assert "flagged segments:" in result.stderr
    assert ("lincoln [0] not_enough_evidence: Abraham Lincoln was born in [[Springfield]], "
            "[[Massachusetts]], in [[1812]].") in result.stderr
    assert ("unsupported: 'Springfield' (name), 'Massachusetts' (name), '1812' (date; a "
            "passage has '1809')") in result.stderr
    assert "\x1b[" not in result.stderr


def test_on_a_terminal_the_spans_are_underlined() -> None:
    import io

    from rich.console import Console

    from ceg_cli.cli.check_cmd import _flagged
    from ceg_cli.report.gate import FlaggedSegment, ResponseOutcome, ShownSpan

    seg = FlaggedSegment(0, "Born in 1812.", NONFACTUAL, NOT_ENOUGH_EVIDENCE, "r",
                         (ShownSpan(8, 12, "date", "1809"),))
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system="standard", width=200)
    _flagged([ResponseOutcome("x", 1, NONFACTUAL, 1, (seg,), 1)], console)
    shown = out.getvalue()
    assert "[[" not in shown
    # "1812" alone is underlined (SGR 4), the words around it are not.
    underlined = shown.split("\x1b[")
    assert any("4" in part.split("m", 1)[0].split(";") and part.split("m", 1)[1].startswith(
        "1812") for part in underlined)
    assert "unsupported: '1812' (date; a passage has '1809')" in shown


def test_a_cascade_s_second_judge_gets_the_offline_spans_where_the_offline_judge_flags() -> None:
    from ceg_cli.judges.offline.cascade import CascadeJudge

    # Every number and name found, too few words: the band the cascade hands on.
    it = item("Lincoln was born in Hodgenville, Kentucky, a quiet rural wooden cabin.", LINCOLN)
    cascade = CascadeJudge(OfflineJudge(), ModelJudge())
    verdict = fill_spans([it], cascade.judge([it]))[0]
    assert cascade.counts == {"offline": 0, "inner": 1}
    assert verdict.label == NONFACTUAL
    assert {s.kind for s in verdict.spans} == {"word"}
    assert {"quiet", "rural", "wooden", "cabin"} <= {s.text for s in verdict.spans}


def test_across_languages_the_spans_are_the_compared_numbers_and_names_or_the_segment() -> None:
    import numpy as np
    from test_crosslang_rule import DE, DE_WRONG_YEAR, FIRST, Loader, Table, judge_with
    from test_crosslang_rule import item as cross_item

    # A wrong year: the span is the year, not the German words the English evidence lacks.
    table = Table({DE_WRONG_YEAR: [1, 0], FIRST: [1, 0]})
    v = judge_with(Loader(table)).judge([cross_item(DE_WRONG_YEAR, "de")])[0]
    assert v.label == NONFACTUAL and v.reason.startswith("across languages (")
    assert [(s.kind, s.text) for s in v.spans] == [("date", "1899")]
    # Everything compared is found, but the meaning falls under the cut: the whole segment.
    table = Table({DE: [1, 0], FIRST: [0.5, np.sqrt(0.75)]})
    v = judge_with(Loader(table)).judge([cross_item(DE, "de")])[0]
    assert v.label == NONFACTUAL
    assert [(s.kind, s.start, s.end) for s in v.spans] == [("segment", 0, len(DE))]
    # Supported across languages: no spans.
    table = Table({DE: [1, 0], FIRST: [0.8, 0.6]})
    assert judge_with(Loader(table)).judge([cross_item(DE, "de")])[0].spans == ()
