"""Building an index: meta.json, stores that agree, --append, crash safety."""

from __future__ import annotations

import bz2
import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from reliability_harness import leftovers as _no_leftovers

from ceg_cli import __version__
from ceg_cli.corpus import iter_documents
from ceg_cli.errors import InputError, UsageError
from ceg_cli.index import FORMAT_VERSION, embed_text, open_index
from ceg_cli.index.build.builder import BuildOptions, build_index, source_digest
from ceg_cli.index.build.chunking import chunk_document
from ceg_cli.index.dense.embedding import DEFAULT_MODEL, Embedder

DATA = Path(__file__).parent / "data"
BGWIKI = DATA / "wiki" / "bgwiki-utf16-sample.xml.bz2"
TRUNCATED = DATA / "hostile" / "truncated.xml.bz2"
MINI_TITLES = {"Aristotle", "Actrius", "Animalia (book)", "Alain Connes"}
REDIRECT_TITLES = {
    "AccessibleComputing",
    "AlexanderTheGreat",
    "Wikipedia:Adding Wikipedia articles to Nupedia",  # namespace 4, and a redirect
}


class SpyEmbedder:
    """Wraps an embedder and records every text it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)


class FailingEmbedder:
    """Embeds ``calls_ok`` batches, then raises ``error``."""

    def __init__(self, inner: Embedder, error: BaseException, calls_ok: int = 1) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.error = error
        self.calls_left = calls_ok

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.calls_left == 0:
            raise self.error
        self.calls_left -= 1
        return self.inner.embed(texts)


def _write_jsonl(path: Path, docs: Sequence[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


def _rows(index_dir: Path) -> list[tuple]:
    db = sqlite3.connect(index_dir / "chunks.sqlite")
    try:
        return db.execute(
            "SELECT id, doc_id, title, ordinal, start, end, text, source FROM chunks ORDER BY id"
        ).fetchall()
    finally:
        db.close()


def _meta(index_dir: Path) -> dict:
    return json.loads((index_dir / "meta.json").read_text(encoding="utf-8"))


def _assert_consistent(index_dir: Path) -> dict:
    """Counts in meta.json, rows in SQLite and vectors in FAISS all agree."""
    meta = _meta(index_dir)
    rows = _rows(index_dir)
    with open_index(index_dir) as idx:
        assert idx.size == len(rows) == meta["counts"]["chunks"]
    assert [r[0] for r in rows] == list(range(len(rows)))  # row id == vector id
    assert meta["counts"]["documents"] == len({(r[7], r[1]) for r in rows})
    assert meta["counts"]["documents"] == sum(s["documents"] for s in meta["sources"])
    assert meta["counts"]["chunks"] == sum(s["chunks"] for s in meta["sources"])
    return meta


def _assert_vectors_match_rows(index_dir: Path, embedder: Embedder) -> None:
    """Re-embed every stored passage: each must sit under its own vector id."""
    import faiss

    vectors = faiss.read_index(str(index_dir / "vectors.faiss"))
    stored = vectors.reconstruct_n(0, vectors.ntotal)
    with open_index(index_dir) as idx:
        chunks = idx.chunks(range(idx.size))
        mode = idx.meta["embed_text"]
    fresh = embedder.embed([embed_text(chunks[i], mode) for i in range(len(stored))])
    assert np.sum(fresh * stored, axis=1).min() > 0.999


# --- a fresh build ------------------------------------------------------------


@pytest.mark.slow
def test_meta_json_describes_the_index(mini_index: Path, mini_wiki: Path) -> None:
    meta = _assert_consistent(mini_index)
    assert meta["format_version"] == FORMAT_VERSION
    assert meta["ceg_version"] == __version__
    assert meta["model"]["name"] == DEFAULT_MODEL
    assert meta["model"]["dimension"] == 384
    assert meta["model"]["normalized"] is True
    assert meta["embed_text"] == "title+text"
    assert meta["chunker"]["max_words"] == 100
    assert meta["counts"] == {"documents": 4, "chunks": len(_rows(mini_index))}
    (source,) = meta["sources"]
    assert source["path"] == str(mini_wiki.resolve())
    assert source["kind"] == "mediawiki"
    assert source["digest"] == source_digest(mini_wiki)
    assert source["digest"].startswith("sha256:") and len(source["digest"]) == 7 + 64
    assert source["size"] == mini_wiki.stat().st_size
    assert source["namespaces"] == [0]
    created = datetime.fromisoformat(meta["created_at"])
    updated = datetime.fromisoformat(meta["updated_at"])
    assert created.tzinfo is not None
    assert created == updated
    assert sorted(p.name for p in mini_index.iterdir()) == [
        "chunks.sqlite",
        "lexical",
        "meta.json",
        "vectors.faiss",
    ]


@pytest.mark.slow
def test_redirects_and_other_namespaces_are_left_out(mini_index: Path, mini_wiki: Path) -> None:
    raw = bz2.decompress(mini_wiki.read_bytes()).decode("utf-8")
    for title in REDIRECT_TITLES:  # they are in the dump, as redirects
        page = raw[raw.index(f"<title>{title}</title>") :].split("</page>", 1)[0]
        assert "<redirect title=" in page
    assert "<ns>4</ns>" in raw
    titles = {r[2] for r in _rows(mini_index)}
    assert titles == MINI_TITLES
    assert not titles & REDIRECT_TITLES


@pytest.mark.slow
def test_stored_passages_are_exact_slices_of_their_documents(
    mini_index: Path, mini_wiki: Path
) -> None:
    docs = {d.title: d for d in iter_documents(mini_wiki)}
    aristotle = docs["Aristotle"]
    rows = [r for r in _rows(mini_index) if r[1] == aristotle.id]
    assert len(rows) > 100
    assert [r[3] for r in rows] == list(range(len(rows)))
    for _, _, _, _, start, end, text, source in rows:
        assert aristotle.text[start:end] == text
        assert source == str(mini_wiki.resolve())
    # The builder stores exactly what the chunker makes, for every document.
    stored = {(r[1], r[3]): (r[4], r[5], r[6]) for r in _rows(mini_index)}
    expected = {
        (d.id, c.ordinal): (c.start, c.end, c.text)
        for d in docs.values()
        for c in chunk_document(d, 100)
    }
    assert stored == expected


@pytest.mark.slow
def test_namespace_4_page_is_a_redirect_so_stays_out(
    tmp_path: Path, mini_wiki: Path, hash_embedder: Embedder
) -> None:
    # The enwiki sample's one namespace-4 page is a redirect: asking for
    # namespace 4 must not let a redirect in.
    options = BuildOptions(namespaces=frozenset({0, 4}))
    report = build_index([mini_wiki], tmp_path / "ix", options, embedder=hash_embedder)
    assert report.documents == 4
    assert {r[2] for r in _rows(tmp_path / "ix")} == MINI_TITLES


@pytest.mark.slow
def test_namespace_option_adds_project_pages(tmp_path: Path, hash_embedder: Embedder) -> None:
    # Real namespace-4 pages (not redirects) live in the Bulgarian sample.
    default = build_index([BGWIKI], tmp_path / "a", embedder=hash_embedder)
    options = BuildOptions(namespaces=frozenset({0, 4}))
    wider = build_index([BGWIKI], tmp_path / "b", options, embedder=hash_embedder)
    assert default.documents == 1
    assert wider.documents == 3
    titles = {r[2] for r in _rows(tmp_path / "b")}
    assert "Уикипедия:Редактиране на страници" in titles
    assert "Уикипедия:Редактиране на страници" not in {r[2] for r in _rows(tmp_path / "a")}
    meta = _assert_consistent(tmp_path / "b")
    assert meta["sources"][0]["namespaces"] == [0, 4]


def test_bad_arguments_fail_before_anything_is_written(tmp_path: Path, hash_embedder) -> None:
    target = tmp_path / "ix"
    with pytest.raises(InputError, match="missing.xml: no such file"):
        build_index([tmp_path / "missing.xml"], target, embedder=hash_embedder)
    docs = _write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "title": "T", "text": "Some text."}])
    with pytest.raises(UsageError, match="--chunk-words 5"):
        build_index([docs], target, BuildOptions(chunk_words=5), embedder=hash_embedder)
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        build_index([docs], tmp_path / "file", embedder=hash_embedder)
    assert not target.exists()
    assert _no_leftovers(target) == []


def test_a_foreign_directory_is_refused(tmp_path: Path, hash_embedder: Embedder) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "thesis.tex").write_text("precious\n")
    docs = _write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "title": "T", "text": "Some text."}])
    with pytest.raises(UsageError) as err:
        build_index([docs], target, embedder=hash_embedder)
    assert "thesis.tex" in str(err.value)
    assert "not a ceg index" in str(err.value)
    assert sorted(p.name for p in target.iterdir()) == ["thesis.tex"]
    assert (target / "thesis.tex").read_text() == "precious\n"
    assert _no_leftovers(target) == []


@pytest.mark.slow
def test_a_directory_with_only_a_readme_is_built_into(
    tmp_path: Path, hash_embedder: Embedder
) -> None:
    target = tmp_path / "index"
    target.mkdir()
    (target / "README.md").write_text("Build the index here.\n")
    docs = _write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "title": "T", "text": "Some text."}])
    for _ in range(2):  # the first build and a rebuild over it both keep the README
        build_index([docs], target, embedder=hash_embedder)
        assert (target / "README.md").read_text() == "Build the index here.\n"
        assert sorted(p.name for p in target.iterdir()) == [
            "README.md",
            "chunks.sqlite",
            "lexical",
            "meta.json",
            "vectors.faiss",
        ]
        assert _assert_consistent(target)["counts"] == {"documents": 1, "chunks": 1}
    assert _no_leftovers(target) == []


@pytest.mark.slow
def test_stale_temporary_directory_of_a_dead_build_is_removed(
    tmp_path: Path, hash_embedder: Embedder
) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = tmp_path / f".index.building-{int(dead.stdout)}"
    stale.mkdir()
    (stale / "owner").write_text(dead.stdout, encoding="ascii")  # the mark every build leaves
    (stale / "vectors.faiss").write_bytes(b"half")
    docs = _write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "title": "T", "text": "Some text."}])
    build_index([docs], tmp_path / "index", embedder=hash_embedder)
    assert not stale.exists()


# --- --append -----------------------------------------------------------------

EXTRA_DOCS = [
    {"id": "q1", "title": "Quokka", "text": "The quokka is a small macropod about the size "
     "of a domestic cat. It lives on Rottnest Island off Western Australia."},
    {"id": "q2", "title": "Zebu", "text": "The zebu is a species of domestic cattle "
     "originating in South Asia, with a fatty hump on its shoulders."},
]  # fmt: skip


@pytest.mark.slow
def test_append_embeds_only_the_new_source(
    index_copy: Path, tmp_path: Path, embedder: Embedder, mini_wiki: Path
) -> None:
    before = _rows(index_copy)
    docs = _write_jsonl(tmp_path / "extra.jsonl", EXTRA_DOCS)
    spy = SpyEmbedder(embedder)
    report = build_index([mini_wiki, docs], index_copy, BuildOptions(append=True), embedder=spy)

    assert report.unchanged == [str(mini_wiki)]
    assert report.replaced == []
    assert (report.documents, report.chunks) == (2, 2)
    assert spy.texts == ["Quokka. " + EXTRA_DOCS[0]["text"], "Zebu. " + EXTRA_DOCS[1]["text"]]
    after = _rows(index_copy)
    assert after[: len(before)] == before
    assert [r[1] for r in after[len(before) :]] == ["q1", "q2"]
    meta = _assert_consistent(index_copy)
    assert meta["counts"] == {"documents": 6, "chunks": len(before) + 2}
    assert [s["kind"] for s in meta["sources"]] == ["mediawiki", "jsonl"]
    assert meta["sources"][1]["digest"] == source_digest(docs)
    with open_index(index_copy) as idx:
        idx.use_embedder(embedder)
        top = idx.search(["marsupial on Rottnest Island", "humped cattle from India"], k=1)
    assert [hits[0].chunk.doc_id for hits in top] == ["q1", "q2"]


@pytest.mark.slow
def test_append_keeps_created_at_and_moves_updated_at(
    index_copy: Path, tmp_path: Path, hash_embedder: Embedder
) -> None:
    old = _meta(index_copy)
    meta_path = index_copy / "meta.json"
    # Backdate the recorded times so that a second-resolution clock still shows a change.
    old["created_at"] = old["updated_at"] = "2001-01-01T00:00:00+00:00"
    meta_path.write_text(json.dumps(old))
    docs = _write_jsonl(tmp_path / "extra.jsonl", EXTRA_DOCS)
    spy = SpyEmbedder(hash_embedder)
    spy.name = DEFAULT_MODEL  # the fake stands in for the index's own model
    build_index([docs], index_copy, BuildOptions(append=True), embedder=spy)
    new = _meta(index_copy)
    assert new["created_at"] == "2001-01-01T00:00:00+00:00"
    assert new["updated_at"] > "2001-01-01T00:00:00+00:00"


@pytest.mark.slow
def test_append_of_unchanged_sources_embeds_nothing(
    index_copy: Path, mini_wiki: Path, embedder: Embedder
) -> None:
    before_rows, before_meta = _rows(index_copy), _meta(index_copy)
    spy = SpyEmbedder(embedder)
    report = build_index([mini_wiki], index_copy, BuildOptions(append=True), embedder=spy)
    assert spy.texts == []
    assert report.unchanged == [str(mini_wiki)]
    assert (report.documents, report.chunks) == (0, 0)
    assert (report.total_documents, report.total_chunks) == (4, len(before_rows))
    assert _rows(index_copy) == before_rows
    assert _meta(index_copy)["sources"] == before_meta["sources"]
    assert _meta(index_copy)["counts"] == before_meta["counts"]


@pytest.mark.slow
def test_append_of_a_changed_source_replaces_its_passages(
    index_copy: Path, tmp_path: Path, embedder: Embedder
) -> None:
    docs = _write_jsonl(tmp_path / "extra.jsonl", EXTRA_DOCS)
    build_index([docs], index_copy, BuildOptions(append=True), embedder=embedder)
    with_extra = _rows(index_copy)

    changed = [{"id": "q1", "title": "Quokka", "text": "Quokkas are herbivorous and "
                "mainly nocturnal marsupials."}]  # fmt: skip
    _write_jsonl(docs, changed)
    spy = SpyEmbedder(embedder)
    report = build_index([docs], index_copy, BuildOptions(append=True), embedder=spy)

    assert report.replaced == [str(docs.resolve())]
    assert spy.texts == ["Quokka. " + changed[0]["text"]]
    after = _rows(index_copy)
    texts = [r[6] for r in after]
    assert EXTRA_DOCS[0]["text"] not in texts
    assert EXTRA_DOCS[1]["text"] not in texts
    assert changed[0]["text"] in texts
    assert len(after) == len(with_extra) - 1
    meta = _assert_consistent(index_copy)
    assert meta["counts"]["documents"] == 5
    assert [s["path"] for s in meta["sources"]].count(str(docs.resolve())) == 1
    assert meta["sources"][-1]["digest"] == source_digest(docs)


@pytest.mark.slow
def test_replacing_an_earlier_source_renumbers_the_later_ones(
    tmp_path: Path, embedder: Embedder
) -> None:
    # The first source's rows are dropped: the rows after them must move down
    # together with their vectors.
    first = _write_jsonl(tmp_path / "first.jsonl", EXTRA_DOCS)
    second = _write_jsonl(tmp_path / "second.jsonl", [
        {"id": "s1", "title": "Sundial", "text": "A sundial tells the time of day from the "
         "position of the Sun. Its gnomon casts a shadow onto a plate."},
        {"id": "s2", "title": "Teapot", "text": "A teapot is a vessel for steeping tea leaves "
         "in boiling water."},
    ])  # fmt: skip
    target = tmp_path / "index"
    build_index([first, second], target, embedder=embedder)
    _write_jsonl(first, EXTRA_DOCS[1:])
    build_index([first], target, BuildOptions(append=True), embedder=embedder)
    rows = _rows(target)
    assert [r[1] for r in rows] == ["s1", "s2", "q2"]
    _assert_consistent(target)
    _assert_vectors_match_rows(target, embedder)


@pytest.mark.slow
def test_append_to_no_index_builds_one(tmp_path: Path, hash_embedder: Embedder) -> None:
    docs = _write_jsonl(tmp_path / "extra.jsonl", EXTRA_DOCS)
    report = build_index([docs], tmp_path / "ix", BuildOptions(append=True), embedder=hash_embedder)
    assert (report.total_documents, report.total_chunks) == (2, 2)
    _assert_consistent(tmp_path / "ix")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (BuildOptions(append=True, chunk_words=50), "--chunk-words 100"),
        (BuildOptions(append=True, embed_text="text"), "embeds 'title+text'"),
        (BuildOptions(append=True, model="some/other-model"), "some/other-model"),
    ],
)
def test_append_refuses_other_settings(
    index_copy: Path, tmp_path: Path, hash_embedder: Embedder, options: BuildOptions, expected: str
) -> None:
    before = _rows(index_copy)
    docs = _write_jsonl(tmp_path / "extra.jsonl", EXTRA_DOCS)
    with pytest.raises(UsageError, match=re.escape(expected)):
        build_index([docs], index_copy, options, embedder=hash_embedder)
    assert _rows(index_copy) == before


@pytest.mark.slow
@pytest.mark.parametrize("dimension", [384, 8])
def test_append_refuses_an_embedder_of_another_model(
    index_copy: Path, tmp_path: Path, make_hash_embedder: Callable[..., Embedder], dimension: int
) -> None:
    # Vectors of two models in one index would be silently meaningless.
    before_rows, before_meta = _rows(index_copy), _meta(index_copy)
    docs = _write_jsonl(tmp_path / "extra.jsonl", EXTRA_DOCS)
    other = make_hash_embedder(dimension=dimension)
    with pytest.raises(UsageError) as err:
        build_index([docs], index_copy, BuildOptions(append=True), embedder=other)
    assert DEFAULT_MODEL in str(err.value)
    assert other.name in str(err.value)
    assert _rows(index_copy) == before_rows
    assert _meta(index_copy) == before_meta


# --- interrupted builds ---------------------------------------------------------


def _many_docs(path: Path, n: int) -> Path:
    docs = [{"id": str(i), "title": f"Doc {i}", "text": f"Passage number {i}."} for i in range(n)]
    return _write_jsonl(path, docs)


@pytest.mark.slow
@pytest.mark.parametrize("error", [RuntimeError("model crashed"), KeyboardInterrupt()])
def test_failing_embedder_leaves_the_previous_index_intact(
    index_copy: Path, tmp_path: Path, hash_embedder: Embedder, error: BaseException
) -> None:
    before_rows, before_meta = _rows(index_copy), _meta(index_copy)
    # More passages than one embedding call takes, so the failure comes mid-way.
    docs = _many_docs(tmp_path / "many.jsonl", 2500)
    failing = FailingEmbedder(hash_embedder, error, calls_ok=1)
    with pytest.raises(type(error)):
        build_index([docs], index_copy, embedder=failing)
    assert failing.calls_left == 0  # it did fail after a first successful call
    assert _rows(index_copy) == before_rows
    assert _meta(index_copy) == before_meta
    _assert_consistent(index_copy)
    assert _no_leftovers(index_copy) == []


@pytest.mark.slow
def test_unreadable_source_mid_build_leaves_the_previous_index_intact(
    index_copy: Path, tmp_path: Path, hash_embedder: Embedder
) -> None:
    before_rows, before_meta = _rows(index_copy), _meta(index_copy)
    docs = _many_docs(tmp_path / "many.jsonl", 1500)
    spy = SpyEmbedder(hash_embedder)
    with pytest.raises(InputError, match="truncated.xml.bz2: truncated"):
        build_index([docs, TRUNCATED], index_copy, embedder=spy)
    assert len(spy.texts) > 0  # the first source was being embedded when the second broke
    assert _rows(index_copy) == before_rows
    assert _meta(index_copy) == before_meta
    assert _no_leftovers(index_copy) == []
