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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..progress import NO_PROGRESS, Counter, Progress
from .faissfile import refine_prefix, rewrite_search_width, write_flat_file, write_refine_file
from .vectorsource import VectorSource

_NO_COUNTER = NO_PROGRESS.counter("", "")

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
    if requested != "auto":
        return requested
    if old.get("requested") in INDEX_TYPES[1:]:
        # Recorded even when the index fell back to flat (too few passages for ivfpq):
        # the user's choice stays, and applies once the index is large enough.
        return str(old["requested"])
    if old.get("chosen") == "user":  # recorded before "requested" was
        return str(old["index_type"])
    return requested


class ArraySource:
    """A ``VectorSource`` over vectors in memory (tests, benchmarks)."""

    def __init__(self, vectors: np.ndarray, batch: int = 65536) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.dimension = int(self.vectors.shape[1])
        self._batch = batch

    @property
    def count(self) -> int:
        return len(self.vectors)

    def batches(self) -> Iterator[np.ndarray]:
        for start in range(0, len(self.vectors), self._batch):
            yield self.vectors[start : start + self._batch]

    def take(self, ids: np.ndarray) -> np.ndarray:
        return self.vectors[ids]


class ShardFiles:
    """A ``VectorSource`` over ``.npy`` files of vectors, in order, then ``extra`` arrays.

    The files' sizes are read once, from their headers; the vectors are read
    a batch at a time (``batches``) or memory-mapped for a few rows (``take``).
    """

    def __init__(self, files: list[Path], dimension: int, extra: Sequence[np.ndarray] = (),
                 batch: int = 8192) -> None:
        self.files = files
        self.dimension = dimension
        self.extra = list(extra)
        self._batch = batch
        self._lengths = [np.load(f, mmap_mode="r").shape[0] for f in files]
        self._lengths += [len(e) for e in self.extra]

    @property
    def count(self) -> int:
        return sum(self._lengths)

    def batches(self) -> Iterator[np.ndarray]:
        # Read, not mapped: pages of a mapping stay in the process's resident
        # memory while it lives, which would show the whole file as used.
        for file in self.files:
            with open(file, "rb") as fh:
                fmt = np.lib.format
                header = (fmt.read_array_header_1_0 if fmt.read_magic(fh) == (1, 0)
                          else fmt.read_array_header_2_0)
                shape, fortran, dtype = header(fh)
                if fortran or dtype != np.dtype("<f4") or shape[1:] != (self.dimension,):
                    raise RuntimeError(f"{file}: not a C-order float32 array of "
                                       f"{self.dimension} columns")
                for start in range(0, shape[0], self._batch):
                    rows = min(self._batch, shape[0] - start)
                    batch = np.empty((rows, self.dimension), dtype=np.float32)
                    if fh.readinto(memoryview(batch).cast("B")) != batch.nbytes:
                        raise RuntimeError(f"{file}: shorter than its header says")
                    yield batch
        yield from self.extra

    def take(self, ids: np.ndarray) -> np.ndarray:
        ends = np.cumsum(self._lengths)
        which = np.searchsorted(ends, ids, side="right")
        out = np.empty((len(ids), self.dimension), dtype=np.float32)
        for number in np.unique(which):
            rows = which == number
            part = (np.load(self.files[number], mmap_mode="r") if number < len(self.files)
                    else self.extra[number - len(self.files)])
            out[rows] = part[ids[rows] - (ends[number] - self._lengths[number])]
        return out


def convert(flat: Any, kind: str, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """``flat`` (an ``IndexFlatIP`` in memory) as an index of ``kind``, and its parameters.

    For experiments (``benchmarks/index_types.py``); a build streams instead
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


def _trained_ivfpq(source: VectorSource, seed: int) -> tuple[Any, dict[str, Any]]:
    """An empty ``IndexIVFPQ`` trained on a sample of ``source``, and its parameters."""
    import faiss

    n, d = source.count, source.dimension
    nlist = max(1, min(int(math.sqrt(n)), n // 39))
    # 256 centroids per sub-quantizer need 256 training points; fewer on tiny indexes.
    nbits = max(1, min(8, int(math.log2(max(n, 2)))))
    pq_m = PQ_M if d % PQ_M == 0 else 1
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


def write_vectors(
    source: VectorSource,
    path: Path,
    requested: str = "auto",
    threshold: int = AUTO_THRESHOLD,
    seed: int = 0,
    progress: Progress = NO_PROGRESS,
) -> dict[str, Any]:
    """Write ``source`` to ``path`` as the chosen type; the ``faiss`` entry of meta.json.

    The index is measured and tuned as ``ceg check`` opens it: memory-mapped
    from ``path``. ``progress`` counts the vectors added to an approximate
    index (``indexed``) and those written to the file (``written``).
    """
    import faiss

    kind, why = choose_type(requested, source.count, threshold)
    if kind == "ivfpq" and source.count < IVFPQ_MIN:
        kind, why = "flat", f"{why}; {source.count} passages are too few to train ivfpq"

    def written() -> Counter:
        return progress.counter("written", "vectors", total=source.count)

    t0 = time.perf_counter()
    params: dict[str, Any] = {}
    ivf = None
    if kind == "flat":
        write_flat_file(source, path, written())
    elif kind == "hnsw":
        index, params = _hnsw(source, progress.counter("indexed", "vectors", source.count))
    else:
        ivf, params = _trained_ivfpq(source, seed)
        prefix = refine_prefix(ivf, source.count)  # while the lists are empty: a cheap clone
        indexed = progress.counter("indexed", "vectors", total=source.count)
        for batch in source.batches():
            ivf.add(batch)
            indexed.update(len(batch))
        write_refine_file(prefix, ivf, REFINE_K_FACTOR, source, path, written())
    seconds = time.perf_counter() - t0
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
            rewrite_search_width(path, len(prefix), ivf, index.k_factor)
    del index
    _check_written(path, source, kind)
    return {
        "type": _FAISS_CLASS[kind],
        "metric": "inner_product",
        "index_type": kind,
        "chosen": why,
        **({"requested": requested} if requested != "auto" else {}),
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
