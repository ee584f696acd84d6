"""The index of a benchmark's own corpus (FELM references, HaluEval knowledge).

Built once per dataset file and cached under ``cache_root()/eval/<key>``, so a
re-run of ``ceg eval`` does not re-embed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .datasets import Dataset
from .errors import UsageError
from .progress import NO_PROGRESS, Progress

if TYPE_CHECKING:
    from .embedding import Embedder

#: Bumped whenever the documents built from a dataset change, so that cached
#: corpus indexes built the old way are not reused.
CORPUS_VERSION = 1


def cache_root() -> Path:
    """Where ceg caches (eval corpora, LLM replies): ``$CEG_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/ceg``, else ``~/.cache/ceg``."""
    if os.environ.get("CEG_CACHE_DIR"):
        return Path(os.environ["CEG_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ceg"


def corpus_cache_dir(dataset: Dataset, root: Path | None = None) -> Path:
    """Where the corpus index of ``dataset`` is cached: keyed by the file's digest.

    The key also covers the format and ``CORPUS_VERSION``, so a change to how
    documents are made from a dataset never reuses a stale index.
    """
    from .builder import source_digest

    key = hashlib.sha256(
        f"{source_digest(dataset.path)}|{dataset.format}|{CORPUS_VERSION}".encode()
    ).hexdigest()[:24]
    return (root or cache_root()) / "eval" / key


def ensure_corpus_index(
    dataset: Dataset,
    target: Path | None = None,
    *,
    progress: Progress = NO_PROGRESS,
    embedder: Embedder | None = None,
) -> tuple[Path, bool]:
    """Build the index of the dataset's own corpus unless it is already there.

    Returns the index directory and whether it was built now. The documents are
    written as JSONL beside the index (``<index>.corpus.jsonl``) and indexed
    with ``build_index``. An existing index is reused only when it was built
    from exactly that corpus; an explicit ``target`` holding an index of
    anything else is refused rather than replaced.
    """
    from .builder import BuildOptions, build_index, source_digest
    from .index import META_FILE, read_meta

    if not dataset.has_corpus:
        raise UsageError(f"{dataset.path}: the {dataset.format} format carries no corpus")
    index_dir = Path(target) if target is not None else corpus_cache_dir(dataset) / "index"
    corpus = index_dir.parent / f"{index_dir.name}.corpus.jsonl"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    with open(corpus, "w", encoding="utf-8") as fh:
        for doc in dataset.documents:
            fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
    if (index_dir / META_FILE).exists():
        meta = read_meta(index_dir)
        digests = [s.get("digest") for s in meta["sources"]]
        if digests == [source_digest(corpus)] and meta["embed_text"] == dataset.embed_text:
            if "lexical" not in meta:  # cached before the lexical part: add it, no embedding
                options = BuildOptions(embed_text=dataset.embed_text, append=True)
                build_index([corpus], index_dir, options, embedder=embedder)
            return index_dir, False
        if target is not None:
            raise UsageError(
                f"--index {target} holds an index of other sources; building the corpus of "
                f"{dataset.path.name} there would replace it: choose an empty directory, or "
                "drop --build-corpus to check against that index"
            )
    options = BuildOptions(embed_text=dataset.embed_text)
    build_index([corpus], index_dir, options, embedder=embedder, progress=progress)
    return index_dir, True
