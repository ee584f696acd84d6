"""Train the shipped verifier's cross-encoder (stage 1 of 2; stage 2 is fit_verifier.py).

    .venv/bin/python scripts/train_verifier.py --data ../shared/data --out work/verifier-ce \
        [--time-limit-min 70] [--max-length 160] [--device auto|cpu|cuda]

Fine-tuning the shipped model on question-answer claims (issue 22):

    .venv/bin/python scripts/train_verifier.py --data ../shared/data \
        --out work/verifier-qa --base ceg_cli/models/verifier \
        --qa 100000 --replay 4000 --lr 2e-5

Reads the train split of the sources in ``ceg_cli.training.dataset.TRAIN_CAPS``
(held-out sources never), makes synthetic pairs from the enwiki sample, cuts
each pair's evidence to its window, and fine-tunes all-MiniLM-L6-v2 as a
two-class cross-encoder. ``--base`` starts from another model (a trained
verifier, to fine-tune it); ``--qa N`` adds up to N synthetic question-answer
pairs (``training.qa``, train split) and ``--replay N`` keeps N pairs of the
usual mix at random, so a fine-tuned model does not forget it. Killed, the
same command resumes from the last checkpoint. Progress goes to stderr;
``OUT/data.json`` records the counts.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from ceg_cli.errors import UsageError
from ceg_cli.index.embedding import resolve_device, resolve_model
from ceg_cli.training.crossenc import train_cross_encoder
from ceg_cli.training.dataset import (
    TRAIN_CAPS,
    corpus_passages,
    counts,
    load_pairs,
    to_examples,
)
from ceg_cli.training.qa import make_qa_pairs
from ceg_cli.training.sources import split_of


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--time-limit-min", type=float, default=None)
    ap.add_argument("--max-length", type=int, default=160)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--without", default="", help="comma-separated sources to leave out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--base", type=Path, default=None,
                    help="model to start from (default: the embedding model)")
    ap.add_argument("--qa", type=int, default=0,
                    help="synthetic question-answer pairs to add, at most")
    ap.add_argument("--replay", type=int, default=0,
                    help="pairs of the usual mix to keep, at random (0: all)")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                    help="where the model trains (auto: CUDA when there is one)")
    args = ap.parse_args()
    try:
        device = resolve_device(args.device)  # before any work: cuda without CUDA is refused
    except UsageError as e:
        print(f"train_verifier.py: {e}", file=sys.stderr)
        return 2

    caps = {k: v for k, v in TRAIN_CAPS.items() if k not in set(args.without.split(","))}
    t0 = time.monotonic()
    corpus = args.data / "wiki" / "enwiki-sample.xml.bz2"
    pairs = load_pairs(
        args.data / "train",
        corpus=corpus,
        split="train",
        caps=caps,
        seed=args.seed,
    )
    if args.replay and len(pairs) > args.replay:
        pairs = random.Random(args.seed).sample(pairs, args.replay)
    if args.qa:
        qa = [p for p in make_qa_pairs(corpus_passages(corpus), seed=args.seed)
              if split_of(p.group) == "train"]
        pairs += qa[: args.qa]
    examples = to_examples(pairs)
    args.out.mkdir(parents=True, exist_ok=True)
    info = {"command": " ".join(sys.argv), "pairs": counts(pairs), "total": len(examples)}
    (args.out / "data.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    print(f"{len(examples)} examples in {time.monotonic() - t0:.0f} s", file=sys.stderr)

    started = time.monotonic()

    def progress(step: int, total: int, loss: float) -> None:
        if step % 50 == 0 or step == total:
            rate = step * args.batch_size / max(1e-9, time.monotonic() - started)
            print(
                f"step {step}/{total} loss {loss:.3f} {rate:.1f} pairs/s (this run)",
                file=sys.stderr,
                flush=True,
            )

    base = args.base or resolve_model(None).location
    result = train_cross_encoder(
        examples,
        args.out,
        base=str(base),
        max_length=args.max_length,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        time_limit_s=args.time_limit_min * 60 if args.time_limit_min else None,
        progress=progress,
        device=device,
    )
    print(json.dumps(result), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
