"""The verifier's cross-encoder at check time: load a trained directory, score pairs.

Training (``ceg_cli.training.crossenc``) and checking read pairs through the
same ``encode``, so the model sees at check time what it learnt from.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...progress import library_bars_off

__all__ = ["encode", "first_line", "load_cross_encoder", "score_pairs", "weights_file"]


#: Files a tokenizer is read from; a model folder holds at least one.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
                   "spiece.model", "sentencepiece.bpe.model", "spm.model")


def model_folder_problem(folder: Path) -> str | None:
    """What a model folder lacks, said whole (transformers' own message for a folder
    without a tokenizer is cut off at its first line), or None."""
    if not (folder / "config.json").is_file():
        return "no config.json: not a model folder (config.json, the weights, the tokenizer)"
    weights = [p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin")]
    if not weights:
        return "no weights (model.safetensors or pytorch_model.bin) beside config.json"
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return ("no tokenizer: the folder needs the tokenizer's files saved with the model "
                f"({', '.join(TOKENIZER_FILES[:3])}, ...)")
    return None


def weights_file(folder: Path) -> Path:
    """The weights file of a model directory (the folder itself when it has none)."""
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (folder / name).exists():
            return folder / name
    return folder


def first_line(exc: BaseException) -> str:
    """An exception's message, on one line."""
    text = str(exc).strip().splitlines()
    return f"{text[0]}" if text else type(exc).__name__


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


def load_cross_encoder(
    path: str | Path, *, quantize: bool = True, device: str = "cpu"
) -> tuple[Any, Any]:
    """The tokenizer and model of a trained directory, in float32 (int8 linear layers if asked).

    On ``device`` ``cuda`` the model stays float32 (int8 dynamic quantization is
    the CPU's) and computes there.

    A directory that does not hold a trained two-label cross-encoder (a truncated
    weights file, a sentence-embedding model whose head would be drawn at random)
    raises UsageError naming the file.
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = Path(path)
    try:
        with library_bars_off():
            tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            model, info = AutoModelForSequenceClassification.from_pretrained(
                str(path), local_files_only=True, dtype=torch.float32, output_loading_info=True
            )
    except Exception as exc:  # noqa: BLE001 - transformers and safetensors raise many kinds
        if isinstance(exc, MemoryError):
            raise
        raise UsageError(
            f"{weights_file(folder)}: cannot load the cross-encoder: {first_line(exc)}"
        ) from None
    untrained = sorted(set(info.get("missing_keys", ())) | set(info.get("mismatched_keys", ())))
    if untrained:
        raise UsageError(
            f"{weights_file(folder)}: no trained classifier head ({', '.join(map(str, untrained))} "
            "would be drawn at random); a verifier needs a cross-encoder made by `ceg judge train`"
        )
    if model.config.num_labels != 2:
        raise UsageError(
            f"{folder / 'config.json'}: field 'id2label' has {model.config.num_labels} labels; "
            "a verifier's cross-encoder has 2 (not_entailment, entailment)"
        )
    model.eval()
    if device != "cpu":
        return tok, model.to(device)
    if quantize:
        import warnings

        # Dynamic int8 linear layers: about 2x the pairs/s of float32 on CPU
        # (benchmarks/judges/verifier_precision.py measures the agreement). torch
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

    # Where the model computes (int8 dynamic layers keep their weights packed, not as
    # parameters; the embeddings stay float ones, on the model's device).
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
    out = [0.0] * len(pairs)
    with torch.inference_mode():
        for b in range(0, len(order), batch_size):
            idx = order[b : b + batch_size]
            enc = encode(tok, [pairs[i] for i in idx], max_length)
            if device.type != "cpu":
                enc = {k: v.to(device) for k, v in enc.items()}
            probs = torch.softmax(model(**enc).logits.float(), dim=-1)[:, 1].tolist()
            for i, p in zip(idx, probs):
                out[i] = float(p)
    return out
