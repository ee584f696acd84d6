"""A million-passage build, killed and resumed; the index it chooses, opened and searched.

What issue 10 asks to see at scale, end to end through the real ``ceg`` command:

1. **Corpus.** Synthetic documents with the sample dump's content: each is
   about 300 words of sentences drawn at random from one random article of
   ``sample_data/enwiki-sample.xml.bz2`` (in the article's order), under that
   article's title; as many
   as make ``--passages`` passages (default 1,000,000), written as JSONL.
2. **Build, killed and resumed.** ``ceg index build DOCS --model NAME``,
   where NAME is the stand-in model of ``_standin.py`` (a fast
   feature-hashing embedder: the real model would take 4 to 8 hours here; the
   build around the model is what is measured). The build is killed with
   SIGKILL at ``--kills`` random points while it embeds (once that many
   passages, drawn at random, are committed), and once while it
   writes ``vectors.faiss`` from its shards, each time run again with
   ``--resume``, until it finishes. Every run is its own process; its peak
   memory (``VmHWM`` and anonymous ``RssAnon``) is sampled every 0.2 s,
   killed runs included.
3. **Nothing lost or duplicated.** Ids are dense; the documents appear in
   corpus order, each once, with ordinals 0..k-1; for a sample of documents
   the passages equal a fresh chunking of that document, and for a sample of
   passages the stored vector equals the model's vector of its text.
4. **The index chosen by size**, its measured recall@10 from ``meta.json``;
   ``ceg index info``; opening ``vectors.faiss`` memory-mapped against a full
   read (time, resident memory); searching it, recall@10 against exact
   search for the sample responses' segments and for passages as queries;
   ``ceg check`` of the sample responses against it (wall time).

Usage::

    .venv/bin/python benchmarks/build/million_build.py [--passages N] [--kills K] [--workdir DIR]

It needs about 4 GB of disk per million passages (JSONL 0.7 GB, vectors 1.5
GB twice while the shards are assembled, passages 0.7 GB) and writes
``results/million_build.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (
    ENWIKI_SAMPLE,
    REPO,
    RESULTS_DIR,
    cache_dir,
    check_workdir,
    command_line,
    environment,
    results_file,
    watch,
    with_parent,
    work_dir,
    write_json,
)
from _standin import NAME, HashedWords
from index_types import rss_mib

STANDIN = Path(__file__).resolve().parent.parent / "_standin.py"
RESPONSES = REPO / "sample_data" / "responses.jsonl"
WORDS_PER_DOC = 300


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- 1. the corpus -----------------------------------------------------------------------


def make_corpus(path: Path, passages: int, seed: int) -> dict[str, Any]:
    from ceg_cli.corpus import iter_documents
    from ceg_cli.index.build.chunking import chunk_or_skip
    from ceg_cli.sentences import sentence_spans
    from ceg_cli.types import Document

    articles = []
    for doc in iter_documents(ENWIKI_SAMPLE):
        sentences = [doc.text[a:b] for a, b in sentence_spans(doc.text)]
        if len(sentences) >= 5:
            articles.append((doc.title, sentences))
    rng = random.Random(seed)

    def document(number: int) -> dict[str, str]:
        # Sentences of one article, drawn at random and kept in the article's
        # order: on topic, and no two documents alike (consecutive runs would
        # repeat whole passages, and ties of ten or more duplicates make
        # recall@10 against exact search meaningless).
        title, sentences = articles[rng.randrange(len(articles))]
        order = list(range(len(sentences)))
        rng.shuffle(order)
        picked, words = [], 0
        for position in order:
            picked.append(position)
            words += len(sentences[position].split())
            if words >= WORDS_PER_DOC:
                break
        text = " ".join(sentences[p] for p in sorted(picked))
        return {"id": f"d{number:07d}", "title": title, "text": text}

    # How many passages a document makes, from the first 2,000, sets the count.
    probe = [document(i) for i in range(2000)]
    per_doc = sum(
        len(chunk_or_skip(Document(d["id"], d["title"], d["text"]), 100, None) or [])
        for d in probe
    ) / len(probe)
    count = int(passages / per_doc * 1.02) + 1  # a margin: the first 2,000 are an estimate
    with open(path, "w", encoding="utf-8") as out:
        for number in range(count):
            row = probe[number] if number < len(probe) else document(number)
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return {"documents": count, "articles": len(articles), "passages_per_document": per_doc,
            "bytes": path.stat().st_size}


# -- 2. the build, killed and resumed ------------------------------------------------------


def run_build(docs: Path, index: Path, resume: bool, kill_at: int | None,
              kill_at_vectors: bool) -> dict[str, Any]:
    """One ``ceg index build`` process, killed once ``kill_at`` passages are committed or
    while it writes the vectors file (``kill_at_vectors``)."""
    cmd = [sys.executable, str(STANDIN), "index", "build", str(docs), "--index", str(index),
           "--model", NAME, "--no-lexical"]
    if resume:
        cmd.append("--resume")
    work = index.parent / f".{index.name}.building"
    started = time.perf_counter()
    proc = subprocess.Popen(with_parent(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    stderr_lines: list[str] = []
    reader = threading.Thread(target=lambda: stderr_lines.extend(proc.stderr), daemon=True)
    reader.start()
    killed = None

    def kill_when_due() -> None:
        nonlocal killed
        if killed is not None:
            return
        committed = _committed(work) if kill_at is not None else None
        if committed is not None and committed >= kill_at:
            os.kill(proc.pid, signal.SIGKILL)
            killed = (f"after {time.perf_counter() - started:.0f} s, {committed:,} passages "
                      "committed")
        elif kill_at_vectors and (work / "vectors.faiss").exists():
            time.sleep(random.uniform(0.0, 2.0))
            os.kill(proc.pid, signal.SIGKILL)
            size = (work / "vectors.faiss").stat().st_size
            killed = f"while writing vectors.faiss ({size:,} bytes written)"

    _, peak, anon_peak = watch(proc, kill_when_due)
    reader.join(timeout=5)
    committed = _committed(work)
    return {
        "resume": resume,
        "killed": killed,
        "exit": proc.returncode,
        "seconds": round(time.perf_counter() - started, 1),
        # Sampled every 0.2 s. VmHWM counts pages of mapped files too (the index
        # file being checked), which the kernel drops under pressure; anonymous
        # memory is what the build itself holds.
        "peak_rss_mib": round(peak / 1024, 1),
        "peak_anon_mib": round(anon_peak / 1024, 1),
        "committed_after": committed,
        "stderr_tail": [ln.rstrip() for ln in stderr_lines[-4:]],
    }


def _committed(work: Path) -> int | None:
    """Passages the unfinished build had committed (None: no unfinished build)."""
    store = work / "chunks.sqlite"
    if not store.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        row = db.execute("SELECT position FROM build_progress ORDER BY shard DESC LIMIT 1")
        last = row.fetchone()
        db.close()
    except sqlite3.Error:
        return None
    return json.loads(last[0])["next_id"] if last else 0


# -- 3. nothing lost or duplicated -----------------------------------------------------------


def verify(index: Path, docs: Path, corpus: dict[str, Any], seed: int) -> dict[str, Any]:
    from ceg_cli.index import embed_text, open_index
    from ceg_cli.index.build.chunking import chunk_or_skip
    from ceg_cli.index.dense.vectors import read_vectors
    from ceg_cli.types import Document

    meta = json.loads((index / "meta.json").read_text(encoding="utf-8"))
    db = sqlite3.connect(f"file:{index / 'chunks.sqlite'}?mode=ro", uri=True)
    rng = np.random.default_rng(seed)
    # A sample of documents whose passages are compared with a fresh chunking.
    wanted = set(rng.choice(corpus["documents"], 2000, replace=False).tolist())
    stored_texts: dict[int, list[str]] = {n: [] for n in wanted}
    ids_dense = True
    expected_doc, expected_ordinal, documents, problems = 0, 0, 0, []
    for number, (row_id, doc_id, ordinal, text) in enumerate(
        db.execute("SELECT id, doc_id, ordinal, text FROM chunks ORDER BY id")
    ):
        if int(doc_id[1:]) in stored_texts:
            stored_texts[int(doc_id[1:])].append(text)
        ids_dense &= row_id == number
        doc = int(doc_id[1:])
        if doc == expected_doc and ordinal == expected_ordinal:
            expected_ordinal += 1
        elif doc == expected_doc + 1 and ordinal == 0:
            expected_doc, expected_ordinal, documents = doc, 1, documents + 1
        elif len(problems) < 5:
            problems.append(f"row {row_id}: {doc_id} #{ordinal} after d{expected_doc:07d} "
                            f"#{expected_ordinal - 1}")
    documents += 1
    total = meta["counts"]["chunks"]
    rechunked_equal = 0
    with open(docs, encoding="utf-8") as fh:
        for number, line in enumerate(fh):
            if number not in wanted:
                continue
            d = json.loads(line)
            fresh = [c.text for c in chunk_or_skip(Document(d["id"], d["title"], d["text"]),
                                                    100, None) or []]
            rechunked_equal += fresh == stored_texts[number]
    # A sample of passages: the stored vector is the model's vector of the text.
    picked = np.sort(rng.choice(total, 2000, replace=False))
    model = HashedWords()
    with open_index(index) as idx:
        chunks = idx.chunks([int(i) for i in picked])
    texts = [embed_text(chunks[int(i)], meta["embed_text"]) for i in picked]
    vectors = read_vectors(index / "vectors.faiss")
    stored = np.vstack([vectors.reconstruct(int(i)) for i in picked])
    vectors_equal = int(np.sum(np.all(stored == model.embed(texts), axis=1)))
    db.close()
    return {
        "passages": total,
        "ids_dense": bool(ids_dense),
        "documents_in_order_once_each": documents if not problems else None,
        "documents_expected": corpus["documents"],
        "order_problems": problems,
        "rechunked_documents_equal": f"{rechunked_equal}/2000",
        "sampled_vectors_equal": f"{vectors_equal}/2000",
    }


# -- 4. the index: type, opening, searching, checking -------------------------------------------


def open_and_search(index: Path, seed: int) -> dict[str, Any]:
    import faiss

    from ceg_cli.check.segment import segment_response
    from ceg_cli.index.dense.vectors import read_vectors

    path = index / "vectors.faiss"
    out: dict[str, Any] = {"file_mib": round(path.stat().st_size / 2**20, 1)}
    for mmap in (True, False):
        times, grew = [], []
        for _ in range(3 if mmap else 2):
            before = rss_mib()
            t0 = time.perf_counter()
            vectors = read_vectors(path, mmap=mmap)
            times.append(time.perf_counter() - t0)
            grew.append(rss_mib() - before)
            del vectors
        key = "mmap" if mmap else "full_read"
        out[f"open_{key}_ms"] = round(1000 * float(np.median(times)), 1)
        out[f"open_{key}_rss_growth_mib"] = round(float(np.median(grew)), 1)
    index_m = read_vectors(path)
    exact_index = faiss.downcast_index(index_m.refine_index) if hasattr(
        index_m, "refine_index") else index_m
    model = HashedWords()
    segments = []
    for line in RESPONSES.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        segments += [s.text for s in segment_response(row["response"])]
    rng = np.random.default_rng(seed)
    passage_ids = np.sort(rng.choice(index_m.ntotal, 200, replace=False))
    own = np.vstack([exact_index.reconstruct(int(i)) for i in passage_ids])
    for name, queries in (("segments", model.embed(segments)), ("passages", own)):
        _, exact = exact_index.search(queries, 10)
        t0 = time.perf_counter()
        _, found = index_m.search(queries, 10)
        per_query = (time.perf_counter() - t0) / len(queries)
        hits = sum(len(set(a) & set(b)) for a, b in zip(exact.tolist(), found.tolist()))
        out[f"recall_at_10_{name}"] = round(hits / exact.size, 4)
        out[f"queries_{name}"] = len(queries)
        out[f"search_ms_{name}_batch"] = round(1000 * per_query, 2)
    out["rss_after_searches_mib"] = round(rss_mib(), 1)
    return out


def cli(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.perf_counter()
    done = subprocess.run(with_parent([sys.executable, str(STANDIN), *args]),
                          capture_output=True, text=True)
    return done, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--kills", type=int, default=3,
                        help="random kills while embedding (one more while writing vectors)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the corpus and the index")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "million_build.json")
    args = parser.parse_args()
    # Before any work: results only in benchmarks/results/, a work folder ceg made.
    args.out = results_file(args.out)
    check_workdir(args.workdir)
    with work_dir(args.workdir or cache_dir() / "million", prefix="ceg-million-") as work:
        run(args, work)


def run(args: argparse.Namespace, work: Path) -> None:
    rng = random.Random(args.seed)
    random.seed(args.seed)
    result: dict[str, Any] = {"command": command_line(), "environment": environment()}

    docs = work / f"docs-{args.passages}.jsonl"
    if not docs.exists() or not (work / f"{docs.name}.json").exists():
        log(f"writing the corpus for {args.passages:,} passages to {docs}")
        t0 = time.perf_counter()
        corpus = make_corpus(docs, args.passages, args.seed)
        corpus["seconds"] = round(time.perf_counter() - t0, 1)
        (work / f"{docs.name}.json").write_text(json.dumps(corpus), encoding="utf-8")
    corpus = json.loads((work / f"{docs.name}.json").read_text(encoding="utf-8"))
    result["corpus"] = corpus
    log(f"corpus: {corpus}")

    index = work / "index"
    shutil.rmtree(index, ignore_errors=True)
    shutil.rmtree(work / ".index.building", ignore_errors=True)
    # Kills at random points of the embedding (by passages committed), in order.
    kills = sorted(int(rng.uniform(0.02, 0.95) * args.passages) for _ in range(args.kills))
    runs: list[dict[str, Any]] = []
    resume = False
    for kill_at in kills:
        run = run_build(docs, index, resume, kill_at, False)
        log(f"run {len(runs) + 1}: {run}")
        runs.append(run)
        resume = True
        if run["exit"] == 0:
            break
    if not runs or runs[-1]["exit"] != 0:
        run = run_build(docs, index, resume, None, True)
        log(f"run {len(runs) + 1}: {run}")
        runs.append(run)
        while run["exit"] != 0 and len(runs) < args.kills + 4:
            run = run_build(docs, index, True, None, False)
            log(f"run {len(runs) + 1}: {run}")
            runs.append(run)
    result["runs"] = runs
    result["build_seconds_total"] = round(sum(r["seconds"] for r in runs), 1)
    result["peak_rss_mib_max"] = max(r["peak_rss_mib"] for r in runs)
    result["peak_anon_mib_max"] = max(r["peak_anon_mib"] for r in runs)
    if runs[-1]["exit"] != 0:
        raise SystemExit(f"the build did not finish: {runs[-1]}")

    meta = json.loads((index / "meta.json").read_text(encoding="utf-8"))
    result["faiss"] = {k: v for k, v in meta["faiss"].items() if k != "file_digest"}
    result["lexical_skipped"] = meta.get("lexical_skipped")
    log("verifying: nothing lost or duplicated")
    result["verify"] = verify(index, docs, corpus, args.seed)
    log(f"verify: {result['verify']}")
    log("opening and searching")
    result["open_search"] = open_and_search(index, args.seed)
    log(f"open/search: {result['open_search']}")
    info, seconds = cli("index", "info", "--index", str(index))
    result["index_info"] = {"exit": info.returncode, "seconds": round(seconds, 2),
                            "stdout": info.stdout.splitlines()}
    out = work / "checked.jsonl"
    checked, seconds = cli("check", str(RESPONSES), "--index", str(index), "--out", str(out),
                           "--quiet")
    result["check"] = {"exit": checked.returncode, "seconds": round(seconds, 2),
                       "stderr": checked.stderr.splitlines()[-3:],
                       "responses": sum(1 for _ in open(out, encoding="utf-8"))
                       if out.exists() else 0}
    result["driver_peak_rss_mib"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    write_json(args.out, result)
    print(json.dumps(result, indent=2))
    if not args.keep:
        shutil.rmtree(index, ignore_errors=True)


if __name__ == "__main__":
    main()
