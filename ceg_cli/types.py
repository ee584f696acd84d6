"""Plain data passed between the pipeline stages.

Every stage takes and returns these small frozen dataclasses, so each stage can
be used (and tested) on its own, from a notebook as well as from the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Document:
    """One document of a corpus, already reduced to plain text."""

    id: str
    title: str
    text: str
    url: str | None = None
    source: str = ""  # the path of the corpus file this document came from
    #: The language its source declares for it (a Wikipedia dump's, the wiki's own),
    #: a code ceg knows; None: the build detects it from the text (``--language auto``).
    language: str | None = None


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
    #: The document's language (a code), where the build knew it.
    language: str | None = None


@dataclass(frozen=True)
class Segment:
    """A piece of a response (a sentence, a list item) with offsets into it.

    ``split`` is None for a whole sentence or list item; a sentence past the
    segment bound (``ceg_cli.check.segment.MAX_SEGMENT_WEIGHT``) is cut into several
    segments, each saying how: ``clause`` (cut at clause marks) or ``length`` (one
    of its ends cut by length where no clause mark was near enough).
    """

    index: int
    start: int
    end: int
    text: str
    split: str | None = None


@dataclass(frozen=True)
class Context:
    """One of the passages a record brings as its own evidence (a RAG system's contexts).

    ``position`` is 1-based, as ``[n]`` markers count; ``id``, ``title`` and ``url``
    are the record's own, if it gave them.
    """

    position: int
    text: str
    id: str | None = None
    title: str | None = None
    url: str | None = None


@dataclass(frozen=True)
class Evidence:
    """A passage retrieved for a segment, with its cosine similarity to the query
    (None where none was computed: a context's passage ranked by BM25 alone).

    A passage of the index has ``context`` None and ``passage_id`` its row in the
    index. A passage cut from a record's own contexts has ``context``, the 1-based
    position of that context, ``passage_id`` its 0-based number among the record's
    passages, and ``start``/``end`` its character span inside the context's text.
    """

    passage_id: int
    doc_id: str
    title: str
    text: str
    similarity: float | None
    url: str | None = None
    context: int | None = None
    start: int | None = None
    end: int | None = None

    @property
    def key(self) -> tuple[int, int]:
        """What tells two passages of one segment's evidence apart, whatever their source."""
        return (0 if self.context is None else 1, self.passage_id)


@dataclass(frozen=True)
class JudgeItem:
    """What a judge decides on: one segment, its context and its evidence.

    ``setting`` is what the evidence is: ``index`` (passages of an index) or
    ``contexts`` (the record's own documents); a judge whose cut depends on it
    (``judges/cuts.py``) takes that setting's.
    """

    segment: Segment
    evidence: tuple[Evidence, ...]
    question: str | None = None
    response: str = ""
    #: The answer's language (a code, or ``und-Xxxx``: see ``ceg_cli.lang``); None: unknown.
    language: str | None = None
    setting: str = "index"


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


#: What a span says is unsupported (``Span.kind``): a number, a name, a content word,
#: a date (a year, or a day and month), or the whole segment where a judge cannot
#: point at words.
SPAN_KINDS = ("number", "name", "word", "date", "segment")


@dataclass(frozen=True)
class SpanEvidence:
    """What the evidence says where a span says otherwise: the value a passage gives
    (the '1844' near 'Springfield' where the segment has '1812') and which passage,
    ``passage`` being an index into the segment's evidence (``JudgeItem.evidence``)."""

    value: str
    passage: int


@dataclass(frozen=True)
class Span:
    """A stretch of a segment its judge found unsupported.

    In a ``Verdict`` the offsets are into the judged segment's text
    (``JudgeItem.segment.text[start:end] == text``); in a ``SegmentResult`` into the
    response as given (``response[start:end] == text``): ``ceg_cli.spans`` maps the one
    to the other.
    """

    start: int
    end: int
    text: str
    kind: str
    evidence: SpanEvidence | None = None


@dataclass(frozen=True)
class Verdict:
    """A judge's decision on one segment.

    ``score`` is the judge's confidence that the segment is supported, in
    [0, 1]; ``cited`` holds indices into ``JudgeItem.evidence`` of the passages
    that support it; ``reason`` says why, in words a reviewer reads; ``spans`` which
    words of the segment are unsupported.
    """

    label: str
    verdict: str
    score: float
    cited: tuple[int, ...] = ()
    reason: str = ""
    #: The unsupported stretches of the segment (offsets into the segment's text);
    #: empty on a supported segment.
    spans: tuple[Span, ...] = ()


@dataclass(frozen=True)
class ResponseInput:
    """One line of a responses file.

    ``error`` is set for a line that could not be read as a response: it is
    passed through to the output as an error record, never checked.
    ``warnings`` name what was changed to carry the line through (a field too
    large to carry, a number JSON cannot hold); the line is still checked.
    ``segments`` may be given (benchmarks come pre-segmented); otherwise the
    response is segmented with Punkt.
    """

    id: Any
    line: int
    response: str = ""
    question: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)
    segments: tuple[Segment, ...] | None = None
    error: str | None = None
    #: What reading the line changed (a field dropped or rewritten), one line each.
    warnings: tuple[str, ...] = ()
    #: The record's own evidence; None when it carries none (an empty tuple is an
    #: empty list: judged on no evidence).
    contexts: tuple[Context, ...] | None = None
    #: The input fields ceg read, by role (response, question, contexts).
    read: Mapping[str, str] = field(default_factory=dict)
    #: The response's language once decided (``--language``); None: not yet.
    language: str | None = None


#: What the citations of a sentence come to (``CitationCheck.status``).
CITE_SUPPORTED = "supported"  # its cited contexts together support it
CITE_UNSUPPORTED = "unsupported"  # they do not (or it cites only contexts that do not exist)
CITE_UNCITED = "uncited"  # it makes a claim and cites nothing
CITE_NO_CLAIM = "no_claim"  # it makes no claim: nothing to cite


@dataclass(frozen=True)
class CitationCheck:
    """The ``[n]`` markers a sentence carried, and whether the contexts they name support it.

    ``refs`` are the references as written; ``contexts`` the 1-based positions they
    name; ``unresolved`` the references that name no context (``[7]`` of three);
    ``irrelevant`` the cited contexts that support no part of the sentence (ALCE's
    citation precision).
    """

    refs: tuple[str, ...]
    contexts: tuple[int, ...]
    unresolved: tuple[str, ...]
    status: str
    irrelevant: tuple[int, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class SegmentResult:
    segment: Segment
    verdict: Verdict
    evidence: tuple[Evidence, ...]
    #: Set when the response carried citation markers and the record its contexts.
    citation: CitationCheck | None = None
    #: The verdict's spans, with offsets into the response as given.
    spans: tuple[Span, ...] = ()


@dataclass(frozen=True)
class CheckedResponse:
    input: ResponseInput
    segments: tuple[SegmentResult, ...] = ()
    #: factual, nonfactual, not_judged (some segment could not be judged) or error.
    label: str = FACTUAL
    #: What the segments were checked against: index, contexts, both, or none
    #: (the record's list of contexts was empty); an error record has none.
    evidence_source: str = "index"
    #: The language the response was read in (a code, or ``und-Xxxx``).
    language: str | None = None

    @property
    def error(self) -> str | None:
        return self.input.error
