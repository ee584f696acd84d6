"""What the Ray tests share: the fake model shipped to Ray workers, a loopback cluster.

Ray workers import classes by module name, and a worker has no ``tests/`` on
its path: ``by_value`` registers test modules (``conftest`` with its
``HashEmbedder``, a test module's own subclasses) with Ray's cloudpickle, so
their classes travel pickled by value with the objects, as a notebook's own
embedder class would.

The ``cluster`` fixture starts a head node and a second node with ``ray start``
as two separate processes, each with its own temporary directory
(``--temp-dir`` is per node since Ray 2.x) and one CPU. Teardown kills the two
nodes' process groups (their raylets, stores and workers), not ``ray stop``,
which would stop every Ray process on the machine, other users' too. A test
module uses it by importing it (``from ray_harness import cluster``): each
module gets its own cluster.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

TESTS_DIR = Path(__file__).resolve().parent


def by_value(*modules: ModuleType | str) -> None:
    """Pickle these modules' classes and functions by value for Ray (``conftest`` always)."""
    import conftest
    from ray import cloudpickle

    for module in (conftest, *modules):
        cloudpickle.register_pickle_by_value(
            sys.modules[module] if isinstance(module, str) else module
        )


@contextmanager
def no_ray_auth() -> Iterator[None]:
    """Ray without token authentication (on by default in Ray 2.60), for the test clusters.

    A loopback cluster's second node would need the head's token; and one
    process's Ray sessions must agree on the mode: a driver that ran a local
    Ray with tokens loses its actors on a cluster without them.
    """
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved


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


def _wait(check: object, what: str, logs: Sequence[Path], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    tails = "\n".join(log.read_text(errors="replace")[-2000:] for log in logs)
    raise AssertionError(f"{what} within {seconds} s:\n{tails}")


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, set[str]]]:
    """(address, node ids) of a head and a second node, each with 1 CPU; the test
    module's classes go to its workers by value."""
    with no_ray_auth():
        yield from _two_nodes(tmp_path_factory, request.module.__name__)


def _two_nodes(
    tmp_path_factory: pytest.TempPathFactory, module: str
) -> Iterator[tuple[str, set[str]]]:
    import ray

    root = tmp_path_factory.mktemp("cluster")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    logs = [root / "head.log", root / "node.log"]
    nodes: list[subprocess.Popen[bytes]] = []
    try:
        nodes.append(_start_node(["--head", f"--port={port}", "--include-dashboard=false"],
                                 root / "head", logs[0]))
        _wait(lambda: _listening(port), "the head node answers", logs)
        nodes.append(_start_node([f"--address={address}"], root / "node", logs[1]))
        ray.init(address=address, log_to_driver=False, logging_level="WARNING")
        try:
            _wait(lambda: len([n for n in ray.nodes() if n["Alive"]]) == 2,
                  "two nodes are alive", logs)
            ids = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        finally:
            ray.shutdown()
        by_value(module)
        yield address, ids
    finally:
        for node in nodes:
            os.killpg(node.pid, signal.SIGKILL)
        for node in nodes:
            node.wait(timeout=30)
