"""The evidence window: the sentences of the evidence most related to a segment.

A cross-encoder reads a bounded number of tokens, and a retrieved passage (or
a training document) holds far more than one fact. The verifier therefore
reads the segment against a *window*: the sentences of the evidence that share
the most of the segment's content words (its names and numbers count double),
up to a word budget, kept in the order they appear. The same selection is made
at training time (from a training pair's evidence text) and at check time
(from the retrieved passages), so the model sees at check time what it learnt
from.

Pure Python (Punkt via ``ceg_cli.sentences``); no model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...sentences import sentence_spans
from ..offline.offline import is_content, specifics, tokenize

__all__ = ["DEFAULT_WINDOW_WORDS", "Window", "select_window"]

#: Words of evidence in a window: with a segment of up to ~40 words this fits
#: the verifier's 160-token input (MiniLM's word pieces run ~1.3 per word).
DEFAULT_WINDOW_WORDS = 90
#: A sentence longer than this many words is cut into pieces of this size, so
#: one run-on table row cannot fill the window on its own.
_MAX_SENTENCE_WORDS = 60


@dataclass(frozen=True)
class Window:
    """Sentences chosen from the evidence, in evidence order."""

    text: str  # the chosen sentences joined with spaces
    sources: tuple[int, ...]  # for each chosen sentence, the index of its passage
    overlap: float  # share of the segment's content keys found in the window


def _pieces(text: str) -> list[str]:
    out = []
    for start, end in sentence_spans(text):
        words = text[start:end].split()
        for i in range(0, len(words), _MAX_SENTENCE_WORDS):
            out.append(" ".join(words[i : i + _MAX_SENTENCE_WORDS]))
    return out


def select_window(
    segment: str,
    passages: Sequence[str],
    *,
    max_words: int = DEFAULT_WINDOW_WORDS,
    titles: Sequence[str] | None = None,
) -> Window:
    """The sentences of ``passages`` that best cover ``segment``, within ``max_words``.

    Sentences are scored by the segment's content keys they contain (the keys
    of its numbers and names weigh 2), greedily: each pick counts only keys
    not yet covered, so the window gathers the different facts a segment
    combines rather than five copies of one. Ties keep the earlier sentence
    (retrieval rank first). A title, when given, is prefixed to the first
    sentence chosen from its passage ("Aristotle: He was born ..."), as the
    title was part of what was embedded.
    """
    seg_tokens = tokenize(segment)
    weights: dict[str, float] = {t.key: 1.0 for t in seg_tokens if is_content(t)}
    for sp in specifics(segment, seg_tokens):
        for k in sp.keys:
            weights[k] = 2.0
    sentences = [(p, sentence) for p, text in enumerate(passages) for sentence in _pieces(text)]
    # (passage, position in the evidence, text, content keys)
    candidates = [
        (p, o, sentence, frozenset(t.key for t in tokenize(sentence) if is_content(t)))
        for o, (p, sentence) in enumerate(sentences)
    ]
    todo = dict(weights)
    chosen: list[tuple[int, int, str]] = []
    used = 0
    remaining = list(candidates)
    while remaining and used < max_words:
        best_i, best_gain = -1, 0.0
        for i, (_, _, _, keys) in enumerate(remaining):
            gain = sum(w for k, w in todo.items() if k in keys)
            if gain > best_gain:
                best_i, best_gain = i, gain
        if best_i < 0:
            break
        p, o, sentence, keys = remaining.pop(best_i)
        n = len(sentence.split())
        if used and used + n > max_words:
            continue  # too long for what is left; a shorter one may still fit
        chosen.append((p, o, sentence))
        used += n
        for k in keys:
            todo.pop(k, None)
    if not chosen and candidates:  # nothing shared: the first sentences, as retrieved
        for p, o, sentence, _ in candidates:
            n = len(sentence.split())
            if used and used + n > max_words:
                break
            chosen.append((p, o, sentence))
            used += n
    chosen.sort(key=lambda c: c[1])
    parts = []
    titled: set[int] = set()
    for p, _, sentence in chosen:
        title = titles[p] if titles and p < len(titles) else ""
        if title and p not in titled and title.lower() not in sentence.lower():
            sentence = f"{title}: {sentence}"
        titled.add(p)
        parts.append(sentence)
    covered = sum(w for k, w in weights.items() if k not in todo)
    total = sum(weights.values())
    return Window(
        " ".join(parts),
        tuple(p for p, _, _ in chosen),
        round(covered / total, 4) if total else 1.0,
    )
