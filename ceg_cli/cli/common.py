"""What every command shares: options, the stderr console, error-to-exit mapping."""

from __future__ import annotations

import functools
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from ..check.ctxsearch import CONTEXT_RETRIEVAL_MODES, DEFAULT_CONTEXT_RETRIEVAL
from ..check.pipeline import DEFAULT_QUERY, EVIDENCE_MODES, QUERY_MODES
from ..check.retrieve import DEFAULT_THRESHOLD, DEFAULT_TOP_K
from ..errors import CegError, ExitStatus, exit_code_for
from ..index.embedding import DEVICES, PRECISIONS
from ..index.lexical import DEFAULT_RETRIEVAL, RETRIEVAL_MODES
from ..judges.llm import PROMPTS, UNPARSABLE_CHOICES
from ..judges.precision import DEFAULT_PRECISION as DEFAULT_JUDGE_PRECISION
from ..judges.precision import PRECISIONS as JUDGE_PRECISIONS

F = TypeVar("F", bound=Callable[..., Any])

#: Diagnostics and progress go to stderr, data to stdout, so
#: ``ceg check x.jsonl > out.jsonl`` works.
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

IndexOption = typer.Option(
    Path("index"),
    "--index",
    envvar="CEG_INDEX",
    help="Index directory.",
)
QuietOption = typer.Option(False, "--quiet", "-q", help="No progress output.")

# Retrieval options shared by `check` and `eval`. Defaults come from the
# library's constants, so `--help`, the code and the README (pinned by
# tests/test_cli_options.py) cannot drift apart.
QueryMode = Enum("QueryMode", {mode: mode for mode in QUERY_MODES}, type=str)  # type: ignore[misc]
EvidenceMode = Enum(  # type: ignore[misc]
    "EvidenceMode", {mode: mode for mode in EVIDENCE_MODES}, type=str
)
RetrievalMode = Enum(  # type: ignore[misc]
    "RetrievalMode", {mode: mode for mode in RETRIEVAL_MODES}, type=str
)
UnparsableAs = Enum(  # type: ignore[misc]
    "UnparsableAs", {choice: choice for choice in UNPARSABLE_CHOICES}, type=str
)
LlmPrompt = Enum("LlmPrompt", {name: name for name in PROMPTS}, type=str)  # type: ignore[misc]

TopKOption = typer.Option(
    DEFAULT_TOP_K,
    "--top-k",
    "-k",
    envvar="CEG_TOP_K",
    min=1,
    help="Passages retrieved per segment.",
)
ThresholdOption = typer.Option(
    DEFAULT_THRESHOLD,
    "--threshold",
    envvar="CEG_THRESHOLD",
    min=-1.0,
    max=1.0,
    help="Cosine similarity below which passages after the first are dropped (the CEG rule).",
)
QueryOption = typer.Option(
    DEFAULT_QUERY,
    "--query",
    envvar="CEG_QUERY",
    help="What is searched: the segment alone, or the question and the segment.",
)
RetrievalOption = typer.Option(
    DEFAULT_RETRIEVAL,
    "--retrieval",
    envvar="CEG_RETRIEVAL",
    help="How passages are found: dense (cosine), lexical (BM25) or hybrid (both, fused); "
    "the threshold applies to the cosine in every case.",
)
ContextsRetrievalMode = Enum(  # type: ignore[misc]
    "ContextsRetrievalMode", {name: name for name in CONTEXT_RETRIEVAL_MODES}, type=str
)
LanguageOption = typer.Option(
    "auto",
    "--language",
    help="The language of the text: auto detects each record's (and each document's) "
    "offline; a code (en, de, zh, ar, ...) names it for all. ceg languages lists the codes "
    "and what ceg does for each.",
)
ContextsRetrievalOption = typer.Option(
    DEFAULT_CONTEXT_RETRIEVAL,
    "--contexts-retrieval",
    envvar="CEG_CONTEXTS_RETRIEVAL",
    help="How a record's own passages are ranked: lexical (BM25, nothing embedded, no "
    "threshold: the contexts were retrieved for the record), or dense or hybrid, as "
    "--retrieval ranks an index, with the threshold.",
)
EmbedDevice = Enum("EmbedDevice", {name: name for name in DEVICES}, type=str)  # type: ignore[misc]
EmbedPrecision = Enum(  # type: ignore[misc]
    "EmbedPrecision", {name: name for name in PRECISIONS}, type=str
)
DeviceOption = typer.Option(
    "auto",
    "--device",
    help="Where the models compute (the index's embedder for queries, the verifier's or "
    "NLI judge's model): auto is CUDA when torch sees one, else the CPU.",
)
JudgePrecision = Enum(  # type: ignore[misc]
    "JudgePrecision", {name: name for name in JUDGE_PRECISIONS}, type=str
)
JudgePrecisionOption = typer.Option(
    DEFAULT_JUDGE_PRECISION,
    "--judge-precision",
    help="The float width of a minicheck:, hhem: or nli: checker: float32 (parity with "
    "the authors), bfloat16, or float16 (CUDA only; not for T5).",
)
JudgeOption = typer.Option(
    "offline",
    "--judge",
    help="offline, verifier, verifier:DIR, nli:MODEL, minicheck:ALIAS|DIR, hhem:ALIAS|DIR "
    "or llm:MODEL (ceg models list shows the aliases).",
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
