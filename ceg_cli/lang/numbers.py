"""Numbers written in any script, read as values.

``numbers(text, language)`` finds each written number with its offsets and its
value as a ``Decimal``, so that ``1,000.5`` in English, ``1.000,5`` in German,
``١٬٠٠٠٫٥`` in Arabic, ``१९००`` in Hindi and the full-width ``１９００`` in
Japanese compare equal to what they mean.

Digits are any Unicode decimal digits (Arabic-Indic, Persian, Devanagari,
Bengali, Thai, full-width, ...). Separators are read this way:

- the Arabic decimal separator ``٫`` is always the decimal point and the Arabic
  thousands separator ``٬``, the no-break and thin spaces and the apostrophe
  (Swiss ``1'000``) always group thousands;
- with both ``.`` and ``,`` in one number, the last one, written once, is the
  decimal point: ``1,000.5`` and ``1.000,5`` need no language;
- one kind written several times groups digits: ``1,000,000``, ``1.000.000``,
  and India's ``12,34,567``;
- written once, it is the language's decimal mark (a comma in German, French,
  Russian, ...; a point in English, Chinese, Hindi, ...) unless it is the
  language's grouping mark followed by exactly three digits: ``1.000`` is a
  thousand in German and one in English, ``1,5`` one and a half in both.

What does not read as one number (``1,2,3``, ``1.2.3``: a list, a version, a
date) is read as the numbers between its separators. A minus sign counts only
right before the digits and not after a letter or digit (``1939-1945`` is two
years). Words for numbers (``三``, ``vingt``) are not read.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from .codes import base_language

__all__ = ["DECIMAL_COMMA", "Number", "decimal_mark", "number_key", "numbers"]

#: Languages that write the decimal mark as a comma (CLDR's decimal symbol).
DECIMAL_COMMA = frozenset(
    "af az be bg bs ca cs da de el eo es et eu fi fo fr gl hr hu hy id is it ka kk ky lb "
    "lt lv mk mn nb nl nn no pl pt ro ru sk sl sq sr sv tg tk tr tt uk uz vi".split()
)
_GROUPING_ALWAYS = "\u066c\u00a0\u202f\u2009'\u2019"
_DECIMAL_ALWAYS = "\u066b"
_SEPARATORS = ".,\uff0c\uff0e" + _GROUPING_ALWAYS + _DECIMAL_ALWAYS
_NUMBER = re.compile(rf"([-\u2212]?)(\d+(?:[{_SEPARATORS}]\d+)*)")
_SPLIT = re.compile(rf"([{_SEPARATORS}])")
_CANONICAL = str.maketrans({"\uff0c": ",", "\uff0e": "."})


@dataclass(frozen=True)
class Number:
    """A number as written (``text[start:end]``) and its value."""

    start: int
    end: int
    text: str
    value: Decimal

    @property
    def key(self) -> str:
        """The value as a plain string (``1000``, ``2.5``): equal values, equal keys."""
        return number_key(self.value)


def number_key(value: Decimal) -> str:
    """``value`` with no exponent and no trailing zeros: ``Decimal("2.50")`` -> ``2.5``."""
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def decimal_mark(language: str | None) -> str:
    """``,`` for languages that write decimals with a comma, ``.`` otherwise."""
    return "," if language and base_language(language) in DECIMAL_COMMA else "."


def numbers(text: str, language: str | None = None) -> list[Number]:
    """Every number of ``text`` with its offsets and value, in order."""
    mark = decimal_mark(language)
    out: list[Number] = []
    for m in _NUMBER.finditer(text):
        sign, body = m.group(1), m.group(2)
        start = m.start(2)
        if sign and m.start(1) > 0 and text[m.start(1) - 1].isalnum():
            sign = ""
        value = _value(body, mark)
        if value is not None:
            if sign:
                start = m.start(1)
                value = -value
            out.append(Number(start, m.end(), text[start:m.end()], value))
            continue
        # Not one number: each run of digits on its own.
        pos = start
        for part in _SPLIT.split(body):
            if part and part[0].isdigit():
                out.append(Number(pos, pos + len(part), part, Decimal(_ascii(part))))
            pos += len(part)
    return out


def _ascii(digits: str) -> str:
    return "".join(str(unicodedata.digit(ch)) for ch in digits)


def _value(body: str, mark: str) -> Decimal | None:
    """The value of one written number, or None if its separators make no sense."""
    parts = _SPLIT.split(body.translate(_CANONICAL))
    groups = [_ascii(p) for p in parts[0::2]]
    seps = parts[1::2]
    if not seps:
        return Decimal(groups[0])
    decimal_at = _decimal_position(seps, groups, mark)
    if decimal_at == -2:
        return None
    whole = groups if decimal_at < 0 else groups[: decimal_at + 1]
    if not _valid_grouping(whole):
        return None
    digits = "".join(whole)
    if decimal_at >= 0:
        digits += "." + "".join(groups[decimal_at + 1 :])
    try:
        return Decimal(digits)
    except InvalidOperation:  # pragma: no cover - the parts are digits by construction
        return None


def _decimal_position(seps: list[str], groups: list[str], mark: str) -> int:
    """Index in ``seps`` of the decimal point; -1 for none, -2 when nothing fits."""
    if _DECIMAL_ALWAYS in seps:
        at = seps.index(_DECIMAL_ALWAYS)
        ok = at == len(seps) - 1 and all(s in _GROUPING_ALWAYS + mark for s in seps[:at])
        return at if ok and seps.count(_DECIMAL_ALWAYS) == 1 else -2
    kinds = [s for s in seps if s in ".,"]
    if not kinds:
        return -1
    last = len(seps) - 1
    if len(set(kinds)) == 2:
        # Both: the last one, written once and last of all, is the decimal point.
        if seps[last] not in ".," or kinds.count(seps[last]) != 1:
            return -2
        return last
    if len(kinds) > 1:
        return -1
    at = next(i for i, s in enumerate(seps) if s in ".,")
    if at != last:
        return -1 if seps[at] != mark else -2
    if seps[at] == mark:
        return at
    # The language's grouping mark, once: grouping only before exactly three digits.
    return -1 if len(groups[at + 1]) == 3 else at


def _valid_grouping(groups: list[str]) -> bool:
    """Digit groups before the decimal point: 1-3 digits, then threes (or India's
    twos ending in a three: ``12,34,567``)."""
    if len(groups) == 1:
        return True
    if not 1 <= len(groups[0]) <= 3 or len(groups[-1]) != 3:
        return False
    middle = {len(g) for g in groups[1:-1]}
    return middle <= {3} or middle <= {2}
