"""How the lexical (BM25) index scales: build time, memory, size, load and query time.

    .venv/bin/python benchmarks/search/lexical_scale.py [--sizes 100000,1000000] \
        [--queries 200] [--project 30000000] [--workdir DIR]

For each size N, a synthetic chunk store of N passages is made, then indexed
by ``ceg_cli.index.lexical.bm25.build_lexical`` (the function ``ceg index build`` calls),
then loaded memory-mapped by ``ceg_cli.index.lexical.bm25.LexicalIndex`` and queried. Each
of the three stages runs in its own subprocess, so the peak RSS reported
(``ru_maxrss`` from ``os.wait4``) is that stage's own.

**The passages.** Sentences of the real enwiki sample passages
(``chunks.sqlite`` of an index of ``sample_data/enwiki-sample.xml.bz2``)
recombined with a seeded RNG: each synthetic passage takes the title of a
random real passage and random sentences until it is as long as another
random real passage (so the length distribution is the sample's). Recombined
sentences alone would stop adding words once the sample's vocabulary is used
up, while a real corpus keeps meeting new ones (names, numbers, foreign
words): that is what makes the vocabulary, the posting lists' count and the
index's size grow. So the script fits Heaps' law, V = K * T^beta (distinct
words V after T words), to the sample itself with the index's tokenizer, and
adds to each passage as many newly minted words (``q`` + a base-36 counter)
as keep the synthetic corpus's vocabulary on that curve; two more minted
words per passage are drawn from those minted before, so the rare tail
appears in more than one passage, as real rare words do. The common words
(and so the long posting lists that dominate query time) keep the sample's
frequencies.

**Queries.** Real sentences of the sample (a ``ceg`` query is the question
plus a segment: one or two sentences), ``--queries`` of them, seeded. Timed:

- ``full``: what ``ceg_cli.index.lexical.bm25.search`` does for every lexical or
  hybrid query: ``LexicalIndex.scores`` (bm25s's ``get_scores_from_ids``: an
  array of N scores, filled posting list by posting list), then the top
  ``FUSION_DEPTH`` of the N; then the BM25 scores of 50 hybrid candidates
  missing from the lexical list, read from that array (timed apart);
- ``posting``: the alternative measured and not taken, ``posting_only``:
  score only the passages on the query words' posting lists (``np.unique``
  over them, no array of N), then the top ``FUSION_DEPTH`` of those. Both
  give the same top scores (checked on every query).

With ``--engines tantivy``, the query stage times on the same queries: ceg's
search (``TantivyLexical.ranked``, with and without 50 hybrid candidates);
the search as ceg made it before (matches counted, ids from the doc store,
each word once), whose top lists must be the same on every query without a
repeated word; and with ``--max-terms N,...`` the search of each query's N
rarest terms only (a results-changing option), with the share of the full top
50 it keeps. ``--workdir DIR --reuse`` queries the indexes an earlier run built
in DIR without rebuilding them (a 10 M tantivy build takes about 25 minutes).

The 30 M projection is linear in N from the largest measured size's rates
(build time, disk, per-query time); where that is wrong is said in the
report (the build's memory holds every passage's text and tokens at once).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (
    CACHE_DIR,
    check_workdir,
    command_line,
    environment,
    log,
    markdown_table,
    median,
    results_name,
    with_parent,
    work_dir,
    write_results,
)

SAMPLE_CHUNKS = CACHE_DIR / "enwiki-sample-index" / "chunks.sqlite"
SEED = 16
MINTED_REUSED = 2
CANDIDATES = 50
# Columns named: the store gained a language column after this script was written.
INSERT = ("INSERT INTO chunks (id, doc_id, title, ordinal, start, end, text, url, source) "
          "VALUES (?,?,?,?,?,?,?,?,?)")
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


# --------------------------------------------------------------------------- the passages


def sample_rows(source: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(source) as db:
        return db.execute("SELECT title, text FROM chunks ORDER BY id").fetchall()


def words(text: str) -> list[str]:
    """The index's tokens of ``text`` (``ceg_cli.index.lexical.bm25.TOKENIZER``)."""
    import bm25s

    from ceg_cli.index.lexical.bm25 import TOKENIZER

    return bm25s.tokenize([text], **TOKENIZER, return_ids=False, show_progress=False)[0]


def fit_heaps(rows: list[tuple[str, str]]) -> tuple[float, float]:
    """K and beta of V = K * T^beta over the sample's passages, in a seeded order."""
    order = list(rows)
    random.Random(SEED).shuffle(order)
    seen: set[str] = set()
    total = 0
    points = []
    for n, (title, text) in enumerate(order, 1):
        toks = words(f"{title}. {text}")
        total += len(toks)
        seen.update(toks)
        if n % 50 == 0:
            points.append((math.log(total), math.log(len(seen))))
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    beta = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return math.exp(my - beta * mx), beta


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def generate(source: Path, target: Path, size: int) -> dict[str, Any]:
    """Write ``size`` synthetic passages to a chunk store at ``target``."""
    rows = sample_rows(source)
    k, beta = fit_heaps(rows)
    sentences = [s for _, text in rows for s in SENTENCE.split(text) if s.strip()]
    counts = [len(words(s)) for s in sentences]
    base_vocab = len({w for title, text in rows for w in words(f"{title}. {text}")})
    lengths = [len(text) for _, text in rows]
    titles = [title for title, _ in rows]
    rng = random.Random(SEED)
    with sqlite3.connect(source) as db:
        schema = db.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks'").fetchone()[0]
    target.unlink(missing_ok=True)
    out = sqlite3.connect(target)
    out.execute(schema)
    total_tokens = minted = 0
    batch: list[tuple[Any, ...]] = []
    for pid in range(size):
        goal, text, n_tok = rng.choice(lengths), [], 0
        while sum(len(s) + 1 for s in text) < goal:
            j = rng.randrange(len(sentences))
            text.append(sentences[j])
            n_tok += counts[j]
        extra = [f"q{_base36(rng.randrange(minted))}" for _ in range(MINTED_REUSED) if minted]
        total_tokens += n_tok + len(extra)
        wanted = int(k * total_tokens**beta) - base_vocab
        while minted < wanted:
            extra.append(f"q{_base36(minted)}")
            minted += 1
            total_tokens += 1
        title = rng.choice(titles)
        body = " ".join(text + extra)
        batch.append((pid, f"d{pid}", title, 0, 0, len(body), body, None, "synthetic"))
        if len(batch) == 10000:
            out.executemany(INSERT, batch)
            batch.clear()
    out.executemany(INSERT, batch)
    out.commit()
    out.close()
    return {
        "heaps_k": round(k, 3),
        "heaps_beta": round(beta, 4),
        "sample_passages": len(rows),
        "sample_sentences": len(sentences),
        "sample_vocabulary": base_vocab,
        "minted_words": minted,
        "tokens": total_tokens,
        "vocabulary_target": base_vocab + minted,
        "store_bytes": target.stat().st_size,
    }


# --------------------------------------------------------------------------- build, query


def build(store: Path, index_dir: Path, engine: str) -> dict[str, Any]:
    from ceg_cli.index.lexical.bm25 import LEXICAL_DIR, build_lexical

    index_dir.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(store) as db:
        started = time.perf_counter()
        entry = build_lexical(db, index_dir, "title+text", engine)
        seconds = time.perf_counter() - started
    files = {p.name: p.stat().st_size for p in (index_dir / LEXICAL_DIR).iterdir()}
    vocabulary = None
    if engine == "bm25s":
        vocabulary = len(json.loads((index_dir / LEXICAL_DIR / "vocab.index.json").read_text()))
    return {
        "engine": entry["library"],
        "build_s": round(seconds, 2),
        "passages_per_s": round(entry["passages"] / seconds),
        "passages": entry["passages"],
        "vocabulary": vocabulary,
        "disk_bytes": sum(files.values()),
        "files": len(files),
    }


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def query(source: Path, index_dir: Path, n_queries: int) -> dict[str, Any]:
    import numpy as np

    from ceg_cli.index.lexical.bm25 import FUSION_DEPTH, LEXICAL_DIR, LexicalIndex, _top

    rss_before = _rss_mb()
    started = time.perf_counter()
    lexical = LexicalIndex(index_dir / LEXICAL_DIR)
    load_s = time.perf_counter() - started
    rss_loaded = _rss_mb()
    rows = sample_rows(source)
    sentences = [s for _, text in rows for s in SENTENCE.split(text) if len(s.split()) >= 6]
    rng = random.Random(SEED + 1)
    queries = [rng.choice(sentences) for _ in range(n_queries)]
    n_docs = lexical._bm25.scores["num_docs"]
    times: dict[str, list[float]] = {k: [] for k in ("score", "select", "select_all", "lookup")}
    posting_ms, postings = [], []
    for q in queries:
        t0 = time.perf_counter()
        scores = lexical.scores(q)
        t1 = time.perf_counter()
        top = [int(i) for i in _top(scores, FUSION_DEPTH) if scores[i] > 0]
        t2 = time.perf_counter()
        top_all = [int(i) for i in select_over_all(scores, FUSION_DEPTH) if scores[i] > 0]
        t3 = time.perf_counter()
        candidates = [rng.randrange(n_docs) for _ in range(CANDIDATES)]
        looked = {i: float(scores[i]) for i in candidates}
        t4 = time.perf_counter()
        ids, matched = posting_only(lexical, q)
        top_post = ids[_top(matched, FUSION_DEPTH)]
        t5 = time.perf_counter()
        for key, a, b in (("score", t0, t1), ("select", t1, t2), ("select_all", t2, t3)):
            times[key].append(1000 * (b - a))
        times["lookup"].append(1000 * (t4 - t3))
        posting_ms.append(1000 * (t5 - t4))
        postings.append(len(ids))
        same = np.allclose(scores[top], scores[top_all]) and np.allclose(
            scores[top], scores[top_post][: len(top)]
        )
        if not same or not looked:
            raise SystemExit(f"the selections differ for {q!r}")
    full_ms = [a + b for a, b in zip(times["score"], times["select"])]
    before_ms = [a + b for a, b in zip(times["score"], times["select_all"])]
    return {
        "load_s": round(load_s, 3),
        "rss_load_mb": round(rss_loaded - rss_before, 1),
        "rss_after_queries_mb": round(_rss_mb(), 1),
        "queries": n_queries,
        "full": _dist(full_ms),
        "full_select_over_all": _dist(before_ms),
        "score_array": _dist(times["score"]),
        "select": _dist(times["select"]),
        "select_over_all": _dist(times["select_all"]),
        "posting": _dist(posting_ms),
        "lookup_50": _dist(times["lookup"]),
        "matched_passages_median": int(median(postings)),
        "matched_share_median": round(median(postings) / n_docs, 4),
    }


def query_tantivy(source: Path, index_dir: Path, n_queries: int,
                  max_terms: list[int] | None = None) -> dict[str, Any]:
    """What ``ceg_cli.index.lexical.bm25.search`` does with a tantivy part: the top
    ``FUSION_DEPTH`` of a query (lexical retrieval), and with 50 hybrid candidates it did
    not rank scored as well (hybrid retrieval's lexical half). Beside it, on the same
    queries in the same process: ``before``, the search ceg made before (matches
    counted, ids read from the doc store, a repeated word counted once), checked to
    give the same top lists where no query word repeats; and for each of ``max_terms``
    the search of the query's rarest terms only, with the share of the full top list
    it keeps (a results-changing option: its recall on the dev sets is measured by
    ``benchmarks/search/lexical_pruning.py``)."""
    from ceg_cli.index.lexical.bm25 import FUSION_DEPTH, LEXICAL_DIR
    from ceg_cli.index.lexical.lexical_tantivy import TantivyLexical
    from ceg_cli.index.lexical.lexlang import queries_tokens

    rss_before = _rss_mb()
    started = time.perf_counter()
    lexical = TantivyLexical(index_dir / LEXICAL_DIR)
    load_s = time.perf_counter() - started
    rss_loaded = _rss_mb()
    rows = sample_rows(source)
    sentences = [s for _, text in rows for s in SENTENCE.split(text) if len(s.split()) >= 6]
    rng = random.Random(SEED + 1)
    queries = [rng.choice(sentences) for _ in range(n_queries)]
    n_docs = int(lexical._searcher.num_docs)
    top_ms, hybrid_ms, before_ms, found, tops = [], [], [], [], []
    same = repeats = 0
    for q, words in zip(queries, queries_tokens(queries, lexical.tokenizer)):
        candidates = [rng.randrange(n_docs) for _ in range(CANDIDATES)]
        t0 = time.perf_counter()
        ((top, _),) = lexical.ranked([q], FUSION_DEPTH)
        t1 = time.perf_counter()
        ((_, scores),) = lexical.ranked([q], FUSION_DEPTH, [candidates])
        t2 = time.perf_counter()
        old = before(lexical, words, FUSION_DEPTH)
        t3 = time.perf_counter()
        if not set(candidates) <= set(scores):
            raise SystemExit(f"hybrid candidates not scored for {q!r}")
        if len(set(words)) < len(words):
            repeats += 1
        elif old != top:
            raise SystemExit(f"the top list differs from the search before for {q!r}")
        else:
            same += 1
        top_ms.append(1000 * (t1 - t0))
        hybrid_ms.append(1000 * (t2 - t1))
        before_ms.append(1000 * (t3 - t2))
        found.append(len(top))
        tops.append(top)
    batch = queries[: min(len(queries), 80)]
    t0 = time.perf_counter()
    lexical.ranked(batch, FUSION_DEPTH)
    batched_s = time.perf_counter() - t0
    pruned = {}
    for n in max_terms or []:
        cut = TantivyLexical(index_dir / LEXICAL_DIR, max_terms=n)
        ms, kept = [], []
        for q, full in zip(queries, tops):
            t0 = time.perf_counter()
            ((top, _),) = cut.ranked([q], FUSION_DEPTH)
            ms.append(1000 * (time.perf_counter() - t0))
            kept.append(len(set(top) & set(full)) / len(full) if full else 1.0)
        pruned[str(n)] = _dist(ms) | {"top_list_kept_mean": round(sum(kept) / len(kept), 4)}
    return {
        "load_s": round(load_s, 3),
        "rss_load_mb": round(rss_loaded - rss_before, 1),
        "rss_after_queries_mb": round(_rss_mb(), 1),
        "queries": n_queries,
        "segments": int(lexical._searcher.num_segments),
        "query_terms_median": int(median([len(set(w)) for w in
                                          queries_tokens(queries, lexical.tokenizer)])),
        "full": _dist(top_ms),
        "hybrid_with_50_candidates": _dist(hybrid_ms),
        "before": _dist(before_ms),
        "before_same_top_lists": same,
        "queries_with_a_repeated_word": repeats,
        "max_terms": pruned,
        "batched_queries_per_s": round(len(batch) / batched_s, 1),
        "top_found_median": int(median(found)),
    }


def before(lexical: Any, words: list[str], depth: int) -> list[int]:
    """The top list as ceg searched tantivy before this benchmark: each distinct word
    once, the matches counted (tantivy-py's default), ids read from the doc store."""
    from ceg_cli.index.lexical.lexical_tantivy import ID_FIELD, TERMS_FIELD

    if not words:
        return []
    Query, Occur = lexical._tantivy.Query, lexical._tantivy.Occur
    query = Query.boolean_query([(Occur.Should, Query.term_query(lexical._schema, TERMS_FIELD, w))
                                 for w in dict.fromkeys(words)])
    searcher = lexical._searcher
    hits = [(int(searcher.doc(address)[ID_FIELD][0]), float(score))
            for score, address in searcher.search(query, depth).hits]
    return [i for i, _ in sorted((h for h in hits if h[1] > 0), key=lambda h: (-h[1], h[0]))]


def select_over_all(scores: Any, depth: int) -> Any:
    """``ceg_cli.index.lexical.bm25._top`` before this benchmark: ``argpartition`` over all N."""
    import numpy as np

    top = np.argpartition(-scores, depth - 1)[:depth]
    return top[np.lexsort((top, -scores[top]))]


def posting_only(lexical: Any, query: str) -> tuple[Any, Any]:
    """The alternative measured and not taken: score only the passages on the
    query words' posting lists (ids sorted), with no array of N scores."""
    import bm25s
    import numpy as np

    from ceg_cli.index.lexical.bm25 import TOKENIZER

    bm25 = lexical._bm25
    tokens = bm25s.tokenize([query], **TOKENIZER, return_ids=False, show_progress=False)[0]
    table, words = bm25.scores, bm25.get_tokens_ids(tokens)
    bounds = [(int(table["indptr"][w]), int(table["indptr"][w + 1])) for w in words]
    if not bounds:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    docs = np.concatenate([table["indices"][a:b] for a, b in bounds])
    parts = np.concatenate([table["data"][a:b] for a, b in bounds])
    ids, where = np.unique(docs, return_inverse=True)
    return ids, np.bincount(where, weights=parts)


def _dist(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "median_ms": round(median(ms), 3),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
    }


# --------------------------------------------------------------------------- driver


def stage(name: str, argv: list[str]) -> tuple[dict[str, Any], float, float]:
    """Run one stage in a fresh process: its result, wall seconds and peak RSS (MB)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        with_parent([sys.executable, __file__, "--stage", name, *argv]), stdout=subprocess.PIPE
    )
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"stage {name} failed (status {status})")
    return json.loads(out), time.perf_counter() - started, usage.ru_maxrss / 1024


def measure(size: int, workdir: Path, n_queries: int, source: Path, reuse: bool,
            engines: list[str], max_terms: str = "") -> list[dict[str, Any]]:
    """Each engine's build and queries over one generated store of ``size`` passages."""
    store = workdir / f"chunks-{size}.sqlite"
    common = ["--size", str(size), "--workdir", str(workdir), "--queries", str(n_queries)]
    common += ["--source", str(source), "--max-terms", max_terms]
    out = []
    gen = None
    for engine in engines:
        # bm25s keeps the folder name of the runs before engines were compared.
        index_dir = workdir / (f"index-{size}" if engine == "bm25s" else f"index-{size}-{engine}")
        argv = [*common, "--engine", engine]
        saved = workdir / f"built-{size}{'' if engine == 'bm25s' else '-' + engine}.json"
        if reuse and saved.exists() and index_dir.is_dir():
            log(f"{size:,} passages, {engine}: reusing the index built by an earlier run ({saved})")
            gen, built, build_rss = json.loads(saved.read_text(encoding="utf-8"))
        else:
            if gen is None or not store.exists():
                log(f"{size:,} passages: generating")
                gen, gen_s, _ = stage("generate", argv)
                log(f"{size:,} passages: generated in {gen_s:.0f} s")
            log(f"{size:,} passages, {engine}: building")
            built, _, build_rss = stage("build", argv)
            saved.write_text(json.dumps([gen, built, build_rss]), encoding="utf-8")
        log(f"{size:,} passages, {engine}: querying ({built['build_s']} s to build, "
            f"{build_rss:.0f} MB)")
        queried, _, query_rss = stage("query", argv)
        out.append({
            "passages": size,
            "engine": engine,
            "generate": gen,
            "build": built | {"peak_rss_mb": round(build_rss)},
            "query": queried | {"peak_rss_mb": round(query_rss)},
            "index_dir": str(index_dir),
        })
    store.unlink(missing_ok=True)
    return out


def project(last: dict[str, Any], target: int) -> dict[str, Any]:
    """Linear in N from the largest measured size."""
    f = target / last["passages"]
    return {
        "passages": target,
        "build_s": round(last["build"]["build_s"] * f),
        "build_peak_rss_gb": round(last["build"]["peak_rss_mb"] * f / 1024, 1),
        "disk_gb": round(last["build"]["disk_bytes"] * f / 2**30, 1),
        "full_median_ms": round(last["query"]["full"]["median_ms"] * f, 1),
        "posting_median_ms": round(last["query"]["posting"]["median_ms"] * f, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--project", type=int, default=30_000_000)
    parser.add_argument("--source", type=Path, default=SAMPLE_CHUNKS)
    parser.add_argument("--workdir", type=Path, help="default: a temporary directory")
    parser.add_argument("--name", default="lexical_scale", help="results/NAME.json")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --workdir: query the indexes an earlier run built there, with its build figures",
    )
    parser.add_argument("--engines", default="bm25s",
                        help="comma-separated: bm25s, tantivy (each built and queried over the "
                        "same passages, side by side)")
    parser.add_argument("--max-terms", default="",
                        help="comma-separated N: tantivy also timed searching only each "
                        "query's N rarest terms (TantivyLexical max_terms; changes results)")
    parser.add_argument("--engine", default="bm25s", help=argparse.SUPPRESS)
    parser.add_argument("--stage", choices=("generate", "build", "query"), help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stage:
        store = args.workdir / f"chunks-{args.size}.sqlite"
        index_dir = args.workdir / (f"index-{args.size}" if args.engine == "bm25s"
                                    else f"index-{args.size}-{args.engine}")
        if args.stage == "generate":
            result = generate(args.source, store, args.size)
        elif args.stage == "build":
            result = build(store, index_dir, args.engine)
        elif args.engine == "tantivy":
            result = query_tantivy(args.source, index_dir, args.queries,
                                   [int(n) for n in args.max_terms.split(",") if n.strip()])
        else:
            result = query(args.source, index_dir, args.queries)
        print(json.dumps(result))
        return 0
    # Before any work: a bare results name, a work folder ceg made (or a new one).
    results_name(args.name, "--name")
    check_workdir(args.workdir)
    if not args.source.exists():
        raise SystemExit(f"{args.source}: no chunk store; build the enwiki sample index there")
    sizes = [int(s) for s in args.sizes.split(",")]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if not engines or set(engines) - {"bm25s", "tantivy"}:
        raise SystemExit(f"--engines {args.engines}: bm25s and/or tantivy")
    with work_dir(args.workdir, prefix="ceg-lexical-scale-") as workdir:
        runs = [run for size in sizes
                for run in measure(size, workdir, args.queries, args.source, args.reuse, engines,
                                   args.max_terms)]
    data: dict[str, Any] = {
        "command": command_line(),
        "environment": environment(),
        "runs": runs,
    }
    if engines == ["bm25s"]:
        data["projection"] = project(runs[-1], args.project)
        text = render(data)
    else:
        text = render_engines(runs)
    path = write_results(args.name, data)
    print(text)
    log(f"results: {path}")
    return 0


def render(data: dict[str, Any]) -> str:
    runs, p = data["runs"], data["projection"]
    header = ["measure", *(f"{r['passages']:,}" for r in runs), f"{p['passages']:,} (projected)"]
    g = runs[-1]["generate"]

    def row(label: str, cells: list[Any], projected: Any) -> list[Any]:
        return [label, *cells, projected]

    rows = [
        row("words (tokens after stop words)", [f"{r['generate']['tokens']:,}" for r in runs], ""),
        row("vocabulary", [f"{r['build']['vocabulary']:,}" for r in runs], ""),
        row("build time (s)", [r["build"]["build_s"] for r in runs], p["build_s"]),
        row(
            "build peak RSS (MB)",
            [r["build"]["peak_rss_mb"] for r in runs],
            f"{p['build_peak_rss_gb']} GB",
        ),
        row(
            "on disk (MB)",
            [round(r["build"]["disk_bytes"] / 2**20) for r in runs],
            f"{p['disk_gb']} GB",
        ),
        row("load, mmap (s)", [r["query"]["load_s"] for r in runs], ""),
        row("RSS added by loading (MB)", [r["query"]["rss_load_mb"] for r in runs], ""),
        row(
            "passages matching a query, median",
            [f"{r['query']['matched_passages_median']:,}" for r in runs],
            "",
        ),
        row(
            "query, full array of N scores: median / p95 (ms)",
            [f"{r['query']['full']['median_ms']} / {r['query']['full']['p95_ms']}" for r in runs],
            p["full_median_ms"],
        ),
        row(
            "... of which the array of N scores: median (ms)",
            [r["query"]["score_array"]["median_ms"] for r in runs],
            "",
        ),
        row(
            "... of which selecting the top 50: median (ms)",
            [r["query"]["select"]["median_ms"] for r in runs],
            "",
        ),
        row(
            "query with the top 50 selected among all N (before): median / p95 (ms)",
            [
                f"{r['query']['full_select_over_all']['median_ms']} / "
                f"{r['query']['full_select_over_all']['p95_ms']}"
                for r in runs
            ],
            "",
        ),
        row(
            "query, posting lists only: median / p95 (ms)",
            [
                f"{r['query']['posting']['median_ms']} / {r['query']['posting']['p95_ms']}"
                for r in runs
            ],
            p["posting_median_ms"],
        ),
        row(
            f"scores of {CANDIDATES} hybrid candidates, median (ms)",
            [r["query"]["lookup_50"]["median_ms"] for r in runs],
            "",
        ),
    ]
    return "\n".join(
        [
            "# Lexical index at scale",
            "",
            f"`{data['command']}`",
            "",
            f"Heaps' law fitted on the sample: V = {g['heaps_k']} * T^{g['heaps_beta']}.",
            "",
            markdown_table(header, rows),
        ]
    )



def render_engines(runs: list[dict[str, Any]]) -> str:
    """The engines side by side: a column per size and engine."""
    header = ["measure", *(f"{r['engine']} {r['passages']:,}" for r in runs)]

    def cells(get: Any) -> list[Any]:
        return [get(r) for r in runs]

    def dist(r: dict[str, Any], key: str) -> str:
        d = r["query"].get(key)
        return f"{d['median_ms']} / {d['p95_ms']}" if d else ""

    rows = [
        ["build time (s)", *cells(lambda r: r["build"]["build_s"])],
        ["build passages/s", *cells(lambda r: f"{r['build']['passages_per_s']:,}")],
        ["build peak RSS (MB)", *cells(lambda r: r["build"]["peak_rss_mb"])],
        ["on disk (MB)", *cells(lambda r: round(r["build"]["disk_bytes"] / 2**20))],
        ["RSS added by opening (MB)", *cells(lambda r: r["query"]["rss_load_mb"])],
        ["query, top 50: median / p95 (ms)", *cells(lambda r: dist(r, "full"))],
        ["query with 50 hybrid candidates scored: median / p95 (ms)",
         *cells(lambda r: dist(r, "hybrid_with_50_candidates") or "")],
        ["query peak RSS (MB)", *cells(lambda r: r["query"]["peak_rss_mb"])],
    ]
    if any("before" in r["query"] for r in runs):  # tantivy's alternatives, same queries
        def ratio(r: dict[str, Any]) -> str:
            q = r["query"]
            if "before" not in q:
                return ""
            return f"{q['before']['median_ms'] / q['full']['median_ms']:.2f}"

        rows += [
            ["segments; query terms, median",
             *cells(lambda r: f"{r['query']['segments']}; {r['query']['query_terms_median']}"
                    if "segments" in r["query"] else "")],
            ["query, top 50, as before (matches counted, doc store): median / p95 (ms)",
             *cells(lambda r: dist(r, "before"))],
            ["before / now, median", *cells(ratio)],
            ["top lists the same as before (queries without a repeated word)",
             *cells(lambda r: r["query"].get("before_same_top_lists", ""))],
            ["queries with a repeated word (now counted as bm25s does)",
             *cells(lambda r: r["query"].get("queries_with_a_repeated_word", ""))],
        ]
        for n in sorted({n for r in runs for n in r["query"].get("max_terms", {})}, key=int):
            def pruned(r: dict[str, Any], n: str = n) -> str:
                d = r["query"].get("max_terms", {}).get(n)
                return (f"{d['median_ms']} / {d['p95_ms']}; {100 * d['top_list_kept_mean']:.1f}%"
                        if d else "")

            rows.append([f"max_terms {n}, top 50: median / p95 (ms); share of the full top 50 kept",
                         *cells(pruned)])
    return markdown_table(header, rows)


if __name__ == "__main__":
    sys.exit(main())

