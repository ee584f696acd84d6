"""The lexical part on tantivy (issue 48): what bm25s gives at the same parameters,
streamed in batches, appended to, checked on open, and chosen by size or by name.

Parity: tantivy's BM25 is Lucene's formula with k1 1.2 and b 0.75, document lengths
in one-byte norms (exact for the short passages here), times (k1 + 1) as in BM25's
classic form (Lucene dropped that constant factor in version 8; bm25s's ``lucene``
method follows Lucene 8). bm25s at k1 1.2 from the same terms, times 2.2, must give
the same scores, and so the same order.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import HashEmbedder

import ceg_cli.index.lexical.bm25 as lexical  # noqa: F401
from ceg_cli.errors import IndexLoadError
from ceg_cli.index import META_FILE, open_index  # noqa: F401
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.indexdir import work_path
from ceg_cli.index.lexical import lexical_tantivy  # noqa: F401
from ceg_cli.index.lexical.bm25 import LEXICAL_DIR, lexical_engine, lexical_problem
from ceg_cli.index.lexical.lexlang import import_bm25s, queries_tokens

WORDS = ("harbour lantern orchard meadow granite falcon willow copper ember thistle "
         "saffron glacier juniper quartz beacon river castle bridge tower market").split()


def corpus(path: Path, n: int, start: int = 0) -> Path:
    rows = []
    for i in range(start, start + n):
        words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(3 + i % 9)]
        rows.append({"id": f"d{i}", "title": f"Place {i}",
                     "text": f"{' '.join(words)} founded in {1800 + i}."})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def built(tmp_path: Path, n: int = 60, engine: str = "tantivy") -> Path:
    target = tmp_path / f"index-{engine}"
    build_index([corpus(tmp_path / "docs.jsonl", n)], target,
                BuildOptions(lexical_engine=engine), embedder=HashEmbedder())
    return target


# The last one repeats words: bm25s adds a word's score once per time the query has it.
QUERIES = ["harbour lantern founded in 1812", "granite falcon", "castle bridge market 1830",
           "nothing here zzz", "the tower", "castle granite castle 1830 falcon castle granite"]


def test_scores_are_bm25s_s_at_tantivy_s_parameters(tmp_path: Path) -> None:
    target = built(tmp_path)
    bm25s = import_bm25s()
    with open_index(target) as idx:
        lex = idx.lexical()
        assert isinstance(lex, lexical_tantivy.TantivyLexical)
        texts = [f"{c.title}. {c.text}" for c in idx.chunks(range(idx.size)).values()]
        tokenizer = idx.meta["lexical"]["tokenizer"]
    terms = lexical_tantivy.passage_terms(texts, ["en"] * len(texts), tokenizer)
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in words] for words in terms]
    from bm25s.tokenization import Tokenized

    reference = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    reference.index(Tokenized(ids=ids, vocab=vocab), show_progress=False)
    every = [list(range(len(texts)))] * len(QUERIES)
    compared = 0
    for words, (top, scores) in zip(queries_tokens(QUERIES, tokenizer),
                                    lex.ranked(QUERIES, 10, every)):
        known = [vocab[w] for w in words if w in vocab]
        want = (np.asarray(reference.get_scores_from_ids(known)) if known
                else np.zeros(len(texts)))
        got = np.array([scores[i] for i in range(len(texts))])
        np.testing.assert_allclose(got, want * (1 + 1.2), rtol=1e-4, atol=1e-5)
        # The top list is the reference's order (ties: lower id first).
        order = sorted((i for i in range(len(texts)) if want[i] > 0),
                       key=lambda i: (-round(float(want[i]), 4), i))[:10]
        assert top == order
        compared += int((want > 0).sum())
    assert compared > 50  # the queries matched many passages


def test_built_in_batches_it_holds_every_passage_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lexical_tantivy, "BATCH", 7)  # 60 passages: 9 batches
    target = built(tmp_path)
    with open_index(target) as idx:
        lex = idx.lexical()
        for n in range(idx.size):
            (top, _), = lex.ranked([f"{1800 + n}"], 5)
            assert top == [n]
    meta = json.loads((target / META_FILE).read_text(encoding="utf-8"))
    assert meta["lexical"]["passages"] == 60 and meta["lexical"]["library"] == "tantivy"
    assert meta["lexical"]["parameters"] == {"method": "lucene", "k1": 1.2, "b": 0.75}


def test_append_and_a_changed_source_keep_one_document_a_passage(tmp_path: Path) -> None:
    target = built(tmp_path, 20)
    more = corpus(tmp_path / "more.jsonl", 5, start=100)
    build_index([tmp_path / "docs.jsonl", more], target,
                BuildOptions(append=True, lexical_engine="tantivy"), embedder=HashEmbedder())
    with open_index(target) as idx:
        assert idx.meta["lexical"]["passages"] == idx.size == 25
        (top, _), = idx.lexical().ranked(["1902"], 5)
        assert [idx.chunks(top)[i].doc_id for i in top] == ["d102"]


def test_a_lexical_part_from_another_build_is_refused_in_one_line(tmp_path: Path) -> None:
    target = built(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    build_index([corpus(tmp_path / "o.jsonl", 30)], other / "index",
                BuildOptions(lexical_engine="tantivy"), embedder=HashEmbedder())
    shutil.rmtree(target / LEXICAL_DIR)
    shutil.copytree(other / "index" / LEXICAL_DIR, target / LEXICAL_DIR)
    meta = json.loads((target / META_FILE).read_text(encoding="utf-8"))
    assert "not the BM25 index this index was built with" in str(lexical_problem(meta, target))
    with open_index(target) as idx, pytest.raises(IndexLoadError, match="--append --lexical"):
        idx.use_embedder(HashEmbedder())
        idx.search(["harbour"], 2, "lexical")


def test_opening_and_searching_changes_no_file(tmp_path: Path) -> None:
    target = built(tmp_path)
    meta = json.loads((target / META_FILE).read_text(encoding="utf-8"))
    before = {p.name: p.read_bytes() for p in (target / LEXICAL_DIR).iterdir()}
    with open_index(target) as idx:
        idx.use_embedder(HashEmbedder())
        idx.search(QUERIES, 3, "hybrid")
    after = {p.name: p.read_bytes() for p in (target / LEXICAL_DIR).iterdir()}
    assert after == before and lexical_problem(meta, target) is None


def test_the_engine_by_size_or_by_name(tmp_path: Path, run_cli: Any) -> None:
    assert lexical_engine("auto", lexical.LEXICAL_AUTO_MAX) == "bm25s"
    assert lexical_engine("auto", lexical.LEXICAL_AUTO_MAX + 1) == "tantivy"
    assert lexical_engine("bm25s", 10**9) == "bm25s"
    result = run_cli("index", "build", corpus(tmp_path / "d.jsonl", 3), "--index",
                     tmp_path / "i", "--lexical-engine", "lucene")
    assert result.exit_code == 2 and "--lexical-engine" in result.stderr


def test_lexical_and_hybrid_results_are_bm25s_s_at_the_same_k1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fusion min-max normalises each method's scores, so tantivy's (k1 + 1) factor
    # changes nothing: at bm25s's k1 1.5 orders may differ (k1 shapes term saturation),
    # at 1.2 every result must be bm25s's, the dense candidates BM25 did not rank
    # scored exactly (scores_of) included.
    monkeypatch.setattr(lexical, "BM25_PARAMS", {"method": "lucene", "k1": 1.2, "b": 0.75})
    results = {}
    for engine in ("bm25s", "tantivy"):
        target = built(tmp_path, engine=engine)
        with open_index(target) as idx:
            idx.use_embedder(HashEmbedder())
            results[engine] = [[(h.chunk.doc_id, round(h.score, 6)) for h in row]
                               for method in ("lexical", "hybrid")
                               for row in idx.search(QUERIES, 8, method)]
    assert results["tantivy"] == results["bm25s"]
    assert sum(len(row) for row in results["tantivy"]) > 40


def test_a_build_stopped_while_writing_the_lexical_part_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the passages are stored, while tantivy writes: the work folder
    is kept with a half-written lexical/ in it, and --resume must finish the build
    with every passage indexed once (it died on lexical/ existing)."""
    docs = corpus(tmp_path / "docs.jsonl", 40)
    target = tmp_path / "index"
    real = lexical_tantivy.passage_terms
    calls = {"n": 0}

    def stop_after_first(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > 1:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(lexical_tantivy, "BATCH", 16)
    monkeypatch.setattr(lexical_tantivy, "passage_terms", stop_after_first)
    with pytest.raises(KeyboardInterrupt):
        build_index([docs], target, BuildOptions(lexical_engine="tantivy", shard_passages=16),
                    embedder=HashEmbedder())
    assert (work_path(target) / LEXICAL_DIR).is_dir() and not target.exists()
    monkeypatch.setattr(lexical_tantivy, "passage_terms", real)
    build_index([docs], target,
                BuildOptions(lexical_engine="tantivy", shard_passages=16, resume=True),
                embedder=HashEmbedder())
    with open_index(target) as idx:
        assert idx.meta["lexical"]["passages"] == idx.size == 40
        (top, _), = idx.lexical().ranked(["1839"], 5)
        assert [idx.chunks(top)[i].doc_id for i in top] == ["d39"]


def test_max_terms_searches_only_the_rarest_terms_and_is_off_by_default(tmp_path: Path) -> None:
    """``max_terms`` changes results, so it is an explicit option: with it a query is
    searched and scored by its ``max_terms`` rarest terms only, exactly as a query of
    those terms alone; without it every term counts."""
    target = built(tmp_path)
    path = target / LEXICAL_DIR
    full = lexical_tantivy.TantivyLexical(path)
    assert full.max_terms is None
    query = "castle granite castle 1830 falcon castle granite"
    words = queries_tokens([query], None)[0]
    freq = {w: full._searcher.doc_freq("terms", w) for w in set(words)}
    assert len(set(freq.values())) > 2  # the terms differ in rarity
    rarest = sorted(freq, key=lambda w: (freq[w], words.index(w)))[:2]
    assert full.terms(words) == {"castle": 3, "granite": 2, "1830": 1, "falcon": 1}
    pruned = lexical_tantivy.TantivyLexical(path, max_terms=2)
    assert set(pruned.terms(words)) == set(rarest)
    alone = " ".join(w for w in words if w in rarest)  # the kept terms, each as often
    every = [list(range(60))]
    assert pruned.ranked([query], 10, every) == full.ranked([alone], 10, every)
    assert pruned.ranked([query], 10) != full.ranked([query], 10)
    with pytest.raises(ValueError, match="max_terms 0"):
        lexical_tantivy.TantivyLexical(path, max_terms=0)


def test_a_resumed_lexical_pass_goes_on_after_its_last_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed in the lexical pass after a commit: --resume tokenizes only the passages
    after it (it used to start the pass over), and every passage is indexed once."""
    docs = corpus(tmp_path / "docs.jsonl", 40)
    target = tmp_path / "index"
    real = lexical_tantivy.passage_terms
    seen: list[int] = []

    def stop_at_fourth(texts: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(len(texts))
        if len(seen) == 4:
            raise KeyboardInterrupt
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(lexical_tantivy, "BATCH", 8)
    monkeypatch.setattr(lexical_tantivy, "COMMIT_EVERY", 16)  # a commit every 2 batches
    monkeypatch.setattr(lexical_tantivy, "passage_terms", stop_at_fourth)
    with pytest.raises(KeyboardInterrupt):
        build_index([docs], target, BuildOptions(lexical_engine="tantivy", shard_passages=16),
                    embedder=HashEmbedder())
    assert (work_path(target) / LEXICAL_DIR / lexical_tantivy.PROGRESS_FILE).exists()
    seen.clear()
    monkeypatch.setattr(lexical_tantivy, "passage_terms",
                        lambda texts, *a, **k: seen.append(len(texts)) or real(texts, *a, **k))
    build_index([docs], target,
                BuildOptions(lexical_engine="tantivy", shard_passages=16, resume=True),
                embedder=HashEmbedder())
    assert sum(seen) == 40 - 16  # the 16 committed passages were not read again
    with open_index(target) as idx:
        assert idx.meta["lexical"]["passages"] == idx.size == 40
        lex = idx.lexical()
        assert lex._searcher.num_docs == 40
        for n in (0, 15, 16, 39):
            (top, _), = lex.ranked([f"{1800 + n}"], 5)
            assert [idx.chunks(top)[i].doc_id for i in top] == [f"d{n}"]
    assert not (target / LEXICAL_DIR / lexical_tantivy.PROGRESS_FILE).exists()


def test_a_part_written_with_other_terms_is_started_over(tmp_path: Path) -> None:
    """What a stopped pass left is gone on with only when it was written as this one
    would write it: another text mode (or tokenizer, or passage count) starts over."""
    import sqlite3

    target = built(tmp_path, 20)
    db = sqlite3.connect(target / "chunks.sqlite")
    out = tmp_path / "part"
    out.mkdir()
    entry = lexical_tantivy.build(db, out, "title+text")
    plan = {"tokenizer": entry["tokenizer"], "text": "title+text", "passages": 20,
            "library": "tantivy", "version": lexical_tantivy.version()}
    (out / LEXICAL_DIR / lexical_tantivy.PROGRESS_FILE).write_text(json.dumps(plan))
    assert lexical_tantivy._committed(out / LEXICAL_DIR, plan, db) is not None
    assert lexical_tantivy._committed(out / LEXICAL_DIR, plan | {"text": "text"}, db) is None
    entry = lexical_tantivy.build(db, out, "text")  # started over: no title words kept
    lex = lexical_tantivy.TantivyLexical(out / LEXICAL_DIR, 20)
    assert entry["passages"] == 20 and entry["text"] == "text"
    assert lex.ranked(["place"], 3)[0][0] == [] and lex.ranked(["1805"], 3)[0][0] == [5]
    assert not (out / LEXICAL_DIR / lexical_tantivy.PROGRESS_FILE).exists()
    db.close()
