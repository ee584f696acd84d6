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

The rules of ``ceg judge train`` (``training.adapt.check_out`` and ``out_state``,
the same code): every argument is checked before anything is written, and a bad
one is one line and exit 2. ``--out`` must be new, empty, or a run of this
script to continue (its ``data.json`` says so, or its checkpoint does); it may
not be the ``--base`` model, lie inside an index, hold a finished model, or
hold any file this script does not write.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from ceg_cli.errors import UsageError
from ceg_cli.index.dense.embedding import resolve_device, resolve_model
from ceg_cli.training.adapt import FINALISE, check_out, out_state
from ceg_cli.training.crossenc import train_cross_encoder, write_atomically
from ceg_cli.training.dataset import (
    TRAIN_CAPS,
    corpus_passages,
    counts,
    load_pairs,
    to_examples,
)
from ceg_cli.training.qa import make_qa_pairs
from ceg_cli.training.sources import split_of

#: Who writes ``--out`` (data.json's ``made_by``, and the refusals' wording).
BY = "scripts/train_verifier.py"
DATA_FILE = "data.json"


class _Parser(argparse.ArgumentParser):
    """argparse's own refusals (``--qa abc``) as one line and exit 2, as the checks give."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        print(f"train_verifier.py: {message}", file=sys.stderr)
        raise SystemExit(2)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = _Parser()
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
    return ap.parse_args(argv)


def validate(args: argparse.Namespace) -> tuple[str, str, dict[str, int]]:
    """Every check, before anything is written: (device, base model, source caps).
    UsageError names the option."""
    for option, value, least in (("--qa", args.qa, 0), ("--replay", args.replay, 0),
                                 ("--batch-size", args.batch_size, 1),
                                 ("--max-length", args.max_length, 8)):
        if value < least:
            raise UsageError(f"{option} {value}: must be at least {least}")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise UsageError(f"--lr {args.lr}: must be a number more than 0")
    limit = args.time_limit_min
    if limit is not None and not (math.isfinite(limit) and limit > 0):
        raise UsageError(f"--time-limit-min {limit}: must be a number more than 0")
    left_out = {n for n in args.without.split(",") if n}
    unknown = sorted(left_out - set(TRAIN_CAPS))
    if unknown:
        raise UsageError(
            f"--without {unknown[0]}: not a training source (one of {', '.join(TRAIN_CAPS)})"
        )
    caps = {k: v for k, v in TRAIN_CAPS.items() if k not in left_out}
    for need in (args.data / "train", corpus_of(args.data)):
        if not need.exists():
            raise UsageError(
                f"--data {args.data}: no {need.relative_to(args.data)} there (the shared "
                "data folder: train/ and wiki/enwiki-sample.xml.bz2)"
            )
    if args.base is not None:
        if not (args.base / "config.json").is_file():
            raise UsageError(f"--base {args.base}: not a model directory (no config.json)")
        base = str(args.base)
    else:
        base = resolve_model(None).location
    device = resolve_device(args.device)  # cuda without CUDA is refused
    check_out(args.out, index_dir=None, base=Path(base))
    if out_state(args.out, by=BY, record=DATA_FILE) == FINALISE:
        raise UsageError(
            f"--out {args.out}: already holds a finished model (training.json); choose a "
            "new directory"
        )
    return device, base, caps


def corpus_of(data: Path) -> Path:
    return data / "wiki" / "enwiki-sample.xml.bz2"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        device, base, caps = validate(args)
        return train(args, device, base, caps)
    except UsageError as e:
        print(f"train_verifier.py: {e}", file=sys.stderr)
        return 2


def train(args: argparse.Namespace, device: str, base: str, caps: dict[str, int]) -> int:
    t0 = time.monotonic()
    corpus = corpus_of(args.data)
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
    info: dict[str, Any] = {
        "made_by": BY,
        "command": " ".join(sys.argv),
        "pairs": counts(pairs),
        "total": len(examples),
    }
    write_atomically(args.out / DATA_FILE, json.dumps(info, indent=2) + "\n")
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

    result = train_cross_encoder(
        examples,
        args.out,
        base=base,
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
