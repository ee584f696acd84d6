"""Which words of a flagged segment are unsupported: the spans every judge gives.

The offline judge knows them from what it measures (``analysis_spans``): each number
and name the evidence lacks (a year, or a number beside a month name, is a ``date``),
each content word not found, and, where a passage gives a different number near the
same word, that number and its passage as the span's evidence. A judge that reads
meaning (the verifier, ``nli:``, ``minicheck:``, ``hhem:``, an ``llm:`` reply that
names no words) cannot point at words; ``spanfill.fill_spans`` gives its flagged segments the
offline judge's spans where the offline judge flags them too, else the whole segment
(``kind`` ``segment``): never a word no judge found missing.

Offsets are into the segment's text as the judge was given it (``Span``); the check
maps them into the response (``ceg_cli.spans.in_response``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from ceg_cli.spans import nfc_offsets, whole_segment
from ceg_cli.types import Span, SpanEvidence

__all__ = ["analysis_spans", "named_spans", "whole_segment"]

_MONTHS = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?$|^\s*(?:jan(?:uary)?|"
    r"feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b", re.IGNORECASE)


def analysis_spans(given: str, analysis: Any) -> tuple[Span, ...]:
    """The spans of a segment the offline judge flagged: ``given`` is its text as the
    judge was given it, ``analysis`` what ``offline.analyse`` measured (on its NFC form,
    layout cleaned: ``analysis.text``)."""
    text = analysis.text
    found: list[tuple[int, int, str, SpanEvidence | None]] = []
    hints = {id(spec): (value, word) for spec, value, word in analysis.hints}
    in_specifics: set[str] = set()
    for spec in analysis.missing:
        in_specifics.update(spec.keys)
        kind = spec.kind
        ev = None
        if kind == "number":
            if _is_date(text, spec.text, spec.keys[0]):
                kind = "date"
            hint = hints.get(id(spec))
            if hint is not None:
                ev = SpanEvidence(hint[0], _passage_with(analysis, hint[0]))
        for start, end in _occurrences(text, spec.text):
            found.append((start, end, kind, ev))
    for start, end in _missing_words(analysis, in_specifics):
        found.append((start, end, "word", None))
    return _located(given, found)


def named_spans(given: str, words: Sequence[str], kind: str = "word") -> tuple[
        tuple[Span, ...], int]:
    """Spans of ``words`` (an LLM's list of the unsupported words) in ``given``, and how
    many of them it does not contain: those are dropped, never guessed at. Matched as
    written, then NFC and case-folded (offsets mapped back to ``given``)."""
    found: list[tuple[int, int, str, SpanEvidence | None]] = []
    dropped = 0
    nfc = nfc_offsets(given)
    folded = nfc.nfc.casefold()
    same_length = len(folded) == len(nfc.nfc)
    for word in dict.fromkeys(w.strip() for w in words if isinstance(w, str)):
        if not word:
            continue
        composed = unicodedata.normalize("NFC", word)
        hits = _occurrences(nfc.nfc, composed)
        want = composed.casefold()
        if not hits and same_length and len(want) == len(composed):
            hits = _occurrences(folded, want)
        if not hits:
            dropped += 1
            continue
        found.extend((s, e, kind, None) for s, e in hits)
    return _located(given, found), dropped


def _located(given: str, found: Sequence[tuple[int, int, str, SpanEvidence | None]]
             ) -> tuple[Span, ...]:
    """Spans of the NFC text as spans of ``given``, in order, none inside another."""
    nfc = nfc_offsets(given)
    out: list[Span] = []
    for start, end, kind, ev in sorted(found, key=lambda f: (f[0], -f[1])):
        s, e = nfc.original(start, end)
        if e <= s:
            continue
        if out and s < out[-1].end:
            continue  # inside (or across) a span already given: a word of a missing name
        out.append(Span(s, e, given[s:e], kind, ev))
    return tuple(out)


def _occurrences(text: str, needle: str) -> list[tuple[int, int]]:
    """Where ``needle`` stands in ``text`` as a whole word (not inside a longer word
    or number), else anywhere (text written without spaces). A plain search: a regular
    expression compiled for each needle cost the judge more than the rest of this."""
    if not needle:
        return []
    hits = []
    at = text.find(needle)
    while at != -1:
        hits.append((at, at + len(needle)))
        at = text.find(needle, at + len(needle))
    whole = [(s, e) for s, e in hits if not _in_word(text, s - 1) and not _in_word(text, e)]
    return whole or hits


def _in_word(text: str, i: int) -> bool:
    """Whether ``text[i]`` is a letter, a digit or a combining mark (part of a word)."""
    if not 0 <= i < len(text):
        return False
    ch = text[i]
    return ch.isalnum() or unicodedata.category(ch).startswith("M")


def _is_date(text: str, written: str, value: str) -> bool:
    """A year (1000 to 2100, four digits, or any number before "BC", "AD" and the
    like), or a day beside a month's name."""
    if value.isdigit() and len(value) == 4 and 1000 <= int(value) <= 2100:
        return True
    for start, end in _occurrences(text, written):
        before, after = text[max(0, start - 12):start], text[end:end + 12]
        if _MONTHS.search(before.rstrip(" ,")) or _MONTHS.search(after.lstrip(" ,")):
            return True
        if _ERA.match(after):
            return True
    return False


_ERA = re.compile(r"\s?(?:BCE?|CE|AD|B\.C\.|A\.D\.)(?![^\W_])")


def _passage_with(analysis: Any, value: str) -> int:
    """The first passage holding ``value`` (a number's key), -1 if none does."""
    return next((i for i, keys in enumerate(analysis.passage_keys) if value in keys), -1)


def _missing_words(analysis: Any, in_specifics: set[str]) -> list[tuple[int, int]]:
    """The content words not found (outside the missing specifics), as the segment
    writes them; text read in pairs of characters gives each stretch that no pair
    found in the evidence touches (as ``reasons._quoted`` quotes it)."""
    from ceg_cli.lang import BIGRAM_SCRIPTS, char_script

    text = analysis.text
    held: set[int] = set()
    for t, c in zip(analysis.content, analysis.covered):
        if t.pair and c:
            held.update(range(t.start, t.start + len(t.text)))

    def free(i: int) -> bool:
        return 0 <= i < len(text) and i not in held and char_script(text[i]) in BIGRAM_SCRIPTS

    out: list[tuple[int, int]] = []
    for t, c in zip(analysis.content, analysis.covered):
        if c or t.key in in_specifics:
            continue
        if not t.pair:
            out.extend(_occurrences(text, t.text) or [(t.start, t.start + len(t.text))])
            continue
        start = next((i for i in range(t.start, t.start + len(t.text)) if free(i)), None)
        if start is None:
            continue
        end = start
        while free(start - 1):
            start -= 1
        while free(end):
            end += 1
        out.append((start, end))
    return sorted(set(out))
