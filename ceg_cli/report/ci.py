"""CI renderings of a ``ceg check`` run: JUnit XML and a GitHub Markdown summary.

Both stream: the JUnit writer serializes each test case as it arrives into a
temporary spool file and keeps only counts, so a run of 100k responses holds
no results in memory; the Markdown summary needs only the ``Summary`` (which
keeps the first few flagged responses) and the ``GateResult``.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..types import FACTUAL, NONFACTUAL, NOT_JUDGED, CheckedResponse
from .gate import (
    ERROR,
    FlaggedSegment,
    GateResult,
    ResponseOutcome,
    Summary,
    shorten,
)

# Characters XML 1.0 forbids even escaped (C0 controls other than tab, newline
# and carriage return; lone surrogates; U+FFFE/U+FFFF). ElementTree writes them
# as they are, which makes the file unparsable, so they become U+FFFD.
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """``text`` with the characters XML cannot hold replaced by U+FFFD."""
    return _XML_FORBIDDEN.sub("\ufffd", text)


def _element(tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.Element(tag, {k: xml_safe(v) for k, v in attrs.items()})
    if text is not None:
        el.text = xml_safe(text)
    return el


def _segment_line(seg: FlaggedSegment) -> str:
    reason = f": {seg.reason}" if seg.reason else ""
    line = f"[{seg.index}] {seg.label} ({seg.verdict}){reason}\n    {seg.marked()}"
    quoted = seg.quoted()
    return f"{line}\n    unsupported: {quoted}" if quoted else line


def _details(outcome: ResponseOutcome) -> str:
    lines = [_segment_line(seg) for seg in outcome.flagged]
    if outcome.flagged_total > len(outcome.flagged):
        lines.append(f"... and {outcome.flagged_total - len(outcome.flagged)} more")
    return "\n".join(lines)


def _message(outcome: ResponseOutcome, what: str) -> str:
    # One line for the CI views that show only the message attribute.
    listed = "; ".join(
        f"[{seg.index}] {seg.verdict}"
        + (f" (unsupported: {seg.quoted()})" if seg.spans else "")
        + (f": {seg.reason}" if seg.reason else "")
        for seg in outcome.flagged
    )
    head = f"{outcome.flagged_total} of {outcome.segments} segments {what}"
    return shorten(f"{head}: {listed}" if listed else head, 500)


class JUnitWriter:
    """Writes one ``<testcase>`` per response; the file appears on ``close``.

    A nonfactual response is a ``<failure>`` listing its flagged segments with
    verdict and reason; an unreadable input line or a response with segments
    the judge could not judge is an ``<error>``; anything else passes.
    """

    def __init__(self, path: str | Path, suite_name: str = "ceg") -> None:
        self.path = Path(path)
        self.suite_name = suite_name
        self.tests = self.failures = self.errors = 0
        self._spool = tempfile.TemporaryFile()

    def add(self, item: CheckedResponse | ResponseOutcome) -> None:
        outcome = item if isinstance(item, ResponseOutcome) else ResponseOutcome.of(item)
        case = _element("testcase", classname="ceg", name=outcome.id)
        if outcome.label == NONFACTUAL:
            self.failures += 1
            message = _message(outcome, "flagged")
            case.append(_element("failure", _details(outcome), message=message,
                                 type="nonfactual"))
        elif outcome.label == ERROR:
            self.errors += 1
            message = f"line {outcome.line}: {outcome.error or 'unreadable'}"
            case.append(_element("error", message, message=message, type="bad_input"))
        elif outcome.label == NOT_JUDGED:
            self.errors += 1
            message = _message(outcome, "not judged")
            case.append(_element("error", _details(outcome), message=message,
                                 type="not_judged"))
        if outcome.failed_citations:
            # Citations fail the run only through the gate's thresholds: shown, not failed.
            case.append(_element("system-out", "failed citations:\n"
                                 + "\n".join(outcome.failed_citations)))
        self.tests += 1
        self._spool.write(ET.tostring(case, encoding="utf-8", xml_declaration=False))
        self._spool.write(b"\n")

    def close(self, summary: Summary | None = None) -> None:
        """Write the file: suite counts, ``time`` and properties from ``summary``."""
        seconds = f"{summary.seconds:.3f}" if summary is not None else "0"
        counts = {"tests": str(self.tests), "failures": str(self.failures),
                  "errors": str(self.errors), "time": seconds}
        with self.path.open("wb") as out:
            out.write(b'<?xml version="1.0" encoding="UTF-8"?>\n')
            out.write(_open_tag("testsuites", name=self.suite_name, **counts) + b"\n")
            out.write(_open_tag("testsuite", name=self.suite_name, skipped="0", **counts) + b"\n")
            if summary is not None:
                props = _element("properties")
                for name, value in (
                    ("judge", summary.judge),
                    ("index", summary.index),
                    ("segments", str(summary.segments)),
                    ("nonfactual_segments", str(summary.nonfactual_segments)),
                    ("nonfactual_rate", f"{summary.nonfactual_rate:.6f}"),
                    *_citation_properties(summary),
                ):
                    props.append(_element("property", name=name, value=value))
                out.write(ET.tostring(props, encoding="utf-8", xml_declaration=False) + b"\n")
            self._spool.seek(0)
            shutil.copyfileobj(self._spool, out)
            out.write(b"</testsuite>\n</testsuites>\n")
        self._spool.close()


def _citation_properties(summary: Summary) -> list[tuple[str, str]]:
    if not summary.citations["responses"]:
        return []
    recall, precision = summary.citation_recall, summary.citation_precision
    return [("citation_recall", "" if recall is None else f"{recall:.6f}"),
            ("citation_precision", "" if precision is None else f"{precision:.6f}")]


def _open_tag(tag: str, **attrs: str) -> bytes:
    # ElementTree escapes the attributes; only the closing tag is cut off.
    full = ET.tostring(_element(tag, **attrs), encoding="utf-8", xml_declaration=False,
                       short_empty_elements=False)
    return full[: -len(f"</{tag}>")]


def write_junit(
    path: str | Path,
    checked: Iterable[CheckedResponse | ResponseOutcome],
    summary: Summary | None = None,
    suite_name: str = "ceg",
) -> None:
    """Write a JUnit XML report of ``checked`` (consumed once, streamed)."""
    writer = JUnitWriter(path, suite_name)
    for item in checked:
        writer.add(item)
    writer.close(summary)


# -- Markdown --------------------------------------------------------------

MAX_CELL = 200


def md_cell(text: str, limit: int = MAX_CELL) -> str:
    """``text`` made safe for a GFM table cell: one line, ``|`` and HTML escaped.

    Brackets are escaped too, so a response's ``[text](url)`` or ``![](url)``
    shows as written instead of becoming a link or an image in the summary.
    """
    text = shorten(xml_safe(text).replace("\ufffd", " "), limit)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
    return text.replace("[", "\\[").replace("]", "\\]")


def render_markdown(
    summary: Summary,
    gate: GateResult,
    examples: Sequence[ResponseOutcome] | None = None,
    title: str = "ceg check",
) -> str:
    """The run as GitHub-flavoured Markdown: verdict, numbers, reasons, examples.

    ``examples`` defaults to ``summary.examples`` (the first few nonfactual,
    not_judged and unreadable responses).
    """
    s = summary
    examples = s.examples if examples is None else examples
    status = int(gate.exit_status)
    head = "✅ passed" if gate.passed else f"❌ failed (exit {status})"
    out = [f"## {md_cell(title)}: {head}", ""]
    rows = [
        ("Responses", str(s.responses)),
        ("Factual responses", str(s.responses_by_label[FACTUAL])),
        ("Nonfactual responses", str(s.nonfactual_responses)),
        ("Responses not judged", str(s.not_judged_responses)),
        ("Unreadable input lines", str(s.error_responses)),
        ("Segments", str(s.segments)),
        ("Nonfactual segments", str(s.nonfactual_segments)),
        ("Segments not judged", str(s.not_judged_segments)),
        ("Nonfactual rate", f"{s.nonfactual_rate:.1%} ({s.nonfactual_segments} of "
                            f"{s.judged_segments} judged segments)"),
        ("Time", f"{s.seconds:.1f} s"),
        ("Judge", s.judge or "-"),
        ("Index", s.index or "-"),
    ]
    if set(s.evidence_sources) - {"index"}:
        rows.append(("Evidence", ", ".join(f"{source}: {n}" for source, n
                                           in sorted(s.evidence_sources.items()))))
    if s.citations["responses"]:
        c, recall, precision = s.citations, s.citation_recall, s.citation_precision
        rows += [
            ("Citation recall", "-" if recall is None else
             f"{recall:.1%} ({c['supported']} of {c['sentences']} sentences with a claim)"),
            ("Citation precision", "-" if precision is None else
             f"{precision:.1%} ({c['relevant']} of {c['citations']} citations)"),
            ("Claims with no citation", str(c["uncited"])),
        ]
    out += ["| | |", "|---|---:|"]
    out += [f"| {name} | {md_cell(value)} |" for name, value in rows]
    if gate.reasons:
        out += ["", "**Why the gate failed:**", ""]
        out += [f"- {md_cell(reason, 500)}" for reason in gate.reasons]
    flagged = [e for e in examples if e.label == NONFACTUAL]
    if flagged:
        out += ["", _heading("Nonfactual responses", len(flagged), s.nonfactual_responses), ""]
        out += _segment_table(flagged)
    unjudged = [e for e in examples if e.label == NOT_JUDGED]
    if unjudged:
        out += ["", _heading("Responses not judged", len(unjudged), s.not_judged_responses), ""]
        out += _segment_table(unjudged)
    if s.citation_examples:
        out += ["", "### Failed citations", "", "| Response | Sentence and why |", "|---|---|"]
        for e in s.citation_examples:
            out += [f"| {md_cell(e.id, 60)} | {md_cell(line)} |" for line in e.failed_citations]
    bad = [e for e in examples if e.label == ERROR]
    if bad:
        out += ["", _heading("Unreadable input lines", len(bad), s.error_responses), ""]
        out += ["| Line | Problem |", "|---:|---|"]
        out += [f"| {e.line} | {md_cell(e.error or '')} |" for e in bad]
    return "\n".join(out) + "\n"


def _heading(what: str, shown: int, total: int) -> str:
    return f"### {what}" + (f" (first {shown} of {total})" if total > shown else "")


def _segment_table(outcomes: Sequence[ResponseOutcome]) -> list[str]:
    lines = ["| Response | # | Segment | Verdict | Reason |", "|---|---:|---|---|---|"]
    for e in outcomes:
        for seg in e.flagged:
            lines.append(f"| {md_cell(e.id, 60)} | {seg.index} | {_md_marked(seg)} | "
                         f"{md_cell(seg.verdict)} | {md_cell(seg.reason)} |")
        if e.flagged_total > len(e.flagged):
            lines.append(f"| {md_cell(e.id, 60)} | | … and {e.flagged_total - len(e.flagged)} "
                         "more | | |")
    return lines


def _md_marked(seg: FlaggedSegment) -> str:
    """The segment's cell, its unsupported spans in bold (``**1812**``)."""
    if not seg.spans or all(sp.kind == "segment" for sp in seg.spans):
        return md_cell(seg.text)
    # Private-use characters mark the spans through md_cell's escaping.
    cell = md_cell(seg.marked("\ue000", "\ue001"))
    if cell.count("\ue000") != cell.count("\ue001"):  # the cell's cut fell inside a span
        cell = cell[:cell.rindex("\ue000")] + cell[cell.rindex("\ue000") + 1:]
    return cell.replace("\ue000", "**").replace("\ue001", "**")


def write_markdown_summary(
    path: str | Path,
    summary: Summary,
    gate: GateResult,
    examples: Sequence[ResponseOutcome] | None = None,
    *,
    append: bool = False,
) -> None:
    """Write (or with ``append``, add to) ``path`` the Markdown of ``render_markdown``."""
    with Path(path).open("a" if append else "w", encoding="utf-8") as out:
        out.write(render_markdown(summary, gate, examples))
