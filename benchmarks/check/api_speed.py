"""How long a loaded ``ceg_cli.Checker`` takes to check one short answer (issue 33).

    .venv/bin/python benchmarks/check/api_speed.py [--index DIR] [--repeats 50]
        [--results api_speed]

The API's promise is that loading is paid once: after the first ``check`` (which
loads the model and opens the index), a short answer costs only its own work. This
times ``Checker.check`` of a one-sentence answer with the offline judge, against an
index (the mini dump of tests/data, built into a work folder unless ``--index`` names
one) and against the answer's own contexts (no index), and reports the load, the
first call and the median and 90th percentile of the calls after it, in wall-clock
and CPU time, with torch's default threads and with one. Run it under ``taskset -c
0,1`` to measure on two cores. The index is built in the same process, so the model is
already loaded when the first Checker opens it: ``load_s`` is not a cold start.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (
    REPO,
    command_line,
    environment,
    log,
    median,
    results_name,
    usage_error,
    work_dir,
    write_results,
)

MINI_WIKI = REPO / "tests" / "data" / "wiki" / "enwiki-mini.xml.bz2"
ANSWER = "Aristotle was a Greek philosopher."
QUESTION = "Who was Aristotle?"
CONTEXTS = [
    "Aristotle (384-322 BC) was an Ancient Greek philosopher and polymath. His writings "
    "cover a broad range of subjects spanning the natural sciences, philosophy, "
    "linguistics, economics, politics, psychology and the arts."
]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(index: Path | None, repeats: int, threads: int) -> dict[str, Any]:
    import torch

    from ceg_cli import Checker

    torch.set_num_threads(threads)

    contexts = None if index is not None else CONTEXTS
    t0 = time.perf_counter()
    checker = Checker(index=index, judge="offline")
    load = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        first = checker.check(ANSWER, question=QUESTION, contexts=contexts)
        first_s = time.perf_counter() - t0
        times, cpu = [], []
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            result = checker.check(ANSWER, question=QUESTION, contexts=contexts)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        assert result.to_dict() == first.to_dict()  # the same answer, the same record
    finally:
        checker.close()
    return {
        "evidence": "index" if index is not None else "contexts",
        "torch_threads": threads,
        "label": first.label,
        "segments": len(first.segments),
        "load_s": round(load, 3),
        "first_check_s": round(first_s, 3),
        "second_and_later_median_ms": round(1000 * median(times), 1),
        "second_and_later_p90_ms": round(1000 * percentile(times, 0.9), 1),
        # CPU seconds of the process per call: what the call costs when the cores are
        # not shared with other work (on a busy machine the wall clock waits for them).
        "second_and_later_cpu_median_ms": round(1000 * median(cpu), 1),
        "repeats": repeats,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, default=None,
                        help="An index to check against (default: the mini dump, built here).")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--results", default="api_speed")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    # Checked before anything is built or written, as the CLI checks its options.
    results_name(args.results)
    if args.repeats < 1:
        usage_error(f"--repeats {args.repeats}: must be at least 1")
    if args.index is not None and not (args.index / "meta.json").is_file():
        usage_error(f"--index {args.index}: no index there (no meta.json)")
    import torch

    rows = []
    with work_dir(args.workdir, prefix="ceg-api-speed-") as work:
        index = args.index
        if index is None:
            from ceg_cli.index.build.builder import BuildOptions, build_index

            index = work / "index"
            log(f"building an index of {MINI_WIKI.name} in {index}")
            build_index([MINI_WIKI], index, BuildOptions())
        # torch's own thread count (one per usable core), then one thread: on a machine
        # whose cores are busy with other work, OpenMP's threads wait for each other.
        for threads in (torch.get_num_threads(), 1):
            for where in (index, None):
                row = measure(where, args.repeats, threads)
                log(f"{row['evidence']}, {threads} torch threads: second call median "
                    f"{row['second_and_later_median_ms']} ms wall, "
                    f"{row['second_and_later_cpu_median_ms']} ms CPU")
                rows.append(row)
    write_results(args.results, {
        "command": command_line(),
        "environment": environment() | {
            "cores_usable": len(os.sched_getaffinity(0)),
        },
        "answer": ANSWER,
        "judge": "offline",
        "runs": rows,
    })


if __name__ == "__main__":
    main()
