"""Search at scale: today's ``ivfpq`` and ``ivfpqfs`` side by side, at 1 M and 10 M vectors.

For each size, real-like passage vectors (``_reallike.py``: the enwiki sample
index's 5,804 real vectors, mixed with their real neighbours and perturbed)
are written to shard files as a build keeps them, with 1,000 more drawn the
same way and held out as queries; their exact top 10 (a scan of every
vector) is the reference. Then each type is written from the shards in its
own process, exactly as ``ceg index build`` writes it (``write_vectors``:
training, lists, the file, the search widened or calibrated to recall@10
0.95), and searched from another process with the file memory-mapped, as
``ceg check`` opens it:

- recall@10 of the 1,000 queries against the reference, with the search
  settings the build chose;
- batched queries/s: the 1,000 queries in batches of 80 (one ``ceg check``
  batch of 16 responses), after one pass that brings what the search touches
  into the page cache; and single-query ms (median of one at a time);
- memory: the search process's anonymous memory and its mapped file pages
  (``RssAnon``, ``RssFile``) after the searches, the build's peak anonymous
  and resident memory; build time; file size; opening time.

Both types run on the same vectors in one run, one after the other (each
file is removed after it is measured, so the disk holds the shards and one
index at a time: about 3.1 GB per million vectors). The 30 M row is
projected from the 1 M and 10 M ones (growth by a power law through both
points), with the disk and memory it needs.

    .venv/bin/python benchmarks/search/search_scale.py --sizes 1000000 10000000 \
        [--types ivfpq ivfpqfs] [--base-index index] [--workdir DIR]

The machine is shared: the load average is recorded at each step
(``load``), and query speed means most when it was low.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    REPO,
    RESULTS_DIR,
    cache_dir,
    command_line,
    ends_with_parent,
    environment,
    log,
    markdown_table,
    proc_status_kib,
    results_file,
    usage_error,
    watch,
    work_dir,
    write_json,
)
from _reallike import RealLike, base_vectors  # noqa: E402

SHARD = 500_000
QUERIES = 1000
CHECK_BATCH = 80
GENERATOR_SEED = 0
QUERY_SEED = 1_000_003


def load() -> float:
    return round(os.getloadavg()[0], 1)


# -- the vectors ---------------------------------------------------------------------------


def write_shards(folder: Path, n: int, generator: RealLike) -> list[Path]:
    """``n`` real-like vectors in shard files of ``SHARD`` (reused when a kept workdir has
    them), and the held-out queries beside them."""
    marker = folder / "made.json"
    made = {"n": n, "sigma": generator.sigma, "seed": GENERATOR_SEED, "shard": SHARD}
    if marker.exists() and json.loads(marker.read_text()) == made:
        return shard_files(folder)
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "shards").mkdir(parents=True)
    files: list[Path] = []
    rows: list[np.ndarray] = []
    held = 0
    for block, _ in generator.blocks(n, GENERATOR_SEED):
        rows.append(block)
        held += len(block)
        if held >= SHARD:
            files.append(_save(folder, len(files), np.concatenate(rows)))
            rows, held = [], 0
    if rows:
        files.append(_save(folder, len(files), np.concatenate(rows)))
    queries, _ = generator.block(QUERIES, np.random.default_rng(QUERY_SEED))
    np.save(folder / "queries.npy", queries)
    marker.write_text(json.dumps(made))
    return files


def shard_files(folder: Path) -> list[Path]:
    return sorted((folder / "shards").glob("*.npy"))


def _save(folder: Path, number: int, rows: np.ndarray) -> Path:
    path = folder / "shards" / f"{number:05d}.npy"
    np.save(path, rows.astype(np.float32))
    return path


def reference(folder: Path, files: list[Path]) -> tuple[np.ndarray, float]:
    """The exact top 10 of the queries (cached beside the shards), and seconds a query."""
    from ceg_cli.index.dense.tuning import exact_neighbours
    from ceg_cli.index.dense.vectorsource import ShardFiles

    cached = folder / "exact.npy"
    seconds_file = folder / "exact_seconds.json"
    if cached.exists() and seconds_file.exists():
        return np.load(cached), json.loads(seconds_file.read_text())
    queries = np.load(folder / "queries.npy")
    t0 = time.perf_counter()
    exact = exact_neighbours(ShardFiles(files, queries.shape[1]), queries, 10)
    per_query = (time.perf_counter() - t0) / len(queries)
    np.save(cached, exact)
    seconds_file.write_text(json.dumps(per_query))
    return exact, per_query


def kmeans_probe(files: list[Path], nlist: int, sample: int, points: int = 20_000) -> dict:
    """What one-level k-means at ``nlist`` would cost: one assignment of ``points`` vectors
    to ``nlist`` centroids timed (the whole of an iteration's work but the centroid update),
    then scaled to the ``sample`` and FAISS's 25 iterations."""
    import faiss

    first = np.load(files[0], mmap_mode="r")
    x = np.ascontiguousarray(first[:points], dtype=np.float32)
    centroids = np.ascontiguousarray(first[-nlist:] if len(first) > nlist + points
                                     else first[:nlist], dtype=np.float32)
    t0 = time.perf_counter()
    faiss.knn(x, centroids, 1, metric=faiss.METRIC_INNER_PRODUCT)
    per_point = (time.perf_counter() - t0) / len(x)
    return {"nlist": nlist, "points_timed": len(x), "sample": sample,
            "assign_us_per_point": round(1e6 * per_point, 2),
            "one_level_iteration_s": round(per_point * sample, 1),
            "one_level_25_iterations_s": round(per_point * sample * 25),
            "load": load()}


# -- the children: build, then search --------------------------------------------------------


def child_build(kind: str, folder: Path, out: Path) -> None:
    from ceg_cli.index.dense.vectors import write_vectors
    from ceg_cli.index.dense.vectorsource import ShardFiles

    files = shard_files(folder)
    source = ShardFiles(files, np.load(files[0], mmap_mode="r").shape[1])
    t0 = time.perf_counter()
    entry = write_vectors(source, out, kind)
    print(json.dumps({"entry": entry, "build_s": round(time.perf_counter() - t0, 1)}),
          flush=True)


def child_search(out: Path, folder: Path) -> None:
    import faiss

    from ceg_cli.index.dense.vectors import read_vectors

    queries = np.load(folder / "queries.npy")
    exact = np.load(folder / "exact.npy")
    t0 = time.perf_counter()
    index = read_vectors(out)
    opened = time.perf_counter() - t0
    after_open = proc_status_kib(os.getpid(), "RssAnon", "RssFile")

    def batched() -> tuple[float, np.ndarray]:
        found = []
        t0 = time.perf_counter()
        for at in range(0, len(queries), CHECK_BATCH):
            found.append(index.search(queries[at : at + CHECK_BATCH], 10)[1])
        return time.perf_counter() - t0, np.vstack(found)

    first, _ = batched()  # brings what the search touches into the page cache
    load_before = load()
    times = [batched()[0] for _ in range(3)]
    _, found = batched()
    single = []
    for row in range(min(200, len(queries))):
        t0 = time.perf_counter()
        index.search(queries[row : row + 1], 10)
        single.append(time.perf_counter() - t0)
    hits = sum(len(set(a) & set(b)) for a, b in zip(exact.tolist(), found.tolist()))
    now = proc_status_kib(os.getpid(), "RssAnon", "RssFile")
    ivf = faiss.extract_index_ivf(index)
    print(json.dumps({
        "recall_at_10": round(hits / exact.size, 4),
        "batched_queries_per_s": round(len(queries) / float(np.median(times)), 1),
        "first_pass_queries_per_s": round(len(queries) / first, 1),
        "single_query_ms": round(1000 * float(np.median(single)), 3),
        "open_ms": round(1000 * opened, 1),
        "open_anon_mib": round(after_open["RssAnon"] / 1024, 1),
        "search_anon_mib": round(now["RssAnon"] / 1024, 1),
        "search_mapped_mib": round(now["RssFile"] / 1024, 1),
        "nprobe": int(ivf.nprobe),
        "k_factor": float(index.k_factor),
        "load_during_search": [load_before, load()],
    }), flush=True)


def run_child(*args: str) -> tuple[dict[str, Any], int, int]:
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE,
                            text=True)
    try:
        code, peak, anon = watch(proc)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    assert proc.stdout is not None
    text = proc.stdout.read().strip()
    if code != 0 or not text:
        raise SystemExit(f"{args[1]}: the child failed (exit {code})")
    return json.loads(text.splitlines()[-1]), peak, anon


# -- one size ------------------------------------------------------------------------------


def measure(kind: str, n: int, folder: Path, work: Path, keep: bool) -> dict[str, Any]:
    """Build ``kind`` (or, with ``keep``, take the one an earlier run kept) and search it."""
    out = work / f"{kind}-{n}.faiss"
    built_file = work / f"{kind}-{n}.build.json"
    try:
        if keep and out.exists() and built_file.exists():
            log(f"{n:,}: {kind} kept from an earlier run; searching it again (load {load()})")
            built = json.loads(built_file.read_text())
        else:
            log(f"{n:,}: building {kind} (load {load()})")
            built, peak, anon = run_child("--child", "build", "--kind", kind, "--shards",
                                          str(folder), "--file", str(out))
            built.update(peak_anon_mib=round(anon / 1024), peak_resident_mib=round(peak / 1024),
                         load_at_end=load())
            built_file.write_text(json.dumps(built))
            log(f"{n:,}: {kind} built in {built['build_s']} s; searching (load {load()})")
        searched, _, _ = run_child("--child", "search", "--kind", kind, "--shards",
                                   str(folder), "--file", str(out))
        entry = built["entry"]
        return {
            "n": n, "type": kind,
            "build_s": built["build_s"],
            "build_peak_anon_mib": built["peak_anon_mib"],
            "build_peak_resident_mib": built["peak_resident_mib"],
            "build_load_at_end": built["load_at_end"],
            "file_gib": round(out.stat().st_size / 2**30, 2),
            "params": entry["params"],
            "build_recall_at_10": entry.get("recall_at_10"),
            "build_recall_queries": entry.get("measured_queries"),
            **searched,
        }
    finally:
        if not keep:
            out.unlink(missing_ok=True)
            built_file.unlink(missing_ok=True)


def projected(rows: list[dict[str, Any]], kind: str, n: int) -> dict[str, Any] | None:
    """A row at ``n`` from the two largest sizes measured: y = a n^b through both."""
    mine = sorted((r for r in rows if r["type"] == kind), key=lambda r: r["n"])
    if len(mine) < 2 or mine[-1]["n"] >= n:
        return None
    a, b = mine[-2], mine[-1]
    out: dict[str, Any] = {"n": n, "type": kind, "projected_from": [a["n"], b["n"]]}
    for key in ("build_s", "build_peak_anon_mib", "file_gib", "batched_queries_per_s",
                "single_query_ms", "search_anon_mib", "open_ms"):
        if a.get(key) and b.get(key):
            growth = math.log(b[key] / a[key]) / math.log(b["n"] / a["n"])
            out[key] = round(b[key] * (n / b["n"]) ** growth, 2)
            out[f"{key}_growth"] = round(growth, 2)
    return out


def table(rows: list[dict[str, Any]]) -> str:
    header = ["vectors", "type", "search (nprobe / k_factor)", "recall@10", "batched q/s",
              "single ms", "memory: anon / mapped MiB", "build s (peak anon MiB)", "file GiB",
              "load"]
    body = []
    for r in rows:
        if "projected_from" in r:
            body.append([f"{r['n']:,} (projected)", r["type"], "", "",
                         r.get("batched_queries_per_s", ""), r.get("single_query_ms", ""),
                         f"{r.get('search_anon_mib', '')} / ", f"{r.get('build_s', '')} "
                         f"({r.get('build_peak_anon_mib', '')})", r.get("file_gib", ""), ""])
            continue
        body.append([
            f"{r['n']:,}", r["type"], f"{r['nprobe']} / {r['k_factor']:g}", r["recall_at_10"],
            r["batched_queries_per_s"], r["single_query_ms"],
            f"{r['search_anon_mib']} / {r['search_mapped_mib']}",
            f"{r['build_s']} ({r['build_peak_anon_mib']})", r["file_gib"],
            r["load_during_search"][0],
        ])
    return markdown_table(header, body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[1_000_000, 10_000_000])
    parser.add_argument("--types", nargs="*", default=["ivfpq", "ivfpqfs"],
                        choices=["ivfpq", "ivfpqfs", "hnsw", "flat"])
    parser.add_argument("--base-index", type=Path, default=REPO / "index")
    parser.add_argument("--project", type=int, default=30_000_000)
    parser.add_argument("--sigma", type=float, default=None,
                        help="the generator's noise scale (default: calibrated on the base)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true",
                        help="keep the shards and index files in --workdir: the same command "
                        "again searches them without building (to measure at a lower load)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "search_scale.json")
    parser.add_argument("--child", choices=["build", "search"], help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    parser.add_argument("--shards", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        ends_with_parent()
    if args.child == "build":
        child_build(args.kind, args.shards, args.file)
        return
    if args.child == "search":
        child_search(args.file, args.shards)
        return
    args.out = results_file(args.out)
    if args.keep and args.workdir is None:
        usage_error("--keep needs --workdir: a temporary folder is removed at the end")
    if not (args.base_index / "vectors.faiss").exists():
        raise SystemExit(f"{args.base_index}: no index; build the sample index first "
                         "(ceg index build sample_data/enwiki-sample.xml.bz2)")
    with work_dir(args.workdir, prefix="ceg-search-scale-", parent=cache_dir()) as work:
        run(args, work)


def run(args: argparse.Namespace, work: Path) -> None:
    result: dict[str, Any] = {"command": command_line(), "environment": environment()}
    generator = RealLike(base_vectors(args.base_index), args.sigma)
    result["generator"] = {"base_vectors": len(generator.base), "sigma": generator.sigma,
                           "base_median_nn_cosine": round(generator.base_nn_cosine, 4)}
    rows: list[dict[str, Any]] = []
    for n in sorted(args.sizes):
        folder = work / f"shards-{n}"
        free = shutil.disk_usage(work).free
        need = n * 384 * 4 * (1 + (len(args.types) if args.keep else 1)) * 1.05
        if not (folder / "made.json").exists() and free - need < 15e9:
            raise SystemExit(f"{n:,} vectors need about {need / 1e9:.0f} GB of disk; "
                             f"{free / 1e9:.0f} GB free would leave less than 15 GB")
        t0 = time.perf_counter()
        files = write_shards(folder, n, generator)
        log(f"{n:,}: vectors in {time.perf_counter() - t0:.0f} s (load {load()})")
        exact, per_query = reference(folder, files)
        log(f"{n:,}: exact search {1000 * per_query:.0f} ms a query (load {load()})")
        for kind in args.types:
            row = measure(kind, n, folder, work, args.keep)
            row["exact_ms_per_query"] = round(1000 * per_query, 1)
            if kind == "ivfpqfs":
                row["kmeans_one_level"] = kmeans_probe(files, row["params"]["nlist"],
                                                       row["params"]["trained_on"])
            log(json.dumps(row))
            rows.append(row)
            result["rows"] = rows
            write_json(args.out, result)  # what is measured so far survives a stop
        if not args.keep:
            shutil.rmtree(folder)
    for kind in args.types:
        guess = projected(rows, kind, args.project)
        if guess is not None:
            rows.append(guess)
    result["rows"] = rows
    result["load_at_end"] = load()
    write_json(args.out, result)
    print(f"`{command_line()}`\n")
    print(table(rows))


if __name__ == "__main__":
    main()
