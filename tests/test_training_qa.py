"""Synthetic question-answer pairs (training.qa): the shape of a QA set's claims."""

from __future__ import annotations

from pathlib import Path

from ceg_cli.training.qa import QA_KINDS, Gap, gaps, make_qa_pairs, question_for
from ceg_cli.training.synthetic import Passage

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "enwiki-sample.xml.bz2"


PASSAGES = [
    Passage("1", "Lowell", "Lowell Mill was built in 1823 by Francis Cabot. "
            "It employed 900 workers, most of them from Maine."),
    Passage("1", "Lowell", "In 1846 the canal reached Lowell Mill. Edith Parker ran its school."),
    Passage("2", "Harbour", "Gull Harbour was charted in 1777 by James Cook and Joseph Banks. "
            "It shelters 40 boats in winter."),
    Passage("2", "Harbour",
            "The lighthouse was lit in 1859 by Agnes Reid, who kept it for 31 years."),
]


def _split(claim: str) -> tuple[str, str]:
    question, answer = claim.rsplit("? ", 1)
    return question, answer


def test_questions_ask_for_the_value_in_its_place() -> None:
    s = "Bette Davis was born in 1908 and appeared in 52 films."
    by_text = {g.text: g for g in gaps(s)}
    assert by_text["1908"].kind == "year"
    assert by_text["52"].kind == "number"
    assert by_text["Bette Davis"].kind == "name"
    assert question_for(s, by_text["1908"]) == (
        "Bette Davis was born in what year and appeared in 52 films?"
    )
    assert question_for(s, by_text["52"]) == (
        "Bette Davis was born in 1908 and appeared in how many films?"
    )
    assert question_for(s, by_text["Bette Davis"]) == (
        "What was born in 1908 and appeared in 52 films?"
    )
    s2 = "The bridge was opened by Queen Victoria, in 1850."
    assert question_for(s2, next(g for g in gaps(s2) if g.kind == "name")) == (
        "The bridge was opened by who or what, in 1850?"
    )


def test_values_inside_ranges_compounds_and_abbreviations_are_not_asked() -> None:
    # Shapes of real enwiki sentences: a life span, a hyphenated age, an acronym.
    s = "Huxley married Laura Archera (1911–2007), a 24-year-old violinist from the USA."
    texts = {g.text for g in gaps(s)}
    assert not texts & {"1911", "2007", "24", "USA"}
    assert "Laura Archera" in texts


def test_pairs_are_deterministic_and_labelled_by_kind() -> None:
    a = list(make_qa_pairs(PASSAGES, seed=2))
    assert a == list(make_qa_pairs(PASSAGES, seed=2))
    assert a, "the fixture passages hold years, numbers and names"
    assert {p.kind for p in a} <= set(QA_KINDS)
    for p in a:
        assert p.label == int(p.kind == "qa"), p
        assert p.group in ("synthetic-qa:1", "synthetic-qa:2")
        question, answer = p.claim.rsplit("? ", 1)
        assert answer and answer not in question, p
        if p.kind in ("qa", "qa-slot"):
            assert answer in p.evidence, p
        else:
            assert answer not in p.evidence, p
    # Each usable passage gives one supported and one unsupported pair.
    assert sum(p.label for p in a) * 2 == len(a)


def test_other_document_answers_keep_the_kind_of_the_gap() -> None:
    pairs = list(make_qa_pairs(PASSAGES * 3, seed=0))
    right = {(_split(p.claim)[0], p.evidence): _split(p.claim)[1] for p in pairs if p.kind == "qa"}
    others = [p for p in pairs if p.kind == "qa-other"]
    assert others
    for p in others:
        question, answer = _split(p.claim)
        value = right[(question, p.evidence)]
        kind = next((g.kind for g in gaps(value) if g.text == value), "name")
        assert Gap(0, len(value), value, kind).same_kind(answer), (value, answer)


def test_real_wikipedia_passages_give_both_negative_kinds() -> None:
    from ceg_cli.training.dataset import corpus_passages

    passages: list[Passage] = []
    for p in corpus_passages(SAMPLE):
        passages.append(p)
        if len(passages) >= 600:
            break
    pairs = list(make_qa_pairs(passages, seed=0))
    kinds = {p.kind for p in pairs}
    assert kinds == set(QA_KINDS), kinds
    assert sum(p.label for p in pairs) * 2 == len(pairs)
    for p in pairs:
        question, answer = _split(p.claim)
        # An answer the question already names would teach a shortcut, not a check.
        assert answer not in question, p.claim
        assert (answer in p.evidence) == (p.kind != "qa-other"), p.claim
