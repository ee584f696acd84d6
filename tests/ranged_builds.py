"""What the tests of ranged builds share (Ray, reader processes): sources, and comparing indexes.

A ranged build must give the index a single-machine, one-reader build gives:
``same_index`` compares passages (rows with their ids), vectors and the
``meta.json`` entries that describe the content.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
from reliability_harness import documents


def notes_folder(path: Path) -> Path:
    """Five Markdown notes and one blank file (a warning) in ``path``."""
    for i in range(5):
        (path / f"note{i}.md").parent.mkdir(parents=True, exist_ok=True)
        (path / f"note{i}.md").write_text(
            f"# Note {i}\n\nNote {i} says that topic {i} matters.\n\nIt was written in "
            f"{1990 + i}.\n", encoding="utf-8")
    (path / "blank.txt").write_text("\n", encoding="utf-8")  # warned: empty
    return path


def mixed_sources(tmp_path: Path, multistream: Path) -> list[Path]:
    """A JSONL file (with one bad line, warned), a folder of notes, a multistream dump."""
    docs = documents(tmp_path / "docs.jsonl", 60, "R")
    with open(docs, "a", encoding="utf-8") as fh:
        fh.write('{"id": "bad", "text": 3}\n')  # a warning from the last range
    return [docs, notes_folder(tmp_path / "notes"), multistream]


def rows_of(index: Path) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(f"file:{index / 'chunks.sqlite'}?mode=ro", uri=True)) as db:
        return db.execute("SELECT * FROM chunks ORDER BY id").fetchall()


def vectors_of(index: Path) -> np.ndarray:
    import faiss

    vectors = faiss.read_index(str(index / "vectors.faiss"))
    return vectors.reconstruct_n(0, vectors.ntotal)


def meta_of(index: Path) -> dict[str, Any]:
    return json.loads((index / "meta.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def same_index(ours: Path, theirs: Path, *, exact: bool = False) -> None:
    """The same passages, ids and content entries; vectors equal (``exact``) or within 1e-6."""
    assert rows_of(ours) == rows_of(theirs)
    if exact:
        assert np.array_equal(vectors_of(ours), vectors_of(theirs))
    else:
        assert np.allclose(vectors_of(ours), vectors_of(theirs), atol=1e-6)
    mine, other = meta_of(ours), meta_of(theirs)
    for key in ("counts", "sources", "model", "chunker", "embed_text"):
        assert mine[key] == other[key], key
