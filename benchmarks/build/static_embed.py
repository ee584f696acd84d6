"""How fast the static model embeds beside MiniLM (torch, onnx-int8), and what it costs to make.

```
.venv/bin/python benchmarks/build/static_embed.py [--index DIR] [--passages 1000] [--rounds 4]
    [--models default:torch,default:onnx-int8,static-minilm]
```

Reads ``--passages`` passages spread evenly over the index's chunk store (the
exact texts its build embedded: about 100 words with the title in front) and,
in ``--rounds`` slices, has every model embed each slice, the order rotating
from round to round so a change in the machine's load hits all of them. Per
model: passages/s per round, the median, and the median of its per-round
ratio to the first. The static model also embeds every passage of the index
three times (``static_all_passages_per_s``, the median): its slices take
a fraction of a second, where timer noise counts.

``first_load_s``: a model's load into an empty cache (the ONNX export and
quantization; the static model's distillation from the shipped MiniLM), then
``load_s``: a load from the cache. ``top5_overlap``: each model searching its
own vectors with its own query vectors (each article's lead sentence), the
share of the first model's top 5 it returns too. Recall on the dev sets is
``retrieval_recall.py --models default,static-minilm``.
"""

from __future__ import annotations

import argparse
import os
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
from embed_speed import lead_sentences, overlap, top_k


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, default=cache_dir() / "enwiki-sample-title+text")
    parser.add_argument("--passages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--models", default="default:torch,default:onnx-int8,static-minilm")
    parser.add_argument("--name", default="static_embed", help="results/NAME.json")
    args = parser.parse_args(argv)
    results_name(args.name, "--name")
    data = measure(args)
    data["command"] = command_line()
    data["environment"] = environment()
    path = write_results(args.name, data)
    print(render(data))
    log(f"wrote {path}")
    return 0


def _load(spec: str) -> Any:
    from ceg_cli.index.dense.embedding import load_embedder

    name, _, backend = spec.partition(":")
    return load_embedder(None if name == "default" else name, backend=backend or "torch")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    texts = read_embedded_texts(args.index)
    step = max(1, len(texts) // args.passages)
    passages = texts[::step][: args.passages]
    queries = lead_sentences(args.index)
    specs = [s for s in args.models.split(",") if s]
    log(f"{len(passages)} passages (every {step}th), {len(queries)} queries, {specs}")
    loads: dict[str, dict[str, float]] = {}
    embedders: dict[str, Any] = {}
    with work_dir(None, prefix="ceg-static-embed-") as work:
        for spec in specs:
            loads[spec] = {}
            if spec != "default:torch":
                empty = work / f"cache-{len(loads)}"
                empty.mkdir()
                os.environ["CEG_CACHE_DIR"] = str(empty)
                t0 = time.perf_counter()
                _load(spec)
                loads[spec]["first_load_s"] = round(time.perf_counter() - t0, 2)
                os.environ.pop("CEG_CACHE_DIR")
            t0 = time.perf_counter()
            embedders[spec] = _load(spec)
            loads[spec]["load_s"] = round(time.perf_counter() - t0, 2)
            embedders[spec].embed(passages[:8])  # warm-up

    import numpy as np

    slices = [passages[i :: args.rounds] for i in range(args.rounds)]
    rates: dict[str, list[float]] = {s: [] for s in specs}
    for r, part in enumerate(slices):
        for spec in specs[r % len(specs) :] + specs[: r % len(specs)]:
            t0 = time.perf_counter()
            embedders[spec].embed(part)
            rates[spec].append(len(part) / (time.perf_counter() - t0))
            log(f"round {r + 1}/{args.rounds} {spec}: {rates[spec][-1]:.1f} passages/s")
    first = specs[0]
    tops = {}
    for spec in specs:
        tops[spec] = top_k(embedders[spec].embed(queries), embedders[spec].embed(passages))
    results: dict[str, Any] = {}
    for spec in specs:
        results[spec] = {
            "model": embedders[spec].name,
            "dimension": embedders[spec].dimension,
            "rates": [round(x, 1) for x in rates[spec]],
            "median_passages_per_s": round(median(rates[spec]), 1),
            "median_ratio": round(
                median([a / b for a, b in zip(rates[spec], rates[first], strict=True)]), 2
            ),
            "top5_overlap": round(overlap(tops[first], tops[spec]), 3),
            **loads[spec],
        }
        if getattr(embedders[spec], "backend", "") == "static":
            whole = []
            for _ in range(3):
                t0 = time.perf_counter()
                embedders[spec].embed(texts)
                whole.append(len(texts) / (time.perf_counter() - t0))
            results[spec]["static_all_passages_per_s"] = round(median(whole), 1)
    words = [len(p.split()) for p in passages]
    return {
        "index": str(args.index),
        "passages": len(passages),
        "all_passages": len(texts),
        "words_per_passage_median": median(words),
        "queries": len(queries),
        "rounds": args.rounds,
        "cores": len(os.sched_getaffinity(0)),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "models": results,
        "numpy": np.__version__,
    }


def render(data: dict[str, Any]) -> str:
    rows = [
        [spec, r["dimension"], r["median_passages_per_s"], f"{r['median_ratio']:.2f}x",
         r.get("static_all_passages_per_s", ""), r.get("first_load_s", ""), r["load_s"],
         r["top5_overlap"]]
        for spec, r in data["models"].items()
    ]
    return "\n".join([
        "## Static embeddings beside MiniLM",
        "",
        f"    {data['command']}",
        "",
        markdown_table(["model:backend", "dims", "passages/s (median)", "ratio",
                        f"static, all {data['all_passages']} passages/s", "first load s",
                        "load s", "top-5 overlap"], rows),
        "",
        f"{data['passages']} passages of the index ({data['words_per_passage_median']} words "
        f"median), {data['rounds']} rounds; {data['cores']} cores, load average at the end "
        f"{data['load_average']}.",
    ])


if __name__ == "__main__":
    sys.exit(main())
