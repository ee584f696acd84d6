"""Fit the verifier's combiner: features of labelled pairs, as ``ceg check`` would see them.

A training pair has a claim and an evidence text (a sentence, a passage or a
whole document). To give the combiner the features it will see at check time,
the evidence is cut into ~100-word passages as the index builder cuts a
document, the passages are ranked by the embedding model's cosine similarity
to the claim, and the CEG retrieval rule (``retrieve.apply_threshold``) keeps
the top ``k``. The claim and those passages then go through the judge's own
code (``verifier.assess``): window, cross-encoder, lexical analysis, features.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ..check.retrieve import DEFAULT_THRESHOLD, DEFAULT_TOP_K, apply_threshold, to_evidence
from ..index import Hit
from ..index.build.chunking import chunk_document
from ..judges.checkers.features import FEATURES
from ..judges.checkers.verifier import Combiner, assess
from ..judges.checkers.window import DEFAULT_WINDOW_WORDS
from ..types import Chunk, Document, JudgeItem, Segment
from .sources import Pair

__all__ = ["evaluate", "featurize", "fit", "items_for"]


def items_for(
    pairs: Sequence[Pair],
    embed: Callable[[list[str]], Any],
    *,
    top_k: int = DEFAULT_TOP_K,
    threshold: float = DEFAULT_THRESHOLD,
) -> list[JudgeItem]:
    """One ``JudgeItem`` per pair: the claim and its evidence passages, retrieved by rank."""
    import numpy as np

    chunks = []
    for i, p in enumerate(pairs):
        doc = Document(f"pair{i}", "", p.evidence)
        chunks.append(chunk_document(doc) or [doc_as_chunk(doc)])
    qv = embed([p.claim for p in pairs])
    pv = embed([c.text for cs in chunks for c in cs])
    items = []
    at = 0
    for i, (p, cs) in enumerate(zip(pairs, chunks)):
        sims = pv[at : at + len(cs)] @ qv[i]
        at += len(cs)
        hits = [Hit(int(j), float(sims[j]), cs[j]) for j in np.argsort(-sims)[:top_k]]
        evidence = tuple(to_evidence(h) for h in apply_threshold(hits, threshold))
        items.append(JudgeItem(Segment(0, 0, len(p.claim), p.claim), evidence))
    return items


def doc_as_chunk(doc: Document) -> Chunk:
    """The whole of a document the chunker cut nothing from (no sentence in it)."""
    return Chunk(doc.id, doc.title, 0, 0, len(doc.text), doc.text)


def featurize(
    items: Sequence[JudgeItem],
    entailment: Callable[[list[tuple[str, str]]], list[float]],
    *,
    window_words: int = DEFAULT_WINDOW_WORDS,
) -> list[tuple[float, ...]]:
    """The feature vector of each item, computed by the judge's own ``assess``."""
    return [m.features.values for m in assess(items, entailment, window_words=window_words)]


def evaluate(y: Sequence[int], p: Sequence[float], threshold: float = 0.5) -> dict[str, float]:
    """Balanced accuracy and nonfactual AUC-PR (when both labels occur), accuracy, counts.

    ``y`` is 1 for supported; ``p`` is P(supported).
    """
    import numpy as np
    from sklearn.metrics import average_precision_score, balanced_accuracy_score

    ya, pa = np.asarray(y), np.asarray(p, dtype=np.float64)
    pred = (pa >= threshold).astype(int)
    out = {"n": int(len(ya)), "nonfactual_share": round(float(1 - ya.mean()), 4)}
    if len(set(ya.tolist())) == 2:
        out["balanced_accuracy"] = round(float(balanced_accuracy_score(ya, pred)), 4)
        out["auc_pr_nonfactual"] = round(float(average_precision_score(1 - ya, 1 - pa)), 4)
    out["accuracy"] = round(float((pred == ya).mean()), 4)
    return out


def fit(
    X: Sequence[Sequence[float]],
    y: Sequence[int],
    groups: Sequence[str],
    *,
    C: float = 1.0,
    **settings: Any,
) -> Combiner:
    """Logistic regression, each (source, label) cell weighing the same in total.

    So no source dominates by its size and classes are balanced within each:
    the decision threshold 0.5 then aims at balanced accuracy.
    """
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    Xa = np.asarray(X, dtype=np.float64)
    ya = np.asarray(y)
    cells = Counter(zip(groups, y))
    w = np.array([1.0 / cells[(g, t)] for g, t in zip(groups, y)])
    w *= len(w) / w.sum()
    mean = Xa.mean(axis=0)
    scale = Xa.std(axis=0)
    scale[scale == 0] = 1.0
    lr = LogisticRegression(C=C, max_iter=2000)
    lr.fit((Xa - mean) / scale, ya, sample_weight=w)
    return Combiner(
        FEATURES,
        tuple(float(v) for v in mean),
        tuple(float(v) for v in scale),
        tuple(float(v) for v in lr.coef_[0]),
        float(lr.intercept_[0]),
        0.5,
        **settings,
    )
