"""Normalizing text for comparison: Unicode NFKC, case folding, and each language's rules.

What is normalized is compared, never shown: offsets always point into the
text as written, and a word is normalized on its own (``fold``) when it is
compared with another.

- **NFKC** makes the full-width ``Ｔｏｋｙｏ１２３`` the ``Tokyo123`` a user
  types, the ligature ``ﬁ`` two letters, and Arabic presentation forms plain
  letters.
- **Case folding** (``str.casefold``): ``Straße`` and ``STRASSE`` match, and so
  do Greek final and medial sigma. Turkish and Azerbaijani fold ``I`` to dotless
  ``ı`` and ``İ`` to ``i``, as those languages do.
- **Invisible characters** (zero-width space and joiners, soft hyphen, word
  joiner, byte-order mark) are dropped: they change no word.
- **Arabic** (and the languages written in its script: Persian, Urdu, ...),
  as Lucene's ``ArabicNormalizer`` does: alef with hamza or madda (and alef
  wasla) to bare alef, alef maksura and Persian yeh to yeh, teh marbuta to heh,
  tatweel and the diacritics (harakat, shadda, sukun, superscript alef, Quranic
  marks) removed. Writers vary in all of these, and a search or a judge must not.
"""

from __future__ import annotations

import re
import unicodedata

from .codes import base_language

__all__ = ["fold", "normalize_arabic"]

_INVISIBLE = re.compile("[\u00ad\u200b\u200c\u200d\u2060\ufeff]")
_ARABIC_BLOCK = re.compile("[\u0600-\u06ff]")
_ARABIC_MARKS = re.compile("[\u0640\u064b-\u065f\u0670\u06d6-\u06ed]")
_ARABIC_LETTERS = str.maketrans({
    "\u0622": "\u0627",  # alef with madda above
    "\u0623": "\u0627",  # alef with hamza above
    "\u0625": "\u0627",  # alef with hamza below
    "\u0671": "\u0627",  # alef wasla
    "\u0649": "\u064a",  # alef maksura -> yeh
    "\u06cc": "\u064a",  # Farsi yeh -> yeh
    "\u0629": "\u0647",  # teh marbuta -> heh
})
_TURKIC = frozenset({"tr", "az"})
_TURKIC_CAPITALS = str.maketrans({"I": "ı", "İ": "i"})


def normalize_arabic(text: str) -> str:
    """Lucene's Arabic normalization: letter variants unified, tatweel and diacritics removed."""
    return _ARABIC_MARKS.sub("", text).translate(_ARABIC_LETTERS)


def fold(text: str, language: str | None = None) -> str:
    """``text`` as compared: NFKC, invisible characters dropped, case folded, and the
    Arabic-script normalization wherever the text has Arabic letters.

    ``language`` decides only what differs by language (Turkish ``I``); the
    Arabic rules follow the script, so an Arabic name inside an English answer
    is folded the way the Arabic evidence is.
    """
    text = unicodedata.normalize("NFKC", text)
    text = _INVISIBLE.sub("", text)
    if language is not None and base_language(language) in _TURKIC:
        text = text.translate(_TURKIC_CAPITALS)
    text = text.casefold()
    if _ARABIC_BLOCK.search(text):
        text = normalize_arabic(text)
    return text
