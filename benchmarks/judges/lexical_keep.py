"""Which passages an index without vectors keeps: the rule chosen on the dev sets.

    .venv/bin/python benchmarks/judges/lexical_keep.py [--keep 0,0.3,0.5,0.7,0.9]
        [--shared both|on|off] [--one-document both|on|off] [--dense]
        [--results-name lexical_keep]

An index without vectors (``ceg index build --retrieval lexical``) has no cosine for
the CEG threshold rule. Issue 60 item 4: keeping every top-k passage lets unrelated
passages together "support" an error. The candidate rules: apart from the top-1, keep a
passage whose BM25 score is at least ``--keep`` times the top-1's (0: every passage, the
rule before; ``ceg_cli.check.retrieve.LEXICAL_KEEP``), and, with ``--shared on``, only if
it holds one of the query's names or numbers (``shared_only`` here: not shipped).
Beside them, the offline judge's rule against an index (``offline.ONE_DOCUMENT``):
``--one-document on``, every number and name and the share of content words in the
passages of one document; off, each anywhere in the evidence, as the judge did before.

Chosen on **dev data only**: HaluEval QA dev (``quality.py``'s ``halueval``, against
an index of its ``knowledge`` passages built without vectors) and the 12 FEVER claims
against the enwiki sample built without vectors. FELM is not read here: it is a test
set (``quality.py --model none`` reports it after the choice). ``--dense`` adds
HaluEval on the MiniLM dense index (``ceg eval``'s default model), where only
``--one-document`` changes anything. Each run is ``ceg eval`` in this process
(``quality.run_eval``) with the module constants set; writes ``results/NAME.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from itertools import product
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
    write_results,
)
from quality import BENCHMARKS, model_corpus, run_eval


def lexical_enwiki() -> Path:
    """The enwiki sample indexed without vectors (built once into ``.cache``)."""
    from ceg_cli.index.build.builder import BuildOptions, build_index

    target = cache_dir() / "enwiki-sample-lexical"
    if not (target / "meta.json").exists():
        log(f"building {target} (no vectors)")
        build_index([ENWIKI_SAMPLE], target, BuildOptions(retrieval="lexical"))
    return target


def dense_corpus(name: str) -> Path:
    """The MiniLM index of benchmark ``name``'s corpus (``ceg eval``'s own, cached)."""
    from ceg_cli.eval.corpus import ensure_corpus_index
    from ceg_cli.eval.datasets import load_dataset
    from ceg_cli.index.dense.embedding import load_embedder

    target = cache_dir() / f"quality-corpus-minilm-{name}"
    path, _ = ensure_corpus_index(load_dataset(BENCHMARKS[name]), target / "index",
                                  embedder=load_embedder(None))
    return path


def shared_only(search: Callable[..., list[tuple[Any, ...]]]) -> Callable[..., Any]:
    """``search`` (``retrieve`` or ``retrieve_vectors``) keeping, apart from the top-1, only
    the passages that hold one of the query's names or numbers (the rule ``--shared on``
    measures; not the shipped one)."""
    from ceg_cli.judges.offline.langwords import reading_language
    from ceg_cli.judges.offline.offline import found_in, passage, specifics

    def kept(query: str, evidence: tuple[Any, ...]) -> tuple[Any, ...]:
        language = reading_language(None, query)
        wanted = specifics(query, language=language)
        if not wanted:
            return evidence
        return evidence[:1] + tuple(
            e for e in evidence[1:]
            if any(found_in(s, passage(e.text, e.title, language)) for s in wanted))

    def wrapped(index: Any, queries: Sequence[str], *args: Any) -> list[tuple[Any, ...]]:
        return [kept(q, ev) for q, ev in zip(queries, search(index, queries, *args))]

    return wrapped


def switches(value: str) -> list[bool]:
    return {"both": [False, True], "on": [True], "off": [False]}[value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", default="0,0.3,0.4,0.5,0.6,0.7,0.8,0.9")
    parser.add_argument("--shared", default="both", choices=("both", "on", "off"))
    parser.add_argument("--one-document", default="both", choices=("both", "on", "off"))
    parser.add_argument("--dense", action="store_true")
    parser.add_argument("--results-name", default="lexical_keep")
    args = parser.parse_args()
    os.environ.setdefault("CEG_CACHE_DIR", str(cache_dir() / "ceg"))
    import ceg_cli.check.pipeline as pipeline
    import ceg_cli.check.retrieve as retrieve
    import ceg_cli.judges.offline.offline as offline

    searches = {False: (retrieve.retrieve, retrieve.retrieve_vectors)}
    searches[True] = (shared_only(retrieve.retrieve), shared_only(retrieve.retrieve_vectors))

    sets = {
        "halueval": (BENCHMARKS["halueval"], model_corpus("halueval", "none")),
        "fever": (BENCHMARKS["fever"], lexical_enwiki()),
    }
    if args.dense:
        sets["halueval-dense"] = (BENCHMARKS["halueval"], dense_corpus("halueval"))
    rows: list[dict[str, Any]] = []
    keeps = [float(k) for k in args.keep.split(",")]
    for one, shared, keep in product(switches(args.one_document), switches(args.shared), keeps):
        offline.ONE_DOCUMENT, retrieve.LEXICAL_KEEP = one, keep
        pipeline.retrieve, pipeline.retrieve_vectors = searches[shared]
        row: dict[str, Any] = {"one_document": one, "shared": shared, "keep": keep}
        for name, (dataset, index) in sets.items():
            if name.endswith("-dense") and (keep, shared) != (keeps[0], False):
                continue  # nothing of the lexical rule reaches a dense index
            started = time.perf_counter()
            got = run_eval(dataset, "offline", "question+segment", ["--index", str(index)])
            row[name] = summary(got)
            log(f"{row} ({time.perf_counter() - started:.0f} s)")
        rows.append(row)
    header = ["one document", "shared name/number", "keep (x top-1 BM25)", "HaluEval pairwise",
              "HaluEval answer BA", "HaluEval acc. right / hallucinated", "FEVER BA"]
    if args.dense:
        header.append("HaluEval dense: pairwise / answer BA")
    table = []
    for r in rows:
        h, f = r["halueval"], r["fever"]
        line = [r["one_document"], r["shared"], r["keep"], pct(h["pairwise"]), pct(h["ba"]),
                f"{pct(h['right'])} / {pct(h['hallucinated'])}", pct(f["ba"])]
        if args.dense:
            d = r.get("halueval-dense")
            line.append(f"{pct(d['pairwise'])} / {pct(d['ba'])}" if d else "")
        table.append(line)
    print(markdown_table(header, table))
    path = write_results(args.results_name, {"command": command_line(),
                                             "environment": environment(), "rows": rows})
    log(f"wrote {path}")


def summary(metrics: dict[str, Any]) -> dict[str, float | None]:
    responses = metrics.get("responses") or metrics.get("segments") or {}
    return {
        "pairwise": (metrics.get("pairwise") or {}).get("accuracy"),
        "ba": responses.get("balanced_accuracy"),
        "right": responses.get("accuracy_factual"),
        "hallucinated": responses.get("accuracy_nonfactual"),
    }


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


if __name__ == "__main__":
    main()
