"""``check``: segment, retrieve, judge; plain results, no CLI needed.

Responses stream through in batches: the segments of a batch of responses are
embedded and searched together and handed to the judge as one batch (so a
judge can batch or parallelize), and results come out in input order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ..index import Index
from ..judges import Judge
from ..types import (
    FACTUAL,
    NONFACTUAL,
    NOT_JUDGED,
    Evidence,
    JudgeItem,
    Segment,
    Verdict,
)
from .retrieve import RetrievalOptions, retrieve
from .segment import segment_response

QUERY_MODES = ("segment", "question+segment")
#: Measured (benchmarks/judge_design.py): with the question, recall@5 of a
#: case's own reference rises from 0.74 to 0.86 on FELM and from 0.77 to 0.99
#: on HaluEval, where answers are often a bare name. Without a question the
#: segment alone is the query either way.
DEFAULT_QUERY = "question+segment"


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


@dataclass(frozen=True)
class SegmentResult:
    segment: Segment
    verdict: Verdict
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class CheckedResponse:
    input: ResponseInput
    segments: tuple[SegmentResult, ...] = ()
    #: factual, nonfactual, not_judged (some segment could not be judged) or error.
    label: str = FACTUAL

    @property
    def error(self) -> str | None:
        return self.input.error


@dataclass(frozen=True)
class CheckOptions:
    retrieval: RetrievalOptions = RetrievalOptions()
    #: What a segment is searched with: the segment alone, or the question too.
    query: str = DEFAULT_QUERY
    #: Responses whose segments are retrieved and judged together.
    batch_size: int = 16


def response_label(verdicts: Sequence[Verdict]) -> str:
    labels = {v.label for v in verdicts}
    if NONFACTUAL in labels:
        return NONFACTUAL
    # not_judged, or a label no judge should give: never read as factual.
    if labels - {FACTUAL}:
        return NOT_JUDGED
    return FACTUAL


def build_query(segment: Segment, question: str | None, mode: str) -> str:
    if mode == "question+segment" and question:
        return f"{question} {segment.text}"
    return segment.text


def check(
    responses: Iterable[ResponseInput],
    index: Index,
    judge: Judge,
    options: CheckOptions = CheckOptions(),
) -> Iterator[CheckedResponse]:
    """Check each response; yields one result per input, in input order."""
    it = iter(responses)
    while batch := list(islice(it, options.batch_size)):
        yield from check_batch(batch, index, judge, options)


def check_batch(
    batch: Sequence[ResponseInput], index: Index, judge: Judge, options: CheckOptions
) -> list[CheckedResponse]:
    segmented: list[tuple[Segment, ...]] = []
    for item in batch:
        if item.error is not None:
            segmented.append(())
        elif item.segments is not None:
            segmented.append(item.segments)
        else:
            segmented.append(tuple(segment_response(item.response)))
    queries = [
        build_query(seg, item.question, options.query)
        for item, segs in zip(batch, segmented)
        for seg in segs
    ]
    evidence = retrieve(index, queries, options.retrieval)
    items = []
    at = 0
    for item, segs in zip(batch, segmented):
        for seg in segs:
            items.append(JudgeItem(seg, evidence[at], item.question, item.response))
            at += 1
    verdicts = judge.judge(items) if items else []
    if len(verdicts) != len(items):
        raise RuntimeError(
            f"judge {judge.name} returned {len(verdicts)} verdicts for {len(items)} segments"
        )
    out = []
    at = 0
    for item, segs in zip(batch, segmented):
        if item.error is not None:
            out.append(CheckedResponse(item, (), "error"))
            continue
        results = tuple(
            SegmentResult(seg, verdicts[at + i], evidence[at + i]) for i, seg in enumerate(segs)
        )
        at += len(segs)
        out.append(CheckedResponse(item, results, response_label([r.verdict for r in results])))
    return out
