"""The default embedder: offline, normalized float32, deterministic, meaningful."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ceg_cli.embedding import DEFAULT_MODEL, Embedder, load_embedder, resolve_model
from ceg_cli.errors import BackendError, UsageError

TEXTS = [
    "Aristotle tutored Alexander the Great from 343 BC.",
    "Animalia is an illustrated children's book by Graeme Base.",
    "",
    "ünïcödé — 日本語のテキスト",
]


@pytest.mark.parametrize("name", [None, "", "default", "all-MiniLM-L6-v2", DEFAULT_MODEL])
def test_default_model_resolves_to_the_shipped_directory(name: str | None) -> None:
    spec = resolve_model(name)
    assert spec.name == DEFAULT_MODEL
    location = Path(spec.location)
    assert location.is_dir()
    assert (location / "config.json").is_file()


def test_local_directory_and_hub_names(tmp_path: Path) -> None:
    assert resolve_model(str(tmp_path)).location == str(tmp_path.resolve())
    assert resolve_model(str(tmp_path)).name == str(tmp_path.resolve())
    assert resolve_model("org/some-model").location == "org/some-model"
    weights = tmp_path / "model.bin"
    weights.write_bytes(b"")
    with pytest.raises(UsageError, match="must be a directory"):
        resolve_model(str(weights))


@pytest.mark.slow
def test_a_directory_without_a_model_is_a_backend_error(tmp_path: Path) -> None:
    with pytest.raises(BackendError) as err:
        load_embedder(str(tmp_path))
    assert str(tmp_path) in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_embedder_gives_normalized_float32_rows(embedder: Embedder) -> None:
    assert embedder.name == DEFAULT_MODEL
    assert embedder.dimension == 384
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    assert vectors.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    empty = embedder.embed([])
    assert empty.shape == (0, 384)
    assert empty.dtype == np.float32


@pytest.mark.slow
def test_embedding_does_not_depend_on_the_batch(embedder: Embedder) -> None:
    alone = embedder.embed(TEXTS[:1])
    batched = embedder.embed(TEXTS)
    again = embedder.embed(TEXTS[:1])
    np.testing.assert_allclose(alone[0], batched[0], atol=1e-5)
    np.testing.assert_array_equal(alone, again)


@pytest.mark.slow
def test_similar_meaning_scores_higher(embedder: Embedder) -> None:
    query, relevant, other = embedder.embed(
        ["Who taught Alexander the Great?", TEXTS[0], "Sundials tell the time from the Sun."]
    )
    assert float(query @ relevant) > float(query @ other) + 0.2
