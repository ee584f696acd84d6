"""oneDNN matrix products for a model checker on a CPU in float32.

A MiniCheck, HHEM or NLI checker spends about 85 % of its CPU time in the
linear layers' matrix products (``aten::addmm`` in a profile of RoBERTa-base on
800 tokens). PyTorch runs those through MKL's sgemm, which on the AMD EPYC of
the 2-core machine this was measured on runs at 70-95 GFLOP/s where oneDNN's
inner product (the kernel PyTorch's own compiler, inductor, picks for linear
layers on a CPU) runs the same products at 95-130 GFLOP/s, and a RoBERTa-base
layer stack's linears cost 1.23-1.29 ms a token in oneDNN against 1.37-1.73 in
MKL (batches of 200-2,048 rows; ``benchmarks/check/checker_speed.py`` gives the whole
judge's figure). oneDNN sums in another order, so a score moves by float
rounding only (at most 8e-7 on a logit in that measurement; the parity tests
hold every family to the authors' code within 1e-5 with it on).

So on a CPU in float32 each ``nn.Linear`` of an encoder checker (RoBERTa,
DeBERTa, BERT-like NLI models) computes through
``torch.ops.mkldnn._linear_pointwise`` on its own weights (the parameters are
shared, not copied, so tied weights stay tied). T5 models (MiniCheck Flan-T5,
HHEM) keep PyTorch's layers: at base size they ran no faster with oneDNN's
(1.14x against 1.14x, 0.92x against 0.96x of the authors' loop, in
``benchmarks/results/checker_speed_base_onednn.json``), and T5's large
activations turned the different rounding into a support probability 8e-4
away from the authors' on the random-weight HHEM, where PyTorch's layers stayed
within 6e-6. Where the operator is missing or gives a different product on a
probe, nothing is changed. The ``kernels`` option ``torch`` (read by
judges/checkers/precision.py, which calls ``use_kernels`` for every checker it readies)
keeps PyTorch's own linear layers (the benchmark's reference loop runs the
authors' code that way). Import this module only where torch is needed: it
imports torch.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

__all__ = ["OneDnnLinear", "onednn_available", "use_kernels"]


class OneDnnLinear(torch.nn.Linear):
    """An ``nn.Linear`` whose float32 CPU product is oneDNN's inner product."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # oneDNN's operator has no backward: with gradients on, PyTorch's layer.
        if x.dtype != torch.float32 or x.device.type != "cpu" or torch.is_grad_enabled():
            return super().forward(x)
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")

    @classmethod
    def sharing(cls, linear: torch.nn.Linear) -> OneDnnLinear:
        """A layer computing with ``linear``'s own parameters (shared, not copied)."""
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.in_features = linear.in_features
        new.out_features = linear.out_features
        new.weight = linear.weight
        new.bias = linear.bias
        new.train(linear.training)
        return new


@lru_cache(maxsize=1)
def onednn_available() -> bool:
    """Whether oneDNN's linear runs here and gives PyTorch's product on a probe."""
    op = getattr(torch.ops.mkldnn, "_linear_pointwise", None)
    if op is None or not torch.backends.mkldnn.is_available():
        return False
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 24, generator=gen)
    w = torch.randn(16, 24, generator=gen)
    b = torch.randn(16, generator=gen)
    try:
        with torch.inference_mode():
            got = op(x, w, b, "none", [], "")
            want = torch.nn.functional.linear(x, w, b)
    except RuntimeError:
        return False
    return got.shape == want.shape and bool(torch.allclose(got, want, rtol=1e-5, atol=1e-5))


def use_kernels(model: Any, kernels: str, device: str, precision: str) -> int:
    """Swap ``model``'s linear layers for oneDNN's where that applies; how many were swapped.

    Applies on a CPU, in float32, with ``kernels`` ``onednn``, to a model that is
    not a T5 (see the module's docstring), with a oneDNN that passes the probe;
    otherwise the model is left as it is (0).
    """
    if kernels != "onednn" or device != "cpu" or precision != "float32":
        return 0
    if getattr(getattr(model, "config", None), "model_type", "") == "t5":
        return 0
    if not onednn_available():
        return 0
    swapped = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is torch.nn.Linear:
                setattr(module, name, OneDnnLinear.sharing(child))
                swapped += 1
    return swapped
