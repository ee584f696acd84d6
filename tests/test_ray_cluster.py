"""A real two-node Ray cluster on loopback: a build across both nodes, and a worker killed.

The cluster (``ray_harness.cluster``, a fixture of ``conftest``) has two
nodes of one CPU each, so two workers must land one on each node; the build
joins the cluster by its address, as ``--ray-address`` does.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import MINI_WIKI, HashEmbedder, need_extra
from multistream_fixture import make_multistream
from ranged_builds import same_index
from reliability_harness import documents, leftovers

import ceg_cli.corpus.ranges
import ceg_cli.index.build.builder
from ceg_cli.index.build.builder import BuildOptions, build_index

ray: Any = need_extra("ray", "ray")


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_BYTES", 1500)
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_PAGES", 2)
    monkeypatch.setattr(ceg_cli.index.build.builder, "EMBED_CALL_SIZE", 8)
    dump, _ = make_multistream(MINI_WIKI, tmp_path / "ms", per_stream=2)
    return [documents(tmp_path / "docs.jsonl", 80, "C"), dump]


def test_a_build_across_two_nodes_is_the_single_machine_build(
    cluster: tuple[str, set[str]], sources: list[Path], tmp_path: Path
) -> None:
    address, node_ids = cluster
    build_index(sources, tmp_path / "local", embedder=HashEmbedder())
    report = build_index(
        sources, tmp_path / "ray",
        BuildOptions(engine="ray", ray_address=address, workers=2, shard_passages=30),
        embedder=HashEmbedder(),
    )
    assert set(report.worker_nodes) == node_ids  # one worker on each node
    same_index(tmp_path / "ray", tmp_path / "local")
    assert leftovers(tmp_path / "ray") == []


def test_by_default_one_worker_per_node_using_its_cpus(
    cluster: tuple[str, set[str]], sources: list[Path], tmp_path: Path
) -> None:
    address, node_ids = cluster
    report = build_index(sources[:1], tmp_path / "ray", BuildOptions(engine="ray",
                         ray_address=address), embedder=HashEmbedder())
    assert report.workers == 2 and sorted(report.worker_nodes) == sorted(node_ids)


class KillsItsWorkerOnce(HashEmbedder):
    """The fake model; the first worker process to embed SIGKILLs itself (once in all)."""

    def __init__(self, marker: Path) -> None:
        super().__init__()
        self.marker = marker

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        try:
            with open(self.marker, "x") as fh:  # the first call anywhere, and only it
                fh.write(str(os.getpid()))
        except FileExistsError:
            return super().embed(texts)
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")


def test_a_worker_process_killed_during_the_build_is_replaced(
    cluster: tuple[str, set[str]], sources: list[Path], tmp_path: Path
) -> None:
    address, _ = cluster
    build_index(sources, tmp_path / "local", embedder=HashEmbedder())
    marker = tmp_path / "killed"
    report = build_index(
        sources, tmp_path / "ray",
        BuildOptions(engine="ray", ray_address=address, workers=2, shard_passages=30),
        embedder=KillsItsWorkerOnce(marker),
    )
    killed = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(killed, 0)  # that worker process is gone; Ray started another and redid its range
    assert report.workers == 2
    same_index(tmp_path / "ray", tmp_path / "local")
