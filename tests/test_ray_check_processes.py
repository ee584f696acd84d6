"""A Ray check's processes end with it: Ctrl-C, SIGTERM, or the driver SIGKILLed.

The real ``ceg`` command starts Ray on this machine in a subprocess (its own
session); its descendants (raylet, GCS, agents, the workers) are found in
``/proc`` once its workers check, and must be gone a bounded time after the
run is stopped, and so must the short session folder ceg made for that Ray
(``/tmp/ceg-ray-*``), but where SIGKILL left no one to remove it. The
responses carry their own contexts, so the workers load no model. Every
process a test started is SIGKILLed in its ``finally``, by id.
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

import pytest
from conftest import need_extra
from proc_harness import default_sigint, descendants, kill_all, named, wait_until_gone
from ray_harness import session_folders_of

need_extra("ray", "ray")
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_stopped_ray_check_leaves_no_process(tmp_path: Path, how: str) -> None:
    """Ctrl-C (SIGINT to the command's process group, as a terminal sends it) and
    SIGTERM: ``interrupted``, exit 130, every Ray process gone at once. SIGKILL (no
    cleanup can run): Ray's own processes notice the driver is gone and end."""
    responses = tmp_path / "r.jsonl"
    with open(responses, "w", encoding="utf-8") as out:
        for i in range(50000):
            out.write(json.dumps({"id": i, "response": f"Person {i} was born in city {i}.",
                                  "contexts": [f"Person {i} was born in city {i}."]}) + "\n")
    ceg = str(Path(sys.executable).with_name("ceg"))
    stderr_path = tmp_path / "stderr"
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    found: dict[int, int] = {}
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [ceg, "check", str(responses), "--index", str(tmp_path / "none"), "--evidence",
             "contexts", "--out", str(tmp_path / "out.jsonl"), "-q", "--engine", "ray",
             "--workers", "1"],
            stdout=subprocess.DEVNULL, stderr=stderr, env=env, start_new_session=True,
            preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + 300
        out = tmp_path / "out.jsonl"
        while not out.exists() or out.stat().st_size == 0 or named(found, b"ray::CheckWorker") < 1:
            assert proc.poll() is None, stderr_path.read_text()
            assert time.monotonic() < deadline, stderr_path.read_text()
            time.sleep(0.2)
            found.update(descendants(proc.pid))
        found.update(descendants(proc.pid))
        # Ray's session in ceg's short folder (ray_session.connect), not TMPDIR/ray
        assert len(session_folders_of(proc.pid)) == 1
        if how == "SIGINT":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(getattr(signal, how))
        code = proc.wait(timeout=120)
        if how != "SIGKILL":
            assert code == 130, stderr_path.read_text()
            assert stderr_path.read_text().strip() == "interrupted"
            assert wait_until_gone(found, 30) == []
            assert session_folders_of(proc.pid) == []  # ceg removed its Ray's folder
        else:
            assert wait_until_gone(found, 150) == []
        assert 0 < len(out.read_bytes().splitlines()) < 50000  # stopped mid-run, kept
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        kill_all(found)
        for folder in session_folders_of(proc.pid):  # what SIGKILL left no one to remove
            shutil.rmtree(folder)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["stdout", "--out"])
def test_stdout_holds_whole_records_only_however_a_ray_check_ends(
    tmp_path: Path, where: str
) -> None:
    """Issue 51 item 1: stopped by SIGTERM, a Ray check's stdout ended in Ray's own lines
    ("(raylet) Task CheckWorker.run_range failed ... killed by ray.kill"), with --out too.
    Stdout is data only: records, each whole, and nothing else."""
    responses = tmp_path / "r.jsonl"
    with open(responses, "w", encoding="utf-8") as out:
        for i in range(50000):
            out.write(json.dumps({"id": i, "response": f"Person {i} was born in city {i}.",
                                  "contexts": [f"Person {i} was born in city {i}."]}) + "\n")
    ceg = str(Path(sys.executable).with_name("ceg"))
    stdout_path, stderr_path, out = tmp_path / "stdout", tmp_path / "stderr", tmp_path / "o.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    target = ["--out", str(out)] if where == "--out" else []
    records = out if where == "--out" else stdout_path
    found: dict[int, int] = {}
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [ceg, "check", str(responses), "--index", str(tmp_path / "none"), "--evidence",
             "contexts", *target, "-q", "--engine", "ray", "--workers", "2"],
            stdout=stdout, stderr=stderr, env=env, start_new_session=True,
            preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + 300
        while not records.exists() or records.read_bytes().count(b"\n") < 50:
            assert proc.poll() is None, stderr_path.read_text()
            assert time.monotonic() < deadline, stderr_path.read_text()
            time.sleep(0.2)
            found.update(descendants(proc.pid))
        found.update(descendants(proc.pid))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 130, stderr_path.read_text()
        assert wait_until_gone(found, 30) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        kill_all(found)
    data = records.read_bytes()
    assert data.endswith(b"\n")
    lines = data.splitlines()
    assert 50 <= len(lines) < 50000
    ids = [json.loads(line)["id"] for line in lines]  # every line a whole record
    assert ids == list(range(len(ids)))
    if where == "--out":
        assert stdout_path.read_bytes() == b""
