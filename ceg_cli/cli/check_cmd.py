"""``ceg check``: check responses against an index and gate on the result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from .common import IndexOption, QuietOption, err_console, handle_errors, warn


@handle_errors
def check_command(
    responses: str = typer.Argument(..., help="Responses file (JSONL), or - for stdin."),
    index: Path = IndexOption,
    out: Path = typer.Option(None, "--out", "-o", help="Output JSONL file (default: stdout)."),
    judge: str = typer.Option("offline", "--judge", help="offline | nli:MODEL"),
    top_k: int = typer.Option(
        None, "--top-k", "-k", help="Passages retrieved per segment.", show_default=False
    ),
    threshold: float = typer.Option(
        None,
        "--threshold",
        help="Similarity below which passages after the first are dropped (the CEG rule).",
        show_default=False,
    ),
    query: str = typer.Option(
        None,
        "--query",
        help="Search with the 'segment' or 'question+segment'.",
        show_default=False,
    ),
    response_field: str = typer.Option("response", "--response-field"),
    question_field: str = typer.Option(
        None, "--question-field", help="(default: question, then prompt)", show_default=False
    ),
    max_rate: float = typer.Option(
        None,
        "--max-nonfactual-rate",
        help="Fail (exit 1) when the share of nonfactual segments exceeds this.",
        show_default=False,
    ),
    max_responses: int = typer.Option(
        None,
        "--max-nonfactual-responses",
        help="Fail (exit 1) when more responses than this are nonfactual.",
        show_default=False,
    ),
    junit: Path = typer.Option(None, "--junit", help="Write a JUnit XML report here."),
    report: Path = typer.Option(
        None, "--report", help="Also write an HTML report here (one self-contained file)."
    ),
    summary_file: Path = typer.Option(
        None, "--summary", help="Write a Markdown summary here (e.g. $GITHUB_STEP_SUMMARY)."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Continue an interrupted run: keep --out, skip ids already in it."
    ),
    quiet: bool = QuietOption,
) -> None:
    """Check RESPONSES against the index: cite supported segments, flag the rest."""
    from ..checking import CheckRun, RunSettings
    from ..errors import UsageError
    from ..html_report import ReportBuilder, write_report

    settings = RunSettings.resolve(
        responses=responses,
        index=index,
        out=out,
        judge=judge,
        top_k=top_k,
        threshold=threshold,
        query=query,
        response_field=response_field,
        question_field=question_field,
        max_rate=max_rate,
        max_responses=max_responses,
        resume=resume,
    )
    if report is not None and (
        report.is_dir() or (out is not None and report.resolve() == out.resolve())
    ):
        raise UsageError(f"--report {report}: name an HTML file other than --out")
    run = CheckRun(settings, on_bad_line=warn)
    # Records going to stdout are kept (compactly) for the report as they pass;
    # with --out the file is read back, resumed records included.
    builder = ReportBuilder() if report is not None and out is None else None

    def on_record(record: dict[str, Any]) -> None:
        bar.update(1)
        if builder is not None:
            builder.add(record)

    started = time.perf_counter()
    try:
        with _progress(quiet) as bar:
            run.execute(on_record=on_record, junit=junit)
        run.summary.seconds = time.perf_counter() - started
        result = run.finish(markdown=summary_file)
    finally:
        run.close()
    if report is not None:
        if builder is None:
            write_report(report, out, run.summary, result, index=index, warn=warn)
        else:
            builder.write(report, run.summary, result, index=index)
    if run.resumed:
        err_console.print(f"resumed: {run.resumed} responses were already in {out}")
    _render(run, result)
    raise typer.Exit(int(result.exit_status))


def _progress(quiet: bool):  # type: ignore[no-untyped-def]
    from tqdm import tqdm

    return tqdm(desc="responses", unit=" responses", disable=quiet, dynamic_ncols=True)


def _render(run, result) -> None:  # type: ignore[no-untyped-def]
    from rich.table import Table

    s = run.summary
    table = Table(title="ceg check", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("responses", str(s.responses))
    table.add_row("  nonfactual", str(s.nonfactual_responses))
    table.add_row("  bad input lines", str(s.error_responses))
    table.add_row("segments", str(s.segments))
    table.add_row("  nonfactual", str(s.nonfactual_segments))
    table.add_row("  not judged", str(s.not_judged_segments))
    table.add_row("nonfactual rate", f"{s.nonfactual_rate:.1%}")
    table.add_row("time", f"{s.seconds:.1f} s")
    table.add_row("judge", s.judge)
    err_console.print(table)
    verdict = "[bold green]passed[/]" if result.passed else "[bold red]failed[/]"
    err_console.print(f"gate: {verdict}")
    for reason in result.reasons:
        err_console.print(f"  {reason}", markup=False)
