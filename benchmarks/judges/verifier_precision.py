"""Int8 against float32: does quantizing the verifier's cross-encoder change its verdicts?

    .venv/bin/python benchmarks/judges/verifier_precision.py [--model ceg_cli/models/verifier]
        [--n 400]

Scores the same (claim, window) pairs, from the validation split of the
training sources, with the shipped cross-encoder in float32 and with dynamic
int8 linear layers (what ``ceg check`` uses), alternating the two in
batches so both see the same machine. Reports the agreement of P(entailment)
and of the verifier's final labels, and pairs/s of each (medians over
batches; their ratio).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import REPO, SHARED_DATA, command_line, environment, log, markdown_table, write_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=REPO / "ceg_cli" / "models" / "verifier")
    parser.add_argument("--n", type=int, default=400)
    args = parser.parse_args()

    import numpy as np

    from ceg_cli.index.dense.embedding import load_embedder
    from ceg_cli.judges.checkers.crossenc import load_cross_encoder, score_pairs
    from ceg_cli.judges.checkers.verifier import assess, load_combiner
    from ceg_cli.training.combiner import items_for
    from ceg_cli.training.dataset import VAL_CAPS, load_pairs

    caps = {k: max(1, args.n // len(VAL_CAPS)) for k in VAL_CAPS}
    pairs = load_pairs(SHARED_DATA / "train", corpus=SHARED_DATA / "wiki" / "enwiki-sample.xml.bz2",
                       split="val", caps=caps, seed=2)
    items = items_for(pairs, load_embedder(None).embed)
    combiner = load_combiner(args.model)
    models = {
        "float32": load_cross_encoder(args.model, quantize=False),
        "int8": load_cross_encoder(args.model, quantize=True),
    }
    scores: dict[str, list[float]] = {k: [] for k in models}
    rates: dict[str, list[float]] = {k: [] for k in models}
    found = {
        name: assess(
            items,
            lambda ps, t=tok, m=model: score_pairs(t, m, ps, max_length=combiner.max_length),
            window_words=combiner.window_words,
        )
        for name, (tok, model) in models.items()
    }
    windows = [(it.segment.text, m.window.text) for it, m in zip(items, found["float32"])]
    for at in range(0, len(windows), 32):
        batch = windows[at : at + 32]
        for name, (tok, model) in models.items():
            t0 = time.perf_counter()
            scores[name] += score_pairs(tok, model, batch, max_length=combiner.max_length)
            rates[name].append(len(batch) / (time.perf_counter() - t0))
    a, b = np.array(scores["float32"]), np.array(scores["int8"])
    pa = np.array([combiner.probability(m.features.values) for m in found["float32"]])
    pb = np.array([combiner.probability(m.features.values) for m in found["int8"]])
    summary = {
        "pairs": len(windows),
        "entailment, mean absolute difference": round(float(np.abs(a - b).mean()), 4),
        "entailment, largest absolute difference": round(float(np.abs(a - b).max()), 4),
        "entailment Pearson r": round(float(np.corrcoef(a, b)[0, 1]), 4),
        "entailment >= 0.5 agreement": round(float(((a >= 0.5) == (b >= 0.5)).mean()), 4),
        "verifier label agreement": round(
            float(((pa >= combiner.threshold) == (pb >= combiner.threshold)).mean()), 4
        ),
        "float32 pairs/s (median of batches)": round(statistics.median(rates["float32"]), 1),
        "int8 pairs/s (median of batches)": round(statistics.median(rates["int8"]), 1),
    }
    summary["int8 / float32 speed"] = round(
        summary["int8 pairs/s (median of batches)"]
        / summary["float32 pairs/s (median of batches)"], 2
    )
    path = write_results("verifier_precision", {
        "command": command_line(), "environment": environment(), "summary": summary,
    })
    log(f"wrote {path}")
    print(f"`{command_line()}`\n")
    print(markdown_table(["measure", "value"], [[k, v] for k, v in summary.items()]))


if __name__ == "__main__":
    main()
