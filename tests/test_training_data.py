"""Training data for the verifier: real-shaped source rows, splits, windows, synthetic pairs."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from ceg_cli.judges.checkers.window import select_window
from ceg_cli.training.dataset import HELD_OUT, load_pairs
from ceg_cli.training.sources import SOURCES, read_source, split_of
from ceg_cli.training.synthetic import KINDS, NEGATIVE_KINDS, Passage, make_pairs

TRAIN = Path(__file__).parent / "data" / "train"


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_source_reads_real_rows_with_both_labels(name: str) -> None:
    pairs = list(read_source(name, TRAIN))
    assert pairs, name
    assert {p.label for p in pairs} == {0, 1}, name
    for p in pairs:
        assert p.source == name
        assert p.claim.strip() and p.evidence.strip()
        assert p.group.startswith(name.split("-")[0][:4]) or ":" in p.group


def test_label_mappings_that_leave_rows_out() -> None:
    # factcheck-gpt: partially-support is neither; the fixture has two such rows.
    raw = (TRAIN / "factcheck-gpt" / "subtask3_claim_evidence_stance.jsonl").read_text()
    assert raw.count('"partially-support"') == 2
    stances = Counter(re.findall(r'"stance": ?"([a-z-]+)"', raw))
    pairs = list(read_source("factcheck-gpt", TRAIN))
    assert len(pairs) == sum(stances.values()) - stances["partially-support"]
    assert sum(p.label for p in pairs) == stances["completely-support"]
    # BEGIN: Generic responses are left out (they state nothing to attribute).
    begin = list(read_source("begin", TRAIN))
    assert not any("generic" in p.claim.lower() and p.label for p in begin)
    # FRANK: a summary whose article file is absent is skipped, not an error.
    assert all(p.group != "frank:0000-no-such-article" for p in read_source("frank", TRAIN))


def test_citation_integrity_claim_without_label_is_not_supported() -> None:
    pairs = list(read_source("citation-integrity", TRAIN))
    # The fixture holds, per split, one claim whose cited abstracts carry no label.
    assert sum(1 for p in pairs if p.label == 0) >= 3
    assert all("[<|" not in p.claim for p in pairs)


def test_ptb_tokens_are_undone() -> None:
    fever = list(read_source("fever-nli", TRAIN))
    assert all(" ," not in p.evidence and "``" not in p.evidence for p in fever)


def test_split_is_by_group_and_stable() -> None:
    assert split_of("doc:1") == split_of("doc:1")
    shares = Counter(split_of(f"doc:{i}") for i in range(4000))
    assert 0.12 < shares["val"] / 4000 < 0.18


def test_held_out_sources_are_refused_for_training() -> None:
    for name in HELD_OUT:
        with pytest.raises(ValueError, match="held out"):
            load_pairs(TRAIN, corpus=None, split="train", caps={name: 10})


def test_window_picks_the_sentences_that_hold_the_segment() -> None:
    passages = [
        "Paris is the capital of France. It has many museums. The Louvre opened in 1793.",
        "Lyon is a city in France. Its population was 522,000 in 2020.",
    ]
    w = select_window("The Louvre opened in 1793 in Paris.", passages, max_words=20)
    assert "The Louvre opened in 1793." in w.text
    assert "Paris is the capital of France." in w.text
    assert "Lyon" not in w.text
    assert set(w.sources) == {0}
    assert w.overlap == 1.0
    # Sentences keep the order of the evidence, whatever order they were picked in.
    assert w.text.index("Paris is") < w.text.index("The Louvre")


def test_window_respects_its_budget_and_titles() -> None:
    long = " ".join(f"Sentence {i} mentions Rome and the year {1900 + i}." for i in range(40))
    w = select_window("Rome was founded in 1905.", [long], max_words=30, titles=["Rome"])
    assert len(w.text.split()) <= 30 + 1
    assert "1905" in w.text
    none = select_window(
        "Quantum chromodynamics.", ["Cats sleep a lot. Dogs bark."], max_words=5, titles=["Pets"]
    )
    assert none.text.startswith("Pets: Cats sleep a lot.")
    assert none.overlap == 0.0


PASSAGES = [
    Passage(
        "1",
        "Alpha",
        "Alpha Town was founded in 1852 by John Smith. It has 4,200 residents. "
        "The river Alpha runs through it, which floods every spring.",
    ),
    Passage(
        "1",
        "Alpha",
        "In 1901 the new railway line finally reached Alpha Town. Mary Jones was its first mayor.",
    ),
    Passage(
        "2",
        "Beta",
        "Beta Village was founded in 1790 by Peter Brown and Anna White. "
        "It is not on the coast, and it has 310 residents.",
    ),
    Passage(
        "2",
        "Beta",
        "The village church was built in 1812 by Thomas Green. "
        "It was restored in 1950, which cost 20,000 pounds.",
    ),
]


def test_synthetic_pairs_are_deterministic_and_labelled_by_kind() -> None:
    a = list(make_pairs(PASSAGES, seed=3, per_passage=4))
    b = list(make_pairs(PASSAGES, seed=3, per_passage=4))
    assert a == b
    assert {p.kind for p in a} <= set(KINDS)
    for p in a:
        assert p.label == (0 if p.kind in NEGATIVE_KINDS else 1), p
        assert p.group in ("synthetic:1", "synthetic:2")
        if p.kind == "original":
            assert p.claim in p.evidence
        if p.kind == "number":
            changed = set(re.findall(r"\d[\d,]*", p.claim)) - set(
                re.findall(r"\d[\d,]*", p.evidence)
            )
            assert changed, p
        if p.kind == "elsewhere":
            assert p.claim not in p.evidence
    assert sum(p.kind == "original" for p in a) == 4


def test_swap_and_negation_change_the_sentence() -> None:
    from ceg_cli.training.synthetic import _negate, _swap

    assert _swap("Alpha Town was founded by John Smith.") == "John Smith was founded by Alpha Town."
    assert _negate("It is on the coast.") == "It is not on the coast."
    assert _negate("It is not on the coast.") == "It is on the coast."
    assert _negate("Birds fly south.") is None
