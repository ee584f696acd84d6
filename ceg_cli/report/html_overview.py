"""The HTML report's static overview: tiles, gate, charts, what ran, the filters.

Written by ``html.ReportBuilder.render`` into the page above the responses (which
the page's script draws from JSON). Every value is escaped with ``html.escape``.
"""

from __future__ import annotations

import html
import json
import math
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__
from ..types import (
    CONTRADICTED,
    FACTUAL,
    JUDGE_ERROR,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    NOT_JUDGED,
    SUPPORTED,
)
from .gate import ERROR, GateResult, Summary
from .html_contexts import CitationTally

LABEL_NAMES = {FACTUAL: "factual", NONFACTUAL: "nonfactual", NOT_JUDGED: "not judged",
               ERROR: "unreadable line"}
VERDICT_NAMES = {SUPPORTED: "supported", NO_CLAIM: "no claim", CONTRADICTED: "contradicted",
                 NOT_ENOUGH_EVIDENCE: "not enough evidence", JUDGE_ERROR: "not judged"}


def escape(value: Any) -> str:
    """``value`` as text safe in HTML, quotes included."""
    return html.escape(str(value), quote=True)


def finite_number(value: Any) -> float | None:
    """A finite float rounded to 4 places, else None (JSON has no NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return round(number, 4) if math.isfinite(number) else None


def citation_figures(s: Summary, tally: CitationTally) -> tuple[float | None, float | None]:
    """The run's citation recall and precision: the summary's, else the records' mean."""
    recall = finite_number(getattr(s, "citation_recall", None))
    precision = finite_number(getattr(s, "citation_precision", None))
    if recall is None and precision is None:
        return tally.figures()
    return recall, precision


def overview(
    s: Summary, gate: GateResult | None, judges: Mapping[str, str],
    index: Path | str | None, source: str | None,
    citations: tuple[float | None, float | None] = (None, None),
) -> str:
    """The static overview: tiles, gate, charts, what ran (every value escaped)."""
    unreadable = f", {s.error_responses:,} unreadable" if s.error_responses else ""
    not_judged = f", {s.not_judged_segments:,} not judged" if s.not_judged_segments else ""
    if gate is None:
        gate_tile = _tile("Gate", "not evaluated", "no thresholds were applied", "gate")
    else:
        word = "passed" if gate.passed else "failed"
        gate_tile = _tile("Gate", word, f"exit status {int(gate.exit_status)}", f"gate {word}")
    tiles = [
        _tile("Responses", f"{s.responses:,}",
              f"{s.nonfactual_responses:,} nonfactual{unreadable}"),
        _tile("Segments", f"{s.segments:,}", f"{s.judged_segments:,} judged{not_judged}"),
        _tile("Nonfactual rate", f"{s.nonfactual_rate:.1%}",
              f"{s.nonfactual_segments:,} of {s.judged_segments:,} judged segments"),
        gate_tile,
    ]
    if citations != (None, None):
        # Shown only for a run whose answers carried citations: an index-mode page is unchanged.
        recall, precision = (f"{v:.1%}" if v is not None else "n/a" for v in citations)
        tiles[3:3] = [
            _tile("Citation recall", recall, "sentences their cited contexts support", "cite-rate"),
            _tile("Citation precision", precision, "citations that support their sentence",
                  "cite-rate"),
        ]
    reasons = ""
    if gate is not None and gate.reasons:
        reasons = "".join(f"<li>{escape(r)}</li>" for r in gate.reasons)
        reasons = f'<ul class="reasons" aria-label="Why the gate failed">{reasons}</ul>'
    verdicts = [(k if k in VERDICT_NAMES else "other", VERDICT_NAMES.get(k, k), n)
                for k, n in sorted(s.segments_by_verdict.items(), key=lambda kv: _order(kv[0]))]
    labels = [(k, LABEL_NAMES[k], s.responses_by_label.get(k, 0)) for k in LABEL_NAMES]
    run = [("Judge", ", ".join(f"{n}: {m}" if m else n for n, m in judges.items()) or s.judge
            or "not recorded"), ("Index", index_info(index, s))]
    if source:
        run.append(("Records", source))
    if s.seconds:
        run.append(("Check time", f"{s.seconds:,.1f} s"))
    run.append(("Written", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
                + f" by ceg {__version__}"))
    return (
        '<div class="tiles">' + "".join(tiles) + "</div>" + reasons
        + '<div class="charts">' + _bar("Segments by verdict", verdicts)
        + _bar("Responses by label", labels) + "</div>"
        + '<dl class="run">' + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in run)
        + "</dl>"
    )


def _order(verdict: str) -> int:
    order = list(VERDICT_NAMES)
    return order.index(verdict) if verdict in order else len(order)


def _tile(name: str, value: str, detail: str, cls: str = "") -> str:
    return (f'<div class="tile {escape(cls)}"><div class="tile-name">{escape(name)}</div>'
            f'<div class="tile-value">{escape(value)}</div>'
            f'<div class="tile-detail">{escape(detail)}</div></div>')


def _bar(title: str, items: list[tuple[str, str, int]]) -> str:
    """A stacked bar (inline SVG) with its legend; zero counts are left out."""
    total = sum(n for _, _, n in items)
    rects, legend, x = [], [], 0.0
    for key, name, n in items:
        if not n:
            continue
        width = 1000 * n / total
        rects.append(f'<rect class="f-{escape(key)}" x="{x:.1f}" y="0" width="{width:.1f}" '
                     f'height="20"><title>{escape(name)}: {n:,}</title></rect>')
        legend.append(f'<li><span class="sw f-{escape(key)}"></span>{escape(name)} <b>{n:,}</b> '
                      f'<span class="muted">{n / total:.0%}</span></li>')
        x += width
    svg = (f'<svg class="bar" viewBox="0 0 1000 20" preserveAspectRatio="none" role="img" '
           f'aria-label="{escape(title)}">' + "".join(rects) + "</svg>") if total else ""
    return (f'<figure class="chart"><figcaption>{escape(title)}</figcaption>{svg}'
            f'<ul class="legend">{"".join(legend) or "<li>none</li>"}</ul></figure>')


def index_info(index: Path | str | None, summary: Summary | None = None) -> str:
    """The index path, with its model and size when its ``meta.json`` is readable."""
    sources = set(getattr(summary, "evidence_sources", None) or ())
    if index is None and sources and not sources & {"index", "both"}:
        return "none: each response was checked against its own contexts"
    if index is None:
        return "not recorded"
    try:
        meta = json.loads((Path(index) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return str(index)
    model = meta.get("model") if isinstance(meta, dict) else None
    counts = meta.get("counts") if isinstance(meta, dict) else None
    info = [str(index)]
    if isinstance(model, dict) and model.get("name"):
        info.append(str(model["name"]))
    if isinstance(counts, dict) and isinstance(counts.get("chunks"), int):
        info.append(f"{counts.get('documents', '?'):,} documents, {counts['chunks']:,} passages"
                    if isinstance(counts.get("documents"), int)
                    else f"{counts['chunks']:,} passages")
    return " · ".join(info)


def filters(labels: Counter[str]) -> str:
    """The "show" radio buttons, with counts; labels no response has are left out."""
    options = [("all", "All", sum(labels.values()))]
    options += [(k, LABEL_NAMES[k].capitalize(), labels.get(k, 0))
                for k in (NONFACTUAL, NOT_JUDGED, ERROR, FACTUAL)
                if k in (NONFACTUAL, FACTUAL) or labels.get(k, 0)]
    return "".join(
        f'<label><input type="radio" name="filter" value="{escape(k)}" id="filter-{escape(k)}"'
        f'{" checked" if k == "all" else ""}> {escape(name)} <span class="n">{n:,}</span></label>'
        for k, name, n in options
    )
