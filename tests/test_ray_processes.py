"""A Ray build's processes end with it, and are no more than the cluster has (issue 34).

The real ``ceg`` command starts Ray on this machine in a subprocess (its own
session); its descendants (raylet, GCS, agents, the workers, each loading the
shipped model) are found in ``/proc`` once its workers run, and must be gone
a bounded time after the build is stopped. Every process a test started is
SIGKILLed in its ``finally``, by id.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import MINI_WIKI, HashEmbedder, need_extra
from proc_harness import descendants, kill_all, named, wait_until_gone
from ray_harness import by_value, no_ray_auth, session_folders_of, short_ray_temp
from reliability_harness import documents

import ceg_cli.corpus.ranges
from ceg_cli.index.build.builder import BuildOptions, build_index

ray: Any = need_extra("ray", "ray")
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def test_ray_workers_999_start_what_the_cluster_has_and_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_BYTES", 1000)
    by_value(__name__)
    docs = documents(tmp_path / "docs.jsonl", 60, "W")  # about 9 ranges
    said: list[str] = []
    with no_ray_auth(), short_ray_temp() as temp:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level="WARNING", object_store_memory=100_000_000, _temp_dir=str(temp))
        try:
            report = build_index([docs], tmp_path / "idx",
                                 BuildOptions(engine="ray", workers=999),
                                 embedder=HashEmbedder(), on_warning=said.append)
            one = build_index([MINI_WIKI], tmp_path / "one",
                              BuildOptions(engine="ray", workers=2), embedder=HashEmbedder())
        finally:
            ray.shutdown()
    assert said == ["--workers 999: the Ray cluster has 2 CPUs; starting 2 workers"]
    assert report.workers == 2
    assert one.workers == 1  # the mini dump is one range: the second worker would idle


def test_ceg_starts_ray_under_a_long_tmpdir_in_a_short_folder_it_then_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44, item 2: with TMPDIR 100 characters long, Ray's default session folder
    (TMPDIR/ray/session_.../sockets/plasma_store) passes the 107 bytes a Unix socket
    path may have, and `ceg index build --engine ray` could not start Ray. ceg's own
    start keeps the session in a short folder it makes, and removes it afterwards."""
    import tempfile

    import ceg_cli.index.build.ray_session as ray_session

    long_tmp = tmp_path / ("t" * max(1, 99 - len(str(tmp_path))))
    long_tmp.mkdir()
    assert len(str(long_tmp)) >= 100
    monkeypatch.setenv("TMPDIR", str(long_tmp))
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    made: list[Path] = []

    def noted() -> Path:
        made.append(real())
        return made[-1]

    real = ray_session.short_temp_dir
    monkeypatch.setattr(ray_session, "short_temp_dir", noted)
    by_value(__name__)
    docs = documents(tmp_path / "docs.jsonl", 20, "L")
    with no_ray_auth():
        report = build_index([docs], tmp_path / "idx", BuildOptions(engine="ray", workers=1),
                             embedder=HashEmbedder())
    assert report.workers == 1 and not ray.is_initialized()
    (temp,) = made
    assert temp.parent == Path("/tmp") and temp.name.startswith("ceg-ray-")
    assert not temp.exists()  # removed with Ray's session in it
    assert list(long_tmp.iterdir()) == []  # and nothing of Ray's under TMPDIR


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_stopped_ray_build_leaves_no_process(tmp_path: Path, how: str) -> None:
    """SIGTERM: ``interrupted``, exit 130, every Ray process gone at once. SIGKILL (no
    cleanup can run): Ray's own processes notice their raylet is gone and end."""
    corpus = documents(tmp_path / "docs.jsonl", 20000, "R")  # about 3 MB: one range
    ceg = str(Path(sys.executable).with_name("ceg"))
    stderr_path = tmp_path / "stderr"
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    found: dict[int, int] = {}
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [ceg, "index", "build", str(corpus), "--index", str(tmp_path / "index"), "-q",
             "--engine", "ray", "--workers", "1"],
            stdout=subprocess.DEVNULL, stderr=stderr, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while named(found, b"ray::Worker") < 1:
            assert proc.poll() is None, stderr_path.read_text()
            assert time.monotonic() < deadline, stderr_path.read_text()
            time.sleep(0.2)
            found.update(descendants(proc.pid))
        time.sleep(2)  # the worker loading its model, or embedding
        found.update(descendants(proc.pid))
        proc.send_signal(getattr(signal, how))
        code = proc.wait(timeout=120)
        if how == "SIGTERM":
            assert code == 130, stderr_path.read_text()
            assert stderr_path.read_text().strip() == "interrupted"
            assert wait_until_gone(found, 30) == []
            assert session_folders_of(proc.pid) == []  # ceg removed its Ray's folder
        else:
            assert wait_until_gone(found, 150) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        kill_all(found)
        for folder in session_folders_of(proc.pid):  # what SIGKILL left no one to remove
            shutil.rmtree(folder)
