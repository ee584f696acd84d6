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

A segment has a bounded length (``MAX_SEGMENT_WEIGHT``): a sentence longer than
that (an answer of thousands of characters with no sentence end) is cut into
segments, at its clause marks where it has them near enough (``，；、：`` and the
like, ``, ; :`` and dashes, the Arabic ``، ؛``, ...) and by length at a space or
a character boundary elsewhere; each piece says so in its ``split``. The
embedders read a window of 256 to 512 word pieces and cut the rest, or embed it
window by window in one long uninterruptible call; judging and retrieving a
sentence that long means nothing anyway.

``has_claim`` (from ``ceg_cli.claims``, where the judges find it too) is a deliberately
conservative filter; see its docstring.
"""

from __future__ import annotations

import bisect
import re
import unicodedata

from ceg_cli.claims import has_claim
from ceg_cli.sentences import WIDE_RE, WIDE_WEIGHT, line_spans, sentence_spans, text_weight
from ceg_cli.types import Segment

__all__ = ["MAX_SEGMENT_WEIGHT", "bounded_spans", "has_claim", "segment_response",
           "segments_by_sentence"]

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
    return segments_by_sentence(text, language)[0]


def segments_by_sentence(text: str, language: str | None = None
                         ) -> tuple[list[Segment], list[int]]:
    """``segment_response``'s segments, and for each the number of the sentence (or list
    item) it belongs to: the pieces of a sentence cut by the bound share one (so that a
    citation marker at the end of a long sentence cites every piece of it)."""
    segments: list[Segment] = []
    sentences: list[int] = []
    sentence = 0
    for line_start, line_end in line_spans(text):
        marker = _MARKER_RE.match(text, line_start, line_end)
        body_start = marker.end() if marker else line_start
        if body_start >= line_end:
            continue
        for s, e in sentence_spans(text[body_start:line_end], language):
            for start, end, split in bounded_spans(text, body_start + s, body_start + e):
                if _ALNUM_RE.search(text, start, end) is None:
                    continue
                segments.append(Segment(len(segments), start, end, text[start:end], split))
                sentences.append(sentence)
            sentence += 1
    return segments, sentences


#: The most a segment weighs (``sentences.text_weight``): 1,024 characters, a Han,
#: kana or Hangul character counting as four. That is about 256 word pieces either
#: way (English runs about four characters a piece; a Han character is a piece of
#: its own in the default model's vocabulary, 0.6 of one in multilingual-e5's): the
#: window of the default embedder (``max_seq_length`` 256) and half of
#: multilingual-e5's (512), so a segment is embedded in one window and its time is
#: bounded. A 56,000-character Chinese sentence took multilingual-e5 37 s in one
#: call, which no Ctrl-C or SIGTERM could interrupt. English sentences are far
#: shorter (the longest of FELM's and HaluEval's dev sets: 731 characters) and are
#: never cut.
MAX_SEGMENT_WEIGHT = 1024
# Where a clause ends: a clause mark that needs no space after it (the full-width
# comma, semicolon, colon and enumeration comma, their small and half-width forms,
# the Arabic comma and semicolon, the Ethiopic comma, semicolon and colons, the
# Armenian comma), a Latin ", ; :" with a space after it (not
# "1,000", not "12:30"), a dash; with the closing quotes and brackets after it.
_CLAUSE_END_RE = re.compile(
    r"(?:[，；：、､﹐﹑﹔﹕،؛፣፤፥፦՝]|[,;:](?=\s)|[—–]+|(?<=\s)-(?=\s))"
    "[\"'”’»›)\\]}」』】〕〉》）］｝]*"
)
# Characters a cut must not fall before: combining marks and the joiners and
# variation selectors that bind to the character before them.
_BINDS_BACK = "\u200c\u200d\ufe00-\ufe0f"
_BINDS_BACK_RE = re.compile(f"[{_BINDS_BACK}]")


def bounded_spans(
    text: str, start: int, end: int, limit: int = MAX_SEGMENT_WEIGHT
) -> list[tuple[int, int, str | None]]:
    """The sentence ``text[start:end]`` as segments of at most ``limit`` weight
    (``text_weight``): ``(start, end, split)``, with ``split`` None for the whole
    sentence, else ``clause`` or ``length`` (see ``Segment``).

    Each segment is as long as the bound allows: it ends at the last clause mark
    within the bound (if that leaves it at least a quarter of the bound), else at
    the last space in the second half of the bound, else at the last character
    boundary within the bound that splits no word of a spaced script, no combining
    sequence and no joined emoji. Segments have no surrounding whitespace, so
    ``text[start:end]`` is each one's text.
    """
    if end - start <= limit // WIDE_WEIGHT or text_weight(text, start, end) <= limit:
        return [(start, end, None)]
    weights = [0]
    for ch in text[start:end]:
        weights.append(weights[-1] + (WIDE_WEIGHT if WIDE_RE.match(ch) else 1))
    clause_ends = [m.end() for m in _CLAUSE_END_RE.finditer(text, start, end)]
    cuts: list[tuple[int, str]] = []
    at = start
    while weights[end - start] - weights[at - start] > limit:
        base = weights[at - start]
        furthest = max(start + bisect.bisect_right(weights, base + limit) - 1, at + 1)
        quarter = start + bisect.bisect_left(weights, base + limit // 4)
        half = start + bisect.bisect_left(weights, base + limit // 2)
        i = bisect.bisect_right(clause_ends, furthest) - 1
        if i >= 0 and clause_ends[i] >= max(quarter, at + 1):
            cut, kind = clause_ends[i], "clause"
        else:
            cut, kind = _length_cut(text, at, half, furthest), "length"
        cuts.append((cut, kind))
        at = cut
        while at < end and text[at].isspace():
            at += 1
    spans: list[tuple[int, int, str | None]] = []
    previous: int = start
    before: str | None = None
    ends: list[tuple[int, str | None]] = [*cuts, (end, None)]
    for stop, how in ends:
        span = _strip(text, previous, stop)
        if span is not None:
            spans.append((*span, "length" if "length" in (before, how) else "clause"))
        previous, before = stop, how
    return spans


def _length_cut(text: str, at: int, half: int, furthest: int) -> int:
    """Where a piece starting at ``at`` is cut by length, at most at ``furthest``: after
    the last space from ``half`` on, else at a character boundary that splits no word
    of a spaced script (a run of letters or digits that are not Han, kana or Hangul)
    reaching back to ``half``, nor a combining sequence."""
    for i in range(furthest, half - 1, -1):
        if text[i - 1].isspace():
            return i
    cut = furthest
    # A word of Latin (or another spaced script's) letters or digits inside CJK text:
    # cut before it when it starts in the second half.
    i = cut
    while i > half and _in_word(text, i - 1) and _in_word(text, i):
        i -= 1
    if i > half:
        cut = i
    while cut > at + 1 and _binds_back(text, cut):
        cut -= 1
    return cut


def _in_word(text: str, i: int) -> bool:
    ch = text[i]
    return (ch.isalnum() or unicodedata.category(ch).startswith("M")) and not WIDE_RE.match(ch)


def _binds_back(text: str, i: int) -> bool:
    """Whether a cut before ``text[i]`` would split a combining sequence or a joined emoji."""
    if i >= len(text):
        return False
    ch = text[i]
    return (unicodedata.category(ch).startswith("M") or _BINDS_BACK_RE.match(ch) is not None
            or _BINDS_BACK_RE.match(text[i - 1]) is not None)


def _strip(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end > start else None
