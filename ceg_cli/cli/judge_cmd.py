"""``ceg judge train``: adapt the verifier to the documents of an index."""

from __future__ import annotations

import math
import shlex
import sys
import time
from pathlib import Path

import typer

from .commands import CegTyper
from .common import (
    EmbedDevice,
    IndexOption,
    QuietOption,
    err_console,
    handle_errors,
)

app = CegTyper(help="Train and inspect verifier judges.", no_args_is_help=True)


@app.command("train")
@handle_errors
def train_command(
    out: Path = typer.Option(..., "--out", "-o", help="Directory for the adapted model."),
    index: Path = IndexOption,
    base: str = typer.Option(
        "verifier", "--base", help="Model to start from: verifier (the shipped one) or a DIR."
    ),
    minutes: float = typer.Option(30.0, "--minutes", help="Stop training after this long."),
    pairs: int = typer.Option(
        2000, "--pairs", min=1, help="Synthetic pairs to train on, at most."
    ),
    held_out: int = typer.Option(
        300, "--held-out", min=1, help="Held-out pairs scored before/after."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed for pair generation and training order."),
    device: EmbedDevice = typer.Option(
        "auto", "--device", help="Where the model trains and scores: auto is CUDA when "
        "torch sees one, else the CPU."
    ),
    quiet: bool = QuietOption,
) -> None:
    """Fine-tune the verifier on synthetic pairs made from INDEX's own passages.

    Needs no labels. Prints held-out figures before and after, writes a model
    card, and checkpoints every few minutes: run the same command again after
    an interruption to continue. Use the result with --judge verifier:OUT.
    """
    from ..errors import UsageError
    from ..index.dense.devices import resolve_device
    from ..judges.checkers.verifier import SHIPPED
    from ..training.adapt import adapt

    if math.isnan(minutes) or minutes <= 0:  # nan compares false: it was "no limit"
        raise UsageError(f"--minutes {minutes}: must be a number more than 0")
    base_dir = SHIPPED if base == "verifier" else Path(base).expanduser()
    if not base_dir.is_dir():
        raise UsageError(f"--base {base}: no such model directory")
    where = resolve_device(device.value)  # before any work: cuda without CUDA is refused
    last = [0.0]
    started = time.monotonic()

    def progress(step: int, total: int, loss: float) -> None:
        now = time.monotonic()
        if quiet or (now - last[0] < 10 and step != total):
            return
        last[0] = now
        err_console.print(
            f"training: step {step}/{total}, loss {loss:.3f}, {now - started:.0f} s",
            highlight=False,
        )

    def log(message: str) -> None:
        if not quiet:
            err_console.print(message, highlight=False)

    result = adapt(
        index,
        out,
        base=base_dir,
        minutes=minutes,
        max_pairs=pairs,
        held_out=held_out,
        seed=seed,
        log=log,
        progress=progress,
        command=shlex.join(["ceg", *sys.argv[1:]]),
        device=where,
    )
    err_console.print(f"wrote {result.out} (model card: {result.out / 'MODEL_CARD.md'})")
