"""Verify the citations an answer already carries: ALCE's citation recall and precision.

An answer that cites its contexts (``Paris is in France [1].``) is checked twice:
as any answer (each segment against its evidence, the markers removed from what
the judge reads), and for its citations, with the same judge:

- **recall**: a sentence is supported by its citations when the contexts it
  cites, together, support it (the judge reads the passages of those contexts
  only, best first, at most ``CITED_PASSAGES``);
- **precision**: a cited context is irrelevant when it does not support the
  sentence alone and the other cited contexts support it without it (ALCE's
  rule, run only where the sentence has several citations that together
  support it); every citation of a sentence its citations do not support, and
  every reference that names no context (``[7]`` of three), counts as imprecise.

This follows ALCE (princeton-nlp/ALCE ``eval.py``, ``compute_autoais``) with two
differences, both for sentences ALCE would blame for nothing they say: a
sentence the judge finds no claim in is left out of recall (ALCE counts every
sentence), and its markers out of precision. A sentence with a claim and no
citation counts as unsupported in recall, as in ALCE, and is reported as
``uncited``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from ..types import (
    CITE_NO_CLAIM,
    CITE_SUPPORTED,
    CITE_UNCITED,
    CITE_UNSUPPORTED,
    FACTUAL,
    NO_CLAIM,
    CitationCheck,
    Context,
    Evidence,
    JudgeItem,
    Segment,
    Verdict,
)
from .markers import (
    Marker,
    attach,
    compile_pattern,
    find_markers,
    map_span,
    resolve,
    strip_markers,
)
from .segment import segments_by_sentence

if TYPE_CHECKING:
    import re

    import numpy as np

    from ..judges import Judge
    from .ctxsearch import RecordPassages

    #: A sentence's query: the text, and its vector where the passages were embedded.
    Query = tuple[str, np.ndarray | None]

#: Passages of the cited contexts the judge reads for one sentence, best first.
CITED_PASSAGES = 10


@dataclass(frozen=True)
class Marked:
    """A response whose citation markers were found: what the judge reads, and the refs.

    ``segments`` are segments of the text without markers (``text``), with offsets
    into the original response; ``refs`` holds each segment's references as written.
    """

    clean: str
    segments: tuple[Segment, ...]
    refs: tuple[tuple[str, ...], ...]


@lru_cache(maxsize=8)
def _pattern(pattern: str | None) -> re.Pattern[str]:
    return compile_pattern(pattern)


def mark(
    response: str,
    contexts: Sequence[Context] | None,
    pattern: str | None = None,
    references: Sequence[tuple[int, int]] = (),
    language: str | None = None,
) -> Marked | None:
    """The response's markers found and removed, or None when it carries none; groups in
    the spans ``references`` (its references list) are no markers (``language``: the
    response's, for its sentences)."""
    ids = [c.id for c in contexts or () if c.id]
    markers = find_markers(response, _pattern(pattern), ids, references)
    if not markers:
        return None
    clean, offsets = strip_markers(response, markers)
    segments = []
    pieces, sentences = segments_by_sentence(clean, language)
    for s in pieces:
        start, end = map_span(offsets, s.start, s.end)
        segments.append(Segment(s.index, start, end, s.text, s.split))
    per_segment = attach(markers, [(s.start, s.end) for s in segments], len(response))
    # A sentence past the segment bound is cut into pieces; its markers (at its end,
    # as a rule) cite every piece of it, not only the last (issue 60 item 5).
    per_sentence: dict[int, list[Marker]] = {}
    for n, found in zip(sentences, per_segment):
        per_sentence.setdefault(n, []).extend(found)
    refs = tuple(
        tuple(dict.fromkeys(ref for m in per_sentence[n] for ref in m.refs)) for n in sentences
    )
    return Marked(clean, tuple(segments), refs)


def resolved(refs: Sequence[str], contexts: Sequence[Context]) -> tuple[list[int], list[str]]:
    """The 1-based positions ``refs`` name (each once), and the refs that name none."""
    ids = [c.id for c in contexts]
    positions: list[int] = []
    unresolved: list[str] = []
    for ref in refs:
        named = resolve(ref, len(contexts), ids)
        if not named:
            unresolved.append(ref)
        positions.extend(at + 1 for at in named if at + 1 not in positions)
    return positions, unresolved


def _evidence_of(
    passages: RecordPassages, query: Query, cited: Sequence[int]
) -> tuple[Evidence, ...]:
    """The passages of contexts ``cited``, best first (by cosine where the passages
    were embedded, else BM25), at most ``CITED_PASSAGES``."""
    ids = [i for i, (ctx, _) in enumerate(passages.passages) if ctx.position in cited]
    text, vector = query
    return tuple(passages.evidence(h)
                 for h in passages.ranked(text, vector, ids, CITED_PASSAGES))


def _supports(verdict: Verdict) -> bool:
    return verdict.label == FACTUAL and verdict.verdict != NO_CLAIM


@dataclass
class _Sentence:
    item: JudgeItem
    query: Query
    passages: RecordPassages
    refs: tuple[str, ...]
    cited: list[int]
    unresolved: list[str]
    joint: bool = False
    alone: dict[int, bool] | None = None
    without: dict[int, bool] | None = None


#: One sentence to check: its judge item, its verdict, its refs, its record's contexts
#: and their passages, and its query (the text, and its vector where there is one).
Work = tuple[JudgeItem, Verdict, tuple[str, ...], Sequence[Context], "RecordPassages",
             "Query"]


def check_citations(judge: Judge, work: Sequence[Work]) -> list[CitationCheck]:
    """The citation check of each sentence of ``work``, in order."""
    out: list[CitationCheck | None] = [None] * len(work)
    open_: dict[int, _Sentence] = {}
    for n, (item, verdict, refs, contexts, passages, query) in enumerate(work):
        cited, unresolved = resolved(refs, contexts)
        if verdict.verdict == NO_CLAIM:
            out[n] = CitationCheck(refs, tuple(cited), tuple(unresolved), CITE_NO_CLAIM,
                                   reason="no claim to cite for")
        elif not refs:
            out[n] = CitationCheck((), (), (), CITE_UNCITED,
                                   reason="makes a claim and cites no context")
        elif not cited:
            out[n] = CitationCheck(
                refs, (), tuple(unresolved), CITE_UNSUPPORTED, (),
                f"cites {_refs(unresolved)}, naming no context (the record has "
                f"{_count(len(contexts), 'context')})" + _footnote_hint(unresolved),
            )
        else:
            open_[n] = _Sentence(item, query, passages, refs, cited, unresolved)
    # Round 1: the cited contexts together, and each alone where there are several.
    jobs: list[tuple[int, str, int, list[int]]] = []
    for n, s in open_.items():
        jobs.append((n, "joint", 0, s.cited))
        if len(s.cited) > 1:
            jobs.extend((n, "alone", c, [c]) for c in s.cited)
    _run(judge, open_, jobs)
    # Round 2: without each context that does not support the sentence alone.
    jobs = [
        (n, "without", c, [d for d in s.cited if d != c])
        for n, s in open_.items()
        if s.joint and s.alone is not None
        for c in s.cited
        if not s.alone[c]
    ]
    _run(judge, open_, jobs)
    for n, s in open_.items():
        out[n] = _verdict_of(s)
    return [c for c in out if c is not None]


def _run(
    judge: Judge, open_: dict[int, _Sentence], jobs: list[tuple[int, str, int, list[int]]]
) -> None:
    if not jobs:
        return
    items = []
    for n, _, _, cited in jobs:
        s = open_[n]
        evidence = _evidence_of(s.passages, s.query, cited)
        # Judged against the contexts it cites: the contexts setting's cut.
        items.append(JudgeItem(s.item.segment, evidence, s.item.question, s.item.response,
                               s.item.language, setting="contexts"))
    verdicts = judge.judge(items)
    for (n, kind, context, _), verdict in zip(jobs, verdicts):
        s = open_[n]
        if kind == "joint":
            s.joint = _supports(verdict)
        elif kind == "alone":
            s.alone = (s.alone or {}) | {context: _supports(verdict)}
        else:
            s.without = (s.without or {}) | {context: _supports(verdict)}


def _verdict_of(s: _Sentence) -> CitationCheck:
    if not s.joint:
        return CitationCheck(
            s.refs, tuple(s.cited), tuple(s.unresolved), CITE_UNSUPPORTED, tuple(s.cited),
            f"{_contexts(s.cited)} {_verb(s.cited, 'does', 'do')} not support it"
            + _naming_none(s.unresolved),
        )
    irrelevant = tuple(
        c for c in s.cited
        if s.alone is not None and not s.alone[c] and (s.without or {}).get(c, False)
    )
    reason = f"supported by {_contexts(s.cited)}"
    if irrelevant:
        reason += f"; {_contexts(irrelevant)} {_verb(irrelevant, 'adds', 'add')} nothing to it"
    reason += _naming_none(s.unresolved)
    return CitationCheck(s.refs, tuple(s.cited), tuple(s.unresolved), CITE_SUPPORTED,
                         irrelevant, reason)


def _refs(refs: Sequence[str]) -> str:
    return "".join(f"[{r}]" for r in refs)


def _footnote_hint(unresolved: Sequence[str]) -> str:
    """For ``[^1]`` read by the default pattern: how to read footnotes as context numbers."""
    if not any(r.startswith("^") for r in unresolved):
        return ""
    return r"; to read [^n] as context n, pass --citation-pattern '\[\^(\d+)\]'"


def _naming_none(unresolved: Sequence[str]) -> str:
    """"; [7] names no context", "; [7][8] name no context", or nothing."""
    if not unresolved:
        return ""
    return f"; {_refs(unresolved)} {_verb(unresolved, 'names', 'name')} no context"


def _verb(things: Sequence[object], one: str, several: str) -> str:
    return one if len(things) == 1 else several


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _contexts(positions: Sequence[int]) -> str:
    """"context 2", "contexts 1 and 3", "contexts 1, 2 and 3"."""
    if len(positions) == 1:
        return f"context {positions[0]}"
    shown = [str(p) for p in positions]
    return f"contexts {', '.join(shown[:-1])} and {shown[-1]}"
