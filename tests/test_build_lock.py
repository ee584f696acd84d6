"""The build lock ``.NAME.lock`` goes when the build ends (issue 44, item 26).

``ceg index build --index DIR`` left ``.DIR.lock`` in the parent folder for good. A build
now removes the lock file while it still holds it, and only an empty file at that name
(ceg's locks are empty): a build that opened the file just before it went takes the name
afresh, so two builds never each hold a file of that name.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest

import ceg_cli.index.indexdir as indexdir
from ceg_cli.errors import IndexBusyError
from ceg_cli.index.build.builder import build_index

TRUNCATED = Path(__file__).parent / "data" / "hostile" / "truncated.xml.bz2"


def corpus(path: Path) -> Path:
    rows = [{"id": str(i), "title": f"Doc {i}", "text": f"Passage number {i} is here."}
            for i in range(5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_ceg_index_build_leaves_nothing_new_beside_the_index(
    run_cli: Any, fake_models: None, tmp_path: Path
) -> None:
    docs = corpus(tmp_path / "docs.jsonl")
    parent = tmp_path / "out"
    parent.mkdir()
    result = run_cli("index", "build", docs, "--index", parent / "idx", "-q")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in parent.iterdir()) == ["idx"]
    # And a second build, which replaces the index, the same.
    result = run_cli("index", "build", docs, "--index", parent / "idx", "-q")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in parent.iterdir()) == ["idx"]


def test_a_failed_build_leaves_no_lock_either(
    run_cli: Any, fake_models: None, tmp_path: Path
) -> None:
    parent = tmp_path / "out"
    parent.mkdir()
    result = run_cli("index", "build", corpus(tmp_path / "docs.jsonl"), TRUNCATED,
                     "--index", parent / "idx", "-q")
    assert result.exit_code == 2 and "truncated" in result.stderr
    assert list(parent.iterdir()) == []


def test_a_lock_file_a_killed_build_left_goes_with_the_next_build(
    tmp_path: Path, hash_embedder: Any
) -> None:
    (tmp_path / ".idx.lock").touch()  # what a SIGKILLed build leaves: an empty file
    build_index([corpus(tmp_path / "docs.jsonl")], tmp_path / "idx", embedder=hash_embedder)
    assert not (tmp_path / ".idx.lock").exists()


def test_a_file_someone_wrote_under_the_lock_name_stays(
    tmp_path: Path, hash_embedder: Any
) -> None:
    (tmp_path / ".idx.lock").write_text("my notes\n")
    build_index([corpus(tmp_path / "docs.jsonl")], tmp_path / "idx", embedder=hash_embedder)
    assert (tmp_path / ".idx.lock").read_text() == "my notes\n"


def test_a_second_build_is_refused_and_does_not_remove_the_holders_lock(
    tmp_path: Path,
) -> None:
    target = tmp_path / "idx"
    with indexdir.build_lock(target) as path:
        with pytest.raises(IndexBusyError, match="holds the lock"):
            with indexdir.build_lock(target):
                pass  # pragma: no cover
        assert path.exists()
        assert held_elsewhere(path)
    assert not path.exists()
    with indexdir.build_lock(target):  # free again
        assert held_elsewhere(path)


def test_a_build_that_opened_the_lock_as_it_went_takes_the_name_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race that makes removing a lock file unsafe, played in order: B opens the
    lock file, A ends (removes it, lets go), B's flock then succeeds on a file no longer
    at that name. B must not build on it, or C, starting now, would lock a new file of
    the same name and build at the same time."""
    target = tmp_path / "idx"
    path = indexdir.lock_path(target)
    with indexdir.build_lock(target):
        stale = os.open(path, os.O_RDWR)  # B, between its open and its flock
    assert not path.exists()  # A ended
    real_open = os.open
    opened: list[int] = []

    def b_open(file: Any, flags: int, mode: int = 0o777) -> int:
        if Path(file) == path and not opened:
            opened.append(stale)
            return stale
        return real_open(file, flags, mode)

    monkeypatch.setattr(os, "open", b_open)
    with indexdir.build_lock(target):
        assert opened == [stale]  # B did get the removed file first
        assert path.exists()  # and then took the name: a C would find it held
        assert held_elsewhere(path)
    with pytest.raises(OSError):
        os.fstat(stale)  # B closed the stale descriptor


def held_elsewhere(path: Path) -> bool:
    """Whether a new descriptor of ``path`` finds its flock taken."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_a_lock_name_that_is_a_link_is_followed_and_the_link_stays(tmp_path: Path) -> None:
    """A symbolic link at the lock's name (a user's setup) locks its target, as the
    filelock-based lock did; the link is not ceg's file and stays."""
    target = tmp_path / "idx"
    elsewhere = tmp_path / "elsewhere.lock"
    elsewhere.touch()
    indexdir.lock_path(target).symlink_to(elsewhere)
    with indexdir.build_lock(target):
        assert held_elsewhere(elsewhere)
    assert indexdir.lock_path(target).is_symlink() and elsewhere.exists()


def test_a_file_system_without_locks_is_one_usage_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hash_embedder: Any
) -> None:
    """Some network mounts refuse flock: one line naming the lock, no traceback."""
    import errno

    from ceg_cli.errors import UsageError

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(UsageError) as info:
        build_index([corpus(tmp_path / "docs.jsonl")], tmp_path / "idx", embedder=hash_embedder)
    assert str(info.value) == (
        f"{tmp_path / '.idx.lock'}: this file system cannot lock files (No locks available), "
        "and a build holds a lock beside its index; build it on a local disk (--index)"
    )
    assert not (tmp_path / "idx").exists()
