"""Embedding backends (torch, onnx, onnx-int8) and devices (auto, cpu, cuda).

The fast tests load no model: the choices are checked before any weights are
read. The slow ones load the shipped model and compare the ONNX backends with
the float model on real sample passages.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import need_extra

from ceg_cli.errors import UsageError
from ceg_cli.index import open_index
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.dense import embedding
from ceg_cli.index.dense.devices import DEVICES, resolve_device
from ceg_cli.index.dense.embedding import (
    BACKENDS,
    choose_backend,
    load_embedder,
    query_backend,
)

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch sees no CUDA device, as on the project's machine (and whatever the machine)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_auto_is_the_cpu_on_this_machine() -> None:
    import torch

    # The real answer here, no patching: this machine's torch has no CUDA.
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"


def test_auto_is_cuda_where_torch_sees_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda"
    assert resolve_device("cuda") == "cuda"
    assert resolve_device("cpu") == "cpu"


def test_cuda_without_cuda_is_a_usage_error(no_cuda: None) -> None:
    assert resolve_device("auto") == "cpu"
    with pytest.raises(UsageError, match="--device cuda: torch .* sees no CUDA device"):
        resolve_device("cuda")


def test_an_unknown_device_or_backend_names_the_choices() -> None:
    with pytest.raises(UsageError, match="auto, cpu, cuda"):
        resolve_device("tpu")
    with pytest.raises(UsageError, match="torch, onnx, onnx-int8"):
        load_embedder(backend="tensorrt")


def test_the_onnx_backends_refuse_cuda_before_loading_anything() -> None:
    with pytest.raises(UsageError, match="CPU only"):
        load_embedder(backend="onnx-int8", device="cuda")


@pytest.mark.parametrize(
    ("requested", "recorded", "chosen"),
    [(None, None, "torch"), ("onnx", None, "onnx"), (None, "onnx-int8", "onnx-int8"),
     ("onnx", "onnx", "onnx")],
)
def test_a_build_uses_the_backend_asked_for_else_the_index_own(
    requested: str | None, recorded: str | None, chosen: str
) -> None:
    assert choose_backend(requested, recorded) == chosen


def test_appending_with_another_backend_is_refused() -> None:
    with pytest.raises(UsageError, match="built with --backend onnx-int8; cannot append"):
        choose_backend("torch", "onnx-int8")


def test_queries_use_the_build_backend_or_the_float_model_without_onnxruntime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = {"name": "m", "dimension": 384, "backend": "onnx-int8"}
    assert query_backend(model) == "onnx-int8"
    assert query_backend({"name": "m", "dimension": 384}) == "torch"  # older index

    def missing() -> None:
        raise UsageError("the ONNX backends need onnxruntime")

    monkeypatch.setattr(embedding, "_import_onnx_runtime", missing)
    assert query_backend(model) == "torch"


def test_the_cli_choices_are_the_module_choices() -> None:
    from ceg_cli.cli.index_cmd import EmbedBackend, EmbedDevice

    assert tuple(b.value for b in EmbedBackend) == BACKENDS
    assert tuple(d.value for d in EmbedDevice) == DEVICES


def test_cli_device_cuda_without_cuda_exits_2(
    run_cli: Any, tmp_path: Path, no_cuda: None
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Aristotle tutored Alexander the Great.\n", encoding="utf-8")
    result = run_cli("index", "build", docs, "--index", tmp_path / "ix", "--device", "cuda")
    assert result.exit_code == 2, result.output
    assert "--device cuda: torch" in result.stderr
    assert not (tmp_path / "ix").exists()


def test_cli_warns_that_int8_is_below_the_agreement_bar(
    run_cli: Any, tmp_path: Path, no_cuda: None
) -> None:
    # --device cuda stops the build before a model loads; the warning comes first.
    result = run_cli("index", "build", tmp_path, "--backend", "onnx-int8", "--device", "cuda")
    assert result.exit_code == 2
    assert "below the agreement bar" in result.stderr
    assert "min 0.987" in result.stderr


def test_cli_unknown_backend_exits_2(run_cli: Any, tmp_path: Path) -> None:
    result = run_cli("index", "build", tmp_path, "--backend", "tensorrt")
    assert result.exit_code == 2
    assert "torch" in result.stderr and "onnx-int8" in result.stderr


def test_meta_records_the_backend_and_append_keeps_it(
    tmp_path: Path, hash_embedder: Any, run_cli: Any
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Aristotle tutored Alexander the Great.\n", encoding="utf-8")
    target = tmp_path / "ix"
    build_index([docs], target, BuildOptions(), embedder=hash_embedder)
    meta = json.loads((target / "meta.json").read_text(encoding="utf-8"))
    assert meta["model"]["backend"] == "torch"
    info = run_cli("index", "info", "--index", target)
    assert ["backend", "torch"] in [line.split() for line in info.stdout.splitlines()]
    (docs / "b.txt").write_text("Sundials tell the time.\n", encoding="utf-8")
    # Refused before any model is loaded: the index holds torch vectors.
    with pytest.raises(UsageError, match="built with --backend torch; cannot append"):
        build_index([docs], target, BuildOptions(append=True, backend="onnx-int8"))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_onnx_backends_agree_with_the_float_model(
    backend: str, embedder: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path))
    passages = [
        "Aristotle. Aristotle was an Ancient Greek philosopher and polymath.",
        "Anarchism. Anarchism is a political philosophy and movement that is against all "
        "forms of authority and seeks to abolish the institutions it claims maintain "
        "unnecessary coercion and hierarchy, typically including the state and capitalism.",
        "",
    ]
    fast = load_embedder(backend=backend)
    assert fast.backend == backend
    vectors = fast.embed(passages)
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosine = (vectors * embedder.embed(passages)).sum(axis=1)
    # The bar is for real passages; an empty text (never a passage) agrees less
    # under int8 (0.97 measured), but still points the same way. int8 measured
    # 0.9896 and 0.9905 with onnx 1.23.2, onnxruntime 1.31-1.32 and transformers
    # 5.24 (above 0.99 with the versions of a month before): the bar leaves
    # room for the quantizer's version, not for a wrong export (below 0.9).
    assert cosine[:2].min() >= (0.985 if backend == "onnx-int8" else 0.9999)
    assert cosine[2] >= 0.95
    # The export is cached: a second load reuses the file (an export is written
    # under another name and renamed: a new file would be a new inode), and
    # marks it used for `ceg cache prune`.
    exported = sorted(tmp_path.glob("onnx/*/*.onnx"))
    inodes = [os.stat(p).st_ino for p in exported]
    used = max(os.stat(p).st_mtime_ns for p in exported)
    load_embedder(backend=backend)
    assert [os.stat(p).st_ino for p in exported] == inodes
    assert max(os.stat(p).st_mtime_ns for p in exported) > used
    assert fast.embed([]).shape == (0, 384)


@pytest.mark.slow
def test_an_onnx_index_answers_queries_with_its_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "aristotle.txt").write_text(
        "Aristotle tutored Alexander the Great from 343 BC.\n", encoding="utf-8"
    )
    (docs / "sundial.txt").write_text("Sundials tell the time from the Sun.\n", encoding="utf-8")
    target = tmp_path / "ix"
    build_index([docs], target, BuildOptions(backend="onnx-int8", device="auto"))
    with open_index(target) as index:
        assert index.meta["model"]["backend"] == "onnx-int8"
        assert index.embedder().backend == "onnx-int8"
        hits = index.search(["Who taught Alexander the Great?"], k=1)
    assert "Aristotle" in hits[0][0].chunk.text


@pytest.mark.slow
def test_an_onnx_export_leaves_the_shared_torch_model_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mini_wiki: Path
) -> None:
    """Exporting for ONNX tokenized with and traced the process's one loaded model, and
    an index built after it in the same process got other vectors (cosine 0.96 with a
    build before it): every later torch build and embedder shares that model."""
    need_extra("onnxruntime", "fast")
    from ceg_cli.index.dense.embedding import _load_sentence_transformer, resolve_model
    from ceg_cli.index.dense.onnxexport import onnx_export

    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))  # a fresh export
    spec = resolve_model(None)
    model = embedding.load_embedder()
    build_index([mini_wiki], tmp_path / "before", BuildOptions(), embedder=model)
    onnx_export(_load_sentence_transformer(spec.location, "cpu"), spec.location, quantized=False)
    build_index([mini_wiki], tmp_path / "after", BuildOptions(), embedder=embedding.load_embedder())
    with open_index(tmp_path / "before") as a, open_index(tmp_path / "after") as b:
        assert a.size == b.size
        ids = list(range(0, a.size, 7))
        before = np.vstack([a._vectors.reconstruct(i) for i in ids])
        after = np.vstack([b._vectors.reconstruct(i) for i in ids])
    assert np.abs(after - before).max() < 1e-5
