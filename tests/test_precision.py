"""``ceg index build --precision``: float16 on CUDA by default, recorded in meta.json (issue 25).

float16 vectors must agree with float32's at cosine >= 0.99999 (measured here
on the CPU, which has float16 kernels, slowly); the model the rest of the
process shares stays float32; float16 where it cannot run well is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import MINI_WIKI, HashEmbedder
from ranged_builds import meta_of

from ceg_cli.corpus import iter_positioned
from ceg_cli.errors import UsageError
from ceg_cli.index.build.builder import BuildOptions, build_index, vector_precision
from ceg_cli.index.build.chunking import chunk_or_skip
from ceg_cli.index.dense.devices import resolve_precision
from ceg_cli.index.dense.embedding import SentenceTransformerEmbedder, resolve_model
from ceg_cli.index.layout import embed_text


@pytest.mark.parametrize(
    ("asked", "device", "used"),
    [("auto", "cuda", "float16"), ("auto", "cpu", "float32"), ("float32", "cuda", "float32"),
     ("float16", "cuda", "float16")],
)
def test_auto_is_float16_on_cuda_only(asked: str, device: str, used: str) -> None:
    assert resolve_precision(asked, device) == used


@pytest.mark.parametrize("asked", ["float16", "bfloat16"])
def test_float16_off_cuda_and_unknown_widths_are_refused(asked: str) -> None:
    with pytest.raises(UsageError, match=f"--precision {asked}"):
        resolve_precision(asked, "cpu")


def test_float16_vectors_agree_with_float32(embedder: Any) -> None:
    texts = []
    for _offset, doc in iter_positioned(MINI_WIKI):
        texts += [embed_text(c, "title+text") for c in chunk_or_skip(doc, 100, None) or []]
        if len(texts) >= 12:
            break
    texts = texts[:12]
    half = SentenceTransformerEmbedder(resolve_model(None), device="cpu", precision="float16")
    assert half.precision == "float16"
    state = half.tokenizer_state()
    assert state is not None
    from ceg_cli.index.dense.pretokenized import tokenize

    reference = embedder.embed(texts)
    for vectors in (half.embed(texts), half.embed_tokens(tokenize(state, texts))):
        assert vectors.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
        cosine = (vectors * reference).sum(axis=1)
        assert cosine.min() >= 0.99999
        assert np.abs(vectors - reference).max() > 0  # float16 did compute: not the same floats
    # The shared model that queries use stays float32.
    assert next(embedder._model.parameters()).dtype.is_floating_point
    assert str(next(embedder._model.parameters()).dtype) == "torch.float32"


def test_the_command_refuses_float16_on_the_cpu_before_writing(
    run_cli: Any, tmp_path: Path
) -> None:
    result = run_cli("index", "build", MINI_WIKI, "--index", tmp_path / "idx",
                     "--device", "cpu", "--precision", "float16", "--quiet")
    assert result.exit_code == 2
    assert "--precision float16 runs on CUDA only" in result.stderr
    assert not (tmp_path / "idx").exists()


def test_float16_is_not_for_ray(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--engine local"):
        build_index([MINI_WIKI], tmp_path / "idx",
                    BuildOptions(engine="ray", precision="float16"), embedder=HashEmbedder())


class Half(HashEmbedder):
    precision = "float16"


def test_meta_records_the_width_and_an_append_in_another(
    tmp_path: Path, run_cli: Any, hash_model: None
) -> None:
    build_index([MINI_WIKI], tmp_path / "idx", embedder=HashEmbedder())
    meta = meta_of(tmp_path / "idx")
    assert meta["model"]["precision"] == "float32"
    info = run_cli("index", "info", "--index", tmp_path / "idx")
    assert ["precision", "float32"] in [line.split() for line in info.stdout.splitlines()]
    assert vector_precision(meta, HashEmbedder()) == "float32"
    assert vector_precision(meta, Half()) == "mixed"
    assert vector_precision(None, Half()) == "float16"
    assert vector_precision({**meta, "counts": {"documents": 0, "chunks": 0}}, Half()) == "float16"
