"""The index of a benchmark's own corpus (FELM references, HaluEval knowledge).

Built once per dataset file and cached under ``cache_root()/eval/<key>``, so a
re-run of ``ceg eval`` does not re-embed. A lock file in that folder makes two
runs of one dataset take turns instead of racing (see ``ensure_corpus_index``).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cachedir import cache_root, write_entry_marker
from ..errors import UsageError
from ..progress import NO_PROGRESS, Progress
from .datasets import Dataset

if TYPE_CHECKING:
    from ..index.dense.embedding import Embedder

#: Bumped whenever the documents built from a dataset change, so that cached
#: corpus indexes built the old way are not reused.
CORPUS_VERSION = 1
#: How long to wait quietly for another run's lock before saying so.
_LOCK_NOTICE_S = 1.0


#: The layout under ``cache_root()``: ``eval/<key>/index`` and, beside the
#: index, its corpus file and lock (``corpus_file``, ``corpus_lock_path``).
EVAL_DIR = "eval"
INDEX_NAME = "index"
#: The kind an eval entry's marker names (``cachedir.ENTRY_MARKER``).
EVAL_KIND = "eval-corpus-index"


def corpus_cache_dir(dataset: Dataset, root: Path | None = None) -> Path:
    """Where the corpus index of ``dataset`` is cached: keyed by the file's digest.

    The key also covers the format and ``CORPUS_VERSION``, so a change to how
    documents are made from a dataset never reuses a stale index.
    """
    from ..index.build.builder import source_digest

    key = hashlib.sha256(
        f"{source_digest(dataset.path)}|{dataset.format}|{CORPUS_VERSION}".encode()
    ).hexdigest()[:24]
    return (root or cache_root()) / EVAL_DIR / key


def ensure_corpus_index(
    dataset: Dataset,
    target: Path | None = None,
    *,
    progress: Progress = NO_PROGRESS,
    embedder: Embedder | None = None,
    on_warning: Callable[[str], None] | None = None,
    retrieval: str = "hybrid",
) -> tuple[Path, bool]:
    """Build the index of the dataset's own corpus unless it is already there
    (``retrieval``: ``ceg index build --retrieval``'s; ``lexical`` embeds nothing).

    Returns the index directory and whether it was built now. The documents are
    written as JSONL beside the index (``<index>.corpus.jsonl``) and indexed
    with ``build_index``. An existing index is reused only when it was built
    from exactly that corpus; an explicit ``target`` holding an index of
    anything else is refused rather than replaced.

    Two runs of one dataset (two CI jobs on one runner) take turns: a lock file
    beside the index is held from writing the corpus to saving the index, so
    the second run waits and then reuses what the first built, and a build
    never reads a corpus file that another run is rewriting. A corpus line the
    reader drops is reported through ``on_warning`` (Python's ``warnings``
    when None), never silently.
    """
    from ..index import META_FILE, read_meta
    from ..index.build.builder import BuildOptions, build_index, source_digest

    if not dataset.has_corpus:
        raise UsageError(f"{dataset.path}: the {dataset.format} format carries no corpus")
    warn = on_warning or _python_warning
    index_dir = Path(target) if target is not None else corpus_cache_dir(dataset) / INDEX_NAME
    corpus = corpus_file(index_dir)
    with hold_corpus_lock(index_dir, on_wait=warn):
        if target is None:
            # Says the folder is ceg's, so `ceg cache prune` may remove it.
            write_entry_marker(index_dir.parent, EVAL_KIND)
        _write_atomically(corpus, dataset.documents)
        if (index_dir / META_FILE).exists():
            meta = read_meta(index_dir)
            digests = [s.get("digest") for s in meta["sources"]]
            if digests == [source_digest(corpus)] and meta["embed_text"] == dataset.embed_text:
                if "lexical" not in meta:  # cached before the lexical part: add it, no embedding
                    options = BuildOptions(embed_text=dataset.embed_text, append=True)
                    build_index(
                        [corpus], index_dir, options, embedder=embedder, on_warning=warn
                    )
                return index_dir, False
            if target is not None:
                raise UsageError(
                    f"--index {target} holds an index of other sources; building the corpus of "
                    f"{dataset.path.name} there would replace it: choose an empty directory, or "
                    "drop --build-corpus to check against that index"
                )
        options = BuildOptions(embed_text=dataset.embed_text, retrieval=retrieval)
        build_index(
            [corpus], index_dir, options, embedder=embedder, on_warning=warn, progress=progress
        )
    return index_dir, True


def corpus_file(index_dir: Path) -> Path:
    """The documents the corpus index at ``index_dir`` is built from, beside it."""
    return index_dir.parent / f"{index_dir.name}.corpus.jsonl"


def corpus_lock_path(index_dir: Path) -> Path:
    """The lock file that guards the corpus index at ``index_dir`` (beside its corpus file)."""
    return index_dir.parent / f"{index_dir.name}.corpus.lock"


@contextmanager
def hold_corpus_lock(
    index_dir: Path, *, on_wait: Callable[[str], None] | None = None, wait: bool = True
) -> Iterator[bool]:
    """Hold the lock of the corpus index at ``index_dir``; yields False when ``wait`` is
    False and another process holds it (nothing is held then)."""
    from filelock import FileLock, Timeout

    path = corpus_lock_path(index_dir)
    lock = FileLock(str(path))
    try:
        _acquire(lock, path, _LOCK_NOTICE_S if wait else 0)
    except Timeout:
        if not wait:
            yield False
            return
        if on_wait is not None:
            on_wait(f"another run is building the corpus index {index_dir}; waiting for it")
        _acquire(lock, path, -1)
    try:
        yield True
    finally:
        lock.release()


def _acquire(lock: Any, path: Path, timeout: float) -> None:
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            lock.acquire(timeout=timeout)
            return
        except FileNotFoundError:
            # `ceg cache prune` removed the folder, lock file and all, while this
            # run waited: make it again and take a fresh lock.
            continue


def _write_atomically(path: Path, documents: Iterable[dict[str, str]]) -> None:
    """Write ``documents`` as JSONL to ``path`` by way of a temporary file and a rename,
    so that no reader ever sees the file half written."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            for doc in documents:
                fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _python_warning(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)
