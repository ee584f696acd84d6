"""benchmarks/check/checker_speed.py: the stated workload and the interleaved timing.

The benchmark's figures are only as honest as its workload and its schedule: the
``evidence`` workload must be what the docstring states (1-5 passages of at most
130 tokens, mostly 1-3), and the reference and batched paths must alternate group
by group over the same pairs, so that load from other work falls on both.
No model runs here.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("checker_speed",
                                                  BENCH / "check" / "checker_speed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def count(text: str) -> int:
    """A stand-in tokenizer: two tokens a word."""
    return 2 * len(text.split())


def test_the_evidence_workload_is_the_stated_distribution(bench: ModuleType) -> None:
    pairs = bench.workload_evidence(400, count)
    assert pairs == bench.workload_evidence(400, count)  # seeded
    passages = Counter(len(ps) for ps, _ in pairs)
    assert set(passages) == {1, 2, 3, 4, 5}
    assert sum(passages[k] for k in (1, 2, 3)) / len(pairs) > 0.7
    low, high = bench.PASSAGE_TOKENS
    sizes = [count(p) for ps, _ in pairs for p in ps]
    assert max(sizes) <= high
    assert sum(sizes) / len(sizes) > (low + high) / 2 - 20
    assert all(len(claim.split()) <= 15 for _, claim in pairs)  # one sentence of 8-14 words


def test_the_paths_alternate_over_the_same_groups(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, int]] = []

    class Verdict:
        def __init__(self, score: float) -> None:
            self.score = score

    class Judge:
        def __init__(self, name: str) -> None:
            self.name = name

        def judge(self, items: list[Any]) -> list[Verdict]:
            calls.append((self.name, len(items)))
            return [Verdict(float(len(it.segment.text))) for it in items]

    plain = Judge("plain")

    def reference(judge: Any, group: list[Any]) -> list[float]:
        # The authors' loop runs on its own model, as they load it, not on ceg's judge.
        assert judge is plain
        calls.append(("reference", len(group)))
        return [float(len(claim)) for _, claim in group]

    pairs = [(("passage",), "claim " * (i + 1)) for i in range(10)]
    judges = {"batched": Judge("batched"), "fixed": Judge("fixed")}
    got = bench.measure(judges, reference, plain, pairs, 3)
    assert calls == [
        ("reference", 4), ("batched", 4), ("fixed", 4),
        ("fixed", 4), ("batched", 4), ("reference", 4),
        ("reference", 2), ("batched", 2), ("fixed", 2),
    ]  # fmt: skip
    assert got["scores"]["reference"] == got["scores"]["batched"] == got["scores"]["fixed"]
    assert got["scores"]["reference"] == [float(len(c)) for _, c in pairs]
    assert set(got["seconds"]) == {"reference", "batched", "fixed"}


def test_a_variant_names_judge_options(bench: ModuleType) -> None:
    assert bench.parse_variant("torch:kernels=torch") == ("torch", {"kernels": "torch"})
    assert bench.parse_variant("w:batch_tokens=1024,kernels=torch") == (
        "w", {"batch_tokens": 1024, "kernels": "torch"})
    for bad in ("torch", "torch:", ":kernels=torch", "torch:kernels", "torch:=x"):
        with pytest.raises(SystemExit, match="NAME:KEY=VALUE"):
            bench.parse_variant(bad)


def test_a_path_is_set_beside_the_authors_loop(bench: ModuleType) -> None:
    got = {"seconds": {"reference": 4.0, "bf16": 2.0},
           "scores": {"reference": [0.9, 0.2, 0.6, 0.1], "bf16": [0.8, 0.3, 0.4, 0.1]}}
    assert bench.against_reference(got, "bf16") == {
        "pairs_per_s": 2.0, "speedup": 2.0, "max_abs_diff": 0.2, "verdict_agreement": 0.75}
