"""The one progress display of the command line, on the same console as warnings.

On a terminal the counters are rich bars drawn on ``err_console``; a warning
printed through that console while they are drawn appears above them, on its
own line. When stderr is not a terminal (a CI log, a file) the counters become
a few plain lines (``ceg_cli.progress.PlainProgress``). ``--quiet`` shows none.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..progress import NO_PROGRESS, Counter, PlainProgress, Progress
from .common import err_console


class _RichCounter:
    def __init__(self, bars: Any, task: Any) -> None:
        self._bars = bars
        self._task = task

    def update(self, n: int = 1) -> None:
        self._bars.advance(self._task, n)


class _RichProgress:
    def __init__(self, bars: Any) -> None:
        self._bars = bars

    def counter(self, label: str, unit: str, total: int | None = None) -> Counter:
        task = self._bars.add_task(label, total=total, unit=unit)
        return _RichCounter(self._bars, task)


def _rich_bars() -> Any:
    from rich.progress import (
        BarColumn,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as Bars
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            # Over the whole run: rich's own estimate spikes on bursts.
            elapsed = task.elapsed or 0.0
            speed = task.completed / elapsed if elapsed > 1 else 0.0
            return Text(f"{speed:,.1f}/s" if speed else "", style="dim")

    return Bars(
        TextColumn("{task.description}"),
        BarColumn(bar_width=24),
        TextColumn("{task.completed:,} {task.fields[unit]}"),
        RateColumn(),
        TimeElapsedColumn(),
        # Blank for counters with no total; for a dump, the time left at this pace.
        TimeRemainingColumn(compact=True, elapsed_when_finished=False),
        console=err_console,
        # Data may go to stdout (`ceg check x.jsonl > out.jsonl`): never route it here.
        redirect_stdout=False,
        transient=False,
    )


@contextmanager
def cli_progress(quiet: bool) -> Iterator[Progress]:
    """The progress display for one command, closed (totals shown) on exit."""
    if quiet:
        yield NO_PROGRESS
        return
    if err_console.is_terminal:
        with _rich_bars() as bars:
            yield _RichProgress(bars)
        return
    plain = PlainProgress(lambda line: err_console.print(line, markup=False, highlight=False))
    try:
        yield plain
    except BaseException:
        plain.close(stopped=True)  # Ctrl-C, SIGTERM, a failure: the time until now
        raise
    plain.close()
