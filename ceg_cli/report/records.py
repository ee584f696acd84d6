"""Output records of ``ceg check``: the versioned JSON contract, annotated text.

One record per input line, in input order. ``SCHEMA_VERSION`` changes whenever
a key is added, removed or changes meaning; ``tests/test_report.py`` pins the
keys and types, so a format change is a decision, not an accident.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..spans import in_segment_spans, span_dict, span_from_dict
from ..types import (
    CITE_NO_CLAIM,
    CITE_SUPPORTED,
    CITE_UNCITED,
    FACTUAL,
    NO_CLAIM,
    NONFACTUAL,
    CheckedResponse,
    CitationCheck,
    Evidence,
    ResponseInput,
    Segment,
    SegmentResult,
    Verdict,
)

if TYPE_CHECKING:
    from ..judges.cuts import Cuts

#: 2: evidence may come from the record's own contexts (``source``, ``context``,
#: ``start``, ``end`` on every passage; ``read`` and ``evidence_source`` on the record),
#: and the citations an answer carries are checked (``citation_check`` on the segments
#: and the record).
#: 3: a passage's ``similarity`` is null where no cosine was computed: a record's own
#: passages ranked by BM25 alone (``--contexts-retrieval lexical``, the default).
#: 4: one numbering in ``annotated`` and the citations' ``marker``: a citation of a record's
#: own context is numbered as that context (its 1-based position, the number the answer's
#: own markers use), a citation of an index passage after the record's contexts; the lines
#: of an answer's references list ("Sources:") are segments with verdict ``no_claim`` and
#: the reason ``REFERENCE_REASON``, neither judged nor counted in citation recall; and
#: ``language`` on the record: the language its response was read in (``--language``; a
#: code such as ``de``, or ``und-Xxxx`` for text only the script of which is known).
#: 5: the record's ``judge`` says the cut its segments were decided at
#: (``threshold``) and where it came from (``threshold_source``).
#: 6: a segment has a bounded length, and a sentence past it is cut into several: each
#: segment's ``split`` is null for a whole sentence, else ``clause`` (cut at clause
#: marks) or ``length`` (an end cut by length) (``ceg_cli.check.segment``).
#: 7: each segment's ``spans``: the stretches of the response its judge found unsupported
#: (``start``, ``end``, ``text``, ``kind``, ``evidence``; ``ceg_cli.spans``), empty on a
#: segment that is not flagged.
SCHEMA_VERSION = 7

#: Keys ceg writes; an input field with one of these names is kept under
#: ``input`` instead of being overwritten.
RESERVED_KEYS = (
    "schema_version",
    "id",
    "line",
    "question",
    "response",
    "label",
    "judge",
    "segments",
    "annotated",
    "error",
    "input",
    "regeneration",
    "read",
    "evidence_source",
    "citation_check",
    "language",
)
FLAG = "[NONFACTUAL]"
NOT_JUDGED_FLAG = "[NOT JUDGED]"


def evidence_dict(ev: Evidence) -> dict[str, Any]:
    """A passage as the output writes it. ``source`` is ``index`` or ``context``; a
    context's passage gives the context's 1-based position and its span in it."""
    return {
        "source": "index" if ev.context is None else "context",
        "passage_id": ev.passage_id,
        "doc_id": ev.doc_id,
        "title": ev.title,
        "url": ev.url,
        "similarity": ev.similarity,
        "text": ev.text,
        "context": ev.context,
        "start": ev.start,
        "end": ev.end,
    }


def evidence_from_dict(e: dict[str, Any]) -> Evidence:
    """The inverse of ``evidence_dict``; schema 1 records have index passages only."""
    return Evidence(
        e["passage_id"], e["doc_id"], e["title"], e["text"], e["similarity"], e.get("url"),
        e.get("context"), e.get("start"), e.get("end"),
    )


def number_citations(
    results: Sequence[SegmentResult], contexts: int = 0
) -> dict[tuple[int, int], int]:
    """Citation marker numbers: passage key -> n, one numbering with the answer's own markers.

    A passage of a record's own context is numbered as that context (its 1-based position:
    "[2]" names context 2 both in the answer and where ceg cites it), so two passages of one
    context share a number. The index's passages are numbered in order of first citation
    after the record's ``contexts`` (from 1 when it has none), so no number means two things
    (and after any context a citation names, should ``contexts`` be short of it).
    """
    numbers: dict[tuple[int, int], int] = {}
    after = max([contexts, *(r.evidence[i].context or 0 for r in results
                             for i in r.verdict.cited)])
    index_passages = 0
    for r in results:
        for i in r.verdict.cited:
            ev = r.evidence[i]
            if ev.key in numbers:
                continue
            if ev.context is not None:
                numbers[ev.key] = ev.context
            else:
                index_passages += 1
                numbers[ev.key] = after + index_passages
    return numbers


def annotate(
    response: str, results: Sequence[SegmentResult], numbers: dict[tuple[int, int], int]
) -> str:
    """The response with ``[n]`` after supported segments and a flag after nonfactual ones.

    Markers are inserted at each segment's end offset, so the response's own
    layout (lists, line breaks) is kept.
    """
    inserts: list[tuple[int, str]] = []
    for r in results:
        v = r.verdict
        if v.label == FACTUAL and v.verdict != NO_CLAIM and v.cited:
            marks = sorted({numbers[r.evidence[i].key] for i in v.cited})
            inserts.append((r.segment.end, " " + "".join(f"[{n}]" for n in marks)))
        elif v.label == NONFACTUAL:
            inserts.append((r.segment.end, f" {FLAG}"))
        elif v.label != FACTUAL:
            inserts.append((r.segment.end, f" {NOT_JUDGED_FLAG}"))
    out = []
    at = 0
    for pos, text in sorted(inserts, key=lambda t: t[0]):
        out.append(response[at:pos])
        out.append(text)
        at = pos
    out.append(response[at:])
    return "".join(out)


def segment_dict(r: SegmentResult, numbers: dict[tuple[int, int], int]) -> dict[str, Any]:
    v = r.verdict
    return {
        "index": r.segment.index,
        "text": r.segment.text,
        "start": r.segment.start,
        "end": r.segment.end,
        "split": r.segment.split,
        "label": v.label,
        "verdict": v.verdict,
        "score": round(float(v.score), 4),
        "reason": v.reason,
        "citations": [
            {"marker": numbers[r.evidence[i].key], **evidence_dict(r.evidence[i])}
            for i in v.cited
        ],
        "evidence": [evidence_dict(e) for e in r.evidence],
        "citation_check": None if r.citation is None else citation_dict(r.citation),
        "spans": [span_dict(sp, r.evidence) for sp in r.spans],
    }


def citation_dict(c: CitationCheck) -> dict[str, Any]:
    return {
        "refs": list(c.refs),
        "contexts": list(c.contexts),
        "unresolved": list(c.unresolved),
        "status": c.status,
        "irrelevant": list(c.irrelevant),
        "reason": c.reason,
    }


def citation_from_dict(d: dict[str, Any] | None) -> CitationCheck | None:
    if d is None:
        return None
    return CitationCheck(tuple(d["refs"]), tuple(d["contexts"]), tuple(d["unresolved"]),
                         d["status"], tuple(d["irrelevant"]), d.get("reason", ""))


def citation_counts(results: Sequence[SegmentResult]) -> dict[str, int] | None:
    """A response's citation tallies (ALCE's recall and precision counts), or None when
    its citations were not checked."""
    checks = [r.citation for r in results if r.citation is not None]
    if not checks:
        return None
    claims = [c for c in checks if c.status != CITE_NO_CLAIM]
    return {
        "sentences": len(claims),
        "supported": sum(c.status == CITE_SUPPORTED for c in claims),
        "uncited": sum(c.status == CITE_UNCITED for c in claims),
        "citations": sum(len(c.contexts) + len(c.unresolved) for c in claims),
        "relevant": sum(
            len(c.contexts) - len(c.irrelevant) for c in claims if c.status == CITE_SUPPORTED
        ),
        "unresolved": sum(len(c.unresolved) for c in claims),
    }


def citation_summary(results: Sequence[SegmentResult]) -> dict[str, Any] | None:
    """The record's ``citation_check``: the tallies with recall and precision."""
    counts = citation_counts(results)
    if counts is None:
        return None
    return {
        **counts,
        "recall": _ratio(counts["supported"], counts["sentences"]),
        "precision": _ratio(counts["relevant"], counts["citations"]),
    }


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def attempt_dict(checked: CheckedResponse, attempt: int) -> dict[str, Any]:
    """One regeneration attempt: the new answer and how it was judged."""
    if checked.error is not None:
        return {"attempt": attempt, "response": checked.input.response, "label": "error",
                "error": checked.error, "segments": [], "annotated": None}
    numbers = number_citations(checked.segments, len(checked.input.contexts or ()))
    return {
        "attempt": attempt,
        "response": checked.input.response,
        "label": checked.label,
        "error": None,
        "segments": [segment_dict(r, numbers) for r in checked.segments],
        "annotated": annotate(checked.input.response, checked.segments, numbers),
    }


def regeneration_dict(attempts: Sequence[CheckedResponse]) -> dict[str, Any] | None:
    """The ``regeneration`` value: every attempt, and the final answer."""
    if not attempts:
        return None
    final = attempts[-1]
    return {
        "attempts": [attempt_dict(a, n) for n, a in enumerate(attempts, 1)],
        "final": {"response": final.input.response, "label": final.label,
                  "annotated": attempt_dict(final, len(attempts))["annotated"]},
        "repaired": final.label == FACTUAL,
    }


def judge_block(
    judge: Mapping[str, Any], cuts: Cuts | None, evidence_source: str | None,
    language: str | None = None, text: str = "",
) -> dict[str, Any]:
    """The record's ``judge``: its name and method, and the cut its segments were
    decided at in the record's setting and ``language`` (its ``text`` tells the
    script where the language has no cut) with where it came from (null for a judge
    that cuts no score, and on an error record). Without ``cuts``, a ``judge`` read
    back from a record keeps the cut it gives."""
    from ..judges.cuts import setting_of

    if cuts is not None:
        cut = None if evidence_source is None else cuts.for_language(
            setting_of(evidence_source), language, text)
        value, source = (None, None) if cut is None else (cut.value, cut.source)
    else:
        value, source = judge.get("threshold"), judge.get("threshold_source")
    return {"name": judge["name"], "method": judge["method"], "threshold": value,
            "threshold_source": source}


def to_record(
    checked: CheckedResponse,
    judge: dict[str, str],
    regeneration: Sequence[CheckedResponse] | None = None,
    cuts: Cuts | None = None,
) -> dict[str, Any]:
    """The output record for one input line (``judge``: its name and method; ``cuts``:
    the judge's cut in each setting, if it cuts a score).

    ``regeneration`` is given only for runs with ``--regenerate``: the record
    then has a ``regeneration`` key, null for a response that needed none.
    """
    inp = checked.input
    record: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "id": inp.id, "line": inp.line}
    # The checked id, text and question get canonical keys; an input field of
    # the same name holding something else (an error line's raw value, the
    # input's own "response" when --response-field names another field) is
    # kept under "input", never dropped.
    canonical: dict[str, Any] = {"id": inp.id}
    if inp.error is None:
        canonical.update(response=inp.response, question=inp.question)
    record.update({k: v for k, v in inp.fields.items() if k not in RESERVED_KEYS})
    clashing = {
        k: v
        for k, v in inp.fields.items()
        if k in RESERVED_KEYS and not (k in canonical and canonical[k] == v)
    }
    if clashing:
        record["input"] = clashing
    if inp.error is not None:
        record.update(
            {
                "label": "error",
                "error": inp.error,
                "judge": judge_block(judge, cuts, None),
                "segments": [],
                "annotated": None,
                "question": None,
                "response": None,
                "read": dict(inp.read),
                "evidence_source": None,
                "citation_check": None,
                "language": None,
            }
        )
        return record
    numbers = number_citations(checked.segments, len(inp.contexts or ()))
    record.update(
        {
            "read": dict(inp.read),
            "evidence_source": checked.evidence_source,
            "language": checked.language,
            "citation_check": citation_summary(checked.segments),
            "question": inp.question,
            "response": inp.response,
            "label": checked.label,
            "judge": judge_block(judge, cuts, checked.evidence_source, checked.language,
                                 inp.response or ""),
            "segments": [segment_dict(r, numbers) for r in checked.segments],
            "annotated": annotate(inp.response, checked.segments, numbers),
            "error": None,
        }
    )
    if regeneration is not None:
        record["regeneration"] = regeneration_dict(regeneration)
    return record


def from_record(record: dict[str, Any]) -> CheckedResponse:
    """Rebuild a ``CheckedResponse`` from an output record (resume, ``ceg report``)."""
    inp = ResponseInput(
        id=record["id"],
        line=record.get("line", 0),
        response=record.get("response") or "",
        question=record.get("question"),
        fields={k: v for k, v in record.items() if k not in RESERVED_KEYS},
        error=record.get("error"),
        read=record.get("read") or {},
        language=record.get("language"),
    )
    if inp.error is not None:
        return CheckedResponse(inp, (), "error")
    results = []
    for seg in record.get("segments", []):
        evidence = tuple(evidence_from_dict(e) for e in seg.get("evidence", []))
        by_key = {e.key: i for i, e in enumerate(evidence)}
        cited_keys = (evidence_from_dict(c).key for c in seg.get("citations", []))
        cited = tuple(by_key[k] for k in cited_keys if k in by_key)
        segment = Segment(seg["index"], seg["start"], seg["end"], seg["text"],
                          seg.get("split"))
        spans = tuple(span_from_dict(d, evidence) for d in seg.get("spans") or ())
        # The verdict's spans are the same, in the segment's text (``ceg_cli.spans``).
        verdict = Verdict(seg["label"], seg["verdict"], seg["score"], cited, seg.get("reason", ""),
                          in_segment_spans(inp.response, segment, spans))
        results.append(SegmentResult(segment, verdict, evidence,
                                     citation_from_dict(seg.get("citation_check")), spans))
    return CheckedResponse(
        inp, tuple(results), record["label"], record.get("evidence_source") or "index",
        record.get("language"),
    )
