"""Character spans of what a judge found unsupported, and their offsets.

A judge reads a segment's text after normalizing it (``offline.composed`` makes it
NFC, so that "Mu\\u0308nchen" is "M\\u00fcnchen"), and the segment's text is itself
the response with its citation markers removed. A span a judge finds is therefore
located in three steps, each kept exact:

- in the normalized text, as the judge's tokens give it;
- in the segment's text as given (``nfc_offsets``: the NFC form is made one grapheme
  cluster at a time, so each cluster of the normalized text maps back to the cluster
  it came from; a span never cuts a cluster);
- in the response as given (``in_response``): the segment's offset added, or, where
  markers were removed from the segment, through an alignment of the segment's text
  with its stretch of the response.

The offsets are what ``response[start:end] == text`` holds for, in any script and
form (NFD text, CJK, right-to-left text, segments cut by the length bound).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from .types import Segment, Span

__all__ = ["NfcOffsets", "in_response", "in_segment", "in_segment_spans", "nfc_offsets",
           "span_dict", "span_from_dict", "whole_segment"]


class NfcOffsets:
    """The NFC form of a text and, for each of its positions, where it came from."""

    def __init__(self, text: str) -> None:
        self.text = text
        if unicodedata.is_normalized("NFC", text):
            self.nfc = text
            self._starts: list[int] | None = None
            self._ends: list[int] = []
            return
        starts: list[int] = []
        ends: list[int] = []
        pieces: list[str] = []
        at = 0
        for cluster in _clusters(text):
            composed = unicodedata.normalize("NFC", cluster)
            pieces.append(composed)
            starts.extend([at] * len(composed))
            ends.extend([at + len(cluster)] * len(composed))
            at += len(cluster)
        nfc = "".join(pieces)
        if nfc != unicodedata.normalize("NFC", text):
            # Composition across clusters (no script ceg reads does this): the whole
            # text is one unit, so every span widens to all of it, never points wrong.
            nfc = unicodedata.normalize("NFC", text)
            starts, ends = [0] * len(nfc), [len(text)] * len(nfc)
        self.nfc = nfc
        self._starts, self._ends = starts, ends

    def original(self, start: int, end: int) -> tuple[int, int]:
        """``nfc[start:end]`` as a span of the text as given, widened to whole clusters."""
        if self._starts is None:
            return start, end
        if end <= start:
            at = self._starts[start] if start < len(self._starts) else len(self.text)
            return at, at
        return self._starts[start], self._ends[end - 1]


def nfc_offsets(text: str) -> NfcOffsets:
    return NfcOffsets(text)


@lru_cache(maxsize=1)
def _cluster_regex() -> Any:
    import regex

    return regex.compile(r"\X")


def _clusters(text: str) -> list[str]:
    return list(_cluster_regex().findall(text))


def whole_segment(text: str) -> Span:
    """The span a judge gives when it cannot point at words: the whole segment, its
    surrounding blanks left out."""
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    return Span(start, max(start, end), text[start:max(start, end)], "segment")


def in_response(response: str, segment: Segment, spans: Sequence[Span]) -> tuple[Span, ...]:
    """``spans`` (offsets into ``segment.text``) as spans of ``response``, where the
    segment lies at ``segment.start``..``segment.end``. A span none of whose characters
    can be found there is left out (it cannot be shown where it is)."""
    if not spans:
        return ()
    window = response[segment.start:segment.end]
    if window == segment.text:
        return tuple(replace(s, start=s.start + segment.start, end=s.end + segment.start)
                     for s in spans)
    where = _alignment(segment.text, window)
    out = []
    for s in spans:
        at = [where[i] for i in range(s.start, s.end) if where[i] is not None]
        if not at:
            continue
        start, end = segment.start + at[0], segment.start + at[-1] + 1  # type: ignore[operator]
        out.append(replace(s, start=start, end=end, text=response[start:end]))
    return tuple(out)


def in_segment(response: str, segment: Segment, spans: Sequence[Span]
               ) -> list[tuple[int, int] | None]:
    """The inverse of ``in_response``: each span of ``response`` as ``(start, end)`` in
    ``segment.text``, None for one with no character of the segment's text."""
    window = response[segment.start:segment.end]
    lo_hi = [(s.start - segment.start, s.end - segment.start) for s in spans]
    if window == segment.text:
        return [(lo, hi) if 0 <= lo < hi <= len(window) else None for lo, hi in lo_hi]
    where = _alignment(segment.text, window)
    out: list[tuple[int, int] | None] = []
    for lo, hi in lo_hi:
        inside = [i for i, w in enumerate(where) if w is not None and lo <= w < hi]
        out.append((inside[0], inside[-1] + 1) if inside else None)
    return out


def in_segment_spans(response: str, segment: Segment, spans: Sequence[Span]
                     ) -> tuple[Span, ...]:
    """``spans`` of ``response`` as spans of ``segment.text`` (a verdict's), those with no
    character in it left out: the inverse of ``in_response``."""
    out = []
    for span, at in zip(spans, in_segment(response, segment, spans)):
        if at is not None:
            out.append(replace(span, start=at[0], end=at[1], text=segment.text[at[0]:at[1]]))
    return tuple(out)


def _alignment(text: str, window: str) -> list[int | None]:
    """For each character of ``text``, its position in ``window`` (None: not there).
    ``text`` is ``window`` with pieces removed (citation markers): an alignment of the
    two finds each kept character."""
    from difflib import SequenceMatcher

    where: list[int | None] = [None] * len(text)
    for a, b, size in SequenceMatcher(None, text, window, autojunk=False).get_matching_blocks():
        for k in range(size):
            where[a + k] = b + k
    return where


def span_dict(span: Span, evidence: Sequence[Any]) -> dict[str, Any]:
    """A span as the output writes it; ``evidence`` is its segment's passages (the
    span's evidence names one of them by index)."""
    ev = None
    if span.evidence is not None:
        passage = (evidence[span.evidence.passage]
                   if 0 <= span.evidence.passage < len(evidence) else None)
        ev = {
            "value": span.evidence.value,
            "source": None if passage is None else (
                "index" if passage.context is None else "context"),
            "passage_id": None if passage is None else passage.passage_id,
            "context": None if passage is None else passage.context,
            "title": None if passage is None else passage.title,
        }
    return {"start": span.start, "end": span.end, "text": span.text, "kind": span.kind,
            "evidence": ev}


def span_from_dict(d: dict[str, Any], evidence: Sequence[Any]) -> Span:
    """The inverse of ``span_dict``: the passage it names found again among ``evidence``."""
    from .types import SpanEvidence

    ev = d.get("evidence")
    found = None
    if isinstance(ev, dict):
        key = (0 if ev.get("context") is None else 1, ev.get("passage_id"))
        at = next((i for i, e in enumerate(evidence) if e.key == key), -1)
        found = SpanEvidence(str(ev.get("value", "")), at)
    return Span(int(d["start"]), int(d["end"]), str(d["text"]), str(d["kind"]), found)
