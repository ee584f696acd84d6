"""The lexical step of ``ceg index build --update``: kept in step against rebuilt (issue 56).

    .venv/bin/python benchmarks/build/lexical_update_speed.py [--passages 20000,100000]
        [--repeats 3] [--results lexical_update_speed]

For each size, a base chunk store of about that many passages of real text (the
sample dump's articles cut into passages of about ``PASSAGE_WORDS`` words, its
text used again with each passage's sentences in another order until the store
is full, as ``update_speed.py`` does) and its bm25s lexical part as a full build
writes it (``build_lexical``, with the counts file). Then one document changes:
its ``DOC_PASSAGES`` passages removed, as many new ones (their text edited) added
in a generation, the live passages read through the same view an update reads.
The lexical step of that update is timed both ways:

- ``rebuild``: what every update did before: ``build_lexical`` over every live passage;
- ``kept``: ``bm25_update.update_lexical`` from the base's part, the new passages
  tokenized alone.

Each is run ``--repeats`` times (medians; the index's files in the page cache,
as right after the update's store is written). Both parts are checked to score
a few queries identically. ``full_build_counts_s``: what a full build spends of
its time on the counts file's arrays (``counts_of_tokens``, timed once on the same
tokens).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sqlite3
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    ENWIKI_SAMPLE,
    command_line,
    environment,
    log,
    markdown_table,
    median,
    work_dir,
    write_results,
)

PASSAGE_WORDS = 95
DOC_PASSAGES = 3
MODE = "title+text"
QUERIES = ["river valley", "the battle of the north", "population census", "king"]


def passages(count: int) -> list[tuple[str, str]]:
    """About ``count`` (title, text) passages of the sample dump's text."""
    from ceg_cli.corpus import iter_documents

    base = []
    for doc in iter_documents(ENWIKI_SAMPLE):
        words = doc.text.split()
        for start in range(0, len(words), PASSAGE_WORDS):
            part = words[start:start + PASSAGE_WORDS]
            if len(part) > 20:
                base.append((doc.title, " ".join(part)))
    out: list[tuple[str, str]] = []
    edition = 0
    while len(out) < count:
        for title, text in base:
            if edition:
                sentences = re.split(r"(?<=\.) ", text)
                turn = edition % len(sentences)
                text = " ".join(sentences[turn:] + sentences[:turn])
            out.append((title, text))
            if len(out) == count:
                break
        edition += 1
    return out


def store(path: Path, rows: list[tuple[int, str, str]], removed: list[int] | None) -> None:
    from ceg_cli.index.layout import CHUNK_SCHEMA

    db = sqlite3.connect(path)
    db.executescript(CHUNK_SCHEMA)
    if removed is not None:
        db.execute("CREATE TABLE removed (id INTEGER PRIMARY KEY)")
        db.executemany("INSERT INTO removed VALUES (?)", ((i,) for i in removed))
    db.executemany("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?)",
                   ((i, f"d{i // DOC_PASSAGES}", title, 0, 0, len(text), text, None, "src",
                     "en") for i, title, text in rows))
    db.commit()
    db.close()


def counts_cost(texts: list[tuple[str, str]]) -> float:
    """Seconds a full build spends on the counts file's arrays (``counts_of_tokens``)."""
    from ceg_cli.index.lexical.bm25 import BM25_PARAMS
    from ceg_cli.index.lexical.bm25_counts import counts_of_tokens
    from ceg_cli.index.lexical.lexlang import TOKENIZER, import_bm25s

    bm25s = import_bm25s()
    tokens = bm25s.tokenize([f"{t}. {x}" for t, x in texts], **TOKENIZER, show_progress=False)
    retriever = bm25s.BM25(**BM25_PARAMS)
    retriever.index(tokens, show_progress=False)
    t0 = time.perf_counter()
    if counts_of_tokens(tokens.ids, retriever.scores) is None:
        raise SystemExit("the counts do not line up with bm25s's matrix")
    return time.perf_counter() - t0


def one_size(count: int, repeats: int, work: Path) -> dict[str, Any]:
    import numpy as np

    from ceg_cli.index.generation import attach_generation, live_ids
    from ceg_cli.index.layout import CHUNKS_FILE
    from ceg_cli.index.lexical.bm25 import LexicalIndex, build_lexical
    from ceg_cli.index.lexical.bm25_update import update_lexical
    from ceg_cli.index.store import connect_readonly

    folder = work / f"n{count}"
    folder.mkdir()
    texts = passages(count)
    store(folder / CHUNKS_FILE, [(i, t, x) for i, (t, x) in enumerate(texts)], None)
    with closing(connect_readonly(folder / CHUNKS_FILE)) as db:
        t0 = time.perf_counter()
        entry = build_lexical(db, folder, MODE, "bm25s")
        full_build = time.perf_counter() - t0
    counts_s = counts_cost(texts)
    # One document changed: its passages removed, its edited passages added.
    doc = count // 2 // DOC_PASSAGES * DOC_PASSAGES
    removed = list(range(doc, doc + DOC_PASSAGES))
    added = [(count + k, texts[i][0], texts[i][1] + " An added sentence, edited by the "
              "benchmark.") for k, i in enumerate(removed)]
    gen = folder / "gen-000001"
    gen.mkdir()
    store(gen / CHUNKS_FILE, added, removed)
    ids = live_ids(count, np.asarray(removed, dtype=np.int64), len(added))
    rows = np.where(ids < count, np.searchsorted(np.arange(count), ids), -1)
    times: dict[str, list[float]] = {"rebuild": [], "kept": []}
    for _ in range(repeats):
        for way in ("rebuild", "kept"):
            out = work / f"out-{way}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            with closing(connect_readonly(folder / CHUNKS_FILE)) as view:
                attach_generation(view, gen)
                t0 = time.perf_counter()
                if way == "rebuild":
                    made = build_lexical(view, out, MODE, "bm25s")
                else:
                    made = update_lexical(view, out, MODE, entry, folder, rows, ids)
                times[way].append(time.perf_counter() - t0)
            assert made is not None and made["passages"] == len(ids)
    a = LexicalIndex(work / "out-rebuild" / "lexical", len(ids))
    b = LexicalIndex(work / "out-kept" / "lexical", len(ids))
    for x, y in zip(a.scores_many(QUERIES), b.scores_many(QUERIES)):
        if not np.array_equal(x, y):
            raise SystemExit(f"{count} passages: the kept part scores otherwise than a rebuild")
    nnz = int(np.load(folder / "lexical" / "data.csc.index.npy", mmap_mode="r").shape[0])
    result = {"passages": count, "stored_pairs": nnz, "full_build_s": round(full_build, 2),
              "full_build_counts_s": round(counts_s, 2),
              "rebuild_s": [round(t, 3) for t in times["rebuild"]],
              "kept_s": [round(t, 3) for t in times["kept"]],
              "rebuild_median_s": round(median(times["rebuild"]), 3),
              "kept_median_s": round(median(times["kept"]), 3)}
    log(f"{count} passages: rebuild {result['rebuild_median_s']} s, kept "
        f"{result['kept_median_s']} s")
    shutil.rmtree(folder)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", default="20000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--results", default="lexical_update_speed")
    args = parser.parse_args()
    sizes = [int(s) for s in args.passages.split(",")]
    data: dict[str, Any] = {"command": command_line(), "environment": environment(),
                            "change": f"1 document of {DOC_PASSAGES} passages edited",
                            "sizes": []}
    with work_dir(None, prefix="lexical_update_speed-") as work:
        for count in sizes:
            data["sizes"].append(one_size(count, args.repeats, work))
    write_results(args.results, data)
    print(markdown_table(["passages", "stored pairs", "rebuild s (median)", "kept s (median)"],
                         [[r["passages"], r["stored_pairs"], r["rebuild_median_s"],
                           r["kept_median_s"]] for r in data["sizes"]]))


if __name__ == "__main__":
    main()
