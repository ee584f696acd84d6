"""The index directory: search parity with brute force, and load-time checks."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ceg_cli.errors import IndexLoadError, UsageError
from ceg_cli.index import embed_text, open_index
from ceg_cli.index.dense.embedding import DEFAULT_MODEL, Embedder

QUERIES = [
    "Who tutored Alexander the Great?",
    "Which book was written and illustrated by Graeme Base?",
    "noncommutative geometry mathematician",
    "Catalan film from 1996",
    "What is the golden mean in ethics?",
]


def _stored_vectors(index_dir: Path) -> np.ndarray:
    import faiss

    vectors = faiss.read_index(str(index_dir / "vectors.faiss"))
    return vectors.reconstruct_n(0, vectors.ntotal)


# --- search ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 5, 20])
def test_faiss_search_equals_brute_force_numpy(
    mini_index: Path, embedder: Embedder, k: int
) -> None:
    stored = _stored_vectors(mini_index)
    queries = np.vstack([embedder.embed(QUERIES), stored[[0, 17, 99]]])
    expected = queries @ stored.T
    with open_index(mini_index) as idx:
        hits = idx.search_vectors(queries, k)
    assert len(hits) == len(queries)
    for row, row_hits in zip(expected, hits):
        # A stable sort of the exact scores; real vectors have no ties at 1e-5.
        want = np.argsort(-row, kind="stable")[:k]
        assert [h.chunk_id for h in row_hits] == want.tolist()
        np.testing.assert_allclose([h.score for h in row_hits], row[want], atol=1e-5)
        assert all(h.chunk.text for h in row_hits)


@pytest.mark.slow
def test_stored_vector_ids_match_passage_rows(mini_index: Path, embedder: Embedder) -> None:
    # FAISS id i must be passage row i: re-embed some stored passages and
    # compare with the vectors stored under their ids.
    stored = _stored_vectors(mini_index)
    ids = [0, 1, 42, 143, len(stored) - 1]
    with open_index(mini_index) as idx:
        chunks = idx.chunks(ids)
        mode = idx.meta["embed_text"]
    fresh = embedder.embed([embed_text(chunks[i], mode) for i in ids])
    similarity = np.sum(fresh * stored[ids], axis=1)
    assert similarity.min() > 0.999, similarity


@pytest.mark.slow
def test_search_by_text_embeds_with_the_index_model(mini_index: Path, embedder: Embedder) -> None:
    with open_index(mini_index) as idx:
        idx.use_embedder(embedder)
        by_text = idx.search(QUERIES[:2], k=3)
        by_vector = idx.search_vectors(embedder.embed(QUERIES[:2]), k=3)
    ids = [[h.chunk_id for h in row] for row in by_text]
    assert ids == [[h.chunk_id for h in row] for row in by_vector]
    assert by_text[0][0].chunk.title == "Aristotle"
    assert "Alexander" in by_text[0][0].chunk.text
    assert by_text[1][0].chunk.title == "Animalia (book)"


@pytest.mark.slow
def test_search_edge_cases(mini_index: Path) -> None:
    stored = _stored_vectors(mini_index)
    with open_index(mini_index) as idx:
        assert idx.size == len(stored)
        assert idx.search_vectors(stored[:0], 5) == []
        everything = idx.search_vectors(stored[:1], 10_000)[0]
    assert sorted(h.chunk_id for h in everything) == list(range(len(stored)))
    assert everything[0].chunk_id == 0
    assert everything[0].score == pytest.approx(1.0, abs=1e-5)


# --- load errors ------------------------------------------------------------------


def test_missing_directory_says_how_to_build(tmp_path: Path) -> None:
    where = tmp_path / "nowhere"
    with pytest.raises(IndexLoadError) as err:
        open_index(where)
    message = str(err.value)
    assert f"no index at {where}" in message
    assert "ceg index build" in message


def test_directory_without_meta_is_not_an_index(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("not an index\n")
    with pytest.raises(IndexLoadError) as err:
        open_index(tmp_path)
    message = str(err.value)
    assert "not a complete ceg index" in message
    assert "meta.json" in message
    assert "ceg index build" in message


@pytest.mark.slow
def test_newer_format_asks_to_upgrade(index_copy: Path) -> None:
    meta_path = index_copy / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["format_version"] = 99
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(IndexLoadError) as err:
        open_index(index_copy)
    message = str(err.value)
    assert "format 99 is newer" in message
    assert "upgrade ceg" in message


@pytest.mark.slow
def test_unreadable_meta_asks_to_rebuild(index_copy: Path) -> None:
    (index_copy / "meta.json").write_text("{not json")
    with pytest.raises(IndexLoadError) as err:
        open_index(index_copy)
    assert "unreadable" in str(err.value)
    assert "rebuild the index" in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vectors.faiss", "chunks.sqlite"])
def test_missing_store_file_is_named(index_copy: Path, name: str) -> None:
    (index_copy / name).unlink()
    with pytest.raises(IndexLoadError) as err:
        open_index(index_copy)
    message = str(err.value)
    assert f"{name} is missing" in message
    assert "rebuild" in message


@pytest.mark.slow
def test_corrupt_vectors_file_is_reported(index_copy: Path) -> None:
    (index_copy / "vectors.faiss").write_bytes(b"\0garbage" * 64)
    with pytest.raises(IndexLoadError) as err:
        open_index(index_copy)
    assert "vectors.faiss: unreadable FAISS index" in str(err.value)


@pytest.mark.slow
def test_vector_count_must_match_the_chunk_store(index_copy: Path) -> None:
    rows = json.loads((index_copy / "meta.json").read_text())["counts"]["chunks"]
    with sqlite3.connect(index_copy / "chunks.sqlite") as db:
        db.execute("DELETE FROM chunks WHERE id = (SELECT max(id) FROM chunks)")
    with pytest.raises(IndexLoadError) as err:
        open_index(index_copy)
    message = str(err.value)
    assert "inconsistent" in message
    assert f"holds {rows} vectors" in message
    assert f"{rows - 1} passages" in message
    assert "rebuild" in message


@pytest.mark.slow
def test_other_model_is_refused_naming_both(mini_index: Path) -> None:
    with pytest.raises(UsageError) as err:
        open_index(mini_index, model="some/other-model")
    message = str(err.value)
    assert DEFAULT_MODEL in message
    assert "some/other-model" in message
    assert "dimension 384" in message
    assert "rebuild" in message


@pytest.mark.slow
def test_default_model_aliases_are_accepted(mini_index: Path) -> None:
    for alias in ("all-MiniLM-L6-v2", DEFAULT_MODEL, "default"):
        with open_index(mini_index, model=alias) as idx:
            assert idx.model_name == DEFAULT_MODEL


@pytest.mark.slow
def test_use_embedder_refuses_another_dimension(
    mini_index: Path, make_hash_embedder: Callable[..., Embedder]
) -> None:
    with open_index(mini_index) as idx:
        with pytest.raises(UsageError) as err:
            idx.use_embedder(make_hash_embedder(dimension=8))
    message = str(err.value)
    assert "dimension 384" in message
    assert "dimension 8" in message
    assert DEFAULT_MODEL in message


# --- the vectors file belongs to its index ------------------------------------------


def _same_shape_indexes(tmp_path: Path, embedder: Embedder, n: int) -> tuple[Path, Path]:
    """Two indexes of ``n`` one-passage documents each: same count and dimension."""
    from reliability_harness import documents

    from ceg_cli.index.build.builder import BuildOptions, build_index

    made = []
    for prefix in ("A", "B"):
        target = tmp_path / f"index-{prefix}"
        docs = documents(tmp_path / f"{prefix}.jsonl", n, prefix)
        build_index([docs], target, BuildOptions(), embedder=embedder)
        made.append(target)
    return made[0], made[1]


# 40 passages: a file read whole; 800 (1.2 MB): a file sampled.
@pytest.mark.parametrize("n", [40, 800])
def test_a_vectors_file_from_another_index_of_the_same_shape_is_refused(
    tmp_path: Path, hash_embedder: Embedder, n: int
) -> None:
    mine, other = _same_shape_indexes(tmp_path, hash_embedder, n)
    assert (mine / "vectors.faiss").stat().st_size == (other / "vectors.faiss").stat().st_size
    open_index(mine).close()
    shutil.copyfile(other / "vectors.faiss", mine / "vectors.faiss")
    with pytest.raises(IndexLoadError) as err:
        open_index(mine)
    message = str(err.value)
    assert message.startswith(f"{mine / 'vectors.faiss'} is not the vectors file this index")
    assert f"'ceg index build SOURCE --index {mine}'" in message
    assert "\n" not in message


def test_appending_to_an_index_with_a_foreign_vectors_file_is_refused(
    tmp_path: Path, hash_embedder: Embedder
) -> None:
    from reliability_harness import documents

    from ceg_cli.index.build.builder import BuildOptions, build_index

    mine, other = _same_shape_indexes(tmp_path, hash_embedder, 40)
    shutil.copyfile(other / "vectors.faiss", mine / "vectors.faiss")
    more = documents(tmp_path / "C.jsonl", 3, "C")
    with pytest.raises(IndexLoadError, match="is not the vectors file this index"):
        build_index([more], mine, BuildOptions(append=True), embedder=hash_embedder)


def test_the_digest_reads_sampled_blocks_only(tmp_path: Path) -> None:
    """A large file is read at 18 blocks: a change inside one is seen, outside all is not."""
    from ceg_cli.index.indexdir import SAMPLE_BLOCK, _sample_offsets, sampled_digest

    data = bytearray(np.random.default_rng(1).bytes(40 * SAMPLE_BLOCK + 123))
    file = tmp_path / "v.bin"
    file.write_bytes(data)
    before = sampled_digest(file)
    offsets = _sample_offsets(len(data))
    assert len(offsets) == 18 and offsets[-1] + SAMPLE_BLOCK == len(data)
    unread = next(i for i in range(len(data))
                  if not any(o <= i < o + SAMPLE_BLOCK for o in offsets))
    data[unread] ^= 1
    file.write_bytes(data)
    assert sampled_digest(file) == before
    data[offsets[9] + 7] ^= 1
    file.write_bytes(data)
    assert sampled_digest(file) != before


def test_an_index_built_before_the_digest_still_opens(
    tmp_path: Path, hash_index: Path, run_cli: Callable[..., Any]
) -> None:
    target = tmp_path / "index"
    shutil.copytree(hash_index, target)
    meta = json.loads((target / "meta.json").read_text())
    assert meta["faiss"]["file_digest"].startswith("sha256-sampled:")
    assert meta["faiss"]["file_size"] == (target / "vectors.faiss").stat().st_size
    del meta["faiss"]["file_digest"], meta["faiss"]["file_size"]
    (target / "meta.json").write_text(json.dumps(meta))
    with open_index(target) as idx:
        assert idx.size == meta["counts"]["chunks"]
    result = run_cli("index", "info", "--index", target)
    assert result.exit_code == 0
    assert "no digest recorded" in result.stdout
