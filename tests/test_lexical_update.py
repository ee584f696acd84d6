"""The bm25s lexical part kept in step by an update (issue 56.2-3): only the new passages
are tokenized, and the part scores as a fresh bm25s index of the live passages does."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import HashEmbedder

import ceg_cli.index.lexical.bm25_update as counts_module
from ceg_cli.index import META_FILE, open_index
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.generation import lexical_root
from ceg_cli.index.layout import CHUNK_SCHEMA, LEXICAL_DIR
from ceg_cli.index.lexical.bm25 import BM25_PARAMS, build_lexical
from ceg_cli.index.lexical.bm25_counts import COUNTS_FILE
from ceg_cli.index.lexical.bm25_update import update_lexical
from ceg_cli.index.lexical.lexlang import import_bm25s, queries_tokens

ENGLISH_WORDS = ("river mountain lake forest desert island valley canyon glacier meadow "
                 "the of and castle bridge harbour village railway station church tower "
                 "museum library garden market winter summer north south eastern western "
                 "ancient modern battle empire king queen treaty war peace").split()
GERMAN_WORDS = ("der die das und Fluss Berge Wälder Brücke Burg Kirche Dorf Bahnhof "
                "Hafen Sommer Winter Norden Süden König Königin Krieg Frieden Vertrag "
                "Schlacht Reich Museum Garten Markt alten neuen Städte Häuser").split()
QUERIES = ["river castle", "ancient empire treaty", "Brücke Burg", "the", "glacier",
           "Königin Krieg Frieden", "winter market museum", "Fluss river", "zzz unknown",
           "north south eastern western", "Dorf", "railway station bridge"]
MODE = "title+text"


def _passage(rng: random.Random, n: int) -> tuple[int, str, str, str]:
    german = rng.random() < 0.3
    words = GERMAN_WORDS if german else ENGLISH_WORDS
    text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 25)))
    if rng.random() < 0.3:  # a repeated term
        text += (" " + rng.choice(words)) * rng.randint(2, 4)
    if rng.random() < 0.05:  # a word no other passage has
        text += f" unique{n}"
    return n, f"Title {rng.choice(words)}", text, "de" if german else "en"


def _store(path: Path, passages: list[tuple[int, str, str, str]]) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.executescript(CHUNK_SCHEMA)
    db.executemany("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?)",
                   [(i, f"d{i}", title, 0, 0, len(text), text, None, "src", lang)
                    for i, title, text, lang in passages])
    db.commit()
    return db


def _scores(folder: Path, tokenizer: dict[str, Any]) -> tuple[Any, list[np.ndarray]]:
    bm25s = import_bm25s()
    part = bm25s.BM25.load(str(folder / LEXICAL_DIR), mmap=True, show_progress=False)
    out = []
    for words in queries_tokens(QUERIES, tokenizer):
        ids = part.get_tokens_ids(words)
        out.append(np.asarray(part.get_scores_from_ids(ids)) if ids
                   else np.zeros(part.scores["num_docs"], dtype=np.float32))
    return part, out


def _top10(scores: np.ndarray) -> list[int]:
    return [int(i) for i in np.lexsort((np.arange(len(scores)), -scores))[:10]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_updated_part_scores_as_a_fresh_bm25s_index(tmp_path: Path, seed: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    read: list[int] = []  # texts read by ceg's analyzers (bm25s's tokenizer: the CLI test)
    real_terms = counts_module.corpus_terms
    monkeypatch.setattr(counts_module, "corpus_terms",
                        lambda texts, langs: read.append(len(texts)) or real_terms(texts, langs))
    english_only = seed == 2  # bm25s's own tokenizer (legacy), else ceg's per language
    live = [_passage(rng, n) for n in range(120)]
    if english_only:
        live = [(i, t, x, "en") for i, t, x, _ in live if _ != "de"]
    with _store(tmp_path / "s0.sqlite", live) as db:
        entry = build_lexical(db, tmp_path / "p0", MODE, "bm25s")
    assert COUNTS_FILE in entry["files"]
    next_id = 120
    for round_ in range(1, 6):
        # Remove some, keep the rest in order, add new ones at the end (as an update does).
        keep = [p for p in live if rng.random() > 0.15]
        added = []
        for _ in range(rng.randint(0, 25) if round_ != 2 else 0):  # round 2: removals only
            p = _passage(rng, next_id)
            added.append(p if not english_only else (*p[:3], "en"))
            next_id += 1
        row_of = {p[0]: r for r, p in enumerate(live)}
        rows = np.asarray([row_of[p[0]] for p in keep] + [-1] * len(added), dtype=np.int64)
        live = keep + added
        ids = np.asarray([p[0] for p in live], dtype=np.int64)
        with _store(tmp_path / f"s{round_}.sqlite", live) as db:
            read.clear()
            updated = update_lexical(db, tmp_path / f"p{round_}", MODE, entry,
                                     tmp_path / f"p{round_ - 1}", rows, ids)
            assert read == ([] if english_only else [len(added)])
            fresh = build_lexical(db, tmp_path / f"f{round_}", MODE, "bm25s")
        assert updated is not None
        assert {k: v for k, v in updated.items() if k != "files"} == \
            {k: v for k, v in fresh.items() if k != "files"}
        a, mine = _scores(tmp_path / f"p{round_}", updated["tokenizer"])
        b, theirs = _scores(tmp_path / f"f{round_}", fresh["tokenizer"])
        assert set(a.vocab_dict) == set(b.vocab_dict)
        assert a.scores["num_docs"] == b.scores["num_docs"] == len(live)
        for x, y in zip(mine, theirs):
            np.testing.assert_array_equal(x, y)  # bit for bit: the same float operations
            assert _top10(x) == _top10(y)
        # Each term's column: the same passages, the same scores.
        for term, col in b.vocab_dict.items():
            if col >= len(b.scores["indptr"]) - 1:
                continue
            other = a.vocab_dict[term]
            sa, ea = a.scores["indptr"][other], a.scores["indptr"][other + 1]
            sb, eb = b.scores["indptr"][col], b.scores["indptr"][col + 1]
            np.testing.assert_array_equal(a.scores["indices"][sa:ea], b.scores["indices"][sb:eb])
            np.testing.assert_array_equal(a.scores["data"][sa:ea], b.scores["data"][sb:eb])
        entry = updated  # the next round starts from the updated part and its counts


def test_a_full_build_s_part_equals_bm25s_and_writes_the_counts(tmp_path: Path) -> None:
    rng = random.Random(5)
    live = [_passage(rng, n) for n in range(60)]
    with _store(tmp_path / "s.sqlite", live) as db:
        entry = build_lexical(db, tmp_path / "p", MODE, "bm25s")
    assert sorted(entry["files"]) == sorted(p.name for p in (tmp_path / "p" / LEXICAL_DIR)
                                            .iterdir())
    with np.load(tmp_path / "p" / LEXICAL_DIR / COUNTS_FILE) as side:
        counts, lengths = side["counts"], side["lengths"]
    part, _ = _scores(tmp_path / "p", entry["tokenizer"])
    assert len(counts) == len(part.scores["data"]) and len(lengths) == 60
    assert counts.min() >= 1 and lengths.sum() == counts.sum()
    # bm25s itself over the same tokens gives the same scores.
    bm25s = import_bm25s()
    ref = bm25s.BM25(**BM25_PARAMS)
    from ceg_cli.index.lexical.lexlang import corpus_tokens
    ref.index(corpus_tokens([f"{t}. {x}" for _, t, x, _ in live], [p[3] for p in live]),
              show_progress=False)
    np.testing.assert_array_equal(part.scores["data"], ref.scores["data"])


# ------------------------------------------------------------------ through an update


def _write_docs(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        if old.name not in docs:
            old.unlink()
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _corpus(rng: random.Random, n: int) -> dict[str, str]:
    return {f"doc{i:03d}.txt": " ".join(rng.choice(ENGLISH_WORDS) for _ in range(30))
            for i in range(n)}


def _build(folder: Path, target: Path, **kw: Any) -> None:
    build_index([folder], target, BuildOptions(chunk_words=12, lexical=True, **kw),
                embedder=HashEmbedder(dimension=16))


def _bm25_by_text(target: Path, query: str) -> list[tuple[str, float]]:
    with open_index(target) as index:
        array = index.lexical().scores(query)
        chunks = index.chunks(int(i) for i in np.flatnonzero(array > 0))
        return sorted((chunks[i].text, float(array[i])) for i in chunks)


def test_an_update_tokenizes_only_the_new_passages(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    docs = _corpus(rng, 30)
    folder = _write_docs(tmp_path / "docs", docs)
    _build(folder, tmp_path / "idx")
    bm25s = import_bm25s()
    seen: list[int] = []
    real = bm25s.tokenize

    def counting(texts: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(len(texts))
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(bm25s, "tokenize", counting)
    docs["doc005.txt"] = "A glacier meadow by the river castle, changed."
    del docs["doc007.txt"]
    for round_ in range(2):  # the base's part, then a generation's
        docs[f"new{round_}.txt"] = "Railway station and harbour village."
        _write_docs(folder, docs)
        seen.clear()
        _build(folder, tmp_path / "idx", update=True)
        assert seen == [1 if round_ else 2]  # the changed and the added document's passages
        meta = json.loads((tmp_path / "idx" / META_FILE).read_text())
        assert COUNTS_FILE in meta["lexical"]["files"]
        monkeypatch.setattr(bm25s, "tokenize", real)
        _build(folder, tmp_path / f"fresh{round_}")
        monkeypatch.setattr(bm25s, "tokenize", counting)
        for query in ("glacier river", "railway harbour", "castle"):
            assert _bm25_by_text(tmp_path / "idx", query) == \
                _bm25_by_text(tmp_path / f"fresh{round_}", query)


def test_an_index_without_the_counts_file_is_rebuilt_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(4)
    docs = _corpus(rng, 12)
    folder = _write_docs(tmp_path / "docs", docs)
    target = tmp_path / "idx"
    _build(folder, target)
    # As a build before the counts file wrote it: lexical/ and its record without it.
    (target / LEXICAL_DIR / COUNTS_FILE).unlink()
    meta = json.loads((target / META_FILE).read_text())
    del meta["lexical"]["files"][COUNTS_FILE]
    (target / META_FILE).write_text(json.dumps(meta))
    calls: list[str] = []
    real = counts_module.update_lexical

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        calls.append("kept" if out is not None else "rebuilt")
        return out

    monkeypatch.setattr(counts_module, "update_lexical", spy)
    for n in range(2):
        docs[f"doc{n:03d}.txt"] = f"Changed text {n} about the winter market."
        _write_docs(folder, docs)
        _build(folder, target, update=True)
        meta = json.loads((target / META_FILE).read_text())
        assert COUNTS_FILE in meta["lexical"]["files"]
        assert (lexical_root(target, meta) / LEXICAL_DIR / COUNTS_FILE).is_file()
    assert calls == ["rebuilt", "kept"]  # the full rebuild wrote the counts the next uses
    _build(folder, tmp_path / "fresh")
    assert _bm25_by_text(target, "winter market") == _bm25_by_text(tmp_path / "fresh",
                                                                    "winter market")


def test_a_tokenizer_change_rebuilds_the_part(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """An English index (bm25s's tokenizer) whose update brings its first German passage
    is read with ceg's analyzers from then on: every passage again, not the new alone."""
    rng = random.Random(6)
    docs = _corpus(rng, 10)
    folder = _write_docs(tmp_path / "docs", docs)
    target = tmp_path / "idx"
    _build(folder, target)
    calls: list[Any] = []
    real = counts_module.update_lexical
    monkeypatch.setattr(counts_module, "update_lexical",
                        lambda *a, **k: calls.append(real(*a, **k)) or calls[-1])
    docs["german.txt"] = ("Die alte Brücke über den Fluss wurde im Krieg zerstört und nach "
                          "dem Frieden von den Bürgern der Stadt wieder aufgebaut.")
    _write_docs(folder, docs)
    _build(folder, target, update=True)
    meta = json.loads((target / META_FILE).read_text())
    assert calls == [None]
    assert meta["lexical"]["tokenizer"].get("analyzer") == "ceg_cli.lang"
    _build(folder, tmp_path / "fresh")
    assert _bm25_by_text(target, "Brücke river") == _bm25_by_text(tmp_path / "fresh",
                                                                  "Brücke river")


def test_a_part_it_cannot_trust_is_left_to_the_full_rebuild(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    live = [_passage(rng, n) for n in range(40)]
    with _store(tmp_path / "s0.sqlite", live) as db:
        entry = build_lexical(db, tmp_path / "p0", MODE, "bm25s")
    new = live[1:] + [_passage(rng, 40)]
    rows = np.asarray(list(range(1, 40)) + [-1], dtype=np.int64)
    ids = np.asarray([p[0] for p in new], dtype=np.int64)
    with _store(tmp_path / "s1.sqlite", new) as db:
        def attempt() -> Any:
            return update_lexical(db, tmp_path / "p1", MODE, entry, tmp_path / "p0", rows, ids)

        assert attempt() is not None
        # A bm25s whose scoring ceg has not checked score_pairs against.
        monkeypatch.setattr(counts_module, "SCORED_AS", ())
        assert attempt() is None
        monkeypatch.undo()
        # Counts that are not the ones the build recorded (damaged, or another index's).
        side = tmp_path / "p0" / LEXICAL_DIR / COUNTS_FILE
        with np.load(side) as arrays:
            parts = dict(arrays)
        parts["counts"] = parts["counts"] + 1
        np.savez(side, **parts)
        assert attempt() is None
        # Another text than the part was built from.
        assert update_lexical(db, tmp_path / "p1", "text", entry, tmp_path / "p0", rows,
                              ids) is None
