"""A tantivy lexical part on read-only media, read by another user (issue 60, items 7, 12).

tantivy takes its meta lock (``.tantivy-meta.lock``, opened for writing, then
``flock``ed) whenever a reader loads segments, so a part on read-only media (a
Docker layer, read-only NFS, a CI cache) could not be opened; and tantivy writes
``lexical/meta.json`` and ``.managed.json`` as 0600, so an index built by one
account could not be read by another. The reader is tested as an unprivileged
user: CI runs as root, which no file mode stops, so as root the reading process
drops to ``nobody`` (after its imports: the interpreter may live where ``nobody``
cannot read, such as ``/root``).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ceg_cli.index import open_index
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.lexical.bm25 import LEXICAL_DIR, lexical_problem
from ceg_cli.index.lexical.lexical_tantivy import LOCK_FILES

TANTIVY = BuildOptions(retrieval="lexical", lexical_engine="tantivy", workers=1)
NOBODY = 65534

#: Run in a child: search a writable copy first (every lazy import done), drop to
#: nobody when root, then open the read-only index and search it.
READER = r"""
import json, os, shutil, sys
from ceg_cli.index import open_index

index, warm = sys.argv[1], sys.argv[2]
def search(path):
    opened = open_index(path)
    hits = opened.search(["zebra quagga"], k=3, retrieval="lexical")[0]
    return [h.chunk.doc_id for h in hits]
search(warm)
if os.geteuid() == 0:
    os.setgroups([])
    os.setgid(int(sys.argv[3]))
    os.setuid(int(sys.argv[3]))
print(json.dumps({"uid": os.geteuid(), "hits": search(index)}))
"""


def corpus(path: Path) -> Path:
    words = ["zebra quagga", "heron egret", "otter beaver", "maple birch"]
    rows = [{"id": f"d{i}", "title": f"Doc {i}", "text": f"The {words[i % 4]} of place {i}."}
            for i in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder another user can reach (pytest's own is 0700 under root), removed after."""
    folder = Path(tempfile.mkdtemp(prefix="ceg-test-ro-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in [folder, *folder.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(folder)


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_mode, p.stat().st_size)
            for p in sorted(folder.rglob("*"))}


def test_the_tantivy_files_are_readable_as_the_umask_says(
    tmp_path: Path, umask_022: None
) -> None:
    index = tmp_path / "idx"
    build_index([corpus(tmp_path / "c.jsonl")], index, TANTIVY)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (index / LEXICAL_DIR).iterdir()}
    assert "meta.json" in modes and ".managed.json" in modes
    assert set(modes.values()) == {0o644}, modes


def test_a_read_only_tantivy_part_is_read_by_another_user_without_a_lock(
    shared_dir: Path, umask_022: None
) -> None:
    index = shared_dir / "idx"
    build_index([corpus(shared_dir / "c.jsonl")], index, TANTIVY)
    assert json.loads((index / "meta.json").read_text())["lexical"]["library"] == "tantivy"
    warm = shared_dir / "warm"
    shutil.copytree(index, warm)
    for name in LOCK_FILES:  # a copy of the index without tantivy's lock files
        (index / LEXICAL_DIR / name).unlink(missing_ok=True)
    for path in [index, *index.rglob("*")]:  # read-only media
        path.chmod(0o555 if path.is_dir() else 0o444)
    before = tree(index)
    links = shared_dir / "tmp"  # where the reader makes its folder of links
    links.mkdir()
    links.chmod(0o1777)

    done = subprocess.run(
        [sys.executable, "-c", READER, str(index), str(warm), str(NOBODY)],
        capture_output=True, text=True, timeout=120, cwd=shared_dir,
        env={**os.environ, "TMPDIR": str(links)},
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["uid"] != 0
    assert said["hits"] and set(said["hits"]) <= {"d0", "d4", "d8"}
    assert tree(index) == before  # nothing written into the index, no lock file made
    assert list(links.iterdir()) == []  # the reader's folder of links went with it


def test_a_copy_without_the_lock_files_is_not_damaged(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    build_index([corpus(tmp_path / "c.jsonl")], index, TANTIVY)
    meta = json.loads((index / "meta.json").read_text())
    assert not set(meta["lexical"]["files"]) & LOCK_FILES
    copy = tmp_path / "copy"
    shutil.copytree(index, copy, ignore=shutil.ignore_patterns(*LOCK_FILES))
    assert lexical_problem(meta, copy) is None
    opened = open_index(copy)
    assert opened.search(["otter"], k=2, retrieval="lexical")[0]
    assert not set(os.listdir(copy / LEXICAL_DIR)) & LOCK_FILES  # the reader made none


def test_an_index_whose_record_lists_the_lock_files_still_opens(tmp_path: Path) -> None:
    """Indexes built before: their meta.json recorded the lock files' digests."""
    index = tmp_path / "idx"
    build_index([corpus(tmp_path / "c.jsonl")], index, TANTIVY)
    meta = json.loads((index / "meta.json").read_text())
    for name in LOCK_FILES:
        meta["lexical"]["files"][name] = "sha256-sampled:" + "0" * 64
    assert lexical_problem(meta, index) is None
