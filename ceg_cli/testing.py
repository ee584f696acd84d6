"""``assert_grounded``: a test's assertion that an answer is supported by its evidence.

Light on purpose (no model library): the pytest plugin and a user's test module
import it before any answer is checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: How much of a passage a failure message quotes.
QUOTE_CHARS = 240

__all__ = ["assert_grounded", "grounding_failures"]


def _segments(result: Any) -> tuple[str, str | None, list[Mapping[str, Any]]]:
    """(label, error, segments as record dicts) of a ``CheckResult`` or a record."""
    record = result.to_dict() if hasattr(result, "to_dict") else result
    if not isinstance(record, Mapping) or "segments" not in record:
        raise TypeError(
            "assert_grounded: expected what Checker.check returns (or its to_dict() record), "
            f"got {type(result).__name__}"
        )
    return str(record.get("label")), record.get("error"), list(record["segments"])


def _quote(text: str, limit: int = QUOTE_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def grounding_failures(result: Any, max_nonfactual: int = 0) -> str | None:
    """The message ``assert_grounded`` fails with, or None when the answer passes."""
    label, error, segments = _segments(result)
    if label == "error":
        return f"the answer could not be checked: {error}"
    flagged = [s for s in segments if s.get("label") != "factual"]
    nonfactual = [s for s in flagged if s.get("label") == "nonfactual"]
    # A sentence the judge could not judge is never read as grounded.
    unjudged = [s for s in flagged if s.get("label") != "nonfactual"]
    if len(nonfactual) <= max_nonfactual and not unjudged:
        return None
    lines = [
        f"{len(nonfactual)} of {len(segments)} sentences are not supported by the evidence "
        f"(allowed: {max_nonfactual})"
        + (f"; {len(unjudged)} could not be judged" if unjudged else "") + ":"
    ]
    for s in flagged:
        lines.append(f"- sentence {int(s.get('index', 0)) + 1} [{s.get('label')}, "
                     f"{s.get('verdict')}]: {_quote(s.get('text', ''))!r}")
        if s.get("reason"):
            lines.append(f"    reason: {s['reason']}")
        unsupported = _unsupported(s.get("spans") or [])
        if unsupported:
            lines.append(f"    unsupported: {unsupported}")
        lines.append(f"    best evidence: {_best(s.get('evidence') or [])}")
    return "\n".join(lines)


def _unsupported(spans: Sequence[Mapping[str, Any]]) -> str:
    """The record's spans quoted: "'1812' (date; a passage has '1844')"; the whole
    segment's span, which says nothing the sentence line does not, is left out."""
    shown = []
    for sp in spans:
        if sp.get("kind") == "segment":
            continue
        ev = sp.get("evidence")
        said = f"; a passage has '{ev['value']}'" if isinstance(ev, Mapping) and ev.get(
            "value") is not None else ""
        shown.append(f"'{sp.get('text')}' ({sp.get('kind')}{said})")
    return ", ".join(shown)


def _best(evidence: Sequence[Mapping[str, Any]]) -> str:
    if not evidence:
        return "none (nothing was retrieved for it)"
    # Evidence comes best first; a similarity, where one was computed, picks among it.
    # A passage ranked by BM25 (a record's contexts) has none: "similarity 0.00" said
    # it matched nothing.
    scored = [e for e in evidence if e.get("similarity") is not None]
    best = max(scored, key=lambda e: float(e["similarity"])) if scored else evidence[0]
    where = str(best.get("title") or best.get("doc_id") or "")
    if best.get("source") == "context":
        # A context without a title of its own is named by its position alone.
        position = str(best.get("context"))
        title = str(best.get("title") or "")
        where = f"context {position}" + (f" ({title})" if title and title != position else "")
    similarity = best.get("similarity")
    score = ("ranked first by BM25 (no similarity computed)" if similarity is None
             else f"similarity {float(similarity):.2f}")
    return f"{where}, {score}: {_quote(best.get('text', ''))!r}"


def assert_grounded(result: Any, max_nonfactual: int = 0) -> None:
    """Fail unless at most ``max_nonfactual`` sentences of the answer are nonfactual.

    ``result`` is what ``Checker.check`` returns (or its ``to_dict()``). A sentence
    that could not be judged, or an answer that could not be checked, fails too.
    The message lists each flagged sentence with the judge's reason and its best
    evidence.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this one
    if isinstance(max_nonfactual, bool) or not isinstance(max_nonfactual, int) or (
        max_nonfactual < 0
    ):
        raise ValueError(f"max_nonfactual {max_nonfactual!r}: a count, 0 or more")
    message = grounding_failures(result, max_nonfactual)
    if message is not None:
        raise AssertionError(message)
