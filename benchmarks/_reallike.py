"""Real-like passage vectors in any number: the sample index's real vectors, mixed and perturbed.

The project has 5,804 real passage vectors (the enwiki sample index, embedded
with all-MiniLM-L6-v2); embedding millions of real passages takes days on
this machine. Vectors drawn around random centres (``index_types.py``) have
none of the real vectors' structure: topics of very unequal size, passages of
one article close together, a few close neighbours and then a long tail.
These keep it: each new vector starts from a real passage vector (its
*anchor*, drawn uniformly), moves part of the way towards ``MIX`` of the
anchor's ``NEIGHBOURS`` nearest real passages (each weight uniform in
[0, ``REACH``]), then gets isotropic Gaussian noise scaled by the anchor's
distance to its nearest real passage, and is normalised. So the coarse
structure (which topics exist, how big, how far apart) is the real one, and
locally the new vectors fill the space between real neighbours, as more
passages of the same articles would.

The noise scale (``sigma``) is the one free choice. It is set, once per base,
so that a generated set as large as the base has the base's median cosine to
the nearest neighbour (``calibrate_sigma``): at the size where the two can be
compared, neighbours are as close as real ones. What that does not pin down
(how neighbour distances shrink as the set grows 1,000-fold) is the
limitation of any such generator; measurements on it are a stand-in for real
passages, and say so.

Deterministic for a given base, size and seed; generated in blocks, with each
vector's anchor (a real passage id: ``check_speed`` at scale shows the
anchor's text as the passage).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

NEIGHBOURS = 16
MIX = 3
REACH = 0.5
BLOCK = 100_000


def base_vectors(index: Path) -> np.ndarray:
    """The real vectors of a built index (``vectors.faiss``, any type), float32."""
    import faiss

    stored = faiss.read_index(str(index / "vectors.faiss"))
    return np.ascontiguousarray(stored.reconstruct_n(0, stored.ntotal), dtype=np.float32)


class RealLike:
    def __init__(self, base: np.ndarray, sigma: float | None = None) -> None:
        import faiss

        self.base = np.ascontiguousarray(base, dtype=np.float32)
        scores, ids = faiss.knn(self.base, self.base, NEIGHBOURS + 1,
                                metric=faiss.METRIC_INNER_PRODUCT)
        # Column 0 is the passage itself (or a duplicate of it): its neighbours follow.
        self.neighbours = ids[:, 1:]
        nearest = np.clip(scores[:, 1], -1.0, 1.0)
        self.scale = np.sqrt(np.maximum(2.0 - 2.0 * nearest, 1e-6)).astype(np.float32)
        self.base_nn_cosine = float(np.median(nearest))
        self.sigma = self.calibrate_sigma() if sigma is None else sigma

    def block(self, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``m`` new vectors and their anchors."""
        d = self.base.shape[1]
        anchors = rng.integers(0, len(self.base), m)
        picks = self.neighbours[anchors[:, None], rng.integers(0, NEIGHBOURS, (m, MIX))]
        weights = rng.uniform(0.0, REACH, (m, MIX)).astype(np.float32)
        start = self.base[anchors]
        out = start.copy()
        for j in range(MIX):
            out += weights[:, j : j + 1] * (self.base[picks[:, j]] - start)
        noise = rng.standard_normal((m, d), dtype=np.float32) / np.sqrt(d)
        out += (self.sigma * self.scale[anchors])[:, None] * noise
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out, anchors

    def blocks(self, n: int, seed: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        rng = np.random.default_rng(seed)
        for at in range(0, n, BLOCK):
            yield self.block(min(BLOCK, n - at), rng)

    def nn_cosine(self, sigma: float, seed: int = 12345) -> float:
        """Median cosine to the nearest other vector in a generated set of the base's size."""
        import faiss

        kept, self.sigma = self.sigma if hasattr(self, "sigma") else 0.0, sigma
        try:
            x, _ = self.block(len(self.base), np.random.default_rng(seed))
        finally:
            self.sigma = kept
        scores, _ = faiss.knn(x, x, 2, metric=faiss.METRIC_INNER_PRODUCT)
        return float(np.median(scores[:, 1]))

    def calibrate_sigma(self) -> float:
        """The noise scale at which ``nn_cosine`` equals the base's (bisection)."""
        low, high = 0.0, 4.0
        for _ in range(14):
            mid = (low + high) / 2
            if self.nn_cosine(mid) > self.base_nn_cosine:
                low = mid  # neighbours closer than real ones: more noise
            else:
                high = mid
        return round((low + high) / 2, 4)
