"""``nli:`` reads any sequence-classification checker whose config names its classes.

NLI models (entailment/neutral/contradiction) as before; fact checkers that
name their classes by support (``supported``/``unsupported``,
``consistent``/``hallucinated``) read as two-label models; anything else is
refused, naming the labels it has. Models are tiny random RoBERTa and DeBERTa-v2
classifiers built in the test (tests/tiny_checkers.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from tiny_checkers import build

from ceg_cli.errors import UsageError
from ceg_cli.judges import create_judge
from ceg_cli.judges.checkers.nli import label_map
from ceg_cli.types import Evidence, JudgeItem, Segment


@pytest.mark.parametrize(
    ("id2label", "entail", "other"),
    [
        ({0: "unsupported", 1: "supported"}, 1, 0),
        ({0: "Consistent", 1: "Hallucinated"}, 0, 1),
        ({0: "NOT_SUPPORTED", 1: "SUPPORTED"}, 1, 0),
    ],
)
def test_support_labels_read_as_two_label_models(
    id2label: dict[int, str], entail: int, other: int
) -> None:
    labels = label_map(id2label, "m")
    assert (labels.entailment, labels.neutral, labels.contradiction) == (entail, other, None)


def test_a_checker_without_readable_labels_is_refused_naming_them() -> None:
    with pytest.raises(UsageError, match=r"id2label: LABEL_0, LABEL_1\)"):
        label_map({0: "LABEL_0", 1: "LABEL_1"}, "m")


def item(passage: str, claim: str) -> JudgeItem:
    return JudgeItem(Segment(0, 0, len(claim), claim), (Evidence(0, "d", "", passage, 0.9),))


@pytest.mark.parametrize("family", ["roberta", "deberta-v2"])
def test_a_support_checker_scores_its_supported_class(tmp_path: Path, family: str) -> None:
    import torch

    folder = build(family, tmp_path / family, id2label={0: "unsupported", 1: "supported"})
    judge: Any = create_judge(f"nli:{folder}")
    pairs = [
        ("Paris is the capital of France.", "Paris is a capital."),
        ("The river was born in 1815. The king signed a treaty.", "A treaty was signed."),
    ]
    verdicts = judge.judge([item(p, c) for p, c in pairs])
    from transformers import AutoModelForSequenceClassification

    # The model as its users load it: PyTorch's linear layers, not the judge's oneDNN ones.
    plain = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        for (premise, claim), verdict in zip(pairs, verdicts):
            enc = judge.tokenizer(premise, claim, return_tensors="pt")
            expected = torch.softmax(plain(**enc).logits, dim=-1)[0, 1].item()
            assert verdict.score == pytest.approx(expected, abs=1e-4)
            assert verdict.verdict in {"supported", "not_enough_evidence"}


def test_an_alias_names_a_cached_nli_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = build(
        "deberta-v2",
        tmp_path / "m",
        id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
    )
    rev = "b" * 40
    repo = tmp_path / "hub" / "models--MoritzLaurer--DeBERTa-v3-large-mnli-fever-anli-ling-wanli"
    shutil.copytree(source, repo / "snapshots" / rev)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    judge: Any = create_judge("nli:deberta-v3-large-nli")
    assert judge.name == "nli:deberta-v3-large-nli"
    assert judge.labels.contradiction == 2
