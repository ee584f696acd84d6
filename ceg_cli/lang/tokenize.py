"""Words in every script, and the terms a language's text is indexed and compared by.

``words(text)`` finds the words of any text with their offsets: a run of
letters, marks and digits is a word in scripts that put spaces between words;
in those that do not (Chinese, Japanese, Thai, Lao, Khmer, Burmese, Tibetan,
Yi) and in Korean, a run of the script is one ``Word`` whose ``kind`` says so,
and ``terms`` cuts it into overlapping pairs of characters (grapheme clusters,
so a Thai vowel sign stays with its consonant). Character bigrams are what
Lucene's CJK analyzer indexes; they need no dictionary, find a two-character
Chinese word wherever it is written, and treat Thai, whose spaces part phrases
rather than words, the same way. A segmenter with its dictionary in its wheel
(jieba, pythainlp) would give real words; bigrams were chosen for one rule
across scripts and no extra download or dependency.

``terms(text, language)`` is what BM25 indexes and a judge compares: the text
folded (``normalize.fold``), its words, each language's stop words removed and
Snowball stems taken where the language has them, runs of unspaced scripts as
bigrams. English is the exception, kept exactly as ceg always indexed it
(``ENGLISH_TOKENIZER``, bm25s's own tokenizer: lower case, words of two
characters or more, Lucene's English stop words, no stemming), so that English
indexes and results do not move.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .codes import ENGLISH, UNDETERMINED, base_language
from .normalize import fold
from .stem import SNOWBALL, stemmer
from .stopwords import stopword_source, stopwords

__all__ = [
    "ENGLISH_TOKENIZER",
    "Analyzer",
    "Word",
    "analyzer",
    "terms",
    "words",
]

#: The tokenizer of ceg's BM25 before languages (bm25s.tokenize's arguments):
#: English keeps it, and an index that records it is searched with it.
ENGLISH_TOKENIZER: dict[str, Any] = {
    "lower": True,
    "token_pattern": r"(?u)\b\w\w+\b",
    "stopwords": "english",
}
#: Version of the terms ``Analyzer`` makes; recorded in meta.json, bumped on any change.
ANALYZER_VERSION = 1

_UNSPACED = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Bopomofo}\p{Hangul}\p{Thai}\p{Lao}" \
    r"\p{Khmer}\p{Myanmar}\p{Tibetan}\p{Yi}"
# Japanese writes its long-vowel mark and iteration marks with Common code points.
_CJK_EXTRA = "\u30fc\u3005\u3006\u3007\u3099-\u309c\uff70"
_JOINERS = "\u00ad\u200b-\u200d\u2060"
_WORD_PATTERN = (
    rf"(?V1)(?P<cjk>[\p{{Han}}\p{{Hiragana}}\p{{Katakana}}\p{{Bopomofo}}{_CJK_EXTRA}]+)"
    r"|(?P<hang>\p{Hangul}+)|(?P<thai>\p{Thai}+)|(?P<lao>\p{Lao}+)|(?P<khmer>\p{Khmer}+)"
    r"|(?P<mymr>\p{Myanmar}+)|(?P<tibt>\p{Tibetan}+)|(?P<yi>\p{Yi}+)"
    rf"|(?P<word>[[\p{{L}}\p{{M}}\p{{N}}]--[{_UNSPACED}]]+"
    rf"(?:[{_JOINERS}]+[[\p{{L}}\p{{M}}\p{{N}}]--[{_UNSPACED}]]+)*)"
)
_ENGLISH_SPLIT = re.compile(ENGLISH_TOKENIZER["token_pattern"]).findall


@lru_cache(maxsize=1)
def _word_regex() -> Any:
    # ``regex``, not ``re``: ``re``'s \w leaves out the vowel signs of Indic scripts
    # (Mc, Mn), so "हिन्दी" would fall apart, and ``re`` has no script classes.
    import regex

    return regex.compile(_WORD_PATTERN)


@lru_cache(maxsize=1)
def _cluster_regex() -> Any:
    import regex

    return regex.compile(r"\X")


@dataclass(frozen=True)
class Word:
    """A word of a text: ``text[start:end]``, and what kind of run it is.

    ``kind`` is ``word`` (a space-separated word, any script), ``cjk`` (a run of
    Chinese or Japanese characters), or ``hang``, ``thai``, ``lao``, ``khmer``,
    ``mymr``, ``tibt``, ``yi``: a run of that script, which holds one or more words.
    """

    start: int
    end: int
    text: str
    kind: str

    @property
    def spaced(self) -> bool:
        return self.kind == "word"


def words(text: str) -> list[Word]:
    """The words of ``text`` with their offsets, in order (see ``Word``)."""
    return [
        Word(m.start(), m.end(), m.group(), m.lastgroup or "word")
        for m in _word_regex().finditer(text)
    ]


def bigrams(run: str) -> list[str]:
    """Overlapping pairs of grapheme clusters of ``run``; one cluster alone is kept."""
    clusters = _cluster_regex().findall(run)
    if len(clusters) < 2:
        return clusters
    return [a + b for a, b in zip(clusters, clusters[1:])]


class Analyzer:
    """Text to terms for one language (see the module's docstring)."""

    def __init__(self, language: str) -> None:
        self.language = language
        code = base_language(language)
        self.english = code == ENGLISH
        self._stop = stopwords(code) if code != UNDETERMINED else frozenset()
        # Looked up per call: each thread has its own stemmer (stem.py).
        self._stems = code != UNDETERMINED and stemmer(code) is not None
        self._code = code

    def __call__(self, text: str) -> list[str]:
        if not text.isascii():
            # One form for every text (issue 51): a macOS copy of "Württemberg" (NFD) is
            # the same term as the composed one; composed text is left as it is.
            text = unicodedata.normalize("NFC", text)
        if self.english:
            return [t for t in _ENGLISH_SPLIT(text.lower()) if t not in self._stop]
        stem = stemmer(self._code) if self._stems else None
        out: list[str] = []
        pending: list[int] = []  # positions in ``out`` of words still to stem
        for w in words(fold(text, self._code)):
            if w.kind != "word":
                out.extend(bigrams(w.text))
                continue
            token = w.text
            if (len(token) < 2 and not token.isdigit()) or token in self._stop:
                continue
            if stem is not None and not token.isdigit():
                pending.append(len(out))
            out.append(token)
        if stem is not None and pending:
            for i, stemmed in zip(pending, stem([out[i] for i in pending])):
                out[i] = stemmed
        return out

    def describe(self) -> dict[str, Any]:
        """How this analyzer makes terms, as meta.json records it."""
        if self.english:
            return dict(ENGLISH_TOKENIZER)
        return {
            "version": ANALYZER_VERSION,
            "fold": "NFKC, casefold, Arabic letters and diacritics",
            "words": "letters, marks and digits; single letters dropped",
            "unspaced": "character bigrams (Han, kana, Hangul, Thai, Lao, Khmer, Burmese, ...)",
            "stopwords": stopword_source(self._code) if self._stop else None,
            "stemmer": f"snowball:{SNOWBALL[self._code]}" if self._stems else None,
        }


@lru_cache(maxsize=256)
def analyzer(language: str) -> Analyzer:
    """The (shared) analyzer of ``language``: a code, or ``und``/``und-Xxxx``."""
    return Analyzer(language)


def terms(text: str, language: str) -> list[str]:
    """The index terms of ``text`` written in ``language`` (see the module's docstring)."""
    return analyzer(language)(text)
