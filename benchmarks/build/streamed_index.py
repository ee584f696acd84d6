"""An index file written from shards on disk, at sizes whose vectors do not fit in memory.

A build keeps its vectors in shard files and writes ``vectors.faiss`` from
them a batch at a time (``ceg_cli.index.dense.vectors.write_vectors`` over a
``ShardFiles`` source). This script does the same with synthetic vectors (the
clustered ones of ``index_types.py``: 2,000 centres plus noise, dimension
384) at sizes like 10,000,000 (15 GB of vectors), where the in-memory
conversion of earlier versions could not run on this machine. Each type is
written in its own process, so its peak memory is its own:

- peak resident memory (``VmHWM``; it counts pages of mapped files too: the
  index file checked at the end) and peak anonymous memory (``RssAnon``: what
  the process itself holds), both sampled every 0.2 s;
- seconds to write and tune, the recall@10 and latency ``meta.json`` would
  record, the file size;
- then opening the written file memory-mapped (median of 3: time, resident
  growth) and one batch of 200 of its own vectors as queries.

Usage::

    .venv/bin/python benchmarks/build/streamed_index.py --size 10000000 --types ivfpq flat
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    RESULTS_DIR,
    cache_dir,
    check_workdir,
    command_line,
    ends_with_parent,
    environment,
    results_file,
    watch,
    work_dir,
    write_json,
)
from index_types import rss_mib, synthetic_blocks  # noqa: E402

from ceg_cli.index.dense import vectors as V  # noqa: E402
from ceg_cli.index.dense.vectorsource import ShardFiles  # noqa: E402

SHARD = 500_000


def write_shards(folder: Path, n: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = sorted(folder.glob("*.npy"))
    if sum(np.load(f, mmap_mode="r").shape[0] for f in files) == n:
        return files  # made by an earlier run with this size
    for f in files:
        f.unlink()
    rows: list[np.ndarray] = []
    held = 0
    for block in synthetic_blocks(n):
        rows.append(block)
        held += len(block)
        if held >= SHARD:
            np.save(folder / f"{len(files):05d}.npy", np.concatenate(rows).astype(np.float32))
            files.append(folder / f"{len(files):05d}.npy")
            rows, held = [], 0
    if rows:
        np.save(folder / f"{len(files):05d}.npy", np.concatenate(rows).astype(np.float32))
        files.append(folder / f"{len(files):05d}.npy")
    return files


def child(kind: str, folder: Path, out: Path) -> None:
    """Write one type (in its own process); print its figures as JSON."""
    files = sorted(folder.glob("*.npy"))
    source = ShardFiles(files, 384)
    t0 = time.perf_counter()
    entry = V.write_vectors(source, out, kind)
    seconds = time.perf_counter() - t0
    print(json.dumps({"entry": entry, "write_and_tune_s": round(seconds, 1)}), flush=True)


def measure(kind: str, folder: Path, out: Path) -> dict[str, Any]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", kind, "--shards", str(folder), "--file", str(out)],
        stdout=subprocess.PIPE, text=True)
    code, peak, anon = watch(proc)
    assert proc.stdout is not None
    if code != 0:
        raise SystemExit(f"{kind}: the child failed")
    row = json.loads(proc.stdout.read().strip().splitlines()[-1])
    row.update(type=kind, peak_rss_mib=round(peak / 1024),
               peak_anon_mib=round(anon / 1024), file_mib=round(out.stat().st_size / 2**20))
    times, grew = [], []
    for _ in range(3):
        before = rss_mib()
        t0 = time.perf_counter()
        index = V.read_vectors(out)
        times.append(time.perf_counter() - t0)
        grew.append(rss_mib() - before)
        del index
    row["open_mmap_ms"] = round(1000 * float(np.median(times)), 2)
    row["open_mmap_rss_growth_mib"] = round(float(np.median(grew)), 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--types", nargs="*", default=["ivfpq", "flat"],
                        choices=["flat", "ivfpq", "hnsw"])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the shards for another run")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "streamed_index.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--shards", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        ends_with_parent()
        child(args.child, args.shards, args.file)
        return
    # Before any work: results only in benchmarks/results/, a work folder ceg made.
    args.out = results_file(args.out)
    check_workdir(args.workdir)
    with work_dir(args.workdir or cache_dir() / "streamed", prefix="ceg-streamed-") as work:
        run(args, work)


def run(args: argparse.Namespace, work: Path) -> None:
    folder = work / f"shards-{args.size}"
    t0 = time.perf_counter()
    write_shards(folder, args.size)
    made = time.perf_counter() - t0
    print(f"shards of {args.size:,} vectors in {made:.0f} s", file=sys.stderr, flush=True)
    rows = []
    for kind in args.types:
        out = work / f"{kind}-{args.size}.faiss"
        row = measure(kind, folder, out)
        out.unlink()
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
    if not args.keep:
        shutil.rmtree(folder)
    result = {"command": command_line(), "environment": environment(), "size": args.size,
              "rows": rows}
    write_json(args.out, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
