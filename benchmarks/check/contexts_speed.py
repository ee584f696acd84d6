"""How fast ``ceg check`` runs on records' own contexts, beside the same records on an index.

    .venv/bin/python benchmarks/check/contexts_speed.py [--records 200] [--contexts 5]
        [--words 300] [--repeats 3] [--judge offline]

Cuts the enwiki sample (``sample_data/enwiki-sample.xml.bz2``) into contexts of
about ``--words`` words, gives each of ``--records`` records ``--contexts`` of
them (no context shared: the cache for repeated contexts does not help), and
an answer of five sentences: three taken from its contexts, two from another
record's. Then it checks the records two ways through ``CheckRun`` (exactly
what ``ceg check`` runs), alternating A, B, A, B:

- ``contexts``: the records as they are, no index (``--evidence auto``);
- ``index``: the same records without their contexts, against an index built
  (before the clock) from all the records' contexts as documents.

Both load the model before the clock starts. Reports segments per second of
each mode (medians) and their ratio. ``contexts`` ranks a record's passages as
``ceg check`` does by default (``--contexts-retrieval lexical``: BM25, nothing
embedded); ``contexts-dense`` ranks them by cosine, embedding every passage
(``--contexts-retrieval dense``), and ``contexts-dense-repeated`` does so when
every record has the contexts of record 0's group of ten, to show what the
cache for repeated contexts saves. ``--no-dense`` leaves the two dense runs
out (they take minutes on 2 cores).
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

SAMPLE = REPO / "sample_data" / "enwiki-sample.xml.bz2"


def contexts_from_sample(count: int, words: int) -> list[dict[str, str]]:
    """``count`` passages of about ``words`` words, from distinct stretches of the sample."""
    from ceg_cli.corpus.sources import iter_documents
    from ceg_cli.index.build.chunking import chunk_document

    out: list[dict[str, str]] = []
    for doc in iter_documents(SAMPLE):
        for chunk in chunk_document(doc, words):
            if len(chunk.text.split()) >= words // 2:
                out.append({"id": f"{doc.id}-{chunk.ordinal}", "title": doc.title,
                            "text": chunk.text})
                if len(out) == count:
                    return out
    raise SystemExit(f"the sample has only {len(out)} passages of {words} words")


def sentences(text: str) -> list[str]:
    from ceg_cli.sentences import sentence_spans

    return [text[s:e] for s, e in sentence_spans(text) if 6 <= len(text[s:e].split()) <= 40]


def make_records(contexts: list[dict[str, str]], per_record: int) -> list[dict[str, Any]]:
    groups = [contexts[i: i + per_record] for i in range(0, len(contexts), per_record)]
    records = []
    for n, group in enumerate(groups):
        own = [s for c in group for s in sentences(c["text"])][:3]
        other = [s for c in groups[(n + 1) % len(groups)] for s in sentences(c["text"])][:2]
        records.append({"id": f"r{n}", "question": group[0]["title"],
                        "response": " ".join(own + other), "contexts": group})
    return records


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def one_run(responses: Path, index: Path, out: Path, judge: str,
            ranking: str = "lexical") -> dict[str, Any]:
    from ceg_cli.check.run import CheckRun, RunSettings

    t0 = time.perf_counter()
    run = CheckRun(RunSettings.resolve(responses=str(responses), index=index, out=out,
                                       judge=judge, contexts_retrieval=ranking))
    try:
        if run.contexts is not None and run.contexts.embeds:
            run.contexts.embedder.embed(["warm up"])  # load the model before the clock
        load = time.perf_counter() - t0
        t0 = time.perf_counter()
        run.execute()
        seconds = time.perf_counter() - t0
        cache = run.contexts.cache if run.contexts is not None else None
    finally:
        run.close()
    return {
        "load_seconds": round(load, 2),
        "seconds": round(seconds, 2),
        "responses": run.summary.responses,
        "segments": run.summary.segments,
        "passages_embedded": cache.embedded if cache is not None else 0,
        "passages_reused": cache.reused if cache is not None else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--contexts", type=int, default=5)
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--judge", default="offline")
    parser.add_argument("--no-dense", action="store_true",
                        help="leave out the runs that embed every context (minutes each)")
    args = parser.parse_args()
    for name in ("records", "contexts", "words", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")

    from ceg_cli.index.build.builder import build_index
    from ceg_cli.index.build.buildopts import BuildOptions

    contexts = contexts_from_sample(args.records * args.contexts, args.words)
    records = make_records(contexts, args.contexts)
    plan = [("contexts", "with", "lexical"), ("index", "bare", "lexical")]
    if not args.no_dense:
        plan += [("contexts-dense", "with", "dense"), ("contexts-dense-repeated", "repeated",
                                                        "dense")]
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode, _, _ in plan}
    with work_dir(None, prefix="ceg-contexts-speed-") as work:
        with_contexts = write_jsonl(work / "with-contexts.jsonl", records)
        bare = write_jsonl(work / "bare.jsonl",
                           [{k: v for k, v in r.items() if k != "contexts"} for r in records])
        repeated = write_jsonl(work / "repeated.jsonl", [
            {**r, "contexts": records[(n // 10) * 10]["contexts"]}
            for n, r in enumerate(records)
        ])
        docs = write_jsonl(work / "docs.jsonl", contexts)
        log(f"building the index of {len(contexts)} contexts (not timed)")
        t0 = time.perf_counter()
        build_index([docs], work / "index", BuildOptions())
        build_seconds = time.perf_counter() - t0
        none = work / "no-index"
        files = {"with": with_contexts, "bare": bare, "repeated": repeated}
        for n in range(args.repeats):
            for mode, kind, ranking in plan:
                index = work / "index" if kind == "bare" else none
                log(f"run {n + 1} of {args.repeats}: {mode}")
                runs[mode].append(one_run(files[kind], index, work / f"out-{mode}.jsonl",
                                          args.judge, ranking))

    summary = {}
    for mode, rs in runs.items():
        seconds = median([r["seconds"] for r in rs])
        summary[mode] = {
            "responses": rs[0]["responses"],
            "segments": rs[0]["segments"],
            "seconds_median": round(seconds, 2),
            "segments_per_second": round(rs[0]["segments"] / seconds, 1),
            "passages_embedded": rs[0]["passages_embedded"],
            "passages_reused": rs[0]["passages_reused"],
        }
    ratio = round(summary["contexts"]["seconds_median"] / summary["index"]["seconds_median"], 2)
    for mode, _, ranking in plan:
        summary[mode]["contexts_retrieval"] = ranking if mode != "index" else None
    write_results("contexts_speed", {
        "command": command_line(), "environment": environment(),
        "settings": vars(args), "index_build_seconds": round(build_seconds, 1),
        "runs": runs, "summary": summary, "contexts_time_ratio_to_index": ratio,
    })
    print(f"`{command_line()}`\n")
    modes = list(summary)
    keys = list(summary["contexts"])
    print(markdown_table(["measure", *modes], [[k, *(summary[m][k] for m in modes)]
                                              for k in keys]))
    print(f"\ncontexts / index time: {ratio}x")


if __name__ == "__main__":
    main()
