"""How BM25 reads text in each language: the terms an index is built and searched with.

An index whose passages are all English (or that an older ceg built: its
``meta.json`` records bm25s's tokenizer arguments, ``TOKENIZER``) is tokenized
and searched exactly as before languages: bm25s's own tokenizer, lower case,
words of two letters or more, Lucene's English stop words, no stemming.

Any other index records ``{"analyzer": "ceg_cli.lang", ...}``: each passage is
read by the analyzer of its document's language (``ceg_cli.lang.terms``: NFKC
and case folding, the language's stop words and Snowball stems, character
bigrams where words have no spaces, Arabic letters normalized), and a query by
the union of the analyzers of the index's languages (the ``QUERY_LANGUAGES``
with the most passages): a term of the query counts wherever a passage's own
analyzer would have made the same term. That is the mixed-corpus decision:
per-document analysis keeps each language's stems and stop words right (one
analyzer for all would have to drop the stop words of every language, and
German "die" or "war" are English content words); the union lets an English
query find a German passage by the names and numbers they share.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ...lang.codes import ENGLISH, base_language
from ...lang.detect import detect
from ...lang.normalize import fold
from ...lang.stopwords import stopwords
from ...lang.tokenize import ANALYZER_VERSION, ENGLISH_TOKENIZER, analyzer

__all__ = ["QUERY_LANGUAGES", "TOKENIZER", "corpus_terms", "corpus_tokens", "is_legacy",
           "query_tokens", "tokenizer_entry"]

#: bm25s's tokenizer arguments, as ceg recorded them before languages (English).
TOKENIZER = dict(ENGLISH_TOKENIZER)
ANALYZER = "ceg_cli.lang"
#: The most languages a query is read in (those of the most passages first).
QUERY_LANGUAGES = 8


def is_legacy(tokenizer: Mapping[str, Any] | None) -> bool:
    """Whether ``tokenizer`` (meta.json's ``lexical.tokenizer``) is bm25s's English one."""
    return tokenizer is None or tokenizer.get("analyzer") != ANALYZER


def tokenizer_entry(languages: Mapping[str, int]) -> dict[str, Any]:
    """What meta.json records for an index whose passages are in ``languages`` (counts)."""
    if set(languages) <= {ENGLISH}:
        return dict(TOKENIZER)
    ordered = dict(sorted(languages.items(), key=lambda kv: (-kv[1], kv[0])))
    return {
        "analyzer": ANALYZER,
        "version": ANALYZER_VERSION,
        "passages": "each by its document's language",
        "query": f"the union of the terms of the {QUERY_LANGUAGES} languages with most passages",
        "languages": ordered,
        "analyzers": {code: analyzer(code).describe() for code in ordered},
    }


def import_bm25s() -> Any:
    """bm25s, its logger left to the application as a library's should be.

    bm25s sets its own logger to DEBUG when it is imported, so its debug lines reached
    every handler there is: under pytest each failing test that checked an answer
    showed "DEBUG bm25s ... Building index from IDs objects". Its level goes back to
    NOTSET (the root logger's level decides); nothing else of logging is touched.
    """
    import bm25s

    logger = logging.getLogger("bm25s")
    if logger.level == logging.DEBUG:
        logger.setLevel(logging.NOTSET)
    return bm25s


def corpus_tokens(texts: Sequence[str], languages: Sequence[str]) -> Any:
    """``texts`` as bm25s's ``Tokenized`` (ids, vocabulary), each read in its language."""
    from bm25s.tokenization import Tokenized

    vocab: dict[str, int] = {}
    ids = []
    for text, language in zip(texts, languages):
        ids.append([vocab.setdefault(t, len(vocab)) for t in analyzer(language)(text)])
    return Tokenized(ids=ids, vocab=vocab)


def corpus_terms(texts: Sequence[str], languages: Sequence[str]) -> list[list[str]]:
    """The terms of each of ``texts``, each read in its language (``corpus_tokens``'s
    terms, as strings: what a tantivy lexical part holds)."""
    return [list(analyzer(language)(text)) for text, language in zip(texts, languages)]


def query_tokens(query: str, tokenizer: Mapping[str, Any] | None) -> list[str]:
    """The terms of ``query`` for an index that recorded ``tokenizer``."""
    if is_legacy(tokenizer):
        bm25s = import_bm25s()
        return list(bm25s.tokenize([query], **TOKENIZER, return_ids=False,
                                   show_progress=False)[0])
    assert tokenizer is not None
    return union_terms(query, list(tokenizer.get("languages", {}))[:QUERY_LANGUAGES])


def queries_tokens(queries: Sequence[str],
                   tokenizer: Mapping[str, Any] | None) -> list[list[str]]:
    """``query_tokens`` of each of ``queries``; an English (legacy) index's in one bm25s call."""
    if is_legacy(tokenizer):
        bm25s = import_bm25s()
        return [list(words) for words in bm25s.tokenize(list(queries), **TOKENIZER,
                                                         return_ids=False, show_progress=False)]
    return [query_tokens(query, tokenizer) for query in queries]


def union_terms(query: str, languages: Sequence[str]) -> list[str]:
    """The terms of ``query`` read in each of ``languages``, each term once, in order.

    The query's own stop words (of the language ``lang.detect`` names for it) are
    searched in no language: another language's analyzer keeps them, English "the"
    and "of" under Italian's, and they would count as rare terms of the few passages
    that language holds, so that an English passage taken for Italian, or an Italian
    one quoting an English title, came first for English queries on any subject.
    Names and numbers still find passages in the other languages.

    No empty term: Snowball stems a few words to nothing (Greek "Όταν", "when"), and
    bm25s gives the empty term of a vocabulary that lacks it an id past its matrix
    (``ceg check`` on Greek contexts failed with "maximum token ID ... higher than
    the number of tokens"); the index's own terms are left as they were built.
    """
    own = base_language(detect(query).language) if len(languages) > 1 else None
    others = _without_stop_words(query, own) if own else query
    out: dict[str, None] = {}
    for language in languages:
        text = query if base_language(language) == own else others
        for term in analyzer(language)(text):
            if term:
                out.setdefault(term)
    return list(out)


_WORD = re.compile(r"\w+")


def _without_stop_words(text: str, language: str) -> str:
    """``text`` with the stop words of ``language`` blanked out (offsets kept)."""
    stop = stopwords(language)
    if not stop:
        return text
    return _WORD.sub(lambda m: " " * len(m.group()) if fold(m.group(), language) in stop
                     else m.group(), text)


def language_counts(languages: Sequence[str | None]) -> Counter[str]:
    """Passages per language; a passage of unknown language was read as English."""
    return Counter(language or ENGLISH for language in languages)
