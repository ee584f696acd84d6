"""``--judge-precision``: checker models computed in bfloat16 (or float16 on CUDA).

Tiny random models of each family (tests/tiny_checkers.py): the weights are cast,
the scores stay within a tolerance of float32's, float16 is refused on a CPU before
any model loads and for T5 at any device, with one line and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_judge_hhem import make_hhem
from tiny_checkers import build, sentences

from ceg_cli.errors import UsageError
from ceg_cli.judges import create_judge
from ceg_cli.judges.checkers.precision import precision_option, to_precision
from ceg_cli.types import Evidence, JudgeItem, Segment

#: bfloat16 keeps 8 bits of mantissa: a probability moves by a few hundredths at
#: most through these two-layer models (measured: 0.002 to 0.023).
TOLERANCE = 0.05


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("precision")
    out = {f"minicheck:{build(f, root / f, seed=n)}": f
           for n, f in enumerate(("roberta", "deberta-v2", "t5"))}
    out[f"nli:{build('roberta', root / 'nli', seed=5)}"] = "roberta"
    out[f"hhem:{make_hhem(root / 'hhem', build('t5', root / 'flan-t5-base'))}"] = "t5"
    return out


def items() -> list[JudgeItem]:
    s = sentences(40, seed=3)
    pairs = [(" ".join(s[:3]), s[1]), (" ".join(s[5:20]), s[30]), (s[21], s[22])]
    return [JudgeItem(Segment(0, 0, len(c), c), (Evidence(0, "d", "", p, 0.9),))
            for p, c in pairs]


def test_bfloat16_casts_the_weights_and_keeps_scores_near_float32(
    models: dict[str, str],
) -> None:
    import torch

    for name in models:
        full: Any = create_judge(name, {"device": "cpu"})
        half: Any = create_judge(name, {"device": "cpu", "precision": "bfloat16"})
        assert next(full.model.parameters()).dtype == torch.float32
        assert next(half.model.parameters()).dtype == torch.bfloat16, name
        a = [v.score for v in full.judge(items())]
        b = [v.score for v in half.judge(items())]
        assert all(0.0 <= x <= 1.0 for x in b), (name, b)
        assert b == pytest.approx(a, abs=TOLERANCE), name
        # Float32 is untouched by a bfloat16 load of the same folder (no shared cache).
        assert [v.score for v in full.judge(items())] == a


def test_float16_on_a_cpu_is_refused_before_loading(
    run_cli: Any, tmp_path: Path, models: dict[str, str]
) -> None:
    name = next(iter(models))
    with pytest.raises(UsageError, match="float16 is for a CUDA GPU"):
        precision_option({"precision": "float16"}, "cpu", name)
    responses = tmp_path / "r.jsonl"
    responses.write_text('{"response": "Paris is in France.", "contexts": ["Paris."]}\n')
    result = run_cli("check", responses, "--index", tmp_path / "none", "--judge", name,
                     "--judge-precision", "float16", "--device", "cpu")
    assert result.exit_code == 2, result.stderr
    assert "float16 is for a CUDA GPU" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_float16_is_refused_for_t5_which_overflows_in_it(models: dict[str, str]) -> None:
    import torch
    from transformers import AutoModelForSeq2SeqLM

    t5 = next(n for n, f in models.items() if f == "t5" and n.startswith("minicheck:"))
    model = AutoModelForSeq2SeqLM.from_pretrained(t5.partition(":")[2])
    with pytest.raises(UsageError, match="overflows in float16"):
        to_precision(model, "float16", "flan-t5")
    roberta = next(n for n, f in models.items() if f == "roberta")
    from transformers import AutoModelForSequenceClassification

    other = AutoModelForSequenceClassification.from_pretrained(roberta.partition(":")[2])
    assert next(to_precision(other, "float16", "r").parameters()).dtype == torch.float16


def test_an_unknown_precision_is_a_usage_error(run_cli: Any, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--judge-precision int4"):
        precision_option({"precision": "int4"}, "cpu", "nli:x")
    responses = tmp_path / "r.jsonl"
    responses.write_text('{"response": "x.", "contexts": ["x."]}\n')
    result = run_cli("check", responses, "--judge-precision", "int4")
    assert result.exit_code == 2
