"""``ceg report``: the HTML report of an existing ``ceg check`` output file."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import err_console, handle_errors, warn


@handle_errors
def report_command(
    records: Path = typer.Argument(..., help="Output of ceg check (JSONL).", metavar="RECORDS"),
    out: Path = typer.Option(Path("report.html"), "--out", "-o", help="The HTML file to write."),
    index: Path = typer.Option(
        None,
        "--index",
        help="The index the records were checked against, shown in the overview "
        "(records do not name it).",
        show_default=False,
    ),
    max_rate: float = typer.Option(
        None,
        "--max-nonfactual-rate",
        help="Show the gate's result for this threshold (as ceg check would decide it).",
        show_default=False,
    ),
    max_responses: int = typer.Option(
        None,
        "--max-nonfactual-responses",
        help="Show the gate's result for this many nonfactual responses at most.",
        show_default=False,
    ),
    all_evidence: bool = typer.Option(
        False,
        "--all-evidence",
        help="Keep every retrieved passage, not only citations and what flagged segments saw.",
    ),
    title: str = typer.Option(None, "--title", help="The page's title.", show_default=False),
) -> None:
    """Write RECORDS as one self-contained HTML page to read in a browser."""
    from ..errors import UsageError
    from ..report.gate import GateOptions, evaluate_gate
    from ..report.html import ReportBuilder, iter_records
    from ..report.output import refuse_index_files, refuse_same_files

    if out.is_dir():
        raise UsageError(f"--out {out}: is a directory; name a file")
    refuse_same_files([("records file", records), ("--out", out)])
    # The records name no index: --index when given, and any folder holding a ceg index.
    refuse_index_files([("--out", out)], index)
    gate_options = GateOptions(max_nonfactual_rate=max_rate, max_nonfactual_responses=max_responses)
    builder = ReportBuilder(all_evidence=all_evidence)
    for number, record in iter_records(records, warn):
        builder.add(record, f"{records}: line {number}")
    summary = builder.summary
    summary.index = "" if index is None else str(index)
    gate = evaluate_gate(summary, gate_options)
    size = builder.write(out, summary, gate, index=index, title=title, source=records.name)
    err_console.print(
        f"wrote {out} ({summary.responses:,} responses, {summary.nonfactual_responses:,} "
        f"nonfactual; {size / 1e6:.1f} MB)",
        markup=False,
    )
