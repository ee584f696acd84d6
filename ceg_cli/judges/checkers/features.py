"""The verifier's features: what the lexical judge, retrieval and a cross-encoder know.

One function computes them for a segment and its evidence, the same way at
training time and at check time; the combiner (``verifier.Combiner``) weighs
them. Every feature is a share, a flag, a similarity or a logit, never a raw
count that grows with the length of a segment.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..offline.offline import Analysis

__all__ = ["FEATURES", "Features", "compute"]

#: Feature names in the order of the vector the combiner reads.
FEATURES = (
    "entailment_logit",  # the cross-encoder over the evidence window, as a logit
    "coverage",  # share of the segment's content words found in the evidence
    "specifics_found",  # share of its numbers and names found, each in one passage
    "number_missing",  # 1 if some number of the segment is in no passage
    "name_missing",  # 1 if some name of the segment is in no passage
    "lexical_support",  # 1 if the lexical judge would call it supported
    "window_overlap",  # share of the segment's (weighted) keys inside the window
    "similarity_top",  # cosine similarity of the query and the top passage
    "similarity_mean",  # mean similarity of the passages given
    "agreement",  # share of passages holding at least half of the segment's content words
    "log_content_words",  # log(1 + content words): long segments carry more to miss
)


@dataclass(frozen=True)
class Features:
    values: tuple[float, ...]

    def as_dict(self) -> dict[str, float]:
        return dict(zip(FEATURES, self.values))


def _logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def compute(
    analysis: Analysis,
    entailment: float,
    window_overlap: float,
    similarities: Sequence[float],
    lexical_supported: bool,
) -> Features:
    content = {t.key for t in analysis.content}
    agree = (
        [len(content & keys) >= 0.5 * len(content) for keys in analysis.passage_keys]
        if content
        else []
    )
    missing = analysis.missing
    return Features(
        (
            _logit(entailment),
            analysis.coverage,
            analysis.specifics_found,
            float(any(s.kind == "number" for s in missing)),
            float(any(s.kind == "name" for s in missing)),
            float(lexical_supported),
            window_overlap,
            max(similarities) if similarities else 0.0,
            sum(similarities) / len(similarities) if similarities else 0.0,
            sum(agree) / len(agree) if agree else 0.0,
            math.log1p(len(analysis.content)),
        )
    )
