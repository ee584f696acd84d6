"""Records that bring their own evidence: the contexts a RAG system retrieved.

The shapes are the ones the evaluation tools export (RAGAS: ``user_input``,
``response``, ``retrieved_contexts``; DeepEval: ``input``, ``actual_output``,
``retrieval_context``; LangChain documents: ``page_content`` and ``metadata``),
read with no options; the checks run with the real default model and no index.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ceg_cli.check.ctxsearch import ContextSearch, VectorCache, cut_contexts, retrieve_in
from ceg_cli.check.responses import parse_line
from ceg_cli.check.retrieve import RetrievalOptions
from ceg_cli.corpus.contexts import MAX_CONTEXT_CHARS, ContextsError, parse_contexts
from ceg_cli.report.records import from_record, to_record
from ceg_cli.types import Context

PARIS = (
    "Paris is the capital and largest city of France. It has an estimated population of "
    "2,102,650 residents as of January 2023, in an area of more than 105 square kilometres."
)
EIFFEL = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. It is "
    "named after the engineer Gustave Eiffel, whose company designed and built the tower "
    "from 1887 to 1889."
)
SEINE = "The Seine is a river in northern France. It flows through Paris into the English Channel."
ANSWER = (
    "Paris is the capital of France. "
    "The Eiffel Tower was designed by the company of Gustave Eiffel. "
    "The Eiffel Tower was built in 1923 by Napoleon Bonaparte."
)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def parse(obj: dict[str, Any]) -> Any:
    return parse_line(json.dumps(obj).encode(), 4, "r.jsonl")


# -- reading the shapes ----------------------------------------------------------


def test_ragas_shape_is_read_without_options() -> None:
    item = parse({"user_input": "What is Paris?", "response": "A city.",
                  "retrieved_contexts": [PARIS, SEINE]})
    assert item.error is None
    assert item.question == "What is Paris?"
    assert [c.text for c in item.contexts] == [PARIS, SEINE]
    assert [c.position for c in item.contexts] == [1, 2]
    assert item.read == {"response": "response", "question": "user_input",
                         "contexts": "retrieved_contexts"}


def test_deepeval_shape_is_read_without_options() -> None:
    item = parse({"input": "Who built it?", "actual_output": "Eiffel's company.",
                  "retrieval_context": [EIFFEL]})
    assert item.error is None
    assert (item.response, item.question) == ("Eiffel's company.", "Who built it?")
    assert item.contexts == (Context(1, EIFFEL),)
    assert item.read == {"response": "actual_output", "question": "input",
                         "contexts": "retrieval_context"}


def test_langchain_documents_and_objects_keep_id_title_url() -> None:
    docs = [
        {"page_content": PARIS, "metadata": {"source": "https://en.wikipedia.org/wiki/Paris",
                                             "title": "Paris"}, "type": "Document"},
        {"text": SEINE, "id": 17, "title": "Seine", "url": "https://example.org/seine"},
        {"page_content": EIFFEL, "metadata": {"id": "doc-3", "source": "notes/eiffel.txt"}},
    ]
    item = parse({"response": "x", "contexts": docs})
    assert item.contexts == (
        Context(1, PARIS, None, "Paris", "https://en.wikipedia.org/wiki/Paris"),
        Context(2, SEINE, "17", "Seine", "https://example.org/seine"),
        Context(3, EIFFEL, "doc-3", None, None),  # a file path is not a url
    )


def test_serialized_langchain_documents_are_read() -> None:
    """LangChain's ``dumps`` form (langchain-core 1.8.3), as a tool that logs its
    retriever's documents writes them: ``lc``, ``constructor``, ``kwargs``."""
    lc_id = ["langchain", "schema", "document", "Document"]
    docs = [
        {"lc": 1, "type": "constructor", "id": lc_id,
         "kwargs": {"page_content": PARIS, "type": "Document"}},
        {"lc": 1, "type": "constructor", "id": lc_id,
         "kwargs": {"id": "doc-2", "metadata": {"source": "https://example.org/seine",
                                                "title": "Seine"},
                    "page_content": SEINE, "type": "Document"}},
        {"lc": 1, "type": "constructor", "id": lc_id,
         "kwargs": {"metadata": {"__lc_escaped__": {"lc": 5, "id": "e", "title": "Eiffel"}},
                    "page_content": EIFFEL, "type": "Document"}},
    ]
    item = parse({"response": "x", "retrieved_contexts": docs})
    assert item.error is None
    assert item.contexts == (
        Context(1, PARIS),
        Context(2, SEINE, "doc-2", "Seine", "https://example.org/seine"),
        Context(3, EIFFEL, "e", "Eiffel", None),
    )


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
          "kwargs": {"content": "hi", "type": "ai"}},
         "a serialized LangChain langchain.schema.messages.AIMessage, not a Document"),
        ({"lc": 1, "type": "not_implemented", "id": ["__main__", "X"], "repr": "<X>"},
         "a serialized LangChain __main__.X (not_implemented), not a Document"),
        ({"lc": 1, "type": "constructor", "id": ["langchain", "schema", "document", "Document"],
          "kwargs": "Paris"},
         "a serialized LangChain Document whose 'kwargs' is string, not an object"),
        ({"lc": 1, "type": "constructor", "id": ["langchain", "schema", "document", "Document"],
          "kwargs": {"metadata": {}}},
         None),
    ],
)
def test_serialized_langchain_objects_that_are_not_documents_are_bad_lines(
    item: dict[str, Any], message: str | None
) -> None:
    got = parse({"response": "x", "contexts": [item]}).error
    assert got == "r.jsonl:4: field 'contexts' item 1" + (
        f": {message}" if message else " has no 'text' (nor LangChain's 'page_content')")


def test_a_question_field_that_is_not_text_is_not_taken_for_the_question() -> None:
    # "input" is DeepEval's question, but another tool's "input" may be anything.
    item = parse({"response": "x", "input": {"messages": []}})
    assert item.error is None and item.question is None and "question" not in item.read


def test_null_contexts_are_no_contexts_and_a_string_is_one() -> None:
    assert parse({"response": "x", "contexts": None}).contexts is None
    assert parse({"response": "x"}).contexts is None
    assert parse({"response": "x", "contexts": PARIS}).contexts == (Context(1, PARIS),)
    assert parse({"response": "x", "contexts": []}).contexts == ()


def test_duplicate_ids_are_allowed() -> None:
    # Two chunks of one source document carry the same id: that is not an error.
    item = parse({"response": "x",
                  "contexts": [{"text": "a", "id": "d"}, {"text": "b", "id": "d"}]})
    assert item.error is None and [c.id for c in item.contexts] == ["d", "d"]


def test_a_nested_contexts_field_is_named_with_dots() -> None:
    from ceg_cli.check.responses import FieldNames

    raw = json.dumps({"response": "x", "retrieval": {"docs": [SEINE]}}).encode()
    item = parse_line(raw, 1, "r.jsonl", FieldNames(contexts=("retrieval.docs",)))
    assert item.contexts == (Context(1, SEINE),)
    assert item.read["contexts"] == "retrieval.docs"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"response": "x", "contexts": 3}',
         "r.jsonl:4: field 'contexts' must be a list of texts or of objects with 'text', "
         "got number"),
        ('{"response": "x", "contexts": NaN}',
         "r.jsonl:4: field 'contexts' must be a list of texts or of objects with 'text', "
         "got NaN"),
        ('{"response": "x", "contexts": ["a", NaN]}',
         "r.jsonl:4: field 'contexts' item 2 must be a text or an object with 'text', got NaN"),
        ('{"response": "x", "contexts": [null]}',
         "r.jsonl:4: field 'contexts' item 1 must be a text or an object with 'text', got null"),
        ('{"response": "x", "contexts": [["nested"]]}',
         "r.jsonl:4: field 'contexts' item 1 must be a text or an object with 'text', got array"),
        ('{"response": "x", "contexts": [{"title": "T"}]}',
         "r.jsonl:4: field 'contexts' item 1 has no 'text' (nor LangChain's 'page_content')"),
        ('{"response": "x", "contexts": [{"text": 5}]}',
         "r.jsonl:4: field 'contexts' item 1: 'text' must be a string, got number"),
        ('{"response": "x", "retrieved_contexts": [{"text": "a", "id": true}]}',
         "r.jsonl:4: field 'retrieved_contexts' item 1: 'id' must be a string or an integer, "
         "got boolean"),
        ('{"response": "x", "contexts": [{"text": "a", "id": [1]}]}',
         "r.jsonl:4: field 'contexts' item 1: 'id' must be a string or an integer, got array"),
        ('{"response": "x", "contexts": [{"text": "a", "title": 1.5}]}',
         "r.jsonl:4: field 'contexts' item 1: 'title' must be a string, got number"),
        ('{"response": "x", "contexts": [{"page_content": "a", "metadata": "m"}]}',
         "r.jsonl:4: field 'contexts' item 1: 'metadata' must be an object, got string"),
    ],
)
def test_bad_contexts_make_an_error_record_naming_file_line_field(raw: str, message: str) -> None:
    item = parse_line(raw.encode(), 4, "r.jsonl")
    assert item.error == message
    # The line's fields are still carried, as for any bad line.
    assert item.fields["response"] == "x"


def test_contexts_past_the_limit_are_refused_without_being_cut() -> None:
    big = "word " * (MAX_CONTEXT_CHARS // 10)
    with pytest.raises(ContextsError, match=r"past it at item 3\)"):
        parse_contexts([big, big, big], "contexts")
    assert len(parse_contexts([big], "contexts")) == 1


# -- retrieval inside a record's contexts ------------------------------------------


def test_passages_are_cut_as_a_build_cuts_documents() -> None:
    long = " ".join(f"Sentence number {n} is here." for n in range(60))  # 300 words
    passages = cut_contexts([Context(1, PARIS), Context(2, long, "L")], 100)
    assert passages[0][0].position == 1 and passages[0][1].text == PARIS
    cut = [chunk for ctx, chunk in passages if ctx.position == 2]
    assert len(cut) == 3
    for chunk in cut:  # each passage is exactly its span of the context
        assert long[chunk.start:chunk.end] == chunk.text
        assert len(chunk.text.split()) <= 100


class CountingEmbedder:
    """The hash embedder of conftest, counting the texts it is asked to embed."""

    name = "test/counting"
    dimension = 384

    def __init__(self) -> None:
        from tests.conftest import HashEmbedder

        self._inner = HashEmbedder()
        self.texts: list[str] = []

    def embed(self, texts: Any) -> np.ndarray:
        self.texts.extend(texts)
        return self._inner.embed(texts)


def test_a_context_repeated_across_records_is_embedded_once() -> None:
    model = CountingEmbedder()
    search = ContextSearch(lambda: model, method="dense")
    records = [[Context(1, PARIS), Context(2, SEINE)], [Context(1, SEINE), Context(2, EIFFEL)]]
    search.prepare(records[:1])
    search.prepare(records[1:])
    # PARIS, SEINE, then only EIFFEL: SEINE was seen in the first record.
    assert len(model.texts) == 3 and search.cache.reused == 1


def test_vector_cache_drops_the_least_recently_used() -> None:
    model = CountingEmbedder()
    cache = VectorCache(capacity=2)
    cache.embed(model, ["a", "b"])
    cache.embed(model, ["a"])  # "a" is now the most recent
    cache.embed(model, ["c"])  # "b" goes
    cache.embed(model, ["a", "b"])
    assert model.texts == ["a", "b", "c", "b"]


def test_dense_ranking_over_contexts_is_brute_force_cosine(embedder: Any) -> None:
    search = ContextSearch(lambda: embedder, method="dense")
    contexts = [Context(1, SEINE), Context(2, EIFFEL), Context(3, PARIS)]
    (passages,) = search.prepare([contexts])
    query = "Gustave Eiffel's company built the tower."
    vectors = search.embed_queries([query])
    (found,) = retrieve_in(passages, [query], vectors, RetrievalOptions(top_k=3, threshold=-1))
    texts = [c.text for c in contexts]
    expected = embedder.embed(texts) @ embedder.embed([query])[0]
    order = [int(i) for i in np.argsort(-expected)]
    assert [e.context for e in found] == [i + 1 for i in order]
    assert [e.similarity for e in found] == pytest.approx([expected[i] for i in order], abs=1e-4)
    assert found[0].text == EIFFEL and (found[0].start, found[0].end) == (0, len(EIFFEL))


def test_lexical_ranking_over_contexts_is_bm25s_over_the_record() -> None:
    import bm25s

    from ceg_cli.index.lexical.bm25 import BM25_PARAMS, TOKENIZER

    model = CountingEmbedder()
    search = ContextSearch(lambda: model, mode="text")  # lexical: the default
    contexts = [Context(1, SEINE), Context(2, EIFFEL), Context(3, PARIS)]
    (passages,) = search.prepare([contexts])
    query = "Paris population residents"
    vectors = search.embed_queries([query])
    (found,) = retrieve_in(passages, [query], vectors,
                           RetrievalOptions(top_k=3, threshold=0.99, method="lexical"))
    reference = bm25s.BM25(**BM25_PARAMS)
    reference.index(bm25s.tokenize([SEINE, EIFFEL, PARIS], **TOKENIZER, show_progress=False),
                    show_progress=False)
    docs, scores = reference.retrieve(
        bm25s.tokenize([query], **TOKENIZER, show_progress=False), k=3, show_progress=False)
    expected = [int(d) + 1 for d, s in zip(docs[0], scores[0]) if s > 0]
    # Every passage with a word of the query, whatever the (cosine) threshold says:
    # nothing was embedded, so there is no cosine, and the similarity says so.
    assert [e.context for e in found] == expected and expected[0] == 3
    assert vectors is None and model.texts == []
    assert all(e.similarity is None for e in found)


def test_lexical_ranking_keeps_the_first_passage_when_no_word_matches() -> None:
    search = ContextSearch(lambda: CountingEmbedder(), mode="text")
    contexts = [Context(1, SEINE), Context(2, EIFFEL), Context(3, PARIS)]
    (passages,) = search.prepare([contexts])
    (found,) = retrieve_in(passages, ["zzzz qqqq"], None,
                           RetrievalOptions(top_k=3, method="lexical"))
    # As the CEG rule keeps the top hit: the judge reads the record's best guess,
    # here (all scores 0) its first passage.
    assert [e.context for e in found] == [1]


def test_lexical_ranking_for_a_judge_that_reads_similarities_reports_cosines(
    embedder: Any,
) -> None:
    search = ContextSearch(lambda: embedder, method="lexical", similarity=True)
    contexts = [Context(1, SEINE), Context(2, EIFFEL), Context(3, PARIS)]
    (passages,) = search.prepare([contexts])
    query = "Paris population residents"
    vectors = search.embed_queries([query])
    assert vectors is not None
    (found,) = retrieve_in(passages, [query], vectors,
                           RetrievalOptions(top_k=3, threshold=0.99, method="lexical"))
    plain = ContextSearch(lambda: embedder)
    (bare,) = retrieve_in(plain.prepare([contexts])[0], [query], None,
                          RetrievalOptions(top_k=3, method="lexical"))
    # The same passages in the same order (BM25 ranks either way), now with cosines.
    assert [e.context for e in found] == [e.context for e in bare]
    texts = [f"{c.text}" for c in contexts]
    expected = embedder.embed(texts) @ embedder.embed([query])[0]
    assert [e.similarity for e in found] == pytest.approx(
        [expected[e.context - 1] for e in found], abs=1e-4)


def test_check_with_the_offline_judge_on_contexts_loads_no_model(tmp_path: Path) -> None:
    """The default ranking embeds nothing: the model is never even loaded."""
    from ceg_cli.check.run import CheckRun, RunSettings

    ragas = write_jsonl(tmp_path / "r.jsonl", [
        {"user_input": "Tell me about Paris.", "response": ANSWER,
         "retrieved_contexts": [SEINE, EIFFEL, PARIS]}])
    run = CheckRun(RunSettings.resolve(responses=str(ragas), index=tmp_path / "none",
                                       out=tmp_path / "out.jsonl"))
    try:
        run.execute()
    finally:
        run.close()
    assert run.contexts is not None and run.contexts._embedder is None
    record = json.loads((tmp_path / "out.jsonl").read_text().splitlines()[0])
    assert record["evidence_source"] == "contexts"
    passages = [e for s in record["segments"] for e in s["evidence"]]
    assert passages and all(e["similarity"] is None for e in passages)


# -- ceg check with no index ---------------------------------------------------------


def test_a_ragas_export_is_checked_with_no_index_and_no_options(
    run_cli: Any, tmp_path: Path
) -> None:
    ragas = write_jsonl(tmp_path / "ragas.jsonl", [
        {"user_input": "Tell me about the Eiffel Tower.", "response": ANSWER,
         "retrieved_contexts": [SEINE, EIFFEL, PARIS]},
    ])
    out = tmp_path / "checked.jsonl"
    result = run_cli("check", ragas, "--index", tmp_path / "no-index", "--out", out, "-q")
    assert result.exit_code == 0, result.stderr
    (record,) = read_jsonl(out)
    assert record["evidence_source"] == "contexts"
    assert record["read"] == {"response": "response", "question": "user_input",
                              "contexts": "retrieved_contexts"}
    assert record["retrieved_contexts"] == [SEINE, EIFFEL, PARIS]  # carried through
    capital, designed, napoleon = record["segments"]
    assert capital["label"] == "factual" and designed["label"] == "factual"
    assert napoleon["label"] == "nonfactual", napoleon["reason"]
    contexts = [SEINE, EIFFEL, PARIS]
    for segment in (capital, designed):
        assert segment["citations"], segment
        for citation in segment["citations"]:
            # The citation quotes its context: position, span and text agree.
            assert citation["source"] == "context"
            text = contexts[citation["context"] - 1]
            assert text[citation["start"]:citation["end"]] == citation["text"]
    assert designed["citations"][0]["context"] == 2
    assert not (tmp_path / "no-index").exists()


@pytest.mark.parametrize("ranking", ["lexical", "dense", "hybrid"])
def test_contexts_retrieval_chooses_how_a_records_passages_are_ranked(
    run_cli: Any, tmp_path: Path, ranking: str
) -> None:
    ragas = write_jsonl(tmp_path / "ragas.jsonl", [
        {"user_input": "Tell me about the Eiffel Tower.", "response": ANSWER,
         "retrieved_contexts": [SEINE, EIFFEL, PARIS]},
    ])
    out = tmp_path / "checked.jsonl"
    result = run_cli("check", ragas, "--index", tmp_path / "no-index", "--out", out, "-q",
                     "--contexts-retrieval", ranking)
    assert result.exit_code == 0, result.stderr
    (record,) = read_jsonl(out)
    passages = [e for s in record["segments"] for e in s["evidence"]]
    assert passages and all(e["source"] == "context" for e in passages)
    sims = {e["similarity"] is None for e in passages}
    # BM25 alone computes no cosine; dense and hybrid rank by it.
    assert sims == ({True} if ranking == "lexical" else {False})
    assert record["segments"][1]["citations"][0]["context"] == 2


def test_a_bad_contexts_retrieval_is_a_usage_error(run_cli: Any, tmp_path: Path) -> None:
    ragas = write_jsonl(tmp_path / "r.jsonl", [{"response": "x.", "contexts": [PARIS]}])
    result = run_cli("check", ragas, "--index", tmp_path / "none",
                     "--contexts-retrieval", "cosine")
    assert result.exit_code == 2 and "--contexts-retrieval" in result.stderr


def test_a_deepeval_export_is_checked_with_no_index(run_cli: Any, tmp_path: Path) -> None:
    deepeval = write_jsonl(tmp_path / "deepeval.jsonl", [
        {"input": "What is Paris?", "actual_output": "Paris is the capital of France.",
         "retrieval_context": [PARIS], "expected_output": "The capital of France."},
        {"input": "Where does the Seine flow?",
         "actual_output": "The Seine flows into the Mediterranean Sea near Marseille.",
         "retrieval_context": [SEINE]},
    ])
    out = tmp_path / "checked.jsonl"
    result = run_cli("check", deepeval, "--index", tmp_path / "none", "--out", out, "-q")
    assert result.exit_code == 0, result.stderr
    first, second = read_jsonl(out)
    assert first["label"] == "factual" and first["read"]["response"] == "actual_output"
    assert first["response"] == "Paris is the capital of France."
    assert first["question"] == "What is Paris?"
    assert first["segments"][0]["citations"][0]["text"] == PARIS
    assert second["label"] == "nonfactual"


def test_a_record_without_contexts_and_no_index_is_an_error_record(
    run_cli: Any, tmp_path: Path
) -> None:
    mixed = write_jsonl(tmp_path / "mixed.jsonl", [
        {"response": "Paris is the capital of France.", "contexts": [PARIS]},
        {"id": "lonely", "response": "Paris is the capital of France."},
    ])
    out = tmp_path / "o.jsonl"
    result = run_cli("check", mixed, "--index", tmp_path / "none", "--out", out, "-q")
    assert result.exit_code == 2  # a bad line fails the gate, as any bad line does
    good, bad = read_jsonl(out)
    assert good["label"] == "factual"
    assert bad["label"] == "error" and bad["id"] == "lonely"
    assert bad["error"].startswith(f"{mixed}:2: the record has no contexts")
    assert f"warning: {mixed}:2: the record has no contexts" in " ".join(result.stderr.split())


def test_no_contexts_and_no_index_fails_at_once_as_before(run_cli: Any, tmp_path: Path) -> None:
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"response": "Paris is in France."}])
    out = tmp_path / "o.jsonl"
    result = run_cli("check", plain, "--index", tmp_path / "none", "--out", out)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: no index at {tmp_path / 'none'}")
    assert not out.exists()


def test_evidence_index_never_reads_the_contexts(run_cli: Any, tmp_path: Path) -> None:
    ragas = write_jsonl(tmp_path / "r.jsonl", [{"response": "x.", "contexts": [PARIS]}])
    result = run_cli("check", ragas, "--index", tmp_path / "none", "--evidence", "index")
    assert result.exit_code == 2 and "no index at" in result.stderr


def test_an_empty_list_of_contexts_is_judged_on_no_evidence_and_says_so(
    run_cli: Any, tmp_path: Path
) -> None:
    empty = write_jsonl(tmp_path / "e.jsonl", [
        {"response": "Paris is the capital of France.", "retrieved_contexts": []},
    ])
    out = tmp_path / "o.jsonl"
    result = run_cli("check", empty, "--index", tmp_path / "none", "--out", out, "-q")
    assert result.exit_code == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert f"{empty}:1: field 'retrieved_contexts' is an empty list" in said
    (record,) = read_jsonl(out)
    assert record["evidence_source"] == "none"
    assert record["label"] == "nonfactual"
    assert record["segments"][0]["evidence"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--evidence", "everything"), "--evidence"),
        (("--contexts-field", ""), "--contexts-field ''"),
        (("--contexts-field", "docs", "--evidence", "index"), "--contexts-field is read only"),
    ],
)
def test_bad_evidence_options_are_usage_errors(
    run_cli: Any, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    ragas = write_jsonl(tmp_path / "r.jsonl", [{"response": "x.", "contexts": [PARIS]}])
    result = run_cli("check", ragas, "--index", tmp_path / "none", *args)
    assert result.exit_code == 2 and message in result.stderr, result.stderr


def test_a_context_record_survives_the_round_trip_through_the_output() -> None:
    from ceg_cli.check.pipeline import CheckOptions, check
    from ceg_cli.judges import create_judge
    from tests.conftest import HashEmbedder

    item = parse({"id": "a", "response": ANSWER, "contexts": [SEINE, EIFFEL, PARIS]})
    search = ContextSearch(lambda: HashEmbedder())
    (checked,) = check([item], None, create_judge("offline", {}), CheckOptions(), search)
    record = json.loads(json.dumps(to_record(checked, {"name": "offline", "method": "m"})))
    again = from_record(record)
    assert again.evidence_source == "contexts"
    assert [r.evidence for r in again.segments] == [r.evidence for r in checked.segments]
    assert [r.verdict for r in again.segments] == [r.verdict for r in checked.segments]


def test_resume_of_a_contexts_run_writes_what_an_uninterrupted_run_writes(
    run_cli: Any, tmp_path: Path
) -> None:
    rows = [
        {"id": f"r{n}", "user_input": "Tell me about Paris.", "response": answer,
         "retrieved_contexts": [SEINE, EIFFEL, PARIS]}
        for n, answer in enumerate([ANSWER, "Paris is the capital of France [3].",
                                    "The Seine flows into the Baltic Sea [1]."])
    ]
    ragas = write_jsonl(tmp_path / "ragas.jsonl", rows)
    whole, cut = tmp_path / "whole.jsonl", tmp_path / "cut.jsonl"
    base = ("check", ragas, "--index", tmp_path / "none", "-q")
    assert run_cli(*base, "--out", whole).exit_code == 0
    lines = whole.read_bytes().splitlines(keepends=True)
    cut.write_bytes(lines[0] + lines[1][:40])  # one record, and a torn second one
    resumed = run_cli(*base, "--out", cut, "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    assert cut.read_bytes() == whole.read_bytes()
    assert "resumed: 1 responses were already in" in " ".join(resumed.stderr.split())


def test_both_adds_the_index_passages_to_the_record_own(
    run_cli: Any, mini_index: Path, tmp_path: Path
) -> None:
    rows = write_jsonl(tmp_path / "r.jsonl", [
        {"id": "mixed", "response": "Aristotle was a Greek philosopher. "
                                    "Paris is the capital of France.",
         "contexts": [PARIS]},
        {"id": "bare", "response": "Aristotle was a Greek philosopher."},
    ])
    out = tmp_path / "o.jsonl"
    result = run_cli("check", rows, "--index", mini_index, "--evidence", "both", "--out", out,
                     "-q")
    assert result.exit_code == 0, result.stderr
    mixed, bare = read_jsonl(out)
    assert (mixed["evidence_source"], bare["evidence_source"]) == ("both", "index")
    aristotle, paris = mixed["segments"]
    # The record's own passages come first, then the index's.
    for segment in (aristotle, paris):
        sources = [e["source"] for e in segment["evidence"]]
        assert sources[0] == "context" and "index" in sources
        assert sources == sorted(sources, key=lambda s: s != "context")
    assert any(c["source"] == "index" and c["title"] == "Aristotle"
               for c in aristotle["citations"])
    assert paris["citations"][0]["source"] == "context"
    assert paris["citations"][0]["text"] == PARIS


def test_the_verifier_gets_cosines_on_contexts_ranked_by_bm25(tmp_path: Path) -> None:
    """Its features read each passage's similarity: the one judge for which the default
    ranking still embeds, and says so with a number."""
    from ceg_cli.check.run import CheckRun, RunSettings

    ragas = write_jsonl(tmp_path / "r.jsonl", [
        {"user_input": "Tell me about Paris.", "response": "Paris is the capital of France.",
         "retrieved_contexts": [SEINE, EIFFEL, PARIS]}])
    run = CheckRun(RunSettings.resolve(responses=str(ragas), index=tmp_path / "none",
                                       out=tmp_path / "out.jsonl", judge="verifier"))
    try:
        assert run.contexts.method == "lexical" and run.contexts.embeds
        run.execute()
    finally:
        run.close()
    record = json.loads((tmp_path / "out.jsonl").read_text().splitlines()[0])
    (segment,) = record["segments"]
    assert segment["evidence"][0]["context"] == 3
    assert all(isinstance(e["similarity"], float) for e in segment["evidence"])


# -- issue 44, items 17, 18 and 23: what is wrong with the input, said first -------------


@pytest.mark.parametrize(
    ("lines", "args", "says"),
    [
        (['{"response": "Paris is in France.", "contexts": [5]}'], (),
         "r.jsonl:1: field 'contexts' item 1 must be a text or an object with 'text', got number"),
        (['{"response": "Paris is in France.", "ctx": {"a": 1}}'], ("--contexts-field", "ctx"),
         "r.jsonl:1: field 'ctx' must be a list of texts or of objects with 'text', got object"),
        (['{"response": "Paris is in France.", "contexts": ["' + "x" * 1_000_001 + '"]}'], (),
         "r.jsonl:1: field 'contexts' holds more than 1,000,000 characters of contexts"),
        ([], (), "no responses to check: the input has no lines"),
    ],
    ids=["number", "object", "over-the-cap", "empty-file"],
)
def test_no_readable_record_says_what_is_wrong_not_that_the_index_is_missing(
    run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str],
    args: tuple[str, ...], says: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    result = run_cli("check", "r.jsonl", "--index", "none", "--out", "o.jsonl", *args)
    assert result.exit_code == 2, result.stderr
    said = " ".join(result.stderr.split())
    assert "no index" not in said, said
    assert says in said, said
    assert not (tmp_path / "none").exists()


def test_no_readable_record_on_standard_input_says_so(
    run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    from typer.testing import CliRunner

    from ceg_cli.cli.main import app

    result = CliRunner().invoke(app, ["check", "-", "--index", "none"], input="")
    assert result.exit_code == 2, result.stderr
    assert "no responses to check: the input has no lines" in result.stderr
    assert "no index" not in result.stderr


@pytest.mark.parametrize(
    ("args", "tried"),
    [
        (("--contexts-field", "retrieval.docs", "--evidence", "contexts"),
         "--evidence contexts: the record has no contexts (field tried: retrieval.docs)"),
        (("--contexts-field", "retrieval.docs"),
         "the record has no contexts (field tried: retrieval.docs) and there is no index"),
        (("--evidence", "contexts"),
         "--evidence contexts: the record has no contexts (fields tried: contexts, "
         "retrieved_contexts, retrieval_context; name another with --contexts-field)"),
    ],
)
def test_the_warning_names_the_fields_that_were_tried(
    run_cli: Any, tmp_path: Path, args: tuple[str, ...], tried: str
) -> None:
    rows = [{"response": "Paris is the capital of France.", "contexts": [PARIS]},
            {"response": "Paris is in France.", "retrieval": {"query": "q"}}]
    responses = write_jsonl(tmp_path / "r.jsonl", rows)
    if "--contexts-field" in args:
        rows[0] = {"response": rows[0]["response"], "retrieval": {"docs": [PARIS]}}
        responses = write_jsonl(tmp_path / "r.jsonl", rows)
    out = tmp_path / "o.jsonl"
    result = run_cli("check", responses, "--index", tmp_path / "none", "--out", out, *args)
    assert result.exit_code == 2, result.stderr
    said = " ".join(result.stderr.split())
    assert f"warning: {responses}:2: {tried}" in said, said
    assert read_jsonl(out)[1]["error"].startswith(f"{responses}:2: {tried}")


@pytest.mark.parametrize("blank", [[""], ["   "], ["", " \n\t"]])
def test_blank_contexts_are_judged_on_no_evidence_and_say_so(
    run_cli: Any, tmp_path: Path, blank: list[str]
) -> None:
    rows = [{"response": "Paris is the capital of France.", "contexts": blank}]
    responses = write_jsonl(tmp_path / "b.jsonl", rows)
    out = tmp_path / "o.jsonl"
    result = run_cli("check", responses, "--index", tmp_path / "none", "--out", out, "-q")
    assert result.exit_code == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert (f"{responses}:1: field 'contexts' holds only blank text: its segments are judged "
            "on no evidence") in said
    (record,) = read_jsonl(out)
    assert record["evidence_source"] == "none"
    assert record["label"] == "nonfactual"
    assert record["segments"][0]["evidence"] == []
