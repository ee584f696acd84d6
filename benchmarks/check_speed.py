"""How fast ``ceg check`` runs with each judge, and where the time goes.

    .venv/bin/python benchmarks/check_speed.py --index index [--copies 20] [--repeats 3]
        [--judges offline,verifier]

Checks the sample responses (``sample_data/responses.jsonl``), copied
``--copies`` times with distinct ids, through ``CheckRun`` (exactly what
``ceg check`` runs) with each judge, and reports segments per second and the
share of the run spent inside the embedding model and the judge. Runs of the
judges alternate (A, B, A, B, ...) so that each pair shares the machine's
conditions; the ratio of the medians is reported. Models are loaded before
the clock starts (loading is reported apart): a CI run pays it once per
invocation.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    REPO,
    command_line,
    environment,
    log,
    markdown_table,
    median,
    work_dir,
    write_results,
)


class Timed:
    """Wraps an object's method and adds up the seconds spent inside it."""

    def __init__(self, target: Any, method: str) -> None:
        self.seconds = 0.0
        inner = getattr(target, method)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        setattr(target, method, timed)


def one_run(index: Path, responses: Path, out: Path, judge_name: str) -> dict[str, float]:
    from ceg_cli.check.run import CheckRun, RunSettings

    t0 = time.perf_counter()
    # Opening the run loads the index's model (so a broken model fails early).
    run = CheckRun(
        RunSettings.resolve(responses=str(responses), index=index, out=out, judge=judge_name)
    )
    load = time.perf_counter() - t0
    try:
        embedder = run.index.embedder()
        embed = Timed(embedder, "embed")
        judge = Timed(run.judge, "judge")
        if judge_name.startswith("verifier"):  # load the cross-encoder before the clock
            run.judge.entailment([("warm up", "warm up")])
        t0 = time.perf_counter()
        run.execute()
        total = time.perf_counter() - t0
    finally:
        run.close()
    return {
        "load_seconds": load,
        "seconds": total,
        "embed_seconds": embed.seconds,
        "judge_seconds": judge.seconds,
        "responses": run.summary.responses,
        "segments": run.summary.segments,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, default=REPO / "index")
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--judges", default="offline", help="comma-separated judge names")
    args = parser.parse_args()
    judges = [j.strip() for j in args.judges.split(",") if j.strip()]

    rows = [json.loads(line) for line in (REPO / "sample_data" / "responses.jsonl").open()]
    with work_dir(None, prefix="ceg-check-speed-") as work:
        responses = work / "responses.jsonl"
        with responses.open("w", encoding="utf-8") as fh:
            for copy in range(args.copies):
                for row in rows:
                    fh.write(json.dumps({**row, "id": f"{row['id']}-{copy}"}) + "\n")
        runs: dict[str, list[dict[str, float]]] = {j: [] for j in judges}
        for n in range(args.repeats):
            for j in judges:
                log(f"run {n + 1} of {args.repeats}, judge {j}")
                runs[j].append(one_run(args.index, responses, work / f"out{n}.jsonl", j))

    summaries = {j: summarize(r) for j, r in runs.items()}
    if len(judges) > 1:
        base = summaries[judges[0]]["seconds_median"]
        for j in judges[1:]:
            summaries[j][f"time_ratio_to_{judges[0]}"] = round(
                summaries[j]["seconds_median"] / base, 2
            )
    write_results("check_speed", {
        "command": command_line(), "environment": environment(), "index": str(args.index),
        "runs": runs, "summary": summaries,
    })
    print(f"`{command_line()}`\n")
    keys = list(dict.fromkeys(k for s in summaries.values() for k in s))
    print(markdown_table(["measure", *judges],
                         [[k, *(summaries[j].get(k, "") for j in judges)] for k in keys]))


def summarize(runs: list[dict[str, float]]) -> dict[str, float]:
    seconds = median([r["seconds"] for r in runs])
    return {
        "responses": runs[0]["responses"],
        "segments": runs[0]["segments"],
        "seconds_median": round(seconds, 2),
        "segments_per_second": round(runs[0]["segments"] / seconds, 1),
        "responses_per_second": round(runs[0]["responses"] / seconds, 1),
        "embedding_share": round(median([r["embed_seconds"] / r["seconds"] for r in runs]), 3),
        "judge_share": round(median([r["judge_seconds"] / r["seconds"] for r in runs]), 3),
        "startup_seconds": round(median([r["load_seconds"] for r in runs]), 2),
    }


if __name__ == "__main__":
    main()
