"""Sorted, token-budgeted batches: the one loop the model checkers run their pairs through.

MiniCheck, HHEM and the NLI judge all tokenize every pair of a call once, sort the
pairs by length and run them in batches, so that a batch pads little. A batch
holds at most ``batch_size`` pairs and, on top of that, at most ``batch_tokens``
padded tokens (pairs x its longest pair), because on a CPU a batch does not get
cheaper per token once its sequences are long: a RoBERTa-base forward pass is
matrix products over (pairs x tokens) rows, already efficient for one sequence of
400 tokens, and 16 such sequences at once (6,400 rows, a 78 MB feed-forward
activation per layer, more than the L3 cache) ran about 20 % slower per sequence
than 1 to 4 of them on the 2-core machine. Short pairs are where batching pays
(one 60-token sequence alone cost about twice its share of a batch of 16), and the
budget keeps those batches full while long ones stay small. Padding is work too:
HHEM reads a segment's whole evidence (130-600 tokens), and a budgeted batch of
mixed lengths spent a third of its tokens on padding, and T5 pays again to mask
them (a fifth of its time in ``where`` and copies): a batch that is already big
enough to run at full speed is cut before padding passes a fifth of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "CPU_BATCH_TOKENS",
    "FULL_ROWS",
    "batch_tokens_option",
    "length_batches",
    "run_batches",
]

#: The default padded-token budget of a batch on a CPU (see the module's docstring);
#: on a GPU only ``batch_size`` limits a batch.
CPU_BATCH_TOKENS = 2048
#: Padded tokens from which a CPU batch runs at full speed per token: RoBERTa-base
#: on 4 x 128 tokens cost 257 ms a sequence against 246 ms in 16 x 128, but 338 ms
#: alone; one 400-token sequence costs what it does in a batch of 4.
FULL_ROWS = 512
#: Padded tokens per real token a full batch may reach before it is cut.
PADDING_LIMIT = 1.25


def batch_tokens_option(options: Mapping[str, Any], device: str, judge: str) -> int | None:
    """The ``batch_tokens`` option, or the device's default (None: no budget)."""
    from ...errors import UsageError

    value = options.get("batch_tokens")
    if value is None:
        return CPU_BATCH_TOKENS if device == "cpu" else None
    try:
        tokens = int(value)
    except (TypeError, ValueError):
        raise UsageError(f"--judge {judge}: batch_tokens must be a number, not {value!r}") from None
    if tokens < 1:
        raise UsageError(f"--judge {judge}: batch_tokens must be at least 1, not {tokens}")
    return tokens


def length_batches(
    lengths: Sequence[int], batch_size: int, batch_tokens: int | None = None
) -> list[list[int]]:
    """Indices of ``lengths`` sorted by length, cut into batches.

    A batch has at most ``batch_size`` items and, when ``batch_tokens`` is set, at
    most that many padded tokens (items x the batch's longest); an item longer
    than the budget is a batch of its own. With a budget, a batch that already
    has ``FULL_ROWS`` padded tokens also stops taking items once one would make
    more than a fifth of it padding: past that size a batch runs no faster per
    token, so padding would be pure waste. Equal lengths keep their order.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    real = 0
    for i in order:
        # Sorted ascending, so the item being added is the batch's longest.
        padded = (len(current) + 1) * lengths[i]
        if current and (
            len(current) >= batch_size
            or (
                batch_tokens is not None
                and (
                    padded > batch_tokens
                    or (
                        len(current) * lengths[current[-1]] >= FULL_ROWS
                        and padded > PADDING_LIMIT * (real + lengths[i])
                    )
                )
            )
        ):
            batches.append(current)
            current, real = [], 0
        current.append(i)
        real += lengths[i]
    if current:
        batches.append(current)
    return batches


def run_batches(
    encoded: Mapping[str, Sequence[Sequence[int]]],
    tokenizer: Any,
    forward: Callable[[dict[str, Any]], Any],
    *,
    device: Any,
    batch_size: int,
    batch_tokens: int | None = None,
) -> list[list[float]]:
    """``forward``'s rows for every pair of ``encoded``, in the pairs' order.

    ``encoded`` is the tokenizer's unpadded output for all pairs (``input_ids``
    and whatever else it gave, e.g. ``token_type_ids``); each batch is padded to
    its own longest pair by ``tokenizer.pad`` and given to ``forward`` as tensors
    on ``device``, under ``torch.inference_mode``. ``forward`` returns one row of
    floats per pair (a 2-D tensor).
    """
    import torch

    ids = encoded["input_ids"]
    out: list[list[float]] = [[] for _ in ids]
    if not ids:
        return out
    keys = [k for k in encoded if k in ("input_ids", "attention_mask", "token_type_ids")]
    with torch.inference_mode():
        for batch in length_batches([len(x) for x in ids], batch_size, batch_tokens):
            padded = tokenizer.pad(
                {k: [encoded[k][i] for i in batch] for k in keys},
                padding=True,
                return_tensors="pt",
            )
            inputs = {k: v.to(device) for k, v in padded.items()}
            rows = forward(inputs).float().tolist()
            for i, row in zip(batch, rows):
                out[i] = row
    return out
