"""Languages: codes, detection, scripts, normalization, stop words, stems, words, numbers.

The ground floor every stage that reads text in a language builds on (sentence
splitting, chunking, BM25, the judges). Importing it is light: the detector's
model, the stemmers, the ``regex`` module and the stop-word lists load on first use.

- ``check_language("DE") == "de"``; ``detect(text).language``;
- ``dominant_script(text)`` (ISO 15924: ``Latn``, ``Hani``, ``Arab``, ...);
- ``fold(text, language)``: NFKC, case folding, Arabic letter variants;
- ``stopwords(language)``, ``stemmer(language)``;
- ``words(text)`` with offsets in any script; ``terms(text, language)`` for BM25
  and comparison (English as ceg always tokenized it);
- ``numbers(text, language)``: each number's offsets and value, in any digits.
"""

from __future__ import annotations

from .codes import (
    AUTO,
    ENGLISH,
    LANGUAGES,
    UNDETERMINED,
    base_language,
    check_language,
    is_known,
    language_name,
)
from .detect import Detection, detect, script_fallback
from .normalize import fold, normalize_arabic
from .numbers import Number, number_key, numbers
from .script import BIGRAM_SCRIPTS, UNSPACED_SCRIPTS, char_script, dominant_script
from .stem import stemmer
from .stopwords import stopwords
from .support import PUNKT_LANGUAGES, UNSPACED_LANGUAGES, support, supported_languages
from .tokenize import ENGLISH_TOKENIZER, Analyzer, Word, analyzer, terms, words

__all__ = [
    "AUTO",
    "BIGRAM_SCRIPTS",
    "ENGLISH",
    "ENGLISH_TOKENIZER",
    "LANGUAGES",
    "PUNKT_LANGUAGES",
    "UNDETERMINED",
    "UNSPACED_LANGUAGES",
    "UNSPACED_SCRIPTS",
    "Analyzer",
    "Detection",
    "Number",
    "Word",
    "analyzer",
    "base_language",
    "char_script",
    "check_language",
    "detect",
    "dominant_script",
    "fold",
    "is_known",
    "language_name",
    "normalize_arabic",
    "number_key",
    "numbers",
    "script_fallback",
    "stemmer",
    "stopwords",
    "support",
    "supported_languages",
    "terms",
    "words",
]
