"""How a checker model computes: its float width (``--judge-precision``) and, on a
CPU, its matrix-product kernels (the ``kernels`` option, judges/checkers/kernels.py).

``float32`` (the default) is what the parity tests hold to the authors' code
within 1e-5. ``bfloat16`` halves the weights' memory and, on a GPU (and a CPU
with bfloat16 instructions), runs faster; it keeps float32's range, so T5
models (MiniCheck Flan-T5, HHEM), which overflow in float16, stay finite.
``float16`` is for CUDA only (a CPU runs it slowly or not at all) and is
refused for T5. Scores move: ``benchmarks/check/checker_speed.py --precision P``
reports the largest difference from float32 and how many verdicts change,
and the softmax is always taken in float32.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import UsageError

PRECISIONS = ("float32", "bfloat16", "float16")
DEFAULT_PRECISION = "float32"
KERNELS = ("onednn", "torch")
DEFAULT_KERNELS = "onednn"


def precision_option(options: Mapping[str, Any], device: str, judge: str) -> str:
    """The ``precision`` option, checked against the device before any model loads."""
    precision = str(options.get("precision") or DEFAULT_PRECISION)
    if precision not in PRECISIONS:
        raise UsageError(
            f"--judge-precision {precision}: choose one of {', '.join(PRECISIONS)}"
        )
    if precision == "float16" and device != "cuda":
        raise UsageError(
            f"--judge {judge} --judge-precision float16: float16 is for a CUDA GPU "
            f"(--device cuda); on {device} use float32 or bfloat16"
        )
    return precision


def kernels_option(options: Mapping[str, Any], judge: str) -> str:
    """The ``kernels`` option: ``onednn`` (the default) or ``torch``
    (judges/checkers/kernels.py)."""
    kernels = str(options.get("kernels") or DEFAULT_KERNELS)
    if kernels not in KERNELS:
        raise UsageError(f"--judge {judge}: kernels must be one of {', '.join(KERNELS)}, "
                         f"not {kernels!r}")
    return kernels


def for_inference(model: Any, precision: str, kernels: str, device: str, location: str) -> Any:
    """``model`` in ``precision`` on ``device``, in eval mode, with ``kernels`` where they apply."""
    from .kernels import use_kernels

    model = to_precision(model, precision, location).to(device).eval()
    use_kernels(model, kernels, device, precision)
    return model


def to_precision(model: Any, precision: str, location: str) -> Any:
    """``model`` cast to ``precision``; float16 is refused for T5, which overflows in it."""
    import torch

    if precision == "float16" and getattr(model.config, "model_type", "") == "t5":
        raise UsageError(
            f"{location}: a T5 model overflows in float16 (its activations pass 65,504); "
            "use --judge-precision bfloat16"
        )
    return model.to({"float32": torch.float32, "bfloat16": torch.bfloat16,
                     "float16": torch.float16}[precision])
