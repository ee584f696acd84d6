"""The HTML report's view of a record's own evidence: its contexts and its citations.

A record checked against the contexts its RAG system retrieved carries them
through (the field named by ``read["contexts"]``); its passages say which
context they were cut from and their span in it. The report shows each
context once, with the passages that support a segment highlighted, and the
``citation_check`` of the markers the answer already carried.

Spans are sent to the page's script in UTF-16 code units, the unit
JavaScript's strings count in, so a context outside the BMP highlights the
same characters Python cut (Python counts code points).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from ..corpus.contexts import ContextsError, find_contexts
from ..types import Context

#: Citation statuses a sentence can fail with (``citation_check.status``).
FAILED_CITATION = ("unsupported", "uncited")
#: Most references shown per sentence (a runaway marker list stays readable).
MAX_REFS = 50


def record_contexts(record: Mapping[str, Any]) -> tuple[str, tuple[Context, ...]] | None:
    """``(field, contexts)`` of a record, or None when it names none or they are gone.

    A field dropped from the record (over 1 MiB) or no longer readable leaves
    the report with the passages alone.
    """
    read = record.get("read")
    name = read.get("contexts") if isinstance(read, Mapping) else None
    if not isinstance(name, str) or not name:
        return None
    try:
        found, contexts = find_contexts(record, (name,))
    except ContextsError:
        return None
    return None if found is None or contexts is None else (name, contexts)


def utf16(text: str, at: int) -> int:
    """Code point offset ``at`` of ``text`` in UTF-16 code units."""
    return len(text[:at].encode("utf-16-le", "surrogatepass")) // 2


def highlights(
    segments: list[Mapping[str, Any]], contexts: tuple[Context, ...]
) -> list[list[int]]:
    """``[[context position, start, end, marker], ...]`` for each citation into ``contexts``.

    Spans are in UTF-16 units. A citation whose span does not hold its text in
    that context (a hand-edited record) is left out: it is still shown among
    the sources, as a passage.
    """
    out: list[list[int]] = []
    for seg in segments:
        for c in seg.get("citations") or []:
            span = context_span(c, contexts) if isinstance(c, Mapping) else None
            marker = c.get("marker") if isinstance(c, Mapping) else None
            if span is None or not _is_int(marker):
                continue
            pos, start, end = span
            text = contexts[pos - 1].text
            item = [pos, utf16(text, start), utf16(text, end), marker]
            if item not in out:
                out.append(item)
    return out


def context_span(
    passage: Mapping[str, Any], contexts: tuple[Context, ...]
) -> tuple[int, int, int] | None:
    """``(position, start, end)`` of a context passage whose span holds its text, else None."""
    pos, start, end = passage.get("context"), passage.get("start"), passage.get("end")
    if not (_is_int(pos) and _is_int(start) and _is_int(end)) or not 1 <= pos <= len(contexts):
        return None
    text = contexts[pos - 1].text
    if not 0 <= start < end <= len(text) or text[start:end] != passage.get("text"):
        return None
    return pos, start, end


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def segment_check(value: Any) -> dict[str, Any] | None:
    """A segment's ``citation_check``, compacted: ``{"st", "refs", "cx", "un", "ir", "r"}``.

    Read loosely (None for anything that is not an object with a status), so
    a record written before or after this key's final form still opens.
    """
    if not isinstance(value, Mapping) or not isinstance(value.get("status"), str):
        return None
    out: dict[str, Any] = {"st": value["status"]}
    for key, short in (("refs", "refs"), ("unresolved", "un")):
        items = value.get(key)
        if isinstance(items, list) and items:
            out[short] = [str(v) for v in items[:MAX_REFS]]
    for key, short in (("contexts", "cx"), ("irrelevant", "ir")):
        items = value.get(key)
        if isinstance(items, list):
            ints = [v for v in items[:MAX_REFS] if _is_int(v)]
            if ints:
                out[short] = ints
    if value.get("reason"):
        out["r"] = str(value["reason"])
    return out


def failed(check: Mapping[str, Any] | None) -> bool:
    """Whether a compacted segment check shows a failed citation."""
    return check is not None and (
        check["st"] in FAILED_CITATION or bool(check.get("un")) or bool(check.get("ir"))
    )


def _rate(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return round(float(value), 4) if math.isfinite(value) else None


def record_check(value: Any) -> dict[str, Any] | None:
    """A record's ``citation_check``: ``{"rec", "prec", "n", "sup", "unc", "cit", "rel", "un"}``."""
    if not isinstance(value, Mapping):
        return None
    out: dict[str, Any] = {"rec": _rate(value.get("recall")), "prec": _rate(value.get("precision"))}
    for key, short in (("sentences", "n"), ("supported", "sup"), ("uncited", "unc"),
                       ("citations", "cit"), ("relevant", "rel"), ("unresolved", "un")):
        count = value.get(key)
        if _is_int(count):
            out[short] = count
    return out


class CitationTally:
    """The run's citation recall and precision, for a report given no summary that has them.

    Over the run as ``ceg check`` counts them: sentences their citations support
    over sentences with a claim, relevant citations over citations, summed over
    the responses whose citations were checked.
    """

    def __init__(self) -> None:
        self.counts = dict.fromkeys(("n", "sup", "cit", "rel"), 0)
        self.responses = 0

    def add(self, check: Mapping[str, Any] | None) -> None:
        if check is None:
            return
        self.responses += 1
        for key in self.counts:
            self.counts[key] += check.get(key, 0)

    def figures(self) -> tuple[float | None, float | None]:
        c = self.counts
        return (c["sup"] / c["n"] if c["n"] else None, c["rel"] / c["cit"] if c["cit"] else None)
