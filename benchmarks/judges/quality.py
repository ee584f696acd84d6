"""How right the labels are: ``ceg eval`` on the three shared benchmarks.

    .venv/bin/python benchmarks/judges/quality.py [--judge offline] [--enwiki-index DIR]
        [--only felm,halueval,fever] [--limit N] [--query question+segment|segment]
        [--retrieval dense|lexical|hybrid] [--model NAME] [--results-name quality]

- **felm**: FELM world knowledge, dev half (wk-dev, 92 responses, 297 labelled
  segments), checked against an index of the responses' own references;
  segment balanced accuracy is the paper's FELM metric.
- **halueval**: HaluEval QA, dev half (qa-dev, 250 items), against an index of
  all ``knowledge`` passages; pairwise accuracy is the paper's HaluEval metric,
  shown next to the "shorter answer wins" rule and on length-matched pairs.
- **fever**: the 12 FEVER claims whose evidence is in the enwiki sample,
  against an index of that sample (``--enwiki-index``; built into
  ``benchmarks/.cache/enwiki-sample-index`` when not given and not there,
  about 4 minutes on 2 cores).

Each benchmark runs the ``ceg eval`` command itself (in this process, so the
model loads once). FELM and HaluEval corpus indexes are cached under
``benchmarks/.cache/ceg`` (``CEG_CACHE_DIR``). The Markdown table goes to
stdout, progress to stderr, and aggregate figures to
``benchmarks/results/quality.json`` (no benchmark text: FELM is CC BY-NC-SA).
The paper's figures are on the full benchmarks; ours on the dev halves.

``--model none``: the FELM and HaluEval corpora are indexed without vectors
(``ceg index build --retrieval lexical``), searched by BM25; apart from the top-1,
a passage is kept at half the top-1's BM25 or more (no cosine to cut on:
``retrieve.LEXICAL_KEEP``). Pass ``--enwiki-index`` an index of the sample built
without vectors for FEVER.

``--model NAME`` (``ceg index build``'s, e.g. ``static-minilm``): the FELM and
HaluEval corpora are indexed with that embedding model, into
``benchmarks/.cache/quality-corpus-NAME-BENCHMARK``, and ``ceg eval`` is
pointed at them with ``--index`` (FEVER: pass ``--enwiki-index`` built with it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (
    ENWIKI_SAMPLE,
    SHARED_DATA,
    cache_dir,
    command_line,
    environment,
    log,
    markdown_table,
    results_name,
    work_dir,
    write_results,
)

BENCHMARKS = {
    "felm": SHARED_DATA / "felm" / "wk-dev.jsonl",
    "halueval": SHARED_DATA / "halueval" / "qa-dev.jsonl",
    "fever": SHARED_DATA / "fever" / "fever-dev-in-enwiki-sample.jsonl",
}

# (section, key, label, paper figure or None); percentages unless a count.
ROWS: dict[str, list[tuple[str, str, str, str]]] = {
    "felm": [
        ("segments", "count", "segments (gold nonfactual: {gold_nonfactual})", ""),
        (
            "segments",
            "balanced_accuracy",
            "segment balanced accuracy",
            "59.7 (ChatGPT), 69.9 (GPT-4)",
        ),
        ("segments", "accuracy_factual", "accuracy on factual segments", ""),
        ("segments", "accuracy_nonfactual", "accuracy on nonfactual segments", ""),
        ("segments", "f1_nonfactual", "F1, nonfactual segments", ""),
        ("segments", "auc_pr_nonfactual", "AUC-PR, nonfactual (floor {prevalence_nonfactual})", ""),
        ("retrieval", "recall_at_1", "recall@1 of the response's own references", ""),
        ("retrieval", "recall_at_k", "recall@{k} of the response's own references", ""),
    ],
    "halueval": [
        ("pairwise", "pairs", "pairs", ""),
        ("pairwise", "accuracy", "pairwise accuracy", "69.45"),
        ("pairwise", "shorter_wins_accuracy", "'shorter answer wins' rule, all pairs", ""),
        (
            "pairwise",
            "length_matched_accuracy",
            "pairwise accuracy, {length_matched_pairs} length-matched pairs",
            "",
        ),
        (
            "pairwise",
            "shorter_wins_length_matched_accuracy",
            "'shorter answer wins', length-matched",
            "",
        ),
        ("responses", "balanced_accuracy", "answer balanced accuracy", ""),
        (
            "responses",
            "auc_pr_nonfactual",
            "AUC-PR, hallucinated answers (floor {prevalence_nonfactual})",
            "",
        ),
        ("retrieval", "recall_at_1", "recall@1 of the item's own passage", ""),
        ("retrieval", "recall_at_k", "recall@{k} of the item's own passage", ""),
    ],
    "fever": [
        ("segments", "count", "claims (REFUTES: {gold_nonfactual})", ""),
        ("segments", "balanced_accuracy", "claim balanced accuracy", ""),
        ("segments", "accuracy_factual", "accuracy on SUPPORTS", ""),
        ("segments", "accuracy_nonfactual", "accuracy on REFUTES", ""),
        ("retrieval", "recall_at_1", "recall@1 of the gold page", ""),
        ("retrieval", "recall_at_k", "recall@{k} of the gold page", ""),
    ],
}
COUNTS = {"count", "pairs"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--judge", default="offline")
    parser.add_argument("--enwiki-index", type=Path, default=None)
    parser.add_argument("--only", default="felm,halueval,fever")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--threshold", type=float, default=None)
    parser.add_argument("--query", default="question+segment")
    parser.add_argument("--retrieval", default=None, help="default: ceg eval's")
    parser.add_argument("--model", default=None, help="corpora embedded with this model")
    parser.add_argument(
        "--results-name", default="quality", help="results/NAME.json (one file per judge)"
    )
    args = parser.parse_args()
    results_name(args.results_name, "--results-name")  # before any work: a bare name
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = set(names) - set(BENCHMARKS)
    if unknown:
        parser.error(f"--only: unknown benchmark(s) {', '.join(sorted(unknown))}")
    os.environ.setdefault("CEG_CACHE_DIR", str(cache_dir() / "ceg"))

    results: dict[str, Any] = {}
    for name in names:
        extra = ["--index", str(enwiki_index(args.enwiki_index))] if name == "fever" else []
        if args.model and name != "fever":
            extra = ["--index", str(model_corpus(name, args.model))]
        for flag, value in (
            ("--limit", args.limit),
            ("--top-k", args.top_k),
            ("--threshold", args.threshold),
            ("--retrieval", args.retrieval),
        ):
            if value is not None:
                extra += [flag, str(value)]
        log(f"== {name}: ceg eval {BENCHMARKS[name]} --judge {args.judge} {' '.join(extra)}")
        started = time.perf_counter()
        results[name] = run_eval(BENCHMARKS[name], args.judge, args.query, extra)
        log(f"   {time.perf_counter() - started:.0f} s")

    judge = next(iter(results.values()))["run"]
    print(
        f"Judge `{judge['judge']}` ({judge['judge_method']}); top-k {judge['top_k']}, "
        f"threshold {judge['threshold']}, query `{judge['query']}`, "
        f"retrieval `{judge.get('retrieval', 'dense')}`.\n"
    )
    print(markdown_table(["benchmark", "metric", "ceg", "paper (full benchmark)"], table(results)))
    path = write_results(
        args.results_name,
        {"command": command_line(), "environment": environment(), "benchmarks": results},
    )
    log(f"wrote {path}")


def model_corpus(name: str, model: str) -> Path:
    """The corpus index of benchmark ``name`` embedded with ``model`` (built once)."""
    import re

    from ceg_cli.eval.corpus import ensure_corpus_index
    from ceg_cli.eval.datasets import load_dataset
    from ceg_cli.index.dense.embedding import load_embedder

    target = cache_dir() / f"quality-corpus-{re.sub(r'[^A-Za-z0-9]+', '-', model)}-{name}"
    if model == "none":  # an index without vectors: ceg index build --retrieval lexical
        path, built = ensure_corpus_index(load_dataset(BENCHMARKS[name]), target / "index",
                                          retrieval="lexical")
        log(f"   {'built' if built else 'reusing'} {path} (no vectors)")
        return path
    embedder = load_embedder(model)
    path, built = ensure_corpus_index(load_dataset(BENCHMARKS[name]), target / "index",
                                      embedder=embedder)
    meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    if meta["model"]["name"] != embedder.name:
        raise SystemExit(f"{path}: built with {meta['model']['name']}, not {embedder.name}")
    log(f"   {'built' if built else 'reusing'} {path} ({embedder.name})")
    return path


def run_eval(dataset: Path, judge: str, query: str, extra: list[str]) -> dict[str, Any]:
    """Run ``ceg eval`` in this process; its table goes to stderr, its metrics are returned."""
    import typer

    from ceg_cli.cli.eval_cmd import eval_command

    app = typer.Typer()
    app.command("eval")(eval_command)

    @app.callback()
    def _root() -> None:
        """ceg"""

    with work_dir(None, prefix="ceg-quality-") as work:
        metrics_file = work / "metrics.json"
        argv = [
            "eval",
            str(dataset),
            "--judge",
            judge,
            "--query",
            query,
            "--json",
            str(metrics_file),
            *extra,
        ]
        with contextlib.redirect_stdout(sys.stderr):
            try:
                typer.main.get_command(app).main(argv, standalone_mode=False)
            except SystemExit as exc:  # handle_errors turns errors into exits
                if exc.code:
                    raise
        return json.loads(metrics_file.read_text(encoding="utf-8"))


def enwiki_index(given: Path | None) -> Path:
    """The index of the enwiki sample: as given, or cached in benchmarks/.cache (built once)."""
    if given is not None:
        return given
    target = cache_dir() / "enwiki-sample-index"
    if (target / "meta.json").exists():
        return target
    from ceg_cli.index.build.builder import BuildOptions, build_index
    from ceg_cli.progress import PlainProgress

    source = (
        ENWIKI_SAMPLE if ENWIKI_SAMPLE.exists() else SHARED_DATA / "wiki" / "enwiki-sample.xml.bz2"
    )
    log(f"building the enwiki sample index into {target} (about 4 minutes)")
    progress = PlainProgress(lambda line: print(line, file=sys.stderr, flush=True))
    build_index([source], target, BuildOptions(), progress=progress)
    progress.close()
    return target


def table(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name, metrics in results.items():
        for section, key, label, paper in ROWS[name]:
            part = metrics.get(section) or {}
            if key not in part:
                continue
            context = {k: _fmt(k, v) for k, v in part.items()}
            rows.append([name, label.format(**context), _fmt(key, part[key]), paper])
    return rows


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return "–"
    if key in COUNTS or isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{100 * value:.1f}"
    return str(value)


if __name__ == "__main__":
    main()
