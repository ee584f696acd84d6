"""How good an approximate index is, and how wide its search must be: measured, widened.

Recall@10 against exact search on a sample of the index's own vectors as
queries, and the median latency of one query at a time (``measure``); the
search widened step by step until recall reaches ``TARGET_RECALL``
(``tune``). A build records both in meta.json (``vectors.write_vectors``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .vectorsource import VectorSource

#: Queries (the index's own vectors) used to measure recall@10 and latency.
MEASURE_QUERIES = 200
RECALL_K = 10
#: Recall@10 against exact search that tuning widens the search to reach.
TARGET_RECALL = 0.95
#: Doublings tried at most (efSearch 64 -> 1024; nprobe 32 -> 512 and k_factor 4 -> 64).
TUNE_STEPS = 4
#: Seconds of one-query-at-a-time searches after which latency has enough samples.
LATENCY_BUDGET_S = 10.0


def exact_neighbours(source: VectorSource, queries: np.ndarray, k: int) -> np.ndarray:
    """The ids of the ``k`` exact nearest (inner product) of each query, a batch at a time."""
    import faiss

    best_scores = np.zeros((len(queries), 0), dtype=np.float32)
    best_ids = np.zeros((len(queries), 0), dtype=np.int64)
    start = 0
    for batch in source.batches():
        scores, ids = faiss.knn(queries, batch, min(k, len(batch)),
                                metric=faiss.METRIC_INNER_PRODUCT)
        scores = np.hstack([best_scores, scores])
        ids = np.hstack([best_ids, ids + start])
        # Highest first; a stable sort keeps the lower id first among ties.
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        best_scores = np.take_along_axis(scores, order, axis=1)
        best_ids = np.take_along_axis(ids, order, axis=1)
        start += len(batch)
    return best_ids


def sample_queries(source: VectorSource, count: int, seed: int) -> np.ndarray:
    """A sample of the index's own vectors, used as queries to measure it."""
    n = source.count
    picked = np.sort(np.random.default_rng(seed).choice(n, min(count, n), replace=False))
    return np.ascontiguousarray(source.take(picked))


def measure(
    index: Any, queries: np.ndarray, exact: np.ndarray, k: int = RECALL_K
) -> dict[str, Any]:
    """Recall@k of ``index`` against the ``exact`` neighbours of ``queries``, and its latency.

    Recall from one batch; latency (median) from searching the queries one at
    a time, as many as ``LATENCY_BUDGET_S`` allows, at least 5.
    """
    if len(queries) == 0:
        return {"recall_at_10": 1.0, "search_ms": 0.0, "measured_queries": 0}
    k = min(k, int(index.ntotal))
    _, found = index.search(queries, k)
    times: list[float] = []
    for row in range(len(queries)):
        t0 = time.perf_counter()
        index.search(queries[row : row + 1], k)
        times.append(time.perf_counter() - t0)
        if sum(times) > LATENCY_BUDGET_S and len(times) >= 5:
            break  # an exact scan of tens of millions takes seconds a query
    hits = sum(len(set(a) & set(b)) for a, b in zip(exact[:, :k].tolist(), found.tolist()))
    return {
        "recall_at_10": round(hits / (len(queries) * k), 4),
        "search_ms": round(1000 * float(np.median(times)), 3),
        "measured_queries": len(queries),
        "latency_queries": len(times),
    }


def tune(
    index: Any, kind: str, params: dict[str, Any], queries: np.ndarray, exact: np.ndarray
) -> dict[str, Any]:
    """Widen the search (HNSW efSearch; IVF nprobe and re-ranked candidates) to the target.

    Search-time settings are saved with the index, so the width found here is
    the one ``ceg check`` uses; ``params`` is updated. Returns the last measure.
    """
    measured = measure(index, queries, exact)
    for _ in range(TUNE_STEPS):
        if kind == "flat" or measured["recall_at_10"] >= TARGET_RECALL:
            break
        if kind == "hnsw":
            index.hnsw.efSearch *= 2
            params["efSearch"] = int(index.hnsw.efSearch)
        else:
            # PQ's order is what loses most (1 M synthetic: 0.60 at nprobe 32
            # and 512 alike), so re-rank more candidates as well as probe more.
            ivf = faiss_ivf(index)
            ivf.nprobe = min(ivf.nlist, ivf.nprobe * 2)
            index.k_factor = index.k_factor * 2
            params["nprobe"] = int(ivf.nprobe)
            params["k_factor"] = int(index.k_factor)
        measured = measure(index, queries, exact)
    return measured


def faiss_ivf(index: Any) -> Any:
    """The IVF index inside an ``ivfpq`` (refine) index."""
    import faiss

    return faiss.extract_index_ivf(index)
