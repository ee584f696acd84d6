"""``scripts/train_verifier.py`` and the benchmarks follow the CLI's rules on what they
write (issue 34, items 4 and 5): every argument is checked before anything is
written, a bad one is one line and exit 2, and nothing of the user's is taken
over, written over or left behind.

No training and no build runs here: each case is refused before the work starts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "train_verifier.py"
BENCH = REPO / "benchmarks"


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``root`` (and the folders): mtime (ns) and bytes."""
    out: dict[str, tuple[int, bytes]] = {}
    for top, _dirs, files in os.walk(root):
        out[top] = (Path(top).stat().st_mtime_ns, b"")
        for name in files:
            path = Path(top, name)
            out[str(path)] = (path.lstat().st_mtime_ns, path.read_bytes())
    return out


def refused(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# --- item 4: scripts/train_verifier.py -------------------------------------------


@pytest.fixture(scope="module")
def train_verifier() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_verifier", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A shared-data folder as the script expects one (its checks look at the layout)."""
    root = tmp_path / "data"
    (root / "train").mkdir(parents=True)
    (root / "wiki").mkdir()
    (root / "wiki" / "enwiki-sample.xml.bz2").write_bytes(b"")
    return root


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "base-model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}\n', encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def run_main(
    module: ModuleType, capsys: pytest.CaptureFixture[str], *argv: str | Path
) -> subprocess.CompletedProcess[str]:
    """The script's main, in this process (no training starts: it is refused first)."""
    try:
        code = module.main([str(a) for a in argv])
    except SystemExit as stop:  # argparse's own refusals
        code = stop.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(map(str, argv)), code, out, err)


def test_out_at_a_users_folder_is_refused_and_left_as_it_is(
    train_verifier: ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path, data: Path
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "data.json").write_text('{"my": "numbers"}\n', encoding="utf-8")
    (mine / "config.json").write_text('{"my": "settings"}\n', encoding="utf-8")
    before = snapshot(tmp_path)
    result = run_main(train_verifier, capsys, "--data", data, "--out", mine, "--device", "cpu")
    refused(result, f"--out {mine}", "data.json")
    assert snapshot(tmp_path) == before


def test_out_inside_an_index_is_refused(
    train_verifier: ModuleType, capsys: pytest.CaptureFixture[str], data: Path, hash_index: Path
) -> None:
    before = snapshot(hash_index)
    result = run_main(
        train_verifier, capsys, "--data", data, "--out", hash_index / "model", "--device", "cpu"
    )
    refused(result, "--out", "inside the index")
    assert snapshot(hash_index) == before


def test_out_naming_the_base_model_is_refused(
    train_verifier: ModuleType, capsys: pytest.CaptureFixture[str], data: Path, model: Path
) -> None:
    before = snapshot(model)
    result = run_main(
        train_verifier, capsys, "--data", data, "--base", model, "--out", model, "--device", "cpu"
    )
    refused(result, "--out", "is the --base model")
    assert snapshot(model) == before


@pytest.mark.parametrize(
    "case", ["out-file", "no-data", "base-not-a-model", "qa-negative", "qa-not-a-number",
             "finished-model"]
)
def test_bad_arguments_are_one_line_exit_2_and_nothing_is_written(
    train_verifier: ModuleType,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    data: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    out = tmp_path / "out"
    args: list[str | Path] = ["--data", data, "--out", out, "--device", "cpu"]
    word = "--out"
    if case == "out-file":
        out.write_text("my file\n", encoding="utf-8")
    elif case == "no-data":
        cwd = tmp_path / "a" / "b"
        cwd.mkdir(parents=True)
        monkeypatch.chdir(cwd)  # the default ../shared/data is not there
        args = ["--out", out, "--device", "cpu"]
        word = "--data"
    elif case == "base-not-a-model":
        (tmp_path / "notes").mkdir()
        args += ["--base", tmp_path / "notes"]
        word = "--base"
    elif case == "qa-negative":
        args += ["--qa", "-5"]
        word = "--qa"
    elif case == "qa-not-a-number":
        args += ["--qa", "many"]
        word = "--qa"
    else:
        out.mkdir()
        (out / "data.json").write_text(
            json.dumps({"made_by": "scripts/train_verifier.py"}), encoding="utf-8"
        )
        (out / "training.json").write_text('{"finished": true}', encoding="utf-8")
        (out / "model.safetensors").write_bytes(b"weights")
    before = snapshot(tmp_path)
    result = run_main(train_verifier, capsys, *args)
    refused(result, word)
    assert snapshot(tmp_path) == before


def test_the_script_itself_refuses_with_one_line(tmp_path: Path) -> None:
    """Through the interpreter, as a user runs it: exit 2, one line, no traceback."""
    out = tmp_path / "out.txt"
    out.write_text("mine\n", encoding="utf-8")
    data = tmp_path / "data"
    (data / "train").mkdir(parents=True)
    (data / "wiki").mkdir()
    (data / "wiki" / "enwiki-sample.xml.bz2").write_bytes(b"")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(data), "--out", str(out), "--device", "cpu"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    refused(proc, f"--out {out}", "is a file")
    assert out.read_text(encoding="utf-8") == "mine\n"


# --- item 5: the benchmarks' results and work folders -----------------------------


@pytest.fixture(scope="module")
def common() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        import _common
    finally:
        sys.path.remove(str(BENCH))
    return _common


@pytest.mark.parametrize("name", ["/tmp/x/mynotes", "../mynotes", "sub/mynotes", "", "..", ".x"])
def test_results_go_only_to_benchmarks_results(
    common: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], name: str,
) -> None:
    results = tmp_path / "bench" / "results"
    monkeypatch.setattr(common, "RESULTS_DIR", results)
    monkeypatch.setattr(common, "REPO", tmp_path)
    with pytest.raises(SystemExit) as stop:
        common.write_results(name, {"a": 1})
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--results" in err[0]
    assert not (tmp_path / "bench").exists()
    assert not any(tmp_path.rglob("*.json"))


def test_a_bare_results_name_is_written_whole(
    common: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results"
    monkeypatch.setattr(common, "RESULTS_DIR", results)
    path = common.write_results("gpu_build", {"b": 2, "a": 1})
    assert path == results / "gpu_build.json"
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": 1, "b": 2}
    assert sorted(p.name for p in results.iterdir()) == ["gpu_build.json"]


def test_a_users_workdir_is_refused_a_ceg_made_one_is_taken(
    common: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "docs.jsonl").write_text('{"id": "a", "text": "mine"}\n', encoding="utf-8")
    before = snapshot(mine)
    with pytest.raises(SystemExit) as stop:
        with common.work_dir(mine, prefix="x-"):
            raise AssertionError("a user's folder was taken as a work folder")
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--workdir" in err[0] and "docs.jsonl" in err[0]
    assert snapshot(mine) == before
    # A new folder is made and marked; a second run takes it again, and it is kept.
    given = tmp_path / "work"
    with common.work_dir(given, prefix="x-") as folder:
        (folder / "docs-60.jsonl").write_text("{}\n", encoding="utf-8")
    with common.work_dir(given, prefix="x-") as folder:
        assert (folder / "docs-60.jsonl").exists()
    assert given.is_dir()


def test_the_default_workdir_is_removed_however_the_script_ends(
    common: Any, tmp_path: Path
) -> None:
    made: list[Path] = []
    with pytest.raises(RuntimeError):
        with common.work_dir(None, prefix="ceg-test-work-") as folder:
            made.append(folder)
            (folder / "docs.jsonl").write_text("{}\n", encoding="utf-8")
            raise RuntimeError("the build failed")
    assert made and not made[0].exists()
    # SIGTERM: the script exits 143 and its work folder is gone.
    # The heap is frozen first: the interpreter's teardown does not walk it (after a
    # model ran, that walk took 5 to 40 s on a busy machine, and the signal SIGKILL).
    child = (
        "import atexit, gc, sys, time; sys.path.insert(0, sys.argv[1]); import _common\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count(), flush=True))\n"
        "with _common.work_dir(None, prefix='ceg-test-work-') as w:\n"
        "    print(w, flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", child, str(BENCH)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        folder = Path(proc.stdout.readline().strip())
        assert folder.is_dir()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
        frozen = proc.stdout.read().split()
        assert frozen[0] == "frozen" and int(frozen[1]) > 1000, frozen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 5
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not folder.exists()


@pytest.mark.parametrize("how", ["results", "workdir"])
def test_gpu_build_refuses_before_any_work(tmp_path: Path, how: str) -> None:
    mine = tmp_path / "x"
    mine.mkdir()
    (mine / "mynotes.json").write_text('{"mine": true}\n', encoding="utf-8")
    (mine / "docs.jsonl").write_text('{"id": "a", "text": "mine"}\n', encoding="utf-8")
    before = snapshot(tmp_path)
    option = ["--results", str(mine / "mynotes")] if how == "results" else ["--workdir", str(mine)]
    proc = subprocess.run(
        [sys.executable, str(BENCH / "gpu" / "gpu_build.py"), "--passages", "60", "--no-sample",
         *option],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    refused(proc, f"--{how}")
    assert snapshot(tmp_path) == before


# --- issue 44 item 28: benchmarks clean up what they made, on SIGTERM too ------------


def test_benchmarks_make_their_temporary_folders_with_work_dir() -> None:
    """A TemporaryDirectory is left behind when SIGTERM kills the script (Python runs
    no ``finally`` on a signal it does not handle); ``work_dir`` turns SIGTERM into an
    exit that removes its folder. A ``mkdtemp`` inside a work folder goes with it."""
    import ast

    offenders = []
    for path in sorted([*BENCH.glob("*.py"), *BENCH.glob("[!.]*/*.py")]):
        if path.name == "_common.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name = node.func.attr
                inside = any(k.arg == "dir" for k in node.keywords)
                if name == "TemporaryDirectory" or (name == "mkdtemp" and not inside):
                    offenders.append(f"{path.name}:{node.lineno} {name}")
    assert offenders == []
    for name in ("check_speed", "quality", "report_open", "rerank_recall", "retrieval_recall",
                 "embed_speed", "index_types"):
        script = next(BENCH.glob(f"*/{name}.py"))
        assert "work_dir(" in script.read_text(encoding="utf-8"), name


def test_a_sigtermed_benchmark_leaves_nothing(tmp_path: Path) -> None:
    """check_speed, stopped by SIGTERM while it checks (its check held so that the
    signal lands there): it exits 143 and its work folder, responses written, is gone."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    child = (
        "import sys, time\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "sys.argv = ['check_speed.py', '--copies', '2', '--repeats', '1']\n"
        "import check_speed\n"
        "def held(index, responses, out, judge):\n"
        "    print(responses, flush=True)\n"
        "    time.sleep(60)\n"
        "check_speed.one_run = held\n"
        "check_speed.main()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", child, str(BENCH / "check")],
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(temp)})
    try:
        assert proc.stdout is not None
        responses = Path(proc.stdout.readline().strip())
        assert responses.is_file() and responses.parent.parent == temp
        assert len(responses.read_text(encoding="utf-8").splitlines()) == 16
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(temp.iterdir()) == []


def test_a_benchmarks_measuring_child_ends_when_the_benchmark_is_killed(tmp_path: Path) -> None:
    """search_scale.py and streamed_index.py measure in a child process: SIGKILL of the
    benchmark ends the child too (it was left running under PID 1)."""
    from proc_harness import descendants, wait_until_gone

    ready = tmp_path / "ready"
    child = (f"import sys, time; sys.path.insert(0, {str(BENCH)!r}); "
             "from _common import ends_with_parent; ends_with_parent(); "
             f"open({str(ready)!r}, 'w').close(); time.sleep(120)")
    parent = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); "
              "time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", parent], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        found = descendants(proc.pid)
        assert found
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert wait_until_gone(found, within=10) == [], "the child outlived the benchmark"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_program_a_benchmark_starts_ends_when_the_benchmark_is_killed(tmp_path: Path) -> None:
    """Programs that are not the benchmark's own code (the llama.cpp server, ``ceg index
    build``) start through ``_common.with_parent``: the program runs as the child itself
    (its process id, for ``wait4``) and SIGKILL of the benchmark ends it; a plain Popen left
    it running under PID 1."""
    from proc_harness import descendants, kill_all, wait_until_gone

    pid_file = tmp_path / "pid"
    parent = (f"import subprocess, sys; sys.path.insert(0, {str(BENCH)!r}); "
              "from _common import with_parent; "
              "p = subprocess.Popen(with_parent(['sleep', '120'])); "
              f"open({str(pid_file)!r}, 'w').write(str(p.pid)); p.wait()")
    proc = subprocess.Popen([sys.executable, "-c", parent], start_new_session=True)
    found: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline
            found = descendants(proc.pid)
            child = int(pid_file.read_text() or 0) if pid_file.exists() else 0
            line = Path(f"/proc/{child}/cmdline").read_bytes() if child in found else b""
            if line.split(b"\0")[0] == b"sleep":
                break
            time.sleep(0.1)
        assert list(found) == [child]  # the program is the child: no wrapper left between
        sigign = next(line for line in Path(f"/proc/{child}/status").read_text().splitlines()
                      if line.startswith("SigIgn:"))
        assert int(sigign.split()[1], 16) & (1 << (signal.SIGINT - 1))  # Ctrl-C: the parent's
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert wait_until_gone(found, within=10) == [], "sleep outlived the benchmark"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all(found)


def test_ctrl_c_ends_a_benchmark_with_one_line_and_sigint_s_status() -> None:
    """A benchmark stopped by Ctrl-C says so in one line, no traceback, and exits as a
    process killed by SIGINT does (a shell running it stops too)."""
    script = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); sys.argv = ['bench.py']; "
              "import _common\ntry:\n    raise KeyboardInterrupt\nfinally:\n    print('cleaned')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout == "cleaned\n"
    assert done.stderr == "bench.py: interrupted\n"
    assert done.returncode == -signal.SIGINT
