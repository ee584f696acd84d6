"""The Unicode script a character or a text is written in (ISO 15924 codes).

Python's ``unicodedata`` has no script property, so the blocks of the scripts
that matter for splitting, tokenizing and detecting are listed here (the
Unicode Character Database's ``Scripts.txt`` at block granularity: a few
punctuation marks inside a block count as that block's script, which is what
a text in that script wants anyway). Combining marks take the script of the
letter they follow; digits, punctuation, symbols and emoji are ``Zyyy``
("common"), and a letter of a block not listed is ``Zzzz`` ("unknown").

Scripts written without spaces between words (Chinese, Japanese, Thai, Lao,
Khmer, Burmese, Tibetan, Yi) are ``UNSPACED``: words there are found by
character n-grams, and a passage's size is counted in characters.
"""

from __future__ import annotations

import re
import string
import unicodedata
from bisect import bisect_right
from collections import Counter
from functools import lru_cache

__all__ = [
    "BIGRAM_SCRIPTS",
    "CJK_SCRIPTS",
    "COMMON",
    "SCRIPT_LANGUAGE",
    "UNKNOWN",
    "UNSPACED_SCRIPTS",
    "char_script",
    "dominant_script",
    "script_counts",
]

COMMON = "Zyyy"
INHERITED = "Zinh"
UNKNOWN = "Zzzz"

# (first, last, script), sorted, not overlapping.
_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0041, 0x005A, "Latn"), (0x0061, 0x007A, "Latn"), (0x00AA, 0x00AA, "Latn"),
    (0x00BA, 0x00BA, "Latn"), (0x00C0, 0x00D6, "Latn"), (0x00D8, 0x00F6, "Latn"),
    (0x00F8, 0x02AF, "Latn"), (0x0300, 0x036F, INHERITED), (0x0370, 0x03FF, "Grek"),
    (0x0400, 0x052F, "Cyrl"), (0x0530, 0x058F, "Armn"), (0x0590, 0x05FF, "Hebr"),
    (0x0600, 0x06FF, "Arab"), (0x0700, 0x074F, "Syrc"), (0x0750, 0x077F, "Arab"),
    (0x0780, 0x07BF, "Thaa"), (0x07C0, 0x07FF, "Nkoo"), (0x0870, 0x08FF, "Arab"),
    (0x0900, 0x097F, "Deva"), (0x0980, 0x09FF, "Beng"), (0x0A00, 0x0A7F, "Guru"),
    (0x0A80, 0x0AFF, "Gujr"), (0x0B00, 0x0B7F, "Orya"), (0x0B80, 0x0BFF, "Taml"),
    (0x0C00, 0x0C7F, "Telu"), (0x0C80, 0x0CFF, "Knda"), (0x0D00, 0x0D7F, "Mlym"),
    (0x0D80, 0x0DFF, "Sinh"), (0x0E00, 0x0E7F, "Thai"), (0x0E80, 0x0EFF, "Laoo"),
    (0x0F00, 0x0FFF, "Tibt"), (0x1000, 0x109F, "Mymr"), (0x10A0, 0x10FF, "Geor"),
    (0x1100, 0x11FF, "Hang"), (0x1200, 0x139F, "Ethi"), (0x13A0, 0x13FF, "Cher"),
    (0x1400, 0x167F, "Cans"), (0x1780, 0x17FF, "Khmr"), (0x1800, 0x18AF, "Mong"),
    (0x19E0, 0x19FF, "Khmr"), (0x1AB0, 0x1AFF, INHERITED), (0x1C80, 0x1C8F, "Cyrl"),
    (0x1C90, 0x1CBF, "Geor"), (0x1D00, 0x1DBF, "Latn"), (0x1DC0, 0x1DFF, INHERITED),
    (0x1E00, 0x1EFF, "Latn"), (0x1F00, 0x1FFF, "Grek"), (0x20D0, 0x20FF, INHERITED),
    (0x2C60, 0x2C7F, "Latn"), (0x2D00, 0x2D2F, "Geor"), (0x2D30, 0x2D7F, "Tfng"),
    (0x2D80, 0x2DDF, "Ethi"), (0x2DE0, 0x2DFF, "Cyrl"), (0x2E80, 0x2FDF, "Hani"),
    (0x3005, 0x3005, "Hani"), (0x3007, 0x3007, "Hani"), (0x3021, 0x3029, "Hani"),
    (0x3038, 0x303B, "Hani"), (0x3041, 0x309F, "Hira"), (0x30A0, 0x30FF, "Kana"),
    (0x3100, 0x312F, "Bopo"), (0x3130, 0x318F, "Hang"), (0x31A0, 0x31BF, "Bopo"),
    (0x31F0, 0x31FF, "Kana"), (0x3400, 0x4DBF, "Hani"), (0x4E00, 0x9FFF, "Hani"),
    (0xA000, 0xA4CF, "Yiii"), (0xA640, 0xA69F, "Cyrl"), (0xA720, 0xA7FF, "Latn"),
    (0xA8E0, 0xA8FF, "Deva"), (0xA960, 0xA97F, "Hang"), (0xA9E0, 0xA9FF, "Mymr"),
    (0xAA60, 0xAA7F, "Mymr"),
    (0xAB30, 0xAB6F, "Latn"), (0xAC00, 0xD7FF, "Hang"), (0xF900, 0xFAFF, "Hani"),
    (0xFB00, 0xFB06, "Latn"), (0xFB1D, 0xFB4F, "Hebr"), (0xFB50, 0xFDFF, "Arab"),
    (0xFE20, 0xFE2F, INHERITED), (0xFE70, 0xFEFF, "Arab"), (0xFF21, 0xFF3A, "Latn"),
    (0xFF41, 0xFF5A, "Latn"), (0xFF66, 0xFF9F, "Kana"), (0xFFA0, 0xFFDC, "Hang"),
    (0x1B000, 0x1B16F, "Kana"), (0x20000, 0x323AF, "Hani"),
)  # fmt: skip
_STARTS = [r[0] for r in _RANGES]

#: Scripts written without spaces between words.
UNSPACED_SCRIPTS = frozenset({"Hani", "Hira", "Kana", "Bopo", "Thai", "Laoo", "Khmr",
                              "Mymr", "Tibt", "Yiii"})
#: Scripts a run of which is one stretch of Chinese or Japanese text (bigrams cross them).
CJK_SCRIPTS = frozenset({"Hani", "Hira", "Kana", "Bopo"})
#: Scripts whose words are indexed as character bigrams: the unspaced ones, and
#: Hangul, whose space-separated words carry their particles ("서울에서").
BIGRAM_SCRIPTS = UNSPACED_SCRIPTS | {"Hang"}

#: A CJK character weighs this many letters in ``dominant_script``.
CJK_WEIGHT = 3
_WIDE = frozenset({"Hani", "Hira", "Kana", "Hang"})
#: The share of (weighted) letters that makes a script other than Latin the text's.
OTHER_SCRIPT_SHARE = 0.25

#: Scripts that one language writes, far more than any other: the language a
#: text in them is, when a detector cannot tell.
SCRIPT_LANGUAGE: dict[str, str] = {
    "Grek": "el", "Armn": "hy", "Hebr": "he", "Thaa": "dv", "Beng": "bn", "Guru": "pa",
    "Gujr": "gu", "Orya": "or", "Taml": "ta", "Telu": "te", "Knda": "kn", "Mlym": "ml",
    "Sinh": "si", "Thai": "th", "Laoo": "lo", "Tibt": "bo", "Mymr": "my", "Geor": "ka",
    "Hang": "ko", "Khmr": "km", "Hira": "ja", "Kana": "ja", "Bopo": "zh", "Yiii": "ii",
}  # fmt: skip


@lru_cache(maxsize=1 << 16)  # a pure function of a character: texts reuse a few hundred
def char_script(ch: str) -> str:
    """The script of one character: ``Latn``, ``Hani``, ... ``Zinh`` for a combining
    mark, ``Zyyy`` for digits, punctuation, symbols and spaces, ``Zzzz`` otherwise."""
    cp = ord(ch)
    i = bisect_right(_STARTS, cp) - 1
    if i >= 0 and cp <= _RANGES[i][1]:
        if ch.isalpha():
            return _RANGES[i][2]
        # Digits, punctuation and signs inside a script's block are common to all
        # (a Devanagari danda ends a Hindi sentence as a full stop ends an English one);
        # combining marks (vowel signs, harakat) belong to their letter.
        category = unicodedata.category(ch)[0]
        if category == "M":
            return _RANGES[i][2]
        return COMMON
    category = unicodedata.category(ch)
    if category[0] == "M":
        return INHERITED
    if category[0] == "L":
        return UNKNOWN
    return COMMON


def script_counts(text: str) -> Counter[str]:
    """How many letters (and combining marks, counted with their letter) of each script."""
    counts: Counter[str] = Counter()
    # ASCII letters are Latin and the rest of ASCII common to all: counted at C speed,
    # and only the runs of other characters walked (most of a Latin-script text is ASCII).
    latin = len(text) - len(text.translate(_NO_ASCII_LETTERS))
    if latin:
        counts["Latn"] = latin
    for run in _NOT_ASCII.finditer(text):
        before = text[run.start() - 1] if run.start() else " "
        previous = "Latn" if before.isascii() and before.isalpha() else COMMON
        for ch in run.group():
            script = char_script(ch)
            if script == INHERITED:
                script = previous
            if script != COMMON:
                counts[script] += 1
            previous = script
    return counts


_NO_ASCII_LETTERS = str.maketrans("", "", string.ascii_letters)
_NOT_ASCII = re.compile(r"[^\x00-\x7f]+")


def dominant_script(text: str) -> str:
    """The script ``text`` is written in; ``Zyyy`` when it has no letters.

    The script with the most letters, except that names and terms in Latin
    letters are common inside text in other scripts ("Alan Greenspan有有关失业率
    经济理论", "Hawthorne อาศัยอยู่ที่ถนน Main Street") and rare the other way
    round: another script that holds at least ``OTHER_SCRIPT_SHARE`` of the
    letters is the text's script. A Chinese, Japanese or Korean character counts
    as ``CJK_WEIGHT`` letters (it writes a syllable). Japanese mixes kanji
    (``Hani``) with kana: a text with kana is ``Jpan`` (ISO 15924's Han +
    Hiragana + Katakana); Chinese is ``Hani``.
    """
    counts = script_counts(text)
    if not counts:
        return COMMON
    weighted = {s: n * (CJK_WEIGHT if s in _WIDE else 1) for s, n in counts.items()}
    kana = weighted.get("Hira", 0) + weighted.get("Kana", 0)
    if kana:
        weighted["Jpan"] = kana + weighted.pop("Hani", 0)
        weighted.pop("Hira", None)
        weighted.pop("Kana", None)
    best = max(weighted, key=lambda s: (weighted[s], s))
    if best == "Latn" and len(weighted) > 1:
        total = sum(weighted.values())
        other = max((s for s in weighted if s != "Latn"), key=lambda s: (weighted[s], s))
        if weighted[other] >= OTHER_SCRIPT_SHARE * total:
            return other
    return best
