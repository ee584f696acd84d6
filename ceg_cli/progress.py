"""Progress of the long stages, as counters the caller decides how to show.

Library code (the index builder, the check and eval loops) only counts: it
asks a ``Progress`` for named counters and updates them, from any thread. The
command line chooses what the counts become: live bars on a terminal
(``ceg_cli.cli.progress``), a few plain lines in a log (``PlainProgress``), or
nothing (``NO_PROGRESS``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

#: Seconds between the plain progress lines written to a log.
PLAIN_INTERVAL = 30.0


class Counter(Protocol):
    def update(self, n: int = 1) -> None: ...


class Progress(Protocol):
    def counter(self, label: str, unit: str, total: int | None = None) -> Counter:
        """A new counter, shown under ``label`` and counting ``unit`` (plural)."""
        ...


class _NullCounter:
    def update(self, n: int = 1) -> None:
        pass


class NoProgress:
    """Counts nothing and shows nothing (``--quiet``, library callers)."""

    def counter(self, label: str, unit: str, total: int | None = None) -> Counter:
        return _NullCounter()


NO_PROGRESS: Progress = NoProgress()


@dataclass
class _PlainCounter:
    owner: PlainProgress
    label: str
    unit: str
    total: int | None
    started: float
    count: int = 0
    #: When the count last moved: a stage that has finished keeps its rate and time.
    moved: float = 0.0

    def update(self, n: int = 1) -> None:
        self.owner._advance(self, n)

    def describe(self) -> str:
        done = f"{self.count:,}" if self.total is None else f"{self.count:,}/{self.total:,}"
        seconds = self.moved - self.started
        rate = f", {self.count / seconds:,.1f}/s" if seconds > 0 and self.count else ""
        if rate and self.total is not None and self.total > self.count:
            # The rate so far, over what is left: the time to finish at this pace.
            rate += f", about {_duration((self.total - self.count) * seconds / self.count)} left"
        return f"{self.label} {done} {self.unit}{rate}"


def _duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``3.5 h``, ``2.1 days``: as precise as an estimate deserves."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


@dataclass
class PlainProgress:
    """Progress as whole lines, for a log rather than a terminal.

    A line when a counter starts, one line with every counter each
    ``interval`` seconds while they move, and each counter's total when
    ``close`` is called: no carriage returns, no escape sequences, and a
    CI log of a long build stays a few dozen lines long.
    """

    emit: Callable[[str], None]
    interval: float = PLAIN_INTERVAL
    clock: Callable[[], float] = time.monotonic
    _counters: list[_PlainCounter] = field(default_factory=list)
    _last: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def counter(self, label: str, unit: str, total: int | None = None) -> Counter:
        with self._lock:
            now = self.clock()
            if not self._counters:
                self._last = now
            counter = _PlainCounter(self, label, unit, total, now, moved=now)
            self._counters.append(counter)
        of = "" if total is None else f" ({total:,} {unit})"
        self.emit(f"{label}: started{of}")
        return counter

    def _advance(self, counter: _PlainCounter, n: int) -> None:
        with self._lock:
            counter.count += n
            now = self.clock()
            counter.moved = now
            if now - self._last < self.interval:
                return
            self._last = now
            line = " · ".join(c.describe() for c in self._counters)
        self.emit(f"progress: {line}")

    def close(self, stopped: bool = False) -> None:
        """Each counter's total, over the time to its last count; ``stopped`` (the run
        was interrupted or failed): over the time until now, and said, since a counter
        that did not move for ten minutes did not take no time."""
        with self._lock:
            finished, self._counters = self._counters, []
            now = self.clock()
        for counter in finished:
            until = now if stopped else counter.moved
            self.emit(f"{counter.label}: {counter.count:,} {counter.unit} in "
                      f"{until - counter.started:.1f} s{' (stopped)' if stopped else ''}")


@contextmanager
def library_bars_off() -> Iterator[None]:
    """Turn the model libraries' own bars off ("Loading weights" as transformers loads
    a checkpoint) for a load, and back on after if they were on: a library prints
    nothing unless asked, whether the CLI or a user's script loads the model."""
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:  # no model library, no bars
        yield
        return
    was_on = transformers_logging.is_progress_bar_enabled()
    if was_on:
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            transformers_logging.enable_progress_bar()
