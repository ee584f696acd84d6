"""A symbolic link at ``--index``, and leftovers ceg did not make (issue 60, item 1).

A build through a link used to exchange its work folder with the link and then
remove the previous index through the link: the link's target was emptied, and
the leftover ``.link.building -> real`` emptied it again on the next build. Now
``--index`` is resolved once: a link builds into its target (the lock, the work
folder and the swap live beside the real directory; the link stays a link), and
a leftover is touched only when it is a real directory that carries ceg's mark.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import ceg_cli.index.indexdir as indexdir
from ceg_cli.errors import IndexBusyError, UsageError
from ceg_cli.index import open_index
from ceg_cli.index.build.builder import BuildOptions, build_index

#: No process has this id (above Linux's largest pid_max).
DEAD = 2**22 + 17
LEXICAL = BuildOptions(retrieval="lexical", workers=1)  # no reader processes: quick


def corpus(path: Path, documents: int, word: str) -> Path:
    rows = [{"id": f"{word}{i}", "title": f"{word.title()} {i}",
             "text": f"The {word} number {i} stands near the river {word} bank."}
            for i in range(documents)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def whole(index: Path, documents: int) -> bool:
    """``index`` opens as a whole index of ``documents`` documents."""
    meta = json.loads((index / "meta.json").read_text(encoding="utf-8"))
    opened = open_index(index)
    try:
        assert opened.lexical is not None  # loads: its files are the ones meta.json records
        return (meta["counts"]["documents"] == documents and opened.size == documents
                and len(opened.chunks(range(documents))) == documents)
    finally:
        opened.close()


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_lexical_build_through_a_link_builds_into_its_target_twice(
    run_cli: Any, tmp_path: Path
) -> None:
    """The probe's case, both rounds, through the real command."""
    a = corpus(tmp_path / "a.jsonl", 3, "alder")
    b = corpus(tmp_path / "b.jsonl", 5, "birch")
    idx = tmp_path / "idx"
    real, link = idx / "real", idx / "link"
    for _round in range(2):
        done = run_cli("index", "build", a, "--retrieval", "lexical", "--workers", "1",
                       "--index", real, "-q")
        assert done.exit_code == 0, done.stderr
        if not link.is_symlink():
            link.symlink_to("real")
        done = run_cli("index", "build", b, "--retrieval", "lexical", "--workers", "1",
                       "--index", link, "-q")
        assert done.exit_code == 0, done.stderr
        assert link.is_symlink() and os.readlink(link) == "real"
        assert real.is_dir() and not real.is_symlink()
        assert whole(real, 5) and whole(link, 5)
        assert names(idx) == ["link", "real"]  # no work folder, lock or old copy left


def test_a_dense_build_and_an_append_through_a_link(
    tmp_path: Path, hash_embedder: Any
) -> None:
    a = corpus(tmp_path / "a.jsonl", 3, "alder")
    b = corpus(tmp_path / "b.jsonl", 2, "birch")
    disk = tmp_path / "other-disk"
    real = disk / "index"
    build_index([a], real, embedder=hash_embedder)
    link = tmp_path / "index"
    link.symlink_to(real)
    build_index([a], link, embedder=hash_embedder)  # a rebuild through the link
    assert link.is_symlink() and whole(real, 3)
    report = build_index([a, b], link, BuildOptions(append=True), embedder=hash_embedder)
    assert report.unchanged == [str(a)] and link.is_symlink() and whole(real, 5)
    assert names(tmp_path) == ["a.jsonl", "b.jsonl", "index", "other-disk"]
    assert names(disk) == ["index"]


def test_an_append_through_a_link_to_a_lexical_index(tmp_path: Path) -> None:
    a = corpus(tmp_path / "a.jsonl", 3, "alder")
    b = corpus(tmp_path / "b.jsonl", 2, "birch")
    real = tmp_path / "real"
    build_index([a], real, LEXICAL)
    (tmp_path / "link").symlink_to(real)
    build_index([a, b], tmp_path / "link",
                BuildOptions(append=True, retrieval="lexical", workers=1))
    assert (tmp_path / "link").is_symlink() and whole(real, 5)
    assert names(tmp_path) == ["a.jsonl", "b.jsonl", "link", "real"]


def test_a_dangling_link_builds_where_it_points(tmp_path: Path) -> None:
    a = corpus(tmp_path / "a.jsonl", 3, "alder")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "later")
    build_index([a], link, LEXICAL)
    assert link.is_symlink() and whole(tmp_path / "later", 3)


def test_a_loop_of_links_is_one_usage_line(tmp_path: Path) -> None:
    (tmp_path / "x").symlink_to(tmp_path / "y")
    (tmp_path / "y").symlink_to(tmp_path / "x")
    with pytest.raises(UsageError, match="cannot be resolved"):
        build_index([corpus(tmp_path / "a.jsonl", 1, "alder")], tmp_path / "x", LEXICAL)


def test_two_builds_through_a_link_and_its_target_share_one_lock(tmp_path: Path) -> None:
    a = corpus(tmp_path / "a.jsonl", 3, "alder")
    real = tmp_path / "real"
    build_index([a], real, LEXICAL)
    (tmp_path / "link").symlink_to(real)
    with indexdir.build_target(tmp_path / "link"):
        with pytest.raises(IndexBusyError, match="holds the lock"):
            build_index([a], real, LEXICAL)
    with indexdir.build_target(real):
        with pytest.raises(IndexBusyError, match="holds the lock"):
            build_index([a], tmp_path / "link", LEXICAL)
    assert whole(real, 3)


def test_remove_built_never_removes_through_a_link(tmp_path: Path) -> None:
    a = corpus(tmp_path / "a.jsonl", 3, "alder")
    other = tmp_path / "other"
    build_index([a], other, LEXICAL)
    before = names(other)
    (tmp_path / "link").symlink_to(other)
    assert indexdir.remove_built(tmp_path / "link") == ["link"]
    assert names(other) == before and (tmp_path / "link").is_symlink() and whole(other, 3)


def test_a_stale_building_link_to_another_index_is_left_alone(tmp_path: Path) -> None:
    a = corpus(tmp_path / "a.jsonl", 3, "alder")
    other = tmp_path / "other"
    build_index([a], other, LEXICAL)
    for name in (f".idx.building-{DEAD}", ".idx.building"):
        (tmp_path / name).symlink_to(other)
    with pytest.raises(UsageError, match="symbolic link or a file"):
        build_index([a], tmp_path / "idx", LEXICAL)  # the resumable work folder is a link
    (tmp_path / ".idx.building").unlink()
    build_index([a], tmp_path / "idx", LEXICAL)
    assert whole(other, 3) and whole(tmp_path / "idx", 3)
    assert (tmp_path / f".idx.building-{DEAD}").is_symlink()


def test_a_stale_old_link_is_never_put_in_place(tmp_path: Path) -> None:
    a = corpus(tmp_path / "a.jsonl", 3, "alder")
    b = corpus(tmp_path / "b.jsonl", 2, "birch")
    other = tmp_path / "other"
    build_index([a], other, LEXICAL)
    (tmp_path / f".idx.old-{DEAD}").symlink_to(other)
    build_index([b], tmp_path / "idx", LEXICAL)  # idx is missing: the old link looks parked
    idx = tmp_path / "idx"
    assert not idx.is_symlink() and whole(idx, 2) and whole(other, 3)
    assert (tmp_path / f".idx.old-{DEAD}").is_symlink()


def test_a_parked_old_index_goes_back_only_when_it_is_a_real_ceg_index(tmp_path: Path) -> None:
    """A build killed between its two renames leaves ``.NAME.old-PID`` holding the whole
    previous index: the next build puts it back. A folder of that name without a ceg
    meta.json is not ceg's, and stays as it is."""
    a = corpus(tmp_path / "a.jsonl", 3, "alder")
    build_index([a], tmp_path / "parked", LEXICAL)
    os.rename(tmp_path / "parked", tmp_path / f".idx.old-{DEAD}")
    indexdir.clean_leftovers(tmp_path / "idx")
    assert whole(tmp_path / "idx", 3)

    mine = tmp_path / f".idy.old-{DEAD}"
    mine.mkdir()
    (mine / "meta.json").write_text('{"mine": true}\n')
    (mine / "chunks.sqlite").write_bytes(b"my data")
    indexdir.clean_leftovers(tmp_path / "idy")
    assert names(mine) == ["chunks.sqlite", "meta.json"] and not (tmp_path / "idy").exists()


def test_an_unmarked_leftover_folder_is_left_alone(tmp_path: Path) -> None:
    stale = tmp_path / f".idx.building-{DEAD}"
    stale.mkdir()
    (stale / "chunks.sqlite").write_bytes(b"not ceg's")
    build_index([corpus(tmp_path / "a.jsonl", 1, "alder")], tmp_path / "idx", LEXICAL)
    assert (stale / "chunks.sqlite").read_bytes() == b"not ceg's"
    (stale / "owner").write_text(f"{DEAD}\n")  # now it carries a dead build's mark
    build_index([corpus(tmp_path / "a.jsonl", 1, "alder")], tmp_path / "idx", LEXICAL)
    assert not stale.exists()


def test_leftovers_are_matched_by_exact_name_not_by_glob(tmp_path: Path) -> None:
    """``idx[12]`` as a glob matches ``idx1``: the leftovers of ``idx1`` are not its own."""
    a = corpus(tmp_path / "a.jsonl", 3, "alder")
    build_index([a], tmp_path / "parked", LEXICAL)
    os.rename(tmp_path / "parked", tmp_path / f".idx1.old-{DEAD}")
    building = tmp_path / f".idx1.building-{DEAD}"
    building.mkdir()
    (building / "owner").write_text(f"{DEAD}\n")
    (building / "chunks.sqlite").write_bytes(b"idx1's")
    build_index([a], tmp_path / "idx[12]", LEXICAL)
    assert whole(tmp_path / "idx[12]", 3)
    assert whole(tmp_path / f".idx1.old-{DEAD}", 3)
    assert (building / "chunks.sqlite").read_bytes() == b"idx1's"
    assert [p.name for p, _, _ in indexdir.leftovers(tmp_path / "idx[12]")] == []
    assert len(indexdir.leftovers(tmp_path / "idx1")) == 2


def test_the_work_folder_is_marked_and_the_mark_never_reaches_the_index(
    tmp_path: Path,
) -> None:
    with indexdir.build_target(tmp_path / "idx") as site:
        work = site.new_work()
        assert indexdir.made_by_ceg(work)
        assert (work / "owner").read_text().strip() == str(os.getpid())
    assert not work.exists()  # neither put in place nor kept: removed on leaving
    build_index([corpus(tmp_path / "a.jsonl", 1, "alder")], tmp_path / "idx", LEXICAL)
    assert "owner" not in names(tmp_path / "idx")


# -- item 8: a folder whose name holds a URI's own characters ------------------------------


@pytest.mark.parametrize("folder", ["a#b", "what?", "100%", "x%23y #2?"])
def test_an_index_in_a_folder_named_with_uri_characters(
    run_cli: Any, fake_models: None, tmp_path: Path, folder: str
) -> None:
    """SQLite URIs are percent-encoded: ``#`` once ended the path, ``?`` began the query
    and ``%23`` was decoded into another name ("unable to open database")."""
    a = corpus(tmp_path / "a.jsonl", 3, "alder")
    b = corpus(tmp_path / "b.jsonl", 2, "birch")
    index = tmp_path / folder / "index"
    assert run_cli("index", "build", a, "--index", index, "-q").exit_code == 0
    # A new source: the append ATTACHes the old store (builder._start) by its URI.
    done = run_cli("index", "build", a, b, "--append", "--index", index, "-q")
    assert done.exit_code == 0, done.stderr
    assert whole(index, 5)
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"response": "The birch number 1 stands near the river "
                                     "birch bank."}) + "\n", encoding="utf-8")
    done = run_cli("check", responses, "--index", index)
    assert done.exit_code == 0, done.stderr
    (record,) = [json.loads(line) for line in done.stdout.splitlines()]
    evidence = record["segments"][0]["evidence"]  # read from the store by its URI
    assert evidence and evidence[0]["text"].startswith(f"The {evidence[0]['doc_id'][:5]} number")
