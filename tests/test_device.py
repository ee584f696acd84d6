"""``--device`` on ``ceg check``, ``ceg eval`` and ``ceg judge train`` (issue 25).

This machine has no GPU, so CUDA is faked at the one place ceg asks torch
about it (``torch.cuda.is_available``): with it off, ``--device cuda`` must be
refused with one line (exit 2) before anything is written, and ``auto`` must
compute on the CPU exactly as before; with it on, the device must reach the
loaders of the index's embedder and of the verifier's cross-encoder (the
loaders are stood in for, since there is no CUDA to load onto).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

RESPONSE = {"id": "r1", "question": "Who was Aristotle?",
            "response": "Aristotle was an Ancient Greek philosopher."}


@pytest.fixture
def responses(tmp_path: Path) -> Path:
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps(RESPONSE) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """No CUDA; the index's model is the fake, loaded by the real rules for a device."""
    import torch
    from conftest import HashEmbedder

    import ceg_cli.index.store
    from ceg_cli.index.dense.devices import resolve_device

    def load(name: str | None = None, *, device: str = "cpu", **kwargs: Any) -> HashEmbedder:
        resolve_device(device)
        return HashEmbedder()

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(ceg_cli.index.store, "load_embedder", load)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("judge", ["offline", "verifier"])
def test_check_refuses_cuda_without_it_before_writing(
    run_cli: Any, hash_index: Path, no_cuda: None, responses: Path,
    tmp_path: Path, judge: str,
) -> None:
    out = tmp_path / "out.jsonl"
    result = run_cli("check", responses, "--index", hash_index, "--out", out, "--judge", judge,
                     "--device", "cuda", "--quiet")
    assert result.exit_code == 2
    assert "--device cuda: torch" in one_line(result.stderr)
    assert "sees no CUDA device" in result.stderr
    assert not out.exists()


def test_cuda_is_refused_where_no_model_would_load(
    run_cli: Any, no_cuda: None, tmp_path: Path,
) -> None:
    """The offline judge on the records' own contexts (ranked by BM25) loads no model;
    --device cuda is refused all the same, from the CLI and the API (issue 44 item 15)."""
    from ceg_cli import Checker
    from ceg_cli.errors import UsageError

    src = tmp_path / "own.jsonl"
    src.write_text(json.dumps({**RESPONSE, "contexts": ["Aristotle was a Greek philosopher."]})
                   + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    for command in (["check", src, "--out", out], ["eval", src]):
        result = run_cli(*command, "--device", "cuda", "--evidence", "contexts", "--quiet")
        assert result.exit_code == 2, result.stderr
        assert "--device cuda: torch" in one_line(result.stderr)
    assert not out.exists()
    with pytest.raises(UsageError, match="--device cuda: torch .* sees no CUDA device"):
        Checker(device="cuda")
    assert Checker(device="auto").check("Paris is in France.",
                                        contexts=["Paris is in France."]).label == "factual"


def test_check_on_auto_and_cpu_writes_what_the_default_writes(
    run_cli: Any, hash_index: Path, no_cuda: None, responses: Path,
    tmp_path: Path,
) -> None:
    outputs = []
    for extra in ([], ["--device", "auto"], ["--device", "cpu"]):
        out = tmp_path / f"out{len(outputs)}.jsonl"
        result = run_cli("check", responses, "--index", hash_index, "--out", out, "--quiet",
                         *extra)
        assert result.exit_code == 0, result.stderr
        record = json.loads(out.read_text(encoding="utf-8"))
        record.pop("elapsed_s", None)
        outputs.append(record["segments"])
    assert outputs[0] == outputs[1] == outputs[2]


def test_check_with_cuda_loads_both_models_there(
    run_cli: Any, hash_index: Path, responses: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch
    from conftest import HashEmbedder

    import ceg_cli.index.store
    import ceg_cli.judges.checkers.crossenc
    from ceg_cli.judges.checkers.crossenc import load_cross_encoder
    from ceg_cli.judges.checkers.verifier import _cross_encoder

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    asked: dict[str, str] = {}

    def embedder(name: str | None = None, **kwargs: Any) -> HashEmbedder:
        asked["embedder"] = kwargs.get("device", "cpu")
        return HashEmbedder()

    def cross_encoder(path: Any, *, quantize: bool = True, device: str = "cpu") -> Any:
        asked["cross_encoder"] = device
        return load_cross_encoder(path, quantize=quantize, device="cpu")  # no CUDA here

    monkeypatch.setattr(ceg_cli.index.store, "load_embedder", embedder)
    monkeypatch.setattr(ceg_cli.judges.checkers.crossenc, "load_cross_encoder", cross_encoder)
    _cross_encoder.cache_clear()
    try:
        result = run_cli("check", responses, "--index", hash_index, "--judge", "verifier",
                         "--device", "cuda", "--out", tmp_path / "out.jsonl", "--quiet")
    finally:
        _cross_encoder.cache_clear()
    assert result.exit_code == 0, result.stderr
    # The embedder resolves "cuda" itself (load_embedder); the judge is given it resolved.
    assert asked == {"embedder": "cuda", "cross_encoder": "cuda"}


def test_eval_refuses_cuda_without_it(
    run_cli: Any, hash_index: Path, no_cuda: None, tmp_path: Path,
) -> None:
    data = tmp_path / "labelled.jsonl"
    data.write_text(json.dumps({"response": RESPONSE["response"], "label": True}) + "\n",
                    encoding="utf-8")
    result = run_cli("eval", data, "--index", hash_index, "--device", "cuda", "--quiet")
    assert result.exit_code == 2
    assert "sees no CUDA device" in one_line(result.stderr)


def test_judge_train_refuses_cuda_without_it_before_writing(
    run_cli: Any, hash_index: Path, no_cuda: None, tmp_path: Path,
) -> None:
    out = tmp_path / "adapted"
    result = run_cli("judge", "train", "--index", hash_index, "--out", out, "--device", "cuda",
                     "--quiet")
    assert result.exit_code == 2
    assert "--device cuda: torch" in one_line(result.stderr)
    assert not out.exists()


def test_the_cross_encoder_scores_the_same_when_told_cpu() -> None:
    from ceg_cli.judges.checkers.crossenc import load_cross_encoder, score_pairs
    from ceg_cli.judges.checkers.verifier import SHIPPED

    pairs = [("Aristotle was a philosopher.", "Aristotle was an Ancient Greek philosopher."),
             ("Aristotle was a sailor.", "Aristotle was an Ancient Greek philosopher.")]
    tok, model = load_cross_encoder(SHIPPED, quantize=False)
    tok2, model2 = load_cross_encoder(SHIPPED, quantize=False, device="cpu")
    assert score_pairs(tok, model, pairs) == score_pairs(tok2, model2, pairs)
    supported, unsupported = score_pairs(tok, model, pairs)
    assert supported > unsupported
