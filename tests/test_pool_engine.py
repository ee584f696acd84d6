"""``--engine local --workers N``: reader processes, the one-process build's index (issue 25).

The sources are cut into small ranges (so a few hundred passages cross many),
two spawned processes read and chunk them, this process embeds with the fake
model: the index must hold what the one-process build holds, warnings said
once each in the same order, and a build stopped midway must resume to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import MINI_WIKI, HashEmbedder
from multistream_fixture import make_multistream
from ranged_builds import meta_of, mixed_sources, rows_of, same_index
from reliability_harness import documents, leftovers

import ceg_cli.corpus.ranges
import ceg_cli.index.build.builder
import ceg_cli.index.build.pool_engine
from ceg_cli.index.build.builder import BuildOptions, build_index


@pytest.fixture(autouse=True)
def cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four cores, whatever the machine: readers are capped at its cores (issue 34)."""
    monkeypatch.setattr(ceg_cli.index.build.pool_engine, "available_cores", lambda: 4)


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges of about 1 KB or 2 pages or 2 files, embedding calls of about 8 passages."""
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_BYTES", 1000)
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_PAGES", 2)
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_FILES", 2)
    monkeypatch.setattr(ceg_cli.index.build.builder, "EMBED_CALL_SIZE", 8)


@pytest.fixture
def sources(tmp_path: Path) -> list[Path]:
    dump, _ = make_multistream(MINI_WIKI, tmp_path / "ms", per_stream=2)
    return mixed_sources(tmp_path, dump)


def test_reader_processes_build_the_one_process_index(
    small: None, sources: list[Path], tmp_path: Path
) -> None:
    one: list[str] = []
    build_index(sources, tmp_path / "one", embedder=HashEmbedder(), on_warning=one.append)
    two: list[str] = []
    report = build_index(sources, tmp_path / "two", BuildOptions(workers=2, shard_passages=20),
                         embedder=HashEmbedder(), on_warning=two.append)
    assert report.workers == 2
    assert report.chunks == len(rows_of(tmp_path / "one")) > 150
    same_index(tmp_path / "two", tmp_path / "one", exact=True)
    assert two == one and len(two) == 2
    assert meta_of(tmp_path / "two")["build"] == {"engine": "local", "workers": 2}
    assert leftovers(tmp_path / "two") == []


class Stopping(HashEmbedder):
    """The fake model, stopping the build (as Ctrl-C would) at its ``calls``-th call."""

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.left = calls

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.left -= 1
        if self.left < 0:
            raise KeyboardInterrupt
        return super().embed(texts)


def test_a_stopped_reader_build_resumes_to_the_same_index(
    small: None, sources: list[Path], tmp_path: Path
) -> None:
    build_index(sources, tmp_path / "one", embedder=HashEmbedder())
    options = BuildOptions(workers=2, shard_passages=20)
    with pytest.raises(KeyboardInterrupt):
        build_index(sources, tmp_path / "two", options, embedder=Stopping(12))
    assert not (tmp_path / "two").exists()
    report = build_index(sources, tmp_path / "two", BuildOptions(workers=2, shard_passages=20,
                                                                  resume=True),
                         embedder=HashEmbedder())
    assert report.resumed_chunks > 0
    same_index(tmp_path / "two", tmp_path / "one", exact=True)


def test_the_command_builds_with_reader_processes(
    small: None, run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ceg_cli.index.build.builder, "load_embedder",
                        lambda *a, **k: HashEmbedder())
    docs = documents(tmp_path / "docs.jsonl", 30, "C")
    result = run_cli("index", "build", docs, "--index", tmp_path / "idx", "--workers", "2",
                     "--quiet")
    assert result.exit_code == 0, result.stderr
    assert meta_of(tmp_path / "idx")["build"] == {"engine": "local", "workers": 2}
    refused = run_cli("index", "build", docs, "--index", tmp_path / "idx2", "--workers", "0")
    assert refused.exit_code == 2
    assert "--workers" in refused.stderr


class OnCuda(HashEmbedder):
    """The fake model, saying it runs on a GPU."""

    device = "cuda"


@pytest.mark.parametrize(
    ("model", "asked", "engine", "readers"),
    [(OnCuda, None, "local", 3), (HashEmbedder, None, "local", None),
     (OnCuda, 1, "local", 1), (OnCuda, None, "ray", None)],
)
def test_readers_default_to_the_cores_beside_a_gpu_model(
    monkeypatch: pytest.MonkeyPatch, model: type[HashEmbedder], asked: int | None, engine: str,
    readers: int | None,
) -> None:
    monkeypatch.setattr(ceg_cli.index.build.builder, "available_cores", lambda: 4)
    options = BuildOptions(workers=asked, engine=engine)
    assert ceg_cli.index.build.builder.with_default_readers(options, model()).workers == readers


def test_a_gpu_build_reads_with_processes_unless_told(
    small: None, sources: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ceg_cli.index.build.builder, "available_cores", lambda: 3)
    build_index(sources, tmp_path / "one", embedder=HashEmbedder())
    report = build_index(sources, tmp_path / "gpu", embedder=OnCuda())
    assert report.workers == 2
    assert meta_of(tmp_path / "gpu")["build"] == {"engine": "local", "workers": 2}
    same_index(tmp_path / "gpu", tmp_path / "one", exact=True)
    told = build_index(sources, tmp_path / "told", BuildOptions(workers=1), embedder=OnCuda())
    assert told.workers == 1
