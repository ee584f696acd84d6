"""``ceg index build --update`` against a full build: time, memory and disk (issue 56).

    .venv/bin/python benchmarks/build/update_speed.py [--passages 10000]
        [--models default,static-minilm,lexical] [--repeat 3] [--rounds 10]
        [--ranking static-minilm,lexical] [--results update_speed]

The corpus is real text: the sample dump's articles cut into files of about
``SECTION_WORDS`` words (a folder of Markdown-sized documents, as a docs site
has), the dump's text used again, each sentence order turned, until the folder
holds about ``--passages`` passages. For each model (``default``: the packaged
all-MiniLM-L6-v2; ``static-minilm``; ``lexical``: ``--retrieval lexical``, no
vectors), each step runs the real CLI in a subprocess whose peak memory
(``VmHWM``) is sampled:

1. a full build of the corpus (the cost every change paid before ``--update``);
2. the first update of that index after one file changed: it also records each
   document's digest (the one-time pass: every document of the changed source
   is read and chunked once);
0. (first, on a one-passage index) ``--repeat`` one-edit updates: what every
   update pays whatever the index's size (starting ceg, the model's import and
   load, chunking);
3. ``--repeat`` updates in a row after one document changed each time (their
   median); from a copy of the index, updates after 1 % and 10 % of the
   documents changed (edits, deletions and additions, 3:1:1);
4. for the ``--ranking`` models, ``--rounds`` updates of 1 % each, then a fresh
   build of the same folder: the share of ``--queries`` queries (a passage's first
   dozen words) whose top-10 is the same set of passages, per search method, and on
   an approximate index (``auto`` picks ivfpq from 50,000 passages) dense recall@10
   of the updated and of the fresh index against a flat build's exact top-10.

Disk: the index's size before and after, and the generation folder an update
writes (the most an update needs beside the index, with the generation before
it, which is kept until the next update).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    ENWIKI_SAMPLE,
    command_line,
    environment,
    log,
    markdown_table,
    run_update,
    work_dir,
    write_results,
)

SECTION_WORDS = 300
#: Words of the corpus per passage asked (a passage holds up to 100 words of whole
#: sentences: 100,000 asked at 95 gave 128,230 passages).
WORDS_PER_PASSAGE = 74


def make_corpus(folder: Path, passages: int) -> int:
    """Cut the sample dump's articles into files until about ``passages`` passages."""
    from ceg_cli.corpus import iter_documents

    sections = []
    for doc in iter_documents(ENWIKI_SAMPLE):
        words = doc.text.split()
        for start in range(0, len(words), SECTION_WORDS):
            part = words[start:start + SECTION_WORDS]
            if len(part) > 50:
                sections.append((doc.title, " ".join(part)))
    folder.mkdir(parents=True)
    made = words_total = 0
    edition = 0
    while words_total < passages * WORDS_PER_PASSAGE:
        for n, (title, text) in enumerate(sections):
            if edition:  # the same text again, its sentences in another order
                sentences = re.split(r"(?<=\.) ", text)
                text = " ".join(sentences[edition % len(sentences):] +
                                sentences[:edition % len(sentences)])
            (folder / f"e{edition}-{n:05d}.md").write_text(f"# {title}\n\n{text}\n")
            made += 1
            words_total += len(text.split())
            if words_total >= passages * WORDS_PER_PASSAGE:
                break
        edition += 1
    return made


def change(folder: Path, share: float | None, rng: random.Random, donors: list[str]) -> int:
    """Edit, delete and add documents (3:1:1): one document, or ``share`` of them."""
    files = sorted(folder.iterdir())
    count = 1 if share is None else max(1, round(len(files) * share))
    picked = rng.sample(files, count)
    for n, file in enumerate(picked):
        kind = n % 5 if count > 1 else 0
        if kind < 3:
            file.write_text(file.read_text() + "\nAn added sentence, edited by the benchmark.\n")
        elif kind == 3:
            file.unlink()
        else:
            (folder / f"added-{rng.randrange(10**9)}.md").write_text(rng.choice(donors))
    return count


def size_mib(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 2)


def generation_mib(index: Path) -> float:
    import json

    meta = json.loads((index / "meta.json").read_text())
    entry = meta.get("generation")
    return size_mib(index / entry["dir"]) if entry else 0.0


def ranking(updated: Path, fresh: Path, exact: Path | None, queries: list[str],
            lexical_only: bool) -> dict[str, Any]:
    """Top-10s of the updated index against a fresh build's, passages known by (source,
    document, ordinal), per method: the share of queries whose top-10 is the same set
    of passages, and the share whose top-10 is the same up to ties (the same scores in
    order, and the same passages above the 10th score: passages of equal score are
    ordered by id, which an update numbers otherwise, and the corpus repeats text);
    with ``exact`` (a flat build), dense recall@10 of both against it."""
    from ceg_cli.index import open_index

    Top = list[tuple[Any, tuple[str, str, int]]]

    def tops(path: Path, method: str) -> list[Top]:
        with open_index(path) as index:
            if not index.lexical_only:
                index.use_embedder(index.embedder())
            rows = index.search(queries, 10, method)
            out: list[Top] = []
            for query, row in zip(queries, rows):
                bm25 = None
                if method != "dense" and not index.lexical_only:
                    bm25 = index.lexical().scores(query)
                top: Top = []
                for h in row:
                    lex = h.bm25 if h.bm25 is not None else (
                        float(bm25[h.chunk_id]) if bm25 is not None else None)
                    key: Any = {"dense": (round(float(h.score or 0), 5),),
                                "lexical": (round(float(lex or 0), 4),),
                                "hybrid": (round(float(h.score or 0), 5),
                                           round(float(lex or 0), 4))}[method]
                    top.append((key, (h.chunk.source, h.chunk.doc_id, h.chunk.ordinal)))
                out.append(top)
            return out

    def same_up_to_ties(a: Top, b: Top) -> bool:
        if [k for k, _ in a] != [k for k, _ in b]:
            return False
        last = a[-1][0] if a else None
        return {p for k, p in a if k != last} == {p for k, p in b if k != last}

    out: dict[str, Any] = {"queries": len(queries)}
    for method in (["lexical"] if lexical_only else ["dense", "lexical", "hybrid"]):
        a, b = tops(updated, method), tops(fresh, method)
        out[f"{method}_same_top10"] = round(
            sum({p for _, p in x} == {p for _, p in y} for x, y in zip(a, b)) / len(a), 4)
        out[f"{method}_same_top10_up_to_ties"] = round(
            sum(same_up_to_ties(x, y) for x, y in zip(a, b)) / len(a), 4)
        if method == "dense" and exact is not None:
            truth = [{p for _, p in t} for t in tops(exact, "dense")]
            out["dense_recall10_updated"] = round(
                sum(len({p for _, p in x} & t) for x, t in zip(a, truth)) / (10 * len(a)), 4)
            out["dense_recall10_fresh"] = round(
                sum(len({p for _, p in y} & t) for y, t in zip(b, truth)) / (10 * len(b)), 4)
    return out


def sample_queries(index: Path, count: int, rng: random.Random) -> list[str]:
    """The first dozen words of ``count`` passages of the index, drawn at random."""
    from ceg_cli.index import open_index

    with open_index(index) as opened:
        texts = [c.text for c in opened.iter_chunks()]
    return [" ".join(t.split()[:12]) for t in rng.sample(texts, min(count, len(texts)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passages", type=int, default=10_000)
    ap.add_argument("--models", default="default,static-minilm,lexical")
    ap.add_argument("--repeat", type=int, default=3,
                    help="one-document updates in a row (their median is reported)")
    ap.add_argument("--rounds", type=int, default=10,
                    help="1 %% updates before the ranking is compared with a fresh build")
    ap.add_argument("--ranking", default="static-minilm,lexical",
                    help="models whose ranking after --rounds updates is compared")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--index-type", default="auto",
                    help="the vector index type of the models with vectors (auto: by size)")
    ap.add_argument("--results", default="update_speed")
    ap.add_argument("--seed", type=int, default=56)
    args = ap.parse_args()
    ceg = [str(Path(sys.executable).with_name("ceg"))]
    rows = []
    data: dict[str, Any] = {"command": command_line(), "environment": environment(),
                            "passages_asked": args.passages, "runs": []}
    with work_dir(None, prefix="ceg-update-speed-") as work:
        corpus = work / "corpus"
        files = make_corpus(corpus, args.passages)
        donors = [f.read_text() for f in sorted(corpus.iterdir())[:50]]
        data["documents"] = files
        log(f"corpus: {files} files")
        for model in args.models.split(","):
            flags = {"default": [], "static-minilm": ["--model", "static-minilm"],
                     "lexical": ["--retrieval", "lexical"]}[model]
            if model != "lexical" and args.index_type != "auto":
                flags += ["--index-type", args.index_type]
            rng = random.Random(args.seed)
            # Not timed: a first use that distills or loads a model into the cache.
            warm = work / f"warm-{model}"
            (warm / "docs").mkdir(parents=True)
            (warm / "docs" / "a.md").write_text("# Warm\n\nA first build loads the model.\n")
            run_update([*ceg, "index", "build", str(warm / "docs"), "--index",
                        str(warm / "i"), "-q", *flags])
            # What every update pays whatever the index's size: starting ceg, importing
            # and loading the model, chunking; a one-passage index, one edit, --repeat times.
            fixed = []
            for n in range(args.repeat):
                (warm / "docs" / "a.md").write_text(f"# Warm\n\nEdit {n} of a small file.\n")
                fixed.append(run_update([*ceg, "index", "build", str(warm / "docs"), "--index",
                                  str(warm / "i"), "-q", "--update", *flags])["seconds"])
            shutil.rmtree(warm)
            docs = work / f"docs-{model}"
            shutil.copytree(corpus, docs)
            index = work / f"index-{model}"
            build_cmd = [*ceg, "index", "build", str(docs), "-q", *flags]
            exact_cmd = [a for a in build_cmd if a not in ("--index-type", args.index_type)]
            update_cmd = [*ceg, "index", "build", str(docs), "--index", str(index), "-q",
                          "--update", *flags]
            build = run_update([*build_cmd, "--index", str(index)])
            import json

            meta = json.loads((index / "meta.json").read_text())
            record: dict[str, Any] = {
                "model": model, "passages": meta["counts"]["chunks"],
                "documents": meta["counts"]["documents"], "full_build": build,
                "index_mib": size_mib(index),
                "index_type": (meta.get("faiss") or {}).get("index_type", "none"),
                "fixed_update_seconds_median": statistics.median(fixed)}
            log(f"{model}: full build {build['seconds']} s, {record['passages']} passages, "
                f"{record['index_type']}")
            data["runs"].append(record)  # written after each step, so a stopped run keeps it
            change(docs, None, rng, donors)
            first = run_update(update_cmd)
            first["generation_mib"] = generation_mib(index)
            record["first_update_1_document"] = first
            log(f"{model}: first update {first['seconds']} s")
            write_results(args.results, data)
            # One document, --repeat times in a row on the index (each its own edit).
            singles = []
            for _ in range(args.repeat):
                change(docs, None, rng, donors)
                before = size_mib(index)
                step = run_update(update_cmd)
                step.update({"index_mib_before": before, "index_mib_after": size_mib(index),
                             "generation_mib": generation_mib(index)})
                singles.append(step)
            seconds = statistics.median(s["seconds"] for s in singles)
            record["update_1_document"] = {
                "runs": singles, "median_seconds": seconds, "documents_touched": 1,
                "share_of_full_build": round(seconds / build["seconds"], 4),
                "peak_rss_mib": max(s["peak_rss_mib"] for s in singles)}
            log(f"{model}: update 1 document: median {seconds} s of {args.repeat}")
            write_results(args.results, data)
            rows.append([model, "1 document", 1, singles[0].get("passages_embedded"),
                         seconds, build["seconds"], f"{seconds / build['seconds']:.1%}",
                         record["update_1_document"]["peak_rss_mib"],
                         singles[-1]["generation_mib"], record["index_mib"]])
            for label, share in (("1_percent", 0.01), ("10_percent", 0.10)):
                target = work / f"u-{model}-{label}"
                shutil.copytree(index, target)
                tree = work / f"d-{model}-{label}"
                shutil.copytree(docs, tree)
                changed = change(docs, share, rng, donors)
                before = size_mib(target)
                # The index names its source by path: the copy is updated from the
                # folder at the same path, then the folder is put back.
                step = run_update([*ceg, "index", "build", str(docs), "--index", str(target), "-q",
                               "--update", *flags])
                step.update({"documents_touched": changed, "index_mib_before": before,
                             "index_mib_after": size_mib(target),
                             "generation_mib": generation_mib(target),
                             "share_of_full_build": round(step["seconds"] / build["seconds"], 4)})
                record[f"update_{label}"] = step
                log(f"{model}: update {label}: {step['seconds']} s "
                    f"({step['share_of_full_build']:.1%} of a full build)")
                write_results(args.results, data)
                shutil.rmtree(target)
                shutil.rmtree(docs)
                shutil.copytree(tree, docs)
                shutil.rmtree(tree)
                rows.append([model, label.replace("_", " ").replace("percent", "%"), changed,
                             step["passages_embedded"], step["seconds"], build["seconds"],
                             f"{step['share_of_full_build']:.1%}", step["peak_rss_mib"],
                             step["generation_mib"], record["index_mib"]])
            if model in args.ranking.split(","):
                rounds = []
                for _ in range(args.rounds):
                    change(docs, 0.01, rng, donors)
                    rounds.append(run_update(update_cmd)["seconds"])
                fresh = work / f"fresh-{model}"
                fresh_build = run_update([*build_cmd, "--index", str(fresh)])
                exact = None
                if record["index_type"] not in ("flat", "none"):
                    exact = work / f"exact-{model}"
                    run_update([*exact_cmd, "--index", str(exact), "--index-type", "flat"])
                queries = sample_queries(fresh, args.queries, rng)
                record["after_rounds"] = {
                    "rounds": args.rounds, "round_seconds_median": statistics.median(rounds),
                    "fresh_build_seconds": fresh_build["seconds"],
                    "index_mib": size_mib(index), "fresh_index_mib": size_mib(fresh),
                    **ranking(index, fresh, exact, queries, model == "lexical")}
                log(f"{model}: after {args.rounds} rounds: {record['after_rounds']}")
                shutil.rmtree(fresh)
                if exact is not None:
                    shutil.rmtree(exact)
            write_results(args.results, data)
            shutil.rmtree(index)
            shutil.rmtree(docs)
    write_results(args.results, data)
    print(markdown_table(["model", "change", "documents", "passages embedded", "update s",
                          "full build s", "share", "peak MiB", "generation MiB", "index MiB"],
                         rows))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
