"""The offline judge's words, numbers and names in every language.

The offline judge (``offline.py``) checks that a segment's numbers and names are
in one passage and a share of its content words in the evidence. Its English
rules (a light suffix stripper, its own stop words, capitals mark names) stay
exactly as they were: English verdicts do not move. This module reads any other
language with ``ceg_cli.lang``:

- **Words**: a space-separated word is folded (NFKC, case folding, Arabic letter
  variants) and cut to its Snowball stem where the language has one; its
  language's stop words are not content. Text written without spaces (Chinese,
  Japanese, Thai, ...) is read as overlapping pairs of characters, the unit BM25
  indexes it by: a whole clause is never one "word" again.
- **Numbers** in any digits (Arabic-Indic, Devanagari, full-width) and either
  decimal mark (``1.000,5`` in German, ``1,000.5`` in English) are compared as
  values (``lang.numbers``).
- **Names**: capitals mark names only in scripts that have them, and in German
  only where the word is not a common noun: one after an article or a
  contraction that holds one ("der Lehrer", "im Jahr"), or with a noun's suffix
  ("-ung", "-heit", ...), is a word like any other. In scripts without capitals
  (Chinese, Arabic, Hindi, ...) only words in Latin capitals are names
  ("Santo住在纽约"); a name in the script itself is a content word, no more.

``reading_language`` says which rules a segment gets: the language ceg passed
(a record's ``--language``), else, for text in a script other than Latin, the
language the detector names; Latin text with no language given is read as
English, as it always was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["Reader", "Specific", "Token", "reader", "reading_language"]


@dataclass(frozen=True)
class Token:
    text: str  # as written
    key: str  # what is compared: lower-cased and stemmed, or the number's value
    start: int
    number: bool
    #: Whether it counts as a content word; None: the English rule (``offline.is_content``).
    content: bool | None = None
    #: A pair of characters of text written without spaces (its neighbours overlap it).
    pair: bool = False


@dataclass(frozen=True)
class Specific:
    """A detail the evidence must contain: a number or a capitalized name."""

    kind: str  # "number" | "name"
    text: str  # as written in the segment
    keys: tuple[str, ...]  # token keys that must all occur in one passage
    position: int  # index of its first token among the segment's tokens


#: Scripts whose capitals mark names (where the language capitalises only names).
_CASED = frozenset({"Latn", "Cyrl", "Grek", "Armn"})
#: Languages that capitalise every noun.
_NOUNS_CAPITALISED = frozenset({"de", "lb"})
#: German words after which a capitalised word is a common noun: articles,
#: determiners, possessives, and the prepositions that hold an article.
_GERMAN_DETERMINERS = frozenset(
    """
    der die das des dem den ein eine einer eines einem einen kein keine keiner keines
    keinem keinen dieser diese dieses diesem diesen jener jene jenes jenem jenen jeder
    jede jedes jedem jeden mancher manche manches welcher welche welches mein meine
    meiner meines meinem meinen dein deine sein seine seiner seines seinem seinen ihr
    ihre ihrer ihres ihrem ihren unser unsere unserer unseres unserem unseren euer eure
    alle allen aller viele vielen einige einigen mehrere mehreren beide beiden
    am im zum zur vom beim ins ans aufs durchs fürs ums übers unters vors hinters
    zwei drei vier fünf sechs sieben acht neun zehn elf zwölf zwanzig hundert tausend
    viel wenig wenige mehr weniger etwas genug manch solche solchen
    """.split()
)
#: Endings of an inflected German adjective ("natürliches Jagdwild", "technische Fehler").
_GERMAN_ADJECTIVE_ENDINGS = ("e", "en", "er", "es", "em")
#: Endings of German common nouns that names rarely have.
_GERMAN_NOUN_ENDINGS = (
    "ung", "ungen", "heit", "heiten", "keit", "keiten", "schaft", "schaften", "tion",
    "tionen", "sion", "sionen", "tät", "täten", "nis", "nisse", "nissen", "tum", "tümer",
    "ment", "mente", "ismus", "chen", "lein", "ling", "linge", "enz", "anz", "ik", "ie",
    "ien", "eur", "eure", "ist", "isten",
)
#: Lower-case words a name may hold in the languages read here ("Ludwig van
#: Beethoven", "Universidad de Virginia", "Лоренц фон Штейн").
_NAME_JOINERS = frozenset(
    """
    of de da del der di van von la le du des al bin y e et do dos das
    фон де ван дер ибн бен ла ле
    """.split()
)
#: Languages that write a name's case ending after an apostrophe ("Ankara'da").
_APOSTROPHE_SUFFIXES = frozenset({"tr", "az"})
#: Characters that end a sentence, in any script.
_SENTENCE_END = frozenset(".!?:;。！？؟।॥")
_OPENERS = " \t\r\n\"'“‘„«‹(*#-¿¡「『（"


@lru_cache(maxsize=64)
def reader(language: str) -> Reader:
    return Reader(language)


def reading_language(language: str | None, text: str) -> str | None:
    """The language the judge reads ``text`` in, or None for the English rules.

    ``language`` is the one ceg was given or detected for the record; without
    one, Latin text keeps the English rules and text in another script is read in
    the language the detector names for it (or by its script alone, ``und-Xxxx``).
    """
    from ...lang import ENGLISH, base_language, detect, dominant_script

    if language:
        code = base_language(language)
        if code == ENGLISH:
            return None
        if code != "und":
            return code
    script = dominant_script(text)
    if script in ("Latn", "Zyyy"):
        return None
    found = detect(text).language
    return None if base_language(found) == ENGLISH else found


class Reader:
    """Tokens and specifics of text in one language (see the module's docstring)."""

    def __init__(self, language: str) -> None:
        from ...lang import base_language, stemmer, stopwords
        from ...lang.stem import light_stemmer

        self.language = language
        self.code = base_language(language)
        known = self.code != "und"
        self._stop = stopwords(self.code) if known else frozenset()
        # A light stemmer where one serves the judge better than Snowball (Arabic) or
        # where Snowball has none (Bulgarian): ``lang.stem.light_stemmer``.
        self._stem = (light_stemmer(self.code) or stemmer(self.code)) if known else None
        self._suffixes_after_apostrophe = self.code in _APOSTROPHE_SUFFIXES
        self.nouns_capitalised = self.code in _NOUNS_CAPITALISED

    # ----------------------------------------------------------------- tokens

    def tokenize(self, text: str) -> list[Token]:
        """Words (or pairs of characters) and numbers, with their keys and offsets."""
        from ...lang import fold, numbers, words

        nums = numbers(text, self.code if self.code != "und" else None)
        out = [Token(n.text, n.key, n.start, True, True) for n in nums]
        covered = [(n.start, n.end) for n in nums]
        spaced: list[tuple[int, str]] = []
        for w in words(text):
            if w.kind != "word":
                # The numbers of an unspaced run are read as numbers, by value, not as
                # pairs of characters: Thai "๑๗๘๒" is 1782 (issue 51 item 3).
                for start, part in _letters(w.text, w.start, covered):
                    out.extend(self._pairs(part, start))
                continue
            for start, part in _letters(w.text, w.start, covered):
                spaced.append((start, part))
        if spaced:
            folded = [fold(part, self.code) for _, part in spaced]
            stems = self._stem(folded) if self._stem is not None else folded
            for (start, part), low, key in zip(spaced, folded, stems, strict=True):
                content = len(low) > 1 and low not in self._stop
                if content and self._suffixes_after_apostrophe and _after_apostrophe(text, start):
                    content = False  # Turkish "Kennedy'nin": the case ending of a name
                out.append(Token(part, key, start, False, content))
        out.sort(key=lambda t: t.start)
        return out

    def _pairs(self, run: str, offset: int) -> list[Token]:
        """Overlapping pairs of characters (grapheme clusters) of an unspaced run."""
        from ...lang import fold

        clusters = _clusters(run)
        if len(clusters) == 1:
            low = fold(clusters[0], self.code)
            return [Token(clusters[0], low, offset, False, False, True)]
        out = []
        at = offset
        for a, b in zip(clusters, clusters[1:]):
            pair = a + b
            low = fold(pair, self.code)
            stop = low in self._stop or (
                fold(a, self.code) in self._stop and fold(b, self.code) in self._stop
            )
            out.append(Token(pair, low, at, False, not stop, True))
            at += len(a)
        return out

    # -------------------------------------------------------------- specifics

    def specifics(
        self, text: str, toks: Sequence[Token], nouns: frozenset[str] = frozenset(),
        held: frozenset[str] | None = None,
    ) -> list[Specific]:
        """The numbers and names of a segment (see the module's docstring); ``nouns``:
        keys the evidence uses as common nouns (``evidence_nouns``), never names;
        ``held``: the keys the evidence holds (None: not known)."""
        from ...lang import char_script, dominant_script

        out = [Specific("number", t.text, (t.key,), i) for i, t in enumerate(toks) if t.number]
        cased_text = dominant_script(text) in _CASED
        i = 0
        while i < len(toks):
            t = toks[i]
            if not self._capitalised(t) or char_script(t.text[0]) not in _CASED:
                i += 1
                continue
            if cased_text and self._common_noun(text, toks, i, nouns):
                i += 1
                continue
            j = i + 1
            while j < len(toks) and _joined(text, toks[j - 1], toks[j]):
                if self._capitalised(toks[j]) and not (
                    cased_text and self._common_noun(text, toks, j, nouns)
                ):
                    j += 1
                elif (
                    self._joiner(toks[j].text)
                    and j + 1 < len(toks)
                    and self._capitalised(toks[j + 1])
                    and not (cased_text and self._common_noun(text, toks, j + 1, nouns))
                    and _joined(text, toks[j], toks[j + 1])
                ):
                    j += 2
                else:
                    break
            words = [w for w in toks[i:j] if w.text not in _NAME_JOINERS]
            initial = cased_text and _sentence_initial(text, t.start)
            if initial and len(words) > 1 and _joined(text, toks[i], toks[i + 1]) and (
                toks[i + 1].text not in _NAME_JOINERS and (held is None or t.key not in held)
            ):
                # A capitalised word opening a sentence may be any word ("Это Генерал
                # Мэй", "Önceden Teksas"): the name is what follows it, unless the
                # evidence holds that word too ("Sant Pau").
                words = words[1:]
                initial = False
            # In a cased text a lone capitalised word opening a sentence may be any
            # word; in Chinese or Arabic text a word in Latin capitals is a name.
            if len(words) > 1 or not cased_text or not initial:
                first, last = words[0], words[-1]
                out.append(Specific(
                    "name", text[first.start : last.start + len(last.text)],
                    tuple(dict.fromkeys(w.key for w in words)), toks.index(first),
                ))
            i = j
        return sorted(out, key=lambda sp: sp.position)

    def _joiner(self, word: str) -> bool:
        """Whether ``word`` may stand inside a name ("van", "de"); not German articles
        ("Teil der Dritten SS" is no name: German capitalises the nouns around them)."""
        if self.nouns_capitalised and word.lower() in _GERMAN_DETERMINERS:
            return False
        return word in _NAME_JOINERS

    def _capitalised(self, t: Token) -> bool:
        return (
            not t.number and not t.pair and len(t.text) > 1 and t.text[0].isupper()
            and t.text.lower() not in self._stop
        )

    def _common_noun(
        self, text: str, toks: Sequence[Token], i: int, nouns: frozenset[str] = frozenset()
    ) -> bool:
        """In German: whether the capitalised word at ``i`` is a common noun: after a
        determiner, with a noun's ending, or one the evidence uses as a noun."""
        if not self.nouns_capitalised:
            return False
        word = toks[i].text.lower()
        if toks[i].key in nouns or (word.endswith(_GERMAN_NOUN_ENDINGS) and len(word) > 5):
            return True
        return self._after_determiner(toks, i)

    def evidence_nouns(self, text: str) -> frozenset[str]:
        """The keys of the words ``text`` uses as common nouns (after a determiner);
        empty where capitals mark only names."""
        if not self.nouns_capitalised:
            return frozenset()
        return _nouns(self.language, text)

    def _after_determiner(self, toks: Sequence[Token], i: int) -> bool:
        """After a determiner, a numeral or an inflected adjective: "der junge Lehrer",
        "zwei Dinge", "technische Fehler"."""
        if i > 0:
            prev = toks[i - 1]
            if prev.number:
                return True
            if (self._capitalised(prev) and prev.text[-1:] in ("s", "'", "’")
                    and toks[i].start - (prev.start + len(prev.text)) == 1):
                return True  # the noun a genitive governs: "Nixons Staatssekretär"

            low = prev.text.lower()
            if (not prev.pair and prev.text[:1].islower() and len(low) > 3
                    and low.endswith(_GERMAN_ADJECTIVE_ENDINGS)):
                return True
        # Back over lower-case words (adjectives: "der junge Lehrer") to a determiner.
        k = i - 1
        while k >= 0 and i - k <= 3:
            prev = toks[k]
            if prev.number or prev.pair:
                return False
            low = prev.text.lower()
            if low in _GERMAN_DETERMINERS:
                return True
            if prev.text[:1].isupper():
                return False
            k -= 1
        return False


def _letters(word: str, offset: int, numbers: Sequence[tuple[int, int]]) -> list[tuple[int, str]]:
    """The parts of a word outside the numbers read from it ("A5" -> "A")."""
    end = offset + len(word)
    cuts = [(max(s, offset), min(e, end)) for s, e in numbers if s < end and e > offset]
    if not cuts:
        return [(offset, word)]
    out = []
    at = offset
    for s, e in sorted(cuts):
        if s > at:
            out.append((at, word[at - offset : s - offset]))
        at = max(at, e)
    if at < end:
        out.append((at, word[at - offset :]))
    return [(s, p) for s, p in out if any(c.isalpha() for c in p)]


@lru_cache(maxsize=4096)
def _nouns(language: str, text: str) -> frozenset[str]:
    r = reader(language)
    toks = r.tokenize(text)
    return frozenset(
        t.key for i, t in enumerate(toks) if r._capitalised(t) and r._after_determiner(toks, i)
    )


@lru_cache(maxsize=1)
def _cluster_regex() -> Any:
    import regex

    return regex.compile(r"\X")


def _clusters(run: str) -> list[str]:
    return list(_cluster_regex().findall(run))


def _joined(text: str, a: Token, b: Token) -> bool:
    """Whether two tokens can belong to one name: only a space or a hyphen between them."""
    return text[a.start + len(a.text) : b.start] in (" ", "-")


def _after_apostrophe(text: str, start: int) -> bool:
    """Whether the word at ``start`` follows a letter and an apostrophe."""
    return start >= 2 and text[start - 1] in "'’" and text[start - 2].isalpha()


def _sentence_initial(text: str, start: int) -> bool:
    at = start
    while at > 0 and text[at - 1] in _OPENERS:
        at -= 1
    return at == 0 or "\n" in text[at:start] or text[at - 1] in _SENTENCE_END
