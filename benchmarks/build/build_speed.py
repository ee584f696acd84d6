"""Index build speed: pages/s, passages/s, peak memory, and overhead over the model.

    .venv/bin/python benchmarks/build/build_speed.py [--source FILE] [--repeats N]

Each measurement runs in a fresh subprocess, so that its peak memory (the
RSS high-water mark, ``ru_maxrss`` read with ``os.wait4``) is its own and no
run inherits a warm model from another:

- **build**: load the model, then ``build_index(source)`` with that embedder,
  timed from the call to its return (model loading is reported apart). The
  embedder is wrapped to record the size and duration of every ``embed`` call
  the build makes.
- **model alone**: load the same model with the same batch size, read back the
  exact passages the build embedded (``chunks.sqlite`` in id order, through
  ``ceg_cli.index.embed_text`` with the index's ``embed_text`` mode) and encode
  them in the same call sizes as the build, in order.

Build and model-alone runs alternate (B M, M B, B M, ... so that a slow drift
of the shared machine's load hits both sides alike); with ``--repeats N`` the
table reports medians. The figure of merit is the ratio of the build's wall
time to the model-alone time, measured side by side: it says how much the
pipeline around the model costs, whatever the machine's speed. Target: <= 1.15.

``--profile`` adds single-threaded timings of the stages around the model
(read and clean, chunk, SQLite inserts, FAISS adds) to say where any overhead
comes from.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import time
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
    median,
    results_name,
    with_parent,
    write_results,
)

TARGET_RATIO = 1.15


# --------------------------------------------------------------------------- workers
# These run in the child processes; heavy imports stay inside them.


class _RecordingEmbedder:
    """Passes calls to a real embedder and records each call's size and duration."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.max_seq_length = getattr(inner, "max_seq_length", None)
        self.calls: list[int] = []
        self.spans: list[tuple[float, float]] = []  # perf_counter at each call's start, end

    @property
    def call_seconds(self) -> list[float]:
        return [end - start for start, end in self.spans]

    def embed(self, texts: Any) -> Any:
        started = time.perf_counter()
        vectors = self.inner.embed(texts)
        self.spans.append((started, time.perf_counter()))
        self.calls.append(len(texts))
        return vectors


def _torch_info() -> dict[str, Any]:
    import torch

    return {"torch_threads": torch.get_num_threads(), "torch_version": torch.__version__}


def worker_build(args: argparse.Namespace) -> dict[str, Any]:
    from ceg_cli.index.build import builder
    from ceg_cli.index.build.builder import BuildOptions, build_index
    from ceg_cli.index.dense.embedding import load_embedder

    # When the producer thread has read the last document: until then it
    # competes with the model for the CPU and the GIL.
    read_done: list[float] = []
    iter_documents = builder.iter_documents

    def timed_documents(*a: Any, **k: Any) -> Any:
        yield from iter_documents(*a, **k)
        read_done.append(time.perf_counter())

    builder.iter_documents = timed_documents  # type: ignore[assignment]
    t0 = time.perf_counter()
    embedder = _RecordingEmbedder(load_embedder(None, batch_size=args.batch_size))
    load_seconds = time.perf_counter() - t0
    options = BuildOptions(embed_text=args.embed_text, batch_size=args.batch_size)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t1 = time.perf_counter()
    report = build_index([Path(args.source)], Path(args.target), options, embedder=embedder)
    t2 = time.perf_counter()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    spans = embedder.spans
    return {
        "load_seconds": load_seconds,
        "build_seconds": t2 - t1,
        "embed_seconds_in_build": sum(embedder.call_seconds),
        # Where the time outside the model goes: before the first call (reading
        # and chunking the first batch), between calls (storing a batch, waiting
        # for the next), after the last (writing and swapping the index in).
        "head_seconds": spans[0][0] - t1 if spans else 0.0,
        "between_calls_seconds": sum(b[0] - a[1] for a, b in zip(spans, spans[1:])),
        "tail_seconds": t2 - spans[-1][1] if spans else 0.0,
        "producer_done_seconds": read_done[-1] - t1 if read_done else None,
        "documents": report.documents,
        "passages": report.chunks,
        "calls": embedder.calls,
        "call_seconds": embedder.call_seconds,
        "cpu_seconds": (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime),
        **_torch_info(),
    }


def read_embedded_texts(index: Path) -> list[str]:
    """The exact texts a build embedded, in the order it embedded them."""
    from ceg_cli.index import embed_text
    from ceg_cli.types import Chunk

    meta = json.loads((index / "meta.json").read_text(encoding="utf-8"))
    db = sqlite3.connect(f"file:{(index / 'chunks.sqlite').as_posix()}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT doc_id, title, ordinal, start, end, text, url, source FROM chunks ORDER BY id"
        ).fetchall()
    finally:
        db.close()
    return [embed_text(Chunk(*row), meta["embed_text"]) for row in rows]


def worker_encode(args: argparse.Namespace) -> dict[str, Any]:
    from ceg_cli.index.dense.embedding import load_embedder

    t0 = time.perf_counter()
    embedder = load_embedder(None, batch_size=args.batch_size)
    load_seconds = time.perf_counter() - t0
    texts = read_embedded_texts(Path(args.index))
    calls: list[int] = json.loads(args.calls) if args.calls else [len(texts)]
    if sum(calls) != len(texts):
        raise SystemExit(f"call sizes add up to {sum(calls)}, the index holds {len(texts)}")
    call_seconds: list[float] = []
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t1 = time.perf_counter()
    at = 0
    for size in calls:
        started = time.perf_counter()
        embedder.embed(texts[at : at + size])
        call_seconds.append(time.perf_counter() - started)
        at += size
    encode_seconds = time.perf_counter() - t1
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "load_seconds": load_seconds,
        "encode_seconds": encode_seconds,
        "passages": len(texts),
        "calls": calls,
        "call_seconds": call_seconds,
        "cpu_seconds": (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime),
        **_torch_info(),
    }


# --------------------------------------------------------------------------- parent


def run_child(worker_args: list[str]) -> dict[str, Any]:
    """Run this script as a worker; return its JSON result plus wall time and peak RSS."""
    out = cache_dir() / f"worker-{os.getpid()}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), *worker_args, "--out", str(out)]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    # The workers' progress bars (model loading) would only clutter stderr.
    env = {**os.environ, "TQDM_DISABLE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    proc = subprocess.Popen(with_parent(cmd), env=env)
    # os.wait4 (not Popen.wait) to get the child's own rusage: ru_maxrss of
    # RUSAGE_CHILDREN would be the maximum over every child so far.
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"worker failed with exit code {proc.returncode}: {' '.join(cmd)}")
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    out.unlink()
    result["process_seconds"] = wall
    result["peak_rss_mb"] = usage.ru_maxrss / 1024.0  # Linux reports KiB
    result["load_before"] = load_before
    result["load_after"] = os.getloadavg()[0]
    return result


def worker_contention(args: argparse.Namespace) -> dict[str, Any]:
    """The model on the build's first call, alone and with the producer's work beside it.

    In one process, alternating A B, B A, ... so that the machine's load
    drifts little between the two: does reading and chunking in a thread
    (as ``builder`` does while the model runs) slow the model down?
    """
    import threading

    from ceg_cli.corpus import iter_documents
    from ceg_cli.index.build.chunking import chunk_document
    from ceg_cli.index.dense.embedding import load_embedder

    embedder = load_embedder(None, batch_size=args.batch_size)
    texts = read_embedded_texts(Path(args.index))[: json.loads(args.calls)[0]]
    embedder.embed(texts[:64])  # first-call warm-up, outside the timings

    def producer_work() -> None:
        for doc in iter_documents(Path(args.source)):
            chunk_document(doc, 100)

    def encode(with_producer: bool) -> tuple[float, float]:
        worker = threading.Thread(target=producer_work) if with_producer else None
        started = time.perf_counter()
        if worker:
            worker.start()
        embedder.embed(texts)
        encode_seconds = time.perf_counter() - started
        if worker:
            worker.join()
        return encode_seconds, time.perf_counter() - started

    alone: list[float] = []
    beside: list[float] = []
    producer: list[float] = []
    for i in range(args.repeats):
        for with_producer in (False, True) if i % 2 == 0 else (True, False):
            encode_seconds, both = encode(with_producer)
            (beside if with_producer else alone).append(encode_seconds)
            if with_producer:
                producer.append(both)
    return {
        "passages": len(texts),
        "alone_seconds": alone,
        "with_producer_seconds": beside,
        "producer_and_encode_seconds": producer,
        **_torch_info(),
    }


def profile_stages(source: Path, embed_mode: str) -> dict[str, float]:
    """Single-threaded costs of everything the build does around the model."""
    import faiss
    import numpy as np

    from ceg_cli.corpus import iter_documents
    from ceg_cli.index import CHUNK_SCHEMA, embed_text
    from ceg_cli.index.build.chunking import chunk_document

    t0 = time.perf_counter()
    docs = list(iter_documents(source))
    read_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    chunks = [c for d in docs for c in chunk_document(d, 100)]
    chunk_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    texts = [embed_text(c, embed_mode) for c in chunks]
    text_seconds = time.perf_counter() - t0
    db = sqlite3.connect(":memory:")
    db.executescript(CHUNK_SCHEMA)
    t0 = time.perf_counter()
    db.executemany(
        "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (i, c.doc_id, c.title, c.ordinal, c.start, c.end, c.text, c.url, c.source)
            for i, c in enumerate(chunks)
        ),
    )
    db.commit()
    sqlite_seconds = time.perf_counter() - t0
    db.close()
    vectors = np.random.default_rng(0).standard_normal((len(chunks), 384), dtype=np.float32)
    index = faiss.IndexFlatIP(384)
    t0 = time.perf_counter()
    for at in range(0, len(chunks), 1024):
        index.add(vectors[at : at + 1024])
    faiss_seconds = time.perf_counter() - t0
    words = [len(t.split()) for t in texts]
    return {
        "read_clean_seconds": read_seconds,
        "chunk_seconds": chunk_seconds,
        "embed_text_seconds": text_seconds,
        "sqlite_insert_seconds": sqlite_seconds,
        "faiss_add_seconds": faiss_seconds,
        "documents": len(docs),
        "passages": len(chunks),
        "mean_words_per_passage": sum(words) / len(words),
        "max_words_per_passage": max(words),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=ENWIKI_SAMPLE)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--embed-text", default="title+text", choices=["title+text", "text"])
    parser.add_argument("--profile", action="store_true", help="also time the stages alone")
    parser.add_argument(
        "--one-call",
        action="store_true",
        help="also time the model alone on all passages in one embed call (once)",
    )
    parser.add_argument("--name", default="build_speed", help="results/NAME.json")
    parser.add_argument(
        "--report",
        type=Path,
        metavar="RESULTS_JSON",
        help="print the report of an earlier results file again; measure nothing",
    )
    # Internal: the subprocess workers.
    parser.add_argument(
        "--worker", choices=["build", "encode", "contention"], help=argparse.SUPPRESS
    )
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--index", help=argparse.SUPPRESS)
    parser.add_argument("--calls", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    results_name(args.name, "--name")  # before any work: a bare name only

    if args.worker:
        workers = {"build": worker_build, "encode": worker_encode, "contention": worker_contention}
        result = workers[args.worker](args)
        Path(args.out).write_text(json.dumps(result), encoding="utf-8")
        return 0
    if args.report:
        data = json.loads(args.report.read_text(encoding="utf-8"))
        data["summary"] = summarize(
            data["builds"],
            data["model_alone"],
            data.get("model_alone_one_call"),
            data.get("contention"),
        )
        print(render(data))
        return 0
    return measure(args)


def measure(args: argparse.Namespace) -> int:
    source = args.source.resolve()
    target = cache_dir() / f"enwiki-sample-{args.embed_text}"
    common = ["--batch-size", str(args.batch_size)]
    builds: list[dict[str, Any]] = []
    alone: list[dict[str, Any]] = []
    env_before = environment()

    def build() -> None:
        log(f"build {len(builds) + 1}/{args.repeats} ...")
        builds.append(
            run_child(
                ["--worker", "build", "--source", str(source), "--target", str(target)]
                + ["--embed-text", args.embed_text, *common]
            )
        )
        log(f"  {builds[-1]['build_seconds']:.1f} s")

    def model_alone() -> None:
        log(f"model alone {len(alone) + 1}/{args.repeats} ...")
        calls = json.dumps(builds[0]["calls"])
        alone.append(
            run_child(["--worker", "encode", "--index", str(target), "--calls", calls, *common])
        )
        log(f"  {alone[-1]['encode_seconds']:.1f} s")

    for i in range(args.repeats):
        # B M, then M B, B M, ...: the first build must come first (it writes the
        # passages the model-alone run reads back).
        order = (build, model_alone) if i % 2 == 0 else (model_alone, build)
        for step in order:
            step()
    if len({tuple(b["calls"]) for b in builds}) != 1:
        raise SystemExit("builds made different embed calls; the comparison would be unfair")

    one_call = None
    if args.one_call:
        log("model alone, one call ...")
        one_call = _strip(run_child(["--worker", "encode", "--index", str(target), *common]))
        log(f"  {one_call['encode_seconds']:.1f} s")
    stages = contention = None
    if args.profile:
        stages = profile_stages(source, args.embed_text)
        log("model with and without the producer's work beside it ...")
        calls = json.dumps(builds[0]["calls"])
        contention = run_child(
            ["--worker", "contention", "--index", str(target), "--source", str(source)]
            + ["--calls", calls, "--repeats", str(args.repeats), *common]
        )
    stored_builds = [_strip(b) for b in builds]
    stored_alone = [_strip(a) for a in alone]
    data = {
        "command": command_line(),
        "source": str(source),
        "embed_text": args.embed_text,
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "target_ratio": TARGET_RATIO,
        "comparison": "model alone encodes the build's passages in the build's call sizes",
        "summary": summarize(stored_builds, stored_alone, one_call, contention),
        "builds": stored_builds,
        "model_alone": stored_alone,
        "model_alone_one_call": one_call,
        "stages_single_threaded": stages,
        "contention": _rounded(contention),
        "environment_before": env_before,
        "environment_after": environment(),
    }
    path = write_results(args.name, data)
    print(render(data))
    print(f"\nresults: {path}")
    return 0


def _strip(run: dict[str, Any]) -> dict[str, Any]:
    """A run as stored: call sizes summarised, durations rounded."""
    calls = run["calls"]
    kept = {k: v for k, v in run.items() if k not in ("calls", "call_seconds")}
    kept["embed_calls"] = {"count": len(calls), "min": min(calls), "max": max(calls)}
    return _rounded(kept)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def summarize(
    builds: list[dict[str, Any]],
    alone: list[dict[str, Any]],
    one_call: dict[str, Any] | None = None,
    contention: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Medians over runs (as stored by ``_strip``) and the ratios derived from them."""

    def med(runs: list[dict[str, Any]], key: str) -> float:
        return median([r[key] for r in runs])

    build_s = med(builds, "build_seconds")
    alone_s = med(alone, "encode_seconds")
    outside = median([b["build_seconds"] - b["embed_seconds_in_build"] for b in builds])
    passages = builds[0]["passages"]
    documents = builds[0]["documents"]
    summary: dict[str, Any] = {
        "documents": documents,
        "passages": passages,
        "embed_calls": builds[0]["embed_calls"]["count"],
        "build_seconds": round(build_s, 2),
        "build_seconds_range": [
            min(b["build_seconds"] for b in builds),
            max(b["build_seconds"] for b in builds),
        ],
        "model_alone_seconds": round(alone_s, 2),
        "model_alone_seconds_range": [
            min(a["encode_seconds"] for a in alone),
            max(a["encode_seconds"] for a in alone),
        ],
        "ratio_build_to_model": round(build_s / alone_s, 3),
        # A pair ran back to back, so its ratio is the least exposed to drift.
        "ratio_per_pair": [
            round(b["build_seconds"] / a["encode_seconds"], 3) for b, a in zip(builds, alone)
        ],
        "embed_seconds_in_build": round(med(builds, "embed_seconds_in_build"), 2),
        "ratio_embed_in_build_to_model": round(med(builds, "embed_seconds_in_build") / alone_s, 3),
        "outside_embed_seconds_in_build": round(outside, 2),
        # Within one run, so untouched by the load of other runs: the share of
        # the build's wall time spent outside the model.
        "outside_embed_share": round(outside / build_s, 4),
        "head_seconds": round(med(builds, "head_seconds"), 2),
        "between_calls_seconds": round(med(builds, "between_calls_seconds"), 2),
        "tail_seconds": round(med(builds, "tail_seconds"), 2),
        "pages_per_second": round(documents / build_s, 3),
        "passages_per_second": round(passages / build_s, 2),
        "model_alone_passages_per_second": round(passages / alone_s, 2),
        "peak_rss_mb_build": round(max(b["peak_rss_mb"] for b in builds), 1),
        "peak_rss_mb_model_alone": round(max(a["peak_rss_mb"] for a in alone), 1),
        "model_load_seconds": round(med(builds, "load_seconds"), 2),
        "cpu_seconds_build": round(med(builds, "cpu_seconds"), 1),
        "cpu_seconds_model_alone": round(med(alone, "cpu_seconds"), 1),
        # CPU time hardly depends on what else runs on a shared machine (wall
        # time does), so this ratio is the steadier measure of extra work.
        "cpu_ratio_build_to_model": round(
            med(builds, "cpu_seconds") / med(alone, "cpu_seconds"), 3
        ),
        # Cores this run actually got (CPU time / wall time): when it differs
        # between runs of identical work, other users' load is the cause.
        "cpu_share_per_build": [round(b["cpu_seconds"] / b["build_seconds"], 2) for b in builds],
        "cpu_share_per_model_alone": [
            round(a["cpu_seconds"] / a["encode_seconds"], 2) for a in alone
        ],
        "torch_threads": builds[0]["torch_threads"],
        "meets_target": build_s / alone_s <= TARGET_RATIO,
    }
    done = [b["producer_done_seconds"] for b in builds if b.get("producer_done_seconds")]
    if done:
        summary["producer_done_seconds"] = round(median(done), 2)
    if contention is not None:
        solo = median(contention["alone_seconds"])
        beside = median(contention["with_producer_seconds"])
        extra = beside - solo
        # The model's whole job, timed in the same process as the A/B pair,
        # extrapolated from the first call by passage count.
        model_total = solo * passages / contention["passages"]
        summary |= {
            "contention_passages": contention["passages"],
            "contention_alone_seconds": round(solo, 2),
            "contention_with_producer_seconds": round(beside, 2),
            "contention_pairs": [
                round(b / a, 3)
                for a, b in zip(contention["alone_seconds"], contention["with_producer_seconds"])
            ],
            "contention_extra_seconds": round(extra, 2),
            # Built from within-process measurements only (the share of the
            # build outside the model, and the A/B above), so the load of other
            # users, which swamps the cross-run ratio, mostly cancels.
            "ratio_estimate_within_process": round(
                1 + outside / build_s + max(extra, 0.0) / model_total, 3
            ),
        }
    if one_call is not None:
        summary["model_alone_one_call_seconds"] = round(one_call["encode_seconds"], 2)
        summary["ratio_build_to_model_one_call"] = round(build_s / one_call["encode_seconds"], 3)
        summary["cpu_seconds_model_alone_one_call"] = round(one_call["cpu_seconds"], 1)
    return summary


def render(data: dict[str, Any]) -> str:
    s = data["summary"]
    n = data["repeats"]
    how = f"median of {n}" if n > 1 else "one run"
    rng = "" if n == 1 else " (range {:.0f} to {:.0f})"
    rows: list[list[Any]] = [
        ["documents (pages) indexed", s["documents"]],
        ["passages", s["passages"]],
        ["embed calls in the build (the model-alone runs use the same sizes)", s["embed_calls"]],
        [
            f"build wall time, s, {how}",
            f"{s['build_seconds']:.1f}" + rng.format(*s["build_seconds_range"]),
        ],
        [
            f"model alone wall time, s, {how}",
            f"{s['model_alone_seconds']:.1f}" + rng.format(*s["model_alone_seconds_range"]),
        ],
        [
            f"**ratio build / model alone** (target <= {data['target_ratio']})",
            f"**{s['ratio_build_to_model']:.3f}**",
        ],
        ["ratio per back-to-back pair", ", ".join(f"{r:.3f}" for r in s["ratio_per_pair"])],
        [
            "cores obtained (CPU / wall) per build",
            ", ".join(f"{x:.2f}" for x in s["cpu_share_per_build"]),
        ],
        [
            "cores obtained (CPU / wall) per model-alone run",
            ", ".join(f"{x:.2f}" for x in s["cpu_share_per_model_alone"]),
        ],
        [
            "CPU time build / model alone, s",
            f"{s['cpu_seconds_build']:.0f} / {s['cpu_seconds_model_alone']:.0f}",
        ],
        ["**CPU-time ratio build / model alone**", f"**{s['cpu_ratio_build_to_model']:.3f}**"],
        [
            "build time outside embed calls, s (share of the build)",
            f"{s['outside_embed_seconds_in_build']:.1f} ({100 * s['outside_embed_share']:.1f} %)",
        ],
        [
            "  ... before the first call / between calls / after the last, s",
            f"{s['head_seconds']:.1f} / {s['between_calls_seconds']:.1f} / {s['tail_seconds']:.1f}",
        ],
        [
            "time inside embed calls during the build / model alone",
            f"{s['embed_seconds_in_build']:.1f} s / {s['model_alone_seconds']:.1f} s"
            f" = {s['ratio_embed_in_build_to_model']:.3f}",
        ],
    ]
    if "producer_done_seconds" in s:
        rows.append(
            ["producer thread read its last document at, s", f"{s['producer_done_seconds']:.1f}"]
        )
    if "contention_extra_seconds" in s:
        rows += [
            [
                f"model on the first call's {s['contention_passages']} passages, alone / "
                "with the producer's work in a thread (one process, A/B alternated), s",
                f"{s['contention_alone_seconds']:.1f} / {s['contention_with_producer_seconds']:.1f}"
                f" (per pair: {', '.join(f'{r:.3f}' for r in s['contention_pairs'])})",
            ],
            [
                "**ratio estimated from within-process parts** "
                "(1 + outside share + contention / model time)",
                f"**{s['ratio_estimate_within_process']:.3f}**",
            ],
        ]
    if "model_alone_one_call_seconds" in s:
        rows += [
            [
                "model alone, every passage in one call: wall / CPU, s (one run)",
                f"{s['model_alone_one_call_seconds']:.1f} / "
                f"{s['cpu_seconds_model_alone_one_call']:.0f}",
            ],
            ["ratio build / model alone in one call", f"{s['ratio_build_to_model_one_call']:.3f}"],
        ]
    rows += [
        ["pages/s (build)", f"{s['pages_per_second']:.2f}"],
        [
            "passages/s (build / model alone)",
            f"{s['passages_per_second']:.1f} / {s['model_alone_passages_per_second']:.1f}",
        ],
        [
            "peak RSS, MB (build / model alone)",
            f"{s['peak_rss_mb_build']:.0f} / {s['peak_rss_mb_model_alone']:.0f}",
        ],
        ["model load, s (not in the build time)", f"{s['model_load_seconds']:.1f}"],
        ["torch threads", s["torch_threads"]],
    ]
    parts = [
        f"## Index build speed: {Path(data['source']).name}, embed_text={data['embed_text']}",
        "",
        f"    {data['command']}",
        "",
        markdown_table(["measure", "value"], rows),
    ]
    stages = data.get("stages_single_threaded")
    if stages:
        parts += [
            "",
            "Stages around the model, single-threaded, no model running:",
            "",
            markdown_table(
                ["stage", "seconds"],
                [
                    ["read + clean (iter_documents)", f"{stages['read_clean_seconds']:.2f}"],
                    ["chunk (chunk_document)", f"{stages['chunk_seconds']:.2f}"],
                    ["embed_text", f"{stages['embed_text_seconds']:.3f}"],
                    ["SQLite inserts", f"{stages['sqlite_insert_seconds']:.3f}"],
                    ["FAISS adds", f"{stages['faiss_add_seconds']:.3f}"],
                ],
            ),
        ]
    load = data["environment_before"]["load_average"], data["environment_after"]["load_average"]
    parts += ["", f"load average (1, 5, 15 min) before / after: {load[0]} / {load[1]}"]
    return "\n".join(parts)


if __name__ == "__main__":
    sys.exit(main())
