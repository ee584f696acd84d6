"""Two-level k-means for an inverted file of tens of thousands of lists, in bounded memory.

An ``ivfpqfs`` index of 10 to 30 M passages has 65,536 to 262,144 lists,
trained on at least 30 points a list: 2 to 8 M vectors (3 to 12 GB), more than
a build may hold, and one k-means over them compares every point with every
centroid (2 M x 65,536 x 384: about 10^14 operations an iteration, hours on 2
cores). So, as FAISS's own ``contrib.clustering.two_level_clustering`` does,
the centroids are found in two levels, and here without holding the sample:

1. level 1: ``sqrt(nlist)`` centroids from k-means on a sub-sample of
   ``LEVEL1_POINTS`` points each;
2. the training sample is read once, in order, from the source (a build's
   shards: sequential reads) and each point written to the file of its
   level-1 cell in ``spill``, a folder beside the index being built;
3. level 2: each cell's file is clustered on its own into a share of the
   ``nlist`` centroids proportional to its points (FAISS's rebalancing), so
   memory holds one cell (about 30 x sqrt(nlist) points).

Each point meets ``sqrt(nlist)`` centroids at each level instead of ``nlist``:
about 128 times less work at 65,536 lists. Spherical k-means (unit centroids),
since the index compares by inner product of unit vectors. Deterministic for
a given source and seed.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .vectorsource import VectorSource

#: Points per level-1 centroid in the level-1 sub-sample (FAISS caps k-means at 256).
LEVEL1_POINTS = 256
#: k-means iterations at each level (FAISS's default is 25; the second level's cells
#: are small and settle sooner).
LEVEL1_ITERATIONS = 20
LEVEL2_ITERATIONS = 12
#: Bytes of spilled points held in memory before they are appended to their files.
SPILL_BUFFER_BYTES = 64 << 20


def two_level_centroids(
    source: VectorSource,
    sample: np.ndarray,
    nlist: int,
    spill: Path,
    seed: int = 0,
    on_cell: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """``nlist`` unit centroids (float32, ``nlist`` x d) of the points ``sample`` of ``source``.

    ``sample``: sorted positions in ``source``, at least ``nlist`` of them.
    ``spill``: a folder this function creates and removes (its files: the
    sample, cell by cell). ``on_cell(done, cells)`` reports level 2's progress.
    """
    import faiss

    d = source.dimension
    if len(sample) < nlist:
        raise ValueError(f"{len(sample)} training points for {nlist} lists")
    rng = np.random.default_rng(seed)
    nc1 = max(1, min(int(round(math.sqrt(nlist))), nlist))
    sub = np.sort(rng.choice(sample, min(len(sample), nc1 * LEVEL1_POINTS), replace=False))
    level1 = _kmeans(np.ascontiguousarray(source.take(sub)), nc1, LEVEL1_ITERATIONS, seed)
    assigner = faiss.IndexFlatIP(d)
    assigner.add(level1)
    shutil.rmtree(spill, ignore_errors=True)
    spill.mkdir(parents=True)
    try:
        counts = _spill(source, sample, assigner, spill)
        shares = _shares(counts, nlist)
        centroids = []
        for cell in range(nc1):
            if shares[cell]:
                points = np.fromfile(spill / f"{cell}.f32", dtype=np.float32).reshape(-1, d)
                if shares[cell] == len(points):
                    centroids.append(points)  # as many lists as points: each its own
                else:
                    centroids.append(_kmeans(points, int(shares[cell]), LEVEL2_ITERATIONS,
                                             seed + 1 + cell))
            if on_cell is not None:
                on_cell(cell + 1, nc1)
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    out = np.ascontiguousarray(np.vstack(centroids), dtype=np.float32)
    faiss.normalize_L2(out)
    return out


def _kmeans(points: np.ndarray, k: int, iterations: int, seed: int) -> np.ndarray:
    import faiss

    km = faiss.Kmeans(points.shape[1], k, niter=iterations, seed=seed, spherical=True,
                      max_points_per_centroid=1 << 30, min_points_per_centroid=1)
    km.train(points)
    return np.ascontiguousarray(km.centroids, dtype=np.float32)


def _spill(source: VectorSource, sample: np.ndarray, assigner: object, spill: Path) -> np.ndarray:
    """Write each sampled point to its level-1 cell's file; the points per cell."""
    nc1 = int(assigner.ntotal)  # type: ignore[attr-defined]
    counts = np.zeros(nc1, dtype=np.int64)
    held: list[list[np.ndarray]] = [[] for _ in range(nc1)]
    held_bytes = 0
    start = 0
    for batch in source.batches():
        lo, hi = np.searchsorted(sample, [start, start + len(batch)])
        start += len(batch)
        if lo == hi:
            continue
        rows = np.ascontiguousarray(batch[sample[lo:hi] - (start - len(batch))])
        _, cells = assigner.search(rows, 1)  # type: ignore[attr-defined]
        cells = cells[:, 0]
        for cell in np.unique(cells):
            part = rows[cells == cell]
            held[cell].append(part)
            counts[cell] += len(part)
            held_bytes += part.nbytes
        if held_bytes >= SPILL_BUFFER_BYTES:
            _flush(held, spill)
            held_bytes = 0
    _flush(held, spill)
    if counts.sum() != len(sample):
        raise RuntimeError(f"{spill}: {counts.sum()} training points read for {len(sample)}")
    return counts


def _flush(held: list[list[np.ndarray]], spill: Path) -> None:
    for cell, parts in enumerate(held):
        if parts:
            with open(spill / f"{cell}.f32", "ab") as fh:
                for part in parts:
                    fh.write(part.tobytes())
            parts.clear()


def _shares(counts: np.ndarray, nlist: int) -> np.ndarray:
    """Centroids per level-1 cell, proportional to its points, summing to ``nlist``;
    never more than a cell's points."""
    total = int(counts.sum())
    cum = np.cumsum(counts) * nlist // total
    shares = np.diff(np.concatenate([[0], cum])).astype(np.int64)
    shares = np.minimum(shares, counts)
    short = nlist - int(shares.sum())
    # Rounding or a cell of few points left some lists unassigned: the cells with
    # the most points per centroid take them (len(sample) >= nlist, so room exists).
    while short > 0:
        room = counts - shares
        cell = int(np.argmax(np.where(room > 0, counts / np.maximum(shares, 1), -1)))
        shares[cell] += 1
        short -= 1
    return shares
