"""How fast ``ceg check`` runs with each judge, or against each index, and where the time goes.

    .venv/bin/python benchmarks/check/check_speed.py --index index [--copies 20] [--repeats 3]
        [--judges offline,verifier]
    .venv/bin/python benchmarks/check/check_speed.py --indexes DIR/flat,DIR/ivfpq,DIR/ivfpqfs \
        --exact DIR/flat [--copies 10] [--repeats 3] [--results check_speed_scale]

With ``--indexes`` (the same passages under several index types, e.g. made by
``reallike_index.py`` at a million passages) the one judge runs against each
index in turn, and the citations are compared with those of ``--exact``
(a ``flat`` index: exact search): for every segment whose retrieved passages
are the exact ones, its citations must be the exact run's too.

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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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
        # Queries go through embed_queries where the model has one (index.dense.embedding).
        embeds = [Timed(embedder, m) for m in ("embed", "embed_queries")
                  if hasattr(embedder, m)]
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
        "embed_seconds": sum(t.seconds for t in embeds),
        "judge_seconds": judge.seconds,
        "responses": run.summary.responses,
        "segments": run.summary.segments,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, default=REPO / "index")
    parser.add_argument("--indexes", default=None,
                        help="comma-separated index folders to compare, one judge")
    parser.add_argument("--exact", type=Path, default=None,
                        help="with --indexes: the flat one, whose citations are the reference")
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--judges", default="offline", help="comma-separated judge names")
    parser.add_argument("--results", default="check_speed", help="results/NAME.json")
    args = parser.parse_args()
    judges = [j.strip() for j in args.judges.split(",") if j.strip()]
    if args.indexes:
        setups = [(Path(p.strip()), judges[0]) for p in args.indexes.split(",") if p.strip()]
        names = [p.name for p, _ in setups]
    else:
        setups = [(args.index, j) for j in judges]
        names = judges

    rows = [json.loads(line) for line in (REPO / "sample_data" / "responses.jsonl").open()]
    outputs: dict[str, Path] = {}
    with work_dir(None, prefix="ceg-check-speed-") as work:
        responses = work / "responses.jsonl"
        with responses.open("w", encoding="utf-8") as fh:
            for copy in range(args.copies):
                for row in rows:
                    fh.write(json.dumps({**row, "id": f"{row['id']}-{copy}"}) + "\n")
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
        for n in range(args.repeats):
            for name, (index, judge) in zip(names, setups):
                log(f"run {n + 1} of {args.repeats}, {name}")
                out = work / f"{name}-{n}.jsonl"
                runs[name].append(one_run(index, responses, out, judge))
                outputs[name] = out
        compared = (compare_citations(outputs, args.exact.name)
                    if args.indexes and args.exact is not None else None)

    summaries = {name: summarize(r) for name, r in runs.items()}
    if len(names) > 1:
        base = summaries[names[0]]["seconds_median"]
        for name in names[1:]:
            summaries[name][f"time_ratio_to_{names[0]}"] = round(
                summaries[name]["seconds_median"] / base, 2
            )
    write_results(args.results, {
        "command": command_line(), "environment": environment(),
        "index": str(args.index) if not args.indexes else args.indexes,
        "runs": runs, "summary": summaries,
        **({"citations": compared} if compared is not None else {}),
    })
    print(f"`{command_line()}`\n")
    keys = list(dict.fromkeys(k for s in summaries.values() for k in s))
    print(markdown_table(["measure", *names],
                         [[k, *(summaries[n].get(k, "") for n in names)] for k in keys]))
    if compared is not None:
        print()
        print(json.dumps(compared, indent=2))


def compare_citations(outputs: dict[str, Path], exact: str) -> dict[str, dict[str, int]]:
    """Per index: segments whose evidence (passage ids, in order) is the exact run's, and
    how many of those have the exact run's citations too (all of them, or a bug)."""

    def segments(path: Path) -> list[dict[str, Any]]:
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            out.extend(json.loads(line).get("segments", []))
        return out

    reference = segments(outputs[exact])
    found: dict[str, dict[str, int]] = {}
    for name, path in outputs.items():
        if name == exact:
            continue
        same_evidence = same_citations = 0
        mine = segments(path)
        assert len(mine) == len(reference)
        for a, b in zip(mine, reference):
            if [e["passage_id"] for e in a["evidence"]] != [e["passage_id"]
                                                            for e in b["evidence"]]:
                continue
            same_evidence += 1
            same_citations += a["citations"] == b["citations"]
        found[name] = {"segments": len(mine), "exact_evidence": same_evidence,
                       "same_citations_where_exact": same_citations}
    return found


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
