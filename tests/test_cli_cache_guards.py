"""``ceg cache info|prune`` never change what they only look at, nor remove what ceg
did not write (issue 34, items 6, 7 and 12).

Each test compares the cache folder before and after: every path's name, kind,
bytes and modification time, and the folders' own times (which change when a
file is created or removed in them, even if it is gone again by the end).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from conftest import CliRun

from ceg_cli.cachedir import ENTRY_MARKER, write_entry_marker
from ceg_cli.eval.corpus import EVAL_KIND, ensure_corpus_index
from ceg_cli.eval.datasets import load_dataset
from ceg_cli.index.dense.onnxexport import ONNX_KIND
from ceg_cli.llm.cache import LLMCache

DAY = 86400.0
STALE = time.time() - 40 * DAY


def snapshot(root: Path) -> dict[str, tuple[str, int, bytes]]:
    """Every path under ``root`` and ``root`` itself: kind, mtime (ns) and bytes."""
    out: dict[str, tuple[str, int, bytes]] = {}
    for top, _dirs, files in os.walk(root):
        here = Path(top)
        out[str(here)] = ("dir", here.stat().st_mtime_ns, b"")
        for name in files:
            path = here / name
            out[str(path)] = ("file", path.lstat().st_mtime_ns, path.read_bytes())
    return out


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def ceg_replies(path: Path, n: int = 3) -> None:
    store = LLMCache(path)
    for i in range(n):
        store.put(f"key-{i}", "m", {"text": f"reply {i}"})
    store.close()


def age(path: Path) -> None:
    os.utime(path, (STALE, STALE))


# --- item 7: looking changes nothing ----------------------------------------------


def test_info_and_dry_run_leave_ceg_s_own_reply_store_untouched(
    run_cli: CliRun, tmp_path: Path
) -> None:
    root = tmp_path / "cache"
    ceg_replies(root / "llm.sqlite")
    for path in (root / "llm.sqlite", root):
        age(path)
    before = snapshot(root)
    shown = run_cli("cache", "info", "--json", "--cache-dir", root)
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["kinds"][0]["entries"] == 3
    dry = run_cli("cache", "prune", "--older-than", "30", "--dry-run", "--cache-dir", root)
    assert dry.exit_code == 0, dry.stderr
    # Nothing is older than 30 days: the real run has nothing to do, and writes nothing.
    real = run_cli("cache", "prune", "--older-than", "30", "--cache-dir", root)
    assert real.exit_code == 0, real.stderr
    assert snapshot(root) == before


def wal_without_shm(root: Path) -> None:
    """A reply store whose last two replies are still in its -wal, and no -shm: what a
    run killed while writing leaves (copied while the writer is open)."""
    live = root.parent / "live"
    ceg_replies(live / "llm.sqlite", 1)
    conn = sqlite3.connect(live / "llm.sqlite", isolation_level=None)
    try:
        conn.execute("PRAGMA wal_autocheckpoint=0")
        for key in ("late-1", "late-2"):
            conn.execute(
                "INSERT INTO replies VALUES (?, 'm', '{}', ?)", (key, STALE)
            )
        root.mkdir()
        for name in ("llm.sqlite", "llm.sqlite-wal"):
            shutil.copyfile(live / name, root / name)
    finally:
        conn.close()
    assert not (root / "llm.sqlite-shm").exists()
    for path in (*root.iterdir(), root):
        age(path)


def test_a_wal_without_shm_is_read_whole_and_left_as_it_is(
    run_cli: CliRun, tmp_path: Path
) -> None:
    root = tmp_path / "cache"
    wal_without_shm(root)
    before = snapshot(root)
    shown = run_cli("cache", "info", "--json", "--cache-dir", root)
    assert shown.exit_code == 0, shown.stderr
    # The two replies only the -wal holds are counted.
    assert json.loads(shown.stdout)["kinds"][0]["entries"] == 3
    dry = run_cli("cache", "prune", "--older-than", "30", "--dry-run", "--cache-dir", root)
    assert dry.exit_code == 0, dry.stderr
    assert "would remove 2 LLM replies" in " ".join(dry.stderr.split())
    assert snapshot(root) == before


@pytest.mark.parametrize("kind", ["foreign-sqlite", "text", "folder"])
def test_an_llm_sqlite_that_is_not_ceg_s_is_reported_and_never_changed(
    run_cli: CliRun, tmp_path: Path, kind: str
) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    path = root / "llm.sqlite"
    if kind == "foreign-sqlite":
        with closing(sqlite3.connect(path)) as db, db:
            db.execute("CREATE TABLE notes (body TEXT)")
            db.execute("INSERT INTO notes VALUES ('mine')")
    elif kind == "text":
        path.write_text("my notes, not a database\n", encoding="utf-8")
    else:
        path.mkdir()
        (path / "notes.txt").write_text("mine", encoding="utf-8")
    # An old ceg entry beside it: the refusal comes before anything is removed.
    export = root / "onnx" / ("0" * 24)
    export.mkdir(parents=True)
    (export / "model.onnx").write_bytes(b"onnx")
    for p in (export / "model.onnx", export, *root.iterdir(), root):
        age(p)
    before = snapshot(root)
    for command in (
        ("info",),
        ("info", "--json"),
        ("prune", "--older-than", "30", "--dry-run"),
        ("prune", "--older-than", "30"),
    ):
        result = run_cli("cache", *command, "--cache-dir", root)
        assert result.exit_code == 2, (command, result.stderr)
        said = one_line(result.stderr)
        assert str(path) in " ".join(result.stderr.split())
        assert "--no-cache" not in said and "internal error" not in said
        assert snapshot(root) == before, command
    if kind == "foreign-sqlite":
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        assert tables == {"notes"}


# --- item 6: pruning removes only what ceg wrote ----------------------------------


def make_dataset(path: Path) -> Path:
    row = {"knowledge": "Lake Malawi is described here.", "question": "What is Lake Malawi?",
           "right_answer": "a lake", "hallucinated_answer": "a river"}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def entries_with_user_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hash_embedder: Any
) -> dict[str, Any]:
    """An old eval entry and an old ONNX export, both marked as ceg's, each holding
    files a user put there (in the entry, and inside the eval entry's index)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("CEG_CACHE_DIR", str(root))
    index, _ = ensure_corpus_index(
        load_dataset(make_dataset(tmp_path / "d.jsonl")), embedder=hash_embedder
    )
    entry = index.parent
    (entry / "index.corpus.lock").unlink()
    (entry / "my-notes.txt").write_text("mine", encoding="utf-8")
    (index / "README.md").write_text("mine too", encoding="utf-8")
    export = root / "onnx" / ("a" * 24)
    export.mkdir(parents=True)
    write_entry_marker(export, ONNX_KIND)
    (export / "model.onnx").write_bytes(b"onnx" * 100)
    (export / "results.csv").write_text("mine", encoding="utf-8")
    for path in (*entry.rglob("*"), entry, *export.iterdir(), export):
        age(path)
    assert (entry / ENTRY_MARKER).exists() and EVAL_KIND
    return {"root": root, "entry": entry, "index": index, "export": export}


def test_prune_removes_what_ceg_wrote_in_an_entry_and_leaves_the_rest(
    run_cli: CliRun, entries_with_user_files: dict[str, Any]
) -> None:
    e = entries_with_user_files
    root, entry, export = e["root"], e["entry"], e["export"]
    before = snapshot(root)
    dry = run_cli("cache", "prune", "--older-than", "30", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert snapshot(root) == before
    said = " ".join(dry.stderr.split())
    assert f"would remove {entry}" in said and f"would remove {export}" in said
    assert "index/README.md" in said and "my-notes.txt" in said and "results.csv" in said

    real = run_cli("cache", "prune", "--older-than", "30")
    assert real.exit_code == 0, real.stderr
    said = " ".join(real.stderr.split())
    assert "1 eval corpus indexes and 1 ONNX model exports" in said
    left = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    key = entry.name
    assert left == [
        f"eval/{key}/index/README.md",
        f"eval/{key}/my-notes.txt",
        f"onnx/{'a' * 24}/results.csv",
    ]
    for path in left:
        assert (root / path).read_text(encoding="utf-8").startswith("mine")
    # What stays is the user's: the next prune calls it not ceg's and leaves it.
    again = run_cli("cache", "prune", "--older-than", "30")
    assert again.exit_code == 0, again.stderr
    assert f"{entry}: not ceg's, left alone" in " ".join(again.stderr.split())
    assert (entry / "my-notes.txt").exists()
