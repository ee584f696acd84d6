"""An updated index: the base a full build wrote, and the generation meta.json names.

A full build writes ``chunks.sqlite``, ``vectors.faiss`` and ``lexical/`` and never
changes them again. ``ceg index build --update`` (``update``) brings the index in
step with its sources per document without copying those files: it writes a new
generation folder ``gen-NNNNNN/`` beside them, holding

- ``chunks.sqlite``: the passages added since the base (every update's still
  live ones, row ids from the base's count upward), the ``removed`` table (base
  passages no longer live) and the ``documents`` record (``docrecord``);
- ``vectors.faiss``: those passages' vectors (exact, ``IndexFlatIP``), row id
  minus the base's count == FAISS id;
- ``lexical/``: the lexical part over every live passage with the base's engine:
  a bm25s part kept in step from the previous part's term counts, only the new
  passages tokenized (``lexical.bm25_update``), a tantivy part written again;

and then names it in ``meta.json`` (replaced with ``os.replace``: the switch).
A reader opens only what meta.json names: the base with its removed passages
hidden, and the generation's files. A kill before the switch leaves the old
meta.json and the old generation whole; after it, the new one. Every file is
written once and never changed, so readers keep opening the store
``immutable`` and the vectors memory-mapped.

Passage ids are physical: a base passage keeps its id, an added one gets the
next free id of its generation. Search results are the passages and scores a
fresh build would give (``tests/test_update.py``); their ids differ.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import IndexLoadError
from .layout import CHUNKS_FILE, META_FILE, VECTORS_FILE, is_generation_name

if TYPE_CHECKING:
    import numpy as np

__all__ = ["LAYERED_FORMAT", "LayeredVectors", "ScatteredLexical", "is_generation_name"]

#: The index format of an updated index: a ceg before updates must refuse it (it would
#: read the base alone and return removed passages), not read it.
LAYERED_FORMAT = 3


def generation_name(number: int) -> str:
    return f"gen-{number:06d}"


def generation_of(meta: dict[str, Any]) -> dict[str, Any] | None:
    """meta.json's ``generation`` entry; None for an index as a full build wrote it."""
    entry = meta.get("generation")
    return entry if isinstance(entry, dict) else None


def lexical_root(path: Path, meta: dict[str, Any]) -> Path:
    """The folder whose ``lexical/`` is the index's lexical part: the generation's."""
    entry = generation_of(meta)
    return path / entry["dir"] if entry else path


def attach_generation(db: sqlite3.Connection, folder: Path) -> None:
    """Make ``chunks`` on ``db`` (the base store) name the live passages: the base's
    not removed, then the generation's (a TEMP VIEW shadows ``main.chunks``).

    Base ids are all below the generation's, so the view is in id order as it is.
    """
    uri = f"file:{(folder / CHUNKS_FILE).resolve().as_posix()}?mode=ro&immutable=1"
    db.execute("ATTACH DATABASE ? AS gen", (uri,))
    db.execute(
        "CREATE TEMP VIEW chunks AS SELECT * FROM main.chunks WHERE id NOT IN "
        "(SELECT id FROM gen.removed) UNION ALL SELECT * FROM gen.chunks"
    )


def open_layered_store(path: Path, meta: dict[str, Any], db: sqlite3.Connection) -> int:
    """Attach the generation to the base store ``db``; the live passages' count.

    Fails in one line when the generation folder is not the one meta.json names.
    """
    entry = generation_of(meta)
    assert entry is not None
    folder = path / entry["dir"]
    if not (folder / CHUNKS_FILE).is_file():
        raise IndexLoadError(
            f"index at {path} is incomplete: {entry['dir']}/{CHUNKS_FILE}, which {META_FILE} "
            f"names, is missing; rebuild it with 'ceg index build SOURCE --index {path}'"
        )
    try:
        attach_generation(db, folder)
        (base,) = db.execute("SELECT count(*) FROM main.chunks").fetchone()
        (live,) = db.execute("SELECT count(*) FROM chunks").fetchone()
    except sqlite3.DatabaseError as exc:
        raise IndexLoadError(f"{folder / CHUNKS_FILE}: unreadable ({exc}); rebuild the "
                             "index") from exc
    if base != entry["base_chunks"]:
        raise IndexLoadError(
            f"index at {path} is inconsistent: {CHUNKS_FILE} holds {base} passages, "
            f"{META_FILE} says its base holds {entry['base_chunks']}; rebuild the index"
        )
    return int(live)


def removed_ids(db: sqlite3.Connection) -> np.ndarray:
    """The base passages an update removed, ascending (int64)."""
    import numpy as np

    rows = db.execute("SELECT id FROM gen.removed ORDER BY id").fetchall()
    return np.asarray([r[0] for r in rows], dtype=np.int64)


def open_layered_vectors(path: Path, meta: dict[str, Any], base: Any,
                         removed: np.ndarray, mmap: bool) -> LayeredVectors:
    from .dense.faissfile import read_vectors
    from .indexdir import sampled_digest

    entry = generation_of(meta)
    assert entry is not None
    file = path / entry["dir"] / VECTORS_FILE
    if not file.is_file():
        raise IndexLoadError(
            f"index at {path} is incomplete: {entry['dir']}/{VECTORS_FILE} is missing; "
            f"rebuild it with 'ceg index build SOURCE --index {path}'"
        )
    if file.stat().st_size != entry.get("vectors_size") or \
            sampled_digest(file) != entry.get("vectors_digest"):
        raise IndexLoadError(
            f"{file} is not the vectors file this index's update wrote (its size or digest "
            f"differs from {META_FILE}); rebuild the index"
        )
    delta = read_vectors(file, mmap)
    if delta.ntotal != entry["delta_chunks"] or delta.d != base.d:
        raise IndexLoadError(
            f"index at {path} is inconsistent: {entry['dir']}/{VECTORS_FILE} holds "
            f"{delta.ntotal} vectors of dimension {delta.d}, {META_FILE} says "
            f"{entry['delta_chunks']} of {base.d}; rebuild the index"
        )
    return LayeredVectors(base, delta, removed)


class LayeredVectors:
    """The base's vectors with removed passages hidden, and the generation's after them.

    Offers what ``store.Index`` asks of a FAISS index: ``search``,
    ``reconstruct_batch``, ``ntotal`` (live passages), ``d``. A search asks the
    base with the removed ids excluded (an id selector on a flat base, where the
    result is exact; on approximate bases, ``k`` more than removed, then dropped)
    and the generation's flat index, and merges them by score.
    """

    def __init__(self, base: Any, delta: Any, removed: np.ndarray) -> None:
        self.base = base
        self.delta = delta
        self.removed = removed
        self.offset = int(base.ntotal)
        self.d = int(base.d)
        self.ntotal = int(base.ntotal) - len(removed) + int(delta.ntotal)
        self._params: Any = None

    def _base_search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import faiss
        import numpy as np

        if len(self.removed) == 0:
            return self.base.search(x, k)  # type: ignore[no-any-return]
        if isinstance(self.base, faiss.IndexFlat):
            if self._params is None:
                batch = faiss.IDSelectorBatch(self.removed)
                params = faiss.SearchParameters(sel=faiss.IDSelectorNot(batch))
                params._keep = batch  # the selector must outlive the search parameters
                self._params = params
            return self.base.search(x, k, params=self._params)  # type: ignore[no-any-return]
        wide = min(int(self.base.ntotal), k + len(self.removed))
        scores, ids = self.base.search(x, wide)
        gone = np.isin(ids, self.removed)
        scores = np.where(gone, -np.inf, scores)
        ids = np.where(gone, -1, ids)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(scores, order, 1), np.take_along_axis(ids, order, 1)

    def search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        base_k = min(k, int(self.base.ntotal))
        parts_s, parts_i = [], []
        if base_k > 0:
            s, i = self._base_search(x, base_k)
            parts_s.append(s)
            parts_i.append(i)
        delta_k = min(k, int(self.delta.ntotal))
        if delta_k > 0:
            s, i = self.delta.search(x, delta_k)
            parts_s.append(s)
            parts_i.append(np.where(i >= 0, i + self.offset, -1))
        scores = np.hstack(parts_s).astype(np.float32)
        ids = np.hstack(parts_i).astype(np.int64)
        scores = np.where(ids < 0, -np.inf, scores)
        # Ties go to the lower id, as one flat index orders them.
        order = np.lexsort((ids, -scores), axis=1)[:, :k] if scores.ndim == 2 else None
        assert order is not None
        out_s = np.take_along_axis(scores, order, 1)
        out_i = np.take_along_axis(ids, order, 1)
        out_i = np.where(np.isfinite(out_s), out_i, -1)
        return out_s, out_i

    def reconstruct_batch(self, ids: np.ndarray) -> np.ndarray:
        import numpy as np

        ids = np.asarray(ids, dtype=np.int64)
        out = np.zeros((len(ids), self.d), dtype=np.float32)
        low = ids < self.offset
        if low.any():
            out[low] = self.base.reconstruct_batch(ids[low])
        if (~low).any():
            out[~low] = self.delta.reconstruct_batch(ids[~low] - self.offset)
        return out


def live_ids(base_total: int, removed: np.ndarray, delta_total: int) -> np.ndarray:
    """The live passages' ids in id order: bm25s's document order in a generation."""
    import numpy as np

    kept = np.setdiff1d(np.arange(base_total, dtype=np.int64), removed, assume_unique=True)
    return np.concatenate([kept, np.arange(base_total, base_total + delta_total,
                                           dtype=np.int64)])


class ScatteredLexical:
    """A bm25s part of a generation, its scores indexed by passage id.

    bm25s numbers its documents 0..n-1 in id order of the live passages; the
    search (``lexical.search``) indexes scores by passage id, so each score
    array is spread over the id space, removed passages scoring 0 (never found).
    """

    def __init__(self, inner: Any, ids: np.ndarray, space: int) -> None:
        self._inner = inner
        self._ids = ids
        self._space = space
        self.tokenizer = inner.tokenizer

    def scores(self, query: str) -> np.ndarray:
        return next(self.scores_many([query]))

    def scores_many(self, queries: Sequence[str]) -> Iterator[np.ndarray]:
        import numpy as np

        for dense in self._inner.scores_many(queries):
            full = np.zeros(self._space, dtype=np.asarray(dense).dtype)
            full[self._ids] = dense
            yield full


def wrap_lexical(lexical: Any, meta: dict[str, Any], db: sqlite3.Connection) -> Any:
    """The lexical part as ``lexical.search`` wants it: ids, not bm25s positions."""
    entry = generation_of(meta)
    if entry is None or hasattr(lexical, "ranked"):  # tantivy stores each passage's id
        return lexical
    removed = removed_ids(db)
    ids = live_ids(entry["base_chunks"], removed, entry["delta_chunks"])
    return ScatteredLexical(lexical, ids, entry["base_chunks"] + entry["delta_chunks"])
