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
import shutil
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


def session_folders_of(pid: int) -> list[Path]:
    """The folders ceg made for the Ray that process ``pid`` started (``ray_session.connect``):
    ``/tmp/ceg-ray-*`` holding Ray's ``session_<date>_<pid>``. A process killed with SIGKILL
    cannot remove its own; its test does, knowing the pid."""
    return sorted({p.parent for p in Path("/tmp").glob(f"ceg-ray-*/session_*_{pid}")})


@contextmanager
def short_ray_temp() -> Iterator[Path]:
    """A folder for a test's Ray sessions, with the short path ceg's own Ray start uses
    (``ray_session.short_temp_dir``): under pytest's temporary folder, or any ``TMPDIR``
    of some 40 characters, Ray's socket paths pass the 107 bytes a Unix socket may have.
    Removed with what Ray wrote in it."""
    from ceg_cli.index.build.ray_session import short_temp_dir

    temp = short_temp_dir()
    try:
        yield temp
    finally:
        shutil.rmtree(temp, ignore_errors=True)


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
            by_value(module)
            yield address, ids
        finally:
            for proc, _ in nodes:
                os.killpg(proc.pid, signal.SIGKILL)
            for proc, _ in nodes:
                proc.wait(timeout=30)
