"""What every command shares: options, the stderr console, error-to-exit mapping."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import typer
from rich.console import Console
from rich.markup import escape

from ..errors import CegError, ExitStatus, exit_code_for

F = TypeVar("F", bound=Callable[..., Any])

#: Diagnostics and progress go to stderr, data to stdout, so
#: ``ceg check x.jsonl > out.jsonl`` works.
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

IndexOption = typer.Option(
    Path("index"),
    "--index",
    envvar="CEG_INDEX",
    help="Index directory (default ./index, or $CEG_INDEX).",
    show_default=False,
)
QuietOption = typer.Option(False, "--quiet", "-q", help="No progress bars.")


def _debug_enabled() -> bool:
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().params.get("debug"):
        return True
    return os.environ.get("CEG_DEBUG", "") not in ("", "0")


def handle_errors(func: F) -> F:
    """Map exceptions to exit codes in one place; a CegError prints one line."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (typer.Exit, click.exceptions.Exit, click.ClickException):
            raise
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/]")
            raise typer.Exit(int(ExitStatus.INTERRUPTED)) from None
        except CegError as exc:
            if _debug_enabled():
                raise
            # Messages quote user data (paths, input lines): never read it as markup.
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(exit_code_for(exc)) from None
        except Exception as exc:
            if _debug_enabled():
                raise
            err_console.print(
                f"[bold red]internal error:[/] {type(exc).__name__}: {escape(str(exc))} "
                "(run with --debug for the traceback)"
            )
            raise typer.Exit(int(ExitStatus.RUNTIME)) from None

    return wrapper  # type: ignore[return-value]


def warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False)
