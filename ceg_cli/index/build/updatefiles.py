"""What ``--update`` checks before it starts and the files it writes (``update``).

``check_settings`` refuses, in one line naming it, a setting that would change
every passage or vector of an index an update keeps as built; the rest are the
update's small file helpers: the generation's exact vectors, a folder's sync,
a source's size, and whether the index lacks a lexical part it can use.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ..indexdir import sampled_digest
from ..layout import VECTORS_FILE
from ..lexical.lexonly import is_lexical_only
from .buildopts import BuildOptions


def check_settings(meta: dict[str, Any], options: BuildOptions, target: Path) -> None:
    """Refuse, in one line naming it, a setting that would change every passage or vector."""
    if options.append:
        raise UsageError("--update and --append: give one (--update compares each document; "
                         "--append replaces whole changed sources)")
    if options.resume:
        raise UsageError("--update --resume: an update that was stopped is run again as it "
                         "was (it embeds only what changed); leave out --resume")
    lexical_only = is_lexical_only(meta)
    if lexical_only != (options.retrieval == "lexical"):
        had = "--retrieval lexical (no vectors)" if lexical_only else "vectors"
        raise UsageError(f"--retrieval {options.retrieval}: index at {target} was built with "
                         f"{had}; an update keeps its kind: "
                         f"{'add --retrieval lexical' if lexical_only else 'leave it out'}, or "
                         "rebuild without --update")
    refusals = []
    if not lexical_only and options.model is not None:
        from ..dense.embedding import resolve_model

        if resolve_model(options.model).name != meta["model"]["name"]:
            refusals.append(("--model", options.model, meta["model"]["name"]))
    if meta["chunker"]["max_words"] != options.chunk_words:
        refusals.append(("--chunk-words", options.chunk_words, meta["chunker"]["max_words"]))
    if meta["embed_text"] != options.embed_text:
        said = {"title+text": "--embed-title", "text": "--no-embed-title"}
        refusals.append((said[options.embed_text], "", said[meta["embed_text"]]))
    if meta.get("language", "auto") != options.language:
        refusals.append(("--language", options.language, meta.get("language", "auto")))
    current = (meta.get("faiss") or {}).get("index_type", "flat")
    if not lexical_only and options.index_type not in ("auto", current):
        refusals.append(("--index-type", options.index_type, current))
    library = (meta.get("lexical") or {}).get("library")
    if options.lexical_engine not in ("auto", library):
        refusals.append(("--lexical-engine", options.lexical_engine, library))
    if options.lexical is False and "lexical" in meta:
        refusals.append(("--no-lexical", "", "a lexical part"))
    for flag, given, recorded in refusals:
        raise UsageError(
            f"{flag} {given}".rstrip() + f": index at {target} was built with "
            f"{recorded}; an update keeps every passage and vector as built: "
            "leave it out (or give the index's own), or rebuild without --update"
        )


def lexical_missing(target: Path, meta: dict[str, Any]) -> bool:
    """Whether the index has no lexical part, or one it cannot use (damaged, another
    index's): ``--update --lexical`` then makes it from the live passages."""
    if "lexical" not in meta:
        return True
    from ..generation import lexical_root
    from ..lexical.bm25 import lexical_problem

    return lexical_problem(meta, lexical_root(target, meta)) is not None


def write_generation_vectors(folder: Path, parts: list[Any], dimension: int,
                             total: int) -> dict[str, Any]:
    """The generation's vectors: exact (``IndexFlatIP``), as its passages' ids order them."""
    import faiss
    import numpy as np

    index = faiss.IndexFlatIP(dimension)
    for part in parts:
        index.add(np.ascontiguousarray(part, dtype=np.float32))
    if index.ntotal != total:
        raise RuntimeError(f"{folder}: {index.ntotal} vectors for {total} passages")
    path = folder / VECTORS_FILE
    faiss.write_index(index, str(path))
    return {"vectors_size": path.stat().st_size, "vectors_digest": sampled_digest(path)}


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
