"""oneDNN linear layers for model checkers on a CPU (ceg_cli/judges/checkers/kernels.py).

The judges' parity with the authors' code is pinned in test_judge_minicheck.py,
test_judge_hhem.py and test_judge_nli_checkers.py, whose references load plain
PyTorch models; here: the swap happens where it should and nowhere else, ties
survive it, and ``kernels=torch`` turns it off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from test_judge_hhem import make_hhem
from tiny_checkers import build, sentences

from ceg_cli.errors import UsageError
from ceg_cli.judges import create_judge
from ceg_cli.judges.checkers.kernels import OneDnnLinear, onednn_available, use_kernels
from ceg_cli.types import Evidence, JudgeItem, Segment


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kernels")
    out = {f: build(f, root / f, seed=i) for i, f in enumerate(("roberta", "deberta-v2", "t5"))}
    out["hhem"] = make_hhem(root / "hhem", build("t5", root / "flan-t5-base"))
    return out


def linears(model: Any) -> tuple[int, int]:
    """(oneDNN linear layers, PyTorch ones) in ``model``."""
    mods = list(model.modules())
    onednn = sum(isinstance(m, OneDnnLinear) for m in mods)
    return onednn, sum(type(m) is torch.nn.Linear for m in mods)


def items() -> list[JudgeItem]:
    s = sentences(60, seed=5)
    out = []
    for i in range(6):
        # Short and long evidence: a random T5 saturates on long inputs.
        passages = (s[i], " ".join(s[30 + i : 30 + 2 * i]))
        claim = s[40 + i]
        evidence = tuple(Evidence(k, f"d{k}", "", p, 0.5) for k, p in enumerate(passages) if p)
        out.append(JudgeItem(Segment(0, 0, len(claim), claim), evidence))
    return out


def probabilities(judge: Any) -> list[float]:
    """The model's unrounded support for each item (a verdict's score is rounded)."""
    pairs = [(it.segment.text, [e.text for e in it.evidence]) for it in items()]
    if hasattr(judge, "chunks"):  # MiniCheck: every chunk's support
        return [p for claim, ps in pairs
                for p in judge.support([(c.text, claim) for c in judge.chunks(ps)])]
    if hasattr(judge, "scores"):  # HHEM: the joined evidence
        return judge.scores([("\n".join(ps), claim) for claim, ps in pairs])
    return [p for claim, ps in pairs for pair in judge.predict([(ps[0], claim)]) for p in pair]


def test_onednn_runs_on_this_machine() -> None:
    # Every x86 CPU build of PyTorch has oneDNN; if the probe fails, the fast path is gone.
    assert onednn_available()


@pytest.mark.parametrize("spec", ["minicheck:roberta", "minicheck:deberta-v2", "minicheck:t5",
                                  "hhem:hhem", "nli:roberta", "nli:deberta-v2"])
def test_encoders_linear_layers_are_swapped_and_scores_stay(
    folders: dict[str, Path], spec: str
) -> None:
    kind, family = spec.split(":")
    fast: Any = create_judge(f"{kind}:{folders[family]}")
    plain: Any = create_judge(f"{kind}:{folders[family]}", {"kernels": "torch"})
    assert fast.model is not plain.model
    swapped, left = linears(fast.model)
    if family == "t5" or kind == "hhem":  # T5 keeps PyTorch's layers (judges/checkers/kernels.py)
        assert swapped == 0 and left > 0
    else:
        assert swapped > 0 and left == 0
    assert linears(plain.model) == (0, swapped + left)
    got, want = probabilities(fast), probabilities(plain)
    assert got == pytest.approx(want, abs=1e-5)
    assert max(want) - min(want) > 1e-3, "random heads too flat to compare"
    assert [v.verdict for v in fast.judge(items())] == [v.verdict for v in plain.judge(items())]


def test_parameters_are_shared_so_tied_weights_stay_tied() -> None:
    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(10, 8)
            self.body = torch.nn.Linear(8, 8)
            self.head = torch.nn.Linear(8, 10, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.body(self.embed(ids)))

    model = Tied().eval()
    before = [id(p) for p in model.parameters()]
    ids = torch.tensor([[1, 2, 3]])
    with torch.inference_mode():
        want = model(ids)
        assert use_kernels(model, "onednn", "cpu", "float32") == 2
        assert isinstance(model.head, OneDnnLinear) and model.head.bias is None
        assert model.head.weight is model.embed.weight
        assert [id(p) for p in model.parameters()] == before
        assert torch.allclose(model(ids), want, atol=1e-6)


def test_only_float32_on_a_cpu_is_swapped() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    assert use_kernels(model, "onednn", "cuda", "float32") == 0
    assert use_kernels(model, "onednn", "cpu", "bfloat16") == 0
    assert use_kernels(model, "torch", "cpu", "float32") == 0
    assert linears(model) == (0, 2)
    x = torch.randn(3, 8)
    with torch.inference_mode():
        want = model(x)
        assert use_kernels(model, "onednn", "cpu", "float32") == 2
        assert linears(model) == (2, 0)
        assert torch.allclose(model(x), want, atol=1e-6)
    # With gradients on, PyTorch's path, which has a backward.
    out = model(x)
    assert out.requires_grad
    out.sum().backward()
    assert model[0].weight.grad is not None


def test_a_bfloat16_judge_keeps_torch_linears(folders: dict[str, Path]) -> None:
    judge: Any = create_judge(f"minicheck:{folders['roberta']}", {"precision": "bfloat16"})
    assert linears(judge.model)[0] == 0


def test_without_onednn_nothing_is_swapped(monkeypatch: pytest.MonkeyPatch) -> None:
    import ceg_cli.judges.checkers.kernels as kernels

    monkeypatch.setattr(kernels, "onednn_available", lambda: False)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4))
    assert use_kernels(model, "onednn", "cpu", "float32") == 0
    assert linears(model) == (0, 1)


def test_an_unknown_kernels_option_is_a_usage_error(folders: dict[str, Path]) -> None:
    with pytest.raises(UsageError, match=r"minicheck:.*kernels must be one of onednn, torch, "
                                         r"not 'mkl'"):
        create_judge(f"minicheck:{folders['roberta']}", {"kernels": "mkl"})
