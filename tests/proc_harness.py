"""Processes in ``/proc``: what a test started, whether it still runs, ending it by id.

Linux only (tests that use it skip without ``/proc``). A process is known by
its id and start time, so that an id reused by another process is never taken
for it, nor killed.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

#: Seconds the processes of a stopped build have to end.
GONE_WITHIN_S = 20.0


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time) of a process, or None if there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the name may hold spaces and brackets
    return int(fields[1]), fields[0], int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every live process under ``root``: pid -> start time (to tell a reused pid)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            children.setdefault(stat[0], []).append(int(entry.name))
            starts[int(entry.name)] = stat[2]
    found: dict[int, int] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid in starts and pid not in found:
            found[pid] = starts[pid]
            todo.extend(children.get(pid, []))
    return found


def named(processes: dict[int, int], prefix: bytes) -> int:
    """How many of ``processes`` have a command line starting with ``prefix`` (a Ray
    actor's process is named ``ray::CLASS``)."""
    count = 0
    for pid in processes:
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        count += line.startswith(prefix)
    return count


def default_sigint() -> None:
    """A ``preexec_fn``: the child starts with SIGINT at its default, as from a terminal.
    A shell runs a background job (`scripts/test &`) with SIGINT ignored, a child
    inherits that, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def running(processes: dict[int, int]) -> list[str]:
    """Those of ``processes`` still running (a zombie has ended), with their command lines."""
    left = []
    for pid, start in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[2] == start and stat[1] != "Z":
            try:
                line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                line = b"?"
            left.append(f"{pid}: {line.decode(errors='replace')[:160]}")
    return left


def wait_until_gone(processes: dict[int, int], within: float = GONE_WITHIN_S) -> list[str]:
    deadline = time.monotonic() + within
    while (left := running(processes)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def kill_all(processes: dict[int, int]) -> None:
    """SIGKILL, by id, those of ``processes`` (all started by this test) still running."""
    for pid, start in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[2] == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
