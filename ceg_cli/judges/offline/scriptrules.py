"""The offline judge's rules for scripts: where capitals do not mark names (a
missing stretch of a sentence otherwise found is checked like a name,
``_substitutions``), where text is read in pairs of characters (coverage counted
in characters, ``_units``), and a Latin name in other scripts (``_checkable``).
Used by ``offline.analyse``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .langwords import Specific, Token

#: In scripts without capitals, a sentence of which at least this share is found in
#: the evidence is checked for a substitution (``_substitutions``). Chosen on the
#: multilingual set's dev half and XNLI's tune part (docs/measurements.md): at 0.85
#: swapped names are caught in Chinese 0.20 -> 0.65, Arabic 0.00 -> 0.56, Hindi
#: 0.00 -> 0.68, Japanese 0.04 -> 0.92, while XNLI's entailed hypotheses are flagged
#: as often as without it (Chinese 0.195 -> 0.198); at 0.7 they were flagged 25 % more.
SUBSTITUTION_COVERAGE = 0.85
#: Characters a missing stretch of unspaced text needs to count: a Chinese name has two or more.
SUBSTITUTION_CHARS = 2
_CASED_SCRIPTS = frozenset({"Latn", "Cyrl", "Grek", "Armn"})


def _substitutions(
    text: str, content: Sequence[Token], covered: Sequence[bool],
    units: tuple[int, int] | None,
) -> tuple[Specific, ...]:
    """What a sentence in a script without capitals says that its evidence does not,
    where the evidence says nearly all the rest: a swapped name, most likely.

    Capitals show a name in English or Russian; in Chinese, Japanese, Arabic or Hindi
    nothing does, and a swapped name is a few missing characters or one missing word
    among many found, which coverage alone lets pass. So where at least
    ``SUBSTITUTION_COVERAGE`` of a sentence is found, each stretch of
    ``SUBSTITUTION_CHARS`` or more characters that no pair found in the evidence
    touches (text without spaces), or each missing word (Arabic, Hindi, ...), must be
    found like a name. A sentence the evidence holds less of is a paraphrase or
    unsupported anyway: coverage decides as before.
    """
    from ...lang import dominant_script

    if dominant_script(text) in _CASED_SCRIPTS:
        return ()
    found, total = units if units is not None else (sum(covered), len(covered))
    if not total or found == total or found / total < SUBSTITUTION_COVERAGE:
        return ()
    if units is None:
        return tuple(
            Specific("name", t.text, (_MISSING + t.key,), 0)
            for t, c in zip(content, covered) if not c and not t.number
        )
    chars: set[int] = set()
    held: set[int] = set()
    for t, c in zip(content, covered):
        if t.pair:
            span = range(t.start, t.start + len(t.text))
            chars.update(span)
            if c:
                held.update(span)
    out: list[Specific] = []
    run: list[int] = []
    for at in [*sorted(chars - held), -1]:
        if run and at != run[-1] + 1:
            if len(run) >= SUBSTITUTION_CHARS:
                stretch = text[run[0] : run[-1] + 1]
                out.append(Specific("name", stretch, (_MISSING + stretch,), 0))
            run = []
        if at >= 0:
            run.append(at)
    return tuple(out)


#: The key of a stretch that is missing by construction: no passage holds it.
_MISSING = "\0missing:"


def _checkable(
    specs: tuple[Specific, ...], text: str, evidence: Sequence[Any]
) -> tuple[Specific, ...]:
    """The specifics of a segment not written in Latin letters that its evidence can
    show: a name in Latin letters ("Kennedy" in Thai or Russian text) is asked of the
    evidence only where the evidence writes Latin words at all; where it writes none,
    it may well hold the name transliterated ("Кеннеди"), which no lexical rule can
    match, and the name counts as a content word like the others."""
    from ...lang import dominant_script

    if not any(s.kind == "name" for s in specs) or dominant_script(text) == "Latn":
        return specs
    if any(_LATIN_WORD.search(e.text) or _LATIN_WORD.search(e.title or "") for e in evidence):
        return specs
    return tuple(s for s in specs if s.kind != "name" or not _LATIN_WORD.search(s.text))


_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]{2}")


def _units(content: Sequence[Token], covered: Sequence[bool]) -> tuple[int, int] | None:
    """Coverage counted in characters where the segment is read in pairs of them.

    Text written without spaces is read as overlapping pairs of characters, most of
    which straddle two words ("他的妈妈" gives "他的", "的妈", "妈妈"): counted as
    pairs, one shared word among a dozen pairs falls under ``MIN_COVERAGE`` where the
    same sentence in English, counted in words, passes. So each content character
    counts once, found when a pair found in the evidence holds it; a space-separated
    word counts as one. None: no pairs (coverage in words, as always)."""
    if not any(t.pair for t in content):
        return None
    chars: dict[int, bool] = {}
    words = found = 0
    for t, c in zip(content, covered):
        if not t.pair:
            words += 1
            found += c
            continue
        for at in range(t.start, t.start + len(t.text)):
            chars[at] = chars.get(at, False) or c
    return found + sum(chars.values()), words + len(chars)
