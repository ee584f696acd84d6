"""``ceg check``: check responses against an index and gate on the result."""

from __future__ import annotations

import time
from contextlib import nullcontext
from enum import Enum
from pathlib import Path
from typing import Any

import typer

from ..check.settings import ENGINES
from .commands import given_or_none, judge_threshold_source
from .common import (
    ContextsRetrievalOption,
    DeviceOption,
    IndexOption,
    JudgeOption,
    JudgePrecisionOption,
    JudgeThresholdOption,
    LanguageOption,
    LexicalMaxTermsOption,
    QueryOption,
    QuietOption,
    RetrievalOption,
    SearchWidthOption,
    ThresholdOption,
    TopKOption,
    err_console,
    handle_errors,
    spec_option,
    warn,
)
from .progress import cli_progress

CheckEngine = Enum("CheckEngine", {name: name for name in ENGINES}, type=str)  # type: ignore[misc]


@handle_errors
def check_command(
    ctx: typer.Context,
    responses: str = typer.Argument(
        ..., help="Responses file (JSONL), or - for stdin.", metavar="RESPONSES",
        show_default=False,
    ),
    index: Path = IndexOption,
    out: Path = typer.Option(None, "--out", "-o", help="Output JSONL file (default: stdout)."),
    judge: str = JudgeOption,
    judge_threshold: float = JudgeThresholdOption,
    judge_precision: str = JudgePrecisionOption,
    top_k: int = TopKOption,
    threshold: float = ThresholdOption,
    query: str = QueryOption,
    retrieval: str = RetrievalOption,
    search_width: str = SearchWidthOption,
    lexical_max_terms: int = LexicalMaxTermsOption,
    response_field: str = spec_option("response_field"),
    question_field: str = spec_option("question_field"),
    evidence: str = spec_option("evidence"),
    contexts_field: str = spec_option("contexts_field"),
    contexts_retrieval: str = ContextsRetrievalOption,
    language: str = LanguageOption,
    max_rate: float = spec_option("max_nonfactual_rate"),
    max_responses: int = spec_option("max_nonfactual_responses"),
    min_citation_recall: float = spec_option("min_citation_recall"),
    min_citation_precision: float = spec_option("min_citation_precision"),
    citation_pattern: str = spec_option("citation_pattern"),
    junit: Path = typer.Option(None, "--junit", help="Write a JUnit XML report here."),
    report: Path = typer.Option(
        None, "--report", help="Also write an HTML report here (one self-contained file)."
    ),
    summary_file: Path = typer.Option(
        None, "--summary", help="Write a Markdown summary here (e.g. $GITHUB_STEP_SUMMARY)."
    ),
    resume: bool = typer.Option(
        False, "--resume",
        help="Continue an interrupted run: keep --out, skip the lines already in it.",
    ),
    regenerate: bool = spec_option("regenerate"),
    max_attempts: int = spec_option("max_attempts"),
    rewriter: str = spec_option("rewriter"),
    llm_base_url: str = spec_option("llm_base_url"),
    concurrency: int = spec_option("concurrency"),
    temperature: float = spec_option("temperature"),
    no_cache: bool = spec_option("no_cache"),
    cache_dir: Path = spec_option("cache_dir"),
    llm_prompt: str = spec_option("llm_prompt"),
    unparsable_as: str = spec_option("unparsable_as"),
    batch_tokens: int = spec_option("batch_tokens"),
    device: str = DeviceOption,
    engine: CheckEngine = typer.Option(
        "local", "--engine",
        help="local: check in this process; ray: on Ray workers across a cluster, which each "
        "load the judge and the index and check ranges of the responses (needs "
        "ceg-cli[ray]; docs/index-format.md, Checking on Ray). The output is the same.",
    ),
    ray_address: str = typer.Option(
        None, "--ray-address",
        help="With --engine ray: the cluster's head node, HOST:PORT (as `ray start --head` "
        "prints it), ray://HOST:PORT or auto (default: start Ray on this machine).",
        show_default=False,
    ),
    workers: int = typer.Option(
        None, "--workers", min=1,
        help="With --engine ray: how many workers load the judge and check (default: the "
        "cluster's CPUs over what one judge needs: 2 for a checker model, else 1; with "
        "--gpus-per-worker, its GPUs over that; at most the cluster's CPUs, and for an LLM "
        "judge at most --concurrency).",
        show_default=False,
    ),
    gpus_per_worker: float = typer.Option(
        None, "--gpus-per-worker", min=0.0,
        help="With --engine ray: GPUs each worker asks for, where the judge runs (0.5: two "
        "workers share one; default: none).",
        show_default=False,
    ),
    quiet: bool = QuietOption,
) -> None:
    """Check RESPONSES against the index: cite supported segments, flag the rest."""
    from ..check.options import ignored_options, judge_options, judge_values
    from ..check.run import CheckRun, RunSettings, lexical_only_note
    from ..errors import UsageError
    from ..index.build.processes import terminate_as_interrupt
    from ..report.html import ReportBuilder, write_report
    from ..report.output import records_only_on_stdout, refuse_index_files, refuse_same_files

    # What the judge reads, and whether this run reads it (one warning for each it does not).
    given = judge_values(locals())
    settings = RunSettings.resolve(
        responses=responses,
        index=index,
        out=out,
        judge=judge,
        judge_threshold=judge_threshold,
        judge_threshold_source=judge_threshold_source(ctx),
        top_k=top_k,
        threshold=threshold,
        query=query,
        retrieval=given_or_none(ctx, "retrieval", retrieval),
        response_field=response_field,
        question_field=question_field,
        evidence=evidence,
        contexts_field=contexts_field,
        contexts_retrieval=contexts_retrieval,
        language=language,
        citation_pattern=citation_pattern,
        min_citation_recall=min_citation_recall,
        min_citation_precision=min_citation_precision,
        max_rate=max_rate,
        max_responses=max_responses,
        resume=resume,
        regenerate=regenerate,
        max_attempts=max_attempts,
        rewriter=rewriter,
        judge_options=judge_options(given),
        device=device,
        engine=engine.value,
        ray_address=ray_address,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        search_width=search_width,
        lexical_max_terms=lexical_max_terms,
    )
    engine_values = {"engine": engine.value, "ray_address": ray_address, "workers": workers,
                     "gpus_per_worker": gpus_per_worker}
    for message in ignored_options({**given, **engine_values}):
        warn(message)
    if report is not None and report.is_dir():
        raise UsageError(f"--report {report}: is a directory; name an HTML file")
    # Before anything is opened for writing: no output may be the input or another output.
    files: list[tuple[str, str | Path | None]] = [
        ("responses file", responses), ("--out" if out else "standard output", out)
    ]
    for option, path in (("--report", report), ("--junit", junit), ("--summary", summary_file)):
        if path is not None:
            files.append((option, path))
    refuse_same_files(files)
    # Nor a file of the index it reads (a later command would find it unreadable).
    refuse_index_files(files[1:], index)
    # Records going to stdout are kept (compactly) for the report as they pass;
    # with --out the file is read back, resumed records included.
    builder = ReportBuilder() if report is not None and out is None else None

    undecided: Any = None

    def on_record(record: dict[str, Any]) -> None:
        checked.update(1)
        segments.update(len(record.get("segments") or ()))
        if builder is not None:
            builder.add(record)
        if undecided is not None:
            undecided.add(record)

    # On Ray, SIGTERM stops the run as Ctrl-C does: its workers stopped, one line, 130;
    # and standard output holds the records alone (Ray writes its own lines to fd 1).
    on_ray = settings.engine.name == "ray"
    with terminate_as_interrupt() if on_ray else nullcontext(), \
            records_only_on_stdout(quiet) if on_ray else nullcontext():
        run = CheckRun(settings, on_bad_line=warn, on_warning=warn)
        from ..judges.offline.undecided import for_judge

        undecided = for_judge(run.judge_info["name"])
        if not quiet:
            err_console.print(f"judge {run.judge_info['name']}, threshold "
                              f"{run.describe_cuts()}{lexical_only_note(run)}", markup=False)
        started = time.perf_counter()
        try:
            with cli_progress(quiet) as progress:
                checked = progress.counter("checked", "responses")
                segments = progress.counter("segments", "segments")
                run.execute(on_record=on_record, junit=junit, progress=progress)
            run.summary.seconds = time.perf_counter() - started
            result = run.finish(markdown=summary_file)
        finally:
            run.close()
    if report is not None:
        # A run on the records' own contexts read no index: the report names none.
        used = index if run.summary.index else None
        if builder is None:
            write_report(report, out, run.summary, result, index=used, warn=warn)
        else:
            builder.write(report, run.summary, result, index=used)
    if run.resumed:
        err_console.print(f"resumed: {run.resumed} responses were already in {out}")
    advice = undecided.advice() if undecided is not None else None
    if advice is not None:
        warn(advice)
    _render(run, result)
    _flagged(run.summary.examples, err_console)
    raise typer.Exit(int(result.exit_status))


#: Flagged segments listed after the summary.
SHOWN_FLAGGED = 10


def _flagged(examples, console) -> None:  # type: ignore[no-untyped-def]
    """The first flagged segments, their unsupported words underlined on a terminal and
    between ``[[`` and ``]]`` elsewhere (a CI log, a file), then quoted on a line."""
    from rich.text import Text

    rows = [(e, seg) for e in examples for seg in e.flagged]
    if not rows:
        return
    total = sum(e.flagged_total for e in examples)
    more = f" (first {min(len(rows), SHOWN_FLAGGED)} of {total} in the responses shown)" \
        if total > SHOWN_FLAGGED else ""
    console.print(f"flagged segments{more}:", markup=False)
    for outcome, seg in rows[:SHOWN_FLAGGED]:
        line = Text(f"  {outcome.id} [{seg.index}] {seg.verdict}: ")
        if console.is_terminal:
            at = 0
            for sp in seg.spans:
                if sp.kind == "segment":
                    continue
                line.append(seg.text[at:sp.start])
                line.append(seg.text[sp.start:sp.end], style="bold underline red")
                at = sp.end
            line.append(seg.text[at:])
        else:
            line.append(seg.marked() if any(sp.kind != "segment" for sp in seg.spans)
                        else seg.text)
        console.print(line)
        quoted = seg.quoted()
        if quoted:
            console.print(Text(f"      unsupported: {quoted}"))


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
    cited = s.citations
    if cited["responses"]:
        recall, precision = s.citation_recall, s.citation_precision
        table.add_row("citations checked", f"{cited['citations']} in {cited['responses']} "
                      "responses")
        table.add_row("  recall", "-" if recall is None else f"{recall:.1%}")
        table.add_row("  precision", "-" if precision is None else f"{precision:.1%}")
        table.add_row("  uncited claims", str(cited["uncited"]))
    table.add_row("time", f"{s.seconds:.1f} s")
    table.add_row("judge", s.judge)
    table.add_row("  threshold", run.describe_cuts(used=True))
    if set(s.evidence_sources) - {"index"}:  # say so when not all came from the index
        table.add_row("evidence", ", ".join(
            f"{source} {n}" for source, n in sorted(s.evidence_sources.items())))
    usage = run.llm_usage()
    if usage is not None:
        table.add_row("LLM calls", str(usage["calls"]))
        table.add_row("  from cache", str(usage["cache_hits"]))
        table.add_row("  retries", str(usage["retries"]))
        table.add_row(
            "  tokens", f"{usage['prompt_tokens']} in, {usage['completion_tokens']} out"
        )
        # Words the model named as unsupported that its segment lacks (judges/llm.py).
        dropped = getattr(getattr(run, "judge", None), "spans_dropped", 0)
        if dropped:
            table.add_row("  words not in their segment", f"{dropped} (dropped)")
    if run.settings.regenerate:
        table.add_row("regenerated", str(run.regenerated))
        table.add_row("  repaired", str(run.repaired))
    err_console.print(table)
    verdict = "[bold green]passed[/]" if result.passed else "[bold red]failed[/]"
    err_console.print(f"gate: {verdict}")
    for reason in result.reasons:
        err_console.print(f"  {reason}", markup=False)
