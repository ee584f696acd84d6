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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from ceg_cli.sentences import sentence_spans
from ceg_cli.types import Chunk, Document

__all__ = ["DEFAULT_MAX_WORDS", "chunk_document", "chunk_or_skip", "iter_chunks"]

DEFAULT_MAX_WORDS = 100

_WORD_RE = re.compile(r"\S+")
# One line break, as str.splitlines() counts them (CRLF is one break).
_LINE_BREAK_RE = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def chunk_document(doc: Document, max_words: int = DEFAULT_MAX_WORDS) -> list[Chunk]:
    """Split ``doc`` into passages of at most ``max_words`` words of whole sentences.

    Ordinals are 0-based and consecutive; ``doc.text[c.start:c.end] == c.text``
    for every chunk; no chunk is empty. A sentence longer than ``max_words``
    words is split at word boundaries (the only case where a chunk starts or
    ends inside a sentence). A blank document gives no chunks.
    """
    if max_words < 1:
        raise ValueError(f"max_words must be at least 1, got {max_words}")
    text = doc.text
    spans: list[tuple[int, int]] = []
    half = max(1, max_words // 2)

    cur_start = cur_end = -1
    cur_words = 0
    prev_end = 0
    for start, end in sentence_spans(text):
        words = len(text[start:end].split())
        if words > max_words:
            if cur_words:
                spans.append((cur_start, cur_end))
                cur_words = 0
            spans.extend(_split_long(text, start, end, words, max_words))
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
    doc: Document, max_words: int, on_warning: Callable[[str], None] | None = None
) -> list[Chunk] | None:
    """``chunk_document``, or None (with a warning naming the document) if it cannot be split.

    NLTK runs its regular expressions under a wall-clock time limit and raises
    ``TimeoutError`` past it; lines are split in blocks so this should not
    happen, but if one document still trips it, it costs only that document.
    """
    try:
        return chunk_document(doc, max_words)
    except TimeoutError:
        if on_warning is not None:
            named = f"'{doc.id}'" if doc.title == doc.id else f"'{doc.id}' ('{doc.title}')"
            on_warning(
                f"{doc.source}: document {named} of {len(doc.text):,} characters: sentence "
                "splitting ran past NLTK's time limit; document skipped"
            )
        return None


def iter_chunks(docs: Iterable[Document], max_words: int = DEFAULT_MAX_WORDS) -> Iterator[Chunk]:
    """Chunk a stream of documents lazily, one document in memory at a time."""
    for doc in docs:
        yield from chunk_document(doc, max_words)


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
