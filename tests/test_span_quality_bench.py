"""benchmarks/judges/span_quality.py's measuring parts: gold spans, tokens and the token counts
(the figures themselves come from running it: docs/measurements.md)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    # benchmarks/ or its stage folder (judges/), wherever the script lives.
    script = next(p for p in (BENCH / "span_quality.py", BENCH / "judges" / "span_quality.py")
                  if p.exists())
    spec = importlib.util.spec_from_file_location("span_quality", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gold_span_is_where_the_planted_sentence_differs(bench: ModuleType) -> None:
    true = "Er wurde 1809 in Hodgenville geboren."
    assert bench._difference("Er wurde 1812 in Hodgenville geboren.", true) == (11, 13)
    planted = "Er wurde 1809 in Boston geboren."
    start, end = bench._difference(planted, true)
    assert planted[start:end] == "Boston"
    negated = "Er wurde nicht 1809 in Hodgenville geboren."
    start, end = bench._difference(negated, true)
    assert negated[start:end].strip() == "nicht"


def test_tokens_are_words_and_single_wide_characters(bench: ModuleType) -> None:
    text = "林肯于1812年 was born, प्रधानमंत्री"
    assert [text[s:e] for s, e in bench.tokens(text)] == [
        "林", "肯", "于", "1812", "年", "was", "born", "प्रधानमंत्री"]


def test_token_precision_recall_and_kind(bench: ModuleType) -> None:
    tally = bench.Tally()
    text = "Lincoln was born in Springfield in 1812."
    year = text.index("1812")
    gold = [(year, year + 4, "date")]
    spans = [{"start": year, "end": year + 4, "kind": "date"},
             {"start": 0, "end": 7, "kind": "name"}]
    tally.add(text, gold, spans, True)
    tally.add(text, gold, [], False)  # not flagged: its gold token is missed
    figures = tally.figures()
    assert (figures["precision"], figures["recall"], figures["flagged"]) == (0.5, 0.5, 0.5)
    assert figures["f1"] == 0.5 and figures["kind_agrees"] == 1.0
