"""Index builds on Ray against the single-machine build: passages/s with 1, 2, 4 workers.

    .venv/bin/python benchmarks/build/ray_build.py [--passages N] [--ranges R] [--workers 1 2 4]
                                             [--repeats N]

The source is a slice of the enwiki sample (its first articles, up to about
``--passages`` passages, written as JSONL into ``benchmarks/.cache``), so a
run of every configuration stays within a few minutes on 2 cores. The Ray
builds cut it into ``--ranges`` byte ranges (the default range of 4 MB would
make the slice one range). Every build runs in a fresh subprocess, with the
real model (all-MiniLM-L6-v2, torch, CPU), configurations alternating within
each repeat so that the shared machine's drifting load hits all alike:

- **local**: load the model, then ``build_index`` with it (both timed; the
  end-to-end figure includes the load, as the command's does).
- **ray, k workers**: ``build_index(..., BuildOptions(engine="ray",
  workers=k))`` with no model object, as the command runs: it starts Ray on
  this machine, loads the model in the driver (for its name and dimension) and
  in each worker, then embeds. End to end is from the call to its return.

**Once running** is the passages over the time after the model is loaded
(local) or every worker answers (Ray: Ray started, the driver's and the
workers' models loaded; noted by wrapping ``ray_engine._start_workers``): the
rate that grows with the cluster, apart from the start-up, which does not.

The overhead at one worker is the Ray build's end-to-end time over the local
build's (model load included on both sides), and the ratio of the rates once
running. The projection for N machines multiplies the one-worker rate (one
worker per machine, using the machine's cores) by N: an upper bound, which
the driver (storing results in order, one SQLite writer) caps in the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (
    ENWIKI_SAMPLE,
    cache_dir,
    command_line,
    environment,
    log,
    markdown_table,
    median,
    with_parent,
    write_results,
)

#: The paper's corpus, for the projection.
PAPER_PASSAGES = 64_000_000


# --------------------------------------------------------------------------- child


class _Clock:
    """A Progress that notes when passages come back embedded."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.embedded: list[tuple[float, int]] = []

    def counter(self, label: str, unit: str, total: int | None = None) -> Any:
        clock = self

        class Counter:
            def update(self, n: int = 1) -> None:
                if label == "embedded":
                    clock.embedded.append((time.perf_counter() - clock.started, n))

        return Counter()


def child(args: argparse.Namespace) -> dict[str, Any]:
    import ceg_cli.corpus.ranges
    from ceg_cli.index.build.builder import BuildOptions, build_index
    from ceg_cli.index.dense.embedding import load_embedder

    source, target = Path(args.source), Path(args.target)
    ceg_cli.corpus.ranges.RANGE_BYTES = range_bytes(source, args.ranges)
    started = time.perf_counter()
    load = 0.0
    if args.engine == "local":
        embedder = load_embedder(None)
        load = time.perf_counter() - started
        options = BuildOptions()
    else:
        embedder = None
        options = BuildOptions(engine="ray", workers=args.workers)
        _note_when_workers_run(started)
    clock = _Clock(started)
    report = build_index([source], target, options, embedder=embedder, progress=clock)
    total = time.perf_counter() - started
    ready = load if args.engine == "local" else READY[0]
    return {"engine": args.engine, "workers": args.workers, "passages": report.chunks,
            "seconds": total, "ready_seconds": ready,
            "first_result_seconds": clock.embedded[0][0],
            "steady_per_s": report.chunks / (total - ready), "per_s": report.chunks / total}


#: Seconds from the start until the Ray workers ran (their models loaded).
READY: list[float] = []


def _note_when_workers_run(started: float) -> None:
    """Wrap ``ray_engine._start_workers`` (it returns once every worker answers)."""
    import ceg_cli.index.build.ray_engine as engine

    real = engine._start_workers

    def start(*args: Any, **kwargs: Any) -> Any:
        actors = real(*args, **kwargs)
        READY.append(time.perf_counter() - started)
        return actors

    engine._start_workers = start  # type: ignore[assignment]


def range_bytes(source: Path, ranges: int) -> int:
    """The range size that asks for ``ranges`` ranges (fewer come: ranges end at lines)."""
    return -(-source.stat().st_size // ranges)


# --------------------------------------------------------------------------- parent


def make_slice(passages: int) -> Path:
    """The sample's first articles, up to about ``passages`` passages, as JSONL."""
    from ceg_cli.corpus import iter_documents
    from ceg_cli.index.build.chunking import chunk_document

    path = cache_dir() / f"ray-slice-{passages}.jsonl"
    if path.exists():
        return path
    count = 0
    with open(path.with_suffix(".part"), "w", encoding="utf-8") as out:
        for doc in iter_documents(ENWIKI_SAMPLE):
            out.write(json.dumps({"id": doc.id, "title": doc.title, "text": doc.text,
                                  "url": doc.url}, ensure_ascii=False) + "\n")
            count += len(chunk_document(doc, 100))
            if count >= passages:
                break
    path.with_suffix(".part").rename(path)
    return path


def run(source: Path, engine: str, workers: int, ranges: int) -> dict[str, Any]:
    out = cache_dir() / f"ray-build-{os.getpid()}.json"
    target = cache_dir() / f"ray-build-index-{os.getpid()}"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", engine, "--source",
           str(source), "--target", str(target), "--workers", str(workers), "--ranges",
           str(ranges), "--out", str(out)]
    env = {**os.environ, "TQDM_DISABLE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    load_before = os.getloadavg()[0]
    subprocess.run(with_parent(cmd), env=env, check=True)
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    out.unlink()
    result["load_before"] = load_before
    import shutil

    shutil.rmtree(target, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=1000)
    parser.add_argument("--ranges", type=int, default=16)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--child", choices=["local", "ray"], help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        args.engine, args.workers = args.child, args.workers[0]
        Path(args.out).write_text(json.dumps(child(args)), encoding="utf-8")
        return 0

    source = make_slice(args.passages)
    import ceg_cli.corpus.ranges

    ceg_cli.corpus.ranges.RANGE_BYTES = range_bytes(source, args.ranges)
    made = len(ceg_cli.corpus.ranges.plan_ranges([source]))
    configs = [("local", 1)] + [("ray", k) for k in args.workers]
    runs: dict[str, list[dict[str, Any]]] = {f"{e}-{k}": [] for e, k in configs}
    for repeat in range(args.repeats):
        order = configs if repeat % 2 == 0 else configs[::-1]
        for engine, k in order:
            log(f"repeat {repeat + 1}/{args.repeats}: {engine}, {k} worker(s)")
            result = run(source, engine, k, args.ranges)
            log(f"  {result['passages']} passages in {result['seconds']:.1f} s")
            runs[f"{engine}-{k}"].append(result)

    def med(key: str, field: str) -> float:
        values = [r[field] for r in runs[key] if r[field] is not None]
        return median(values) if values else float("nan")

    rows = []
    for engine, k in configs:
        key = f"{engine}-{k}"
        rows.append([engine, k, f"{med(key, 'seconds'):.1f}", f"{med(key, 'per_s'):.1f}",
                     f"{med(key, 'ready_seconds'):.1f}", f"{med(key, 'steady_per_s'):.1f}"])
    passages = runs["local-1"][0]["passages"]
    summary: dict[str, Any] = {}
    if "ray-1" in runs:
        summary = {
            "overhead_end_to_end": med("ray-1", "seconds") / med("local-1", "seconds"),
            "overhead_steady": med("local-1", "steady_per_s") / med("ray-1", "steady_per_s"),
            "per_worker_per_s": med("ray-1", "steady_per_s"),
        }
        rate = summary["per_worker_per_s"]
        summary["projection"] = {
            str(n): {"per_s": n * rate, "paper_corpus_hours": PAPER_PASSAGES / (n * rate) / 3600}
            for n in (1, 8, 64, 512)
        }
    print(f"# Ray build ({passages} passages of the enwiki sample, {made} ranges)\n")
    print(f"`{command_line()}`\n")
    print(markdown_table(["engine", "workers", "seconds", "passages/s end to end",
                          "running after (s)", "passages/s once running"], rows))
    if summary:
        print(f"\noverhead at 1 worker: end to end x{summary['overhead_end_to_end']:.2f}, "
              f"once running x{summary['overhead_steady']:.2f}")
        print("\n" + markdown_table(
            ["machines", "passages/s (projected)", "hours for 64 M passages"],
            [[n, f"{p['per_s']:.0f}", f"{p['paper_corpus_hours']:.0f}"]
             for n, p in summary["projection"].items()]))
    write_results("ray_build", {"command": command_line(), "environment": environment(),
                                "passages": passages, "ranges_asked": args.ranges,
                                "ranges": made, "runs": runs,
                                "summary": summary})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
