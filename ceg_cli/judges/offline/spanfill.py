"""Spans for the flagged segments of a judge that gives none (``judges/spans.py``):
the offline judge's where it flags the segment too, else the whole segment. The
check calls ``fill_spans`` on every judge's verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ceg_cli.spans import whole_segment
from ceg_cli.types import NONFACTUAL, JudgeItem, Span, Verdict

__all__ = ["fill_spans", "offline_spans"]


def fill_spans(items: Sequence[JudgeItem], verdicts: Sequence[Verdict]) -> list[Verdict]:
    """``verdicts`` with spans on every flagged segment that has none: the offline
    judge's where it flags the segment too (at its shipped cut for the item's setting
    and language), else the whole segment; spans taken off supported segments."""
    out = []
    for item, v in zip(items, verdicts):
        if v.label != NONFACTUAL:
            out.append(replace(v, spans=()) if v.spans else v)
        elif v.spans:
            out.append(v)
        else:
            out.append(replace(v, spans=offline_spans(item)))
    return out


def offline_spans(item: JudgeItem) -> tuple[Span, ...]:
    """The offline judge's spans for ``item`` where it flags it, else the whole segment."""
    from .offline import decide, item_cut, shipped_cuts

    lexical = decide(item, cut=item_cut(shipped_cuts(), item).value)
    if lexical.label == NONFACTUAL and lexical.spans:
        return lexical.spans
    return (whole_segment(item.segment.text),)
