"""Stop words per language, from lists that ship inside registry packages.

Two sources, both installed with ceg and read from disk, never downloaded:

- **bm25s** (MIT), the lists ceg's BM25 index already used for English: English
  (Lucene's 33 words) and the Snowball lists, by way of NLTK, for Danish, Dutch,
  French, German, Italian, Norwegian, Portuguese, Russian, Spanish, Swedish and
  Turkish; also Chinese and Korean. Its module is read as a file, so the words
  come without importing bm25s (numpy, scipy).
- **stop-words** (``pip install stop-words``, BSD-3-Clause), for the languages
  bm25s has no list for: Arabic, Bulgarian, Catalan, Czech, Finnish, Greek,
  Gujarati, Hebrew, Hindi, Hungarian, Indonesian, Japanese, Malay, Persian,
  Polish, Romanian, Slovak, Ukrainian, Vietnamese.

Words are folded (``normalize.fold``) as the text they are matched against.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import lru_cache
from pathlib import Path

from ..errors import BackendError
from .codes import base_language
from .normalize import fold

__all__ = ["STOPWORD_SOURCES", "stopword_source", "stopwords"]

#: Language -> the name of its list in ``bm25s/stopwords.py``.
_BM25S_LISTS = {
    "en": "STOPWORDS_EN", "da": "STOPWORDS_DANISH", "nl": "STOPWORDS_DUTCH",
    "fr": "STOPWORDS_FRENCH", "de": "STOPWORDS_GERMAN", "it": "STOPWORDS_ITALIAN",
    "no": "STOPWORDS_NORWEGIAN", "pt": "STOPWORDS_PORTUGUESE", "ru": "STOPWORDS_RUSSIAN",
    "es": "STOPWORDS_SPANISH", "sv": "STOPWORDS_SWEDISH", "tr": "STOPWORDS_TURKISH",
    "zh": "STOPWORDS_CHINESE", "ko": "STOPWORDS_KOREAN",
}  # fmt: skip
#: Language -> the file name in the ``stop-words`` package.
_STOP_WORDS_FILES = {
    "ar": "arabic", "bg": "bulgarian", "ca": "catalan", "cs": "czech", "fi": "finnish",
    "el": "greek", "gu": "gujarati", "he": "hebrew", "hi": "hindi", "hu": "hungarian",
    "id": "indonesian", "ja": "japanese", "ms": "malaysian", "fa": "persian", "pl": "polish",
    "ro": "romanian", "sk": "slovak", "uk": "ukrainian", "vi": "vietnamese",
}  # fmt: skip
#: Norwegian's written standards share one list (and one stemmer).
_ALIASES = {"nb": "no", "nn": "no"}

#: Where each language's stop words come from.
STOPWORD_SOURCES: dict[str, str] = {
    **{code: "bm25s (MIT)" for code in _BM25S_LISTS},
    **{code: "stop-words (BSD-3-Clause)" for code in _STOP_WORDS_FILES},
}


def stopword_source(language: str) -> str | None:
    """Which package the stop words of ``language`` come from; None if it has none."""
    code = base_language(language)
    return STOPWORD_SOURCES.get(_ALIASES.get(code, code))


@lru_cache(maxsize=256)
def stopwords(language: str) -> frozenset[str]:
    """The stop words of ``language``, folded; empty for a language with no list."""
    code = base_language(language)
    code = _ALIASES.get(code, code)
    if code in _BM25S_LISTS:
        words: list[str] = list(_bm25s_lists()[_BM25S_LISTS[code]])
    elif code in _STOP_WORDS_FILES:
        words = _stop_words_file(_STOP_WORDS_FILES[code])
    else:
        return frozenset()
    return frozenset(fold(w, code) for w in words if w.strip())


@lru_cache(maxsize=1)
def _bm25s_lists() -> dict[str, tuple[str, ...]]:
    """The tuples of ``bm25s/stopwords.py``, read as literals without importing bm25s."""
    spec = importlib.util.find_spec("bm25s")
    if spec is None or not spec.submodule_search_locations:
        raise BackendError("stop words need bm25s (pip install bm25s), one of ceg's dependencies")
    path = Path(next(iter(spec.submodule_search_locations))) / "stopwords.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out: dict[str, tuple[str, ...]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id.startswith("STOPWORDS_"):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    continue
                out[target.id] = tuple(str(w) for w in value)
    return out


def _stop_words_file(name: str) -> list[str]:
    try:
        import stop_words
    except ImportError as exc:
        raise BackendError(
            "stop words for this language need the package stop-words (pip install "
            "stop-words), one of ceg's dependencies"
        ) from exc
    return list(stop_words.get_stop_words(name))
