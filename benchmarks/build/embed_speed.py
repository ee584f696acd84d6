"""How fast each embedding backend is, and how closely it agrees with the float model.

```
.venv/bin/python benchmarks/build/embed_speed.py [--index DIR] [--passages 2000] [--rounds 4]
    [--backends torch,onnx,onnx-int8] [--device cpu] [--batch-size 64] [--queries 100]
```

Reads ``--passages`` passages spread evenly over the index's chunk store (the
exact texts its build embedded) and, in ``--rounds`` slices, has every backend
embed each slice, the order of the backends rotating from round to round so a
change in the machine's load hits all of them. Per backend: passages/s per
round, the median, and the median of its per-round ratio to ``torch``.

Agreement with the float ``torch`` model, on the same passages:

- **cosine** between the two vectors of each passage (min, 1st percentile, median);
- **top-5 overlap**: queries are the first sentence of each article's first
  passage; each backend searches its own vectors of the passages; the share of
  the float model's top 5 that the backend also returns, averaged. A second
  figure, "float queries", searches the backend's passage vectors with queries
  embedded by the float model: what ``ceg check`` does when the index was built
  with an ONNX backend on a machine that lacks ``onnxruntime``.

Load time is reported twice for the ONNX backends: the first load (export to
ONNX, and int8 quantization, into an empty cache) and a cached load.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (
    cache_dir,
    command_line,
    environment,
    log,
    markdown_table,
    median,
    results_name,
    work_dir,
    write_results,
)
from build_speed import read_embedded_texts

TOP = 5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, default=cache_dir() / "enwiki-sample-index")
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--backends", default="torch,onnx,onnx-int8")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--model", default=None, help="default: the shipped model")
    parser.add_argument("--name", default="embed_speed", help="results/NAME.json")
    args = parser.parse_args(argv)
    results_name(args.name, "--name")  # before any work: a bare name only
    data = measure(args)
    data["command"] = command_line()
    data["environment"] = environment()
    path = write_results(args.name, data)
    print(render(data))
    log(f"wrote {path}")
    return 0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import torch

    from ceg_cli.index.dense.embedding import load_embedder

    texts = read_embedded_texts(args.index)
    step = max(1, len(texts) // args.passages)
    passages = texts[::step][: args.passages]
    queries = lead_sentences(args.index)[: args.queries]
    backends = args.backends.split(",")
    log(f"{len(passages)} passages (every {step}th), {len(queries)} queries, {backends}")

    loads: dict[str, dict[str, float]] = {}
    embedders = {}
    with work_dir(None, prefix="ceg-embed-speed-") as work:
        empty = work / "cache"  # beside the work folder's marker: a cache with nothing in it
        empty.mkdir()
        for name in backends:
            loads[name] = {}
            if name != "torch":
                # First load: export (and quantize) into an empty cache.
                os.environ["CEG_CACHE_DIR"] = str(empty)
                t0 = time.perf_counter()
                load_embedder(args.model, backend=name, device=args.device)
                loads[name]["first_load_s"] = time.perf_counter() - t0
                os.environ.pop("CEG_CACHE_DIR")
            # Cached load (the model's weights are in memory by now for all of them).
            t0 = time.perf_counter()
            embedders[name] = load_embedder(
                args.model, backend=name, device=args.device, batch_size=args.batch_size
            )
            loads[name]["load_s"] = time.perf_counter() - t0
            embedders[name].embed(passages[:8])  # warm-up

    slices = [passages[i :: args.rounds] for i in range(args.rounds)]
    rates: dict[str, list[float]] = {name: [] for name in backends}
    parts: dict[str, list[Any]] = {name: [] for name in backends}
    for r, part in enumerate(slices):
        order = backends[r % len(backends) :] + backends[: r % len(backends)]
        for name in order:
            t0 = time.perf_counter()
            parts[name].append(embedders[name].embed(part))
            if args.device == "cuda":
                torch.cuda.synchronize()
            rates[name].append(len(part) / (time.perf_counter() - t0))
            log(f"round {r + 1}/{args.rounds} {name}: {rates[name][-1]:.1f} passages/s")
    # Back in passage order: slice i holds passages i, i + rounds, ...
    vectors = {}
    for name in backends:
        full = np.zeros((len(passages), embedders[name].dimension), dtype=np.float32)
        for i, block in enumerate(parts[name]):
            full[i :: args.rounds] = block
        vectors[name] = full

    reference = backends[0]
    query_vecs = {name: embedders[name].embed(queries) for name in backends}
    ref_top = top_k(query_vecs[reference], vectors[reference])
    results = {}
    for name in backends:
        cos = (vectors[name] * vectors[reference]).sum(axis=1)
        results[name] = {
            "rates": [round(x, 2) for x in rates[name]],
            "median_rate": round(median(rates[name]), 2),
            "median_ratio": round(
                median([a / b for a, b in zip(rates[name], rates[reference], strict=True)]), 3
            ),
            "cosine_min": round(float(cos.min()), 5),
            "cosine_p1": round(float(np.percentile(cos, 1)), 5),
            "cosine_median": round(float(np.median(cos)), 5),
            "top5_overlap": overlap(ref_top, top_k(query_vecs[name], vectors[name])),
            "top5_overlap_float_queries": overlap(
                ref_top, top_k(query_vecs[reference], vectors[name])
            ),
            **{k: round(v, 2) for k, v in loads[name].items()},
        }
    return {
        "index": str(args.index),
        "passages": len(passages),
        "queries": len(queries),
        "rounds": args.rounds,
        "batch_size": args.batch_size,
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "reference": reference,
        "backends": results,
        "chunk_store_bytes_per_passage": chunk_store_bytes(args.index),
    }


def lead_sentences(index: Path) -> list[str]:
    """The first sentence of each article's first passage, in the chunk store's order."""
    db = sqlite3.connect(f"file:{(index / 'chunks.sqlite').as_posix()}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT text FROM chunks WHERE ordinal = 0 ORDER BY id").fetchall()
    finally:
        db.close()
    leads = [re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0] for (text,) in rows]
    return [lead for lead in leads if len(lead.split()) >= 4]


def chunk_store_bytes(index: Path) -> float:
    db = sqlite3.connect(f"file:{(index / 'chunks.sqlite').as_posix()}?mode=ro", uri=True)
    try:
        (count,) = db.execute("SELECT count(*) FROM chunks").fetchone()
    finally:
        db.close()
    return round((index / "chunks.sqlite").stat().st_size / max(count, 1), 1)


def top_k(queries: Any, passages: Any) -> Any:
    import numpy as np

    scores = queries @ passages.T
    return np.argsort(-scores, axis=1)[:, :TOP]


def overlap(reference: Any, other: Any) -> float:
    shared = [len(set(a) & set(b)) / TOP for a, b in zip(reference, other, strict=True)]
    return round(sum(shared) / max(len(shared), 1), 4)


def render(data: dict[str, Any]) -> str:
    rows = []
    for name, r in data["backends"].items():
        rows.append([
            name,
            f"{r['median_rate']:.1f}",
            f"{r['median_ratio']:.2f}",
            f"{r['cosine_min']:.4f} / {r['cosine_median']:.4f}",
            f"{r['top5_overlap']:.3f}",
            f"{r['top5_overlap_float_queries']:.3f}",
            f"{r.get('first_load_s', r['load_s']):.1f} / {r['load_s']:.1f}",
        ])
    return "\n".join([
        f"# Embedding backends ({data['passages']} passages, {data['queries']} queries, "
        f"{data['rounds']} rounds, device {data['device_name']}, "
        f"{data['torch_threads']} torch threads)",
        "",
        f"`{data['command']}`",
        "",
        markdown_table(
            ["backend", "passages/s (median)", "ratio to torch (median)",
             "cosine min / median", "top-5 overlap", "top-5 overlap, float queries",
             "load s (first / cached)"],
            rows,
        ),
        "",
        f"chunk store: {data['chunk_store_bytes_per_passage']} bytes per passage",
    ])


if __name__ == "__main__":
    sys.exit(main())
