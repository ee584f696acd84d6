"""``check``: segment, retrieve, judge; plain results, no CLI needed.

Responses stream through in batches: the segments of a batch of responses are
embedded and searched together and handed to the judge as one batch (so a
judge can batch or parallelize), and results come out in input order.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import TYPE_CHECKING

from ..corpus.contexts import CONTEXT_FIELDS
from ..errors import UsageError
from ..judges import Judge
from ..judges.cuts import setting_of
from ..judges.offline.spanfill import fill_spans
from ..lang.codes import AUTO
from ..lang.detect import Detection, detect
from ..spans import in_response
from ..types import (
    CITE_NO_CLAIM,
    FACTUAL,
    NO_CLAIM,
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
from .references import REFERENCE_REASON, find_references
from .retrieve import RetrievalOptions, retrieve, retrieve_vectors
from .segment import MAX_SEGMENT_WEIGHT, bounded_spans, segment_response

if TYPE_CHECKING:
    import numpy as np

    from ..index import Index
    from .ctxsearch import ContextSearch, RecordPassages

QUERY_MODES = ("segment", "question+segment")
#: Measured (benchmarks/judges/judge_design.py): with the question, recall@5 of a
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
    #: The responses' language (``--language``): ``auto`` detects each one's, a code
    #: names it for all.
    language: str = AUTO


def evidence_source(
    item: ResponseInput, mode: str, has_index: bool, fields: Sequence[str] = CONTEXT_FIELDS
) -> tuple[str, str | None]:
    """What ``item``'s segments are checked against, and why they cannot be, if so.

    The source is ``contexts``, ``index``, ``both`` or ``none`` (an empty list of
    contexts, or contexts that are all blank text: judged on no evidence). The
    problem, a message without the file and line, makes the line an error record;
    it names ``fields``, the fields that were tried for the contexts.
    """
    has_contexts = item.contexts is not None
    # A list of blank texts ([""], ["   "]) gives the judge nothing, as an empty one does.
    has_text = any(c.text.strip() for c in item.contexts or ())
    if mode == "index" or (mode == "auto" and not has_contexts):
        if has_index:
            return "index", None
        return "index", (
            f"the record has no contexts ({_tried(fields)}) and there is no index to check "
            "it against"
        )
    if mode == "both":
        if not has_index:
            return "both", "--evidence both needs an index"
        return ("both" if has_text else "index"), None
    if not has_contexts:  # --evidence contexts
        hint = "; name another with --contexts-field" if fields == CONTEXT_FIELDS else ""
        return "contexts", (
            f"--evidence contexts: the record has no contexts ({_tried(fields)}{hint})"
        )
    return ("contexts" if has_text else "none"), None


def _tried(fields: Sequence[str]) -> str:
    """"fields tried: contexts, retrieved_contexts, ..." or "field tried: retrieval.docs"."""
    return f"field{'s' if len(fields) > 1 else ''} tried: {', '.join(fields)}"


def response_label(verdicts: Sequence[Verdict]) -> str:
    labels = {v.label for v in verdicts}
    if NONFACTUAL in labels:
        return NONFACTUAL
    # not_judged, or a label no judge should give: never read as factual.
    if labels - {FACTUAL}:
        return NOT_JUDGED
    return FACTUAL


def build_query(segment: Segment, question: str | None, mode: str) -> str:
    """What ``segment`` is searched with. A question past the segment bound is cut to
    its first segment's length: every segment's query repeats it, and the embedders
    read a window of 256 or 512 word pieces anyway."""
    if mode == "question+segment" and question:
        if len(question) > MAX_SEGMENT_WEIGHT // 4:
            first = bounded_spans(question, 0, len(question))[:1]
            question = "".join(question[start:end] for start, end, _ in first)
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


def response_language(item: ResponseInput, option: str) -> Detection:
    """The language ``item`` is read in: ``option`` when it names one, else the
    response's detected language, with the question's words too where the
    response alone does not settle it (``Detection.sure``: a short answer, a name)."""
    if option != AUTO:
        return Detection(option, "", 1.0, "given")
    found = detect(item.response)
    if not found.sure and item.question:
        with_question = detect(f"{item.question}\n{item.response}")
        if with_question.method != "fallback":
            return with_question
    return found


def _segments(item: ResponseInput, language: str | None) -> tuple[Segment, ...]:
    if item.error is not None:
        return ()
    if item.segments is not None:
        return item.segments
    return tuple(segment_response(item.response, language))


def _mark(
    item: ResponseInput, pattern: str | None, references: Sequence[tuple[int, int]]
) -> Marked | None:
    try:
        return mark(item.response, item.contexts, pattern, references, item.language)
    except UsageError as exc:  # a --citation-pattern that did not finish on this answer
        raise UsageError(f"line {item.line}: {exc}") from None


def check_batch(
    batch: Sequence[ResponseInput],
    index: Index | None,
    judge: Judge,
    options: CheckOptions,
    contexts: ContextSearch | None = None,
) -> list[CheckedResponse]:
    batch = [
        item if item.error is not None or item.language is not None
        else replace(item, language=response_language(item, options.language).language)
        for item in batch
    ]
    sources: list[str] = []
    for n, item in enumerate(batch):
        source, problem = evidence_source(item, options.evidence, index is not None)
        if item.error is None and problem is None and source != "index" and contexts is None:
            problem = "records with contexts need a ContextSearch"
        if item.error is None and problem is not None:
            batch[n] = replace(item, error=f"line {item.line}: {problem}")
        sources.append(source)
    # An answer's references list ("Sources:" and its lines) makes no claim: its segments
    # are neither judged nor cited, and its bracket groups are no citation markers.
    listed = [
        find_references(item.response) if item.error is None and item.segments is None
        else [] for item in batch
    ]
    # Citation markers the answers carry: removed from what the judge reads; the
    # segments keep offsets into the response as written.
    marked = [
        _mark(item, options.citation_pattern, spans)
        if item.error is None and item.segments is None else None
        for item, spans in zip(batch, listed)
    ]
    every = [m.segments if m is not None else _segments(item, item.language)
             for item, m in zip(batch, marked)]
    # What is judged: every segment but the references list's (with its markers' refs).
    keep = [_outside(segs, spans) for segs, spans in zip(every, listed)]
    segmented = [tuple(seg for seg, kept in zip(segs, ks) if kept)
                 for segs, ks in zip(every, keep)]
    cited_refs = [None if m is None else tuple(r for r, kept in zip(m.refs, ks) if kept)
                  for m, ks in zip(marked, keep)]
    queries = [
        build_query(seg, item.question, options.query)
        for item, segs in zip(batch, segmented)
        for seg in segs
    ]
    evidence, vectors, prepared = _evidence(batch, segmented, queries, sources, index, options,
                                            contexts)
    items = []
    at = 0
    for item, segs, m, source in zip(batch, segmented, marked, sources):
        said = m.clean if m is not None else item.response
        setting = setting_of(source)
        for seg in segs:
            items.append(JudgeItem(seg, evidence[at], item.question, said, item.language,
                                   setting=setting))
            at += 1
    verdicts = judge.judge(items) if items else []
    if len(verdicts) != len(items):
        raise RuntimeError(
            f"judge {judge.name} returned {len(verdicts)} verdicts for {len(items)} segments"
        )
    # Every flagged segment says which of its words are unsupported (judges/spans.py).
    verdicts = fill_spans(items, verdicts)
    citations = _citations(batch, segmented, sources, marked, cited_refs, items, verdicts,
                           queries, vectors, prepared, judge, contexts)
    out = []
    at = 0
    for item, all_segs, ks, source, m in zip(batch, every, keep, sources, marked):
        if item.error is not None:
            out.append(CheckedResponse(item, (), "error"))
            continue
        cites = m if _cites_checked(item, m, source) else None
        results = []
        for n, (seg, kept) in enumerate(zip(all_segs, ks)):
            if not kept:
                results.append(_reference(seg, n, item, cites))
            else:
                results.append(SegmentResult(seg, verdicts[at], evidence[at],
                                             citations.get(at),
                                             in_response(item.response, seg,
                                                         verdicts[at].spans)))
                at += 1
        label = response_label([r.verdict for r in results])
        out.append(CheckedResponse(item, tuple(results), label, source, item.language))
    return out


def _outside(segments: Sequence[Segment], spans: Sequence[tuple[int, int]]) -> list[bool]:
    """For each segment, whether it lies outside every span (spans in order, disjoint)."""
    if not spans:
        return [True] * len(segments)
    starts = [s for s, _ in spans]
    out = []
    for seg in segments:
        i = bisect.bisect_right(starts, seg.start) - 1
        out.append(not (i >= 0 and seg.end <= spans[i][1]))
    return out


def _cites_checked(item: ResponseInput, m: Marked | None, source: str) -> bool:
    """Whether the citations ``item``'s answer carries are checked (against its contexts)."""
    return (m is not None and item.error is None and item.contexts is not None
            and source in ("contexts", "both", "none"))


def _reference(
    segment: Segment, position: int, item: ResponseInput, marked: Marked | None
) -> SegmentResult:
    """A segment of the answer's references list (the ``position``-th of its response): no
    claim, not judged, nothing to cite for (its citation check, where the answer's
    citations are checked, says so)."""
    citation = None
    if marked is not None:
        from .citecheck import resolved

        refs = marked.refs[position]
        cited, unresolved = resolved(refs, item.contexts or ())
        citation = CitationCheck(refs, tuple(cited), tuple(unresolved), CITE_NO_CLAIM,
                                 reason="a references list: no claim to cite for")
    return SegmentResult(segment, Verdict(FACTUAL, NO_CLAIM, 1.0, (), REFERENCE_REASON), (),
                         citation)


def _citations(
    batch: Sequence[ResponseInput],
    segmented: Sequence[tuple[Segment, ...]],
    sources: Sequence[str],
    marked: Sequence[Marked | None],
    cited_refs: Sequence[tuple[tuple[str, ...], ...] | None],
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
    for n, (item, segs, m, refs) in enumerate(zip(batch, segmented, marked, cited_refs)):
        checked = _cites_checked(item, m, sources[n])
        for i in range(len(segs)):
            if checked and refs is not None and item.contexts is not None:
                passages = prepared.get(n) or RecordPassages(
                    [], np.zeros((0, 1), dtype=np.float32),
                    contexts.mode if contexts is not None else "text",
                )
                vector = vectors[at] if vectors is not None else None
                work.append((items[at], verdicts[at], refs[i], item.contexts, passages,
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
        shared = vectors is not None and contexts is not None and not index.lexical_only and (
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
        prepared = dict(zip(records, contexts.prepare(
            [batch[n].contexts or () for n in records], [batch[n].language for n in records]
        )))
        ranking = replace(options.retrieval, method=contexts.method)
        for n, passages in prepared.items():
            rows = [i for i, owner in enumerate(owners) if owner == n]
            own = retrieve_in(passages, [queries[i] for i in rows],
                              None if vectors is None else np.asarray(vectors[rows]), ranking)
            for i, ev in zip(rows, own):
                found[i] = ev + found[i]  # the record's own first, then the index's
        return found, vectors, prepared
    return found, vectors, {}
