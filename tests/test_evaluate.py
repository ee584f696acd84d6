"""Metrics of ``ceg eval``, checked against hand-computed values and scikit-learn."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from sklearn.metrics import average_precision_score

from ceg_cli.check.pipeline import CheckedResponse, CheckOptions, ResponseInput, SegmentResult
from ceg_cli.check.retrieve import RetrievalOptions
from ceg_cli.eval.datasets import Example
from ceg_cli.eval.evaluate import (
    average_precision,
    balanced_accuracy,
    class_accuracy,
    compute_metrics,
    evidence_hit,
    f1,
    length_matched,
    pair_outcome,
    prediction_record,
    run_evaluation,
    shorter_wins,
)
from ceg_cli.index import Hit
from ceg_cli.types import FACTUAL, NONFACTUAL, Chunk, Evidence, JudgeItem, Segment, Verdict


def test_class_and_balanced_accuracy_by_hand() -> None:
    gold = [True, True, True, True, False, False]
    pred = [True, True, True, False, False, True]
    # 3 of 4 factual right, 1 of 2 nonfactual right.
    assert class_accuracy(gold, pred) == {"factual": 0.75, "nonfactual": 0.5, "balanced": 0.625}
    assert balanced_accuracy(gold, pred) == 0.625
    # Calling everything factual scores 50 balanced, whatever the class balance.
    assert balanced_accuracy(gold, [True] * 6) == 0.5


def test_balanced_accuracy_is_undefined_without_one_class() -> None:
    assert class_accuracy([True, True], [True, False]) == {
        "factual": 0.5,
        "nonfactual": None,
        "balanced": None,
    }
    with pytest.raises(ValueError):
        class_accuracy([True], [True, False])


def test_f1_by_hand() -> None:
    gold = [False, False, True, True, False]
    pred = [False, True, False, True, False]
    # nonfactual: tp 2, fp 1, fn 1 -> 4 / 6
    assert f1(gold, pred, positive=False) == pytest.approx(2 / 3)
    assert f1([True], [True], positive=False) is None


def test_average_precision_by_hand() -> None:
    # Ranked: P(0.9) N(0.8) P(0.7) N(0.1): AP = 1/2 * 1 + 1/2 * 2/3
    assert average_precision([True, False, True, False], [0.9, 0.8, 0.7, 0.1]) == pytest.approx(
        5 / 6
    )
    # All tied: one threshold, precision = prevalence.
    assert average_precision([True, False, False], [0.5, 0.5, 0.5]) == pytest.approx(1 / 3)
    assert average_precision([False, False], [0.2, 0.3]) is None


@pytest.mark.parametrize("seed", range(8))
def test_average_precision_matches_sklearn(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(5, 200)
    positive = [rng.random() < 0.3 for _ in range(n)]
    positive[0] = True
    # Rounded scores make ties, where implementations most often disagree.
    scores = [round(rng.random(), 1 if seed % 2 else 4) for _ in range(n)]
    expected = average_precision_score(positive, scores)
    assert average_precision(positive, scores) == pytest.approx(expected, abs=1e-12)


def test_pair_outcome_label_then_score_then_half() -> None:
    assert pair_outcome((True, 0.1), (False, 0.9)) == 1.0
    assert pair_outcome((False, 0.9), (True, 0.1)) == 0.0
    assert pair_outcome((False, 0.4), (False, 0.3)) == 1.0
    assert pair_outcome((True, 0.6), (True, 0.7)) == 0.0
    assert pair_outcome((True, 0.6), (True, 0.6)) == 0.5


def test_length_matched_rule() -> None:
    assert length_matched("a b", "a b c d")  # 2 more words
    assert not length_matched("a", "a b c d")  # 3 more words, 4 times as long
    assert length_matched(" ".join("x" * 6), " ".join("y" * 9))  # 1.5 times
    assert not length_matched(" ".join("x" * 6), " ".join("y" * 10))
    assert shorter_wins("a", "a b") == 1.0
    assert shorter_wins("a b c", "a b") == 0.0
    assert shorter_wins("a b", "c d") == 0.5


def test_evidence_hit_by_id_or_normalized_title() -> None:
    ex = Example(
        ResponseInput(1, 1, "x"),
        True,
        evidence_ids=frozenset({"d1"}),
        evidence_titles=frozenset({"philip ii of macedon"}),
    )
    assert evidence_hit(ex, [("d9", "Other"), ("d1", "Whatever")])
    assert evidence_hit(ex, [("d9", "Philip II of Macedon")])
    assert not evidence_hit(ex, [("d9", "Philip II")])
    assert not evidence_hit(ex, [])


# --- compute_metrics on hand-made results -------------------------------------------


def _result(
    ex: Example, labels: Sequence[str], scores: Sequence[float], docs: Sequence[str] = ()
) -> CheckedResponse:
    segs = ex.input.segments or tuple(Segment(i, 0, 1, f"s{i}") for i in range(len(labels)))
    evidence = tuple(Evidence(i, d, d, "text", 0.9) for i, d in enumerate(docs))
    results = tuple(
        SegmentResult(s, Verdict(lab, "supported" if lab == FACTUAL else "x", sc), evidence)
        for s, lab, sc in zip(segs, labels, scores)
    )
    label = NONFACTUAL if NONFACTUAL in labels else FACTUAL
    return CheckedResponse(ex.input, results, label)


def _segmented(rid: str, gold: Sequence[bool]) -> Example:
    segs = tuple(Segment(i, 2 * i, 2 * i + 1, f"s{i}") for i in range(len(gold)))
    return Example(ResponseInput(rid, 1, "s s s", None, {}, segs), all(gold), tuple(gold))


def test_segment_and_response_metrics() -> None:
    a = _segmented("a", [True, False])
    b = _segmented("b", [True, True])
    results = [
        _result(a, [FACTUAL, NONFACTUAL], [0.8, 0.2]),
        _result(b, [FACTUAL, NONFACTUAL], [0.9, 0.4]),
    ]
    m = compute_metrics([a, b], results, [[[], []], [[], []]], k=5)
    seg = m["segments"]
    assert seg["count"] == 4 and seg["gold_nonfactual"] == 1 and seg["predicted_nonfactual"] == 2
    assert seg["accuracy_factual"] == pytest.approx(2 / 3)
    assert seg["accuracy_nonfactual"] == 1.0
    assert seg["balanced_accuracy"] == pytest.approx(5 / 6)
    # nonfactual scores 1 - s: 0.8 (gold nonfactual) ranks first, then 0.6, 0.2, 0.1.
    assert seg["auc_pr_nonfactual"] == 1.0
    assert seg["auc_pr_factual"] == pytest.approx(
        average_precision_score([True, False, True, True], [0.8, 0.2, 0.9, 0.4])
    )
    assert seg["not_judged"] == 0
    resp = m["responses"]
    # Both responses judged nonfactual; a is, b is not.
    assert resp["accuracy_nonfactual"] == 1.0 and resp["accuracy_factual"] == 0.0
    assert "pairwise" not in m and "retrieval" not in m


def _pair(n: int, right: str, wrong: str) -> list[Example]:
    return [
        Example(ResponseInput(f"{n}r", n, right, "q?"), True, pair=str(n), role="right"),
        Example(ResponseInput(f"{n}h", n, wrong, "q?"), False, pair=str(n), role="hallucinated"),
    ]


def test_pairwise_accuracy_with_ties_and_length_matching() -> None:
    examples = (
        _pair(0, "Paris", "It was founded in Lyon in 1850.")  # right wins on the label
        + _pair(1, "Bern", "Zurich")  # both factual, the hallucinated scores higher
        + _pair(2, "Oslo", "Bergen")  # an exact tie
    )
    results = [
        _result(examples[0], [FACTUAL], [0.7]),
        _result(examples[1], [NONFACTUAL], [0.2]),
        _result(examples[2], [FACTUAL], [0.6]),
        _result(examples[3], [FACTUAL], [0.9]),
        _result(examples[4], [NONFACTUAL], [0.3]),
        _result(examples[5], [NONFACTUAL], [0.3]),
    ]
    m = compute_metrics(examples, results, [[[]]] * 6, k=5)
    p = m["pairwise"]
    assert p["pairs"] == 3
    assert p["accuracy"] == pytest.approx((1 + 0 + 0.5) / 3)
    # Pair 0 is 1 word against 7: not length-matched.
    assert p["length_matched_pairs"] == 2
    assert p["length_matched_accuracy"] == pytest.approx(0.25)
    assert p["shorter_wins_accuracy"] == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert p["shorter_wins_length_matched_accuracy"] == 0.5


def test_recall_at_1_at_k_and_in_judged_evidence() -> None:
    ex = [
        Example(ResponseInput(i, i, "x"), True, evidence_ids=frozenset({f"d{i}"})) for i in range(3)
    ]
    ex.append(Example(ResponseInput(9, 9, "x"), True))  # no gold evidence: not counted
    results = [
        _result(ex[0], [FACTUAL], [1.0], docs=["d0"]),
        _result(ex[1], [FACTUAL], [1.0], docs=["dx"]),  # the threshold dropped d1
        _result(ex[2], [FACTUAL], [1.0], docs=["dx"]),
        _result(ex[3], [FACTUAL], [1.0], docs=["d3"]),
    ]
    retrieved = [
        [[("d0", "t"), ("dx", "t")]],
        [[("dx", "t"), ("d1", "t")]],
        [[("dx", "t"), ("dy", "t"), ("d2", "t")]],
        [[("d3", "t")]],
    ]
    r = compute_metrics(ex, results, retrieved, k=2)["retrieval"]
    assert r["segments"] == 3 and r["k"] == 2
    assert r["recall_at_1"] == pytest.approx(1 / 3)
    assert r["recall_at_k"] == pytest.approx(2 / 3)  # d2 is only third
    assert r["recall_judged"] == pytest.approx(1 / 3)


def test_compute_metrics_refuses_misaligned_results() -> None:
    a = _segmented("a", [True, False])
    with pytest.raises(ValueError, match="segments changed"):
        compute_metrics([a], [_result(a, [FACTUAL], [0.5])], [[[]]], k=5)
    with pytest.raises(ValueError):
        compute_metrics([a], [], [], k=5)


# --- run_evaluation end to end, with a fake index and a fake judge ----------------------


class WordIndex:
    """Ranks passages by shared words with the query; stands in for a real index."""

    path = Path("word-index")

    def __init__(self, passages: dict[str, str]) -> None:
        self.chunks = [
            Chunk(doc, doc.title(), 0, 0, len(text), text) for doc, text in passages.items()
        ]
        self.calls = 0

    def search(
        self, queries: Sequence[str], k: int = 5, retrieval: str = "dense"
    ) -> list[list[Hit]]:
        self.calls += 1
        out = []
        for q in queries:
            words = set(q.lower().strip(".").split())
            scored = sorted(
                (
                    (len(words & set(c.text.lower().strip(".").split())) / len(words), i)
                    for i, c in enumerate(self.chunks)
                ),
                key=lambda x: (-x[0], x[1]),
            )
            out.append([Hit(i, s, self.chunks[i]) for s, i in scored[:k]])
        return out


class ContainsJudge:
    """Factual when the segment, without its period, is in the top passage."""

    name = "contains"
    method = "substring of the top passage (test fake)"

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        out = []
        for it in items:
            top = it.evidence[0].text.lower() if it.evidence else ""
            ok = it.segment.text.lower().rstrip(".") in top
            out.append(Verdict(FACTUAL if ok else NONFACTUAL, "supported", 0.9 if ok else 0.1))
        return out


def test_run_evaluation_end_to_end_with_fakes() -> None:
    index = WordIndex(
        {
            "oslo": "oslo is the capital of norway.",
            "bern": "bern is the federal city of switzerland.",
            "nile": "the nile flows into the mediterranean sea.",
        }
    )
    text = "Oslo is the capital of Norway. Bern is the federal city of France."
    segs = (Segment(0, 0, 30, text[:30]), Segment(1, 31, len(text), text[31:]))
    examples = [
        Example(
            ResponseInput("r1", 1, text, None, {}, segs),
            False,
            (True, False),
            evidence_ids=frozenset({"oslo", "bern"}),
        ),
        Example(
            ResponseInput("r2", 2, "The Nile flows into the Mediterranean Sea."),
            True,
            evidence_titles=frozenset({"nile"}),
        ),
    ]
    from ceg_cli.eval.datasets import Dataset

    dataset = Dataset(Path("x.jsonl"), "jsonl", examples)
    seen: list[str] = []
    ev = run_evaluation(
        dataset,
        index,  # type: ignore[arg-type]
        ContainsJudge(),
        CheckOptions(RetrievalOptions(top_k=2, threshold=0.99), batch_size=1),
        on_result=lambda r: seen.append(r.input.id),
    )
    assert seen == ["r1", "r2"]
    assert index.calls == 2  # one search per batch, recorded on the way through
    m = ev.metrics
    assert m["segments"]["balanced_accuracy"] == 1.0
    assert m["responses"]["balanced_accuracy"] == 1.0
    assert m["retrieval"] == {
        "segments": 3,
        "k": 2,
        "recall_at_1": 1.0,
        "recall_at_k": 1.0,
        "recall_judged": 1.0,
    }
    assert m["run"]["judge"] == "contains" and m["run"]["top_k"] == 2
    assert ev.retrieved[0][1][0] == ("bern", "Bern")
    record = prediction_record(examples[0], ev.results[0])
    assert record["gold"] == "nonfactual" and record["label"] == NONFACTUAL
    assert record["correct"] is True
    assert [s["gold"] for s in record["segments"]] == ["factual", "nonfactual"]
    assert record["segments"][1]["evidence"][0]["doc_id"] == "bern"
