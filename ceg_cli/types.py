"""Plain data passed between the pipeline stages.

Every stage takes and returns these small frozen dataclasses, so each stage can
be used (and tested) on its own, from a notebook as well as from the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Document:
    """One document of a corpus, already reduced to plain text."""

    id: str
    title: str
    text: str
    url: str | None = None
    source: str = ""  # the path of the corpus file this document came from


@dataclass(frozen=True)
class Chunk:
    """A passage of a document: about N words, cut at sentence or line ends.

    ``start``/``end`` are character offsets into ``Document.text``, so
    ``doc.text[start:end] == text``.
    """

    doc_id: str
    title: str
    ordinal: int
    start: int
    end: int
    text: str
    url: str | None = None
    source: str = ""


@dataclass(frozen=True)
class Segment:
    """A piece of a response (a sentence, a list item) with offsets into it."""

    index: int
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Evidence:
    """A passage retrieved for a segment, with its cosine similarity to the query."""

    passage_id: int
    doc_id: str
    title: str
    text: str
    similarity: float
    url: str | None = None


@dataclass(frozen=True)
class JudgeItem:
    """What a judge decides on: one segment, its context and its evidence."""

    segment: Segment
    evidence: tuple[Evidence, ...]
    question: str | None = None
    response: str = ""


#: Segment labels. ``not_judged`` marks a segment whose judge failed: it is
#: never counted as factual.
FACTUAL = "factual"
NONFACTUAL = "nonfactual"
NOT_JUDGED = "not_judged"

#: Why a segment got its label.
SUPPORTED = "supported"
CONTRADICTED = "contradicted"
NOT_ENOUGH_EVIDENCE = "not_enough_evidence"
NO_CLAIM = "no_claim"
JUDGE_ERROR = "judge_error"


@dataclass(frozen=True)
class Verdict:
    """A judge's decision on one segment.

    ``score`` is the judge's confidence that the segment is supported, in
    [0, 1]; ``cited`` holds indices into ``JudgeItem.evidence`` of the passages
    that support it; ``reason`` says why, in words a reviewer reads.
    """

    label: str
    verdict: str
    score: float
    cited: tuple[int, ...] = ()
    reason: str = ""
