"""The ceg cache folder as a whole: what it holds, and pruning what is old.

Two kinds of entry live under ``cache_root()`` (``$CEG_CACHE_DIR``, else
``$XDG_CACHE_HOME/ceg``, else ``~/.cache/ceg``):

- ``llm.sqlite``: LLM replies, one row each, dated when stored;
- ``eval/<key>/``: the index of a benchmark's own corpus (``ceg eval``), dated
  by its corpus file, which every run that uses the index rewrites;
- ``onnx/<key>/``: the embedding model exported for ``--backend onnx`` and
  ``onnx-int8``, dated by its newest file, which every load touches;
- ``static/<key>/``: ``static-minilm``, distilled on first use, dated by its folder,
  which every load touches (made again, offline, by the next use after a prune).

None grows smaller by itself, so a CI runner's cache grows with every new
prompt and dataset; ``prune_cache`` removes what was not used for a while.
Pruning is safe beside running commands: replies go in one SQLite transaction,
and a corpus index is removed only under its lock, never while a ``ceg eval``
builds it (that entry is skipped and reported).

Only entries ceg can tell are its own are counted or removed: a folder holding
a valid marker (``cachedir.ENTRY_MARKER``), or one in exactly the layout ceg
writes (a 24-hex-digit key holding only the files ceg puts there: for an eval
entry the index's ``meta.json`` and its corpus file, for an export the ONNX
files). Anything else under ``eval/`` or ``onnx/`` is reported as not ceg's and
left alone. In an entry of ceg's, only what ceg writes there is removed: a file
someone put in it stays (and the folder with it), and is reported. A dry run
writes nothing (it takes no lock, it only looks whether one is held) and lists
exactly what the real run would remove and leave.

``llm.sqlite`` is read without writing anything (``llm.cache.count_replies_readonly``)
and opened for writing only when it is ceg's reply store with replies to remove;
a folder, a file that is not SQLite or a database that is not ceg's under that
name is refused, exit 2, before anything is removed.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .cachedir import ENTRY_MARKER, read_entry_marker, remove_own, split_entry
from .eval.corpus import (
    EVAL_DIR,
    EVAL_KIND,
    INDEX_NAME,
    corpus_file,
    corpus_lock_path,
    hold_corpus_lock,
)
from .index.dense.onnxexport import ONNX_DIR, ONNX_KIND
from .index.dense.static import STATIC_DIR, STATIC_FILES, STATIC_KIND, STATIC_TMP
from .index.indexdir import BUILT_NAMES, FOREIGN_OK
from .index.layout import LEXICAL_DIR, SHARDS
from .index.metacheck import file_problem
from .llm.cache import CACHE_FILE as LLM_FILE
from .llm.cache import LLMCache, count_replies_readonly

#: What to do about an ``llm.sqlite`` that is not ceg's reply store (or cannot be read).
LLM_ADVICE = (
    "ceg leaves it as it is: move it out of the cache folder, or name another one "
    "with --cache-dir"
)


@dataclass(frozen=True)
class KindInfo:
    """One kind of cache entry: how many, how large, how old (epoch seconds)."""

    kind: str
    path: Path
    entries: int
    bytes: int
    oldest: float | None
    newest: float | None
    #: Things in ``path`` that ceg did not make (or cannot tell it did): left alone.
    foreign: int = 0


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
    statics_removed: int = 0
    statics_kept: int = 0
    #: The entries removed (or, with ``dry_run``, that the real run would remove).
    removed: list[Path] = field(default_factory=list)
    #: What lies under ``eval/`` or ``onnx/`` but is not ceg's: left alone.
    foreign: list[Path] = field(default_factory=list)
    #: In an entry removed, what ceg did not write (by entry, relative paths): left there,
    #: and the entry's folder with it.
    left: dict[Path, list[str]] = field(default_factory=dict)


def cache_info(root: Path) -> list[KindInfo]:
    """What the cache at ``root`` holds, by kind; creates nothing."""
    return [
        _llm_info(root),
        _folder_info("eval corpus indexes", root / EVAL_DIR, _is_eval_entry, _last_used),
        _folder_info("ONNX model exports", root / ONNX_DIR, _is_onnx_entry, _newest_file),
        _folder_info("static models", root / STATIC_DIR, _is_static_entry, _newest_file),
    ]


def prune_cache(
    root: Path, older_than_s: float, *, now: float | None = None, dry_run: bool = False
) -> PruneReport:
    """Remove replies stored, and ceg's own entries last used, more than ``older_than_s`` ago.

    With ``dry_run`` nothing is written, not even a lock file.
    """
    cutoff = (time.time() if now is None else now) - older_than_s
    report = PruneReport()
    llm = root / LLM_FILE
    if llm.exists() or llm.is_symlink():
        # Read first, writing nothing: a file that is not ceg's reply store is refused
        # here (before anything is removed), and a store with nothing old is not opened
        # for writing at all.
        counted = count_replies_readonly(llm, cutoff, advice=LLM_ADVICE)
        report.replies_removed = counted.older
        report.replies_kept = counted.count - counted.older
        if counted.older and not dry_run:
            before = _files_size(_llm_files(llm))
            cache = LLMCache(llm, advice=LLM_ADVICE)
            try:
                report.replies_removed = cache.prune(cutoff)
                report.replies_kept = cache.span()[0]
            finally:
                cache.close()
            report.bytes_freed += max(0, before - _files_size(_llm_files(llm)))
    for entry in _children(root / EVAL_DIR):
        if not _is_eval_entry(entry):
            report.foreign.append(entry)
        elif _last_used(entry) >= cutoff:
            report.indexes_kept += 1
        elif dry_run:
            if _lock_held_elsewhere(corpus_lock_path(entry / INDEX_NAME)):
                report.busy.append(entry)
                report.indexes_kept += 1
            else:
                report.indexes_removed += 1
                _removing(report, entry, _own_eval)
        else:
            with hold_corpus_lock(entry / INDEX_NAME, wait=False) as held:
                if not held:
                    report.busy.append(entry)
                    report.indexes_kept += 1
                    continue
                report.indexes_removed += 1
                _removing(report, entry, _own_eval)
                # The lock file goes too: a run waiting on it sees it unlinked and
                # takes a fresh one, so no two runs ever build one entry at once.
                remove_own(entry, _own_eval)
    for entry in _children(root / ONNX_DIR):
        if not _is_onnx_entry(entry):
            report.foreign.append(entry)
            continue
        if _newest_file(entry) >= cutoff:
            report.exports_kept += 1
            continue
        report.exports_removed += 1
        _removing(report, entry, _own_onnx)
        if not dry_run:
            # Exported again, offline, by the next build that asks for the backend.
            remove_own(entry, _own_onnx)
    for entry in _children(root / STATIC_DIR):
        if not _is_static_entry(entry):
            report.foreign.append(entry)
            continue
        if _newest_file(entry) >= cutoff:
            report.statics_kept += 1
            continue
        report.statics_removed += 1
        _removing(report, entry, _own_static)
        if not dry_run:
            remove_own(entry, _own_static)  # distilled again, offline, by the next use
    return report


def _removing(report: PruneReport, entry: Path, is_own: Callable[[tuple[str, ...]], bool]) -> None:
    """Count ``entry`` as removed (before it is, or instead, in a dry run): what ceg wrote
    in it; what it did not write stays, and is listed."""
    own, foreign = split_entry(entry, is_own)
    report.bytes_freed += _files_size([p for p in own if not p.is_symlink()])
    report.removed.append(entry)
    if foreign:
        report.left[entry] = [p.relative_to(entry).as_posix() for p in foreign]


#: A folder entry's name: the 24 hex digits of its key.
_KEY = re.compile(r"[0-9a-f]{24}")
_MARKER_NAMES = rf"{re.escape(ENTRY_MARKER)}(\.\d+\.tmp)?"
#: What ``ensure_corpus_index`` (and the index builder's lock) put in an eval entry, and
#: nothing else.
_EVAL_NAMES = re.compile(
    rf"{INDEX_NAME}|{INDEX_NAME}\.corpus\.(jsonl|lock)|\.{INDEX_NAME}\.corpus\.jsonl\.\d+\.tmp"
    rf"|\.{INDEX_NAME}\.lock|{_MARKER_NAMES}"
)
#: What ``onnx_export`` puts in an export folder, and nothing else.
_ONNX_NAMES = re.compile(rf"\.?model(-int8)?\.onnx(\.\d+\.tmp)?|{_MARKER_NAMES}")
#: What an index build leaves beside its target in an eval entry (``indexdir``): its
#: temporary and previous index folders.
_EVAL_BUILD_DIRS = re.compile(rf"\.{INDEX_NAME}\.(building(-\d+)?|old-\d+)")
#: In an index folder, or a build's: what a build writes there (the checkout files an
#: index build carries over are not written in a cache entry).
_INDEX_NAMES = BUILT_NAMES - FOREIGN_OK
#: What the BM25 part's folder (bm25s's ``save``, and ceg's term counts beside it:
#: ``lexical.bm25_counts.COUNTS_FILE``) and a build's shard folder hold.
_LEXICAL_NAMES = re.compile(
    r"[\w.]+\.index\.(npy|json)|corpus\.jsonl|corpus\.mmindex\.json|ceg_counts\.npz")
_SHARD_NAMES = re.compile(r"\d{6}\.npy(\.part)?")


def _own_eval(parts: tuple[str, ...]) -> bool:
    """Whether a path in an eval entry (its parts from the entry) is one ceg writes."""
    top, *rest = parts
    if not rest:
        return bool(_EVAL_NAMES.fullmatch(top) or _EVAL_BUILD_DIRS.fullmatch(top))
    if top != INDEX_NAME and not _EVAL_BUILD_DIRS.fullmatch(top):
        return False
    inner = rest[0]
    if len(rest) == 1:
        return inner in _INDEX_NAMES
    if len(rest) == 2 and inner == LEXICAL_DIR:
        return bool(_LEXICAL_NAMES.fullmatch(rest[1]))
    return len(rest) == 2 and inner == SHARDS and bool(_SHARD_NAMES.fullmatch(rest[1]))


def _is_static_entry(entry: Path) -> bool:
    """A static model's folder ceg made: static_model_path marks each before it writes."""
    return (not entry.is_symlink() and entry.is_dir()
            and read_entry_marker(entry) == STATIC_KIND)


_STATIC_TOP = re.compile(rf"model|\.model\.\d+\.tmp|{_MARKER_NAMES}")


def _own_static(parts: tuple[str, ...]) -> bool:
    """Whether a path in a static model's entry is one ``distill`` writes."""
    top, *rest = parts
    if not rest:
        return bool(_STATIC_TOP.fullmatch(top))
    return (len(rest) == 1 and bool(_STATIC_TOP.fullmatch(top))
            and rest[0] in (*STATIC_FILES, STATIC_TMP))


def _own_onnx(parts: tuple[str, ...]) -> bool:
    """Whether a path in an export folder is one ``onnx_export`` writes."""
    return len(parts) == 1 and bool(_ONNX_NAMES.fullmatch(parts[0]))


def _is_entry(
    entry: Path, kind: str, names: re.Pattern[str], layout: Callable[[Path], bool]
) -> bool:
    """A folder ceg made: its marker names ``kind``, or (made before markers) its name
    is a key, it holds only ``names`` and ``layout`` recognises it."""
    if entry.is_symlink() or not entry.is_dir():
        return False
    if read_entry_marker(entry) == kind:
        return True
    return bool(_KEY.fullmatch(entry.name)) and _only_names(entry, names) and layout(entry)


def _is_eval_entry(entry: Path) -> bool:
    """A corpus index folder ceg made: its index's meta.json is ceg's, its corpus file there."""

    def layout(folder: Path) -> bool:
        index = folder / INDEX_NAME
        return _is_index_meta(index / "meta.json") and corpus_file(index).is_file()

    return _is_entry(entry, EVAL_KIND, _EVAL_NAMES, layout)


def _is_onnx_entry(entry: Path) -> bool:
    """An export folder ceg made: a model file, plain files only, as ``onnx_export`` writes."""

    def layout(folder: Path) -> bool:
        files = list(folder.iterdir())
        return any(f.name in ("model.onnx", "model-int8.onnx") for f in files) and all(
            f.is_file() and not f.is_symlink() for f in files
        )

    return _is_entry(entry, ONNX_KIND, _ONNX_NAMES, layout)


def _only_names(folder: Path, names: re.Pattern[str]) -> bool:
    try:
        return all(names.fullmatch(p.name) for p in folder.iterdir())
    except OSError:
        return False


def _is_index_meta(path: Path) -> bool:
    return path.is_file() and file_problem(path) is None


def _lock_held_elsewhere(path: Path) -> bool:
    """Whether another process holds the lock file ``path``: looked at read-only, nothing
    written (a missing lock file is not held)."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the real run finds out
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # releases the shared lock, if taken
    return False


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
    if not (path.exists() or path.is_symlink()):
        return KindInfo("LLM replies", path, 0, 0, None, None)
    counted = count_replies_readonly(path, advice=LLM_ADVICE)
    size = _files_size(_llm_files(path))
    return KindInfo("LLM replies", path, counted.count, size, counted.oldest, counted.newest)


def _folder_info(
    kind: str, folder: Path, is_entry: Callable[[Path], bool], last_used: Callable[[Path], float]
) -> KindInfo:
    """A kind whose entries are ceg's folders in ``folder``, each dated by ``last_used``."""
    children = list(_children(folder))
    entries = [e for e in children if is_entry(e)]
    used = [last_used(e) for e in entries]
    return KindInfo(
        kind,
        folder,
        len(entries),
        sum(_tree_size(e) for e in entries),
        min(used, default=None),
        max(used, default=None),
        len(children) - len(entries),
    )


def _children(folder: Path) -> Iterator[Path]:
    if folder.is_dir() and not folder.is_symlink():
        yield from sorted(folder.iterdir())


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
