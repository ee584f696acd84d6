"""How right the labels are: metrics over labelled benchmarks, and the run behind ``ceg eval``.

The metrics are the CEG paper's:

- per-class and balanced accuracy (its FELM table). A prediction is factual
  only when the label is ``factual``: a segment the judge could not judge is
  never counted as factual;
- AUC-PR, as average precision, for each class (its WikiBio table), from the
  judge's ``Verdict.score`` (confidence of support) for the factual class and
  ``1 - score`` for the nonfactual class;
- pairwise accuracy (its HaluEval metric): the share of pairs in which the
  right answer gets the better verdict;
- retrieval recall@k where the gold evidence is known, in the pooled-index
  setting only. Judged against each item's own documents (``--evidence
  contexts``) the gold document is among what the judge searches by
  construction, so recall would measure nothing; a run whose items are not
  all checked against the index alone reports no recall.

On HaluEval the hallucinated answers are several times longer than the right
ones, so a judge that favours short answers scores well there without checking
anything. Pairwise accuracy is therefore also reported on length-matched pairs
(``length_matched``), and the score of the "shorter answer wins" rule is shown
beside it as the floor to beat. No metric here uses length as a feature.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..check.pipeline import CheckOptions, build_query, check
from ..index import Hit, Index
from ..judges import Judge
from ..judges.cuts import SETTINGS, setting_of
from ..types import FACTUAL, CheckedResponse
from .datasets import Dataset, Example, normalize_title

if TYPE_CHECKING:
    from ..check.ctxsearch import ContextSearch

#: Length-matched pairs: the longer answer has at most this many times the
#: words of the shorter one, or at most ``LENGTH_SLACK_WORDS`` words more.
LENGTH_RATIO = 1.5
LENGTH_SLACK_WORDS = 2

#: The paper's figures (arXiv 2402.16063), on the full benchmarks.
PAPER_REFERENCE: dict[str, dict[str, dict[str, float]]] = {
    "felm": {"segments.balanced_accuracy": {"CEG ChatGPT": 0.597, "CEG GPT-4": 0.699}},
    "halueval": {"pairwise.accuracy": {"CEG": 0.6945}},
}


# --- metrics ----------------------------------------------------------------------


def class_accuracy(gold: Sequence[bool], predicted: Sequence[bool]) -> dict[str, float | None]:
    """Accuracy on the gold-factual items, on the gold-nonfactual items, and their mean.

    A class with no gold item has accuracy None, and so has the balanced mean.
    """
    _same_length(gold, predicted)
    out: dict[str, float | None] = {}
    for name, cls in (("factual", True), ("nonfactual", False)):
        hits = [p == g for g, p in zip(gold, predicted) if g == cls]
        out[name] = sum(hits) / len(hits) if hits else None
    f, n = out["factual"], out["nonfactual"]
    out["balanced"] = None if f is None or n is None else (f + n) / 2
    return out


def balanced_accuracy(gold: Sequence[bool], predicted: Sequence[bool]) -> float | None:
    """The mean of the two per-class accuracies (the paper's FELM metric)."""
    return class_accuracy(gold, predicted)["balanced"]


def f1(gold: Sequence[bool], predicted: Sequence[bool], positive: bool) -> float | None:
    """F1 of the class ``positive`` (FELM also reports it for nonfactual segments)."""
    _same_length(gold, predicted)
    tp = sum(1 for g, p in zip(gold, predicted) if g == positive and p == positive)
    fp = sum(1 for g, p in zip(gold, predicted) if g != positive and p == positive)
    fn = sum(1 for g, p in zip(gold, predicted) if g == positive and p != positive)
    return None if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def average_precision(positive: Sequence[bool], scores: Sequence[float]) -> float | None:
    """AUC-PR as average precision, ``sum((R_n - R_{n-1}) * P_n)`` over score thresholds.

    Tied scores form one threshold, as in scikit-learn's
    ``average_precision_score``; None when there is no positive item.
    """
    _same_length(positive, scores)
    total = sum(1 for p in positive if p)
    if total == 0:
        return None
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    ap = tp = seen = 0.0
    last_recall = 0.0
    for rank, i in enumerate(order):
        tp += positive[i]
        seen += 1
        if rank + 1 < len(order) and scores[order[rank + 1]] == scores[i]:
            continue  # the threshold falls only after the last tied score
        recall = tp / total
        ap += (recall - last_recall) * (tp / seen)
        last_recall = recall
    return ap


def pair_outcome(right: tuple[bool, float], hallucinated: tuple[bool, float]) -> float:
    """1 when the right answer gets the better verdict, 0 when the worse, 0.5 on a tie.

    Each side is ``(judged factual, mean segment score)``: the label decides;
    when both labels agree, the higher mean score wins.
    """
    (r_label, r_score), (h_label, h_score) = right, hallucinated
    if r_label != h_label:
        return 1.0 if r_label else 0.0
    if r_score != h_score:
        return 1.0 if r_score > h_score else 0.0
    return 0.5


def length_matched(right: str, hallucinated: str) -> bool:
    """Whether two answers are close enough in word count to compare fairly.

    True when the longer has at most ``LENGTH_RATIO`` times the words of the
    shorter, or at most ``LENGTH_SLACK_WORDS`` more words.
    """
    a, b = sorted((len(right.split()), len(hallucinated.split())))
    return b - a <= LENGTH_SLACK_WORDS or b <= LENGTH_RATIO * a


def shorter_wins(right: str, hallucinated: str) -> float:
    """The outcome of the "shorter answer is right" rule on one pair (the length floor)."""
    r, h = len(right.split()), len(hallucinated.split())
    return 1.0 if r < h else 0.0 if r > h else 0.5


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _same_length(a: Sequence[Any], b: Sequence[Any]) -> None:
    if len(a) != len(b):
        raise ValueError(f"{len(a)} gold values but {len(b)} predictions")


# --- a run ---------------------------------------------------------------------------


class _RecordingIndex:
    """An index that remembers the raw top-k of each query it was asked.

    Recall@k is measured on the passages the search returned, before the
    threshold rule trims them; keyed by query text, so it does not depend on
    how the pipeline batches its searches.
    """

    def __init__(self, index: Index) -> None:
        self._index = index
        self.hits: dict[str, list[Hit]] = {}

    def search(
        self, queries: Sequence[str], k: int = 5, retrieval: str = "dense"
    ) -> list[list[Hit]]:
        results = self._index.search(queries, k, retrieval)
        self.hits.update(zip(queries, results))
        return results

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)


@dataclass(frozen=True)
class Evaluation:
    """A finished run: the examples, what the checker said, and the metrics."""

    dataset: Dataset
    results: list[CheckedResponse]
    metrics: dict[str, Any]
    #: For each example, for each segment: the raw top-k passages as (doc_id, title).
    retrieved: list[list[list[tuple[str, str]]]]


def run_evaluation(
    dataset: Dataset,
    index: Index | None,
    judge: Judge,
    options: CheckOptions = CheckOptions(),
    *,
    contexts: ContextSearch | None = None,
    on_result: Callable[[CheckedResponse], None] | None = None,
) -> Evaluation:
    """Check every example of ``dataset`` with ``judge`` and score it.

    Evidence comes from ``index``, from each example's own contexts (searched by
    ``contexts``) or both, as ``options.evidence`` says, exactly as ``ceg check``
    takes it. An example that cannot be checked (no contexts and no index) is an
    error: the caller refuses such a run before it starts.
    """
    recorder = _RecordingIndex(index) if index is not None else None
    results = []
    for result in check(
        (e.input for e in dataset.examples),
        recorder,  # type: ignore[arg-type]
        judge,
        options,
        contexts,
    ):
        if result.error is not None:
            raise ValueError(f"response {result.input.id}: {result.error}")
        results.append(result)
        if on_result is not None:
            on_result(result)
    k = options.retrieval.top_k
    sources = Counter(r.evidence_source for r in results)
    # Recall is the index's: only when every item was searched there alone (with
    # contexts in the batch the index may be searched by vector, unrecorded).
    hits = recorder.hits if recorder is not None and set(sources) == {"index"} else {}
    retrieved = [
        [
            [(h.chunk.doc_id, h.chunk.title) for h in hits.get(q, [])[:k]]
            for q in (build_query(s.segment, r.input.question, options.query) for s in r.segments)
        ]
        for r in results
    ]
    metrics = compute_metrics(dataset.examples, results, retrieved if hits else [], k)
    cuts = getattr(judge, "cuts", None)
    settings = tuple(s for s in SETTINGS if s in {setting_of(src) for src in sources})
    metrics["run"] = {
        "dataset": str(dataset.path),
        "format": dataset.format,
        "judge": judge.name,
        "judge_method": judge.method,
        # The cut each setting's segments were decided at, and where it came from
        # (None: the judge gives a label, not a score).
        "judge_threshold": None if cuts is None else cuts.to_json(settings),
        # What the items were judged against (--evidence), and how many items
        # each source served: index, contexts, both, none (an empty list).
        "evidence": options.evidence,
        "evidence_sources": dict(sorted(sources.items())),
        "index": None if index is None else str(index.path),
        "top_k": k,
        "threshold": options.retrieval.threshold,
        "retrieval": options.retrieval.method,
        "query": options.query,
        "skipped": dataset.skipped,
        # Rows that could not be read (no text where text is expected).
        "rows_left_out": len(dataset.bad_rows),
    }
    return Evaluation(dataset, results, metrics, retrieved)


def response_score(result: CheckedResponse) -> float:
    """The mean segment score; a response with no segment claims nothing and scores 1."""
    if not result.segments:
        return 1.0
    return sum(s.verdict.score for s in result.segments) / len(result.segments)


def compute_metrics(
    examples: Sequence[Example],
    results: Sequence[CheckedResponse],
    retrieved: Sequence[Sequence[Sequence[tuple[str, str]]]],
    k: int,
) -> dict[str, Any]:
    """Every metric the examples' gold labels allow, as a JSON-ready dict."""
    if len(examples) != len(results):
        raise ValueError(f"{len(examples)} examples but {len(results)} results")
    out: dict[str, Any] = {}
    seg_gold: list[bool] = []
    seg_pred: list[bool] = []
    seg_score: list[float] = []
    for ex, res in zip(examples, results):
        if ex.segment_labels is None:
            continue
        if len(res.segments) != len(ex.segment_labels):
            raise ValueError(f"response {ex.input.id}: segments changed during the check")
        for gold, s in zip(ex.segment_labels, res.segments):
            seg_gold.append(gold)
            seg_pred.append(s.verdict.label == FACTUAL)
            seg_score.append(s.verdict.score)
    if seg_gold:
        out["segments"] = _classification(seg_gold, seg_pred, seg_score)
        out["segments"]["not_judged"] = sum(
            1
            for ex, r in zip(examples, results)
            if ex.segment_labels is not None
            for s in r.segments
            if s.verdict.label not in (FACTUAL, "nonfactual")
        )
    out["responses"] = _classification(
        [ex.label for ex in examples],
        [r.label == FACTUAL for r in results],
        [response_score(r) for r in results],
    )
    pairwise = _pairwise(examples, results)
    if pairwise:
        out["pairwise"] = pairwise
    recall = _recall(examples, results, retrieved, k) if retrieved else {}
    if recall:
        out["retrieval"] = recall
    return out


def _classification(gold: list[bool], pred: list[bool], score: list[float]) -> dict[str, Any]:
    acc = class_accuracy(gold, pred)
    return {
        "count": len(gold),
        "gold_factual": sum(gold),
        "gold_nonfactual": len(gold) - sum(gold),
        "predicted_nonfactual": len(pred) - sum(pred),
        "accuracy": sum(g == p for g, p in zip(gold, pred)) / len(gold),
        "accuracy_factual": acc["factual"],
        "accuracy_nonfactual": acc["nonfactual"],
        "balanced_accuracy": acc["balanced"],
        "f1_nonfactual": f1(gold, pred, positive=False),
        "auc_pr_factual": average_precision(gold, score),
        "auc_pr_nonfactual": average_precision([not g for g in gold], [1 - s for s in score]),
        # Average precision of a random ranking: the floor to read AUC-PR against.
        "prevalence_nonfactual": (len(gold) - sum(gold)) / len(gold),
    }


def pairs(
    examples: Sequence[Example], results: Sequence[CheckedResponse]
) -> Iterator[tuple[str, Example, CheckedResponse, Example, CheckedResponse]]:
    """(pair id, right example, its result, wrong example, its result) for each pair.

    A pair is two examples with the same ``pair`` id, one gold factual and one
    gold nonfactual; any other grouping is ignored.
    """
    groups: dict[str, list[int]] = defaultdict(list)
    for i, ex in enumerate(examples):
        if ex.pair is not None:
            groups[ex.pair].append(i)
    for pair_id, members in groups.items():
        right = [i for i in members if examples[i].label]
        wrong = [i for i in members if not examples[i].label]
        if len(right) == 1 and len(wrong) == 1:
            r, w = right[0], wrong[0]
            yield pair_id, examples[r], results[r], examples[w], results[w]


def _pairwise(examples: Sequence[Example], results: Sequence[CheckedResponse]) -> dict[str, Any]:
    outcomes, matched, floor, floor_matched = [], [], [], []
    for _pid, rex, rres, wex, wres in pairs(examples, results):
        outcome = pair_outcome(
            (rres.label == FACTUAL, response_score(rres)),
            (wres.label == FACTUAL, response_score(wres)),
        )
        short = shorter_wins(rex.input.response, wex.input.response)
        outcomes.append(outcome)
        floor.append(short)
        if length_matched(rex.input.response, wex.input.response):
            matched.append(outcome)
            floor_matched.append(short)
    if not outcomes:
        return {}
    return {
        "pairs": len(outcomes),
        "accuracy": mean(outcomes),
        "length_matched_pairs": len(matched),
        "length_matched_accuracy": mean(matched),
        "length_rule": f"word counts within x{LENGTH_RATIO} or +-{LENGTH_SLACK_WORDS} words",
        "shorter_wins_accuracy": mean(floor),
        "shorter_wins_length_matched_accuracy": mean(floor_matched),
    }


def evidence_hit(example: Example, passages: Sequence[tuple[str, str]]) -> bool:
    """Whether any passage comes from a gold evidence document (by id or by title)."""
    return any(
        doc_id in example.evidence_ids or normalize_title(title) in example.evidence_titles
        for doc_id, title in passages
    )


def _recall(
    examples: Sequence[Example],
    results: Sequence[CheckedResponse],
    retrieved: Sequence[Sequence[Sequence[tuple[str, str]]]],
    k: int,
) -> dict[str, Any]:
    at1, atk, judged = [], [], []
    for ex, res, per_segment in zip(examples, results, retrieved):
        if not (ex.evidence_ids or ex.evidence_titles):
            continue
        for passages, seg in zip(per_segment, res.segments):
            at1.append(evidence_hit(ex, passages[:1]))
            atk.append(evidence_hit(ex, passages[:k]))
            judged.append(evidence_hit(ex, [(e.doc_id, e.title) for e in seg.evidence]))
    if not atk:
        return {}
    return {
        "segments": len(atk),
        "k": k,
        "recall_at_1": mean(at1),
        "recall_at_k": mean(atk),
        # What the judge saw: the top-k after the threshold rule.
        "recall_judged": mean(judged),
    }


def prediction_record(example: Example, result: CheckedResponse) -> dict[str, Any]:
    """One line of ``ceg eval --out``: gold and predicted labels, per segment too."""
    segments = []
    for i, s in enumerate(result.segments):
        segments.append(
            {
                "text": s.segment.text,
                "start": s.segment.start,
                "end": s.segment.end,
                "gold": None
                if example.segment_labels is None
                else ("factual" if example.segment_labels[i] else "nonfactual"),
                "label": s.verdict.label,
                "verdict": s.verdict.verdict,
                "score": round(s.verdict.score, 4),
                "evidence": [
                    {"doc_id": e.doc_id, "title": e.title, "similarity": e.similarity}
                    for e in s.evidence
                ],
            }
        )
    record: dict[str, Any] = {
        "id": example.input.id,
        "line": example.input.line,
        "gold": "factual" if example.label else "nonfactual",
        "label": result.label,
        "score": round(response_score(result), 4),
        "correct": (result.label == FACTUAL) == example.label,
        "evidence_source": result.evidence_source,
    }
    if example.pair is not None:
        record["pair"] = example.pair
        record["role"] = example.role
    record["segments"] = segments
    return record


def reference_figures(format: str) -> Mapping[str, Mapping[str, float]]:
    """The paper's figures for metrics of this benchmark format (metric path -> system -> value)."""
    return PAPER_REFERENCE.get(format, {})
