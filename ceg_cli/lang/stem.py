"""Snowball stemmers per language, through PyStemmer (MIT; Snowball's algorithms, BSD).

``stemmer(language)`` returns a function from a list of folded words to their
stems, or None where Snowball has no algorithm for the language. PyStemmer's
stemmers keep state and are not safe to share between threads: each thread gets
its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from ..errors import BackendError
from .codes import base_language

__all__ = ["SNOWBALL", "stemmer"]

#: Language -> PyStemmer's name for its Snowball algorithm.
SNOWBALL = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "cs": "czech",
    "da": "danish", "nl": "dutch", "en": "english", "eo": "esperanto", "et": "estonian",
    "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "hi": "hindi",
    "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian",
    "lt": "lithuanian", "ne": "nepali", "no": "norwegian", "nb": "norwegian",
    "nn": "norwegian", "fa": "persian", "pl": "polish", "pt": "portuguese",
    "ro": "romanian", "ru": "russian", "sr": "serbian", "st": "sesotho", "es": "spanish",
    "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}  # fmt: skip

_local = threading.local()


def stemmer(language: str) -> Callable[[Sequence[str]], list[str]] | None:
    """The Snowball stemmer of ``language`` (words in, stems out), or None.

    PyStemmer is one of ceg's dependencies: without it this raises
    ``BackendError`` rather than quietly comparing unstemmed words.
    """
    name = SNOWBALL.get(base_language(language))
    if name is None:
        return None
    cache: dict[str, object] = getattr(_local, "stemmers", None) or {}
    _local.stemmers = cache
    if name not in cache:
        try:
            import Stemmer
        except ImportError as exc:
            raise BackendError(
                "stemming needs PyStemmer (pip install PyStemmer), one of ceg's dependencies"
            ) from exc
        cache[name] = Stemmer.Stemmer(name) if name in Stemmer.algorithms() else None
    found = cache[name]
    if found is None:
        return None
    return found.stemWords  # type: ignore[attr-defined,no-any-return]
