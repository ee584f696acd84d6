"""``ivfpqfs``: the index type for 10 to 30 M passages (English Wikipedia).

``IndexRefineFlat`` over ``IndexIVFPQFastScan`` with an HNSW coarse quantizer
(FAISS's factory string ``IVF{nlist}_HNSW32,PQ{m}x4fs,RFlat``):

- the lists: ``nlist`` by size as FAISS's guideline has it (65,536 up to 10 M
  vectors, 262,144 up to 100 M; fewer below: the power of two nearest 16 x
  sqrt(n), and at least ``TRAIN_PER_LIST`` training points a list), their
  centroids found by two-level k-means on a sample of ``TRAIN_PER_LIST`` x
  nlist vectors (``twolevel``), and searched through an HNSW graph of the
  centroids rather than compared one by one;
- the codes: product quantization in ``PQ_M`` parts of 4 bits (``PQ_M`` / 2
  bytes a passage), scanned with FAISS's fast-scan kernels (SIMD lookups in
  registers, 32 codes at a time), which is what makes a batch of queries cheap;
- the order: the best ``k x k_factor`` candidates re-ranked by exact cosine
  against the flat vectors the file keeps (memory-mapped), so the cosine a
  citation shows is exact, as with every other type.

Search settings (``nprobe``, the quantizer's ``efSearch``, ``k_factor``) are
calibrated after the index is written, on passages of the index held out of
training, each searched for its neighbours other than itself: the cheapest
setting (``search_cost``) whose recall@10 reaches the target by two standard
errors of its estimate is written into the file; when none does, the one of
the best recall tried is, and the build says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ...progress import NO_PROGRESS, Progress
from .faissfile import read_vectors, refine_prefix, rewrite_search_width, write_refine_file
from .tuning import LATENCY_BUDGET_S, RECALL_K, exact_neighbours
from .twolevel import two_level_centroids
from .vectorsource import VectorSource

#: Lists by size (FAISS's guideline): up to 10 M vectors, then up to 100 M.
NLIST_10M = 65_536
NLIST_100M = 262_144
#: Training points per list (FAISS asks for 30 to 256).
TRAIN_PER_LIST = 30
#: Neighbours per node of the quantizer's HNSW graph, and its construction width.
QUANTIZER_M = 32
QUANTIZER_EF_CONSTRUCTION = 40
#: The quantizer's efSearch while vectors are added (their list is chosen once).
ADD_EF_SEARCH = 64
#: PQ parts of 4 bits: 384 dimensions in 96 parts of 4, 48 bytes a passage. At 1 M
#: real-like vectors (docs/measurements.md, "Search at scale") the codes alone found
#: 0.47 of the exact top 10 against 0.30 with 48 parts, and recall@10 0.97 needed
#: 16 candidates re-ranked per result against 32: half the reads of stored vectors.
PQ_M = 96
#: Vectors the product quantizer is trained on.
PQ_TRAIN = 65_536
#: Fewer vectors than this are indexed flat (no lists or codes worth training).
FASTSCAN_MIN = 64
#: Passages searched for their neighbours to calibrate the search.
CALIBRATION_QUERIES = 1000
#: The settings tried: candidates re-ranked per result, lists probed.
K_FACTORS = (2, 4, 8, 16, 32, 64)
MAX_NPROBE = 4096
#: Recall gained by doubling nprobe below which probing more is not tried.
PLATEAU = 0.001
#: Nanoseconds of search work, rough estimates that rank settings by cost: a code
#: of 96 4-bit parts scanned, a step of the quantizer's graph search, an exact
#: re-ranking of one candidate (a stored vector read from the page cache).
COST_NS = {"code": 1.0, "graph": 500.0, "refine": 250.0}


def nlist_for(n: int) -> int:
    """Lists for ``n`` vectors: FAISS's guideline, fewer below 10 M (see the module)."""
    if n > 10_000_000:
        guideline = NLIST_100M
    else:
        guideline = min(NLIST_10M, 2 ** round(math.log2(max(16 * math.sqrt(n), 1))))
    room = max(1, n // TRAIN_PER_LIST)
    return max(1, min(guideline, 2 ** int(math.log2(room))))


def quantizer_ef(nprobe: int) -> int:
    """The quantizer's efSearch for ``nprobe`` lists: the graph is searched twice as wide."""
    return max(2 * nprobe, 32)


def search_cost(n: int, nlist: int, nprobe: int, k_factor: int, k: int = RECALL_K) -> float:
    """Estimated nanoseconds of one query (``COST_NS``): what calibration minimises."""
    scanned = nprobe * n / max(nlist, 1)
    return (scanned * COST_NS["code"] + quantizer_ef(nprobe) * COST_NS["graph"]
            + k * k_factor * COST_NS["refine"])


def build(
    source: VectorSource, path: Path, seed: int = 0, progress: Progress = NO_PROGRESS
) -> tuple[Any, int, np.ndarray, dict[str, Any]]:
    """Train, fill and write ``path``; the IVF index (its lists in memory), the length
    of the file's prefix before it, the positions it was trained on, and its parameters."""
    import faiss

    n, d = source.count, source.dimension
    nlist = nlist_for(n)
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(n, min(n, TRAIN_PER_LIST * nlist), replace=False))
    t0 = time.perf_counter()
    cells = progress.counter("trained", "cells")
    centroids = two_level_centroids(
        source, sample, nlist, path.parent / f".{path.name}.train", seed,
        on_cell=lambda _done, _total: cells.update(1),
    )
    quantizer = faiss.IndexHNSWFlat(d, QUANTIZER_M, faiss.METRIC_INNER_PRODUCT)
    quantizer.hnsw.efConstruction = QUANTIZER_EF_CONSTRUCTION
    quantizer.add(centroids)
    # The most parts up to PQ_M that divide the dimension (another model's 512: 64).
    pq_m = max([m for m in range(1, PQ_M + 1) if d % m == 0])
    ivf = faiss.IndexIVFPQFastScan(quantizer, d, nlist, pq_m, 4, faiss.METRIC_INNER_PRODUCT)
    ivf.by_residual = True
    ivf.pq.cp.min_points_per_centroid = 1  # tiny indexes: no FAISS warning
    pq_sample = np.sort(rng.choice(n, min(n, PQ_TRAIN), replace=False))
    with one_thread():
        # PQ_M k-means of 16 centroids: little work in many parallel steps, whose
        # thread barriers cost more than the work when the cores are busy (4 s on
        # one thread against 109 s on two, measured on this project's machine).
        ivf.train(np.ascontiguousarray(source.take(pq_sample)))
    train_seconds = time.perf_counter() - t0
    prefix = refine_prefix(ivf, n)  # while the lists are empty: a cheap clone
    quantizer.hnsw.efSearch = ADD_EF_SEARCH
    indexed = progress.counter("indexed", "vectors", total=n)
    for batch in source.batches():
        ivf.add(batch)
        indexed.update(len(batch))
    write_refine_file(prefix, ivf, K_FACTORS[0], source, path,
                      progress.counter("written", "vectors", total=n))
    params = {
        "nlist": nlist,
        "quantizer": f"HNSW{QUANTIZER_M}",
        "pq_m": pq_m,
        "pq_bits": 4,
        "fast_scan": True,
        "refine": "exact cosine from stored flat vectors",
        "trained_on": int(len(sample)),
        "training": "two-level k-means",
        "train_seconds": round(train_seconds, 1),
    }
    return ivf, len(prefix), sample, params


def calibrate(
    source: VectorSource,
    path: Path,
    ivf: Any,
    prefix: int,
    trained_on: np.ndarray,
    params: dict[str, Any],
    target: float,
    seed: int = 0,
) -> dict[str, Any]:
    """Find the cheapest search reaching ``target`` recall@10 on held-out passages, write it
    into the file at ``path`` and ``params``; the measure of it (the meta.json fields)."""
    n = source.count
    queries, own = held_out(source, trained_on, seed)
    k = min(RECALL_K, max(n - 1, 1))
    exact = _without(exact_neighbours(source, queries, k + 1), own, k)
    index = read_vectors(path)
    tried: list[list[float]] = []

    def recall(nprobe: int, k_factor: int) -> float:
        _set(index, nprobe, k_factor)
        # k + 1 found, the query's own passage dropped: it must cost one candidate
        # re-ranked, not k_factor of them, or recall reads higher than a search for k
        # (at 1 M real-like vectors, 0.952 against 0.936 for queries not indexed).
        index.k_factor = (k * k_factor + 1.5) / (k + 1)  # FAISS takes int(k * k_factor)
        _, found = index.search(queries, k + 1)
        value = recall_of(_without(found, own, k), exact)
        tried.append([nprobe, quantizer_ef(nprobe), k_factor, value])
        return value

    nlist = int(params["nlist"])
    probes = [p for p in (2 ** i for i in range(3, 13)) if p < min(nlist, MAX_NPROBE)]
    probes.append(min(nlist, MAX_NPROBE))
    reached: list[tuple[float, int, int, float]] = []
    # Reached when it is by two standard errors of the estimate, so that the
    # setting holds for queries calibration has not seen: 0.9544 for 0.95 on
    # 1,000 queries of 10 neighbours.
    spread = max(target * (1 - target), 0.0) / max(len(queries) * k, 1)
    needed = target + 2 * math.sqrt(spread)
    for k_factor in K_FACTORS:
        before = -1.0
        for nprobe in probes:
            value = recall(nprobe, k_factor) if len(queries) else 1.0
            if value >= min(needed, 1.0):
                reached.append((search_cost(n, nlist, nprobe, k_factor), nprobe, k_factor, value))
                break
            if value - before < PLATEAU:
                break  # more lists find nothing more: the codes' order is the limit
            before = value
        if reached and reached[-1][1] == probes[0]:
            break  # wider re-ranking cannot make the narrowest probe cheaper
    if reached:
        _, nprobe, k_factor, value = min(reached)
    else:  # the best tried (the cheapest of equals), and the build says it missed
        best = max(tried, key=lambda r: (r[3], -search_cost(n, nlist, int(r[0]), int(r[2]))))
        nprobe, k_factor, value = int(best[0]), int(best[2]), best[3]
    _set(index, nprobe, k_factor)
    _set(ivf, nprobe, None)
    rewrite_search_width(path, prefix, ivf, float(k_factor))
    params.update(nprobe=nprobe, efSearch=quantizer_ef(nprobe), k_factor=k_factor,
                  calibration={"queries": int(len(queries)), "held_out": True,
                               "target": target, "needed": round(needed, 4),
                               "tried": tried})
    return {
        "recall_at_10": round(float(value), 4),
        "target_recall": target,
        "recall_reached": bool(value >= target),
        "measured_queries": int(len(queries)),
        **latency(index, queries, k),
    }


def held_out(
    source: VectorSource, trained_on: np.ndarray, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Passages to calibrate on, outside the training sample ``trained_on`` where the index
    has enough of them, and their positions."""
    n = source.count
    rest = np.setdiff1d(np.arange(n), trained_on, assume_unique=True)
    pool = rest if len(rest) >= min(CALIBRATION_QUERIES, n) else np.arange(n)
    own = np.sort(np.random.default_rng(seed + 1).choice(
        pool, min(CALIBRATION_QUERIES, len(pool)), replace=False))
    return np.ascontiguousarray(source.take(own)), own


def _without(found: np.ndarray, own: np.ndarray, k: int) -> np.ndarray:
    """Each row's first ``k`` ids other than its query's own."""
    out = np.empty((len(found), k), dtype=np.int64)
    for row, (ids, me) in enumerate(zip(found, own)):
        kept = ids[ids != me]
        out[row] = kept[:k] if len(kept) >= k else np.pad(kept, (0, k - len(kept)),
                                                           constant_values=-1)
    return out


def recall_of(found: np.ndarray, exact: np.ndarray) -> float:
    """Share of the exact neighbours found (ids below 0 are no neighbour)."""
    hits = total = 0
    for a, b in zip(exact.tolist(), found.tolist()):
        wanted = {i for i in a if i >= 0}
        hits += len(wanted & set(b))
        total += len(wanted)
    return hits / total if total else 1.0


def latency(index: Any, queries: np.ndarray, k: int) -> dict[str, Any]:
    """Median ms of one query at a time, and queries per second in one batch."""
    if not len(queries):
        return {"search_ms": 0.0, "latency_queries": 0}
    times: list[float] = []
    for row in range(len(queries)):
        t0 = time.perf_counter()
        index.search(queries[row : row + 1], k)
        times.append(time.perf_counter() - t0)
        if sum(times) > LATENCY_BUDGET_S and len(times) >= 5:
            break
    t0 = time.perf_counter()
    index.search(queries, k)
    batch = time.perf_counter() - t0
    return {
        "search_ms": round(1000 * float(np.median(times)), 3),
        "latency_queries": len(times),
        "batch_queries_per_s": round(len(queries) / max(batch, 1e-9), 1),
    }


@contextmanager
def one_thread() -> Iterator[None]:
    """FAISS on one thread meanwhile (its setting is global: the build's alone)."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _set(index: Any, nprobe: int, k_factor: int | None) -> None:
    import faiss

    ivf = faiss.extract_index_ivf(index)
    ivf.nprobe = nprobe
    faiss.downcast_index(ivf.quantizer).hnsw.efSearch = quantizer_ef(nprobe)
    if k_factor is not None:
        index.k_factor = float(k_factor)
