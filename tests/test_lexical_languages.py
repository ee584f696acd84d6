"""BM25 per language (issue 39.5): each passage read in its document's language, queries in
the union of the index's; English and older indexes exactly as before."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import HashEmbedder

from ceg_cli.index import CHUNKS_FILE, META_FILE, open_index
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.lexical.bm25 import BM25_PARAMS, LEXICAL_DIR, LexicalIndex
from ceg_cli.index.lexical.lexlang import TOKENIZER, is_legacy, query_tokens

DOCS = [
    {"id": "de", "title": "Aristoteles",
     "text": "Aristoteles wurde in Stagira geboren. Er war der Lehrer Alexanders des Großen "
             "und gründete in Athen das Lykeion."},
    {"id": "zh", "title": "亚里士多德",
     "text": "亚里士多德出生于斯塔基拉。他是亚历山大大帝的老师。他在雅典建立了吕克昂学园。"},
    {"id": "ar", "title": "أرسطو",
     "text": "وُلِدَ أرسطو في مدينة ستاغيرا. كان معلّم الإسكندر الأكبر وأسّس مدرسة في أثينا."},
    {"id": "en", "title": "Rivers",
     "text": "The Danube flows through Vienna, Budapest and Belgrade before it reaches the "
             "Black Sea."},
]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def mixed_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("mixed")
    target = tmp / "index"
    build_index([write_jsonl(tmp / "docs.jsonl", DOCS)], target, BuildOptions(lexical=True),
                embedder=HashEmbedder())
    return target


def lexical_top(index_dir: Path, query: str) -> str:
    with open_index(index_dir) as idx:
        idx.use_embedder(HashEmbedder())
        return idx.search([query], 1, "lexical")[0][0].chunk.doc_id


def test_the_index_records_each_document_s_language(mixed_index: Path) -> None:
    meta = json.loads((mixed_index / META_FILE).read_text(encoding="utf-8"))
    assert meta["language"] == "auto"
    assert meta["languages"] == {"ar": 1, "de": 1, "en": 1, "zh": 1}
    tokenizer = meta["lexical"]["tokenizer"]
    assert tokenizer["analyzer"] == "ceg_cli.lang"
    assert set(tokenizer["languages"]) == {"ar", "de", "en", "zh"}
    assert tokenizer["analyzers"]["de"]["stemmer"] == "snowball:german"
    assert tokenizer["analyzers"]["en"] == TOKENIZER
    assert meta["chunker"]["chars_per_word"]["zh"] == 1.8
    db = sqlite3.connect(mixed_index / CHUNKS_FILE)
    assert dict(db.execute("SELECT doc_id, language FROM chunks")) == {
        "de": "de", "zh": "zh", "ar": "ar", "en": "en"}


@pytest.mark.parametrize(
    ("query", "doc"),
    [
        # An inflected form finds the German stem ("Lehrers" / "Lehrer").
        ("Wer war des Lehrers Schüler?", "de"),
        # Chinese by character bigrams: no word of the query is a whole clause of the passage.
        ("亚历山大的老师是谁", "zh"),
        # Arabic: a query written without hamza or diacritics finds the passage with them.
        ("من هو معلم الاسكندر", "ar"),
        # An English query finds the German passage by the name they share.
        ("Where was Aristoteles born, Stagira?", "de"),
        ("Which river flows through Budapest?", "en"),
    ],
)
def test_queries_find_their_passage_in_any_language(mixed_index: Path, query: str,
                                                    doc: str) -> None:
    assert lexical_top(mixed_index, query) == doc


@pytest.mark.parametrize("method", ["lexical", "hybrid"])
def test_a_batch_of_queries_in_several_languages_finds_what_each_finds_alone(
    mixed_index: Path, method: str
) -> None:
    # A check batch's queries are tokenized together (lexlang.queries_tokens): each must
    # still be read in the index's languages, as one searched alone is.
    queries = ["Wer war des Lehrers Schüler?", "亚历山大的老师是谁", "من هو معلم الاسكندر",
               "Which river flows through Budapest?", "zzz"]
    with open_index(mixed_index) as idx:
        idx.use_embedder(HashEmbedder())
        together = idx.search(queries, 3, method)
        alone = [idx.search([q], 3, method)[0] for q in queries]
    assert [[(h.chunk_id, round(h.score, 6)) for h in hits] for hits in together] == [
        [(h.chunk_id, round(h.score, 6)) for h in hits] for hits in alone]
    assert [hits[0].chunk.doc_id for hits in together[:4]] == ["de", "zh", "ar", "en"]


def test_an_english_index_records_and_uses_bm25s_tokenizer_as_before(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "docs.jsonl", [DOCS[3], {
        "id": "en2", "title": "Mountains",
        "text": "Mont Blanc is the highest mountain of the Alps, at 4,806 metres."}])
    for language in ("auto", "en"):
        target = tmp_path / f"index-{language}"
        build_index([source], target, BuildOptions(lexical=True, language=language),
                    embedder=HashEmbedder())
        meta = json.loads((target / META_FILE).read_text(encoding="utf-8"))
        assert meta["lexical"]["tokenizer"] == TOKENIZER
        assert meta["languages"] == {"en": 2}


def test_a_language_named_for_the_build_is_every_document_s(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "docs.jsonl", DOCS[:2])
    target = tmp_path / "index"
    build_index([source], target, BuildOptions(lexical=True, language="de"),
                embedder=HashEmbedder())
    meta = json.loads((target / META_FILE).read_text(encoding="utf-8"))
    assert meta["language"] == "de" and meta["languages"] == {"de": 2}
    assert list(meta["lexical"]["tokenizer"]["languages"]) == ["de"]


# --- an index an older ceg built -------------------------------------------------------


def test_a_bm25_index_with_the_old_tokenizer_searches_exactly_as_before(tmp_path: Path) -> None:
    """A fixture made as ceg made the lexical part before languages (bm25s.tokenize with
    the recorded arguments), opened with its recorded tokenizer, or with none recorded:
    every score is the one bm25s computes the old way."""
    import bm25s

    texts = ["Aristotle was born in Stagira in 384 BC.",
             "The Danube flows through Vienna and Budapest.",
             "Straße naïve café: Ｔｏｋｙｏ and İstanbul."]
    old = bm25s.BM25(**BM25_PARAMS)
    old.index(bm25s.tokenize(texts, **TOKENIZER, show_progress=False), show_progress=False)
    old.save(str(tmp_path / LEXICAL_DIR), show_progress=False)
    queries = ["Where was Aristotle born?", "Vienna Budapest", "strasse tokyo istanbul"]
    for recorded in (dict(TOKENIZER), None):
        index = LexicalIndex(tmp_path / LEXICAL_DIR, len(texts), recorded)
        assert is_legacy(index.tokenizer)
        for query in queries:
            tokens = bm25s.tokenize([query], **TOKENIZER, return_ids=False,
                                    show_progress=False)[0]
            assert query_tokens(query, recorded) == tokens
            ids = old.get_tokens_ids(tokens)
            expected = (np.asarray(old.get_scores_from_ids(ids)) if ids
                        else np.zeros(len(texts), dtype=np.float32))
            assert np.array_equal(index.scores(query), expected)


def test_appending_to_an_index_without_a_language_column_reads_its_passages_as_english(
    tmp_path: Path,
) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", [DOCS[3]])
    target = tmp_path / "index"
    build_index([first], target, BuildOptions(lexical=True), embedder=HashEmbedder())
    # As an older ceg wrote it: no language column.
    db = sqlite3.connect(target / CHUNKS_FILE)
    db.execute("ALTER TABLE chunks DROP COLUMN language")
    db.commit()
    db.close()
    second = write_jsonl(tmp_path / "b.jsonl", [DOCS[0]])
    build_index([second], target, BuildOptions(lexical=True, append=True),
                embedder=HashEmbedder())
    meta = json.loads((target / META_FILE).read_text(encoding="utf-8"))
    assert meta["languages"] == {"de": 1, "en": 1}
    assert lexical_top(target, "Lehrer Alexanders") == "de"
    assert lexical_top(target, "Danube Vienna") == "en"


def test_a_word_snowball_stems_to_nothing_is_no_query_term() -> None:
    """Snowball's Greek stemmer makes "Όταν" (when) an empty term; bm25s gave it an id past
    its matrix, and BM25 over Greek contexts failed with a ValueError for any question or
    sentence holding the word (XNLI's Greek pairs stopped the benchmark)."""
    from ceg_cli.check.ctxsearch import _Bm25
    from ceg_cli.lang.tokenize import analyzer

    assert analyzer("el")("Όταν") == [""]  # the stemmer's doing: the index keeps its terms
    query = "Όταν είπα το ναι, αποφασίσαμε να παντρευτούμε εκείνη την ημέρα."
    assert "" not in query_tokens(query, {"languages": {"el": 1}})
    bm25 = _Bm25(["Και ήμουν εντάξει, και αυτό ήταν την ημέρα εκείνη!"], ["el"])
    scores = bm25.scores(query)
    assert scores.shape == (1,) and scores[0] > 0


def test_a_querys_own_stop_words_are_searched_in_no_language() -> None:
    """Italian's analyzer keeps English "the" and "of": unfiltered, they were rare
    terms of an index's few Italian passages, found first for any English query."""
    mixed = {"analyzer": "ceg_cli.lang", "languages": {"en": 10, "it": 1}}
    terms = query_tokens("Who was the mayor of the town on the river?", mixed)
    assert not {"the", "of", "was", "on"} & set(terms)
    assert {"mayor", "town", "river"} <= set(terms)
    # A German query on an English index keeps its content words in both, not "war".
    german = query_tokens("Wer war des Lehrers Schüler?", {"analyzer": "ceg_cli.lang",
                                                            "languages": {"en": 10, "de": 1}})
    assert "war" not in german and "des" not in german and "lehr" in german


def test_a_passage_of_another_language_quoting_english_is_not_found_by_stop_words(
    tmp_path: Path,
) -> None:
    docs = [
        {"id": "ulm", "title": "Ulm",
         "text": "Ulm is a city on the Danube in Baden-Württemberg. Albert Einstein was "
                 "born there in 1879."},
        {"id": "vienna", "title": "Vienna",
         "text": "Vienna is the capital of Austria and lies on the Danube as well."},
        {"id": "it", "title": "Romanzo",
         "text": "Il romanzo «The End of the Affair of the Heart of the Matter of the Day» è "
                 "stato pubblicato a Milano nel 1951 ed è ambientato in una piccola città."},
    ]
    target = tmp_path / "index"
    build_index([write_jsonl(tmp_path / "docs.jsonl", docs)], target,
                BuildOptions(lexical=True), embedder=HashEmbedder())
    meta = json.loads((target / META_FILE).read_text(encoding="utf-8"))
    assert meta["languages"] == {"en": 2, "it": 1}
    assert lexical_top(target, "In which of the cities of the world was Einstein born?") == "ulm"
