"""Resumable builds and Wikimedia multistream dumps.

A build commits its work in shards; one stopped part-way (here: a model that
fails after some calls, in-process; ``test_reliability_faults`` SIGKILLs real
processes) is continued with ``resume`` and must reach exactly the index of a
build that never stopped: the same rows, the same vector bytes. The
multistream dumps are made by ``multistream_fixture`` from the real mini
dump, one bz2 stream per two pages, as Wikimedia makes them (a hundred a stream).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from conftest import MINI_WIKI, HashEmbedder
from multistream_fixture import make_multistream
from reliability_harness import documents, leftovers

import ceg_cli.corpus.sources
import ceg_cli.index.build.builder
from ceg_cli.corpus import iter_documents, iter_positioned
from ceg_cli.corpus.multistream import index_beside, read_from_page, read_index, read_range
from ceg_cli.errors import InputError, UsageError
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.indexdir import work_path
from ceg_cli.progress import PlainProgress

# -- multistream dumps -----------------------------------------------------------------


@pytest.fixture(scope="module")
def multistream(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The 7-page mini dump as a multistream dump of 2 pages a stream, and its index."""
    return make_multistream(MINI_WIKI, tmp_path_factory.mktemp("ms"), per_stream=2)


def _plain(docs: Sequence[object]) -> list[tuple[str, str, str, str | None]]:
    return [(d.id, d.title, d.text, d.url) for d in docs]  # type: ignore[attr-defined]


def test_every_range_read_alone_gives_the_documents_of_the_whole_dump(
    multistream: tuple[Path, Path],
) -> None:
    dump, index = multistream
    assert index_beside(dump) == index
    ranges = read_index(index)
    assert [r.pages for r in ranges] == [2, 2, 2, 1]
    assert ranges[-1].end is None  # the last range reads to the end: the closing tag's stream
    whole = list(iter_documents(MINI_WIKI))
    in_ranges = [doc for r in ranges for _, doc in read_range(dump, ranges[0].start, r)]
    assert _plain(in_ranges) == _plain(whole)
    # And read as one file (bz2 reads stream after stream), as a build does.
    assert _plain(iter_documents(dump)) == _plain(whole)


def test_reading_from_a_page_seeks_to_its_stream(multistream: tuple[Path, Path]) -> None:
    dump, index = multistream
    everything = list(iter_positioned(dump))
    ranges = read_index(index)
    for start in range(8):
        read: list[int] = []
        tail = list(read_from_page(dump, index, start, on_read=read.append))
        assert [(p, d.id) for p, d in tail] == [(p, d.id) for p, d in everything if p > start]
        # Read from the start of the stream holding page start + 1 (the header aside).
        stream = ranges[min(start, 6) // 2]
        assert sum(read) == dump.stat().st_size - stream.start


def test_a_position_counts_every_page_of_a_dump_and_every_document_of_jsonl(
    tmp_path: Path,
) -> None:
    pages = list(iter_positioned(MINI_WIKI))
    # 7 <page>s: the redirect and the other namespace's pages count, though they yield nothing.
    assert [p for p, _ in pages] == [3, 4, 5, 6]
    assert [d.id for _, d in iter_positioned(MINI_WIKI, start=4)] == [d.id for _, d in pages[2:]]
    docs = documents(tmp_path / "d.jsonl", 5, "J")
    assert [(p, d.id) for p, d in iter_positioned(docs, start=3)] == [(4, "J-3"), (5, "J-4")]


def test_a_bad_index_line_is_named(tmp_path: Path) -> None:
    index = tmp_path / "x-multistream-index.txt"
    index.write_text("600:10:April\nsix hundred:12:August\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"x-multistream-index.txt:2: not a multistream index"):
        read_index(index)


def test_index_build_reads_a_multistream_dump(
    multistream: tuple[Path, Path], tmp_path: Path, run_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ceg_cli.index.build.builder, "load_embedder",
                        lambda *a, **k: HashEmbedder())
    dump, _ = multistream
    result = run_cli("index", "build", dump, "--index", tmp_path / "ms", "-q")
    assert result.exit_code == 0, result.stderr
    build_index([MINI_WIKI], tmp_path / "plain", embedder=HashEmbedder())
    same = "SELECT doc_id, title, ordinal, start, end, text, url FROM chunks ORDER BY id"
    assert _rows(tmp_path / "ms", same) == _rows(tmp_path / "plain", same)
    assert len(_rows(tmp_path / "ms", same)) > 100


# -- resumable builds ------------------------------------------------------------------


class StopsAfter(HashEmbedder):
    """The fake model, failing (like a crash of the model) after ``calls`` calls."""

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.calls = calls

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.calls == 0:
            raise RuntimeError("model crashed")
        self.calls -= 1
        return super().embed(texts)


def _rows(index: Path, sql: str = "SELECT * FROM chunks ORDER BY id") -> list[tuple[object, ...]]:
    with sqlite3.connect(f"file:{index / 'chunks.sqlite'}?mode=ro", uri=True) as db:
        return db.execute(sql).fetchall()


def _vectors(index: Path) -> np.ndarray:
    import faiss

    vectors = faiss.read_index(str(index / "vectors.faiss"))
    return vectors.reconstruct_n(0, vectors.ntotal)


@pytest.fixture
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    """Embedding calls of about 4 passages, shards of 10: many shards in a small build."""
    monkeypatch.setattr(ceg_cli.index.build.builder, "EMBED_CALL_SIZE", 4)
    monkeypatch.setattr(ceg_cli.index.build.builder, "SHARD_PASSAGES", 10)


@pytest.fixture
def sources(tmp_path: Path, multistream: tuple[Path, Path]) -> list[Path]:
    return [documents(tmp_path / "docs.jsonl", 100, "R"), multistream[0]]


def test_a_stopped_build_resumed_equals_an_uninterrupted_one(
    small_shards: None, sources: list[Path], tmp_path: Path
) -> None:
    reference = tmp_path / "reference"
    build_index(sources, reference, embedder=HashEmbedder())
    target = tmp_path / "index"
    warnings: list[str] = []
    resumed = []
    # Stop in the JSONL source, then twice in the dump (where resuming seeks a stream).
    for calls in (7, 21, 2):
        with pytest.raises(RuntimeError, match="model crashed"):
            build_index(sources, target, BuildOptions(resume=True), embedder=StopsAfter(calls),
                        on_warning=warnings.append)
        assert not target.exists()
        assert leftovers(target) == [".index.building"]
        resumed.append(json.loads(_rows(work_path(target), "SELECT position FROM build_progress "
                                        "ORDER BY shard DESC")[0][0]))
    assert [r["source"] for r in resumed] == [0, 1, 1]
    assert resumed[1]["offset"] < resumed[2]["offset"]
    assert "run the same command with --resume to go on from there" in warnings[-1]
    report = build_index(sources, target, BuildOptions(resume=True), embedder=HashEmbedder())
    assert report.resumed_chunks == resumed[-1]["next_id"] > 0
    assert _rows(target) == _rows(reference)
    assert _vectors(target).tobytes() == _vectors(reference).tobytes()
    assert leftovers(target) == []
    assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in reference.iterdir())


def test_resume_refuses_a_different_build_and_a_plain_build_starts_over(
    small_shards: None, sources: list[Path], tmp_path: Path
) -> None:
    target = tmp_path / "index"
    with pytest.raises(RuntimeError):
        build_index(sources, target, embedder=StopsAfter(5))
    with pytest.raises(UsageError, match=r"another build \(chunk_words differ\)"):
        build_index(sources, target, BuildOptions(chunk_words=50, resume=True),
                    embedder=HashEmbedder())
    with pytest.raises(UsageError, match=r"another build \(sources differ\)"):
        build_index(sources[:1], target, BuildOptions(resume=True), embedder=HashEmbedder())
    warnings: list[str] = []
    report = build_index(sources, target, embedder=HashEmbedder(), on_warning=warnings.append)
    assert report.discarded == str(work_path(target)) and report.resumed_chunks == 0
    assert any(w.startswith("starting over: replacing the unfinished build") for w in warnings)
    assert leftovers(target) == []


def test_resume_with_nothing_to_resume_builds_from_the_start(
    small_shards: None, sources: list[Path], tmp_path: Path
) -> None:
    warnings: list[str] = []
    report = build_index(sources[:1], tmp_path / "index", BuildOptions(resume=True),
                         embedder=HashEmbedder(), on_warning=warnings.append)
    assert report.chunks == 100
    assert warnings == [f"--resume: no unfinished build of {tmp_path / 'index'} to resume; "
                        "building from the start"]


def test_a_stopped_append_resumed_keeps_the_old_passages(
    small_shards: None, sources: list[Path], tmp_path: Path
) -> None:
    first = documents(tmp_path / "first.jsonl", 50, "F")
    for name in ("reference", "index"):
        build_index([first], tmp_path / name, embedder=HashEmbedder())
    build_index([first, *sources], tmp_path / "reference", BuildOptions(append=True),
                embedder=HashEmbedder())
    target = tmp_path / "index"
    before = _rows(target)
    with pytest.raises(RuntimeError):
        build_index([first, *sources], target, BuildOptions(append=True, resume=True),
                    embedder=StopsAfter(20))
    assert _rows(target) == before  # the old index is untouched meanwhile
    build_index([first, *sources], target, BuildOptions(append=True, resume=True),
                embedder=HashEmbedder())
    assert _rows(target) == _rows(tmp_path / "reference")
    assert _vectors(target).tobytes() == _vectors(tmp_path / "reference").tobytes()


def test_a_build_that_committed_nothing_leaves_nothing(
    sources: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ceg_cli.index.build.builder, "EMBED_CALL_SIZE", 4)
    # Default shards (8192 passages) are larger than this build: nothing to keep.
    with pytest.raises(RuntimeError):
        build_index(sources, tmp_path / "index", embedder=StopsAfter(5))
    assert leftovers(tmp_path / "index") == []


def test_a_dump_build_counts_the_bytes_read_against_the_dump_size(
    multistream: tuple[Path, Path], tmp_path: Path
) -> None:
    lines: list[str] = []
    progress = PlainProgress(lines.append, interval=0)
    dump = multistream[0]
    build_index([dump], tmp_path / "index", embedder=HashEmbedder(), progress=progress)
    progress.close()
    size = dump.stat().st_size
    assert f"files read: started ({size:,} bytes)" in lines
    assert any(f"files read: {size:,} bytes in" in line for line in lines)
    assert lines[-1].startswith("written: ")  # then the index file, with its own count
    assert any(", about " in line and " left" in line for line in lines)


def test_a_jsonl_build_counts_the_bytes_read_against_the_file_size(
    sources: list[Path], tmp_path: Path
) -> None:
    """A JSONL corpus shows the time left too, from the bytes read of its size."""
    lines: list[str] = []
    progress = PlainProgress(lines.append, interval=0)
    jsonl = next(s for s in sources if s.suffix == ".jsonl")
    build_index([jsonl], tmp_path / "index", embedder=HashEmbedder(), progress=progress)
    progress.close()
    size = jsonl.stat().st_size
    assert f"files read: started ({size:,} bytes)" in lines
    assert any(f"files read: {size:,} bytes in" in line for line in lines)


def test_a_build_stopped_after_its_last_rows_redoes_only_its_last_shard(
    small_shards: None, sources: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped while the index is assembled: the last rows were committed, not their vectors."""
    build_index(sources, tmp_path / "reference", embedder=HashEmbedder())
    real = ceg_cli.index.build.builder.build_lexical

    def broken(*args: object) -> None:
        raise RuntimeError("lexical index failed")

    monkeypatch.setattr(ceg_cli.index.build.builder, "build_lexical", broken)
    target = tmp_path / "index"
    with pytest.raises(RuntimeError, match="lexical index failed"):
        build_index(sources, target, embedder=HashEmbedder())
    work = work_path(target)
    (last,) = _rows(work, "SELECT position FROM build_progress ORDER BY shard DESC LIMIT 1")
    committed = json.loads(last[0])["next_id"]
    # Every row is in the store, more than the last shard's record says.
    assert len(_rows(work)) == len(_rows(tmp_path / "reference")) > committed
    monkeypatch.setattr(ceg_cli.index.build.builder, "build_lexical", real)
    spy = StopsAfter(10_000)
    report = build_index(sources, target, BuildOptions(resume=True), embedder=spy)
    assert report.resumed_chunks == committed
    assert 0 < 10_000 - spy.calls <= 3  # the passages after the last shard, embedded again
    assert _rows(target) == _rows(tmp_path / "reference")
    assert _vectors(target).tobytes() == _vectors(tmp_path / "reference").tobytes()


def test_an_index_given_by_option_is_used_to_resume_and_one_of_another_dump_is_refused(
    small_shards: None, multistream: tuple[Path, Path], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dump = tmp_path / "dump" / "wiki.xml.bz2"  # no index beside it under Wikimedia's name
    dump.parent.mkdir()
    dump.write_bytes(multistream[0].read_bytes())
    elsewhere = tmp_path / "offsets.txt.bz2"
    elsewhere.write_bytes(multistream[1].read_bytes())
    build_index([dump], tmp_path / "reference", embedder=HashEmbedder())
    target = tmp_path / "index"
    with pytest.raises(RuntimeError):
        build_index([dump], target, embedder=StopsAfter(1))
    seeks: list[int] = []
    real = ceg_cli.corpus.sources.read_from_page
    monkeypatch.setattr(ceg_cli.corpus.sources, "read_from_page",
                        lambda d, i, start, **kw: seeks.append(start) or real(d, i, start, **kw))
    build_index([dump], target, BuildOptions(resume=True, multistream_index=elsewhere),
                embedder=HashEmbedder())
    assert seeks == [3]  # the first page was done: read on from its stream
    assert _rows(target) == _rows(tmp_path / "reference")
    # Offsets of another dump are refused, not read as if they were this one's.
    with pytest.raises(InputError, match="not the multistream index of this dump"):
        list(read_from_page(MINI_WIKI, elsewhere, 3))
    with pytest.raises(UsageError, match="it belongs to one dump"):
        build_index([dump, MINI_WIKI], target, BuildOptions(multistream_index=elsewhere),
                    embedder=HashEmbedder())


def test_the_command_says_what_it_resumed_and_what_it_replaced(
    small_shards: None, sources: list[Path], tmp_path: Path, run_cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    models = iter([StopsAfter(7), HashEmbedder(), StopsAfter(7), HashEmbedder()])
    monkeypatch.setattr(ceg_cli.index.build.builder, "load_embedder", lambda *a, **k: next(models))
    target = tmp_path / "index"
    args = ["index", "build", *sources, "--index", target, "-q"]
    stopped = run_cli(*args)
    assert stopped.exit_code != 0 and "model crashed" in stopped.stderr
    assert "keeps its 24 committed passages" in stopped.stderr
    resumed = run_cli(*args, "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    assert "resumed: 24 passages were already committed" in resumed.stderr
    assert run_cli(*args).exit_code != 0
    again = run_cli(*args)
    assert again.exit_code == 0, again.stderr
    assert "starting over: replacing the unfinished build in" in again.stderr
    assert "resumed:" not in again.stderr
