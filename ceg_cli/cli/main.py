"""The ``ceg`` command: one Typer app per command group, joined here."""

from __future__ import annotations

import os
import sys

import typer

from .. import __version__
from ..errors import ExitStatus
from .cache_cmd import app as cache_app
from .check_cmd import check_command
from .commands import CegTyper
from .common import quiet_stdout, set_debug, stdout_closed, stdout_is_null
from .config_cmd import app as config_app
from .eval_cmd import eval_command
from .index_cmd import app as index_app
from .judge_cmd import app as judge_app
from .languages_cmd import languages_command
from .models_cmd import app as models_app
from .report_cmd import report_command

app = CegTyper(
    name="ceg",
    help="Check LLM output against your documents: cite what is supported, flag the rest.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(index_app, name="index")
app.add_typer(judge_app, name="judge")
app.add_typer(cache_app, name="cache")
app.add_typer(models_app, name="models")
app.add_typer(config_app, name="config")
app.command("check")(check_command)
app.command("eval")(eval_command)
app.command("report")(report_command)
app.command("languages")(languages_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ceg {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    debug: bool = typer.Option(
        False, "--debug", envvar="CEG_DEBUG", help="Show tracebacks for errors."
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """ceg: Citation-Enhanced Generation as a batch fact-checker."""
    set_debug(debug)
    # ceg draws its own progress bars; the model libraries' "Loading weights"
    # bars would only add noise to stderr. Read when those libraries import.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def run() -> None:
    """The ``ceg`` entry point."""
    stdout, null_before = sys.stdout, stdout_is_null()
    try:
        app()
    except SystemExit as done:
        # Output written outside a command (--help, --version, a usage message) to a stdout
        # whose reader has gone ends with 1, the code of a failed gate: Typer's way (stdout
        # wrapped in click's PacifyFlushWrapper) or rich's (stdout pointed at the null
        # device). It is the closed-stdout code here.
        if done.code == 1 and (
            (sys.stdout is not stdout and stdout_closed())
            or (stdout_is_null() and not null_before)
        ):
            quiet_stdout()
            sys.exit(int(ExitStatus.STDOUT_CLOSED))
        raise
    finally:
        # What is still buffered for stdout is written now, not at exit, where a reader
        # that has gone (`ceg ... | head`) would print "Exception ignored ... BrokenPipeError".
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            if not stdout_closed():
                raise
            quiet_stdout()
            sys.exit(int(ExitStatus.STDOUT_CLOSED))
