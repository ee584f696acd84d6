"""A real two-node Ray cluster on loopback: a build across both nodes, and a worker killed.

The fixture starts a head node and a second node with ``ray start`` as two
separate processes, each with its own temporary directory (``--temp-dir`` is
per node since Ray 2.x) and one CPU, so two workers must land one on each
node; the build joins the cluster by its address, as ``--ray-address`` does.
Teardown kills the two nodes' process groups (their raylets, stores and
workers), not ``ray stop``, which would stop every Ray process on the machine,
other users' too.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import MINI_WIKI, HashEmbedder, need_extra
from multistream_fixture import make_multistream
from ranged_builds import same_index
from ray_harness import by_value, no_ray_auth, short_ray_temp
from reliability_harness import documents, leftovers

import ceg_cli.corpus.ranges
import ceg_cli.index.builder
from ceg_cli.index.builder import BuildOptions, build_index

ray: Any = need_extra("ray", "ray")
RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start_node(args: Sequence[str], temp: Path, log: Path) -> subprocess.Popen[bytes]:
    temp.mkdir()
    ports = [f"--dashboard-agent-listen-port={_free_port()}",
             f"--metrics-export-port={_free_port()}", f"--runtime-env-agent-port={_free_port()}"]
    with open(log, "wb") as out:
        # Its own session: its raylet, object store and workers share its process group.
        return subprocess.Popen(
            [RAY, "start", *args, f"--temp-dir={temp}", "--num-cpus=1", "--num-gpus=0",
             "--object-store-memory=100000000", "--disable-usage-stats", "--block", *ports],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )


def _wait(check: object, what: str, nodes: Sequence[tuple[subprocess.Popen[bytes], Path]],
          seconds: float = 90) -> None:
    """Until ``check()``; else fail with the end of each node's own log (``ray start``'s
    output), and at once when a node's process has ended (a head that cannot start)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        dead = [(proc, log) for proc, log in nodes if proc.poll() is not None]
        if dead:
            raise AssertionError(f"not {what}: a node exited\n{_tails(dead)}")
        time.sleep(0.2)
    raise AssertionError(f"not {what} within {seconds} s:\n{_tails(nodes)}")


def _tails(nodes: Sequence[tuple[subprocess.Popen[bytes], Path]]) -> str:
    said = []
    for proc, log in nodes:
        text = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
        said.append(f"--- {log.name} (exit status {proc.poll()}):\n{text}")
    return "\n".join(said)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, set[str]]]:
    """(address, node ids) of a head and a second node, each with 1 CPU."""
    with no_ray_auth():
        yield from _two_nodes(tmp_path_factory)


def _two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, set[str]]]:
    logs = tmp_path_factory.mktemp("cluster")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    nodes: list[tuple[subprocess.Popen[bytes], Path]] = []
    # Each node's session (its sockets) in a short folder, not under pytest's: a Unix
    # socket path may hold 107 bytes, and Ray's need about 70 under the node's folder.
    with short_ray_temp() as temp:
        try:
            head = _start_node(["--head", f"--port={port}", "--include-dashboard=false"],
                               temp / "head", logs / "head.log")
            nodes.append((head, logs / "head.log"))
            _wait(lambda: _listening(port), "the head node answers", nodes)
            node = _start_node([f"--address={address}"], temp / "node", logs / "node.log")
            nodes.append((node, logs / "node.log"))
            ray.init(address=address, log_to_driver=False, logging_level="WARNING")
            try:
                _wait(lambda: len([n for n in ray.nodes() if n["Alive"]]) == 2,
                      "two nodes are alive", nodes)
                ids = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
            finally:
                ray.shutdown()
            by_value(__name__)
            yield address, ids
        finally:
            for proc, _ in nodes:
                os.killpg(proc.pid, signal.SIGKILL)
            for proc, _ in nodes:
                proc.wait(timeout=30)


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_BYTES", 1500)
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_PAGES", 2)
    monkeypatch.setattr(ceg_cli.index.builder, "EMBED_CALL_SIZE", 8)
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
