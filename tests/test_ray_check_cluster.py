"""``ceg check --engine ray`` on a real two-node Ray cluster on loopback.

The cluster (``ray_harness.cluster``) has two nodes of one CPU each: two
workers land one on each. Each check joins it by its address, as a user's
``--ray-address`` does, and leaves it when done. The judges reach the workers
pickled by value (``ray_check_harness``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import CliRun, need_extra
from ray_check_harness import BOOM, mixed_responses, ray_judges, without  # noqa: F401
from ray_harness import TESTS_DIR, by_value

import ceg_cli.check.ray_run
import ceg_cli.index.build.ray_pool

ray: Any = need_extra("ray", "ray")
pytestmark = pytest.mark.usefixtures("ray_judges")


@pytest.fixture(scope="module", autouse=True)
def judges_by_value(cluster: tuple[str, set[str]]) -> None:
    by_value("ray_check_harness")


@pytest.fixture(autouse=True)
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ceg_cli.check.ray_run, "RANGE_BATCHES", 2)


@pytest.fixture(scope="module")
def responses(tmp_path_factory: pytest.TempPathFactory) -> Path:
    whole = mixed_responses(tmp_path_factory.mktemp("responses") / "r.jsonl", 300)
    return without(whole, BOOM)


def checks(run_cli: CliRun, address: str, out: Path, *args: str | Path,
           workers: int | None = None) -> tuple[Any, Any]:
    """The same check run locally (into ``out``.local) and on the cluster (into ``out``)."""
    local = run_cli("check", *args, "--out", out.with_suffix(".local"), "-q")
    on_ray = run_cli("check", *args, "--out", out, "-q", "--engine", "ray",
                     "--ray-address", address,
                     *(("--workers", str(workers)) if workers else ()))
    return local, on_ray


def test_a_check_across_two_nodes_is_the_local_check(
    run_cli: CliRun, cluster: tuple[str, set[str]], hash_index: Path, responses: Path,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address, node_ids = cluster
    seen: list[Any] = []
    real = ceg_cli.check.ray_run.RayChecks.close

    def close(self: Any) -> None:
        seen.extend(w["where"] for w in getattr(self, "workers", []))
        real(self)

    monkeypatch.setattr(ceg_cli.check.ray_run.RayChecks, "close", close)
    out = tmp_path / "out.jsonl"
    local, on_ray = checks(run_cli, address, out, responses, "--index", hash_index,
                           "--judge", "hashed", workers=2)
    assert on_ray.exit_code == local.exit_code == 2, on_ray.stderr
    assert out.read_bytes() == out.with_suffix(".local").read_bytes()
    assert out.read_bytes().count(b"\n") > 290
    assert {w.rpartition("Ray node ")[2][:8] for w in seen} == {n[:8] for n in node_ids}


def test_contexts_only_records_on_the_cluster_need_no_index(
    run_cli: CliRun, cluster: tuple[str, set[str]], responses: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    local, on_ray = checks(run_cli, cluster[0], out, responses, "--index", tmp_path / "none",
                           "--evidence", "contexts", "--judge", "hashed")
    assert on_ray.exit_code == local.exit_code == 2, on_ray.stderr
    assert out.read_bytes() == out.with_suffix(".local").read_bytes()
    assert not (tmp_path / "none").exists()


def test_a_worker_killed_mid_run_has_its_range_checked_again(
    run_cli: CliRun, cluster: tuple[str, set[str]], hash_index: Path, responses: Path,
    tmp_path: Path
) -> None:
    marker = tmp_path / "killed"
    out = tmp_path / "out.jsonl"
    local = run_cli("check", responses, "--index", hash_index, "--judge", "hashed",
                    "--out", out.with_suffix(".local"), "-q")
    on_ray = run_cli("check", responses, "--index", hash_index, "--judge", f"killing:{marker}",
                     "--out", out, "-q", "--engine", "ray", "--ray-address", cluster[0],
                     "--workers", "2")
    assert on_ray.exit_code == local.exit_code == 2, on_ray.stderr
    killed = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(killed, 0)  # that worker process is gone; Ray started another
    assert out.read_bytes() == out.with_suffix(".local").read_bytes()  # nothing lost or twice


DRIVER = """
import sys
sys.path.insert(0, {tests!r})
from ray_harness import by_value
from ray_check_harness import slow, _hash_model_here
from ceg_cli import judges
import ceg_cli.check.ray_run
judges.register("slow", slow)
_hash_model_here()
by_value("ray_check_harness")
ceg_cli.check.ray_run.RANGE_BATCHES = 1
from ceg_cli.cli.main import app
app(sys.argv[1:], prog_name="ceg")
"""


def test_a_killed_driver_leaves_an_output_that_resume_finishes(
    run_cli: CliRun, cluster: tuple[str, set[str]], hash_index: Path, responses: Path,
    tmp_path: Path
) -> None:
    address = cluster[0]
    reference = tmp_path / "reference.jsonl"
    run_cli("check", responses, "--index", hash_index, "--judge", "hashed", "--out",
            reference, "-q")
    out = tmp_path / "out.jsonl"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(tests=str(TESTS_DIR)), encoding="utf-8")
    driver = subprocess.Popen(
        [sys.executable, str(script), "check", str(responses), "--index", str(hash_index),
         "--judge", "slow", "--out", str(out), "-q", "--engine", "ray", "--ray-address",
         address, "--workers", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    try:
        _wait_for_lines(out, 48, driver)
        os.killpg(driver.pid, signal.SIGKILL)  # the driver, like a crash
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    written = out.read_bytes().count(b"\n")
    assert 48 <= written < 290
    resumed = run_cli("check", responses, "--index", hash_index, "--judge", "hashed",
                      "--out", out, "--resume", "-q", "--engine", "ray", "--ray-address",
                      address)
    assert resumed.exit_code == 2 and f"resumed: {written} responses" in resumed.stderr
    assert out.read_bytes() == reference.read_bytes()
    assert _alive_check_workers(address) == []  # the killed driver's went with it


def _wait_for_lines(path: Path, lines: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        if path.exists() and path.read_bytes().count(b"\n") >= lines:
            return
        time.sleep(0.05)
    raise AssertionError(f"the driver wrote fewer than {lines} records in 180 s")


def _alive_check_workers(address: str, seconds: float = 60) -> list[Any]:
    """The cluster's CheckWorker actors still alive, once they had ``seconds`` to go."""
    from ray._private import state

    ray.init(address=address, log_to_driver=False, logging_level="WARNING")
    try:
        deadline = time.monotonic() + seconds
        while True:
            alive = [a for a in state.actors().values()
                     if a.get("State") == "ALIVE" and "CheckWorker" in json.dumps(a)]
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.5)
    finally:
        ray.shutdown()


def test_an_index_missing_on_a_worker_is_one_line_naming_its_node(
    run_cli: CliRun, cluster: tuple[str, set[str]], hash_index: Path, responses: Path,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver reads the index; by the time the workers start, it is gone from where
    they look: as on a node that has no copy of it."""
    index = tmp_path / "index"
    shutil.copytree(hash_index, index)
    real = ceg_cli.index.build.ray_pool.launch

    def launch(*args: Any, **kwargs: Any) -> Any:
        index.rename(tmp_path / "elsewhere")
        return real(*args, **kwargs)

    monkeypatch.setattr(ceg_cli.index.build.ray_pool, "launch", launch)
    out = tmp_path / "out.jsonl"
    result = run_cli("check", responses, "--index", index, "--judge", "hashed", "--out", out,
                     "-q", "--engine", "ray", "--ray-address", cluster[0], "--workers", "2")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: {index}: no index there on the Ray worker node ")
    assert "Ray node " in lines[0] and lines[0].endswith(
        "; every node must read the same index at the same path (a shared folder, or the "
        "same copy on each)")
    assert not out.exists()
