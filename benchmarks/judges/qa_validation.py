"""Cross-encoders on synthetic question-answer pairs of documents they were not trained on.

    .venv/bin/python benchmarks/judges/qa_validation.py [MODEL ...]

The validation split (by document) of ``training.qa`` pairs made from the
enwiki sample, scored by each verifier directory given (default: the shipped
one), as ``ceg check`` runs it (int8, 90-word window): balanced accuracy at
0.5 and pairwise accuracy (the right answer scored above the wrong one of the
same question). In-domain figures: set them beside ``transfer.py``'s QA
domain (HaluEval), which none of these pairs resemble by construction.
Results: ``results/qa_validation.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    SHARED_DATA,
    command_line,
    environment,
    results_name,
    write_results,
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--data", type=Path, default=SHARED_DATA)
    ap.add_argument("--results", default="qa_validation")
    args = ap.parse_args()
    results_name(args.results)  # before any work: a bare name only
    from ceg_cli.judges.checkers.crossenc import load_cross_encoder, score_pairs
    from ceg_cli.judges.checkers.verifier import SHIPPED
    from ceg_cli.training.dataset import corpus_passages, to_examples
    from ceg_cli.training.qa import make_qa_pairs
    from ceg_cli.training.sources import split_of

    corpus = args.data / "wiki" / "enwiki-sample.xml.bz2"
    pairs = [p for p in make_qa_pairs(corpus_passages(corpus), seed=0)
             if split_of(p.group) == "val"]
    examples = to_examples(pairs)
    y = np.array([label for _, _, label in examples])
    models: dict[str, dict[str, float]] = {}
    report = {"command": command_line(), "environment": environment(),
              "pairs": len(examples), "models": models}
    for model in args.models or [SHIPPED]:
        tok, ce = load_cross_encoder(model, quantize=True)
        p = np.asarray(score_pairs(tok, ce, [(c, w) for c, w, _ in examples]))
        supported = p >= 0.5
        right, wrong = p[0::2], p[1::2]  # each passage: its supported pair, then the other
        models[str(model)] = {
            "balanced_accuracy": round(100 * 0.5 * float(
                supported[y == 1].mean() + (~supported[y == 0]).mean()), 1),
            "pairwise": round(100 * float((right > wrong).mean()
                                          + 0.5 * (right == wrong).mean()), 1),
        }
        print(model, models[str(model)], flush=True)
    write_results(args.results, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
