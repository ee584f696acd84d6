"""The FAISS index type of ``vectors.faiss``: chosen by size, measured, memory-mapped.

A build keeps its vectors in shards on disk (``buildwork``); ``write_vectors``
reads them through a ``VectorSource``, one batch at a time, writes the chosen
type, measures it against exact search and widens its search to the target:

- ``flat``: exact search (``IndexFlatIP``), every query scans every vector.
- ``hnsw``: an HNSW graph over the exact vectors (``IndexHNSWFlat``, inner
  product); approximate candidates, exact scores.
- ``ivfpq``: an inverted file of product-quantized codes whose candidates are
  re-ranked by exact cosine from the stored flat vectors (``IndexRefineFlat``
  over ``IndexIVFPQ``); PQ alone loses too much recall (README, "Index types").

Memory: ``flat`` and ``ivfpq`` are written in a stream (``faissfile``: the flat vectors go
from the shards to the file a batch at a time, beside FAISS's own
serialization of the header and of the IVF lists, which hold 56 bytes a
passage); only ``hnsw`` builds its graph, and its copy of the vectors, in
memory. Every type keeps the exact vectors, so ``reconstruct`` is exact:
``--append`` re-reads them and hybrid retrieval's cosines (``Index.cosines``)
are exact. ``auto`` picks ``flat`` below ``AUTO_THRESHOLD`` passages and
``ivfpq`` from there: the figures behind both are in README.md ("Index types").
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from ...progress import NO_PROGRESS, Counter, Progress
from .faissfile import (  # read_vectors: re-exported, its home is the file module
    read_vectors,
    refine_prefix,
    rewrite_search_width,
    write_flat_file,
    write_refine_file,
)
from .tuning import (
    MEASURE_QUERIES,
    RECALL_K,
    exact_neighbours,
    faiss_ivf,
    sample_queries,
    tune,
)
from .vectorsource import ArraySource, VectorSource

_NO_COUNTER = NO_PROGRESS.counter("", "")

INDEX_TYPES = ("auto", "flat", "hnsw", "ivfpq", "ivfpqfs")
#: Passages from which ``auto`` builds an approximate index (see the module docstring).
AUTO_THRESHOLD = 50_000
#: The approximate type ``auto`` picks at or above the threshold.
AUTO_APPROXIMATE = "ivfpq"
#: Passages from which ``auto`` builds ``ivfpqfs`` instead (``fastscan``; measured:
#: docs/measurements.md, "Search at scale").
AUTO_LARGE_THRESHOLD = 1_000_000

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

_FAISS_CLASS = {"flat": "IndexFlatIP", "hnsw": "IndexHNSWFlat", "ivfpq": "IndexRefineFlat",
               "ivfpqfs": "IndexRefineFlat"}


def choose_type(
    requested: str, count: int, threshold: int = AUTO_THRESHOLD,
    large: int = AUTO_LARGE_THRESHOLD,
) -> tuple[str, str]:
    """The type to build for ``count`` vectors and why (recorded in meta.json)."""
    if requested != "auto":
        return requested, "user"
    if count >= max(threshold, large):
        return "ivfpqfs", f"auto: {count:,} passages >= {large:,}"
    if count >= threshold:
        return AUTO_APPROXIMATE, f"auto: {count:,} passages >= {threshold:,}"
    return "flat", f"auto: {count:,} passages < {threshold:,}"


def requested_type(requested: str, old_meta: dict[str, Any] | None) -> str:
    """On ``--append`` without ``--index-type``, the type a user chose before stays."""
    old = (old_meta or {}).get("faiss") or {}
    if requested != "auto":
        return requested
    if old.get("requested") in INDEX_TYPES[1:]:
        # Recorded even when the index fell back to flat (too few passages for ivfpq):
        # the user's choice stays, and applies once the index is large enough.
        return str(old["requested"])
    if old.get("chosen") == "user":  # recorded before "requested" was
        return str(old["index_type"])
    return requested


def convert(flat: Any, kind: str, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """``flat`` (an ``IndexFlatIP`` in memory) as an index of ``kind``, and its parameters.

    For experiments (``benchmarks/search/index_types.py``); a build streams instead
    (``write_vectors``).
    """
    import faiss

    n, d = int(flat.ntotal), int(flat.d)
    if kind == "flat":
        return flat, {}
    vecs = np.zeros((0, d), dtype=np.float32)
    if n:
        vecs = faiss.rev_swig_ptr(flat.get_xb(), n * d).reshape(n, d)
    if kind == "hnsw":
        return _hnsw(ArraySource(vecs))
    if kind == "ivfpq":
        if n < IVFPQ_MIN:
            return flat, {"fallback": f"{n} passages are too few to train ivfpq"}
        ivf, params = _trained_ivfpq(ArraySource(vecs), seed)
        index = faiss.IndexRefineFlat(ivf)
        index.k_factor = REFINE_K_FACTOR
        index.add(vecs)  # to both: the IVF lists and the flat vectors
        return index, params
    raise ValueError(f"unknown index type {kind!r}; one of {', '.join(INDEX_TYPES)}")


def _hnsw(source: VectorSource, added: Counter = _NO_COUNTER) -> tuple[Any, dict[str, Any]]:
    import faiss

    index = faiss.IndexHNSWFlat(source.dimension, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    index.hnsw.efSearch = HNSW_EF_SEARCH
    for batch in source.batches():
        index.add(batch)
        added.update(len(batch))
    return index, {
        "M": HNSW_M,
        "efConstruction": HNSW_EF_CONSTRUCTION,
        "efSearch": HNSW_EF_SEARCH,
    }


def pq_subquantizers(d: int) -> int:
    """Sub-quantizers of an ``ivfpq`` index of dimension ``d``: the most, up to ``PQ_M``,
    that divide it. (It was ``PQ_M`` or else 1: a 256-dimension ``static-minilm`` index
    got one 8-bit code per vector, and recall@10 0.80 at every search width.)"""
    return max(m for m in range(1, PQ_M + 1) if d % m == 0)


def _trained_ivfpq(source: VectorSource, seed: int) -> tuple[Any, dict[str, Any]]:
    """An empty ``IndexIVFPQ`` trained on a sample of ``source``, and its parameters."""
    import faiss

    n, d = source.count, source.dimension
    nlist = max(1, min(int(math.sqrt(n)), n // 39))
    # 256 centroids per sub-quantizer need 256 training points; fewer on tiny indexes.
    nbits = max(1, min(8, int(math.log2(max(n, 2)))))
    pq_m = pq_subquantizers(d)
    train_n = min(n, max(TRAIN_PER_LIST * nlist, 1 << (nbits + 6)))
    picked = np.arange(n)
    if train_n < n:
        picked = np.sort(np.random.default_rng(seed).choice(n, train_n, replace=False))
    sample = np.ascontiguousarray(source.take(picked))
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
    ivf.train(sample)
    ivf.nprobe = min(IVF_NPROBE, nlist)
    return ivf, {
        "nlist": nlist,
        "nprobe": int(ivf.nprobe),
        "pq_m": pq_m,
        "pq_bits": nbits,
        "refine": "exact cosine from stored flat vectors",
        "k_factor": REFINE_K_FACTOR,
        "trained_on": int(len(sample)),
    }


def write_vectors(
    source: VectorSource,
    path: Path,
    requested: str = "auto",
    threshold: int = AUTO_THRESHOLD,
    seed: int = 0,
    progress: Progress = NO_PROGRESS,
    large: int = AUTO_LARGE_THRESHOLD,
) -> dict[str, Any]:
    """Write ``source`` to ``path`` as the chosen type; the ``faiss`` entry of meta.json.

    The index is measured and tuned as ``ceg check`` opens it: memory-mapped
    from ``path``. ``progress`` counts the vectors added to an approximate
    index (``indexed``) and those written to the file (``written``). The entry's
    ``recall_at_10`` below ``target_recall`` means the widest search tried missed
    the target (the builder warns).
    """
    import faiss

    from . import fastscan, tuning

    kind, why = choose_type(requested, source.count, threshold, large)
    least = {"ivfpq": IVFPQ_MIN, "ivfpqfs": fastscan.FASTSCAN_MIN}.get(kind, 0)
    fallback = None
    if source.count < least:
        # Said at build time (``fell_back``) and recorded as what happened, not "user".
        fallback = (f"{kind} needs at least {least:,} passages to train; this index has "
                    f"{source.count:,}")
        kind, why = "flat", f"fallback: --index-type {kind} requested, {fallback}"

    def written() -> Counter:
        return progress.counter("written", "vectors", total=source.count)

    t0 = time.perf_counter()
    params: dict[str, Any] = {}
    ivf = None
    if kind == "flat":
        write_flat_file(source, path, written())
    elif kind == "hnsw":
        index, params = _hnsw(source, progress.counter("indexed", "vectors", source.count))
    elif kind == "ivfpqfs":
        ivf, prefix_len, trained_on, params = fastscan.build(source, path, seed, progress)
    else:
        ivf, params = _trained_ivfpq(source, seed)
        prefix = refine_prefix(ivf, source.count)  # while the lists are empty: a cheap clone
        prefix_len = len(prefix)
        indexed = progress.counter("indexed", "vectors", total=source.count)
        for batch in source.batches():
            ivf.add(batch)
            indexed.update(len(batch))
        write_refine_file(prefix, ivf, REFINE_K_FACTOR, source, path, written())
    seconds = time.perf_counter() - t0
    if kind == "ivfpqfs":
        measured = fastscan.calibrate(source, path, ivf, prefix_len, trained_on, params,
                                      tuning.TARGET_RECALL, seed)
    else:
        queries = sample_queries(source, MEASURE_QUERIES, seed)
        exact = exact_neighbours(source, queries, min(RECALL_K, max(source.count, 1)))
        if kind == "hnsw":
            measured = tune(index, kind, params, queries, exact)
            faiss.write_index(index, str(path))
        else:
            index = read_vectors(path)
            measured = tune(index, kind, params, queries, exact)
            if ivf is not None:
                ivf.nprobe = faiss_ivf(index).nprobe
                rewrite_search_width(path, prefix_len, ivf, index.k_factor)
        del index
        if kind != "flat":
            measured["target_recall"] = tuning.TARGET_RECALL
    del ivf
    _check_written(path, source, kind)
    return {
        "type": _FAISS_CLASS[kind],
        "metric": "inner_product",
        "index_type": kind,
        "chosen": why,
        **({"requested": requested} if requested != "auto" else {}),
        **({"fallback": fallback} if fallback else {}),
        "params": params,
        "convert_seconds": round(seconds, 3),
        **measured,
    }


def _check_written(path: Path, source: VectorSource, kind: str) -> None:
    """Read the file back: its type, its size and a sample of its vectors must be right."""
    index = read_vectors(path)
    if type(index).__name__ != _FAISS_CLASS[kind] or int(index.ntotal) != source.count:
        raise RuntimeError(
            f"{path}: read back as {type(index).__name__} of {index.ntotal} vectors, "
            f"written as {_FAISS_CLASS[kind]} of {source.count}"
        )
    if source.count:
        rng = np.random.default_rng(1)
        ids = np.unique(np.concatenate([[0, source.count - 1],
                                        rng.integers(0, source.count, 16)]))
        stored = np.vstack([index.reconstruct(int(i)) for i in ids])
        if not np.array_equal(stored, source.take(ids)):
            raise RuntimeError(f"{path}: vectors read back differ from those written")


def fell_back(entry: dict[str, Any]) -> str | None:
    """What to say when the requested index type could not be built (too few passages)."""
    why = entry.get("fallback")
    if not why:
        return None
    return (f"--index-type {entry.get('requested')}: built flat (exact search) instead: {why}; "
            "the type is kept and used once an --append makes the index large enough")


def recall_missed(entry: dict[str, Any]) -> str | None:
    """What to say when a build's widest search tried fell short of the target recall."""
    recall, target = entry.get("recall_at_10"), entry.get("target_recall")
    if recall is None or target is None or recall >= target:
        return None
    settings = ", ".join(f"{name} {entry['params'][name]}"
                         for name in ("nprobe", "efSearch", "k_factor")
                         if name in entry.get("params", {}))
    return (
        f"the {entry['index_type']} index reaches recall@10 {recall:.3f} against exact "
        f"search, below the {target} target, at the widest search tried ({settings}): "
        "checks will miss some passages exact search finds; search wider with "
        "--search-width, or build another --index-type"
    )


def describe(meta: dict[str, Any]) -> dict[str, Any]:
    """Type, why, search settings and measured recall of an index's vectors; older indexes
    are flat."""
    entry = meta.get("faiss") or {}
    params = entry.get("params", {})
    return {
        "index_type": entry.get("index_type", "flat"),
        "chosen": entry.get("chosen", "built before index types were recorded"),
        "params": params,
        "search": {name: params[name] for name in ("nprobe", "efSearch", "k_factor")
                   if name in params},
        "recall_at_10": entry.get("recall_at_10"),
        "target_recall": entry.get("target_recall"),
        "search_ms": entry.get("search_ms"),
        "batch_queries_per_s": entry.get("batch_queries_per_s"),
    }
