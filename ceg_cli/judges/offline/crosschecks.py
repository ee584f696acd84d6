"""What the cross-language rule compares before the cosine: negation words and months.

A cosine between a segment and an evidence sentence in another language reads the
topic, not the claim: "Der Eiffelturm wurde 1889 nicht fertiggestellt." is close to
"The Eiffel Tower was completed in 1889." (issue 58 item 3). So before the cosine
decides, ``crossrule`` asks two things that can be compared across languages
without a model, as numbers are:

- **negation**: a segment that says "nicht", "не", "değil", "لم" or "不是" where its
  closest evidence sentence says none of its own language's negation words (or the
  reverse) is flagged. ``negated`` reads each language's words (``NEGATIONS``);
  "nicht nur", "not only" and their kind are not negations. A language without a
  list (or negation written inside the verb: Turkish "-me/-ma", Swahili "ha-") is
  not read: the check is skipped, never guessed;
- **months**: a month the segment names beside a number ("3. Mai 1889", "май
  1889", "1889年5月") must be a month the evidence names (``months``), in the
  evidence's language; where the evidence's language has no table, it is not asked.

Both are the checks the same-language judge makes with its words (a month is a
word it must find; a negation it cannot see either), made here with tables because
the words differ across languages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MONTHS", "NEGATIONS", "is_month", "is_month_number", "missing_months", "months",
           "negated"]

#: Negation words per language, as ``lang.fold`` writes them (lower case). Word
#: languages match whole words; ``_UNSPACED`` languages match substrings.
NEGATIONS: dict[str, frozenset[str]] = {k: frozenset(v.split()) for k, v in {
    "en": "not no never none nobody nothing neither nor cannot n't",
    "de": "nicht kein keine keinen keinem keiner keines nie niemals nichts niemand weder",
    "fr": "ne n' pas jamais aucun aucune rien ni",
    "es": "no nunca jamás ningún ninguno ninguna nada nadie ni tampoco",
    "it": "non mai nessuno nessuna niente nulla né",
    "pt": "não nunca jamais nenhum nenhuma nada ninguém nem",
    "nl": "niet geen nooit niets niemand",
    "sv": "inte icke aldrig ingen inget inga",
    "da": "ikke aldrig ingen intet ingenting",
    "no": "ikke aldri ingen intet ingenting",
    "pl": "nie nigdy żaden żadna żadne nic",
    "ro": "nu niciodată nici",
    "hu": "nem sem soha nincs nincsenek",
    "id": "tidak bukan tak belum tiada",
    "ms": "tidak bukan tak belum tiada",
    "ru": "не нет ни никогда ничего никто нельзя",
    "bg": "не няма никога нищо никой",
    "uk": "не ні ніколи нічого ніхто немає",
    "el": "δεν μην μη ποτέ τίποτα κανένας καμία κανένα όχι",
    "tr": "değil yok hiç asla hiçbir",
    "ar": "لا لم لن ليس ليست ليسوا",
    "fa": "نه نیست هرگز",
    "ur": "نہیں نہ مت",
    "he": "לא אין אינו אינה אינם",
    "hi": "नहीं नही न मत",
    "vi": "không chẳng chưa",
    "zh": "不是 并非 並非 没有 沒有 从未 從未 不会 不會 不能 并不 並不 未能 未曾 尚未 从不 從不 "
          "不再 绝不 絕不 不曾 不在 不属于 不屬於 不存在",
    "ja": "ではない じゃない ません なかった しない されない いない できない ならない",
    "ko": "않 없 아니",
    "th": "ไม่ มิได้",
}.items()}
#: Languages written without spaces between words: negations are found as substrings.
_UNSPACED = frozenset({"zh", "ja", "ko", "th"})
#: A negation word followed by one of these is "not only", not a negation.
_NOT_ONLY: dict[str, frozenset[str]] = {k: frozenset(v.split()) for k, v in {
    "en": "only just merely", "de": "nur bloß allein", "fr": "seulement",
    "es": "solo sólo solamente únicamente", "it": "solo soltanto",
    "pt": "só apenas somente", "nl": "alleen enkel", "sv": "bara endast",
    "ru": "только", "bg": "само", "uk": "тільки лише", "pl": "tylko",
    "ro": "doar numai", "el": "μόνο", "tr": "sadece yalnızca", "vi": "chỉ",
    "id": "hanya", "ms": "hanya", "hi": "केवल सिर्फ़ सिर्फ",
}.items()}
#: Negation words that inflect, matched as the start of a word: Turkish "değildi", "yoktu".
_INFLECTED = {"tr": ("değil", "yok")}
#: Vietnamese words in which "không" is a syllable, not "not": air, space, aviation,
#: air force.
_VI_NOT_NEGATION = re.compile(r"không (?:khí|gian|quân|phận)|hàng không")
#: Arabic conjunctions written onto the next word ("ولم", "فلا").
_ARABIC_PREFIXES = ("و", "ف")

_PUNCTUATION = ".,;:!?()[]{}«»\"“”„‚‘،؛؟।॥…—–-"


def negated(text: str, language: str | None) -> bool | None:
    """Whether ``text`` (in ``language``, a base code) says a negation word of its
    language; None where ceg has no list for the language."""
    from ...lang import base_language, fold

    code = base_language(language) if language else ""
    words = NEGATIONS.get(code)
    if words is None:
        return None
    low = fold(text, code)
    if code in _UNSPACED:
        return any(w in low for w in words)
    if code == "vi":
        low = _VI_NOT_NEGATION.sub(" ", low)
    if code == "en":
        low = re.sub(r"n['’]t\b", " n't", low)
    if code == "fr":
        low = re.sub(r"\bn['’]", " n' ", low)
    # Split at spaces, not at \w: Devanagari's vowel signs are not word characters.
    tokens = [t.strip(_PUNCTUATION) for t in low.replace("’", "'").split()]
    only = _NOT_ONLY.get(code, frozenset())
    for i, t in enumerate(tokens):
        word = t
        if word not in words and code == "ar" and word[:1] in _ARABIC_PREFIXES:
            word = word[1:]
        after = tokens[i + 1] if i + 1 < len(tokens) else ""
        # "No. 5", "Nr." before a number: a numero, not "no"; "not only": no negation.
        if (word in words or word.startswith(_INFLECTED.get(code, ("\0",)))) and not (
                after in only or after[:1].isdigit()):
            return True
    return False


#: Month names per language, as ``lang.fold`` writes them, the month's number first;
#: ``_PREFIXED`` languages match a word that starts with one (inflected forms:
#: "января", "Ekim'de", "Σεπτεμβρίου").
MONTHS: dict[str, dict[str, int]] = {}
_MONTH_NAMES = {
    "en": "january february march april may june july august september october november "
          "december",
    "de": "januar|jänner februar märz april mai juni juli august september oktober november "
          "dezember",
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre "
          "décembre",
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre|setiembre octubre "
          "noviembre diciembre",
    "it": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre "
          "novembre dicembre",
    "pt": "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro "
          "dezembro",
    "nl": "januari februari maart april mei juni juli augustus september oktober november "
          "december",
    "ru": "январ феврал март апрел май|мая|мае июн июл август сентябр октябр ноябр декабр",
    "bg": "януари февруари март април май юни юли август септември октомври ноември "
          "декември",
    "tr": "ocak şubat mart nisan mayıs haziran temmuz ağustos eylül ekim kasım aralık",
    "el": "ιανουαρ φεβρουαρ μαρτ απριλ μαΐ|μαι|μάι ιουν ιουλ αυγουστ σεπτεμβρ οκτωβρ "
          "νοεμβρ δεκεμβρ",
    "ar": "يناير|كانون فبراير|شباط مارس|اذار ابريل|نيسان مايو|ايار يونيو|يونيه|حزيران "
          "يوليو|يوليه|تموز اغسطس سبتمبر|ايلول اكتوبر نوفمبر ديسمبر",
    "hi": "जनवरी फ़रवरी|फरवरी मार्च अप्रैल मई जून जुलाई अगस्त सितंबर|सितम्बर "
          "अक्टूबर|अक्तूबर नवंबर|नवम्बर दिसंबर|दिसम्बर",
}
for _code, _names in _MONTH_NAMES.items():
    MONTHS[_code] = {name: n for n, forms in enumerate(_names.split(), 1)
                     for name in forms.split("|")}
_PREFIXED = frozenset({"ru", "tr", "el"})
#: Arabic's "كانون" is January or December by the word after it; only "يناير" and
#: "ديسمبر" are read as those months, "كانون" alone is not.
_AMBIGUOUS = {"ar": frozenset({"كانون"})}
#: "5月" in Chinese and Japanese.
_CJK_MONTH = re.compile(r"(\d{1,2})\s*月")
_TOKEN = re.compile(r"\d+|[^\W\d_]+", re.UNICODE)


def months(text: str, language: str | None, beside_number: bool) -> frozenset[int] | None:
    """The months ``text`` (in ``language``) names: only those beside a number (a day or a
    year) where ``beside_number`` ("May" the verb is no month); None where ceg has no
    table for the language."""
    from ...lang import base_language, fold

    code = base_language(language) if language else ""
    if code in ("zh", "ja"):
        found = set()
        for m in _CJK_MONTH.finditer(_ascii_digits(text)):
            if 1 <= int(m.group(1)) <= 12:
                found.add(int(m.group(1)))
        return frozenset(found)
    table = MONTHS.get(code)
    if table is None:
        return None
    tokens = _TOKEN.findall(fold(_ascii_digits(text), code))
    found = set()
    for i, t in enumerate(tokens):
        month = _month(t, code, table)
        if month is None:
            continue
        if beside_number and not _number_beside(tokens, i):
            continue
        found.add(month)
    return frozenset(found)


def is_month(word: str, language: str | None) -> bool:
    """Whether ``word`` is a month's name in ``language`` ("Mart" in Turkish): across
    languages it is compared as a month, not looked for as a name."""
    from ...lang import base_language, fold

    code = base_language(language) if language else ""
    table = MONTHS.get(code)
    return table is not None and _month(fold(word, code), code, table) is not None


def is_month_number(number: str, text: str, language: str | None) -> bool:
    """Whether ``number`` is written as a month in ``text`` ("5月" in Chinese or Japanese):
    across languages it is compared as a month (English evidence writes "May")."""
    from ...lang import base_language

    if not language or base_language(language) not in ("zh", "ja"):
        return False
    return any(m.group(1) == _ascii_digits(number) for m in _CJK_MONTH.finditer(
        _ascii_digits(text)))


def _month(word: str, code: str, table: dict[str, int]) -> int | None:
    if word in _AMBIGUOUS.get(code, ()):
        return None
    if word in table:
        return table[word]
    if code in _PREFIXED:
        for name, n in table.items():
            if word.startswith(name):
                return n
    return None


def _number_beside(tokens: list[str], i: int) -> bool:
    return any(0 <= j < len(tokens) and tokens[j].isdigit() for j in (i - 1, i + 1))


def _ascii_digits(text: str) -> str:
    import unicodedata

    if text.isascii():
        return text
    return "".join(str(unicodedata.decimal(ch)) if unicodedata.decimal(ch, None) is not None
                   else ch for ch in text)


def missing_months(segment: str, segment_language: str, evidence: Iterable[str],
                   evidence_language: str) -> list[int] | None:
    """The months the segment names beside a number that the evidence does not name;
    None where either language has no table."""
    said = months(segment, segment_language, beside_number=True)
    if not said:
        return None if said is None else []
    held: set[int] = set()
    for text in evidence:
        got = months(text, evidence_language, beside_number=False)
        if got is None:
            return None
        held |= got
    return sorted(said - held)
