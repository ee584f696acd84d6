"""Does reranking the retrieved passages by the verifier find the right one sooner?

    .venv/bin/python benchmarks/search/rerank_recall.py --index DIR [--depth 10] \
        [--retrieval dense,hybrid]

The same dev data and queries as ``benchmarks/search/retrieval_recall.py`` (its
corpora and tasks are imported, not copied): FEVER claims and lead sentences
against the enwiki sample (``--index``: an index of the sample, with
``embed_text`` title+text; it is copied, and the lexical part added to the
copy, so the given directory is never written), FELM wk question + segment
(``ceg check``'s query) against the response's references, HaluEval question
+ right answer against the knowledge passages.

For each query and each ``--retrieval`` method, the top ``--depth`` passages
are reranked by the shipped verifier (``ceg_cli.judges.checkers.verifier``) scoring
the query as the segment against each passage alone, as ``ceg check`` scores
a segment against its evidence (the evidence window, the cross-encoder, the
lexical analysis and the retrieval features, through ``verifier.assess``):

- ``support``: the combiner's P(supported);
- ``entailment``: the cross-encoder's P(entailment) alone.

Ties keep the retrieval order. Reported: recall@1 and @5 (a passage of a
target document in the top 1 / 5) before and after, the paired count of
queries each side alone gets right at rank 1 with the exact sign-test p, and
the verifier's milliseconds per query (``depth`` pairs each).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (
    command_line,
    environment,
    log,
    markdown_table,
    results_name,
    work_dir,
    write_results,
)
from retrieval_recall import (
    Task,
    build_small,
    felm_corpus,
    fever_task,
    halueval_corpus,
    lead_task,
    paired,
    with_lexical,
)

TASKS = ("fever", "enwiki-lead", "felm q+segment", "halueval q+a")
KS = (1, 5)
SCORERS = ("support", "entailment")


def rank_of(found: list[Any], target: frozenset[str]) -> int | None:
    return next((r for r, h in enumerate(found, 1) if h.chunk.doc_id in target), None)


def rerank_scores(judge: Any, query: str, hits: list[Any]) -> dict[str, list[float]]:
    """Each hit's verifier scores with ``query`` as the segment and the hit as evidence."""
    from ceg_cli.judges.checkers.verifier import assess
    from ceg_cli.types import Evidence, JudgeItem, Segment

    segment = Segment(0, 0, len(query), query)
    items = [
        JudgeItem(
            segment, (Evidence(h.chunk_id, h.chunk.doc_id, h.chunk.title, h.chunk.text, h.score),)
        )
        for h in hits
    ]
    found = assess(items, judge.entailment, window_words=judge.combiner.window_words)
    return {
        "support": [judge.combiner.probability(a.features.values) for a in found],
        "entailment": [a.entailment for a in found],
    }


def evaluate(
    index_dir: Path, tasks: list[Task], methods: list[str], depth: int, embedder: Any, judge: Any
) -> dict[str, dict[str, Any]]:
    from ceg_cli.index import open_index

    out: dict[str, dict[str, Any]] = {}
    with open_index(index_dir) as index:
        index.use_embedder(embedder)
        index.search(["warm up"], 1, "hybrid")
        for task in tasks:
            vectors = index.embedder().embed(task.queries)
            for method in methods:
                hits = index.search_vectors(vectors, depth) if method == "dense" else None
                if hits is None:
                    from ceg_cli.index.lexical.bm25 import search

                    hits = search(index, task.queries, vectors, depth, method)
                ranks: dict[str, list[int | None]] = {"retrieval": [], **{s: [] for s in SCORERS}}
                started = time.perf_counter()
                for query, found, target in zip(task.queries, hits, task.targets):
                    ranks["retrieval"].append(rank_of(found, target))
                    scores = rerank_scores(judge, query, found)
                    for name in SCORERS:
                        order = sorted(range(len(found)), key=lambda i: -scores[name][i])
                        ranks[name].append(rank_of([found[i] for i in order], target))
                seconds = time.perf_counter() - started
                n = len(task.queries)
                row: dict[str, Any] = {
                    "queries": n,
                    "verifier_ms_per_query": round(1000 * seconds / n, 1),
                }
                for name, got in ranks.items():
                    for k in KS:
                        row[f"{name} recall@{k}"] = round(
                            sum(1 for r in got if r is not None and r <= k) / n, 4
                        )
                for name in SCORERS:
                    row[f"{name} vs retrieval @1"] = paired(ranks["retrieval"], ranks[name], 1)
                out[f"{task.name} / {method}"] = row
                log(f"{task.name} / {method}: {row}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, required=True, help="an enwiki-sample index")
    parser.add_argument("--depth", type=int, default=10, help="passages reranked per query")
    parser.add_argument("--retrieval", default="dense,hybrid")
    parser.add_argument("--name", default="rerank_recall", help="results/NAME.json")
    args = parser.parse_args(argv)
    results_name(args.name, "--name")  # before any work: a bare name only
    methods = [m for m in args.retrieval.split(",") if m]

    from ceg_cli.index.dense.embedding import load_embedder
    from ceg_cli.judges.checkers.verifier import SHIPPED, VerifierJudge

    embedder = load_embedder()
    judge = VerifierJudge(SHIPPED)
    results: dict[str, dict[str, Any]] = {}
    with work_dir(None, prefix="ceg-rerank-") as work:
        enwiki = work / "enwiki"
        shutil.copytree(args.index, enwiki)
        with_lexical(enwiki, "title+text")
        felm_path, felm_tasks, _ = felm_corpus(work)
        halu_path, halu_tasks = halueval_corpus(work)
        from ceg_cli.index import open_index

        with open_index(enwiki) as index:
            wiki_tasks = [fever_task(index), lead_task(index)]
        for where, tasks in (
            (enwiki, wiki_tasks),
            (build_small(felm_path, work / "felm", "title+text", embedder), felm_tasks),
            (build_small(halu_path, work / "halueval", "title+text", embedder), halu_tasks),
        ):
            chosen = [t for t in tasks if t.name in TASKS]
            results |= evaluate(where, chosen, methods, args.depth, embedder, judge)
    data = {
        "command": command_line(),
        "depth": args.depth,
        "retrieval": methods,
        "results": results,
        "environment": environment(),
    }
    path = write_results(args.name, data)
    print(render(data))
    print(f"\nresults: {path}")
    return 0


def render(data: dict[str, Any]) -> str:
    header = [
        "task / retrieval",
        "queries",
        "recall@1: retrieval / support / entailment",
        "recall@5: retrieval / support / entailment",
        "@1 only retrieval : only support (p)",
        "verifier ms/query",
    ]
    rows = []
    for name, r in data["results"].items():
        p = r["support vs retrieval @1"]
        rows.append(
            [
                name,
                r["queries"],
                " / ".join(f"{100 * r[f'{s} recall@1']:.1f}" for s in ("retrieval", *SCORERS)),
                " / ".join(f"{100 * r[f'{s} recall@5']:.1f}" for s in ("retrieval", *SCORERS)),
                f"{p['only_first']} : {p['only_second']} ({p['p_two_sided']})",
                r["verifier_ms_per_query"],
            ]
        )
    return "\n".join(
        [
            f"# Reranking the top {data['depth']} by the verifier",
            "",
            f"`{data['command']}`",
            "",
            markdown_table(header, rows),
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
