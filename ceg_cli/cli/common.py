"""What every command shares: options, the stderr console, error-to-exit mapping."""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ..check.options import OPTIONS, OptionSpec
from ..errors import CegError, ExitStatus, exit_code_for
from ..index.dense.devices import DEVICES, PRECISIONS

F = TypeVar("F", bound=Callable[..., Any])

#: Diagnostics and progress go to stderr, data to stdout, so
#: ``ceg check x.jsonl > out.jsonl`` works.
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


class _StdoutConsole(Console):
    """rich's console on stdout that leaves a closed stdout to ``handle_errors``: rich
    would end the process itself with exit 1, the code of a failed gate."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, "standard output was closed")


#: What commands print as their data (tables, search hits) goes here.
out_console = _StdoutConsole(highlight=False, soft_wrap=True)


class _Text(str):
    """Command-line text where a number is wanted: parsed and checked by the option's
    callback, which knows where the text came from and quotes it as it was typed."""


def _spec_text(spec: OptionSpec) -> Callable[[Any], Any]:
    """Typer's parser: text (a flag's, a variable's) is kept for the callback, which
    makes it the option's kind; a typed value (a default, a project file's) passes."""

    def parse(value: Any) -> Any:
        if not isinstance(value, str) or spec.kind not in ("int", "float"):
            return value
        return _Text(value)

    return parse


def _spec_check(spec: OptionSpec) -> Callable[..., Any]:
    """The option's callback: the value checked by the table every caller uses, a bad
    one refused in one line (exit 2) naming where it came from."""

    def check(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is None:
            return None
        try:
            if isinstance(value, _Text):
                return spec.parse(str(value))
            return spec.check(value)
        except CegError as exc:
            message = str(exc)
            source = ctx.get_parameter_source(param.name or "")
            if source is not None and source.name == "ENVIRONMENT" and spec.envvar:
                message += f" (from ${spec.envvar})"
            print_error(message)
            raise typer.Exit(int(ExitStatus.USAGE)) from None

    return check


def _metavar(spec: OptionSpec) -> str | None:
    if spec.kind == "choice":
        return "<" + "|".join(spec.choices) + ">"
    if spec.kind in ("int", "float"):
        low = None if spec.low is None else f"{spec.low:g}"
        high = None if spec.high is None else f"{spec.high:g}"
        span = (f"{low}<=x<={high}" if low is not None and high is not None
                else f"x>={low}" if low is not None else None)
        return f"<{spec.kind} range> [{span}]" if span else f"<{spec.kind}>"
    return "<path>" if spec.kind == "path" else None


def spec_option(key: str, default: Any = ..., **overrides: Any) -> Any:
    """The typer option of ``check/options.py``'s entry ``key``: its flag, default, help
    and variable (``overrides`` replace them for one command), checked by the table."""
    spec = OPTIONS[key]
    decls = [spec.flag, *([spec.short] if spec.short else [])]
    settings: dict[str, Any] = {"help": spec.help, "envvar": spec.envvar}
    settings.update(overrides)
    default = spec.default if default is ... else default
    if default is None:
        settings.setdefault("show_default", False)
    if spec.kind == "bool":
        settings.pop("envvar")
        return typer.Option(default, *decls, **settings)
    return typer.Option(
        default, *decls, parser=_spec_text(spec), callback=_spec_check(spec),
        metavar=_metavar(spec), **settings,
    )


IndexOption = spec_option("index")
QuietOption = typer.Option(False, "--quiet", "-q", help="No progress output.")

# Options shared by `check` and `eval`: made from check/options.py's table, so
# `--help`, the code, the API and the README (pinned by tests/test_cli_options.py)
# cannot drift apart.
TopKOption = spec_option("top_k")
ThresholdOption = spec_option("threshold")
QueryOption = spec_option("query")
RetrievalOption = spec_option("retrieval")
LexicalMaxTermsOption = spec_option("lexical_max_terms")
ContextsRetrievalOption = spec_option("contexts_retrieval")
DeviceOption = spec_option("device")
JudgePrecisionOption = spec_option("judge_precision")
JudgeThresholdOption = spec_option("judge_threshold")
JudgeOption = spec_option("judge")

SearchWidthOption = spec_option("search_width")
LanguageOption = typer.Option(
    "auto",
    "--language",
    help="The language of the text: auto detects each record's (and each document's) "
    "offline; a code (en, de, zh, ar, ...) names it for all. ceg languages lists the codes "
    "and what ceg does for each.",
)

# `index build` and `judge train` keep their own device and precision options.
EmbedDevice = Enum("EmbedDevice", {name: name for name in DEVICES}, type=str)  # type: ignore[misc]
EmbedPrecision = Enum(  # type: ignore[misc]
    "EmbedPrecision", {name: name for name in PRECISIONS}, type=str
)


#: Set by the ``ceg`` callback from ``--debug`` on every invocation.
_debug_flag = False


def set_debug(enabled: bool) -> None:
    """Record ``ceg --debug`` (the callback runs before any command)."""
    global _debug_flag
    _debug_flag = enabled


def _debug_enabled() -> bool:
    return _debug_flag


def handle_errors(func: F) -> F:
    """Map exceptions to exit codes in one place; a CegError prints one line."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/]")
            raise typer.Exit(int(ExitStatus.INTERRUPTED)) from None
        except CegError as exc:
            if _debug_enabled():
                raise
            print_error(str(exc))
            raise typer.Exit(exit_code_for(exc)) from None
        except Exception as exc:
            if isinstance(exc, BrokenPipeError) and stdout_closed():
                # `ceg ... | head`: the reader has what it wanted; no message, no traceback.
                quiet_stdout()
                raise typer.Exit(int(ExitStatus.STDOUT_CLOSED)) from None
            if _debug_enabled():
                raise
            err_console.print(
                f"[bold red]internal error:[/] {type(exc).__name__}: {escape(str(exc))} "
                "(run with --debug for the traceback)"
            )
            raise typer.Exit(int(ExitStatus.RUNTIME)) from None

    return wrapper  # type: ignore[return-value]


def stdout_closed() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone, so that a
    ``BrokenPipeError`` came from it and not from another pipe (an LLM server's, a child's)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    import select

    if not hasattr(select, "poll"):  # Windows: no way to ask; stdout is the likely one
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def stdout_is_null() -> bool:
    """Whether stdout is the null device (where ``quiet_stdout`` and rich put a closed one)."""
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(os.devnull))
    except (AttributeError, OSError, ValueError):
        return False


def quiet_stdout() -> None:
    """Point stdout at the null device, so that what is still buffered for it, flushed at
    exit, cannot raise again (Python's documented recipe for a closed stdout, SIGPIPE note
    of the ``signal`` module)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def print_error(message: str) -> None:
    """``error: MESSAGE`` on stderr, the message as it is: it quotes user data (paths,
    input lines, patterns with backslashes), never read as markup."""
    err_console.print(Text.assemble(("error:", "bold red"), " ", message), highlight=False)


def warn(message: str) -> None:
    err_console.print(Text.assemble(("warning:", "yellow"), " ", message), highlight=False)
