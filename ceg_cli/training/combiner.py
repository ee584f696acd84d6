"""Fit the verifier's combiner: features of labelled pairs, as ``ceg check`` would see them.

A training pair has a claim and an evidence text (a sentence, a passage or a
whole document). To give the combiner the features it will see at check time,
the evidence is cut into ~100-word passages as the index builder cuts a
document, the passages are ranked by the embedding model's cosine similarity
to the claim, and the CEG retrieval rule keeps the top ``k`` (the top one
always, the others at or above the threshold). The claim and those passages
then go through exactly the judge's code: window, cross-encoder, lexical
analysis, features.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ..chunking import chunk_document
from ..judges import offline
from ..judges.features import FEATURES, compute
from ..judges.verifier import Combiner
from ..judges.window import DEFAULT_WINDOW_WORDS, select_window
from ..types import FACTUAL, Document, Evidence, JudgeItem, Segment
from .sources import Pair

__all__ = ["fit", "items_for", "featurize"]


def items_for(
    pairs: Sequence[Pair],
    embed: Callable[[list[str]], Any],
    *,
    top_k: int = 5,
    threshold: float = 0.35,
) -> list[JudgeItem]:
    """One ``JudgeItem`` per pair: the claim and its evidence passages, retrieved by rank."""
    import numpy as np

    chunks: list[list[str]] = []
    for i, p in enumerate(pairs):
        doc = Document(f"pair{i}", "", p.evidence)
        chunks.append([c.text for c in chunk_document(doc)] or [p.evidence])
    flat = [t for cs in chunks for t in cs]
    qv = embed([p.claim for p in pairs])
    pv = embed(flat)
    items = []
    at = 0
    for i, (p, cs) in enumerate(zip(pairs, chunks)):
        sims = pv[at : at + len(cs)] @ qv[i]
        at += len(cs)
        order = np.argsort(-sims)[:top_k]
        kept = [int(j) for r, j in enumerate(order) if r == 0 or sims[j] >= threshold]
        ev = tuple(Evidence(j, f"pair{i}", "", cs[j], float(sims[j])) for j in kept)
        items.append(JudgeItem(Segment(0, 0, len(p.claim), p.claim), ev))
    return items


def featurize(
    items: Sequence[JudgeItem],
    entailment: Callable[[list[tuple[str, str]]], list[float]],
    *,
    window_words: int = DEFAULT_WINDOW_WORDS,
) -> list[tuple[float, ...]]:
    """The feature vector of each item, computed as the verifier judge computes it."""
    windows = [
        select_window(
            it.segment.text,
            [e.text for e in it.evidence],
            max_words=window_words,
            titles=[e.title for e in it.evidence],
        )
        for it in items
    ]
    ents = entailment([(it.segment.text, w.text) for it, w in zip(items, windows)])
    out = []
    for it, w, ent in zip(items, windows, ents):
        a = offline.analyse(it)
        lexical = offline.decide(it, a).label == FACTUAL
        out.append(compute(a, ent, w.overlap, [e.similarity for e in it.evidence], lexical).values)
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
