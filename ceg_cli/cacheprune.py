"""The ceg cache folder as a whole: what it holds, and pruning what is old.

Two kinds of entry live under ``cache_root()`` (``$CEG_CACHE_DIR``, else
``$XDG_CACHE_HOME/ceg``, else ``~/.cache/ceg``):

- ``llm.sqlite``: LLM replies, one row each, dated when stored;
- ``eval/<key>/``: the index of a benchmark's own corpus (``ceg eval``), dated
  by its corpus file, which every run that uses the index rewrites;
- ``onnx/<key>/``: the embedding model exported for ``--backend onnx`` and
  ``onnx-int8``, dated by its newest file, which every load touches.

None grows smaller by itself, so a CI runner's cache grows with every new
prompt and dataset; ``prune_cache`` removes what was not used for a while.
Pruning is safe beside running commands: replies go in one SQLite transaction,
and a corpus index is removed only under its lock, never while a ``ceg eval``
builds it (that entry is skipped and reported).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .eval.corpus import EVAL_DIR, INDEX_NAME, corpus_file, hold_corpus_lock
from .index.embedding import ONNX_DIR
from .llm.cache import CACHE_FILE as LLM_FILE
from .llm.cache import LLMCache


@dataclass(frozen=True)
class KindInfo:
    """One kind of cache entry: how many, how large, how old (epoch seconds)."""

    kind: str
    path: Path
    entries: int
    bytes: int
    oldest: float | None
    newest: float | None


@dataclass
class PruneReport:
    """What ``prune_cache`` removed (or, with ``dry_run``, would remove)."""

    replies_removed: int = 0
    replies_kept: int = 0
    indexes_removed: int = 0
    indexes_kept: int = 0
    bytes_freed: int = 0
    #: Corpus indexes that another run is building now: left alone.
    busy: list[Path] = field(default_factory=list)
    exports_removed: int = 0
    exports_kept: int = 0


def cache_info(root: Path) -> list[KindInfo]:
    """What the cache at ``root`` holds, by kind; creates nothing."""
    return [
        _llm_info(root),
        _folder_info("eval corpus indexes", root / EVAL_DIR, _last_used),
        _folder_info("ONNX model exports", root / ONNX_DIR, _newest_file),
    ]


def prune_cache(
    root: Path, older_than_s: float, *, now: float | None = None, dry_run: bool = False
) -> PruneReport:
    """Remove replies stored, and corpus indexes last used, more than ``older_than_s`` ago."""
    cutoff = (time.time() if now is None else now) - older_than_s
    report = PruneReport()
    llm = root / LLM_FILE
    if llm.exists():
        before = _files_size(_llm_files(llm))
        cache = LLMCache(llm)
        try:
            report.replies_removed = cache.prune(cutoff, dry_run=dry_run)
            report.replies_kept = cache.span()[0] - (report.replies_removed if dry_run else 0)
        finally:
            cache.close()
        if not dry_run:
            report.bytes_freed += max(0, before - _files_size(_llm_files(llm)))
    for entry in _entries(root / EVAL_DIR):
        if _last_used(entry) >= cutoff:
            report.indexes_kept += 1
            continue
        with hold_corpus_lock(entry / INDEX_NAME, wait=False) as held:
            if not held:
                report.busy.append(entry)
                report.indexes_kept += 1
                continue
            report.indexes_removed += 1
            report.bytes_freed += _tree_size(entry)
            if not dry_run:
                # The lock file goes too: a run waiting on it sees it unlinked and
                # takes a fresh one, so no two runs ever build one entry at once.
                shutil.rmtree(entry)
    for entry in _entries(root / ONNX_DIR):
        if _newest_file(entry) >= cutoff:
            report.exports_kept += 1
            continue
        report.exports_removed += 1
        report.bytes_freed += _tree_size(entry)
        if not dry_run:
            # Exported again, offline, by the next build that asks for the backend.
            shutil.rmtree(entry, ignore_errors=True)
    return report


def _newest_file(entry: Path) -> float:
    """When the export was last used or written (an export in progress counts as new)."""
    times = [entry.stat().st_mtime]
    for file in entry.iterdir():
        try:
            times.append(file.stat().st_mtime)
        except FileNotFoundError:
            continue
    return max(times)


def _llm_info(root: Path) -> KindInfo:
    path = root / LLM_FILE
    if not path.exists():
        return KindInfo("LLM replies", path, 0, 0, None, None)
    cache = LLMCache(path)
    try:
        count, oldest, newest = cache.span()
    finally:
        cache.close()
    return KindInfo("LLM replies", path, count, _files_size(_llm_files(path)), oldest, newest)


def _folder_info(kind: str, folder: Path, last_used: Callable[[Path], float]) -> KindInfo:
    """A kind whose entries are the folders in ``folder``, each dated by ``last_used``."""
    entries = list(_entries(folder))
    used = [last_used(e) for e in entries]
    return KindInfo(
        kind,
        folder,
        len(entries),
        sum(_tree_size(e) for e in entries),
        min(used, default=None),
        max(used, default=None),
    )


def _entries(folder: Path) -> Iterator[Path]:
    if folder.is_dir():
        yield from sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())


def _last_used(entry: Path) -> float:
    """When a run last used the entry: its corpus file is rewritten by every run."""
    for candidate in (corpus_file(entry / INDEX_NAME), entry):
        try:
            return candidate.stat().st_mtime
        except FileNotFoundError:
            continue
    return 0.0


def _llm_files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _files_size(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        try:
            total += p.stat().st_size
        except FileNotFoundError:
            pass
    return total


def _tree_size(folder: Path) -> int:
    # os.walk passes over folders that vanish while it walks (a build's temporary one).
    files = [Path(top, name) for top, _dirs, names in os.walk(folder) for name in names]
    return _files_size([p for p in files if not p.is_symlink()])
