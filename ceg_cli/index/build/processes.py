"""The processes a build starts end with it, and how many it may start.

Reader processes (``pool_engine``) are spawned: they share nothing with the
build but their pipes, and those never tell them that the build is gone (each
holds both ends of the pool's queue). A build killed with SIGKILL or SIGTERM
left them running under PID 1, with the multiprocessing resource tracker that
waits for them (issue 34). So each reader asks the kernel to SIGKILL it when
its parent dies (Linux's ``PR_SET_PDEATHSIG``), and a watchdog thread ends it
where that is not to be had or the parent died before it was asked; once the
readers are gone, the resource tracker sees its pipe close and ends too.

Ctrl-C reaches every process of the terminal's group: the readers ignore it
(SIGINT stays blocked while they are started and is ignored once they run),
and the build stops them and says ``interrupted`` once. SIGTERM stops a build
the same way (``terminate_as_interrupt``): the same cleanup, line and exit code.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = [
    "available_cores",
    "die_with_parent",
    "reader_started",
    "sigint_blocked",
    "terminate_as_interrupt",
]

#: ``prctl`` option: the signal this process gets when its parent dies (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
#: Seconds between a reader's looks at its parent, where no parent-death signal is set.
WATCH_EVERY_S = 0.5


def available_cores() -> int:
    """The cores this process may run on (its affinity, where the system says)."""
    count = getattr(os, "process_cpu_count", None)  # Python 3.13
    if count is not None:
        return int(count() or 1)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def reader_started(parent: int) -> None:
    """A reader process's initializer: end with ``parent``, leave Ctrl-C to it.

    The parent stops its readers itself, and says ``interrupted`` once: a
    reader that took Ctrl-C would print its own traceback.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    die_with_parent()
    if os.getppid() != parent:  # gone before the kernel was asked: nothing would tell us
        os._exit(0)
    watchdog = threading.Thread(target=_watch, args=(parent,), name="ceg-parent-watch",
                                daemon=True)
    watchdog.start()


def die_with_parent() -> bool:
    """Ask Linux for SIGKILL when this process's parent dies; False where it cannot.

    The request outlives ``exec`` (not of a set-user-ID program): a process that asks, then
    runs another program, starts that program under the same rule.
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    """End this process once its parent is gone (it is then another's child)."""
    while os.getppid() == parent:
        time.sleep(WATCH_EVERY_S)
    os._exit(0)  # nothing to clean up: a reader writes nothing


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """Hold Ctrl-C back from this thread while it starts processes.

    A process inherits the signal mask, so a reader starts with SIGINT blocked
    and no Ctrl-C reaches it before ``reader_started`` ignores it. This
    process loses nothing: a SIGINT meanwhile waits, or another thread takes it
    for the main thread to handle.
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    from multiprocessing import resource_tracker

    # Started first: starting it unblocks SIGINT in the calling thread.
    resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, taken as Ctrl-C: the build stops, keeps its work and says ``interrupted``."""


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM stops this process as Ctrl-C does (``KeyboardInterrupt``).

    Python's default for SIGTERM ends the process on the spot: no ``finally``
    runs, so its reader processes and Ray workers were never stopped and the
    user got no word. Only the main thread can set a handler; elsewhere (a
    notebook's worker thread) this does nothing. The handler before is put back.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise _Terminated

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
