"""The verifier's cross-encoder at check time: load a trained directory, score pairs.

Training (``ceg_cli.training.crossenc``) and checking read pairs through the
same ``encode``, so the model sees at check time what it learnt from.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["encode", "load_cross_encoder", "score_pairs"]


def encode(tok: Any, pairs: Sequence[tuple[str, ...]], max_length: int) -> Any:
    """One padded batch of (claim, window) pairs, the same at training and at check time.

    ``longest_first`` cuts the longer side first, so a claim longer than the
    whole budget is cut too instead of failing.
    """
    return tok(
        [p[0] for p in pairs],
        [p[1] for p in pairs],
        truncation="longest_first",
        max_length=max_length,
        padding=True,
        return_tensors="pt",
    )


def load_cross_encoder(path: str | Path, *, quantize: bool = True) -> tuple[Any, Any]:
    """The tokenizer and model of a trained directory, in float32 (int8 linear layers if asked)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(path), local_files_only=True, dtype=torch.float32
    )
    model.eval()
    if quantize:
        import warnings

        # Dynamic int8 linear layers: about 2x the pairs/s of float32 on CPU
        # (benchmarks/verifier_precision.py measures the agreement). torch
        # marks torch.ao.quantization deprecated; torch is pinned, and the
        # warning would print on every run.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = torch.ao.quantization.quantize_dynamic(
                model, {torch.nn.Linear}, dtype=torch.qint8
            )
    return tok, model


def score_pairs(
    tok: Any,
    model: Any,
    pairs: Sequence[tuple[str, str]],
    *,
    max_length: int = 160,
    batch_size: int = 32,
) -> list[float]:
    """P(entailment) for each (claim, window) pair, batched by length to limit padding."""
    import torch

    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
    out = [0.0] * len(pairs)
    with torch.inference_mode():
        for b in range(0, len(order), batch_size):
            idx = order[b : b + batch_size]
            enc = encode(tok, [pairs[i] for i in idx], max_length)
            probs = torch.softmax(model(**enc).logits.float(), dim=-1)[:, 1].tolist()
            for i, p in zip(idx, probs):
                out[i] = float(p)
    return out
