"""Fit and calibrate the verifier's combiner (stage 2 of 2; stage 1 is train_verifier.py).

    .venv/bin/python scripts/fit_verifier.py --data ../shared/data --model work/verifier-ce \
        [--results benchmarks/results/verifier_validation.json]

On the validation split of the training sources (never on a test set): cuts
each pair's evidence into passages, retrieves among them as ``ceg check``
would, computes the judge's features with the trained cross-encoder, fits the
logistic regression and writes ``combiner.json`` into the model directory.
Reports, per source, the lexical judge, the cross-encoder alone and the
combination (5-fold cross-validation by document on the validation split),
leave-one-source-out for the combiner, every synthetic perturbation type, and
the two held-out test-only sources, which nothing here is fitted on.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from sklearn.model_selection import GroupKFold

from ceg_cli.index.dense.embedding import load_embedder
from ceg_cli.judges.checkers.crossenc import load_cross_encoder, score_pairs
from ceg_cli.judges.checkers.features import FEATURES
from ceg_cli.judges.checkers.verifier import COMBINER_FILE
from ceg_cli.training.combiner import evaluate, featurize, fit, items_for
from ceg_cli.training.dataset import VAL_CAPS, counts, held_out_pairs, load_pairs


def lexical_score(X: np.ndarray) -> np.ndarray:
    """The offline judge's score for AUC-PR: its verdict, ties broken by its shares."""
    col = FEATURES.index
    return (
        0.5 * X[:, col("lexical_support")]
        + 0.25 * X[:, col("coverage")]
        + 0.25 * X[:, col("specifics_found")]
    )


def entailment_of(X: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-X[:, FEATURES.index("entailment_logit")]))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument(
        "--results", type=Path, default=Path("benchmarks/results/verifier_validation.json")
    )
    ap.add_argument("--held-out-cap", type=int, default=1500)
    ap.add_argument("--no-quantize", action="store_true")
    ap.add_argument("--val-cap", type=int, default=None, help="pairs per source (smoke runs)")
    args = ap.parse_args()
    t0 = time.monotonic()
    caps = {k: args.val_cap or v for k, v in VAL_CAPS.items()}

    val = load_pairs(
        args.data / "train",
        corpus=args.data / "wiki" / "enwiki-sample.xml.bz2",
        split="val",
        caps=caps,
        seed=1,
    )
    held = held_out_pairs(args.data / "train")
    rng = np.random.default_rng(0)
    for name, pairs in held.items():
        if len(pairs) > args.held_out_cap:
            keep = sorted(rng.choice(len(pairs), args.held_out_cap, replace=False).tolist())
            held[name] = [pairs[i] for i in keep]
    shown = ", ".join(f"{k} {len(v)}" for k, v in held.items())
    log(f"{len(val)} validation pairs; held out: {shown}")

    embedder = load_embedder(None)
    # The cross-encoder as ``ceg check`` runs it (int8 unless --no-quantize).
    quantize = not args.no_quantize
    tok, model = load_cross_encoder(args.model, quantize=quantize)

    def entailment(pairs: list[tuple[str, str]]) -> list[float]:
        return score_pairs(tok, model, pairs)

    def features_of(pairs: list) -> np.ndarray:
        return np.asarray(featurize(items_for(pairs, embedder.embed), entailment))

    X = features_of(val)
    y = np.array([p.label for p in val])
    src = [p.source for p in val]
    groups = [p.group for p in val]
    log(f"validation features in {time.monotonic() - t0:.0f} s")

    ent = entailment_of(X)
    lex = X[:, FEATURES.index("lexical_support")]
    lex_score = lexical_score(X)

    cv = np.zeros(len(y))
    for tr, te in GroupKFold(n_splits=5).split(X, y, groups):
        c = fit(X[tr], y[tr], [src[i] for i in tr])
        cv[te] = [c.probability(row) for row in X[te]]

    def per_source(scores: dict[str, np.ndarray], mask_src: list[str], yy: np.ndarray) -> dict:
        out: dict[str, dict] = {}
        for s in sorted(set(mask_src)):
            m = np.array([x == s for x in mask_src])
            out[s] = {k: evaluate(yy[m], v[m], 0.5) for k, v in scores.items()}
        return out

    report: dict = {
        "command": " ".join(sys.argv),
        "validation_pairs": counts(val),
        "validation": per_source(
            {"lexical": lex_score, "cross_encoder": ent, "verifier_cv": cv}, src, y
        ),
    }
    # The lexical judge's label, thresholded at its own rule (score >= 0.5 <=> supported).
    # Leave-one-source-out: what each source adds to the combiner's fit.
    loso = {}
    for s in sorted(set(src)):
        keep = [i for i, x in enumerate(src) if x != s]
        c = fit(X[keep], y[keep], [src[i] for i in keep])
        p = np.array([c.probability(row) for row in X])
        loso[s] = {
            t: evaluate(y[np.array(src) == t], p[np.array(src) == t])["balanced_accuracy"]
            for t in sorted(set(src))
        }
    report["combiner_without_source"] = loso
    kinds = defaultdict(list)
    for i, pr in enumerate(val):
        if pr.kind:
            kinds[pr.kind].append(i)
    report["synthetic_by_kind"] = {
        k: {
            "n": len(ix),
            "lexical_right": round(float(((lex[ix] >= 0.5) == y[ix]).mean()), 4),
            "cross_encoder_right": round(float(((ent[ix] >= 0.5) == y[ix]).mean()), 4),
            "verifier_cv_right": round(float(((cv[ix] >= 0.5) == y[ix]).mean()), 4),
        }
        for k, ix in sorted(kinds.items())
    }

    final = fit(X, y, src, quantize=quantize)
    (args.model / COMBINER_FILE).write_text(
        json.dumps(final.to_json(), indent=2) + "\n", encoding="utf-8"
    )
    report["combiner"] = final.to_json()
    overall = np.array([final.probability(r) for r in X])
    report["validation_all_in_sample"] = evaluate(y, overall)

    held_report = {}
    for name, pairs in held.items():
        Xh = features_of(pairs)
        yh = np.array([p.label for p in pairs])
        ph = np.array([final.probability(r) for r in Xh])
        eh = entailment_of(Xh)
        lh = lexical_score(Xh)
        held_report[name] = {
            "lexical": evaluate(yh, lh),
            "cross_encoder": evaluate(yh, eh),
            "verifier": evaluate(yh, ph),
        }
    report["held_out_test_only"] = held_report
    report["seconds"] = round(time.monotonic() - t0, 1)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(
        json.dumps(
            {
                "validation": report["validation"],
                "held_out": held_report,
                "coef": dict(zip(FEATURES, final.coef)),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
