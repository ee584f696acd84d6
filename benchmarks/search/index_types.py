"""Index types side by side: build time, memory, latency, recall@10, open time.

For each set of vectors (synthetic at the sizes given, and the real enwiki
sample index's vectors), builds every type with the code a build uses
(``ceg_cli.index.dense.vectors.convert``), measures recall@10 against exact search and the
median per-query latency (``ceg_cli.index.dense.tuning.measure``: 200 of the index's own
vectors as queries, one at a time), the file size, and the time and resident
memory of opening the written file with a full read and memory-mapped.

Synthetic vectors (dimension 384): 2,000 random unit centres, each vector a
centre plus Gaussian noise of the same total norm as the centre, normalized;
queries from the index itself have near neighbours in their own cluster, as
passages of one article do, without being trivially separable.

    .venv/bin/python benchmarks/search/index_types.py --sizes 100000 1000000
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    CACHE_DIR,
    RESULTS_DIR,
    cache_dir,
    command_line,
    environment,
    markdown_table,
    results_file,
    work_dir,
    write_json,
)

from ceg_cli.index.dense import tuning as T  # noqa: E402
from ceg_cli.index.dense import vectors as V  # noqa: E402

REAL = CACHE_DIR / "enwiki-sample-index" / "vectors.faiss"
TYPES = ("flat", "hnsw", "ivfpq")


def synthetic_blocks(
    n: int, d: int = 384, centres: int = 2000, seed: int = 0
) -> Iterator[np.ndarray]:
    """The synthetic vectors, 100,000 at a time (the same vectors whatever is asked of them)."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, d)).astype(np.float32)
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    for at in range(0, n, 100_000):
        m = min(100_000, n - at)
        noise = rng.standard_normal((m, d)).astype(np.float32) / np.sqrt(d)
        block = c[rng.integers(0, centres, m)] + noise
        yield block / np.linalg.norm(block, axis=1, keepdims=True)


def synthetic(n: int, d: int = 384, centres: int = 2000, seed: int = 0) -> np.ndarray:
    out = np.empty((n, d), dtype=np.float32)
    at = 0
    for block in synthetic_blocks(n, d, centres, seed):
        out[at : at + len(block)] = block
        at += len(block)
    return out


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def open_times(path: Path, repeats: int = 3) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, mmap in (("read", False), ("mmap", True)):
        times, grew = [], []
        for _ in range(repeats):
            gc.collect()
            before = rss_mib()
            t0 = time.perf_counter()
            index = V.read_vectors(path, mmap=mmap)
            times.append(time.perf_counter() - t0)
            grew.append(rss_mib() - before)
            del index
        out[f"open_{mode}_ms"] = round(1000 * float(np.median(times)), 2)
        out[f"open_{mode}_rss_mib"] = round(float(np.median(grew)), 1)
    return out


def bench(
    name: str, vecs: np.ndarray, workdir: Path, types: Sequence[str] = TYPES
) -> list[dict[str, Any]]:
    import faiss

    flat = faiss.IndexFlatIP(vecs.shape[1])
    flat.add(vecs)
    source = V.ArraySource(vecs)
    queries = T.sample_queries(source, T.MEASURE_QUERIES, 0)
    exact = T.exact_neighbours(source, queries, T.RECALL_K)
    rows = []
    for kind in types:
        gc.collect()
        before = rss_mib()
        t0 = time.perf_counter()
        index, params = V.convert(flat, kind)
        build = time.perf_counter() - t0
        grew = round(rss_mib() - before, 1)
        untuned = T.measure(index, queries, exact)["recall_at_10"]
        row: dict[str, Any] = {
            "vectors": name,
            "n": int(flat.ntotal),
            "type": kind,
            "build_s": round(build, 2),
            "build_rss_growth_mib": grew,
            "recall_at_10_untuned": untuned,
            **T.tune(index, kind, params, queries, exact),  # as a build does: widen to the target
            "params": params,
        }
        if kind == "ivfpq" and hasattr(index, "base_index"):
            # The same IVF-PQ without exact re-ranking: what the refine step buys.
            base = faiss.downcast_index(index.base_index)
            row["recall_at_10_without_refine"] = T.measure(base, queries, exact)["recall_at_10"]
        path = workdir / f"{name}-{kind}.faiss"
        faiss.write_index(index, str(path))
        row["file_mib"] = round(path.stat().st_size / 2**20, 1)
        del index
        row.update(open_times(path))
        path.unlink()
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--real", type=Path, default=REAL, help="the enwiki sample's vectors")
    parser.add_argument("--no-real", action="store_true", help="skip the enwiki sample vectors")
    parser.add_argument("--types", nargs="*", default=list(TYPES), choices=TYPES)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "index_types.json")
    args = parser.parse_args()
    args.out = results_file(args.out)  # before any work: only in benchmarks/results/
    import faiss

    rows: list[dict[str, Any]] = []
    # In benchmarks/.cache, as before, not the system's temporary folder: a million
    # vectors in each index type take gigabytes on disk.
    with work_dir(None, prefix="ceg-index-types-", parent=cache_dir()) as work:
        if not args.no_real:
            if not args.real.exists():
                sys.exit(f"{args.real} is missing: run "
                         "benchmarks/search/retrieval_recall.py to build it")
            real = faiss.read_index(str(args.real))
            rows += bench(
                "enwiki-sample", real.reconstruct_n(0, real.ntotal), work, args.types
            )
        for n in args.sizes:
            vecs = synthetic(n)
            rows += bench(f"synthetic-{n}", vecs, work, args.types)
            del vecs
            gc.collect()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    header = ["vectors", "type", "build s", "recall@10", "ms/query", "file MiB",
              "open read ms", "open mmap ms", "RSS read MiB", "RSS mmap MiB"]
    table = markdown_table(header, [
        [r["vectors"], r["type"], r["build_s"], r["recall_at_10"], r["search_ms"], r["file_mib"],
         r["open_read_ms"], r["open_mmap_ms"], r["open_read_rss_mib"], r["open_mmap_rss_mib"]]
        for r in rows
    ])
    print(table)
    result = {"command": command_line(), "environment": environment(),
              "peak_rss_mib": round(peak), "rows": rows, "table": table}
    write_json(args.out, result)
    print(f"peak RSS {peak:.0f} MiB; written to {args.out}")


if __name__ == "__main__":
    main()
