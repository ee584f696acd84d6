"""Cut documents into passages of about N words at sentence or line ends.

The CEG paper retrieves from Wikipedia split into passages of about 100 words,
"cut at a period or a newline". Here a passage is a run of whole sentences
(``sentences.sentence_spans``, where a line break also ends a sentence) packed
greedily:

- a sentence joins the current passage while the passage stays within
  ``max_words`` words (whitespace-separated tokens);
- at a paragraph boundary (a blank line between two sentences) the passage is
  closed early once it holds at least half of ``max_words``: a passage that
  stays within one paragraph (one topic, one section) retrieves better than one
  that straddles two, and closing only past half keeps passages from getting
  tiny; a heading line thus tends to open the passage of its section;
- a single sentence longer than ``max_words`` (a run-on line, a flattened
  table) is the one case cut inside a sentence: at word boundaries, into the
  fewest pieces of at most ``max_words`` words, of near-equal size so that no
  piece is a stub.

Each chunk's text is exactly ``doc.text[start:end]``, with no surrounding
whitespace; a chunk never ends inside a sentence except in the case above.

A document's language (``language``; None is English) decides where its
sentences end (``sentences.sentence_spans``) and, for a language written
without spaces, how its size is counted: "100 words" means nothing in Chinese
or Thai, so there ``CHARS_PER_WORD`` characters (spaces left out) count as one
word. The figures are the ratio of characters to English words in XNLI's dev
premises, which are translations of the same sentences: 1.81 Chinese
characters and 5.19 Thai characters per English word (``benchmarks/
sentence_split.py``'s data). Japanese takes the Chinese figure and Lao, Khmer,
Burmese and Tibetan the Thai one, unmeasured. An over-long sentence in those
languages is cut between characters (never inside a grapheme cluster).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

from ceg_cli.lang.codes import AUTO, base_language
from ceg_cli.lang.detect import detect
from ceg_cli.sentences import sentence_spans
from ceg_cli.types import Chunk, Document

__all__ = ["CHARS_PER_WORD", "DEFAULT_MAX_WORDS", "chunk_document", "chunk_or_skip",
           "document_language", "iter_chunks"]

DEFAULT_MAX_WORDS = 100
#: Characters (spaces left out) that count as one word in languages written
#: without spaces between words (see the module's docstring); recorded in meta.json.
CHARS_PER_WORD = {
    **dict.fromkeys(("zh", "ja", "yue", "wuu", "ii"), 1.8),
    **dict.fromkeys(("th", "lo", "km", "my", "bo", "dz"), 5.2),
}

_WORD_RE = re.compile(r"\S+")
# One line break, as str.splitlines() counts them (CRLF is one break).
_LINE_BREAK_RE = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def chunk_document(
    doc: Document, max_words: int = DEFAULT_MAX_WORDS, language: str | None = None
) -> list[Chunk]:
    """Split ``doc`` into passages of at most ``max_words`` words of whole sentences.

    Ordinals are 0-based and consecutive; ``doc.text[c.start:c.end] == c.text``
    for every chunk; no chunk is empty. A sentence longer than ``max_words``
    words is split at word boundaries (the only case where a chunk starts or
    ends inside a sentence). A blank document gives no chunks. ``language``
    (a code; None is English) is the document's: see the module's docstring.
    """
    if max_words < 1:
        raise ValueError(f"max_words must be at least 1, got {max_words}")
    text = doc.text
    spans: list[tuple[int, int]] = []
    half = max(1, max_words // 2)
    ratio = CHARS_PER_WORD.get(base_language(language)) if language else None

    cur_start = cur_end = -1
    cur_words = 0
    prev_end = 0
    for start, end in sentence_spans(text, language):
        if ratio is None:
            words = len(text[start:end].split())
        else:
            words = math.ceil(_letters(text, start, end) / ratio)
        if words > max_words:
            if cur_words:
                spans.append((cur_start, cur_end))
                cur_words = 0
            if ratio is None:
                spans.extend(_split_long(text, start, end, words, max_words))
            else:
                spans.extend(_split_chars(text, start, end, -(-words // max_words)))
        elif cur_words and (
            cur_words + words > max_words
            or (cur_words >= half and _is_paragraph_break(text, prev_end, start))
        ):
            spans.append((cur_start, cur_end))
            cur_start, cur_end, cur_words = start, end, words
        elif cur_words:
            cur_end = end
            cur_words += words
        else:
            cur_start, cur_end, cur_words = start, end, words
        prev_end = end
    if cur_words:
        spans.append((cur_start, cur_end))

    return [
        Chunk(
            doc_id=doc.id,
            title=doc.title,
            ordinal=i,
            start=s,
            end=e,
            text=text[s:e],
            url=doc.url,
            source=doc.source,
        )
        for i, (s, e) in enumerate(spans)
    ]


def chunk_or_skip(
    doc: Document,
    max_words: int,
    on_warning: Callable[[str], None] | None = None,
    language: str | None = None,
) -> list[Chunk] | None:
    """``chunk_document``, or None (with a warning naming the document) if it cannot be split.

    ``language`` is the document's (a code), ``auto`` to detect it from its
    text, or None (English, and not recorded); each chunk records it.
    NLTK runs its regular expressions under a wall-clock time limit and raises
    ``TimeoutError`` past it; lines are split in blocks so this should not
    happen, but if one document still trips it, it costs only that document.
    """
    if language == AUTO:
        language = document_language(doc)
    try:
        chunks = chunk_document(doc, max_words, language)
        if language is None:
            return chunks
        return [replace(c, language=language) for c in chunks]
    except TimeoutError:
        if on_warning is not None:
            named = f"'{doc.id}'" if doc.title == doc.id else f"'{doc.id}' ('{doc.title}')"
            on_warning(
                f"{doc.source}: document {named} of {len(doc.text):,} characters: sentence "
                "splitting ran past NLTK's time limit; document skipped"
            )
        return None


def document_language(doc: Document) -> str:
    """The language of ``doc`` under ``--language auto``: the one its source declares
    (a Wikipedia dump's pages are in their wiki's language), else detected from its
    text's start."""
    return doc.language or detect(doc.text).language


def iter_chunks(
    docs: Iterable[Document], max_words: int = DEFAULT_MAX_WORDS, language: str | None = None
) -> Iterator[Chunk]:
    """Chunk a stream of documents lazily, one document in memory at a time."""
    for doc in docs:
        yield from chunk_document(doc, max_words, language)


def _is_paragraph_break(text: str, prev_end: int, start: int) -> bool:
    """Whether the whitespace between two sentences holds a blank line."""
    breaks = _LINE_BREAK_RE.findall(text, prev_end, start)
    return len(breaks) >= 2


def _split_long(
    text: str, start: int, end: int, n_words: int, max_words: int
) -> list[tuple[int, int]]:
    """Cut one over-long sentence at word boundaries into near-equal pieces."""
    bounds = [(m.start(), m.end()) for m in _WORD_RE.finditer(text, start, end)]
    n_pieces = -(-n_words // max_words)
    # The first `extra` pieces take one word more, so sizes differ by at most one.
    size, extra = divmod(len(bounds), n_pieces)
    pieces: list[tuple[int, int]] = []
    first = 0
    for i in range(n_pieces):
        last = first + size + (1 if i < extra else 0) - 1
        pieces.append((bounds[first][0], bounds[last][1]))
        first = last + 1
    return pieces


def _letters(text: str, start: int, end: int) -> int:
    """Characters of ``text[start:end]`` that are not whitespace."""
    return sum(1 for ch in text[start:end] if not ch.isspace())


def _split_chars(text: str, start: int, end: int, n_pieces: int) -> list[tuple[int, int]]:
    """Cut one over-long sentence written without spaces into ``n_pieces`` of
    near-equal size in characters, never before a combining mark."""
    total = _letters(text, start, end)
    pieces: list[tuple[int, int]] = []
    piece_start = start
    seen = 0
    target = 1
    for pos in range(start, end):
        if text[pos].isspace():
            continue
        if seen >= total * target / n_pieces and target < n_pieces and pos > piece_start \
                and not unicodedata.category(text[pos]).startswith("M"):
            pieces.append((piece_start, pos))
            piece_start = pos
            target += 1
        seen += 1
    pieces.append((piece_start, end))
    out = []
    for s, e in pieces:
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
    return out
