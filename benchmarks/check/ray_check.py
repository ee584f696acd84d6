"""``ceg check --engine ray`` against the local check: the same records, 1 and 2 workers.

    .venv/bin/python benchmarks/check/ray_check.py [--records 2000] [--workers 1 2] [--repeats 3]
        [--modes index,contexts] [--judges offline,tiny] [--passages 1000]

The same ``--records`` responses are checked in two modes:

- **index**: the sample answers (``sample_data/responses.jsonl``), copied with
  distinct ids, checked against an index of a slice of the enwiki sample
  (about ``--passages`` passages, built once with the real model into
  ``benchmarks/.cache``): every segment is embedded (all-MiniLM-L6-v2, torch,
  CPU) and searched;
- **contexts**: the same answers, each carrying three passages of that slice
  as its own contexts (``--evidence contexts``): no index, no embedding model.

with two judges: ``offline`` (the default, lexical) and ``tiny``, a random
MiniCheck-RoBERTa checker of 2 layers of width 64 built here
(``tests/tiny_checkers.py``), whose cost per pair is a checker model's
(tokenizing, batching, torch) at a fraction of a real one's size.

Every run is the real command in a fresh process (``ceg check ... -q``):
locally, and with ``--engine ray --workers k`` (Ray started on this machine
by the command, as without ``--ray-address``). Within each repeat the
configurations alternate (reversed every other repeat) so that the shared
machine's drifting load hits all alike; medians of the repeats are reported.

- **end to end**: the command's wall time, start-up included (imports, the
  models loaded; on Ray: Ray started, the workers started and loaded).
- **checking**: the ``time`` the command reports (from the first response
  read to the last record written): the part that grows with the file.
- **identical**: whether the Ray run's output is byte for byte the local run's.

With ``--one-thread-too``, the local run is also made with torch on one thread
(``local1t``: ``OMP_NUM_THREADS=1``), as a Ray worker that asks for one CPU runs
it: on a machine whose cores other jobs take, torch's default of a thread per
core waits for the busiest, and the Ray worker's single thread is then the
faster setting (docs/api.md, Speed); this run tells that apart from Ray.

The Ray overhead on one machine is the Ray run's time over the local run's at
one worker. The projection for a cluster multiplies the one-worker checking
rate by the number of workers (one per machine of this size): an upper bound,
which the driver caps: it reads, ships and writes every record. The driver's
own cost per record (reading and parsing a line, shipping a range to a
worker and back, making, writing and counting the record) is measured apart,
in this process, on the local run's output ("driver ceiling").
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (
    REPO,
    cache_dir,
    command_line,
    environment,
    log,
    markdown_table,
    median,
    with_parent,
    work_dir,
    write_results,
)

#: Records a large team checks, for the projection.
PROJECTED_RECORDS = 1_000_000
CEG = "from ceg_cli.cli.main import run; run()"


# --------------------------------------------------------------------------- setup


def make_index(passages: int) -> tuple[Path, Path]:
    """The slice of the enwiki sample (JSONL) and its index, built once with the real model."""
    from ray_build import make_slice

    source = make_slice(passages)
    index = cache_dir() / f"ray-check-index-{passages}"
    if not (index / "meta.json").exists():
        from ceg_cli.index.build.builder import build_index

        log(f"building the index of {source.name} (once)")
        build_index([source], index)
    return source, index


def make_tiny_checker() -> Path:
    """A random MiniCheck-RoBERTa checker, 2 layers of width 64, built once."""
    folder = cache_dir() / "ray-check-tiny-roberta"
    if not (folder / "config.json").exists():
        sys.path.insert(0, str(REPO / "tests"))
        from tiny_checkers import build

        log("building the tiny random checker (once)")
        build("roberta", folder, hidden=64, layers=2, heads=2)
    return folder


def make_responses(folder: Path, records: int, slice_: Path) -> dict[str, Path]:
    """The ``records`` answers, as they are (index mode) and with contexts."""
    answers = [json.loads(line) for line in
               (REPO / "sample_data" / "responses.jsonl").read_text(encoding="utf-8").splitlines()]
    texts = []
    with open(slice_, encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            texts.extend(p for p in doc["text"].split("\n\n") if len(p.split()) > 20)
    plain, with_contexts = folder / "index.jsonl", folder / "contexts.jsonl"
    with open(plain, "w", encoding="utf-8") as a, open(with_contexts, "w", encoding="utf-8") as b:
        for i in range(records):
            record = dict(answers[i % len(answers)])
            record["id"] = f"{record['id']}-{i}"
            a.write(json.dumps(record, ensure_ascii=False) + "\n")
            record["contexts"] = [texts[(3 * i + k) % len(texts)] for k in range(3)]
            b.write(json.dumps(record, ensure_ascii=False) + "\n")
    return {"index": plain, "contexts": with_contexts}


# --------------------------------------------------------------------------- runs


def run(responses: Path, index: Path, mode: str, judge: str, engine: str, workers: int,
        out: Path) -> dict[str, Any]:
    """One run of the command; ``engine`` ``local1t`` is the local run with torch on one
    thread (``OMP_NUM_THREADS=1``), as a Ray worker that asks for one CPU has it."""
    cmd = [sys.executable, "-c", CEG, "check", str(responses), "--index", str(index),
           "--judge", judge, "--out", str(out), "-q"]
    if mode == "contexts":
        cmd += ["--evidence", "contexts"]
    if engine == "ray":
        cmd += ["--engine", "ray", "--workers", str(workers)]
    env = {**os.environ, "TQDM_DISABLE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    if engine == "local1t":
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(with_parent(cmd), env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    found = re.search(r"time\s*│\s*([\d.]+) s", done.stderr)
    checking = float(found.group(1)) if found else float("nan")
    return {"seconds": seconds, "checking_seconds": checking, "load_before": load_before}


def driver_ceiling(responses: Path, output: Path) -> dict[str, float]:
    """What the Ray driver does for each record, in this process: records per second."""
    from ceg_cli.check.responses import FieldNames, parse_line
    from ceg_cli.report.gate import Summary
    from ceg_cli.report.output import RecordWriter
    from ceg_cli.report.records import from_record, to_record

    lines = responses.read_bytes().splitlines()
    records = [json.loads(line) for line in output.read_bytes().splitlines()]
    checked = [from_record(r) for r in records]  # the workers' results, made here beforehand
    judge = records[0]["judge"]
    summary = Summary()
    writer = RecordWriter(output.with_name("driver.jsonl"))
    started = time.perf_counter()
    items = [parse_line(raw, n, str(responses), FieldNames()) for n, raw in enumerate(lines, 1)]
    shipped = pickle.loads(pickle.dumps(items))  # to the workers
    back = pickle.loads(pickle.dumps(checked))  # and their results back
    for result in back:
        writer.write(to_record(result, judge))
        summary.add(result)
    writer.close()
    seconds = time.perf_counter() - started
    assert len(shipped) == len(back)
    return {"records": len(records), "seconds": seconds, "per_s": len(records) / seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="index,contexts")
    parser.add_argument("--judges", default="offline,tiny")
    parser.add_argument("--passages", type=int, default=1000)
    parser.add_argument("--results", default="ray_check")
    parser.add_argument("--one-thread-too", action="store_true",
                        help="also run locally with torch on one thread (local1t)")
    args = parser.parse_args(argv)
    from _common import results_name

    results_name(args.results)
    modes, judge_names = args.modes.split(","), args.judges.split(",")
    slice_, index = make_index(args.passages)
    judges = {"offline": "offline"}
    if "tiny" in judge_names:
        judges["tiny"] = f"minicheck:{make_tiny_checker()}"
    configs = [("local", 1)] + ([("local1t", 1)] if args.one_thread_too else []) + [
        ("ray", k) for k in args.workers]
    runs: dict[str, list[dict[str, Any]]] = {}
    identical: dict[str, bool] = {}
    ceiling: dict[str, float] = {}
    with work_dir(None, prefix="ceg-ray-check-") as work:
        files = make_responses(work, args.records, slice_)
        for repeat in range(args.repeats):
            order = [(m, j, e, k) for m in modes for j in judge_names for e, k in configs]
            for mode, judge, engine, k in (order if repeat % 2 == 0 else order[::-1]):
                key = f"{mode}/{judge}/{engine}-{k}"
                log(f"repeat {repeat + 1}/{args.repeats}: {key} (load {os.getloadavg()[0]:.1f})")
                out = work / f"{mode}-{judge}-{engine}-{k}.jsonl"
                result = run(files[mode], index, mode, judges[judge], engine, k, out)
                log(f"  {result['seconds']:.1f} s, checking {result['checking_seconds']:.1f} s")
                runs.setdefault(key, []).append(result)
            for mode in modes:
                for judge in judge_names:
                    local = (work / f"{mode}-{judge}-local-1.jsonl").read_bytes()
                    for engine, k in configs[1:]:
                        key = f"{mode}/{judge}/{engine}-{k}"
                        same = (work / f"{mode}-{judge}-{engine}-{k}.jsonl").read_bytes() == local
                        identical[key] = identical.get(key, True) and same
        ceiling = driver_ceiling(files[modes[0]],
                                 work / f"{modes[0]}-{judge_names[0]}-local-1.jsonl")

    def med(key: str, field: str) -> float:
        return median([r[field] for r in runs[key]])

    rows = []
    summary: dict[str, Any] = {"overhead": {}, "per_worker_per_s": {}, "projection": {}}
    for mode in modes:
        for judge in judge_names:
            base = f"{mode}/{judge}/local-1"
            for engine, k in configs:
                key = f"{mode}/{judge}/{engine}-{k}"
                total, checking = med(key, "seconds"), med(key, "checking_seconds")
                rows.append([mode, judge, engine, k, f"{total:.1f}", f"{checking:.1f}",
                             f"{args.records / checking:.0f}",
                             f"x{total / med(base, 'seconds'):.2f}",
                             f"x{checking / med(base, 'checking_seconds'):.2f}",
                             "-" if engine == "local" else (
                                 "yes" if identical[key] else "NO")])
            one = f"{mode}/{judge}/ray-1"
            if one in runs:
                rate = args.records / med(one, "checking_seconds")
                summary["overhead"][f"{mode}/{judge}"] = {
                    "end_to_end": med(one, "seconds") / med(base, "seconds"),
                    "checking": med(one, "checking_seconds") / med(base, "checking_seconds")}
                summary["per_worker_per_s"][f"{mode}/{judge}"] = rate
                summary["projection"][f"{mode}/{judge}"] = {
                    str(n): {"per_s": min(n * rate, ceiling["per_s"]),
                             "hours_for_1M": PROJECTED_RECORDS / min(n * rate, ceiling["per_s"])
                             / 3600} for n in (1, 8, 64)}
    print(f"# Ray check ({args.records} records, medians of {args.repeats})\n")
    print(f"`{command_line()}`\n")
    print(markdown_table(["mode", "judge", "engine", "workers", "end to end (s)",
                          "checking (s)", "records/s checking", "end to end vs local",
                          "checking vs local", "identical"], rows))
    print(f"\ndriver ceiling: {ceiling['per_s']:,.0f} records/s ({ceiling['records']} records "
          f"in {ceiling['seconds']:.2f} s)")
    print("\n" + markdown_table(
        ["mode/judge", "workers (machines of this size)", "records/s (projected)",
         "hours for 1 M records"],
        [[name, n, f"{p['per_s']:.0f}", f"{p['hours_for_1M']:.1f}"]
         for name, proj in summary["projection"].items() for n, p in proj.items()]))
    write_results(args.results, {"command": command_line(), "environment": environment(),
                                 "records": args.records, "runs": runs,
                                 "identical": identical, "driver_ceiling": ceiling,
                                 "summary": summary})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
