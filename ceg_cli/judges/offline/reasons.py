"""The offline judge's reason for a segment it does not support: what is missing,
quoted as the segment writes it, and a different number the evidence gives near
the same word. Used by ``offline.decide`` and the verifier.
"""

from __future__ import annotations

from .analysis import Analysis

#: At most this many missing items are named in a reason.
MAX_NAMED = 4


def missing_reason(a: Analysis) -> str:
    if not a.missing and not a.together:
        return apart_reason(a)
    names = [s.text for s in a.missing]
    in_specifics = {k for s in a.missing for k in s.keys}
    apart = set(a.elsewhere) - in_specifics
    names += _quoted(a, {
        t.key for t, c in zip(a.content, a.covered)
        if not c and t.key not in in_specifics and t.key not in apart
    })
    others = _quoted(a, apart)
    parts = []
    if names or not others:
        shown = list(dict.fromkeys(names)) or ["the segment's words"]
        parts.append(f"{_listed(shown)} not in the evidence")
    if others:
        parts.append(f"{_listed(others)} not in the same document as the rest")
    reason = "; ".join(parts)
    if not a.missing:
        found, total = a.words
        where = " in one document" if others else ""
        reason += f" (only {found} of {total} content words found{where})"
    for spec, other, word in a.hints[:2]:
        reason += f"; the evidence has '{other}' near '{word}' where the segment has '{spec.text}'"
    return reason


def _listed(names: list[str]) -> str:
    """"'a'", "'a' and 'b'", "'a', 'b', 'c', 'd' and 2 more words"."""
    shown = [f"'{n}'" for n in names[:MAX_NAMED]]
    more = len(names) - len(shown)
    if more:
        return ", ".join(shown) + f" and {more} more word{'s' if more > 1 else ''}"
    if len(shown) > 1:
        return ", ".join(shown[:-1]) + " and " + shown[-1]
    return shown[0]


def _quoted(a: Analysis, missing_keys: set[str]) -> list[str]:
    """The missing content words as the segment writes them, in order. Text written
    without spaces is read as overlapping pairs of characters; a missing pair is
    quoted as the stretch of that text around it that no pair found in the
    evidence touches ("斯塔基拉", not "斯塔", "塔基", "基拉")."""
    from ...lang import BIGRAM_SCRIPTS, char_script

    held: set[int] = set()
    for t, c in zip(a.content, a.covered):
        if t.pair and c:
            held.update(range(t.start, t.start + len(t.text)))
    text = a.text

    def free(i: int) -> bool:
        return (
            0 <= i < len(text) and i not in held and char_script(text[i]) in BIGRAM_SCRIPTS
        )

    out: list[str] = []
    for t in sorted((t for t in a.content if t.key in missing_keys), key=lambda t: t.start):
        if not t.pair or not text:
            out.append(t.text)
            continue
        start = next((i for i in range(t.start, t.start + len(t.text)) if free(i)), None)
        if start is None:
            continue
        end = start
        while free(start - 1):
            start -= 1
        while free(end):
            end += 1
        out.append(text[start:end])
    return list(dict.fromkeys(out))


def apart_reason(a: Analysis) -> str:
    """Every specific found, but not in one document: "'Mars' and '1975' are in the
    evidence, but no one document holds them all"."""
    return (f"{_listed([s.text for s in a.specifics])} are in the evidence, but no one "
            "document holds them all")
