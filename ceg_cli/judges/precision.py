"""The float width a checker model computes in (``--judge-precision``).

``float32`` (the default) is what the parity tests hold to the authors' code
within 1e-5. ``bfloat16`` halves the weights' memory and, on a GPU (and a CPU
with bfloat16 instructions), runs faster; it keeps float32's range, so T5
models (MiniCheck Flan-T5, HHEM), which overflow in float16, stay finite.
``float16`` is for CUDA only (a CPU runs it slowly or not at all) and is
refused for T5. Scores move: ``benchmarks/checker_speed.py --precision P``
reports the largest difference from float32 and how many verdicts change,
and the softmax is always taken in float32.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import UsageError

PRECISIONS = ("float32", "bfloat16", "float16")
DEFAULT_PRECISION = "float32"


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
