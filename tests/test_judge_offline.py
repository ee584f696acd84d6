"""The offline judge on hand-made items: no model, no index, milliseconds."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from ceg_cli.errors import UsageError
from ceg_cli.judges import create_judge
from ceg_cli.judges.cuts import Cuts
from ceg_cli.judges.offline.offline import (
    MIN_COVERAGE,
    RULE_CUT,
    OfflineJudge,
    analyse,
    number_key,
    specifics,
    stem,
)
from ceg_cli.types import (
    FACTUAL,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    SUPPORTED,
    Evidence,
    JudgeItem,
    Segment,
)

REACTORS = (
    "As of 2022 the United States had 92 operable nuclear power reactors, more than any "
    "other country; France, China and Russia follow."
)
UNRELATED = "The peregrine falcon is a bird of prey found on every continent except Antarctica."


def item(text: str, *passages: str, question: str | None = None) -> JudgeItem:
    evidence = tuple(
        Evidence(i, f"doc{i}", f"Title {i}", p, round(0.9 - 0.1 * i, 2))
        for i, p in enumerate(passages)
    )
    return JudgeItem(Segment(0, 0, len(text), text), evidence, question, text)


def judge_one(it: JudgeItem, cut: float | None = None):  # noqa: ANN201 - a Verdict
    """The shipped judge's verdict, or at ``cut`` in every setting."""
    judge = OfflineJudge() if cut is None else OfflineJudge(Cuts.same(cut, "test"))
    (verdict,) = judge.judge([it])
    return verdict


def test_a_number_absent_from_the_evidence_makes_the_segment_nonfactual() -> None:
    v = judge_one(item("The United States has 94 operable nuclear power reactors.", REACTORS))
    assert (v.label, v.verdict) == (NONFACTUAL, NOT_ENOUGH_EVIDENCE)
    assert v.reason.startswith("'94' not in the evidence"), v.reason
    assert v.cited == ()
    assert 0.0 <= v.score < 0.5


def test_the_reason_names_missing_specifics_and_words() -> None:
    v = judge_one(item("The United States has 94 operating reactors.", REACTORS))
    assert v.label == NONFACTUAL
    assert v.reason.startswith("'94' and 'operating' not in the evidence"), v.reason


def test_a_different_number_near_the_same_word_is_a_hint_not_a_contradiction() -> None:
    v = judge_one(item("The United States has 94 operable nuclear power reactors.", REACTORS))
    assert v.verdict == NOT_ENOUGH_EVIDENCE
    # The shared word nearest to the number in the segment is named.
    assert "the evidence has '92' near 'operable'" in v.reason, v.reason


def test_a_fully_covered_segment_is_supported_and_cites_its_passage() -> None:
    text = "The United States had 92 operable nuclear power reactors in 2022."
    v = judge_one(item(text, UNRELATED, REACTORS))
    assert (v.label, v.verdict) == (FACTUAL, SUPPORTED)
    assert v.cited == (1,), "only the passage holding the specifics is cited"
    assert v.score == 1.0
    assert "'92'" in v.reason and "'United States'" in v.reason


def in_documents(it: JudgeItem, *docs: str, setting: str = "index") -> JudgeItem:
    """``it`` with its passages in documents ``docs`` (one a passage), in ``setting``."""
    evidence = tuple(replace(e, doc_id=d) for e, d in zip(it.evidence, docs, strict=True))
    return replace(it, evidence=evidence, setting=setting)


def test_citations_cover_specifics_spread_over_passages() -> None:
    """Passages of one document (a sentence across a passage boundary) support together."""
    v = judge_one(in_documents(item("Aristotle taught Alexander in Macedonia.",
                                    "Aristotle was a Greek philosopher.", UNRELATED,
                                    "Alexander was taught in Macedonia by him."),
                               "aristotle", "falcon", "aristotle"))
    assert v.label == FACTUAL
    assert v.cited == (0, 2)


def test_passages_of_different_documents_do_not_add_up_to_support() -> None:
    """Issue 60 item 4: against an index, every number and name, and the share of content
    words, must be in the passages of one document; a name in one article and a number in
    another supported "Apollo 11 landed on Mars in 1975." before. A record's own contexts
    (the contexts setting), chosen for the answer, still support it together."""
    text = "The probe reached Mars in 1975 after a long flight."
    parts = item(text, "The probe reached Mars after a long flight.",
                 "In 1975 the probe was launched on a long flight.")
    apart = judge_one(in_documents(parts, "mars", "angola"))
    assert (apart.label, apart.verdict) == (NONFACTUAL, NOT_ENOUGH_EVIDENCE)
    assert apart.reason == ("'Mars' and '1975' are in the evidence, but no one document "
                            "holds them all"), apart.reason
    assert apart.score < RULE_CUT
    assert judge_one(in_documents(parts, "probe", "probe")).label == FACTUAL
    assert judge_one(in_documents(parts, "mars", "angola", setting="contexts")).label == FACTUAL


def test_content_words_count_in_the_document_holding_the_specifics() -> None:
    """The issue's "Aardvarks are native to the rainforests of South America.": 'South
    America' and 'rainforests' in Amphibian, 'Aardvarks' in Aardvark, 'native' in Alabama
    made 4 of 5 words "found" (0.9); in one document only 3 of 5 are."""
    text = "Aardvarks are native to the rainforests of South America."
    parts = item(text, "Frogs live in the rainforests of South America and Asia.",
                 "Aardvarks live for up to 23 years in captivity.",
                 "The state is home to many native species of fish.")
    v = judge_one(in_documents(parts, "amphibian", "aardvark", "alabama"))
    assert v.label == NONFACTUAL
    assert v.reason.startswith("every number and name found, but 'Aardvarks' and 'native' "
                               "not in the same document as the rest (only 3 of 5 content "
                               "words found in one document)"), v.reason
    assert judge_one(in_documents(parts, "amphibian", "aardvark", "alabama",
                                  setting="contexts")).label == FACTUAL


def test_a_name_must_occur_whole_in_one_passage() -> None:
    text = "The heart was implanted in a patient named Barney Clark."
    split = item(text, "Barney Smith got an artificial heart.", "A patient, Clark, was implanted.")
    v = judge_one(split)
    assert v.label == NONFACTUAL
    assert v.reason.startswith("'Barney Clark' and 'named' not in the evidence"), v.reason
    whole = judge_one(item(text, "A patient named Barney Clark got an implanted heart."))
    assert whole.label == FACTUAL


@pytest.mark.parametrize("text", ["Sure!", "I hope this helps.", "4.", "(2)"])
def test_segments_without_a_claim_are_factual_no_claim(text: str) -> None:
    v = judge_one(item(text, UNRELATED))
    assert (v.label, v.verdict, v.score, v.cited) == (FACTUAL, NO_CLAIM, 1.0, ())


def test_a_bare_year_answer_is_a_claim() -> None:
    assert judge_one(item("2006", "It first aired in September 2006.")).verdict == SUPPORTED
    assert judge_one(item("2008", "It first aired in September 2006.")).label == NONFACTUAL


def test_a_segment_none_of_whose_words_are_in_the_evidence_is_not_supported() -> None:
    v = judge_one(item("Chickens would struggle to jump there.", UNRELATED))
    assert v.label == NONFACTUAL
    assert "(only 0 of 3 content words found)" in v.reason, v.reason


def test_coverage_floor_applies_to_the_share_of_content_words() -> None:
    unknown = [f"zz{chr(ord('a') + i)}q" for i in range(round(1 / MIN_COVERAGE))]
    covered = "falcon " + " ".join(unknown[:-1])
    assert analyse(item(covered, UNRELATED)).coverage == pytest.approx(MIN_COVERAGE)
    # The rule's floor, at the rule's own cut; the shipped cut asks for far more.
    at_floor = judge_one(item(covered, UNRELATED), RULE_CUT)
    assert (at_floor.label, at_floor.score) == (FACTUAL, 0.5 + MIN_COVERAGE / 2)
    assert judge_one(item(f"{covered} {unknown[-1]}", UNRELATED), RULE_CUT).label == NONFACTUAL
    assert judge_one(item(covered, UNRELATED)).label == NONFACTUAL


def test_no_evidence_means_not_enough_evidence() -> None:
    v = judge_one(item("The falcon is fast.", ))
    assert (v.label, v.verdict, v.score) == (NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.0)


def test_only_function_words_leave_nothing_to_look_for_at_any_cut() -> None:
    # has_claim reads "No, it is not." as an answer; the judge finds no word to look for.
    for cut in (None, 1.0):
        v = judge_one(item("No, it is not.", UNRELATED), cut)
        assert (v.label, v.verdict, v.score) == (FACTUAL, NO_CLAIM, 1.0)
        assert v.reason.startswith("only function words")


def test_one_verdict_per_item_in_order_and_scores_agree_with_labels() -> None:
    items = [
        item("The United States had 92 operable reactors.", REACTORS),
        item("Sure!", REACTORS),
        item("France had 94 reactors.", REACTORS),
        item("The peregrine falcon lives on every continent except Antarctica.", UNRELATED),
        item("Penguins live in Greenland.", UNRELATED),
    ]
    judge = OfflineJudge()
    verdicts = judge.judge(items)
    assert len(verdicts) == len(items)
    assert [v.label for v in verdicts] == [FACTUAL, FACTUAL, NONFACTUAL, FACTUAL, NONFACTUAL]
    for v in verdicts:
        assert 0.0 <= v.score <= 1.0
        assert (v.score >= judge.cuts.index.value) == (v.label == FACTUAL)
        assert v.reason
    assert OfflineJudge().judge([]) == []


def test_specifics_are_numbers_and_names_but_not_a_sentence_opening_word() -> None:
    found = specifics("Richard III ruled England from 1483. Typically, Monterey and the "
                      "University of Leicester grew. Avoid it.")
    assert [(s.kind, s.text) for s in found] == [
        ("name", "Richard III"),
        ("name", "England"),
        ("number", "1483"),
        ("name", "Monterey"),
        ("name", "University of Leicester"),
    ]


def test_names_stop_at_punctuation() -> None:
    texts = [s.text for s in specifics("It borders North America, Europe and Asia.")]
    assert texts == ["North America", "Europe", "Asia"]


def test_felm_escaped_line_breaks_separate_words() -> None:
    assert [s.text for s in specifics("the contract.\\nBeach Tourtellot ruled.")] == [
        "Beach Tourtellot"
    ]


def test_a_list_number_after_a_line_break_is_layout_not_a_number() -> None:
    evidence = "A breach of contract needs a duty the contract defines."
    assert judge_one(item("A breach of contract needs a duty.\\n\\n3.", evidence)).label == FACTUAL
    assert judge_one(item("A breach of contract needs a duty.\n2)", evidence)).label == FACTUAL
    assert judge_one(item("A breach of contract needs 3 duties.", evidence)).label == NONFACTUAL
    lead_in = judge_one(item("Here are some examples:\n\n\n1.", evidence))
    assert lead_in.verdict == NO_CLAIM


def test_normalization_of_numbers_and_words() -> None:
    assert number_key("1,000") == number_key("1000") == "1000"
    assert number_key("2.50") == number_key("2.5")
    assert number_key("1,124.4") == "1124.4"
    assert stem("reactors") == stem("reactor")
    assert stem("Arthur's") == stem("Arthur")
    assert stem("universities") == stem("university")
    v = judge_one(item("About 1,000 people live there.", "1000 people live in the village."))
    assert v.label == FACTUAL


EIFFEL = "The Eiffel Tower in Paris was completed in 1889 for the World's Fair."


@pytest.mark.parametrize(
    "year",
    ["1889", "\uff11\uff18\uff18\uff19", "\u0661\u0668\u0668\u0669",
     "\u0967\u096e\u096e\u096f", "\u09e7\u09ee\u09ee\u09ef", "\u0e51\u0e58\u0e58\u0e59",
     "\u0ed1\u0ed8\u0ed8\u0ed9", "\u17e1\u17e8\u17e8\u17e9", "\u1041\u1048\u1048\u1049",
     "\u0f21\u0f28\u0f28\u0f29"],
)
def test_a_number_is_its_value_whatever_digits_write_it(year: str) -> None:
    """Issue 51 item 3: fullwidth, Arabic-Indic, Devanagari, Bengali, Thai, Lao, Khmer,
    Myanmar and Tibetan digits give the verdict ASCII digits give."""
    assert number_key(year) == "1889"
    for end in (".", "\uff0e"):
        text = f"The Eiffel Tower in Paris was completed in {year}{end}"
        v = judge_one(item(text, EIFFEL))
        assert (v.label, v.cited) == (FACTUAL, (0,)), (text, v.reason)
    wrong = year[:-1] + chr(ord(year[-1]) - 1)  # 1888 in the same digits
    v = judge_one(item(f"The Eiffel Tower in Paris was completed in {wrong}.", EIFFEL))
    assert v.label == NONFACTUAL, v.reason
    assert number_key("\uff11,\uff10\uff10\uff10") == "1000"


MUNICH = "Die Universität München wurde 1472 in Ingolstadt gegründet und zog später nach München."


@pytest.mark.parametrize("language", [None, "de"])
@pytest.mark.parametrize(("segment_form", "passage_form"), [("NFD", "NFC"), ("NFC", "NFD"),
                                                            ("NFD", "NFD")])
def test_no_verdict_depends_on_the_unicode_form(
    segment_form: str, passage_form: str, language: str | None,
) -> None:
    """Issue 51 item 2: a decomposed answer ("Mu\u0308nchen") or passage gets the verdict,
    citations and reason the composed ones get."""
    import unicodedata
    from dataclasses import replace

    def verdict(seg_form: str, pas_form: str):  # noqa: ANN202 - a Verdict
        text = unicodedata.normalize(seg_form, "Die Universität München wurde 1472 gegründet.")
        passage = unicodedata.normalize(pas_form, MUNICH)
        ev = Evidence(0, "d0", unicodedata.normalize(pas_form, "Universität München"), passage,
                      0.9)
        return judge_one(replace(JudgeItem(Segment(0, 0, len(text), text), (ev,)),
                                 language=language))

    composed = verdict("NFC", "NFC")
    assert (composed.label, composed.cited) == (FACTUAL, (0,)), composed.reason
    assert verdict(segment_form, passage_form) == composed


def test_registry_creates_the_offline_judge() -> None:
    judge = create_judge("offline")
    assert judge.name == "offline"
    assert "no language model" in judge.method
    with pytest.raises(UsageError, match="takes no argument"):
        create_judge("offline:big")


def test_importing_the_judge_loads_no_model_library() -> None:
    code = (
        "import sys, ceg_cli.judges.offline.offline\n"
        "heavy = {'torch', 'sentence_transformers', 'faiss', 'transformers', 'nltk'}\n"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_name_in_the_passage_title_counts_as_found() -> None:
    # The passage is part of the article "Andre Agassi": its text says only "Agassi".
    ev = Evidence(7, "d7", "Andre Agassi", "Agassi is an eight-time Grand Slam champion.", 0.8)
    seg = Segment(0, 0, 50, "Andre Agassi is an eight-time Grand Slam champion.")
    v = judge_one(JudgeItem(seg, (ev,)))
    assert v.label == FACTUAL and v.cited == (0,), v.reason


GERMAN = "Die Vereinigten Staaten hatten 2022 insgesamt 92 betriebsbereite Kernreaktoren."


def test_evidence_in_another_language_is_said_once_with_what_to_do() -> None:
    """A German segment against English passages: the verdicts stand, and the run is told
    once that across languages only names and numbers are compared, at which cut, and what
    to use instead."""
    from dataclasses import replace

    from ceg_cli.judges.offline.crossrule import CrossRule

    said: list[str] = []
    # Without the cross-language rule (issue 50 item 3: tests/test_crosslang_rule.py).
    judge = OfflineJudge(on_warning=said.append, cross_rule=CrossRule(None))
    german = replace(item(GERMAN, REACTORS, UNRELATED), language="de")
    english = item("The United States had 92 operable nuclear power reactors.", REACTORS)
    assert len(judge.judge([english, english])) == 2
    assert said == []  # evidence in the segment's own language: nothing to say
    verdicts = judge.judge([german, german])
    with pytest.warns(RuntimeWarning, match="have evidence in English"):  # no on_warning
        assert verdicts == OfflineJudge(cross_rule=CrossRule(None)).judge([german, german])
    judge.judge([german])
    assert len(said) == 1, said
    cut = judge.cuts.for_language("index", "de").value  # German's own cut (issue 50)
    assert cut != judge.cuts.at("index").value
    assert said[0].startswith(
        "--judge offline: segments in German (de) have evidence in English (en); "
        f"across languages it compares only names and numbers, so at its cut {cut:g} ")
    assert "--judge-threshold 0.5 decides on names and numbers alone" in said[0]
    assert "nli:mdeberta-v3-base-xnli" in said[0]
    assert said[0].endswith("(the cross-language rule is off: no cross-language cut in "
                            "thresholds.json)")


GERMAN_PASSAGE = ("Die Vereinigten Staaten hatten 2022 insgesamt 92 betriebsbereite "
                  "Kernreaktoren, mehr als jedes andere Land der Welt.")
HINDI_PASSAGE = ("संयुक्त राज्य अमेरिका में 2022 में 92 परमाणु रिएक्टर चालू थे, जो किसी भी "
                 "अन्य देश से अधिक हैं। फ्रांस, चीन और रूस इसके बाद आते हैं।")


def test_a_multilingual_index_raises_no_alarm_where_the_segment_has_evidence_in_its_own() -> None:
    """Issue 51 item 4: the evidence's language is decided passage by passage, on the passages
    the verdict used: a German segment citing the German passage, a Hindi one ranked first,
    is not told its evidence is in Hindi; evidence only in Hindi still is."""
    from dataclasses import replace

    said: list[str] = []
    judge = OfflineJudge(on_warning=said.append)
    german = replace(item(GERMAN, HINDI_PASSAGE, GERMAN_PASSAGE), language="de")
    (v,) = judge.judge([german])
    assert (v.label, v.cited) == (FACTUAL, (1,)), v.reason
    assert said == []
    judge.judge([replace(item(GERMAN, HINDI_PASSAGE), language="de")])
    assert len(said) == 1 and "have evidence in Hindi (hi)" in said[0], said


@pytest.mark.parametrize("case", ["rule cut", "names and numbers", "no evidence"])
def test_nothing_is_said_where_the_language_of_the_evidence_does_not_matter(case: str) -> None:
    """At the rule's own cut (0.5) the judge decides on names and numbers, which read the
    same in any language; evidence too short to tell its language, or none, says nothing."""
    from dataclasses import replace

    said: list[str] = []
    passages = {"rule cut": (REACTORS,), "names and numbers": ("USA 2022: 92 (NRC).",),
                "no evidence": ()}[case]
    cuts = Cuts.same(RULE_CUT, "test") if case == "rule cut" else None
    judge = OfflineJudge(cuts, on_warning=said.append)
    judge.judge([replace(item(GERMAN, *passages), language="de")])
    assert said == []


def test_a_language_s_first_segments_are_read_however_many_came_before() -> None:
    """The evidence is read for each language's first segments, then for a sample: a German
    answer after hundreds of English segments is still caught at its first segment."""
    from dataclasses import replace

    from ceg_cli.judges.offline.crosslang import FIRST_READ, SAMPLE_EVERY

    said: list[str] = []
    judge = OfflineJudge(on_warning=said.append)
    english = replace(item("The United States had 92 operable nuclear power reactors.",
                           REACTORS), language="en")
    judge.judge([english] * (FIRST_READ + 3 * SAMPLE_EVERY))
    assert said == [] and judge.cross_language._seen == {"en": FIRST_READ + 3 * SAMPLE_EVERY}
    judge.judge([replace(item(GERMAN, REACTORS), language="de")])
    assert len(said) == 1 and "segments in German (de)" in said[0]


GERMAN_PASSAGE = ("Die Vereinigten Staaten hatten im Jahr 2022 insgesamt 92 betriebsbereite "
                  "Kernreaktoren, die etwa ein Fünftel des Stroms des Landes erzeugten.")
HINDI_PASSAGE = ("संयुक्त राज्य अमेरिका में वर्ष 2022 में कुल 92 परमाणु रिएक्टर चालू थे, जो देश की "
                 "बिजली का लगभग पाँचवाँ हिस्सा पैदा करते थे। यह दुनिया में सबसे बड़ा परमाणु ऊर्जा "
                 "उत्पादक देश है और इसके रिएक्टर तीस राज्यों में फैले हुए हैं।")


@pytest.mark.parametrize("order", ["own first", "other first"])
def test_an_index_of_several_languages_raises_no_false_alarm(order: str) -> None:
    """Issue 51 item 4: a German segment whose evidence holds its German passage beside a
    Hindi one was warned of 'evidence in Hindi' (the first two passages were read joined,
    and Devanagari won). Each passage is read on its own: one in the segment's language
    is enough."""
    from dataclasses import replace

    said: list[str] = []
    judge = OfflineJudge(on_warning=said.append)
    passages = ((GERMAN_PASSAGE, HINDI_PASSAGE) if order == "own first"
                else (HINDI_PASSAGE, GERMAN_PASSAGE))
    judge.judge([replace(item(GERMAN, *passages), language="de")])
    assert said == []
    # Evidence with no passage in German is still said, naming the language most of its
    # passages are surely in.
    judge.judge([replace(item(GERMAN, HINDI_PASSAGE, REACTORS, HINDI_PASSAGE), language="de")])
    assert len(said) == 1 and "have evidence in Hindi (hi)" in said[0], said
