"""``--language auto|CODE`` through check (issue 39.1): each record read in its language,
the language in the output and in what the judge is given; hostile text never loses a line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ceg_cli import Checker
from ceg_cli.check.pipeline import CheckOptions, check_batch, response_language
from ceg_cli.check.segment import segment_response
from ceg_cli.cli.main import app
from ceg_cli.errors import UsageError
from ceg_cli.report.records import SCHEMA_VERSION
from ceg_cli.types import FACTUAL, Context, JudgeItem, ResponseInput, Verdict

ZH_ANSWER = "亚里士多德出生于斯塔基拉。他是亚历山大大帝的老师。他在1900年获得了诺贝尔奖。"
ZH_CONTEXTS = ["亚里士多德出生于斯塔基拉，是古希腊哲学家。",
               "亚里士多德是亚历山大大帝的老师，曾在马其顿宫廷任教。"]
DE_ANSWER = "Aristoteles wurde in Stagira geboren. Er war der Lehrer Alexanders des Großen."
EN_CONTEXT = ("Aristotle was born in Stagira in 384 BC. He was the teacher of Alexander the "
              "Great at the Macedonian court.")


class RecordingJudge:
    """Says factual, and keeps what it was given."""

    name = "recording"

    def __init__(self) -> None:
        self.items: list[JudgeItem] = []

    def judge(self, items: list[JudgeItem]) -> list[Verdict]:
        self.items.extend(items)
        return [Verdict(FACTUAL, "supported", 1.0) for _ in items]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def test_the_language_reaches_the_judge_and_the_result() -> None:
    judge = RecordingJudge()
    items = [ResponseInput(1, 1, ZH_ANSWER, contexts=tuple(
                 Context(i + 1, t) for i, t in enumerate(ZH_CONTEXTS))),
             ResponseInput(2, 2, DE_ANSWER, contexts=(Context(1, EN_CONTEXT),))]
    from ceg_cli.check.ctxsearch import ContextSearch

    search = ContextSearch(lambda: None, language="auto")  # type: ignore[arg-type,return-value]
    out = check_batch(items, None, judge, CheckOptions(evidence="contexts"), search)
    assert [r.language for r in out] == ["zh", "de"]
    assert [s.segment.text for s in out[0].segments] == [
        "亚里士多德出生于斯塔基拉。", "他是亚历山大大帝的老师。", "他在1900年获得了诺贝尔奖。"]
    assert [i.language for i in judge.items] == ["zh"] * 3 + ["de"] * 2
    # Chinese segments find their Chinese passage by character bigrams.
    first, second = out[0].segments[0], out[0].segments[1]
    assert first.evidence[0].context == 1 and second.evidence[0].context == 2
    # A German answer against English contexts finds the English passage by the names.
    assert out[1].segments[0].evidence[0].text.startswith("Aristotle was born")


def test_a_language_named_is_every_record_s() -> None:
    item = ResponseInput(1, 1, "Paris is the capital of France.")
    assert response_language(item, "fr").language == "fr"
    assert response_language(item, "auto").language == "en"


def test_a_short_answer_is_told_by_its_question_too() -> None:
    item = ResponseInput(1, 1, "Ja.", question="War Aristoteles der Lehrer des jungen "
                         "Alexander, und wurde er in der Stadt Stagira geboren?")
    assert response_language(item, "auto").language == "de"


def test_an_unknown_code_is_a_usage_error_for_the_checker() -> None:
    with pytest.raises(UsageError, match="ceg languages"):
        Checker(language="klingon")


def test_english_records_are_segmented_exactly_as_before() -> None:
    text = "Dr. Smith went to Washington. He arrived at 5 p.m. on Monday.\n- A list item"
    judge = RecordingJudge()
    (out,) = check_batch([ResponseInput(1, 1, text, contexts=(Context(1, EN_CONTEXT),))],
                         None, judge, CheckOptions(evidence="contexts"),
                         _search("auto"))
    assert out.language == "en"
    assert [s.segment for s in out.segments] == segment_response(text)


def _search(language: str) -> Any:
    from ceg_cli.check.ctxsearch import ContextSearch

    return ContextSearch(lambda: None, language=language)  # type: ignore[arg-type,return-value]


HOSTILE = [
    {"id": "mixed", "response": "Aristotle (亚里士多德) was born in Stagira in 384 BC. He "
     "later taught the young Alexander the Great at the Macedonian court.",
     "contexts": [EN_CONTEXT]},
    {"id": "rtl", "response": "بلغ عدد السكان ١٬٠٠٠٫٥ ألف نسمة عام 2020. هل هذا صحيح؟",
     "contexts": ["عدد السكان 1000.5 ألف نسمة في 2020"]},
    {"id": "emoji", "response": "👨‍👩‍👧 🙂🙂 ‍‍ \u200d", "contexts": ["family"]},
    {"id": "thai", "response": "อริสโตเติลเกิดที่เมืองสตาเกียรา เขาเป็นครูของอเล็กซานเดอร์มหาราช",
     "contexts": ["อริสโตเติลเกิดที่เมืองสตาเกียรา"]},
    {"id": "ethiopic", "response": "ሰላም ለዓለም። እንዴት ነህ፧", "contexts": ["ሰላም"]},
    {"id": "ethiopic2", "response": "ደህና ነኝ።", "contexts": ["ደህና"]},
    {"id": "ja-vs-en", "response": "アリストテレスはスタゲイラで生まれた。",
     "contexts": [EN_CONTEXT]},
    {"id": "numbers", "response": "42", "contexts": ["42"]},
]


def test_hostile_records_are_all_checked_none_lost_the_fallback_said_once(
    tmp_path: Path,
) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", HOSTILE)
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["check", str(source), "--out", str(out),
                                      "--evidence", "contexts"])
    assert result.exit_code in (0, 1), result.output
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == [row["id"] for row in HOSTILE]
    assert all(r["error"] is None and r["schema_version"] == SCHEMA_VERSION for r in records)
    languages = {r["id"]: r["language"] for r in records}
    assert languages == {"mixed": "en", "rtl": "ar", "emoji": "und", "thai": "th",
                         "ethiopic": "und-Ethi", "ethiopic2": "und-Ethi", "ja-vs-en": "ja",
                         "numbers": "und"}
    said = [line for line in result.stderr.splitlines() if "cannot tell" in line]
    assert len(said) == 1 and "und-Ethi" in said[0] and "--language" in said[0]
    for r in records:
        for seg in r["segments"]:
            assert r["response"][seg["start"]:seg["end"]] == seg["text"]
    assert [s["text"] for s in records[1]["segments"]] == [
        "بلغ عدد السكان ١٬٠٠٠٫٥ ألف نسمة عام 2020.", "هل هذا صحيح؟"]


def test_the_cli_takes_a_language_code_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [HOSTILE[0]])
    bad = CliRunner().invoke(app, ["check", str(source), "--evidence", "contexts",
                                   "--language", "xx"])
    assert bad.exit_code == 2
    assert bad.stderr.strip().count("\n") == 0 and "ceg languages" in bad.stderr
    good = CliRunner().invoke(app, ["check", str(source), "--evidence", "contexts",
                                    "--language", "DE"])
    assert good.exit_code in (0, 1), good.output
    assert json.loads(good.stdout.splitlines()[0])["language"] == "de"


def test_ceg_languages_lists_the_codes() -> None:
    result = CliRunner().invoke(app, ["languages", "--json"])
    assert result.exit_code == 0
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    by_code = {r["language"]: r for r in rows}
    assert by_code["de"]["sentences"] == "punkt" and by_code["zh"]["words"] == \
        "character bigrams"
    assert len(CliRunner().invoke(app, ["languages", "--all", "--json"]).stdout.splitlines()) \
        > len(rows)


@pytest.mark.parametrize("answer", ["Lars Ulrich and James Hetfield.", "Bobby Darin.",
                                    "hydrogen peroxide", "President Richard Nixon"])
def test_a_name_for_an_answer_takes_the_question_s_language(answer: str) -> None:
    """HaluEval's answers are often a bare name: alone, one in six was taken for another
    language; with the question, none."""
    item = ResponseInput(1, 1, answer, question="Who founded the band that recorded the "
                         "album Master of Puppets in 1986?")
    assert response_language(item, "auto").language == "en"


def test_a_short_context_takes_its_record_s_language() -> None:
    from ceg_cli.check.ctxsearch import cut_contexts

    contexts = (Context(1, "Hawaii"), Context(2, "亚里士多德出生于斯塔基拉。"),
                Context(3, "Aristoteles wurde in Stagira geboren und war der Lehrer des jungen "
                           "Alexander des Großen am makedonischen Hof."))
    passages = cut_contexts(contexts, 100, "auto", "en")
    assert [chunk.language for _, chunk in passages] == ["en", "zh", "de"]


@pytest.mark.parametrize("contexts", [["."], ["a", "!!"], ["🙂", "👨‍👩‍👧"], ["I", "7"]])
def test_contexts_with_not_one_word_are_judged_not_crashed_on(contexts: list[str]) -> None:
    """bm25s cannot index passages with no word at all (its vocabulary is empty): such a
    record was an internal error that stopped the whole run."""
    judge = RecordingJudge()
    item = ResponseInput(1, 1, "Paris is the capital of France.",
                         contexts=tuple(Context(i + 1, t) for i, t in enumerate(contexts)))
    (out,) = check_batch([item], None, judge, CheckOptions(evidence="contexts"),
                         _search("auto"))
    assert out.error is None and len(out.segments) == 1
    assert out.segments[0].evidence[0].context == 1


def test_an_nfd_answer_gets_the_composed_verdicts_and_its_offsets_slice_what_was_given(
    tmp_path: Path,
) -> None:
    """Issue 51 item 2: a decomposed answer against a composed context is checked as the
    composed one is, and its record keeps the text the user gave, offsets into it."""
    import unicodedata

    answer = ("Die Universität München wurde 1472 gegründet. "
              "Sie zog später nach München um.")
    context = ("Die Universität München wurde 1472 in Ingolstadt gegründet und zog später "
               "nach München um.")
    records = {}
    for form in ("NFC", "NFD"):
        row = {"id": form, "response": unicodedata.normalize(form, answer),
               "contexts": [context]}
        source = write_jsonl(tmp_path / f"{form}.jsonl", [row])
        out = tmp_path / f"{form}.out.jsonl"
        result = CliRunner().invoke(app, ["check", str(source), "--out", str(out),
                                          "--evidence", "contexts", "--language", "en"])
        assert result.exit_code in (0, 1), result.output
        (records[form],) = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    nfd = records["NFD"]
    assert nfd["response"] == unicodedata.normalize("NFD", answer)
    assert len(nfd["segments"]) == 2
    for seg in nfd["segments"]:
        assert nfd["response"][seg["start"]:seg["end"]] == seg["text"]
    keep = ("label", "verdict", "citations")
    assert [{k: s.get(k) for k in keep} for s in nfd["segments"]] == [
        {k: s.get(k) for k in keep} for s in records["NFC"]["segments"]]
    assert records["NFC"]["segments"][0]["label"] == FACTUAL
