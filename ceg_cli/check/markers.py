"""Citation markers an answer already carries: find them, strip them, attach them to sentences.

Text processing only (no judging): ``find_markers`` finds the groups, ``strip_markers`` gives
the text the judge reads with a map back to the original offsets, ``attach`` gives each
sentence its markers and ``resolve`` turns a reference into a context index.

What is a marker (default pattern: a bracket group on one line, ``[...]``):

- The group's body is a list of references separated by ``,`` or ``;``: numbers of 1 to 3
  digits (``[1]``, ``[1, 3]``, ``[1,3]``), ranges ``[1-3]`` / ``[1–3]`` expanded to 1, 2, 3
  (at most 21 numbers), and, when ``ids`` are given, tokens equal to a context id
  (``[doc-7]``, ``[a, b]``; a whole body equal to an id counts even if it holds a comma).
  Every token must qualify, else the group is not a marker: ``[2020]`` (4 digits),
  ``[1.5]``, ``[0, 1]`` (0 is no 1-based position), ``[12,500]`` (thousands separators),
  ``[]``, ``[citation needed]``, ``[sic]``, ``[^1]``. Refs keep their spelling, in order,
  without repeats.
- In marker position, at the end of a sentence (the group is followed, after blanks and
  other groups, by ``.``, ``!``, ``?``, ``。``, a line break or the end of the text, or it
  follows one of those sentence ends), a group that *looks like* a reference is a marker
  too, though no context can answer to it: whole numbers of any size, ``0`` and ``-1``
  included, ``^1`` (a Markdown footnote), and ranges of any width or order (``[1-25]``,
  ``[3-1]``, kept as written, not expanded). Its refs then name no context (``resolve``
  gives None and the citation check reports them), but its digits never reach the judge
  as a claim: "Paris is the capital of France [0]." is judged as "Paris is the capital of
  France.". Mid-sentence the strict rules above hold: "In [2020], x" keeps its year.
- Adjacent groups ``[1][3]`` or ``[1] [3]`` are separate ``Marker`` objects.
- Never a marker: inside fenced code (``` or ~~~, unclosed runs to the end) or inline code
  spans; inside a URL (``scheme://...`` or ``www....``, cut at an unbalanced ``)``); a
  Markdown link or image (``[1](url)``, ``![1]``), the label of a reference link
  (``[text][1]``); a link definition ``[1]: url`` and a source-list line ``[1] Title
  https://...`` (a group that opens its line, optionally after a bullet, on a line with a
  URL). A group glued to a word (``France[1]``) is a marker: Perplexity writes them so;
  ``arr[1]`` is code only inside backticks.
- A ``--citation-pattern`` must compile, hold exactly one capture group (the reference
  list) and not match the empty string; its group's body is read by the rules above, and
  the same places are excluded.

``strip_markers`` deletes each run of markers (only blanks between them) with the blanks
before it, or after it when the run opens a line, and ``([1])`` with its parentheses:
"France [1]." -> "France.", "France. [1] Next" -> "France. Next", "[1] Paris" -> "Paris".

``resolve`` (the 0-based indexes of the contexts a ref names; empty: it names none):

- Id mode, when there are ``count`` ids, none missing or empty: a ref equal to an id (both
  stripped) names the context with that id, or every context with it where several share
  it (a RAG system that retrieves several chunks of one document gives each the document's
  id: ``[doc-7]`` cites the document, so all its chunks). If any id is numeric
  (``[0-9]+``), numbers are ids only: ``[2]`` with ids 7, 12, 3 names nothing, never the
  second context. Else a numeric ref falls back to its position (ids doc-a, doc-b: ``[2]``
  names the second).
- Otherwise (no ids, or some missing): positions only; ``n`` names context ``n - 1`` for
  1 <= n <= count; anything else names none (``[7]`` of 3).

How this differs from ALCE (princeton-nlp/ALCE ``eval.py``), which runs
``re.findall(r"\\[\\d+", sent)`` on each NLTK sentence and strips with
``remove_citations``: ALCE reads only the first number of ``[1, 3]`` or ``[1-3]``, counts
``[2020]``, ``arr[1]`` in code and ``[1]`` in a URL as citations, has no ids, and its
stripping deletes every ``]`` and `` |`` of the sentence (``[sic]`` becomes ``[sic``).
ALCE gives a marker to the Punkt sentence holding it, so ``France. [1] Next`` cites from
"Next"; here a marker belongs to the sentence it follows. ALCE scores a sentence 0 when
any ref is out of range; ``resolve`` returns None per ref and the caller reports it.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ceg_cli.errors import UsageError

__all__ = [
    "DEFAULT_PATTERN",
    "Marker",
    "attach",
    "compile_pattern",
    "find_markers",
    "map_span",
    "resolve",
    "strip_markers",
]

DEFAULT_PATTERN = r"\[([^\[\]\r\n]{1,100})\]"
#: Seconds a ``--citation-pattern`` may take on one answer: ample for a pattern that does
#: not backtrack (60,000 markers in a 1 MB answer take well under one).
MATCH_TIMEOUT_S = 2.0
_DEFAULT_RE = re.compile(DEFAULT_PATTERN)

_NUMBER_RE = re.compile(r"[0-9]{1,3}")
_DIGITS_RE = re.compile(r"[0-9]+")
_RANGE_RE = re.compile(r"([0-9]{1,3})\s*[-–]\s*([0-9]{1,3})")
_THOUSANDS_RE = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+")
_SPLIT_RE = re.compile(r"[,;]")
# What looks like a reference though it names no context: checked only in marker position.
_LOOSE_RE = re.compile(r"\^?[-−]?[0-9]+|[0-9]+\s*[-–]\s*[0-9]+")
# Where a sentence ends: a group just before or after one of these is in marker position.
_SENTENCE_END = frozenset(".!?。！？")
# How many neighbouring groups (and characters) the marker-position test looks past, so that
# a line full of groups stays linear.
_NEIGHBOURS = 8
_MAX_RANGE = 20
# The same line breaks as str.splitlines(), so "a line" means what Python (and segment.py) mean.
_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})")
_BACKTICKS_RE = re.compile(r"`+")
_URL_RE = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]{0,20}://|www\.)[^\s<>\"'`]+")
_LINE_PREFIX_RE = re.compile(r"[^\S\r\n]*(?:(?:[-*+•]|[0-9]{1,3}[.)])[^\S\r\n]+)?")
# After a removed marker these keep the word before them: "France [1]." -> "France."
_CLOSING = frozenset(".,;:!?)]}»”’\"'…")


@dataclass(frozen=True)
class Marker:
    """One marker group: its span in the original response, and its references as written."""

    start: int
    end: int
    refs: tuple[str, ...]


def _quoted(pattern: str) -> str:
    """The pattern as the user typed it, quoted (``repr`` would double its backslashes)."""
    return f'"{pattern}"' if "'" in pattern else f"'{pattern}'"


def compile_pattern(pattern: str | None) -> re.Pattern[str]:
    """The default marker pattern, or the user's ``--citation-pattern``, checked.

    A user's pattern is compiled by the ``regex`` package (``re``'s syntax, and its
    meaning: version 0), whose matching takes a timeout: ``find_markers`` gives each
    answer ``MATCH_TIMEOUT_S``, so a pattern that backtracks without end (``(a+)+$``) on
    a long answer is a one-line error, not a run that never ends.
    """
    if pattern is None:
        return _DEFAULT_RE
    import regex

    try:
        compiled = regex.compile(pattern)
    except (regex.error, ValueError, OverflowError, RecursionError) as exc:
        reason = " ".join(str(exc).split())
        raise UsageError(
            f"--citation-pattern {_quoted(pattern)} is not a valid regular expression: {reason}"
        ) from None
    if compiled.groups != 1:
        raise UsageError(
            f"--citation-pattern {_quoted(pattern)} has {compiled.groups} capture groups; it needs "
            r"exactly one, holding the references (e.g. '\[\^(\d+)\]' for [^1])"
        )
    if compiled.search("") is not None:
        raise UsageError(f"--citation-pattern {_quoted(pattern)} matches the empty string")
    return compiled


def find_markers(
    text: str,
    pattern: re.Pattern[str],
    ids: Sequence[str] = (),
    skip: Sequence[tuple[int, int]] = (),
) -> list[Marker]:
    """Every marker group in ``text``, in order (see the module docstring for the rules);
    none inside the spans ``skip`` (an answer's references list: ``references``)."""
    known = frozenset(s for s in (str(i).strip() for i in ids if i is not None) if s)
    blocked = _merge(_code_spans(text) + _url_spans(text) + list(skip))
    starts = [s for s, _ in blocked]
    markers: list[Marker] = []
    for m in _matches(pattern, text):
        start, end = m.span()
        body = m.group(1)
        if start == end or body is None:
            continue
        i = bisect.bisect_left(starts, end) - 1
        if i >= 0 and blocked[i][1] > start:
            continue
        adjacent = bool(markers) and markers[-1].end == start
        if _is_link_syntax(text, start, end, adjacent):
            continue
        refs = _parse_refs(body, known)
        if not refs:
            refs = _loose_refs(body, known)
            if refs and not _in_marker_position(text, start, end):
                refs = ()
        if refs:
            markers.append(Marker(start, end, refs))
    return markers


def _matches(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """``pattern``'s matches in ``text``; a user's pattern gets ``MATCH_TIMEOUT_S`` in all."""
    if isinstance(pattern, re.Pattern):  # the default pattern: linear, no timeout needed
        yield from pattern.finditer(text)
        return
    user: Any = pattern  # the regex package's: its finditer takes a timeout
    try:
        yield from user.finditer(text, timeout=MATCH_TIMEOUT_S)
    except TimeoutError:
        raise UsageError(
            f"--citation-pattern {pattern.pattern!r} did not finish within "
            f"{MATCH_TIMEOUT_S:g} s on an answer of {len(text):,} characters: it backtracks "
            "too much (a repeat inside a repeat, like '(a+)+'); write it without nested "
            "repeats"
        ) from None


def strip_markers(text: str, markers: Sequence[Marker]) -> tuple[str, list[int]]:
    """The text without its markers, and for each of its positions (and one past the end)
    the position in ``text``; ``cleaned[i] == text[offsets[i]]`` and offsets increase."""
    pieces: list[str] = []
    offsets: list[int] = []
    pos = 0
    for s, e in _removals(text, markers):
        pieces.append(text[pos:s])
        offsets.extend(range(pos, s))
        pos = e
    pieces.append(text[pos:])
    offsets.extend(range(pos, len(text)))
    offsets.append(len(text))
    return "".join(pieces), offsets


def map_span(offsets: Sequence[int], start: int, end: int) -> tuple[int, int]:
    """A span of the cleaned text as a span of the original, tight around its characters
    (markers removed right after it stay outside; those inside it stay inside)."""
    if end <= start:
        return offsets[start], offsets[start]
    return offsets[start], offsets[end - 1] + 1


def attach(
    markers: Sequence[Marker], segments: Sequence[tuple[int, int]], text_len: int
) -> list[list[Marker]]:
    """Each segment's markers: a marker goes to the last segment starting strictly before it
    (inside a segment, or between it and the next), and to the first segment if none does."""
    out: list[list[Marker]] = [[] for _ in segments]
    starts = [s for s, _ in segments]
    if starts != sorted(starts):
        raise ValueError("segments must be in order of their start")
    for mk in markers:
        if not 0 <= mk.start <= mk.end <= text_len:
            raise ValueError(f"marker {mk} lies outside a text of {text_len} characters")
        if out:
            out[max(bisect.bisect_left(starts, mk.start) - 1, 0)].append(mk)
    return out


def resolve(ref: str, count: int, ids: Sequence[str | None] = ()) -> tuple[int, ...]:
    """The 0-based indexes of the contexts ``ref`` names, in order; empty when it names none
    (rules in the module docstring)."""
    ref = ref.strip()
    norm = [None if i is None else str(i).strip() or None for i in ids]
    if count > 0 and len(norm) == count and None not in norm:
        named = tuple(n for n, i in enumerate(norm) if i == ref)
        if named:
            return named
        if any(_DIGITS_RE.fullmatch(i) for i in norm if i is not None):
            return ()
    if _DIGITS_RE.fullmatch(ref):
        n = int(ref)
        return (n - 1,) if 1 <= n <= count else ()
    return ()


def _parse_refs(body: str, known: frozenset[str]) -> tuple[str, ...]:
    """The references of a group's body, or () when the group is no marker."""
    body = body.strip()
    if body in known:
        return (body,)
    if _THOUSANDS_RE.fullmatch(body):
        return ()
    refs: list[str] = []
    for token in (t.strip() for t in _SPLIT_RE.split(body)):
        if token in known or (_NUMBER_RE.fullmatch(token) and int(token) > 0):
            refs.append(token)
            continue
        r = _RANGE_RE.fullmatch(token)
        if r and 0 < int(r[1]) <= int(r[2]) <= int(r[1]) + _MAX_RANGE:
            refs.extend(str(n) for n in range(int(r[1]), int(r[2]) + 1))
            continue
        return ()
    return tuple(dict.fromkeys(refs))


def _loose_refs(body: str, known: frozenset[str]) -> tuple[str, ...]:
    """The refs of a group that looks like a reference but names no context by the strict
    rules (``[0]``, ``[-1]``, ``[1000]``, ``[^1]``, ``[1-25]``), or ()."""
    body = body.strip()
    if _THOUSANDS_RE.fullmatch(body):
        return ()
    refs: list[str] = []
    for token in (t.strip() for t in _SPLIT_RE.split(body)):
        strict = _parse_refs(token, known)
        if strict:
            refs.extend(strict)
        elif _LOOSE_RE.fullmatch(token):
            refs.append(token)
        else:
            return ()
    return tuple(dict.fromkeys(refs))


def _in_marker_position(text: str, start: int, end: int) -> bool:
    """Whether the group ``text[start:end]`` sits at the end of a sentence: followed, past
    blanks and other bracket groups, by a sentence end, a line break or the end of the text,
    or following a sentence end the same way ("France [0].", "France.[0] Next")."""
    n = len(text)
    at = end
    for _ in range(_NEIGHBOURS):
        while at < n and _hspace(text[at]):
            at += 1
        if at < n and text[at] == "[":
            close = text.find("]", at, at + 102)
            if close > at and not any(c in _BREAKS for c in text[at:close]):
                at = close + 1
                continue
        break
    if at >= n or text[at] in _BREAKS or (
        text[at] in _SENTENCE_END and (at + 1 >= n or text[at + 1].isspace())
    ):
        return True
    at = start
    for _ in range(_NEIGHBOURS):
        while at > 0 and _hspace(text[at - 1]):
            at -= 1
        if at > 0 and text[at - 1] == "]":
            opening = text.rfind("[", max(0, at - 102), at - 1)
            if opening >= 0 and not any(c in _BREAKS for c in text[opening:at]):
                at = opening
                continue
        break
    return at > 0 and text[at - 1] in _SENTENCE_END


def _is_link_syntax(text: str, start: int, end: int, adjacent: bool) -> bool:
    """Markdown links, images, reference labels and definitions, and source-list entries."""
    after = text[end : end + 1]
    if text[end - 1] == "]" and after == "(":
        return True
    if start > 0 and text[start] == "[" and text[start - 1] == "!":
        return True
    if start > 0 and text[start - 1] == "]" and not adjacent:
        return True
    # Does the group open its line? Look back a few characters only, so that a long line
    # full of markers stays linear.
    window = max(0, start - 16)
    lo = max(text.rfind("\n", window, start), text.rfind("\r", window, start)) + 1
    if lo == 0 and window > 0:
        return False
    prefix = _LINE_PREFIX_RE.match(text, lo, start)
    if prefix is None or prefix.end() != start:
        return False
    hi = min((i for i in (text.find(c, end) for c in "\n\r") if i >= 0), default=len(text))
    return after == ":" or _URL_RE.search(text, end, hi) is not None


def _code_spans(text: str) -> list[tuple[int, int]]:
    """Fenced code blocks (CommonMark's rules, simplified) and the inline code spans between."""
    spans: list[tuple[int, int]] = []
    fence: tuple[str, int, int] | None = None  # fence character, length, start offset
    prose, pos = 0, 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        m = _FENCE_RE.match(line)
        if m is None:
            continue
        char, size, rest = m[1][0], len(m[1]), line[m.end() :]
        if fence is None:
            if char == "~" or "`" not in rest:
                spans.extend(_inline_spans(text, prose, start))
                fence = (char, size, start)
        elif char == fence[0] and size >= fence[1] and not rest.strip():
            spans.append((fence[2], pos))
            fence, prose = None, pos
    if fence is not None:
        spans.append((fence[2], len(text)))
    else:
        spans.extend(_inline_spans(text, prose, len(text)))
    return spans


def _inline_spans(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Code spans: a run of n backticks up to the next run of exactly n; unmatched ones are text."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS_RE.finditer(text, lo, hi)]
    by_len: dict[int, list[int]] = {}
    for k, (s, e) in enumerate(runs):
        by_len.setdefault(e - s, []).append(k)
    spans: list[tuple[int, int]] = []
    k = 0
    while k < len(runs):
        same = by_len[runs[k][1] - runs[k][0]]
        j = bisect.bisect_right(same, k)
        if j < len(same):
            spans.append((runs[k][0], runs[same[j]][1]))
            k = same[j] + 1
        else:
            k += 1
    return spans


def _url_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for m in _URL_RE.finditer(text):
        depth, end = 0, m.end()
        for i in range(m.start(), m.end()):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth < 0:  # "(https://x.org)[1]": the ")" closes the prose's parenthesis
                end = i
                break
        spans.append((m.start(), end))
    return spans


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _hspace(ch: str) -> bool:
    return ch.isspace() and ch not in _BREAKS


def _removals(text: str, markers: Sequence[Marker]) -> list[tuple[int, int]]:
    """The spans to delete: each run of markers (only blanks between) with the blanks before it,
    or after it when it opens a line; ``([1])`` goes with its parentheses."""
    runs: list[tuple[int, int]] = []
    for mk in sorted(markers, key=lambda m: (m.start, m.end)):
        if runs and mk.start < runs[-1][1]:
            continue  # overlapping markers: the first one wins
        if runs and all(_hspace(c) for c in text[runs[-1][1] : mk.start]):
            runs[-1] = (runs[-1][0], mk.end)
        else:
            runs.append((mk.start, mk.end))
    out: list[tuple[int, int]] = []
    n = len(text)
    for s, e in runs:
        floor = out[-1][1] if out else 0
        while True:
            ls = s
            while ls > floor and _hspace(text[ls - 1]):
                ls -= 1
            rs = e
            while rs < n and _hspace(text[rs]):
                rs += 1
            if ls > floor and text[ls - 1] == "(" and text[rs : rs + 1] == ")":
                s, e = ls - 1, rs + 1  # "Paris ([1])." -> "Paris."
                continue
            break
        nxt = text[e : e + 1]
        if ls == 0 or text[ls - 1] in _BREAKS:
            out.append((ls, rs))  # "[1] Paris" -> "Paris"
        elif not nxt or nxt.isspace() or nxt in _CLOSING:
            out.append((ls, e))  # "France [1]." -> "France."; "France. [1] Next" -> "France. Next"
        else:
            out.append((s, e))  # "France [1]is" keeps its blank: "France is"
    return out
