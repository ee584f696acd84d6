"""The checkers' one batching loop (ceg_cli/judges/checkers/batching.py): sorted, token-budgeted.

MiniCheck, HHEM and the NLI judge all run their pairs through ``run_batches``:
batches sorted by length, at most ``batch_size`` pairs and, on a CPU, at most
``batch_tokens`` padded tokens each. The budget changes only the schedule: the
scores equal those of one pair at a time within 1e-5 (tiny random models of
each architecture, tests/tiny_checkers.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tiny_checkers import build, sentences

from ceg_cli.errors import UsageError
from ceg_cli.judges import create_judge
from ceg_cli.judges.checkers import batching
from ceg_cli.judges.checkers.batching import CPU_BATCH_TOKENS, length_batches, run_batches
from ceg_cli.types import Evidence, JudgeItem, Segment

# --- the schedule --------------------------------------------------------------


def test_batches_are_sorted_and_hold_at_most_batch_size() -> None:
    lengths = [50, 10, 30, 20, 40]
    assert length_batches(lengths, 2) == [[1, 3], [2, 4], [0]]


def test_the_token_budget_counts_padded_tokens() -> None:
    # Sorted: 10, 20, 30, 40, 300. Padded size = pairs x the batch's longest.
    lengths = [300, 10, 20, 30, 40]
    assert length_batches(lengths, 16, 90) == [[1, 2, 3], [4], [0]]
    # Without a budget only the count limits a batch.
    assert length_batches(lengths, 16, None) == [[1, 2, 3, 4, 0]]


def test_a_full_batch_is_cut_before_a_fifth_of_it_is_padding() -> None:
    # HHEM-like lengths (a whole evidence each): by the budget alone the first batch
    # would be 131..300 tokens (5 x 300 = 1,500 padded for 1,090 real).
    lengths = [131, 180, 220, 259, 300, 350, 440, 594]
    batches = length_batches(lengths, 16, 2048)
    assert batches == [[0, 1, 2], [3, 4, 5], [6, 7]]
    # Below FULL_ROWS padded tokens a batch keeps filling: short pairs gain the most.
    assert length_batches([20, 40, 60, 100], 16, 2048) == [[0, 1, 2, 3]]
    # Without a budget (a GPU) only the count limits a batch.
    assert length_batches(lengths, 16, None) == [list(range(8))]


def test_an_item_over_the_budget_is_a_batch_of_its_own() -> None:
    assert length_batches([500, 600, 5], 16, 100) == [[2], [0], [1]]


def test_equal_lengths_keep_their_order_and_nothing_is_lost() -> None:
    lengths = [7] * 5 + [3] * 4
    batches = length_batches(lengths, 3, 15)
    assert [i for b in batches for i in b] == [5, 6, 7, 8, 0, 1, 2, 3, 4]
    assert all(len(b) * max(lengths[i] for i in b) <= 15 for b in batches)
    assert length_batches([], 4, 10) == []


class FakeTokenizer:
    """Pads with 0 to the batch's longest, as ``tokenizer.pad`` does."""

    def pad(self, enc: dict[str, list[list[int]]], padding: bool, return_tensors: str) -> Any:
        import torch

        width = max(len(x) for x in enc["input_ids"])
        out = {k: torch.tensor([x + [0] * (width - len(x)) for x in v]) for k, v in enc.items()}
        out["attention_mask"] = torch.tensor(
            [[1] * len(x) + [0] * (width - len(x)) for x in enc["input_ids"]]
        )
        return out


def test_run_batches_returns_rows_in_the_pairs_order_within_the_budget() -> None:
    import torch

    ids = [[1] * n for n in (9, 2, 5, 2, 7)]
    types = [[0] * n for n in (9, 2, 5, 2, 7)]
    shapes: list[tuple[int, ...]] = []

    def forward(inputs: dict[str, Any]) -> Any:
        shapes.append(tuple(inputs["input_ids"].shape))
        assert set(inputs) == {"input_ids", "token_type_ids", "attention_mask"}
        return inputs["attention_mask"].sum(dim=1, keepdim=True).to(torch.float32)

    rows = run_batches(
        {"input_ids": ids, "token_type_ids": types},
        FakeTokenizer(),
        forward,
        device="cpu",
        batch_size=4,
        batch_tokens=10,
    )
    assert rows == [[9.0], [2.0], [5.0], [2.0], [7.0]]
    assert shapes == [(2, 2), (1, 5), (1, 7), (1, 9)]
    nothing = run_batches({"input_ids": []}, FakeTokenizer(), forward, device="cpu", batch_size=4)
    assert nothing == []


# --- the judges ----------------------------------------------------------------


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from test_judge_hhem import make_hhem

    root = tmp_path_factory.mktemp("batching")
    out = {f: build(f, root / f, seed=i) for i, f in enumerate(("roberta", "deberta-v2", "t5"))}
    out["hhem"] = make_hhem(root / "hhem", out["t5"])
    return out


def judge_spec(family: str, models: dict[str, Path]) -> str:
    if family == "hhem":
        return f"hhem:{models['hhem']}"
    if family == "nli":
        return f"nli:{models['deberta-v2']}"
    return f"minicheck:{models[family]}"


def items() -> list[JudgeItem]:
    """Claims against evidence of 1-3 passages: two short pairs, two long ones."""
    s = sentences(60, seed=4)
    evidence = [s[0:1], s[1:2], [" ".join(s[4:8]), s[8]], [s[9], " ".join(s[10:16]), s[16]]]
    claims = [s[20], s[21], " ".join(s[22:24]), s[25]]
    return [
        JudgeItem(
            Segment(0, 0, len(c), c),
            tuple(Evidence(i, f"d{i}", "", p, 0.5) for i, p in enumerate(ev)),
        )
        for ev, c in zip(evidence, claims)
    ]


class Recorder:
    """Wraps ``batching.run_batches``: records every batch's padded shape."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.shapes: list[tuple[int, int]] = []
        real = batching.run_batches

        def spy(encoded: Any, tokenizer: Any, forward: Any, **kw: Any) -> Any:
            def watched(inputs: dict[str, Any]) -> Any:
                rows, width = inputs["input_ids"].shape
                self.shapes.append((int(rows), int(width)))
                return forward(inputs)

            self.budget = kw["batch_tokens"]
            return real(encoded, tokenizer, watched, **kw)

        monkeypatch.setattr(batching, "run_batches", spy)


#: One unit of the 4-place rounding of a checker's score, and float noise on top.
ROUNDED = 1.01e-4


@pytest.mark.parametrize("family", ["roberta", "deberta-v2", "t5", "hhem", "nli"])
def test_every_family_batches_through_the_shared_loop_within_its_budget(
    models: dict[str, Path], family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = judge_spec(family, models)
    one: Any = create_judge(spec, {"batch_size": 1})
    expected = [v.score for v in one.judge(items())]
    recorder = Recorder(monkeypatch)
    unlimited: Any = create_judge(spec, {"batch_size": 16})
    unlimited.batch_tokens = None  # as on a GPU: only the count limits a batch
    # Scores are rounded to 4 places: a batched sum that differs in the last float bits
    # can round one unit apart where the raw score sits on a half (0.76885: seen once in
    # a loaded CI run), so one unit of that rounding is the tolerance.
    assert [v.score for v in unlimited.judge(items())] == pytest.approx(expected, abs=ROUNDED)
    [(total, longest)] = recorder.shapes  # every pair in one batch
    assert total >= 4
    # A budget of the longest pair: that pair alone, the short ones together.
    recorder.shapes = []
    judge: Any = create_judge(spec, {"batch_size": 16, "batch_tokens": longest})
    got = [v.score for v in judge.judge(items())]
    assert got == pytest.approx(expected, abs=ROUNDED)
    assert recorder.budget == longest and len(recorder.shapes) > 1
    assert all(rows * width <= longest for rows, width in recorder.shapes)
    assert any(rows > 1 for rows, _ in recorder.shapes), "the budget left nothing to batch"
    assert sum(rows for rows, _ in recorder.shapes) == total  # none dropped, none repeated


@pytest.mark.parametrize("family", ["roberta", "hhem", "nli"])
def test_a_cpu_judge_has_the_default_budget_and_refuses_a_bad_one(
    models: dict[str, Path], family: str
) -> None:
    spec = judge_spec(family, models)
    judge: Any = create_judge(spec)
    assert judge.batch_tokens == CPU_BATCH_TOKENS
    assert create_judge(spec, {"batch_tokens": 4096}).batch_tokens == 4096  # type: ignore[attr-defined]
    for bad, says in ((0, "must be at least 1"), ("many", "must be a number")):
        with pytest.raises(UsageError, match=f"batch_tokens {says}"):
            create_judge(spec, {"batch_tokens": bad})


def test_without_a_budget_only_the_count_limits_a_batch() -> None:
    assert batching.batch_tokens_option({}, "cuda", "x") is None
    assert batching.batch_tokens_option({}, "cpu", "x") == CPU_BATCH_TOKENS
    assert batching.batch_tokens_option({"batch_tokens": "512"}, "cuda", "x") == 512


def test_batch_tokens_reaches_the_checker_from_the_cli_and_the_api(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, run_cli: Any, tmp_path: Path
) -> None:
    """``--batch-tokens N`` (and ``Checker(batch_tokens=N)``, ``ceg eval``) is the budget the
    checker batches by; without it, the device's default."""
    import json

    from ceg_cli import Checker

    spec = judge_spec("roberta", models)
    s = sentences(40, seed=9)
    rows = [{"id": n, "response": s[n], "label": True, "contexts": [" ".join(s[10:14]), s[n + 1]]}
            for n in range(6)]
    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    recorder = Recorder(monkeypatch)
    for command in (["check", src, "--out", tmp_path / "out.jsonl"], ["eval", src]):
        recorder.shapes = []
        result = run_cli(*command, "--judge", spec, "--evidence", "contexts",
                         "--batch-tokens", "60", "-q")
        assert result.exit_code == 0, result.stderr
        assert recorder.budget == 60, command
        assert recorder.shapes and all(r * w <= 60 or r == 1 for r, w in recorder.shapes)
    result = run_cli("check", src, "--judge", spec, "--evidence", "contexts", "-q",
                     "--out", tmp_path / "default.jsonl")
    assert result.exit_code == 0 and recorder.budget == CPU_BATCH_TOKENS
    with Checker(judge=spec, evidence="contexts", batch_tokens=60) as checker:
        checker.check(s[0], contexts=[s[1]])
    assert recorder.budget == 60
