"""The FAISS index type of ``vectors.faiss``: chosen by size, measured, memory-mapped.

A build fills an exact ``IndexFlatIP``; ``write_vectors`` turns it into the
chosen type, measures it against exact search and writes it:

- ``flat``: exact search (``IndexFlatIP``), every query scans every vector.
- ``hnsw``: an HNSW graph over the exact vectors (``IndexHNSWFlat``, inner
  product); approximate candidates, exact scores.
- ``ivfpq``: an inverted file of product-quantized codes whose candidates are
  re-ranked by exact cosine from the stored flat vectors (``IndexRefineFlat``
  over ``IndexIVFPQ``); PQ alone loses too much recall (README, "Index types").

Every type keeps the exact vectors, so ``reconstruct`` is exact: ``--append``
re-reads them and hybrid retrieval's cosines (``Index.cosines``) are exact.
``auto`` picks ``flat`` below ``AUTO_THRESHOLD`` passages and ``ivfpq`` from
there: the figures behind both are in README.md ("Index types").
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

INDEX_TYPES = ("auto", "flat", "hnsw", "ivfpq")
#: Passages from which ``auto`` builds an approximate index (see the module docstring).
AUTO_THRESHOLD = 50_000
#: The approximate type ``auto`` picks at or above the threshold.
AUTO_APPROXIMATE = "ivfpq"

HNSW_M = 32
HNSW_EF_CONSTRUCTION = 40
HNSW_EF_SEARCH = 64
#: PQ sub-quantizers: 384 dimensions in 48 parts of 8, one byte each.
PQ_M = 48
IVF_NPROBE = 32
#: Candidates per result re-ranked by exact cosine (ivfpq).
REFINE_K_FACTOR = 4
#: Fewer vectors than this cannot train product quantizers: ivfpq is then flat.
IVFPQ_MIN = 16
#: Training points per IVF list (FAISS warns below 39).
TRAIN_PER_LIST = 64
#: Queries (the index's own vectors) used to measure recall@10 and latency.
MEASURE_QUERIES = 200
RECALL_K = 10
#: Recall@10 against exact search that tuning widens the search to reach.
TARGET_RECALL = 0.95
#: Doublings tried at most (efSearch 64 -> 1024; nprobe 32 -> 512 and k_factor 4 -> 64).
TUNE_STEPS = 4
#: Seconds of one-query-at-a-time searches after which latency has enough samples.
LATENCY_BUDGET_S = 10.0

_FAISS_CLASS = {"flat": "IndexFlatIP", "hnsw": "IndexHNSWFlat", "ivfpq": "IndexRefineFlat"}


def choose_type(requested: str, count: int, threshold: int = AUTO_THRESHOLD) -> tuple[str, str]:
    """The type to build for ``count`` vectors and why (recorded in meta.json)."""
    if requested != "auto":
        return requested, "user"
    if count >= threshold:
        return AUTO_APPROXIMATE, f"auto: {count:,} passages >= {threshold:,}"
    return "flat", f"auto: {count:,} passages < {threshold:,}"


def requested_type(requested: str, old_meta: dict[str, Any] | None) -> str:
    """On ``--append`` without ``--index-type``, the type a user chose before stays."""
    old = (old_meta or {}).get("faiss") or {}
    if requested == "auto" and old.get("chosen") == "user":
        return str(old["index_type"])
    return requested


def convert(flat: Any, kind: str, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """``flat`` (an ``IndexFlatIP``) as an index of ``kind``, and its parameters."""
    import faiss

    n, d = int(flat.ntotal), int(flat.d)
    if kind == "flat":
        return flat, {}
    # A view of the flat index's own buffer: a copy would double peak memory.
    vecs = np.zeros((0, d), dtype=np.float32)
    if n:
        vecs = faiss.rev_swig_ptr(flat.get_xb(), n * d).reshape(n, d)
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(d, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH
        index.add(vecs)
        return index, {
            "M": HNSW_M,
            "efConstruction": HNSW_EF_CONSTRUCTION,
            "efSearch": HNSW_EF_SEARCH,
        }
    if kind == "ivfpq":
        if n < IVFPQ_MIN:
            return flat, {"fallback": f"{n} passages are too few to train ivfpq"}
        return _ivfpq(vecs, d, seed)
    raise ValueError(f"unknown index type {kind!r}; one of {', '.join(INDEX_TYPES)}")


def _ivfpq(vecs: np.ndarray, d: int, seed: int) -> tuple[Any, dict[str, Any]]:
    import faiss

    n = len(vecs)
    nlist = max(1, min(int(math.sqrt(n)), n // 39))
    # 256 centroids per sub-quantizer need 256 training points; fewer on tiny indexes.
    nbits = max(1, min(8, int(math.log2(max(n, 2)))))
    pq_m = PQ_M if d % PQ_M == 0 else 1
    train_n = min(n, max(TRAIN_PER_LIST * nlist, 1 << (nbits + 6)))
    sample = vecs
    if train_n < n:
        sample = vecs[np.random.default_rng(seed).choice(n, train_n, replace=False)]
    quantizer = faiss.IndexFlatIP(d)
    ivf = faiss.IndexIVFPQ(quantizer, d, nlist, pq_m, nbits, faiss.METRIC_INNER_PRODUCT)
    ivf.cp.seed = seed
    # Tiny indexes train on fewer points than FAISS advises; its warnings would be noise.
    ivf.cp.min_points_per_centroid = 1
    ivf.pq.cp.min_points_per_centroid = 1
    # 48 k-means of 256 centroids dominate training (70 s for 5,804 vectors on 2
    # busy cores with FAISS's 256 points per centroid, 25 iterations); the exact
    # re-ranking makes up for coarser codes.
    ivf.pq.cp.max_points_per_centroid = 64
    ivf.pq.cp.niter = 10
    ivf.train(np.ascontiguousarray(sample))
    ivf.nprobe = min(IVF_NPROBE, nlist)
    index = faiss.IndexRefineFlat(ivf)
    index.k_factor = REFINE_K_FACTOR
    index.add(vecs)  # FAISS's Python layer keeps ivf and quantizer alive with it
    return index, {
        "nlist": nlist,
        "nprobe": int(ivf.nprobe),
        "pq_m": pq_m,
        "pq_bits": nbits,
        "refine": "exact cosine from stored flat vectors",
        "k_factor": REFINE_K_FACTOR,
        "trained_on": int(len(sample)),
    }


def measure(
    index: Any, flat: Any, queries: int = MEASURE_QUERIES, k: int = RECALL_K, seed: int = 0
) -> dict[str, Any]:
    """Recall@k of ``index`` against exact search (``flat``), and its median latency.

    The queries are a sample of the index's own vectors; recall from one batch,
    latency from searching them one at a time (as many as ``LATENCY_BUDGET_S``
    allows, at least 5).
    """
    n = int(flat.ntotal)
    if n == 0:
        return {"recall_at_10": 1.0, "search_ms": 0.0, "measured_queries": 0}
    k = min(k, n)
    picked = np.sort(np.random.default_rng(seed).choice(n, min(queries, n), replace=False))
    q = np.vstack([flat.reconstruct(int(i)) for i in picked])
    _, exact = flat.search(q, k)
    _, found = index.search(q, k)
    times: list[float] = []
    for row in range(len(q)):
        t0 = time.perf_counter()
        index.search(q[row : row + 1], k)
        times.append(time.perf_counter() - t0)
        if sum(times) > LATENCY_BUDGET_S and len(times) >= 5:
            break  # an exact scan of tens of millions takes seconds a query
    hits = sum(len(set(a) & set(b)) for a, b in zip(exact.tolist(), found.tolist()))
    return {
        "recall_at_10": round(hits / (len(q) * k), 4),
        "search_ms": round(1000 * float(np.median(times)), 3),
        "measured_queries": len(q),
        "latency_queries": len(times),
    }


def tune(index: Any, flat: Any, kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """Widen the search (HNSW efSearch; IVF nprobe and re-ranked candidates) to the target.

    Search-time settings are saved with the index, so the width found here is
    the one ``ceg check`` uses; ``params`` is updated. Returns the last measure.
    """
    measured = measure(index, flat)
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
        measured = measure(index, flat)
    return measured


def faiss_ivf(index: Any) -> Any:
    """The IVF index inside an ``ivfpq`` (refine) index."""
    import faiss

    return faiss.extract_index_ivf(index)


def write_vectors(
    flat: Any, path: Path, requested: str = "auto", threshold: int = AUTO_THRESHOLD
) -> dict[str, Any]:
    """Write ``flat`` to ``path`` as the chosen type; the ``faiss`` entry of meta.json."""
    import faiss

    kind, why = choose_type(requested, int(flat.ntotal), threshold)
    t0 = time.perf_counter()
    index, params = convert(flat, kind)
    seconds = time.perf_counter() - t0
    if "fallback" in params:
        kind, why = "flat", f"{why}; {params.pop('fallback')}"
    measured = tune(index, flat, kind, params)
    entry = {
        "type": _FAISS_CLASS[kind],
        "metric": "inner_product",
        "index_type": kind,
        "chosen": why,
        "params": params,
        "convert_seconds": round(seconds, 3),
        **measured,
    }
    faiss.write_index(index, str(path))
    return entry


def read_vectors(path: Path, mmap: bool = True) -> Any:
    """Read ``vectors.faiss``; with ``mmap`` its flat vectors stay in the file.

    ``IO_FLAG_MMAP_IFC`` maps the flat codes (of every type here) in place, so
    opening costs no read of the vectors and memory follows what searches
    touch; the rest (an HNSW graph, IVF lists of PQ codes) is read. The older
    ``IO_FLAG_MMAP`` maps only on-disk IVF lists and reads flat vectors whole.
    """
    import faiss

    flags = faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY if mmap else 0
    return faiss.read_index(str(path), flags)


def describe(meta: dict[str, Any]) -> dict[str, Any]:
    """Type, why and measured recall of an index's vectors; older indexes are flat."""
    entry = meta.get("faiss") or {}
    return {
        "index_type": entry.get("index_type", "flat"),
        "chosen": entry.get("chosen", "built before index types were recorded"),
        "params": entry.get("params", {}),
        "recall_at_10": entry.get("recall_at_10"),
        "search_ms": entry.get("search_ms"),
    }
