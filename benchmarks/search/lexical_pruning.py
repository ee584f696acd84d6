"""What searching only a query's rarest terms costs in recall (tantivy ``max_terms``).

    .venv/bin/python benchmarks/search/lexical_pruning.py [--max-terms 4,6,8,10,12] \
        [--index benchmarks/.cache/enwiki-sample-index]

``TantivyLexical(max_terms=N)`` searches and scores a query by its N rarest terms
(fewest passages: highest IDF) only: common terms hold the longest posting lists,
and tantivy-py scores every passage on them (``benchmarks/search/lexical_scale.py
--max-terms`` times it at 10 M passages). It changes results, so it is off unless
asked for; this script measures by how much, on the dev sets of
``benchmarks/search/retrieval_recall.py`` (the same tasks, lexical retrieval only):

- **fever** and **enwiki-lead**: the enwiki sample index's passages (its chunk
  store, ``--index``: read only), a tantivy lexical part built from them in a
  temporary folder;
- **halueval q+a** and **halueval q**: HaluEval QA dev's 250 ``knowledge``
  passages, chunked as ``ceg index build`` chunks a JSONL document (title: the
  id, as the JSONL reader gives an untitled document).

FELM is test-only and is not used. For each N (and every term, the default):
recall@1/@5/@20 by document, and the share of queries whose terms were cut.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (
    CACHE_DIR,
    command_line,
    environment,
    log,
    markdown_table,
    work_dir,
    write_results,
)
from retrieval_recall import HALUEVAL, KS, Task, fever_task, halueval_corpus, lead_task

ENWIKI_INDEX = CACHE_DIR / "enwiki-sample-index"
DEPTH = max(KS)


def build_part(db: sqlite3.Connection, target: Path, embed_mode: str) -> Any:
    """A tantivy lexical part of the chunk store ``db`` at ``target``, and each row
    id's document id."""
    from ceg_cli.index.lexical.lexical_tantivy import build

    target.mkdir(parents=True)
    build(db, target, embed_mode)
    return dict(db.execute("SELECT id, doc_id FROM chunks"))


def halueval_store(path: Path) -> sqlite3.Connection:
    """HaluEval's knowledge passages chunked as a build chunks them, in a chunk store
    with the columns the lexical build reads."""
    from ceg_cli.index.build.chunking import DEFAULT_MAX_WORDS, chunk_document
    from ceg_cli.types import Document

    db = sqlite3.connect(path)
    db.execute("CREATE TABLE chunks (id INTEGER PRIMARY KEY, doc_id TEXT, title TEXT, "
               "text TEXT, language TEXT)")
    row = 0
    for i, line in enumerate(HALUEVAL.read_text(encoding="utf-8").splitlines()):
        doc = Document(str(i), str(i), json.loads(line)["knowledge"])
        for chunk in chunk_document(doc, DEFAULT_MAX_WORDS):
            db.execute("INSERT INTO chunks VALUES (?,?,?,?,?)",
                       (row, chunk.doc_id, chunk.title, chunk.text, None))
            row += 1
    db.commit()
    return db


def recall(part: Path, doc_of: dict[int, str], task: Task, max_terms: int | None) -> dict[str, Any]:
    from ceg_cli.index.lexical.lexical_tantivy import TantivyLexical
    from ceg_cli.index.lexical.lexlang import queries_tokens

    lexical = TantivyLexical(part, max_terms=max_terms)
    ranks = []
    for top, _ in lexical.ranked(task.queries, DEPTH):
        ranks.append([doc_of[i] for i in top])
    out: dict[str, Any] = {"queries": len(task.queries)}
    for k in KS:
        hits = sum(1 for found, want in zip(ranks, task.targets) if set(found[:k]) & want)
        out[f"recall@{k}"] = round(hits / len(task.queries), 4)
    words = queries_tokens(task.queries, None)
    out["queries_cut"] = round(sum(1 for w in words if max_terms and len(set(w)) > max_terms)
                               / len(words), 4)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-terms", default="4,6,8,10,12")
    parser.add_argument("--index", type=Path, default=ENWIKI_INDEX,
                        help="an index of the enwiki sample (its chunk store is read)")
    parser.add_argument("--name", default="lexical_pruning", help="results/NAME.json")
    args = parser.parse_args(argv)
    sizes: list[int | None] = [None, *(int(n) for n in args.max_terms.split(",") if n.strip())]
    meta = json.loads((args.index / "meta.json").read_text(encoding="utf-8"))
    data: dict[str, Any] = {"command": command_line(), "environment": environment(),
                            "tasks": {}}
    with work_dir(None, prefix="ceg-lexical-pruning-") as workdir:
        enwiki = sqlite3.connect(f"file:{args.index / 'chunks.sqlite'}?mode=ro", uri=True)
        parts = [(workdir / "enwiki", build_part(enwiki, workdir / "enwiki",
                                                  meta["embed_text"]),
                  [fever_task(SimpleNamespace(path=args.index)),
                   lead_task(SimpleNamespace(path=args.index))])]
        enwiki.close()
        _, halueval_tasks = halueval_corpus(workdir)
        store = halueval_store(workdir / "halueval.sqlite")
        parts.append((workdir / "halueval", build_part(store, workdir / "halueval",
                                                        "title+text"), halueval_tasks))
        store.close()
        for part, doc_of, tasks in parts:
            for task in tasks:
                log(f"{task.name}: {len(task.queries)} queries")
                data["tasks"][task.name] = {
                    str(n or "all"): recall(part / "lexical", doc_of, task, n) for n in sizes}
    header = ["task", *(f"max_terms {n}" if n else "every term" for n in sizes)]
    rows = []
    for name, by in data["tasks"].items():
        for k in (1, 5):
            rows.append([f"{name} ({by['all']['queries']}): recall@{k}",
                         *(f"{100 * by[str(n or 'all')][f'recall@{k}']:.1f}" for n in sizes)])
        rows.append([f"{name}: queries cut",
                     *(f"{100 * by[str(n or 'all')]['queries_cut']:.0f}%" for n in sizes)])
    text = markdown_table(header, rows)
    path = write_results(args.name, data)
    print(f"`{data['command']}`\n\n{text}")
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
