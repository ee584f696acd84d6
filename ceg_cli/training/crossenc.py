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

from ..judges.crossenc import encode

__all__ = ["ID2LABEL", "train_cross_encoder"]

ID2LABEL = {0: "not_entailment", 1: "entailment"}
CHECKPOINT = "checkpoint.pt"


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
) -> dict[str, Any]:
    """Train one pass over ``examples`` (claim, window, label); write the model to ``out_dir``.

    Returns what was done: steps, examples seen, seconds, whether it finished
    or stopped at ``time_limit_s`` (the checkpoint then lets a later call go on;
    with ``save_partial`` the model as trained so far is written too).
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(base, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        base,
        num_labels=2,
        id2label=ID2LABEL,
        label2id={v: k for k, v in ID2LABEL.items()},
        local_files_only=True,
        dtype=torch.float32,
    )
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
        state = torch.load(ckpt, weights_only=False)
        if state["n_examples"] != len(examples) or state["seed"] != seed:
            raise ValueError(f"{ckpt}: made for other training data; remove it to start over")
        model.load_state_dict(state["model"])
        optim.load_state_dict(state["optim"])
        sched.load_state_dict(state["sched"])
        step, spent = state["step"], state["seconds"]
        torch.set_rng_state(state["rng"])
    model.train()
    start = time.monotonic()
    last_ckpt = start

    def save_checkpoint() -> None:
        tmp = ckpt.with_suffix(".tmp")
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
        batch = encode(tok, [examples[i][:2] for i in idx], max_length)
        labels = torch.tensor([examples[i][2] for i in idx])
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
    if finished:
        ckpt.unlink()
    info = {
        "steps": step,
        "steps_total": steps_total,
        "examples_seen": min(len(order), step * batch_size),
        "seconds": round(seconds, 1),
        "finished": finished,
        "max_length": max_length,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
    }
    (out_dir / "training.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info
