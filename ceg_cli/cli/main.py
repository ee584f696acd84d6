"""The ``ceg`` command: one Typer app per command group, joined here."""

from __future__ import annotations

import gc
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
    ctx: typer.Context,
    debug: bool = typer.Option(
        False, "--debug", envvar="CEG_DEBUG", help="Show tracebacks for errors."
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """ceg: Citation-Enhanced Generation as a batch fact-checker."""
    from ..index.build.processes import terminate_as_interrupt

    set_debug(debug)
    # ceg draws its own progress bars; the model libraries' "Loading weights"
    # bars would only add noise to stderr. Read when those libraries import.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # SIGTERM (a CI runner's cancel, `timeout`, `docker stop`) stops every command as
    # Ctrl-C does: its `finally` blocks run (an output's last record whole, a judge's
    # cache closed, a pull's half-written folder removed), one line, exit 130. Python's
    # default ends the process on the spot. Put back when the command ends.
    ctx.with_resource(terminate_as_interrupt())


def run(args: list[str] | None = None) -> None:
    """The ``ceg`` entry point (``args``: the words after ``ceg``; default, the command line)."""
    try:
        _run(args)
    finally:
        # Everything is written: what is left is the interpreter's teardown, whose
        # garbage collections walk every object a model library made, and on a busy
        # machine took 5 to 40 s after `ceg check --judge verifier` (measured with gdb:
        # finalize_modules in _PyGC_CollectNoFail). Frozen objects are not walked; they
        # are still freed, and atexit handlers still run.
        gc.freeze()


def _run(args: list[str] | None) -> None:
    stdout, null_before = sys.stdout, stdout_is_null()
    try:
        app(args, prog_name="ceg")
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
