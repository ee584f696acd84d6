"""The ``hhem:`` judge runs HHEM-2.1-open's procedure from its weights, no remote code.

The reference is ``HHEMv2ForSequenceClassification`` as vectara publishes it in
the hub repository vectara/hallucination_evaluation_model, ``modeling_hhem_v2.py``
and ``configuration_hhem_v2.py`` (read through a copy of the file, revision
"updated files for hhem-2.1-open" with the later transformers-5 ``tie_weights``
compatibility patch; the hub commit id was not available offline): the
config's prompt with text1 = premise and text2 = hypothesis, the foundation's
tokenizer with padding and no truncation, ``T5ForTokenClassification`` with the
weights under ``t5.``, softmax of the first token's logits, class 1. It is
written out below on a tiny random T5 built in the test, and ceg's batched,
length-sorted path must agree with it within 1e-5.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tiny_checkers import build, sentences

from ceg_cli.errors import UsageError
from ceg_cli.judges import create_judge
from ceg_cli.judges.checkers.hhem import DEFAULT_PROMPT
from ceg_cli.types import Evidence, JudgeItem, Segment


def make_hhem(folder: Path, foundation: Path, seed: int = 0) -> Path:
    """An HHEM folder as the hub has it: HHEMv2 config naming a foundation, t5.* weights."""
    import torch
    from safetensors.torch import save_file
    from transformers import T5Config, T5ForTokenClassification

    torch.manual_seed(seed)
    config = T5Config.from_pretrained(foundation)
    config.num_labels = 2
    config.initializer_factor = 4.0  # random heads that give scores that differ
    model = T5ForTokenClassification(config)
    state = {"t5." + k: v.contiguous() for k, v in model.state_dict().items()}
    state.pop("t5.transformer.encoder.embed_tokens.weight")  # tied: stored once
    folder.mkdir(parents=True)
    save_file(state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["HHEMv2ForSequenceClassification"],
                "auto_map": {
                    "AutoModelForSequenceClassification": "modeling_hhem_v2."
                    "HHEMv2ForSequenceClassification"
                },
                "model_type": "HHEMv2",
                "foundation": str(foundation),
                "prompt": DEFAULT_PROMPT,
            }
        )
    )
    # The repository's own code: present, as on the hub, and never executed.
    (folder / "modeling_hhem_v2.py").write_text("raise SystemExit('remote code ran')\n")
    return folder


@pytest.fixture(scope="module")
def hhem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hhem")
    foundation = build("t5", root / "flan-t5-base")
    return make_hhem(root / "hhem", foundation)


def reference_predict(folder: Path, text_pairs: list[tuple[str, str]]) -> list[float]:
    """vectara's ``predict``: one padded batch of prompts, first token, class 1."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoTokenizer, T5ForTokenClassification

    config = json.loads((folder / "config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(config["foundation"])
    t5 = T5ForTokenClassification(AutoConfig.from_pretrained(config["foundation"]))
    weights = load_file(str(folder / "model.safetensors"))
    t5.load_state_dict({k[3:]: v for k, v in weights.items()}, strict=False)
    t5.eval()
    prompts = [config["prompt"].format(text1=p, text2=h) for p, h in text_pairs]
    inputs = tokenizer(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = t5(**inputs).logits[:, 0, :]
    return torch.softmax(logits, dim=-1)[:, 1].tolist()


def item(passages: list[str], claim: str) -> JudgeItem:
    return JudgeItem(
        Segment(0, 0, len(claim), claim),
        tuple(Evidence(i, f"d{i}", "", p, 0.5) for i, p in enumerate(passages)),
    )


def test_scores_equal_vectaras_predict(hhem: Path) -> None:
    judge: Any = create_judge(f"hhem:{hhem}", {"batch_size": 3})
    s = sentences(60, seed=5)
    cases = [
        ([s[0]], s[1]),
        ([" ".join(s[2:20])], s[20]),
        (s[21:24], s[24]),
        ([" ".join(s[25:58])], s[58]),
        (["The tower was built in 1889."], "Built in 1889."),
    ]
    premises = [("\n".join(p), c) for p, c in cases]
    expected = reference_predict(hhem, premises)
    assert judge.scores(premises) == pytest.approx(expected, abs=1e-5)
    assert max(expected) - min(expected) > 1e-3, "random head too flat to show parity"
    verdicts = judge.judge([item(p, c) for p, c in cases])
    for (passages, _), verdict, score in zip(cases, verdicts, expected):
        assert verdict.score == pytest.approx(score, abs=1e-4)
        assert (verdict.verdict == "supported") == (score > 0.5)
        assert verdict.cited == (tuple(range(len(passages))) if score > 0.5 else ())
        assert f"{score:.3f}" in verdict.reason


def test_prompt_is_hhems_template(hhem: Path) -> None:
    judge: Any = create_judge(f"hhem:{hhem}")
    text = judge.prompt_text("Paris is in France.", "Paris is French.")
    assert text == (
        "<pad> Determine if the hypothesis is true given the premise?\n\n"
        "Premise: Paris is in France.\n\nHypothesis: Paris is French."
    )
    assert judge.encode([("Paris is in France.", "Paris is French.")])[0][0] == 0  # <pad>


def test_an_hhem_folder_without_its_foundation_is_refused(
    hhem: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    other = tmp_path / "hhem"
    other.mkdir()
    (other / "model.safetensors").write_bytes((hhem / "model.safetensors").read_bytes())
    (other / "config.json").write_text(json.dumps({"foundation": "google/flan-t5-base"}))
    with pytest.raises(UsageError, match=r"google/flan-t5-base.*ceg models pull hhem-2.1-open"):
        create_judge(f"hhem:{other}")
