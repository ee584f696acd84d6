"""The default embedder: offline, normalized float32, deterministic, meaningful."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ceg_cli.errors import BackendError, UsageError
from ceg_cli.index.dense.embedding import DEFAULT_MODEL, Embedder, load_embedder, resolve_model

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


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to resolve a host name or open a connection fails the test."""
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a network attempt was made: {args[:2]}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.mark.parametrize("name", ["org/not-on-this-machine", "/no/such/model/dir"])
def test_a_model_not_on_this_machine_fails_at_once_without_the_network(
    name: str, no_network: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An empty cache: whatever this machine holds cannot answer for the name.
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(UsageError) as err:
        load_embedder(name)
    message = str(err.value)
    assert "\n" not in message
    assert f"{name!r} is not on this machine" in message
    assert "--model PATH" in message and DEFAULT_MODEL in message


def test_index_build_with_a_model_not_on_this_machine_exits_2_in_one_line(
    run_cli: Any, no_network: None, tmp_path: Path
) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "1", "title": "T", "text": "Some text."}\n', encoding="utf-8")
    result = run_cli("index", "build", docs, "--index", tmp_path / "index", "-q",
                     "--model", "org/not-on-this-machine")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: embedding model 'org/not-on-this-machine' is not "
                                    "on this machine")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "index").exists()


@pytest.mark.slow
def test_a_model_in_the_local_hub_cache_loads_by_name(tmp_path: Path) -> None:
    """A hub name whose snapshot is in the Hugging Face cache loads with no network."""
    commit = "0" * 40
    repo = tmp_path / "hub" / "models--org--cached-minilm"
    (repo / "snapshots").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit, encoding="utf-8")
    (repo / "snapshots" / commit).symlink_to(resolve_model(None).location)
    script = (
        "import socket\n"
        "def refuse(*a, **k): raise AssertionError('network')\n"
        "socket.getaddrinfo = refuse\n"
        "from ceg_cli.index.dense.embedding import load_embedder\n"
        "e = load_embedder('org/cached-minilm')\n"
        "print(e.name, e.dimension, e.embed(['Aristotle taught Alexander.']).shape)\n"
    )
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "0"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["org/cached-minilm", "384", "(1,", "384)"]
