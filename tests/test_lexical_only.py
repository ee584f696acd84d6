"""Indexes built without embedding: ``ceg index build --retrieval lexical`` (issue 48).

Such an index holds the passages and the lexical part only; the build never
loads a model, checks against it search by BM25 without being told (and say so
in the run's first line), and ``--retrieval dense|hybrid`` asked of it is one
line, exit 2. ``--append``, ``--resume`` and reader processes work as for any
build: the same passages as one build in one thread.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import MINI_WIKI
from multistream_fixture import make_multistream

import ceg_cli.index.build.builder
import ceg_cli.index.store
from ceg_cli.errors import UsageError
from ceg_cli.index import open_index
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.build.buildwork import BuildWork
from ceg_cli.index.indexdir import work_path

LEXICAL = BuildOptions(retrieval="lexical")


def _never(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("a lexical-only build or check loaded a model")


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to load an embedding model fails the test."""
    monkeypatch.setattr(ceg_cli.index.build.builder, "load_embedder", _never)
    monkeypatch.setattr(ceg_cli.index.store, "load_embedder", _never)


@pytest.fixture(scope="module")
def lexical_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("lexonly") / "index"
    build_index([MINI_WIKI], target, LEXICAL)
    return target


def _rows(index: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{index / 'chunks.sqlite'}?mode=ro", uri=True) as db:
        return db.execute("SELECT doc_id, title, ordinal, start, end, text, language "
                          "FROM chunks ORDER BY id").fetchall()


def test_a_lexical_build_writes_the_store_and_the_lexical_part_and_no_vectors(
    no_model: None, tmp_path: Path
) -> None:
    target = tmp_path / "index"
    report = build_index([MINI_WIKI], target, LEXICAL)
    meta = json.loads((target / "meta.json").read_text())
    assert meta["retrieval"] == "lexical" and meta["format_version"] == 2
    assert "model" not in meta and "faiss" not in meta
    assert meta["lexical"]["passages"] == meta["counts"]["chunks"] == report.total_chunks > 0
    assert sorted(p.name for p in target.iterdir()) == ["chunks.sqlite", "lexical", "meta.json"]
    # The same passages a build with vectors stores.
    dense = tmp_path / "dense"
    from conftest import HashEmbedder

    build_index([MINI_WIKI], dense, BuildOptions(), embedder=HashEmbedder())
    assert _rows(target) == _rows(dense)


def test_a_lexical_index_is_searched_by_bm25_with_no_cosine(
    no_model: None, lexical_index: Path
) -> None:
    with open_index(lexical_index) as index:
        assert index.lexical_only and index.size == index.meta["counts"]["chunks"]
        hits = index.search(["Alain Connes French mathematician"], 3, "lexical")[0]
        assert hits[0].chunk.title == "Alain Connes"
        assert all(h.score is None for h in hits)
        for method in ("dense", "hybrid"):
            with pytest.raises(UsageError, match=f"--retrieval {method}: .*--retrieval lexical"):
                index.search(["Alain Connes"], 3, method)
        with pytest.raises(UsageError, match="no model and no vectors"):
            index.embedder()


def _responses(tmp_path: Path) -> Path:
    path = tmp_path / "responses.jsonl"
    rows = [
        {"id": "connes", "question": "Who is Alain Connes?",
         "response": "Alain Connes is a French mathematician. He was born in 1947."},
        {"id": "wrong", "question": "Who is Alain Connes?",
         "response": "Alain Connes was born in 1912."},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_check_against_it_searches_lexically_without_being_told_and_says_so(
    no_model: None, lexical_index: Path, tmp_path: Path, run_cli: Any
) -> None:
    result = run_cli("check", _responses(tmp_path), "--index", lexical_index)
    assert result.exit_code == 0, result.stderr  # no gate asked for
    first = result.stderr.splitlines()[0]
    assert first.startswith("judge offline") and "retrieval lexical (BM25)" in first
    records = [json.loads(line) for line in result.stdout.splitlines()]
    right, wrong = records
    assert [s["label"] for s in right["segments"]] == ["factual", "factual"]
    assert right["segments"][0]["citations"][0]["title"] == "Alain Connes"
    assert all(e["similarity"] is None for s in right["segments"] for e in s["evidence"])
    assert wrong["segments"][0]["label"] == "nonfactual"


@pytest.mark.parametrize(("args", "env"), [
    (["--retrieval", "dense"], None),
    (["--retrieval", "hybrid"], None),  # asked for, not the default: refused too
    ([], {"CEG_RETRIEVAL": "hybrid"}),
])
def test_dense_or_hybrid_asked_of_it_is_one_line(
    no_model: None, lexical_index: Path, tmp_path: Path, run_cli: Any,
    args: list[str], env: dict[str, str] | None,
) -> None:
    out = tmp_path / "out.jsonl"
    result = run_cli("check", _responses(tmp_path), "--index", lexical_index, "--out", out,
                     *args, env=env)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "was built with --retrieval lexical" in lines[0]
    assert not out.exists()


def test_search_info_and_eval_read_it(
    no_model: None, lexical_index: Path, tmp_path: Path, run_cli: Any
) -> None:
    found = run_cli("index", "search", "Alain Connes mathematician", "--index", lexical_index,
                    "--json", "-k", "2")
    assert found.exit_code == 0, found.stderr
    first = json.loads(found.stdout.splitlines()[0])
    assert first["title"] == "Alain Connes" and first["score"] is None
    info = run_cli("index", "info", "--index", lexical_index)
    assert info.exit_code == 0 and "built with --retrieval lexical" in info.stdout
    data = tmp_path / "eval.jsonl"
    data.write_text(json.dumps({"response": "Alain Connes is a French mathematician.",
                                "label": "factual"}) + "\n"
                    + json.dumps({"response": "Alain Connes was born in 1912.",
                                  "label": "nonfactual"}) + "\n")
    metrics_file = tmp_path / "metrics.json"
    evaluated = run_cli("eval", data, "--index", lexical_index, "--json", metrics_file)
    assert evaluated.exit_code == 0, evaluated.stderr
    assert "retrieval lexical (BM25)" in evaluated.stderr
    metrics = json.loads(metrics_file.read_text())
    assert metrics["run"]["retrieval"] == "lexical"


def test_the_api_checks_against_it(no_model: None, lexical_index: Path) -> None:
    from ceg_cli import Checker

    with Checker(index=lexical_index) as checker:
        result = checker.check("Alain Connes is a French mathematician.")
    assert result.label == "factual"
    assert result.segments[0].citations[0].similarity is None


@pytest.mark.parametrize(("options", "said"), [
    (BuildOptions(retrieval="lexical", model="all-MiniLM-L6-v2"), "--model all-MiniLM-L6-v2"),
    (BuildOptions(retrieval="lexical", index_type="hnsw"), "--index-type hnsw"),
    (BuildOptions(retrieval="lexical", lexical=False), "--no-lexical"),
    (BuildOptions(retrieval="sparse"), "--retrieval sparse"),
])
def test_options_a_lexical_build_cannot_use_are_refused_before_anything_is_written(
    tmp_path: Path, options: BuildOptions, said: str
) -> None:
    target = tmp_path / "index"
    with pytest.raises(UsageError, match=said):
        build_index([MINI_WIKI], target, options)
    assert not target.exists() and not work_path(target).exists()


def test_append_keeps_its_kind(no_model: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                               ) -> None:
    target = tmp_path / "index"
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "z1", "title": "Zorblat",
                                "text": "Zorblat is a moon of the planet Quenzor."}) + "\n")
    build_index([MINI_WIKI], target, LEXICAL)
    before = _rows(target)
    build_index([MINI_WIKI, docs], target, BuildOptions(retrieval="lexical", append=True))
    after = _rows(target)
    assert after[: len(before)] == before and after[-1][1] == "Zorblat"
    with open_index(target) as index:
        assert index.search(["moon of Quenzor"], 1, "lexical")[0][0].chunk.title == "Zorblat"
    with pytest.raises(UsageError, match="append to it with --retrieval lexical"):
        build_index([docs], target, BuildOptions(append=True))
    # And the other way: no passages without vectors in an index that has them.
    from conftest import HashEmbedder

    dense = tmp_path / "dense"
    build_index([MINI_WIKI], dense, BuildOptions(), embedder=HashEmbedder())
    with pytest.raises(UsageError, match="has vectors"):
        build_index([docs], dense, BuildOptions(retrieval="lexical", append=True))


def test_a_stopped_lexical_build_resumed_equals_an_uninterrupted_one(
    no_model: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ceg_cli.index.build.builder, "EMBED_CALL_SIZE", 4)
    monkeypatch.setattr(ceg_cli.index.build.builder, "SHARD_PASSAGES", 10)
    whole = tmp_path / "whole"
    one_thread = BuildOptions(retrieval="lexical", workers=1)  # commits every 10 passages
    build_index([MINI_WIKI], whole, one_thread)
    real = BuildWork.commit
    calls = {"n": 0}

    def stop_on_third(self: BuildWork, *args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        real(self, *args, **kwargs)

    monkeypatch.setattr(BuildWork, "commit", stop_on_third)
    target = tmp_path / "index"
    with pytest.raises(KeyboardInterrupt):
        build_index([MINI_WIKI], target, one_thread)
    assert work_path(target).is_dir() and not target.exists()
    monkeypatch.setattr(BuildWork, "commit", real)
    report = build_index([MINI_WIKI], target,
                         BuildOptions(retrieval="lexical", workers=1, resume=True))
    assert report.resumed_chunks > 0
    assert _rows(target) == _rows(whole)
    assert not work_path(target).exists()


def test_reader_processes_give_the_same_index(
    no_model: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """And a lexical build reads with a process on every core unless told otherwise."""
    import ceg_cli.corpus.ranges

    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_BYTES", 1000)
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_PAGES", 2)
    dump, _ = make_multistream(MINI_WIKI, tmp_path / "ms", per_stream=2)
    one = tmp_path / "one"
    two = tmp_path / "two"
    build_index([dump], one, BuildOptions(retrieval="lexical", workers=1))
    report = build_index([dump], two, BuildOptions(retrieval="lexical"))
    assert _rows(one) == _rows(two)
    from ceg_cli.index.build.processes import available_cores

    assert report.workers == min(available_cores(), 4)  # no more than its 4 ranges


def test_lexical_max_terms_reaches_a_tantivy_part_and_is_said_ignored_on_bm25s(
    no_model: None, lexical_index: Path, tmp_path: Path, run_cli: Any
) -> None:
    from ceg_cli.index.lexical.lexical_tantivy import TantivyLexical

    target = tmp_path / "tantivy"
    build_index([MINI_WIKI], target, BuildOptions(retrieval="lexical", lexical_engine="tantivy"))
    query = "the French mathematician Alain Connes and the philosopher Aristotle"
    exact = TantivyLexical(target / "lexical", None, json.loads(
        (target / "meta.json").read_text())["lexical"].get("tokenizer"))
    rarest = TantivyLexical(target / "lexical", None, exact.tokenizer, max_terms=1)
    want_all = exact.ranked([query], 3)[0][0]
    want_one = rarest.ranked([query], 3)[0][0]
    assert want_all != want_one  # one term alone finds other passages first
    for flags, want in (([], want_all), (["--lexical-max-terms", "1"], want_one)):
        found = run_cli("index", "search", query, "--index", target, "--json", "-k", "3", *flags)
        assert found.exit_code == 0, found.stderr
        got = [json.loads(line)["passage_id"] for line in found.stdout.splitlines()]
        assert got == want[:3]
    said = run_cli("index", "search", query, "--index", lexical_index, "--lexical-max-terms",
                   "1")
    assert said.exit_code == 0
    assert "--lexical-max-terms 1: ignored" in said.stderr and "bm25s" in said.stderr


def test_a_large_tantivy_part_is_searched_with_its_rarest_terms_unless_told(
    no_model: None, tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past AUTO_MAX_TERMS_PASSAGES (2,000,000; made 1 here) the default search takes
    each query's AUTO_MAX_TERMS rarest terms and says so; 0 searches every term."""
    import ceg_cli.index.store
    from ceg_cli.index.lexical.lexical_tantivy import TantivyLexical

    target = tmp_path / "tantivy"
    build_index([MINI_WIKI], target, BuildOptions(retrieval="lexical", lexical_engine="tantivy"))
    query = "the French mathematician Alain Connes and the philosopher Aristotle"
    tokenizer = json.loads((target / "meta.json").read_text())["lexical"].get("tokenizer")
    want_all = TantivyLexical(target / "lexical", None, tokenizer).ranked([query], 3)[0][0]
    want_one = TantivyLexical(target / "lexical", None, tokenizer,
                              max_terms=1).ranked([query], 3)[0][0]
    assert want_all != want_one
    monkeypatch.setattr(ceg_cli.index.store, "AUTO_MAX_TERMS", 1)

    def search(*flags: str) -> tuple[list[int], str]:
        found = run_cli("index", "search", query, "--index", target, "--json", "-k", "3", *flags)
        assert found.exit_code == 0, found.stderr
        return [json.loads(line)["passage_id"] for line in found.stdout.splitlines()], \
            found.stderr

    got, said = search()  # the mini wiki is below the size: every term, nothing said
    assert got == want_all[:3] and "rarest" not in said
    monkeypatch.setattr(ceg_cli.index.store, "AUTO_MAX_TERMS_PASSAGES", 1)
    got, said = search()
    assert got == want_one[:3]
    assert "searched with each query's 1 rarest terms" in said and "--lexical-max-terms 0" in said
    got, said = search("--lexical-max-terms", "0")
    assert got == want_all[:3] and "rarest" not in said


def test_a_decomposed_query_finds_what_the_composed_one_finds(
    no_model: None, lexical_index: Path
) -> None:
    """Issue 51 item 2 in retrieval: BM25 reads terms in NFC, so an answer pasted from
    macOS (NFD) searches the same terms; before, 'Collège' split at its accent."""
    import unicodedata

    from ceg_cli.lang.tokenize import Analyzer

    composed = "Alain Connes, Professor at the Collège de France and IHÉS"
    decomposed = unicodedata.normalize("NFD", composed)
    assert decomposed != composed
    for language in ("en", "fr"):
        assert Analyzer(language)(decomposed) == Analyzer(language)(composed)
    with open_index(lexical_index) as index:
        nfc = index.search([composed], 5, "lexical")[0]
        nfd = index.search([decomposed], 5, "lexical")[0]
    assert [h.chunk_id for h in nfd] == [h.chunk_id for h in nfc]
