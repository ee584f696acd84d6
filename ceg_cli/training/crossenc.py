"""Fine-tune a cross-encoder on (claim, evidence window) pairs, resumable.

The model reads ``[CLS] claim [SEP] window [SEP]`` and outputs two classes,
``not_entailment`` (0) and ``entailment`` (1), so the trained directory is
also a valid ``--judge nli:DIR`` model. Training is a plain PyTorch loop
(AdamW, linear warm-up and decay, dynamic padding), bounded by a number of
examples or a time limit, with a checkpoint every few minutes: a killed run
started again with the same arguments continues from its last checkpoint and
reaches the same model as an uninterrupted run (the order of examples is a
function of the seed; the checkpoint holds the optimizer, the schedule and
the step).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..judges.checkers.crossenc import encode, first_line
from ..progress import library_bars_off

__all__ = ["CHECKPOINT", "ID2LABEL", "TRAINING_FILE", "train_cross_encoder", "write_atomically"]

ID2LABEL = {0: "not_entailment", 1: "entailment"}
CHECKPOINT = "checkpoint.pt"
#: Where a checkpoint is written before it is renamed to ``CHECKPOINT``.
CHECKPOINT_TMP = "checkpoint.tmp"
#: What the training did (steps, whether it finished), written when it stops.
TRAINING_FILE = "training.json"


def train_cross_encoder(
    examples: Sequence[tuple[str, str, int]],
    out_dir: Path,
    *,
    base: str,
    max_length: int = 160,
    batch_size: int = 16,
    lr: float = 5e-5,
    warmup: float = 0.06,
    seed: int = 0,
    time_limit_s: float | None = None,
    checkpoint_every_s: float = 300.0,
    progress: Callable[[int, int, float], None] | None = None,
    save_partial: bool = False,
    on_start: Callable[[], None] | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train one pass over ``examples`` (claim, window, label); write the model to ``out_dir``.

    Returns what was done: steps, examples seen, seconds, whether it finished
    or stopped at ``time_limit_s`` (the checkpoint then lets a later call go on;
    with ``save_partial`` the model as trained so far is written too). ``on_start`` is
    called once the checkpoint, if any, is found to be this run's, before any step.
    ``device``: ``cpu`` or ``cuda`` (resolved), where the model trains.
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    with library_bars_off():
        tok = AutoTokenizer.from_pretrained(base, local_files_only=True)
        model = AutoModelForSequenceClassification.from_pretrained(
            base,
            num_labels=2,
            id2label=ID2LABEL,
            label2id={v: k for k, v in ID2LABEL.items()},
            local_files_only=True,
            dtype=torch.float32,
        ).to(device)
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    steps_total = (len(order) + batch_size - 1) // batch_size
    optim = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    n_warm = max(1, int(warmup * steps_total))

    def schedule(step: int) -> float:
        if step < n_warm:
            return (step + 1) / n_warm
        return max(0.0, (steps_total - step) / max(1, steps_total - n_warm))

    sched = torch.optim.lr_scheduler.LambdaLR(optim, schedule)
    step = 0
    ckpt = out_dir / CHECKPOINT
    spent = 0.0
    if ckpt.exists():
        try:
            state = torch.load(ckpt, weights_only=True, map_location="cpu")
            made_for = (state["n_examples"], state["seed"])
        except Exception as exc:  # noqa: BLE001 - a damaged pickle raises anything
            if isinstance(exc, MemoryError):
                raise
            raise UsageError(
                f"{ckpt}: not a checkpoint ceg wrote ({first_line(exc)}); remove it to start over"
            ) from None
        if made_for != (len(examples), seed):
            raise UsageError(
                f"{ckpt}: made for other training data ({made_for[0]} pairs, seed {made_for[1]}; "
                f"this run has {len(examples)}, seed {seed}): run with the arguments it was "
                "made with, or remove it to start over"
            )
        try:
            model.load_state_dict(state["model"])
            optim.load_state_dict(state["optim"])
            sched.load_state_dict(state["sched"])
            step, spent = int(state["step"]), float(state["seconds"])
            torch.set_rng_state(state["rng"])
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise UsageError(
                f"{ckpt}: not a checkpoint of this model ({first_line(exc)}); remove it to "
                "start over"
            ) from None
    if on_start is not None:
        on_start()
    model.train()
    start = time.monotonic()
    last_ckpt = start

    def save_checkpoint() -> None:
        tmp = out_dir / CHECKPOINT_TMP
        torch.save(
            {
                "model": model.state_dict(),
                "optim": optim.state_dict(),
                "sched": sched.state_dict(),
                "step": step,
                "seconds": spent + time.monotonic() - start,
                "n_examples": len(examples),
                "seed": seed,
                # Dropout draws from this: restoring it makes a resumed run the same run.
                "rng": torch.get_rng_state(),
            },
            tmp,
        )
        os.replace(tmp, ckpt)

    finished = True
    while step < steps_total:
        if time_limit_s is not None and time.monotonic() - start >= time_limit_s:
            finished = False
            break
        idx = order[step * batch_size : (step + 1) * batch_size]
        batch = {k: v.to(device) for k, v in
                 encode(tok, [examples[i][:2] for i in idx], max_length).items()}
        labels = torch.tensor([examples[i][2] for i in idx], device=device)
        loss = model(**batch, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        sched.step()
        optim.zero_grad()
        step += 1
        if progress:
            progress(step, steps_total, float(loss.detach()))
        if time.monotonic() - last_ckpt >= checkpoint_every_s:
            save_checkpoint()
            last_ckpt = time.monotonic()
    save_checkpoint()
    seconds = spent + time.monotonic() - start
    if finished or save_partial:
        model.eval()
        # Half precision on disk (45 MB for MiniLM-L6); loaded back as float32.
        model.half().save_pretrained(out_dir, safe_serialization=True)
        tok.save_pretrained(out_dir)
    info = {
        "steps": step,
        "steps_total": steps_total,
        "examples_seen": min(len(order), step * batch_size),
        "n_examples": len(examples),
        "seconds": round(seconds, 1),
        "finished": finished,
        "max_length": max_length,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
    }
    # The record first, the checkpoint after: a run killed in between finds the
    # training done (training.json) rather than a model with nothing to say so.
    write_atomically(out_dir / TRAINING_FILE, json.dumps(info, indent=2) + "\n")
    if finished:
        ckpt.unlink()
    return info


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` by way of a temporary file and a rename: whole or not at all."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
