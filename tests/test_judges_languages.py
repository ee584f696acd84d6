"""Checkers and LLM judges in other languages (issue 39.7): English-trained checkers
say so once, the LLM judge's prompts allow any language, replies with reasoning in
any language parse."""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tiny_checkers import build

from ceg_cli.judges import create_judge
from ceg_cli.judges.english_only import EnglishOnly, item_language
from ceg_cli.llm.prompts import judge_messages, parse_judge_reply, regeneration_messages
from ceg_cli.types import Evidence, JudgeItem, Segment


def item(claim: str, *passages: str) -> JudgeItem:
    return JudgeItem(
        Segment(0, 0, len(claim), claim),
        tuple(Evidence(i, f"d{i}", "", p, 0.5) for i, p in enumerate(passages)),
    )


# --- English-trained checkers ----------------------------------------------------------


def test_the_first_non_english_segment_is_said_once() -> None:
    said: list[str] = []
    guard = EnglishOnly("minicheck:x", said.append)
    guard.check([item("Aristotle taught Alexander."), item("1921"), item("OK.")])
    assert said == []
    guard.check([item("Er war der Lehrer Alexanders des Großen.")])
    guard.check([item("他是亚历山大大帝的老师。")])
    assert len(said) == 1
    assert said[0].startswith("--judge minicheck:x was trained on English; segments in German (de)")
    assert "nli:mdeberta-v3-base-xnli" in said[0]


def test_without_a_callback_it_is_a_runtime_warning() -> None:
    guard = EnglishOnly("hhem:x")
    with pytest.warns(RuntimeWarning, match=r"Arabic \(ar\)"):
        guard.check([item("هو معلم الإسكندر الأكبر وقد ولد في مقدونيا.")])


def test_the_items_own_language_wins_over_detection() -> None:
    german_text = item("Er war der Lehrer Alexanders des Großen.")
    told = SimpleNamespace(segment=german_text.segment, language="en")
    assert item_language(told) == "en"
    assert item_language(german_text) == "de"
    assert item_language(item("2024")) is None  # no language to tell
    # The check's own "undetermined" is no language: the segment's is looked at.
    undetermined = JudgeItem(german_text.segment, (), language="und-Latn")
    assert item_language(undetermined) == "de"
    assert item_language(JudgeItem(item("2024").segment, (), language="und-Zyyy")) is None


@pytest.fixture(scope="module")
def roberta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build("roberta", tmp_path_factory.mktemp("checker") / "roberta")


def test_minicheck_warns_once_through_the_checks_callback(roberta: Path) -> None:
    said: list[str] = []
    judge: Any = create_judge(f"minicheck:{roberta}", {"on_warning": said.append})
    english = judge.judge([item("The river was born in paris.", "The river is in Paris.")])
    assert said == [] and len(english) == 1
    judge.judge([item("Der Fluss fließt durch Paris.", "The river is in Paris.")] * 2)
    judge.judge([item("河流流经巴黎。", "The river is in Paris.")])
    assert len(said) == 1 and "German (de)" in said[0]


def test_hhem_warns_too(tmp_path: Path) -> None:
    from test_judge_hhem import make_hhem

    folder = make_hhem(tmp_path / "hhem", build("t5", tmp_path / "flan-t5-base"))
    said: list[str] = []
    judge: Any = create_judge(f"hhem:{folder}", {"on_warning": said.append})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing goes to Python's warnings with a callback
        judge.judge([item("Он был учителем Александра Македонского.", "He taught Alexander.")])
    assert len(said) == 1 and "Russian (ru)" in said[0]


# --- the LLM judge's prompts -----------------------------------------------------------


def test_the_judge_prompt_allows_any_language_and_keeps_english_labels() -> None:
    messages = judge_messages(
        "Er war der Lehrer Alexanders des Großen.",
        [Evidence(1, "d1", "Aristotle", "Aristotle tutored Alexander the Great.", 0.8)],
        "Wer war Aristoteles?",
    )
    system, user = messages[0]["content"], messages[1]["content"]
    assert "may be in any language" in system
    assert "a document in one language can support or contradict a segment in another" in system
    assert '"Factual" or "Nonfactual", these English words whatever the language' in system
    assert "may be in different languages" in user
    # The data stays in its blocks, in its own script.
    assert "<segment>\nEr war der Lehrer Alexanders des Großen.\n</segment>" in user


def test_regeneration_answers_in_the_questions_language() -> None:
    messages = regeneration_messages(
        "亚里士多德是谁？", "他在1900年获得了诺贝尔奖。", ["他在1900年获得了诺贝尔奖。"],
        [Evidence(1, "d1", "Aristotle", "Aristotle was a Greek philosopher.", 0.8)],
    )
    assert "write your answer in the language of the question" in messages[0]["content"]


@pytest.mark.parametrize(
    ("reply", "factual", "supporting", "contradicting"),
    [('{"label": "Factual", "supporting_passages": [1], "contradicting_passages": [], '
      '"reason": "Dokument 1 sagt, dass Aristoteles Alexander unterrichtete."}', True, (1,), ()),
     ('{"label": "Nonfactual", "supporting_passages": [], "contradicting_passages": [2], '
      '"reason": "文档2说他从未获得诺贝尔奖。"}', False, (), (2,)),
     ('```json\n{"label": "Nonfactual", "reason": "الوثيقة لا تذكر ذلك"}\n```', False, (), ()),
     ("label：Nonfactual\ncontradicting passages：2，3\nreason：文档没有提到。", False, (), (2, 3)),
     ("该陈述是Factual的，因为文档1支持它。", True, (), ()),
     ("Die Aussage ist Nonfactual: kein Dokument erwähnt einen Nobelpreis.", False, (), ()),
     ("Verdict: Factual — документ 1 подтверждает это.", True, (), ())],
)  # fmt: skip
def test_replies_with_reasoning_in_any_language_parse(
    reply: str, factual: bool, supporting: tuple[int, ...], contradicting: tuple[int, ...]
) -> None:
    parsed = parse_judge_reply(reply)
    assert parsed is not None
    assert (parsed.factual, parsed.supporting, parsed.contradicting) == (
        factual, supporting, contradicting,
    )


@pytest.mark.parametrize(
    "reply",
    ["Das ist nicht eindeutig.", "这既是Factual也是Nonfactual。", "Factualness unclear",
     "label: Nonfactualish"],
)  # fmt: skip
def test_replies_without_one_clear_label_stay_unparsable(reply: str) -> None:
    assert parse_judge_reply(reply) is None
