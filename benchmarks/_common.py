"""What the benchmark scripts share: paths, the cache, tables, results files.

The scripts run from a checkout (``.venv/bin/python benchmarks/NAME.py``);
they import ``ceg_cli`` from the installed package and write small JSON
results to ``benchmarks/results/``, meant to be committed next to the code
that produced them.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
CACHE_DIR = BENCH_DIR / ".cache"
ENWIKI_SAMPLE = REPO / "sample_data" / "enwiki-sample.xml.bz2"
SHARED_DATA = Path(os.environ.get("CEG_SHARED_DATA", "/work/shared/data"))


def cache_dir() -> Path:
    """``benchmarks/.cache``, created with a ``.gitignore`` that ignores all of it.

    The same trick as pytest's ``.pytest_cache``: the folder ignores itself,
    so no top-level ``.gitignore`` entry is needed.
    """
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    ignore = CACHE_DIR / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# created by benchmarks/_common.py\n*\n", encoding="utf-8")
    return CACHE_DIR


def command_line() -> str:
    """The command that ran this script, as one would type it from the checkout."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = str(script.relative_to(REPO))
    except ValueError:
        shown = str(script)
    return shlex.join([".venv/bin/python", shown, *sys.argv[1:]])


def environment() -> dict[str, Any]:
    """Where the figures were measured: enough to tell two results files apart."""
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=False, timeout=10
        )
    except OSError:
        return ""
    return done.stdout.strip()


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; floats are printed as given (pre-format them)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_results(name: str, data: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/NAME.json`` (sorted keys, so diffs stay readable)."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True, ensure_ascii=False)
        fh.write("\n")
    return path


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    return (ordered[mid - 1] + ordered[mid]) / 2.0


def log(message: str) -> None:
    """Progress goes to stderr so that stdout is the Markdown report alone."""
    print(message, file=sys.stderr, flush=True)


def proc_status_kib(pid: int, *keys: str) -> dict[str, int]:
    """Fields of ``/proc/PID/status`` in KiB (``VmHWM``, ``RssAnon``...); 0 once it is gone.

    A child's peak memory is best sampled from here while it runs: the
    ``ru_maxrss`` that ``wait4`` reports survives ``execve``, so a child
    forked from a large parent inherits the parent's peak.
    """
    found = dict.fromkeys(keys, 0)
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in found:
                found[name] = int(value.split()[0])
    except (OSError, ValueError):
        pass
    return found


def watch(proc: Any, tick: Any = None, every: float = 0.2) -> tuple[int, int, int]:
    """Wait for the child ``proc`` (a ``Popen``), sampling its memory every ``every`` s.

    ``tick()``, if given, runs at each sample (to kill the child at a chosen
    point, say). Returns its exit code (negative: the signal that ended it),
    and its peak ``VmHWM`` and ``RssAnon`` in KiB (``proc_status_kib``).
    """
    peak = anon = 0
    while True:
        pid, status, _usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, peak, anon
        now = proc_status_kib(proc.pid, "VmHWM", "RssAnon")
        peak, anon = max(peak, now["VmHWM"]), max(anon, now["RssAnon"])
        if tick is not None:
            tick()
        time.sleep(every)
