"""The output record contract of ``ceg check``, pinned: keys, types, annotated text.

A failure here means the output format changed. If that is intended, bump
``SCHEMA_VERSION`` in ``ceg_cli/report/records.py`` and update the expectations below
in the same change.
"""

from __future__ import annotations

import json
from typing import Any

from ceg_cli.check.pipeline import CheckedResponse, ResponseInput, SegmentResult
from ceg_cli.check.responses import FieldNames, parse_line
from ceg_cli.report.records import (
    SCHEMA_VERSION,
    annotate,
    from_record,
    number_citations,
    to_record,
)
from ceg_cli.types import (
    CONTRADICTED,
    FACTUAL,
    JUDGE_ERROR,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    NOT_JUDGED,
    SUPPORTED,
    Context,
    Evidence,
    Segment,
    Span,
    SpanEvidence,
    Verdict,
)

JUDGE = {"name": "test", "method": "a judge for tests"}
#: The record's judge block of a judge that cuts no score (``cuts`` None).
JUDGE_BLOCK = {**JUDGE, "threshold": None, "threshold_source": None}
JUDGE_KEYS = {"name": str, "method": str, "threshold": (float, type(None)),
              "threshold_source": (str, type(None))}

P10 = Evidence(10, "doc-a", "Aristotle", "Aristotle was a Greek philosopher.", 0.8123,
               "https://en.wikipedia.org/wiki/Aristotle")
P20 = Evidence(20, "doc-a", "Aristotle", "He tutored Alexander the Great.", 0.71)
P30 = Evidence(30, "doc-p", "Plato", "Plato founded the Academy.", 0.4)

RESPONSE = (
    "Aristotle was Greek. He taught Alexander.\n"
    "- Plato taught him.\n"
    "- Is that so?\n"
    "- He never slept.\n"
    "- He wrote on logic.\n"
)


def seg(index: int, text: str, response: str = RESPONSE) -> Segment:
    start = response.index(text)
    return Segment(index, start, start + len(text), text)


def result(index: int, text: str, verdict: Verdict, *evidence: Evidence) -> SegmentResult:
    return SegmentResult(seg(index, text), verdict, tuple(evidence))


def checked(**fields: Any) -> CheckedResponse:
    """A response with every kind of segment: cited, no claim, nonfactual, not judged."""
    results = (
        result(0, "Aristotle was Greek.", Verdict(FACTUAL, SUPPORTED, 0.9, (0,), "found"),
               P10, P30),
        # Cites the passage first cited above and a new one: same passage, same number.
        result(1, "He taught Alexander.", Verdict(FACTUAL, SUPPORTED, 0.75, (0, 1), "found"),
               P20, P10),
        result(2, "Plato taught him.", Verdict(FACTUAL, SUPPORTED, 0.5, (0, 1), ""), P30, P10),
        result(3, "Is that so?", Verdict(FACTUAL, NO_CLAIM, 1.0, (), "a question"), P30),
        SegmentResult(seg(4, "He never slept."),
                      Verdict(NONFACTUAL, CONTRADICTED, 0.05, (), "no",
                              (Span(3, 8, "never", "word", SpanEvidence("tutored", 0)),)),
                      (P20,),
                      spans=(Span(RESPONSE.index("never"), RESPONSE.index("never") + 5, "never",
                                  "word", SpanEvidence("tutored", 0)),)),
        result(5, "He wrote on logic.", Verdict(NOT_JUDGED, JUDGE_ERROR, 0.0, (), "timeout"),
               P10),
    )
    inp = ResponseInput("r1", 3, RESPONSE, "Who was Aristotle?",
                        {"id": "r1", "response": RESPONSE, "question": "Who was Aristotle?",
                         **fields})
    return CheckedResponse(inp, results, NONFACTUAL, language="en")


def error_response(**fields: Any) -> CheckedResponse:
    inp = ResponseInput("bad", 7, fields=fields,
                        error="r.jsonl:7: field 'response' must be a string, got number")
    return CheckedResponse(inp, (), "error")


RECORD_KEYS = {
    "schema_version": int,
    "id": (str, int),
    "line": int,
    "question": (str, type(None)),
    "response": str,
    "label": str,
    "judge": dict,
    "segments": list,
    "annotated": str,
    "error": type(None),
    "read": dict,
    "evidence_source": str,
    "citation_check": (dict, type(None)),
    "language": str,
}
ERROR_RECORD_KEYS = {
    **RECORD_KEYS,
    "response": type(None),
    "question": type(None),
    "annotated": type(None),
    "error": str,
    "evidence_source": type(None),
    "citation_check": type(None),
    "language": type(None),
}
SEGMENT_KEYS = {
    "index": int,
    "text": str,
    "start": int,
    "end": int,
    "split": (str, type(None)),  # null: a whole sentence; clause or length: a piece of one
    "label": str,
    "verdict": str,
    "score": float,
    "reason": str,
    "citations": list,
    "evidence": list,
    "citation_check": (dict, type(None)),
    "spans": list,
}
SPAN_KEYS = {"start": int, "end": int, "text": str, "kind": str, "evidence": (dict, type(None))}
SPAN_EVIDENCE_KEYS = {"value": str, "source": (str, type(None)),
                      "passage_id": (int, type(None)), "context": (int, type(None)),
                      "title": (str, type(None))}
EVIDENCE_KEYS = {
    "source": str,
    "context": (int, type(None)),
    "start": (int, type(None)),
    "end": (int, type(None)),
    "passage_id": int,
    "doc_id": str,
    "title": str,
    "url": (str, type(None)),
    "similarity": (float, type(None)),  # null: a context's passage ranked by BM25 alone
    "text": str,
}
CITATION_KEYS = {"marker": int, **EVIDENCE_KEYS}


def assert_shape(obj: dict[str, Any], shape: dict[str, Any]) -> None:
    assert set(obj) == set(shape), sorted(set(obj) ^ set(shape))
    for key, kind in shape.items():
        assert isinstance(obj[key], kind), (key, obj[key])
        assert not isinstance(obj[key], bool), key  # bool is an int in Python


def as_json(record: dict[str, Any]) -> dict[str, Any]:
    """What a reader of the output file sees."""
    return json.loads(json.dumps(record, ensure_ascii=False))


# -- the contract --------------------------------------------------------------


def test_schema_version_is_7() -> None:
    assert SCHEMA_VERSION == 7
    assert to_record(checked(), JUDGE)["schema_version"] == 7
    assert to_record(error_response(), JUDGE)["schema_version"] == 7


def test_the_judge_block_gives_the_cut_of_the_records_setting() -> None:
    from ceg_cli.judges.cuts import Cut, Cuts

    cuts = Cuts(Cut(0.6, "protocol, index setting"), Cut(0.7, "protocol, contexts setting"))
    by_source = {}
    for source in ("index", "both", "contexts", "none"):
        response = checked()
        response = CheckedResponse(response.input, response.segments, response.label, source)
        block = as_json(to_record(response, JUDGE, cuts=cuts))["judge"]
        assert_shape(block, JUDGE_KEYS)
        by_source[source] = (block["threshold"], block["threshold_source"])
    assert by_source == {
        "index": (0.6, "protocol, index setting"), "both": (0.6, "protocol, index setting"),
        "contexts": (0.7, "protocol, contexts setting"),
        "none": (0.7, "protocol, contexts setting"),
    }
    # An error record was judged at no cut; a judge with no cuts gives none.
    assert to_record(error_response(), JUDGE, cuts=cuts)["judge"] == JUDGE_BLOCK
    assert to_record(checked(), JUDGE)["judge"] == JUDGE_BLOCK
    # Read back from a record (ceg report, --resume), the block keeps its cut.
    record = as_json(to_record(checked(), JUDGE, cuts=cuts))
    assert to_record(checked(), record["judge"])["judge"] == record["judge"]


def test_record_keys_and_types() -> None:
    record = as_json(to_record(checked(), JUDGE))
    assert_shape(record, RECORD_KEYS)
    assert_shape(record["judge"], JUDGE_KEYS)
    assert record["label"] == NONFACTUAL
    assert record["judge"] == JUDGE_BLOCK
    assert (record["id"], record["line"]) == ("r1", 3)
    assert (record["response"], record["question"]) == (RESPONSE, "Who was Aristotle?")
    assert len(record["segments"]) == 6
    for segment in record["segments"]:
        assert_shape(segment, SEGMENT_KEYS)
        assert segment["label"] in (FACTUAL, NONFACTUAL, NOT_JUDGED)
        assert segment["verdict"] in (SUPPORTED, CONTRADICTED, NOT_ENOUGH_EVIDENCE, NO_CLAIM,
                                      JUDGE_ERROR)
        assert RESPONSE[segment["start"]:segment["end"]] == segment["text"]
        for citation in segment["citations"]:
            assert_shape(citation, CITATION_KEYS)
        for evidence in segment["evidence"]:
            assert_shape(evidence, EVIDENCE_KEYS)
        for span in segment["spans"]:
            assert_shape(span, SPAN_KEYS)
            assert RESPONSE[span["start"]:span["end"]] == span["text"]
            if span["evidence"] is not None:
                assert_shape(span["evidence"], SPAN_EVIDENCE_KEYS)
    # Spans only on a flagged segment; the one here names the passage its evidence is in.
    assert [bool(s["spans"]) for s in record["segments"]] == [False] * 4 + [True, False]
    assert record["segments"][4]["spans"] == [
        {"start": RESPONSE.index("never"), "end": RESPONSE.index("never") + 5, "text": "never",
         "kind": "word", "evidence": {"value": "tutored", "source": "index", "passage_id": 20,
                                      "context": None, "title": "Aristotle"}}]


def test_segment_values() -> None:
    first, second, *_ = to_record(checked(), JUDGE)["segments"]
    assert first == {
        "index": 0,
        "text": "Aristotle was Greek.",
        "start": 0,
        "end": 20,
        "split": None,
        "label": FACTUAL,
        "verdict": SUPPORTED,
        "score": 0.9,
        "reason": "found",
        "citations": [
            {"marker": 1, "source": "index", "passage_id": 10, "doc_id": "doc-a",
             "title": "Aristotle", "url": "https://en.wikipedia.org/wiki/Aristotle",
             "similarity": 0.8123, "text": "Aristotle was a Greek philosopher.",
             "context": None, "start": None, "end": None},
        ],
        "evidence": [
            {"source": "index", "passage_id": 10, "doc_id": "doc-a", "title": "Aristotle",
             "url": "https://en.wikipedia.org/wiki/Aristotle", "similarity": 0.8123,
             "text": "Aristotle was a Greek philosopher.",
             "context": None, "start": None, "end": None},
            {"source": "index", "passage_id": 30, "doc_id": "doc-p", "title": "Plato",
             "url": None, "similarity": 0.4, "text": "Plato founded the Academy.",
             "context": None, "start": None, "end": None},
        ],
        "citation_check": None,
        "spans": [],
    }
    # Citations follow the judge's order; markers follow first citation in the response.
    assert [(c["passage_id"], c["marker"]) for c in second["citations"]] == [(20, 2), (10, 1)]


def test_error_record_keys_and_types() -> None:
    record = as_json(to_record(error_response(id="bad", response=5, topic="t"), JUDGE))
    assert_shape(record, {**ERROR_RECORD_KEYS, "topic": str, "input": dict})
    assert record["label"] == "error"
    assert record["error"] == "r.jsonl:7: field 'response' must be a string, got number"
    assert record["segments"] == []
    # The raw value of the wrong type is kept, under "input", not as the response.
    assert record["input"] == {"response": 5}
    assert record["topic"] == "t"


def test_error_record_of_a_line_that_is_not_an_object() -> None:
    record = as_json(to_record(error_response(), JUDGE))
    assert_shape(record, ERROR_RECORD_KEYS)


def test_input_fields_are_carried_through() -> None:
    record = to_record(checked(model="gpt-x", tags=["a"], extra={"k": None}), JUDGE)
    assert record["model"] == "gpt-x"
    assert record["tags"] == ["a"]
    assert record["extra"] == {"k": None}
    assert "input" not in record  # nothing clashed


def test_input_fields_that_clash_with_reserved_keys_are_kept_under_input() -> None:
    fields = {"label": "SUPPORTS", "segments": 3, "annotated": "x", "line": "l",
              "judge": "me", "error": "none", "schema_version": 9, "input": "raw"}
    record = to_record(checked(**fields), JUDGE)
    assert record["input"] == fields
    assert record["label"] == NONFACTUAL
    assert record["segments"][0]["index"] == 0
    assert record["line"] == 3
    assert record["judge"] == JUDGE_BLOCK
    assert record["schema_version"] == SCHEMA_VERSION
    assert record["error"] is None


def test_a_mapped_response_field_does_not_swallow_an_input_field_named_response() -> None:
    # --response-field text: the input's own "response" field is not the
    # checked text and must not be lost.
    item = parse_line(b'{"id": 1, "text": "A b.", "response": "older answer"}', 1, "f",
                      FieldNames(response="text"))
    record = to_record(CheckedResponse(item, (), FACTUAL), JUDGE)
    assert record["response"] == "A b."
    assert record["text"] == "A b."
    assert record["input"] == {"response": "older answer"}


# -- annotated text ------------------------------------------------------------


def test_annotated_markers_flags_and_layout() -> None:
    record = to_record(checked(), JUDGE)
    assert record["annotated"] == (
        "Aristotle was Greek. [1] He taught Alexander. [1][2]\n"
        "- Plato taught him. [1][3]\n"
        "- Is that so?\n"
        "- He never slept. [NONFACTUAL]\n"
        "- He wrote on logic. [NOT JUDGED]\n"
    )


def test_citation_numbers_follow_first_citation() -> None:
    results = checked().segments
    assert number_citations(results) == {(0, 10): 1, (0, 20): 2, (0, 30): 3}
    # The same passages cited in another order get other numbers.
    assert number_citations(results[1:]) == {(0, 20): 1, (0, 10): 2, (0, 30): 3}


def test_citation_numbers_are_the_contexts_own_then_the_index_after_them() -> None:
    # Issue 44, item 21: "...France [2]. [1] ... Lisa [1]. [2]" mixed the answer's numbers
    # (contexts) with ceg's (order of citation). Now ceg cites context n as [n], and numbers
    # the index's passages after the record's contexts.
    response = "Paris is the capital of France [2]. The Mona Lisa is in the Louvre [1]."
    mona = Evidence(0, "ctx-1", "", "The Mona Lisa hangs in the Louvre.", None, context=1,
                    start=0, end=34)
    paris = Evidence(1, "ctx-2", "", "Paris is the capital of France.", None, context=2,
                     start=0, end=31)
    paris_too = Evidence(2, "ctx-2", "", "It is on the Seine.", None, context=2, start=32,
                         end=51)
    wiki = Evidence(7, "doc-p", "Paris", "Paris is a city.", 0.7)
    first = response.index("The Mona")
    results = (
        SegmentResult(Segment(0, 0, first - 1, response[: first - 1]),
                      Verdict(FACTUAL, SUPPORTED, 0.9, (0, 1, 2)), (paris, paris_too, wiki)),
        SegmentResult(Segment(1, first, len(response), response[first:]),
                      Verdict(FACTUAL, SUPPORTED, 0.9, (0,)), (mona,)),
    )
    numbers = number_citations(results, 3)
    assert numbers == {paris.key: 2, paris_too.key: 2, wiki.key: 4, mona.key: 1}
    assert annotate(response, results, numbers) == (
        "Paris is the capital of France [2]. [2][4] The Mona Lisa is in the Louvre [1]. [1]")
    record = to_record(CheckedResponse(
        ResponseInput("r", 1, response, contexts=(Context(1, mona.text), Context(2, "x"),
                                                   Context(3, "y"))),
        results, FACTUAL, "both"), JUDGE)
    assert record["annotated"] == annotate(response, results, numbers)
    assert [c["marker"] for c in record["segments"][0]["citations"]] == [2, 2, 4]
    # Read back without its contexts (ceg report), the index passage still follows them.
    assert number_citations(results) == {paris.key: 2, paris_too.key: 2, wiki.key: 3,
                                         mona.key: 1}


def test_annotate_leaves_a_response_without_verdict_markers_unchanged() -> None:
    text = "Is it?\n\n  Who knows?  "
    results = [
        SegmentResult(Segment(0, 0, 6, "Is it?"), Verdict(FACTUAL, NO_CLAIM, 1.0), ()),
        SegmentResult(Segment(1, 10, 20, "Who knows?"), Verdict(FACTUAL, NO_CLAIM, 1.0), ()),
    ]
    assert annotate(text, results, {}) == text


def test_nonfactual_without_evidence_is_flagged_too() -> None:
    text = "Zorgs are blue."
    results = [SegmentResult(Segment(0, 0, 15, text),
                             Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.1), ())]
    assert annotate(text, results, {}) == "Zorgs are blue. [NONFACTUAL]"


# -- round trip ----------------------------------------------------------------


def test_from_record_round_trips_labels_verdicts_and_citations() -> None:
    original = checked(model="gpt-x")
    back = from_record(as_json(to_record(original, JUDGE)))
    assert back.label == original.label
    assert back.input.id == original.input.id
    assert back.input.line == original.input.line
    assert back.input.response == original.input.response
    assert back.input.question == original.input.question
    assert back.input.error is None
    assert back.input.fields == {"model": "gpt-x"}
    assert back.segments == original.segments  # segments, verdicts, cited, evidence
    # And a second trip gives the same record.
    assert to_record(back, JUDGE) == to_record(original, JUDGE)


def test_from_record_round_trips_an_error_record() -> None:
    original = error_response(id="bad", response=5)
    back = from_record(as_json(to_record(original, JUDGE)))
    assert back.label == "error"
    assert back.error == original.error
    assert back.segments == ()
    assert back.input.line == 7


def test_an_id_of_the_wrong_type_is_kept_under_input() -> None:
    item = parse_line(b'{"id": 1.5, "response": "x."}', 2, "f")
    record = to_record(CheckedResponse(item, (), "error"), JUDGE)
    assert record["id"] == 2  # the line number stands in
    assert record["input"] == {"id": 1.5, "response": "x."}
