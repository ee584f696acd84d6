"""Benchmark adapters of ``ceg eval`` on small hand-written files in each format.

The fixtures are our own text in the benchmarks' formats; no benchmark data is
copied (FELM is CC BY-NC-SA).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ceg_cli.errors import UsageError
from ceg_cli.eval.corpus import corpus_cache_dir, ensure_corpus_index
from ceg_cli.eval.datasets import (
    load_dataset,
    locate_segments,
    normalize_title,
    title_from_url,
)
from ceg_cli.index import open_index, read_meta


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


FELM_ROWS = [
    {
        "index": "7",
        "domain": "wk",
        "prompt": "Where is the Eiffel Tower?",
        "response": "The Eiffel Tower is in Paris.  It was finished in 1899.",
        "segmented_response": ["The Eiffel Tower is in Paris.", "It was finished in 1899."],
        "labels": [True, False],
        "ref": ["https://en.wikipedia.org/wiki/Eiffel_Tower", "https://example.org/"],
        "ref_contents": ["The Eiffel Tower is a tower in Paris, finished in 1889.", ""],
    },
    {
        "index": "8",
        "domain": "wk",
        "prompt": "Name a river.",
        # FELM edited this segment: it is not in the response verbatim.
        "response": "The Seine  flows through Paris.",
        "segmented_response": ["The Seine flows through Paris."],
        "labels": [True],
        "ref": ["https://en.wikipedia.org/wiki/Eiffel_Tower"],
        "ref_contents": ["The Eiffel Tower is a tower in Paris, finished in 1889."],
    },
    {
        "index": "9",
        "domain": "wk",
        "prompt": "Hi",
        "response": "Hello there.",
        "segmented_response": ["Hello there."],
        "labels": [True],
        "ref": [],
        "ref_contents": [],
    },
]


def test_felm_segments_labels_and_corpus(tmp_path: Path) -> None:
    ds = load_dataset(write_jsonl(tmp_path / "felm.jsonl", FELM_ROWS))
    assert ds.format == "felm" and len(ds.examples) == 3
    first = ds.examples[0]
    assert first.input.id == "7" and first.input.question == "Where is the Eiffel Tower?"
    assert first.segment_labels == (True, False) and first.label is False
    segs = first.input.segments
    assert segs is not None and [(s.start, s.end) for s in segs] == [(0, 29), (31, 55)]
    for s in segs:
        assert first.input.response[s.start : s.end] == s.text
    # Only references with scraped text are evidence, and each URL is one document.
    url = "https://en.wikipedia.org/wiki/Eiffel_Tower"
    assert first.evidence_ids == {url}
    assert ds.documents == [
        {"id": url, "title": "Eiffel Tower", "text": FELM_ROWS[0]["ref_contents"][0], "url": url}
    ]
    assert ds.embed_text == "title+text"
    assert ds.examples[2].evidence_ids == frozenset() and ds.examples[2].label is True


def test_felm_segment_not_in_response_uses_the_joined_segments(tmp_path: Path) -> None:
    ds = load_dataset(write_jsonl(tmp_path / "felm.jsonl", FELM_ROWS))
    edited = ds.examples[1].input
    assert edited.response == "The Seine flows through Paris."
    assert edited.segments is not None and edited.segments[0].end == len(edited.response)


def test_locate_segments_in_order_and_fallback() -> None:
    text = "A b. A b. C d."
    response, segs = locate_segments(text, ["A b.", " A b. ", "C d."])
    assert response == text
    assert [(s.index, s.start, s.end, s.text) for s in segs] == [
        (0, 0, 4, "A b."),
        (1, 5, 9, "A b."),
        (2, 10, 14, "C d."),
    ]
    # Out of order: "A b." is not found after "C d.", so offsets go into the join.
    response, segs = locate_segments(text, ["C d.", "A b."])
    assert response == "C d. A b."
    assert [response[s.start : s.end] for s in segs] == ["C d.", "A b."]


def test_title_from_url() -> None:
    assert title_from_url("https://en.wikipedia.org/wiki/Philip_II_of_Macedon") == (
        "Philip II of Macedon"
    )
    assert title_from_url("https://en.wikipedia.org/wiki/Caf%C3%A9") == "Café"
    assert title_from_url("https://news.example.com/2023/05/ceo-steps-down/index.html") == (
        "ceo steps down"
    )
    assert title_from_url("https://example.org/") == "example.org"


HALUEVAL_ROWS = [
    {
        "knowledge": "Mount Kenya is the highest mountain in Kenya.",
        "question": "Which is the highest mountain in Kenya?",
        "right_answer": "Mount Kenya",
        "hallucinated_answer": "The highest mountain in Kenya is Mount Elgon, at 4,321 m.",
    },
    {
        "knowledge": "The Danube flows into the Black Sea.",
        "question": "Where does the Danube end?",
        "right_answer": "The Black Sea",
        "hallucinated_answer": "It ends in the North Sea.",
    },
]


def test_halueval_pairs_and_knowledge_corpus(tmp_path: Path) -> None:
    ds = load_dataset(write_jsonl(tmp_path / "qa.jsonl", HALUEVAL_ROWS))
    assert ds.format == "halueval"
    assert [(e.input.id, e.label, e.pair, e.role) for e in ds.examples] == [
        ("0-right", True, "0", "right"),
        ("0-hallucinated", False, "0", "hallucinated"),
        ("1-right", True, "1", "right"),
        ("1-hallucinated", False, "1", "hallucinated"),
    ]
    assert ds.examples[3].input.question == "Where does the Danube end?"
    assert ds.examples[3].input.segments is None  # segmented by Punkt when checked
    assert ds.examples[3].evidence_ids == {"1"}
    assert [d["id"] for d in ds.documents] == ["0", "1"]
    assert ds.embed_text == "text"


def test_limit_keeps_the_whole_corpus(tmp_path: Path) -> None:
    ds = load_dataset(write_jsonl(tmp_path / "qa.jsonl", HALUEVAL_ROWS), limit=1)
    assert len(ds.examples) == 2
    assert len(ds.documents) == 2


FEVER_ROWS = [
    {
        "id": 1,
        "label": "SUPPORTS",
        "claim": "Aristotle was a philosopher. ",
        "evidence": [[[5, 6, "Aristotle", 0]]],
    },
    {
        "id": 2,
        "label": "REFUTES",
        "claim": "Aristotle tutored Philip II.",
        "evidence": [[[5, 7, "Aristotle", 4]], [[5, 8, "Philip_II_of_Macedon", 1]]],
    },
    {"id": 3, "label": "NOT ENOUGH INFO", "claim": "Aristotle liked figs.", "evidence": [[]]},
]


def test_fever_claims_labels_and_gold_titles(tmp_path: Path) -> None:
    ds = load_dataset(write_jsonl(tmp_path / "fever.jsonl", FEVER_ROWS))
    assert ds.format == "fever" and ds.skipped == 1 and not ds.has_corpus
    one, two = ds.examples
    assert one.input.response == "Aristotle was a philosopher."
    assert one.input.segments is not None and len(one.input.segments) == 1
    assert (one.label, one.segment_labels) == (True, (True,))
    assert (two.label, two.segment_labels) == (False, (False,))
    assert two.evidence_titles == {"aristotle", "philip ii of macedon"}


def test_normalize_title_undoes_fever_escapes() -> None:
    assert normalize_title("Nirvana_-LRB-band-RRB-") == normalize_title("Nirvana (band)")
    assert normalize_title("Ab_-COLON-_c") == "ab : c"


def test_generic_jsonl_segment_and_response_labels(tmp_path: Path) -> None:
    rows = [
        {
            "id": "a",
            "prompt": "Capital?",
            "response": "Paris is in France. Rome is in Spain.",
            "segments": [
                {"text": "Paris is in France.", "label": "factual"},
                {"text": "Rome is in Spain.", "label": "NONFACTUAL"},
            ],
            "evidence_titles": ["Rome"],
        },
        {"response": "Water is wet.", "label": True, "pair": 4, "evidence_ids": [12]},
        {"response": "Water is dry.", "label": "nonfactual", "pair": 4},
    ]
    ds = load_dataset(write_jsonl(tmp_path / "gen.jsonl", rows), "jsonl")
    a, b, c = ds.examples
    assert a.input.id == "a" and a.input.question == "Capital?"
    assert a.segment_labels == (True, False) and a.label is False
    assert a.input.segments is not None and a.input.segments[1].start == 20
    assert a.evidence_titles == {"rome"}
    assert b.input.id == 2 and b.label is True and b.segment_labels is None
    assert b.pair == "4" and b.evidence_ids == {"12"}
    assert c.label is False


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"foo": 1}], r"\.jsonl:1: cannot tell the format from the fields \(foo\)"),
        ([{"response": "x"}], r":1: no gold label"),
        ([{"response": "x", "label": "maybe"}], r":1: field 'label' is 'maybe'"),
        (
            [{"response": "x", "label": True}, {"response": 3, "label": True}],
            r":2: field 'response' is of type int; expected a str",
        ),
        (
            [{"response": "a b", "label": True, "segments": [{"text": "a", "label": False}]}],
            r":1: field 'label' disagrees with the segment labels",
        ),
        ([{"response": "a", "segments": [{"label": False}]}], r"segments\[0\]: field 'text'"),
    ],
)
def test_bad_records_name_file_line_and_field(
    tmp_path: Path, rows: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        load_dataset(write_jsonl(tmp_path / "bad.jsonl", rows))


def test_bad_felm_and_fever_records(tmp_path: Path) -> None:
    row = dict(FELM_ROWS[0], labels=[True])
    with pytest.raises(UsageError, match=r":1: 2 segments in 'segmented_response' but 1 'labels'"):
        load_dataset(write_jsonl(tmp_path / "f.jsonl", [row]))
    row = dict(FEVER_ROWS[0], label="MAYBE")
    with pytest.raises(UsageError, match=r":1: field 'label' is 'MAYBE'"):
        load_dataset(write_jsonl(tmp_path / "v.jsonl", [row]))
    with pytest.raises(UsageError, match=r":1: field 'claim' is missing"):
        load_dataset(write_jsonl(tmp_path / "v.jsonl", [{"label": "SUPPORTS"}]), "fever")


def test_unreadable_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"response": "x", "label": true}\n{nope\n', encoding="utf-8")
    with pytest.raises(UsageError, match=r"bad.jsonl:2: invalid JSON"):
        load_dataset(bad)
    with pytest.raises(UsageError, match="no such file"):
        load_dataset(tmp_path / "missing.jsonl")
    with pytest.raises(UsageError, match="--format xml: unknown"):
        load_dataset(write_jsonl(tmp_path / "ok.jsonl", FELM_ROWS), "xml")
    only_nei = write_jsonl(tmp_path / "nei.jsonl", [FEVER_ROWS[2]])
    with pytest.raises(UsageError, match="no labelled examples"):
        load_dataset(only_nei)


def test_corpus_cache_dir_follows_env_and_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))
    ds = load_dataset(write_jsonl(tmp_path / "qa.jsonl", HALUEVAL_ROWS))
    where = corpus_cache_dir(ds)
    assert where.parent == tmp_path / "cache" / "eval"
    assert corpus_cache_dir(load_dataset(ds.path)) == where
    write_jsonl(ds.path, HALUEVAL_ROWS[:1])
    assert corpus_cache_dir(load_dataset(ds.path)) != where


@pytest.mark.slow
def test_corpus_index_is_built_once_and_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hash_embedder: Any
) -> None:
    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))
    ds = load_dataset(write_jsonl(tmp_path / "qa.jsonl", HALUEVAL_ROWS))
    path, built = ensure_corpus_index(ds, embedder=hash_embedder)
    assert built and path == corpus_cache_dir(ds) / "index"
    meta = read_meta(path)
    assert meta["counts"]["documents"] == 2 and meta["embed_text"] == "text"
    with open_index(path) as idx:
        assert sorted(c.doc_id for c in idx.chunks(range(idx.size)).values()) == ["0", "1"]
    again, built = ensure_corpus_index(ds, embedder=hash_embedder)
    assert again == path and not built

    # An explicit --index holding another corpus is refused, not replaced.
    other = load_dataset(write_jsonl(tmp_path / "felm.jsonl", FELM_ROWS))
    with pytest.raises(UsageError, match="holds an index of other sources"):
        ensure_corpus_index(other, path, embedder=hash_embedder)
    target, built = ensure_corpus_index(other, tmp_path / "felm-index", embedder=hash_embedder)
    assert built and read_meta(target)["counts"]["documents"] == 1


def test_felm_rows_with_nan_response_are_checked_from_their_segments(tmp_path: Path) -> None:
    # FELM's published eval/all.jsonl has wk rows whose response is the JSON number NaN.
    path = tmp_path / "all.jsonl"
    nan_row = (
        '{"index": 3, "source": "quora", "prompt": "Who wrote Hamlet?", "response": NaN, '
        '"segmented_response": ["Hamlet was written by Shakespeare.", "It premiered in 1620."], '
        '"labels": [true, false], "comment": ["", "1600s"], "type": ["", "knowledge_error"], '
        '"ref": [], "ref_contents": [], "domain": "wk"}\n'
    )
    null_row = json.dumps(dict(FELM_ROWS[2], index="10", response=None)) + "\n"
    path.write_text(json.dumps(FELM_ROWS[0]) + "\n" + nan_row + null_row, encoding="utf-8")
    ds = load_dataset(path)
    assert ds.rebuilt_responses == [2, 3]
    assert len(ds.examples) == 3
    ex = ds.examples[1]
    assert ex.input.response == "Hamlet was written by Shakespeare. It premiered in 1620."
    assert [ex.input.response[s.start : s.end] for s in ex.input.segments] == [
        "Hamlet was written by Shakespeare.",
        "It premiered in 1620.",
    ]
    assert ex.segment_labels == (True, False)


BENCHMARKS = Path(__file__).parent / "data" / "benchmarks"


def test_halueval_rows_with_numbers_lists_and_nulls(tmp_path: Path) -> None:
    path = BENCHMARKS / "halueval-qa-odd-rows.jsonl"
    ds = load_dataset(path)
    assert ds.format == "halueval"
    answers = {e.input.id: e.input.response for e in ds.examples}
    # A number is the text it stands for; a list of strings is joined.
    assert answers["1-right"] == "1981"
    assert answers["5-right"] == "the Black Forest the Black Sea"
    assert ds.documents[2]["text"] == (
        "Mount Elbrus is a dormant volcano in the Caucasus. "
        "It is the highest peak in Russia and in Europe."
    )
    # A row with no text where text is expected is left out whole (both answers),
    # with one line naming file, line and field; the other rows run.
    assert ds.bad_rows == [
        f"{path}:4: field 'hallucinated_answer' is NaN; expected text",
        f"{path}:5: field 'question' is null; expected text",
        f"{path}:7: field 'knowledge' is an empty list; expected text",
    ]
    assert sorted({e.pair for e in ds.examples}) == ["0", "1", "2", "5"]
    assert all(isinstance(e.input.response, str) for e in ds.examples)
    # The corpus keeps the knowledge of rows whose answers were left out.
    assert [d["id"] for d in ds.documents] == ["0", "1", "2", "3", "4", "5"]


def test_fever_rows_with_float_ids_nulls_and_lists(tmp_path: Path) -> None:
    path = BENCHMARKS / "fever-odd-rows.jsonl"
    ds = load_dataset(path)
    assert ds.format == "fever" and ds.skipped == 1
    got = [(e.input.id, e.input.response, e.label) for e in ds.examples]
    assert got == [
        (91198, "Aristotle was born in Stagira.", True),
        (64721, "Aristotle was born in Rome.", False),  # 64721.0, as pandas writes ids
        (60461, "Aristotle studied at Plato's Academy.", True),
    ]
    assert ds.examples[2].evidence_titles == frozenset()  # evidence: null
    assert ds.bad_rows == [
        f"{path}:4: field 'claim' is null; expected text",
        f"{path}:5: field 'id' is NaN; expected a string or an integer",
        f"{path}:6: field 'label' is null; expected SUPPORTS, REFUTES or NOT ENOUGH INFO",
    ]


def test_a_file_of_only_bad_rows_stops_with_the_first(tmp_path: Path) -> None:
    rows = [dict(HALUEVAL_ROWS[0], right_answer=None), dict(HALUEVAL_ROWS[1], question={})]
    first = r"no labelled examples .*:1: field 'right_answer' is null"
    with pytest.raises(UsageError, match=first):
        load_dataset(write_jsonl(tmp_path / "qa.jsonl", rows))
    fever = [dict(FEVER_ROWS[0], label=["SUPPORTS"])]
    with pytest.raises(UsageError, match=r":1: field 'label' is a list; expected SUPPORTS"):
        load_dataset(write_jsonl(tmp_path / "v.jsonl", fever), "fever")
