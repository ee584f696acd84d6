"""``check``: segment, retrieve, judge; plain results, no CLI needed.

Responses stream through in batches: the segments of a batch of responses are
embedded and searched together and handed to the judge as one batch (so a
judge can batch or parallelize), and results come out in input order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..judges import Judge
from ..types import (
    FACTUAL,
    NONFACTUAL,
    NOT_JUDGED,
    CheckedResponse,
    CitationCheck,
    Evidence,
    JudgeItem,
    ResponseInput,
    Segment,
    SegmentResult,
    Verdict,
)
from .citecheck import Marked, mark
from .ctxsearch import DEFAULT_CONTEXT_RETRIEVAL
from .retrieve import RetrievalOptions, retrieve, retrieve_vectors
from .segment import segment_response

if TYPE_CHECKING:
    import numpy as np

    from ..index import Index
    from .ctxsearch import ContextSearch, RecordPassages

QUERY_MODES = ("segment", "question+segment")
#: Measured (benchmarks/judge_design.py): with the question, recall@5 of a
#: case's own reference rises from 0.74 to 0.86 on FELM and from 0.77 to 0.99
#: on HaluEval, where answers are often a bare name. Without a question the
#: segment alone is the query either way.
DEFAULT_QUERY = "question+segment"


#: Where a segment's evidence comes from (``--evidence``): ``auto`` takes the
#: record's own contexts where it has them and the index otherwise; ``both``
#: adds the index's passages to the record's own.
EVIDENCE_MODES = ("auto", "contexts", "index", "both")
DEFAULT_EVIDENCE = "auto"


@dataclass(frozen=True)
class CheckOptions:
    retrieval: RetrievalOptions = RetrievalOptions()
    #: What a segment is searched with: the segment alone, or the question too.
    query: str = DEFAULT_QUERY
    #: Responses whose segments are retrieved and judged together.
    batch_size: int = 16
    #: Where evidence comes from: ``EVIDENCE_MODES``.
    evidence: str = DEFAULT_EVIDENCE
    #: A regular expression for citation markers, one group holding the references
    #: (``--citation-pattern``); None: ``[1]``, ``[1, 3]``, ``[1][3]``.
    citation_pattern: str | None = None
    #: How a record's own passages are ranked (``--contexts-retrieval``):
    #: ``ctxsearch.CONTEXT_RETRIEVAL_MODES``.
    contexts_retrieval: str = DEFAULT_CONTEXT_RETRIEVAL


def evidence_source(item: ResponseInput, mode: str, has_index: bool) -> tuple[str, str | None]:
    """What ``item``'s segments are checked against, and why they cannot be, if so.

    The source is ``contexts``, ``index``, ``both`` or ``none`` (an empty list of
    contexts: judged on no evidence). The problem, a message without the file
    and line, makes the line an error record.
    """
    has_contexts = item.contexts is not None
    if mode == "index" or (mode == "auto" and not has_contexts):
        if has_index:
            return "index", None
        return "index", (
            "the record has no contexts (fields tried: contexts, retrieved_contexts, "
            "retrieval_context) and there is no index to check it against"
        )
    if mode == "both":
        if not has_index:
            return "both", "--evidence both needs an index"
        return ("both" if item.contexts else "index"), None
    if not has_contexts:  # --evidence contexts
        return "contexts", (
            "--evidence contexts: the record has no contexts (fields tried: contexts, "
            "retrieved_contexts, retrieval_context; name another with --contexts-field)"
        )
    return ("contexts" if item.contexts else "none"), None


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
    index: Index | None,
    judge: Judge,
    options: CheckOptions = CheckOptions(),
    contexts: ContextSearch | None = None,
) -> Iterator[CheckedResponse]:
    """Check each response; yields one result per input, in input order.

    Evidence comes from ``index``, from each record's own contexts (searched with
    ``contexts``), or both, as ``options.evidence`` says; a record that has
    neither is yielded as an error.
    """
    it = iter(responses)
    while batch := list(islice(it, options.batch_size)):
        yield from check_batch(batch, index, judge, options, contexts)


def _segments(item: ResponseInput) -> tuple[Segment, ...]:
    if item.error is not None:
        return ()
    if item.segments is not None:
        return item.segments
    return tuple(segment_response(item.response))


def _mark(item: ResponseInput, pattern: str | None) -> Marked | None:
    try:
        return mark(item.response, item.contexts, pattern)
    except UsageError as exc:  # a --citation-pattern that did not finish on this answer
        raise UsageError(f"line {item.line}: {exc}") from None


def check_batch(
    batch: Sequence[ResponseInput],
    index: Index | None,
    judge: Judge,
    options: CheckOptions,
    contexts: ContextSearch | None = None,
) -> list[CheckedResponse]:
    batch = list(batch)
    sources: list[str] = []
    for n, item in enumerate(batch):
        source, problem = evidence_source(item, options.evidence, index is not None)
        if item.error is None and problem is None and source != "index" and contexts is None:
            problem = "records with contexts need a ContextSearch"
        if item.error is None and problem is not None:
            batch[n] = replace(item, error=f"line {item.line}: {problem}")
        sources.append(source)
    # Citation markers the answers carry: removed from what the judge reads; the
    # segments keep offsets into the response as written.
    marked = [
        _mark(item, options.citation_pattern)
        if item.error is None and item.segments is None else None
        for item in batch
    ]
    segmented = [m.segments if m is not None else _segments(item)
                 for item, m in zip(batch, marked)]
    queries = [
        build_query(seg, item.question, options.query)
        for item, segs in zip(batch, segmented)
        for seg in segs
    ]
    evidence, vectors, prepared = _evidence(batch, segmented, queries, sources, index, options,
                                            contexts)
    items = []
    at = 0
    for item, segs, m in zip(batch, segmented, marked):
        said = m.clean if m is not None else item.response
        for seg in segs:
            items.append(JudgeItem(seg, evidence[at], item.question, said))
            at += 1
    verdicts = judge.judge(items) if items else []
    if len(verdicts) != len(items):
        raise RuntimeError(
            f"judge {judge.name} returned {len(verdicts)} verdicts for {len(items)} segments"
        )
    citations = _citations(batch, segmented, sources, marked, items, verdicts, queries,
                           vectors, prepared, judge, contexts)
    out = []
    at = 0
    for item, segs, source in zip(batch, segmented, sources):
        if item.error is not None:
            out.append(CheckedResponse(item, (), "error"))
            continue
        results = tuple(
            SegmentResult(seg, verdicts[at + i], evidence[at + i], citations.get(at + i))
            for i, seg in enumerate(segs)
        )
        at += len(segs)
        label = response_label([r.verdict for r in results])
        out.append(CheckedResponse(item, results, label, source))
    return out


def _citations(
    batch: Sequence[ResponseInput],
    segmented: Sequence[tuple[Segment, ...]],
    sources: Sequence[str],
    marked: Sequence[Marked | None],
    items: Sequence[JudgeItem],
    verdicts: Sequence[Verdict],
    queries: Sequence[str],
    vectors: np.ndarray | None,
    prepared: dict[int, RecordPassages],
    judge: Judge,
    contexts: ContextSearch | None,
) -> dict[int, CitationCheck]:
    """The citation check of every segment of a record that cites its own contexts,
    by the segment's position in ``items``."""
    import numpy as np

    from .citecheck import check_citations
    from .ctxsearch import RecordPassages

    work = []
    where = []
    at = 0
    for n, (item, segs, m) in enumerate(zip(batch, segmented, marked)):
        checked = (m is not None and item.error is None and item.contexts is not None
                   and sources[n] in ("contexts", "both", "none"))
        for i in range(len(segs)):
            if checked and m is not None and item.contexts is not None:
                passages = prepared.get(n) or RecordPassages(
                    [], np.zeros((0, 1), dtype=np.float32),
                    contexts.mode if contexts is not None else "text",
                )
                vector = vectors[at] if vectors is not None else None
                work.append((items[at], verdicts[at], m.refs[i], item.contexts, passages,
                             (queries[at], vector)))
                where.append(at)
            at += 1
    if not work:
        return {}
    return dict(zip(where, check_citations(judge, work)))


def _evidence(
    batch: Sequence[ResponseInput],
    segmented: Sequence[tuple[Segment, ...]],
    queries: Sequence[str],
    sources: Sequence[str],
    index: Index | None,
    options: CheckOptions,
    contexts: ContextSearch | None,
) -> tuple[list[tuple[Evidence, ...]], np.ndarray | None, dict[int, RecordPassages]]:
    """Every segment's evidence, in order: its record's, the index's, or both; with the
    queries' vectors (when contexts were searched and embedded) and each record's
    passages."""
    import numpy as np

    if not queries:
        return [], None, {}
    owners = [n for n, segs in enumerate(segmented) for _ in segs]
    uses_index = [sources[n] in ("index", "both") for n in owners]
    uses_contexts = [sources[n] in ("contexts", "both") for n in owners]
    # One embedding of the queries serves both sources when they share the model
    # (the contexts are embedded with the index's model whenever there is one).
    vectors = None
    if any(uses_contexts) and contexts is not None:
        vectors = contexts.embed_queries(queries)
    found: list[tuple[Evidence, ...]] = [() for _ in queries]
    if any(uses_index) and index is not None:
        wanted = [i for i, used in enumerate(uses_index) if used]
        shared = vectors is not None and contexts is not None and (
            contexts.embedder is index.embedder()
        )
        asked = [queries[i] for i in wanted]
        if shared and vectors is not None:
            got = retrieve_vectors(index, asked, vectors[wanted], options.retrieval)
        else:  # the index embeds its queries itself, as it always has
            got = retrieve(index, asked, options.retrieval)
        for i, ev in zip(wanted, got):
            found[i] = ev
    if any(uses_contexts) and contexts is not None:
        from .ctxsearch import retrieve_in

        records = sorted({n for n, used in zip(owners, uses_contexts) if used})
        prepared = dict(zip(records, contexts.prepare([batch[n].contexts or ()
                                                       for n in records])))
        ranking = replace(options.retrieval, method=contexts.method)
        for n, passages in prepared.items():
            rows = [i for i, owner in enumerate(owners) if owner == n]
            own = retrieve_in(passages, [queries[i] for i in rows],
                              None if vectors is None else np.asarray(vectors[rows]), ranking)
            for i, ev in zip(rows, own):
                found[i] = ev + found[i]  # the record's own first, then the index's
        return found, vectors, prepared
    return found, vectors, {}
