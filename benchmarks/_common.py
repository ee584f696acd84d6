"""What the benchmark scripts share: paths, the cache, tables, results files.

The scripts run from a checkout (``.venv/bin/python benchmarks/STAGE/NAME.py``);
they import ``ceg_cli`` from the installed package and write small JSON
results to ``benchmarks/results/``, meant to be committed next to the code
that produced them.

They follow the CLI's rules on what they write: a results file only ever goes
to ``benchmarks/results/NAME.json`` (``results_name`` refuses anything but a
bare NAME, at once, before any work), and a work folder is one ceg made and
marked (``work_dir``): the default one is temporary and removed however the
script ends (an exception, Ctrl-C or SIGTERM); a ``--workdir`` given must be
new, empty, or one an earlier run made, and is kept for the next run.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn

from ceg_cli.cachedir import read_entry_marker, write_entry_marker

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
CACHE_DIR = BENCH_DIR / ".cache"
ENWIKI_SAMPLE = REPO / "sample_data" / "enwiki-sample.xml.bz2"
SHARED_DATA = Path(os.environ.get("CEG_SHARED_DATA", "/work/shared/data"))
#: The scripts' folders, one per stage (benchmarks/README.md). Each script puts
#: ``benchmarks/`` on ``sys.path`` to import this module, which puts the stages'
#: folders there too: a script may import another's functions whatever its stage.
STAGES = ("build", "search", "judges", "check", "languages", "gpu")
sys.path[1:1] = [str(BENCH_DIR / stage) for stage in STAGES
                 if str(BENCH_DIR / stage) not in sys.path]


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


def _interrupted_quietly(kind: type[BaseException], value: BaseException, tb: Any) -> None:
    """Ctrl-C ends a benchmark with one line, not a traceback (its ``finally`` blocks have
    run by then: work folders removed, children stopped); Python still exits by SIGINT."""
    if issubclass(kind, KeyboardInterrupt):
        print(f"{Path(sys.argv[0]).name}: interrupted", file=sys.stderr, flush=True)
        return
    sys.__excepthook__(kind, value, tb)


sys.excepthook = _interrupted_quietly


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; floats are printed as given (pre-format them)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def usage_error(message: str) -> NoReturn:
    """One line on stderr, naming the script, and exit 2 (a usage error, as ``ceg`` gives)."""
    print(f"{Path(sys.argv[0]).name}: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def results_name(name: str, option: str = "--results") -> str:
    """``name`` if it is a bare results name (``benchmarks/results/NAME.json``); else
    exit 2: an absolute path, a separator or ``..`` would write outside that folder."""
    bad = (
        not name
        or name in (".", "..")
        or name.startswith(".")
        or any(sep in name for sep in ("/", "\\", os.sep, "\0"))
        or Path(name).is_absolute()
    )
    if bad:
        usage_error(
            f"{option} {name!r}: give a bare name; results are written only to "
            f"{RESULTS_DIR.relative_to(REPO)}/NAME.json"
        )
    return name.removesuffix(".json")


def results_file(path: Path, option: str = "--out") -> Path:
    """``path`` if it is a ``.json`` file directly in ``benchmarks/results/``; else exit 2."""
    target = path.expanduser().resolve()
    if target.parent != RESULTS_DIR.resolve() or target.suffix != ".json":
        usage_error(
            f"{option} {path}: results are written only to "
            f"{RESULTS_DIR.relative_to(REPO)}/NAME.json"
        )
    results_name(target.stem, option)
    return target


def write_results(name: str, data: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/NAME.json`` (sorted keys, so diffs stay readable), whole or
    not at all; ``name`` must be a bare name (``results_name``)."""
    path = RESULTS_DIR / f"{results_name(name)}.json"
    return write_json(path, data, sort_keys=True)


def write_json(path: Path, data: dict[str, Any], *, sort_keys: bool = False) -> Path:
    """Write ``data`` to ``path`` (a results file) by way of a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=sort_keys, ensure_ascii=False)
            fh.write("\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def with_parent(command: Sequence[str]) -> list[str]:
    """``command`` as a child that ends when this benchmark does, SIGKILL included
    (``_with_parent.py``): for a program that is not the benchmark's own code, which
    calls ``ends_with_parent`` instead."""
    return [sys.executable, str(BENCH_DIR / "_with_parent.py"), str(os.getpid()),
            *map(str, command)]


#: The kind a benchmark's work folder's marker names (``ceg_cli.cachedir``'s marker).
WORK_KIND = "benchmark-work"


def ends_with_parent() -> None:
    """A benchmark's measuring child process: it ends when the benchmark does.

    SIGKILL from the kernel when its parent dies (and a watchdog where that is not
    to be had), Ctrl-C left to the parent, which stops it: the build's readers' own
    rule (``ceg_cli.index.build.processes.reader_started``).
    """
    from ceg_cli.index.build.processes import reader_started

    reader_started(os.getppid())


def check_workdir(given: Path | None, option: str = "--workdir") -> None:
    """Refuse (exit 2) a work folder that ceg did not make and that holds something, or a
    file: the script would take the user's files for its own, or write over them. Folders
    under ``benchmarks/.cache`` are ceg's by construction."""
    if given is None:
        return
    if given.exists() and not given.is_dir():
        usage_error(f"{option} {given}: is a file; give a new or empty folder")
    if not given.exists() or read_entry_marker(given) == WORK_KIND:
        return
    if CACHE_DIR.resolve() in given.resolve().parents:
        return
    names = sorted(p.name for p in given.iterdir())
    if names:
        usage_error(
            f"{option} {given}: holds files ceg did not make ({names[0]}); give a new or "
            "empty folder, or leave the option out for a temporary one"
        )


@contextmanager
def work_dir(
    given: Path | None, *, prefix: str, option: str = "--workdir", parent: Path | None = None
) -> Iterator[Path]:
    """A work folder ceg made and marked: ``given`` (checked by ``check_workdir``, kept at
    the end for another run), else a temporary one (in ``parent``, default the system's
    temporary folder) removed however the script ends.

    SIGTERM is turned into ``SystemExit`` meanwhile, so that ``finally`` blocks (this
    one's, and the script's own) run on a kill as on Ctrl-C.
    """
    check_workdir(given, option)
    if given is None:
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    else:
        folder = given
        folder.mkdir(parents=True, exist_ok=True)
    previous = _exit_on_sigterm()
    try:
        write_entry_marker(folder, WORK_KIND)
        yield folder
    finally:
        if given is None:
            shutil.rmtree(folder, ignore_errors=True)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm() -> Any:
    """Make SIGTERM raise SystemExit(143); the handler before, or None (not the main thread)."""

    def stop(signum: int, _frame: object) -> None:
        # The script ends: the interpreter's teardown would walk every object a model
        # library made (5 to 40 s after the verifier scored, on a busy machine: what
        # made a SIGTERM take SIGKILL). Frozen objects are not walked, still freed.
        gc.freeze()
        raise SystemExit(128 + signum)

    try:
        return signal.signal(signal.SIGTERM, stop)
    except ValueError:  # signals can only be set from the main thread
        return None


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


#: The line ``ceg index build --update`` ends with (``cli/index_cmd.py``).
UPDATE_SUMMARY = re.compile(r"(\d+) documents? added, (\d+) changed, (\d+) removed, "
                            r"(\d+) unchanged(?:; (\d+) passages? embedded)?")


def run_update(command: Sequence[str]) -> dict[str, Any]:
    """Run a ``ceg index build`` (this checkout's) to its end, as a child that ends with
    this script: its seconds, peak memory (``VmHWM``) and, for an update, what its
    summary line says it did. A failure ends the script with the child's last words."""
    started = time.perf_counter()
    proc = subprocess.Popen(with_parent(command), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    code, peak, _anon = watch(proc)
    said = proc.stderr.read() if proc.stderr else ""
    seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"{' '.join(command)} failed ({code}): {said[-2000:]}")
    out: dict[str, Any] = {"seconds": round(seconds, 2), "peak_rss_mib": round(peak / 1024, 1)}
    found = UPDATE_SUMMARY.search(said)
    if found:
        names = ("added", "changed", "removed", "unchanged", "passages_embedded")
        out.update((k, int(v)) for k, v in zip(names, found.groups()) if v is not None)
    return out


def stop_child(proc: Any, grace_s: float = 30.0) -> None:
    """End the child ``proc`` (a ``Popen``) if it still runs: SIGTERM, then SIGKILL after
    ``grace_s``; the script never leaves a build running behind it."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
