"""One progress display: bars on a terminal, plain lines in a log, warnings on their own lines.

The real-run tests start ``ceg check`` as a process with stderr a pipe (a CI
log) and with stderr a pseudo-terminal, on an input whose second line is not
JSON, so that a warning is printed while progress is being shown.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ceg_cli.progress import PlainProgress

TESTS = Path(__file__).resolve().parent
#: ``ceg`` with the index's fake model mapped to ``HashEmbedder`` (no model to load).
WRAPPER = """
import sys
sys.path.insert(0, {tests!r})
import ceg_cli.index.store
from conftest import HashEmbedder
real = ceg_cli.index.store.load_embedder
ceg_cli.index.store.load_embedder = lambda name=None, **kw: (
    HashEmbedder() if name == HashEmbedder().name else real(name, **kw))
from ceg_cli.cli.main import app
app(sys.argv[1:], prog_name="ceg")
"""
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_progress_writes_start_a_line_per_interval_and_totals() -> None:
    lines: list[str] = []
    clock = Clock()
    progress = PlainProgress(lines.append, interval=30, clock=clock)
    pages = progress.counter("pages read", "pages")
    embedded = progress.counter("embedded", "passages", total=50)
    assert lines == ["pages read: started", "embedded: started (50 passages)"]
    for _ in range(10):
        clock.now += 2  # 20 s of updates: under the interval, nothing more is written
        pages.update(3)
    assert len(lines) == 2
    clock.now += 10
    embedded.update(20)
    # Each rate over the time its counter moved (pages last moved 20 s in); a
    # counter with a total says how long the rest takes at the pace so far.
    assert lines[2] == ("progress: pages read 30 pages, 1.5/s · embedded 20/50 passages, 0.7/s, "
                        "about 45 s left")
    clock.now += 5
    pages.update()  # 5 s after the last line: quiet again
    assert len(lines) == 3
    clock.now += 100  # closed long after: a stage's time ends where its count stopped
    progress.close()
    assert lines[3:] == ["pages read: 31 pages in 35.0 s", "embedded: 20 passages in 30.0 s"]


def test_plain_progress_time_left_of_a_long_run() -> None:
    lines: list[str] = []
    clock = Clock()
    progress = PlainProgress(lines.append, interval=30, clock=clock)
    read = progress.counter("files read", "bytes", total=24_000_000_000)
    clock.now += 3600
    read.update(1_000_000_000)  # an hour for 1 GB of 24: 23 hours left
    clock.now += 3600
    read.update(1_000_000_000)  # 2 of 24 GB in two hours: 22 h
    assert lines[1:] == [
        "progress: files read 1,000,000,000/24,000,000,000 bytes, 277,777.8/s, about 23.0 h left",
        "progress: files read 2,000,000,000/24,000,000,000 bytes, 277,777.8/s, about 22.0 h left",
    ]
    read.update(22_000_000_000)
    progress.close()
    assert lines[-1] == "files read: 24,000,000,000 bytes in 7200.0 s"


def test_plain_progress_counts_updates_from_threads() -> None:
    lines: list[str] = []
    progress = PlainProgress(lines.append, interval=3600)
    counter = progress.counter("passages", "passages")

    def add() -> None:
        for _ in range(10_000):
            counter.update()

    workers = [threading.Thread(target=add) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    progress.close()
    assert lines[-1].startswith("passages: 40,000 passages in ")


@pytest.fixture
def bad_second_line(tmp_path: Path) -> Path:
    path = tmp_path / "responses.jsonl"
    path.write_text(
        '{"id": "a", "response": "Aristotle was a student of Plato."}\n'
        "this line is not JSON\n"
        '{"id": "b", "response": "Alexander was tutored by Aristotle."}\n',
        encoding="utf-8",
    )
    return path


def _ceg(tmp_path: Path) -> list[str]:
    script = tmp_path / "ceg_hash.py"
    script.write_text(WRAPPER.format(tests=str(TESTS)), encoding="utf-8")
    return [sys.executable, str(script)]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CI", "FORCE_COLOR")}
    return {**env, "COLUMNS": "100", "TERM": "xterm-256color", **extra}


def test_log_gets_plain_lines_and_whole_warnings(
    hash_index: Path, bad_second_line: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [*_ceg(tmp_path), "check", str(bad_second_line), "--index", str(hash_index),
         "--out", str(out)],
        capture_output=True, env=_env(), timeout=120,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr  # the bad line
    assert "\r" not in stderr and "\x1b" not in stderr, repr(stderr)
    lines = stderr.splitlines()
    assert "checked: started" in lines
    assert any(re.fullmatch(r"checked: 3 responses in [\d.]+ s", line) for line in lines), lines
    warning = [line for line in lines if "is not JSON" in line or "not valid JSON" in line]
    assert warning and warning[0].startswith("warning: "), lines
    assert len(out.read_text().splitlines()) == 3


def test_quiet_log_has_no_progress_lines(
    hash_index: Path, bad_second_line: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [*_ceg(tmp_path), "check", str(bad_second_line), "--index", str(hash_index),
         "--out", str(tmp_path / "o.jsonl"), "--quiet"],
        capture_output=True, env=_env(), timeout=120,
    )
    stderr = done.stderr.decode()
    assert "checked" not in stderr and "started" not in stderr
    assert "warning: " in stderr  # warnings are not progress: --quiet keeps them


def test_terminal_gets_bars_and_warnings_above_them(
    hash_index: Path, bad_second_line: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*_ceg(tmp_path), "check", str(bad_second_line), "--index", str(hash_index),
             "--out", str(out)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower, env=_env(),
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the process closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=120) == 2
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    raw = b"".join(chunks).decode()
    assert "\x1b[" in raw  # drawn as a live display, not as lines
    pieces = [p.strip(" ") for p in re.split(r"[\r\n]+", ANSI.sub("", raw)) if p.strip()]
    bars = [p for p in pieces if p.startswith("checked ")]
    assert bars and "3 responses" in bars[-1], pieces  # the bad line is a record too
    warnings = [p for p in pieces if "warning:" in p]
    # On its own line: a warning never lands in the middle of a bar's line.
    assert warnings and all(p.startswith("warning: ") for p in warnings), warnings
    assert len(out.read_text().splitlines()) == 3
