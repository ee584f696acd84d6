"""``ceg cache info`` and ``ceg cache prune`` through the real CLI, on a real cache.

The cache holds real entries: an LLM reply store made by ``LLMCache`` and eval
corpus indexes built by ``ensure_corpus_index`` (with the free fake model).
Ages are set the way time sets them: the reply's stored date, the corpus
file's modification time.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from conftest import CliRun, need_extra

from ceg_cli.eval.corpus import corpus_cache_dir, corpus_lock_path, ensure_corpus_index
from ceg_cli.eval.datasets import load_dataset
from ceg_cli.llm.cache import LLMCache

DAY = 86400.0
NOW = time.time()


def make_dataset(path: Path, topic: str) -> Path:
    row = {
        "knowledge": f"{topic} is described in this passage.",
        "question": f"What is {topic}?",
        "right_answer": topic,
        "hallucinated_answer": f"Not {topic}.",
    }
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hash_embedder: Any) -> dict[str, Any]:
    """3 replies (2 stored 40 days ago) and 2 corpus indexes (one last used 40 days ago)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("CEG_CACHE_DIR", str(root))
    store = LLMCache(root / "llm.sqlite")
    for key in ("old-1", "old-2", "new-1"):
        store.put(key, "m", {"text": key * 200})
    store.close()
    with closing(sqlite3.connect(root / "llm.sqlite")) as db, db:
        db.execute("UPDATE replies SET created = ? WHERE key LIKE 'old-%'", (NOW - 40 * DAY,))
    old = load_dataset(make_dataset(tmp_path / "old.jsonl", "Lake Malawi"))
    new = load_dataset(make_dataset(tmp_path / "new.jsonl", "Mount Elbrus"))
    old_index, _ = ensure_corpus_index(old, embedder=hash_embedder)
    new_index, _ = ensure_corpus_index(new, embedder=hash_embedder)
    stale = NOW - 40 * DAY
    os.utime(old_index.parent / "index.corpus.jsonl", (stale, stale))
    # Two ONNX exports laid out as onnx_export lays them out; one last used 40 days ago.
    exports = []
    for key in ("0123456789abcdef01234567", "89abcdef0123456789abcdef"):
        folder = root / "onnx" / key
        folder.mkdir(parents=True)
        for name in ("model.onnx", "model-int8.onnx"):
            (folder / name).write_bytes(b"\x08\x07" * 500)
        exports.append(folder)
    for file in [*exports[0].iterdir(), exports[0]]:
        os.utime(file, (stale, stale))
    return {"root": root, "old": old, "new": new, "old_index": old_index, "new_index": new_index,
            "exports": exports}


def info(run_cli: CliRun) -> dict[str, Any]:
    result = run_cli("cache", "info", "--json")
    assert result.exit_code == 0, result.stderr
    return {k["kind"]: k for k in json.loads(result.stdout)["kinds"]}


def day(epoch: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def test_info_says_where_how_many_how_large_how_old(
    run_cli: CliRun, cache: dict[str, Any]
) -> None:
    kinds = info(run_cli)
    llm, ev = kinds["LLM replies"], kinds["eval corpus indexes"]
    assert llm["path"] == str(cache["root"] / "llm.sqlite") and llm["entries"] == 3
    assert llm["bytes"] >= 3 * 1000  # three replies of ~1 KB each
    assert llm["oldest"].startswith(day(NOW - 40 * DAY)) and llm["newest"].startswith(day(NOW))
    assert ev["path"] == str(cache["root"] / "eval") and ev["entries"] == 2
    assert ev["bytes"] > 0
    assert ev["oldest"].startswith(day(NOW - 40 * DAY)) and ev["newest"].startswith(day(NOW))

    onnx = kinds["ONNX model exports"]
    assert onnx["path"] == str(cache["root"] / "onnx") and onnx["entries"] == 2
    assert onnx["bytes"] == 4 * 1000
    assert onnx["oldest"].startswith(day(NOW - 40 * DAY)) and onnx["newest"].startswith(day(NOW))

    table = run_cli("cache", "info")
    assert table.exit_code == 0
    assert f"cache {cache['root']}" in table.stdout
    assert "LLM replies" in table.stdout and "eval corpus indexes" in table.stdout


def test_info_on_an_empty_cache_creates_nothing(run_cli: CliRun, tmp_path: Path) -> None:
    empty = tmp_path / "nothing-here"
    result = run_cli("cache", "info", "--json", "--cache-dir", empty)
    assert result.exit_code == 0
    assert [k["entries"] for k in json.loads(result.stdout)["kinds"]] == [0, 0, 0]
    assert not empty.exists()


def test_prune_removes_what_is_old_and_keeps_what_is_used(
    run_cli: CliRun, cache: dict[str, Any], hash_embedder: Any
) -> None:
    dry = run_cli("cache", "prune", "--older-than", "30", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert ("would remove 2 LLM replies, 1 eval corpus indexes and 1 ONNX model exports"
            in " ".join(dry.stderr.split()))
    assert [k["entries"] for k in info(run_cli).values()] == [3, 2, 2]

    result = run_cli("cache", "prune", "--older-than", "30")
    assert result.exit_code == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert ("removed 2 LLM replies, 1 eval corpus indexes and 1 ONNX model exports older "
            "than 30 days") in said
    assert "kept 1 replies, 1 indexes and 1 exports" in said
    assert [k["entries"] for k in info(run_cli).values()] == [1, 1, 1]
    assert not cache["exports"][0].exists() and cache["exports"][1].exists()
    store = LLMCache(cache["root"] / "llm.sqlite")
    assert store.get("new-1") is not None and store.get("old-1") is None
    store.close()
    assert not corpus_cache_dir(cache["old"]).exists()
    # The kept index is reused as it was; the pruned one is simply built again.
    assert ensure_corpus_index(cache["new"], embedder=hash_embedder) == (cache["new_index"], False)
    assert ensure_corpus_index(cache["old"], embedder=hash_embedder) == (cache["old_index"], True)


HOLD = r"""
import sys
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
lock.release()
"""


def test_prune_leaves_an_index_that_a_run_is_building(
    run_cli: CliRun, cache: dict[str, Any]
) -> None:
    # Another process (a ceg eval building this corpus) holds the index's lock.
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(corpus_lock_path(cache["old_index"]))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        dry = run_cli("cache", "prune", "--older-than", "30", "--dry-run")
        assert "a ceg eval is building this corpus index now" in " ".join(dry.stderr.split())
        assert f"would remove {cache['old_index'].parent}" not in dry.stderr
        result = run_cli("cache", "prune", "--older-than", "30")
        assert result.exit_code == 0, result.stderr
        said = " ".join(result.stderr.split())
        assert "a ceg eval is building this corpus index now; left alone" in said
        assert "replies, 0 eval corpus indexes" in said
        assert (cache["old_index"] / "meta.json").exists()
    finally:
        holder.communicate("\n", timeout=30)
    result = run_cli("cache", "prune", "--older-than", "30")
    assert "replies, 1 eval corpus indexes" in " ".join(result.stderr.split())
    assert not cache["old_index"].exists()


WRITER = r"""
import sys
from ceg_cli.llm.cache import LLMCache
store = LLMCache(sys.argv[1])
print("writing", flush=True)
for n in range(300):
    store.put(f"fresh-{n}", "m", {"text": "x" * 500})
store.close()
"""


def test_prune_beside_a_run_that_writes_replies(run_cli: CliRun, cache: dict[str, Any]) -> None:
    # A check run storing replies while the cache is pruned: no error on either
    # side, every fresh reply kept, every old one gone.
    path = cache["root"] / "llm.sqlite"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "writing"
    result = run_cli("cache", "prune", "--older-than", "30")
    _, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    assert result.exit_code == 0, result.stderr
    with sqlite3.connect(path) as db:
        keys = {k for (k,) in db.execute("SELECT key FROM replies")}
    assert {f"fresh-{n}" for n in range(300)} <= keys
    assert not {"old-1", "old-2"} & keys and "new-1" in keys


def test_prune_needs_a_non_negative_age(run_cli: CliRun, cache: dict[str, Any]) -> None:
    result = run_cli("cache", "prune", "--older-than", "-1")
    assert result.exit_code == 2
    assert [k["entries"] for k in info(run_cli).values()] == [3, 2, 2]


def test_reusing_an_onnx_export_marks_it_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model loaded every day from its export is never pruned as unused."""
    import hashlib

    import torch

    onnxruntime: Any = need_extra("onnxruntime", "fast")

    from ceg_cli.index.dense import onnxexport

    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))
    weights = tmp_path / "model"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"weights")
    key = hashlib.sha256(
        f"{hashlib.sha256(b'weights').hexdigest()} torch {torch.__version__} "
        f"onnxruntime {onnxruntime.__version__}".encode()
    ).hexdigest()[:24]
    export = tmp_path / "cache" / "onnx" / key / "model.onnx"
    export.parent.mkdir(parents=True)
    export.write_bytes(b"onnx")
    stale = NOW - 40 * DAY
    os.utime(export, (stale, stale))
    assert onnxexport.onnx_export(None, str(weights), quantized=False) == export
    assert export.stat().st_mtime > NOW - DAY


def tree(root: Path) -> dict[str, float]:
    """Every path under ``root`` (folders too) and its modification time."""
    out = {}
    for top, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(top, name)
            out[str(path)] = path.lstat().st_mtime
    return out


def stale_folder(folder: Path, *files: str) -> Path:
    """A folder ceg never made, with ``files`` in it, all dated 40 days back."""
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).write_text("mine", encoding="utf-8")
    stale = NOW - 40 * DAY
    for path in [*folder.iterdir(), folder]:
        os.utime(path, (stale, stale))
    return folder


def test_prune_leaves_folders_ceg_never_made(run_cli: CliRun, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    res = stale_folder(proj / "eval" / "res", "results.csv")
    onnx = stale_folder(proj / "onnx" / "m", "model.onnx")
    result = run_cli("cache", "prune", "--older-than", "30", "--cache-dir", proj)
    assert result.exit_code == 0, result.stderr
    assert res.exists() and onnx.exists() and (res / "results.csv").exists()
    said = " ".join(result.stderr.split())
    assert f"{res}: not ceg's, left alone" in said and f"{onnx}: not ceg's, left alone" in said
    assert "0 eval corpus indexes and 0 ONNX model exports" in said
    shown = run_cli("cache", "info", "--json", "--cache-dir", proj)
    kinds = json.loads(shown.stdout)["kinds"]
    assert [(k["entries"], k["not_ceg"]) for k in kinds] == [(0, 0), (0, 1), (0, 1)]


def test_prune_knows_its_entries_by_marker_or_exact_layout(
    run_cli: CliRun, cache: dict[str, Any]
) -> None:
    old_entry = cache["old_index"].parent
    assert (old_entry / ".ceg-cache-entry").exists()
    # Made by a ceg before the marker: recognised by its exact layout.
    (old_entry / ".ceg-cache-entry").unlink()
    # Looks like an entry but holds a file ceg never writes there: not ceg's.
    look_alike = cache["root"] / "eval" / ("f" * 24)
    stale_folder(look_alike, "index.corpus.jsonl", "notes.txt")
    result = run_cli("cache", "prune", "--older-than", "30")
    assert result.exit_code == 0, result.stderr
    assert not old_entry.exists() and (look_alike / "notes.txt").exists()
    assert f"{look_alike}: not ceg's, left alone" in " ".join(result.stderr.split())


def test_dry_run_writes_nothing_and_lists_what_the_real_run_removes(
    run_cli: CliRun, cache: dict[str, Any]
) -> None:
    root = cache["root"]
    stale_folder(root / "eval" / "res", "results.csv")
    (cache["old_index"].parent / "index.corpus.lock").unlink()
    stale = NOW - 40 * DAY
    os.utime(cache["old_index"].parent, (stale, stale))
    before = tree(root)
    dry = run_cli("cache", "prune", "--older-than", "30", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert tree(root) == before
    listed = {line.split("would remove ", 1)[1].strip() for line in dry.stderr.splitlines()
              if line.startswith("would remove /")}
    assert listed == {str(cache["old_index"].parent), str(cache["exports"][0])}
    real = run_cli("cache", "prune", "--older-than", "30")
    assert real.exit_code == 0, real.stderr
    entries = [*(root / "eval").iterdir(), *(root / "onnx").iterdir()]
    gone = {p for p in before if Path(p).parent in {root / "eval", root / "onnx"}} - {
        str(p) for p in entries
    }
    assert gone == listed


def test_cache_dir_that_is_a_file_is_refused(run_cli: CliRun, tmp_path: Path) -> None:
    file = tmp_path / "cache.txt"
    file.write_text("not a folder")
    for command in (("info",), ("prune", "--older-than", "30")):
        result = run_cli("cache", *command, env={"CEG_CACHE_DIR": str(file)})
        assert result.exit_code == 2
        assert str(file) in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_prune_age_minus_zero_is_zero(run_cli: CliRun, tmp_path: Path) -> None:
    result = run_cli("cache", "prune", "--older-than", "-0", "--cache-dir", tmp_path)
    assert result.exit_code == 0, result.stderr
    said = " ".join(result.stderr.split())
    # Only ceg's words, after the path: pytest's temporary folder on a fresh machine
    # is .../pytest-0/..., which holds "-0" too.
    assert said.startswith(f"{tmp_path}: ")
    words = said.removeprefix(f"{tmp_path}: ")
    assert "older than 0 days" in words and "-0" not in words
