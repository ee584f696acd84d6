"""Split a response into segments, and tell which segments make a factual claim.

Segmentation follows the paper, which follows FELM: NLTK's Punkt sentence
tokenizer. On top of it, and unlike FELM, which runs Punkt over the whole
response, layout is respected: a line break always ends a segment, and a list
marker (``- ``, ``* ``, ``• ``, ``1. ``, ``1) ``, ``(1) ``, ``a) ``, a Markdown
``#`` heading) is not part of its item's segment. FELM's way leaves each list
number as a segment of its own ("2.") and glues the lead-in line to the first
number ("Here are examples:\\n\\n1."), which gives the judge nothing to check.

Offsets always point into the original response: ``text[s.start:s.end] ==
s.text``, and segment text has no surrounding whitespace. Segments with no
letter or digit at all (a ``---`` rule, a lone emoji) are dropped.

``has_claim`` (from ``ceg_cli.claims``, where the judges find it too) is a deliberately
conservative filter; see its docstring.
"""

from __future__ import annotations

import re

from ceg_cli.claims import has_claim
from ceg_cli.sentences import line_spans, sentence_spans
from ceg_cli.types import Segment

__all__ = ["has_claim", "segment_response"]

# A list marker at the start of a line: bullets, "1." "1)" "(1)" "a)", "#" headings.
_MARKER_RE = re.compile(
    r"[^\S\r\n]*(?:[-*+•‣◦▪●○■–—]|\(?\d{1,3}[.)]|\(\d{1,3}\)|\(?[A-Za-z]\)|#{1,6})"
    r"(?:[^\S\r\n]+|$)"
)
_ALNUM_RE = re.compile(r"[^\W_]")


def segment_response(text: str, language: str | None = None) -> list[Segment]:
    """Split a response into segments (sentences and list items) with offsets.

    Each line (after its list marker, if any) is split into sentences by Punkt,
    or by the rules of ``ceg_cli.sentences`` for a language Punkt lacks
    (``language``: a code; None is English); ``index`` counts the segments kept,
    from 0.
    """
    segments: list[Segment] = []
    for line_start, line_end in line_spans(text):
        marker = _MARKER_RE.match(text, line_start, line_end)
        body_start = marker.end() if marker else line_start
        if body_start >= line_end:
            continue
        for s, e in sentence_spans(text[body_start:line_end], language):
            start, end = body_start + s, body_start + e
            if _ALNUM_RE.search(text, start, end) is None:
                continue
            segments.append(Segment(len(segments), start, end, text[start:end]))
    return segments
