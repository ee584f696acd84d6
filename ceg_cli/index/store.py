"""Opening an index directory for search: ``meta.json`` checked, files agreed, ``Index``.

Layout of an index directory::

    meta.json       format version, model, dimension, chunker, sources, counts,
                    size and sampled digest of vectors.faiss
    vectors.faiss   inner product over L2-normalized vectors (= cosine); exact
                    or approximate by size (``vectors``), memory-mapped
    chunks.sqlite   one row per passage; row id == FAISS vector id
    lexical/        BM25 over the same passages (``lexical``); absent in an
                    index built before it existed, which is then dense only

An index file is never modified in place: ``builder`` writes a complete new
directory and renames it into place, and ``update`` (``--update``) writes a new
generation folder beside the files and switches ``meta.json`` to it
(``generation``), so readers can open every file read-only (SQLite
``immutable``, FAISS memory-mapped).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import IndexLoadError, UsageError
from ..types import Chunk
from .dense.embedding import Embedder, load_embedder, query_backend, query_vectors, resolve_model
from .dense.static import check_weights
from .indexdir import FOREIGN_OK, sampled_digest, sqlite_uri
from .layout import (
    CHUNK_COLUMNS,
    CHUNKS_FILE,
    META_FILE,
    READ_FORMAT_VERSION,
    VECTORS_FILE,
    Hit,
)
from .lexical.bm25 import (
    LEXICAL_DIR,
    LexicalIndex,
    add_lexical_hint,
    check_lexical,
    check_method,
    open_lexical,
)
from .lexical.bm25 import search as search_lexical
from .lexical.lexonly import NO_MODEL, NoVectors, is_lexical_only, refuse_method
from .metacheck import check_meta

if TYPE_CHECKING:
    import numpy as np


def read_meta(path: Path) -> dict[str, Any]:
    """Read and check ``meta.json``; errors say what is wrong and how to fix it."""
    meta_path = path / META_FILE
    if not path.exists():
        raise IndexLoadError(
            f"no index at {path}: build one with 'ceg index build SOURCE --index {path}'"
        )
    if not path.is_dir():
        # Advice to build there would fail: a build refuses a file as its target.
        raise IndexLoadError(
            f"{path} is a file, not an index: an index is the folder that "
            "'ceg index build SOURCE --index DIR' writes; name that folder"
        )
    if not meta_path.exists():
        others = _not_index_files(path)
        if others:
            # A build would refuse this folder too (it never replaces others' files).
            raise IndexLoadError(
                f"{path} is not a ceg index (no {META_FILE}; it holds "
                f"{', '.join(others[:3])}{', ...' if len(others) > 3 else ''}): name the "
                "folder an index was built into ('ceg index build SOURCE --index DIR')"
            )
        raise IndexLoadError(
            f"{path} is not a complete ceg index (no {META_FILE}): "
            f"rebuild it with 'ceg index build SOURCE --index {path}'"
        )
    meta = load_meta(meta_path)
    for name in (VECTORS_FILE, CHUNKS_FILE):
        if name == VECTORS_FILE and is_lexical_only(meta):
            continue
        if not (path / name).exists():
            raise IndexLoadError(
                f"index at {path} is incomplete: {name} is missing; rebuild it with "
                f"'ceg index build SOURCE --index {path}'"
            )
    return meta


def _not_index_files(path: Path) -> list[str]:
    """What a folder holds besides an index's own files (which a build would not replace)."""
    own = {VECTORS_FILE, CHUNKS_FILE, LEXICAL_DIR, *FOREIGN_OK}
    try:
        from .layout import is_generation_name

        return sorted(p.name for p in path.iterdir()
                      if p.name not in own and not is_generation_name(p.name))
    except OSError:
        return []


def load_meta(meta_path: Path) -> dict[str, Any]:
    """Parse ``meta.json`` and check its fields (``metacheck``), not the index's files."""
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexLoadError(f"{meta_path}: unreadable ({exc}); rebuild the index") from exc
    if isinstance(meta, dict) and isinstance(meta.get("format_version"), int):
        version = meta["format_version"]
        if version > READ_FORMAT_VERSION:
            raise IndexLoadError(
                f"{meta_path}: index format {version} is newer than this ceg reads "
                f"(up to {READ_FORMAT_VERSION}); upgrade ceg or rebuild the index"
            )
    check_meta(meta, meta_path)
    return meta  # type: ignore[no-any-return]


def check_vectors_file(path: Path, meta: dict[str, Any]) -> None:
    """Fail when ``vectors.faiss`` is not the file this index's build wrote.

    A vectors file of another index with the same count and dimension would
    otherwise pass every other check and return other passages' neighbours.
    Indexes built before the digest was recorded are not checked.
    """
    recorded = (meta.get("faiss") or {}).get("file_digest")
    if recorded is None:
        return
    file = path / VECTORS_FILE
    if file.stat().st_size != meta["faiss"].get("file_size") or sampled_digest(file) != recorded:
        raise IndexLoadError(
            f"{file} is not the vectors file this index was built with (its size or digest "
            f"differs from {META_FILE}: copied from another index, or damaged); rebuild the "
            f"index with 'ceg index build SOURCE --index {path}'"
        )


def check_model(meta: dict[str, Any], requested: str | None, where: Path) -> None:
    """Fail when a run asks for another model than the index was built with.

    The model an index was built with decides how queries are encoded; nothing
    may silently change it.
    """
    if requested is None:
        return
    built = meta["model"]
    if resolve_model(requested).name != built["name"]:
        raise UsageError(
            f"index at {where} was built with model {built['name']} "
            f"(dimension {built['dimension']}); this run asked for {requested}: "
            f"drop --model, or rebuild the index with that model"
        )


class Index:
    """A loaded index: search by vector or by text, fetch passages by id."""

    def __init__(self, path: Path, meta: dict[str, Any], vectors: Any, db: sqlite3.Connection):
        self.path = path
        self.meta = meta
        self._vectors = vectors
        self._db = db
        self._embedder: Embedder | None = None
        self._lexical: LexicalIndex | Any | None = None
        self._max_terms: int | None = None

    @property
    def size(self) -> int:
        return int(self._vectors.ntotal)

    @property
    def lexical_only(self) -> bool:
        """Whether the index has no vectors (built with ``--retrieval lexical``: ``lexonly``)."""
        return is_lexical_only(self.meta)

    @property
    def dimension(self) -> int:
        return 0 if self.lexical_only else int(self.meta["model"]["dimension"])

    @property
    def model_name(self) -> str:
        return NO_MODEL if self.lexical_only else str(self.meta["model"]["name"])

    def embedder(self, device: str = "cpu") -> Embedder:
        """The model the index was built with, loaded once (on ``device`` the first time)."""
        if self.lexical_only:
            raise UsageError(f"index at {self.path} was built with --retrieval lexical: it has "
                             "no model and no vectors")
        if self._embedder is None:
            model = self.meta["model"]
            embedder = load_embedder(model["name"], backend=query_backend(model), device=device)
            if embedder.dimension != self.dimension:
                raise IndexLoadError(
                    f"index at {self.path} has dimension {self.dimension} but model "
                    f"{self.model_name} gives {embedder.dimension}; rebuild the index"
                )
            check_weights(model, embedder, self.path)
            self._embedder = embedder
        return self._embedder

    def use_embedder(self, embedder: Embedder) -> None:
        """Use an already loaded embedder (it must match the index's dimension)."""
        if embedder.dimension != self.dimension:
            raise UsageError(
                f"index at {self.path} was built with model {self.model_name} "
                f"(dimension {self.dimension}); the embedder given has dimension "
                f"{embedder.dimension}"
            )
        if not self.lexical_only:
            check_weights(self.meta["model"], embedder, self.path)
        self._embedder = embedder

    @property
    def index_type(self) -> str:
        """``flat``, ``hnsw``, ``ivfpq`` or ``ivfpqfs`` (an index built before types: flat)."""
        return str((self.meta.get("faiss") or {}).get("index_type", "flat"))

    def set_search_width(self, width: dict[str, int]) -> dict[str, int]:
        """Search wider or narrower than the build chose (``--search-width``: ``searchwidth``);
        the settings now in force. The index files are not touched."""
        from .dense.searchwidth import apply

        if self.lexical_only:
            raise UsageError(f"--search-width: index at {self.path} was built with --retrieval "
                             "lexical and has no vectors to search; leave it out")
        # An updated index's own vectors are exact (flat): the width is the base's.
        return apply(getattr(self._vectors, "base", self._vectors), self.index_type, width,
                     self.path)

    def set_lexical_max_terms(self, max_terms: int | None) -> str | None:
        """Search the lexical part with only each query's ``max_terms`` rarest terms
        (``--lexical-max-terms``); 0: every term; None: the default, every term up to
        ``AUTO_MAX_TERMS_PASSAGES`` passages and the ``AUTO_MAX_TERMS`` rarest past them.
        Says, in a line, where the default cuts terms, and where a number given does
        not apply: bm25s, the engine up to 2,000,000 passages, searches every term."""
        self._max_terms = max_terms
        self._lexical = None
        if max_terms is None and self.lexical_max_terms is not None:
            return (f"index at {self.path} holds {self.size:,} passages: its lexical part "
                    f"is searched with each query's {AUTO_MAX_TERMS} rarest terms, as "
                    "measured best for its size (--lexical-max-terms 0: every term, slower)")
        library = self._lexical_library
        if max_terms and library != "tantivy":
            return (f"--lexical-max-terms {max_terms}: ignored: index at {self.path} has "
                    f"{'a ' + str(library) if library else 'no'} lexical part, which searches "
                    "every term (it applies to a tantivy lexical part, of any size)")
        return None

    @property
    def lexical_max_terms(self) -> int | None:
        """The terms of a query its lexical part searches (None: all of them)."""
        if self._max_terms is not None:
            return self._max_terms or None
        return AUTO_MAX_TERMS if self._lexical_library == "tantivy" and \
            self.size > AUTO_MAX_TERMS_PASSAGES else None

    @property
    def _lexical_library(self) -> str | None:
        """The engine of the lexical part (``bm25s``, ``tantivy``; None: no part)."""
        return (self.meta.get("lexical") or {}).get("library")

    @property
    def has_lexical(self) -> bool:
        """Whether the index has its BM25 part (one built before it existed has not)."""
        return "lexical" in self.meta

    def lexical(self) -> LexicalIndex | Any:
        """The BM25 index, loaded (memory-mapped) once."""
        if self._lexical is None:
            if not self.has_lexical:
                raise UsageError(f"index at {self.path} has no lexical part")
            from .generation import lexical_root, wrap_lexical

            root = lexical_root(self.path, self.meta)  # an update's generation has its own
            check_lexical(self.meta, root, self.path)
            try:
                self._lexical = wrap_lexical(
                    open_lexical(root / LEXICAL_DIR, self.size, self.meta["lexical"],
                                 self.lexical_max_terms), self.meta, self._db)
            except IndexLoadError as exc:
                raise IndexLoadError(
                    f"{exc}; rebuild the lexical part without re-embedding: "
                    f"{add_lexical_hint(self.path, self.meta)}"
                ) from exc
        return self._lexical

    def search(
        self, queries: Sequence[str], k: int = 5, retrieval: str = "dense"
    ) -> list[list[Hit]]:
        """Embed ``queries`` in one batch and return the top ``k`` passages of each.

        ``retrieval``: ``dense``, ``lexical`` or ``hybrid`` (see ``ceg_cli.index.lexical``);
        hybrid on an index without a lexical part is dense. Scores are cosines.
        """
        check_method(retrieval)
        if self.lexical_only:
            if retrieval != "lexical":
                raise refuse_method(self.path, retrieval)
            return search_lexical(self, queries, None, k, retrieval)
        vectors = query_vectors(self.embedder(), queries)
        if retrieval == "dense" or (retrieval == "hybrid" and not self.has_lexical):
            return self.search_vectors(vectors, k)
        return search_lexical(self, queries, vectors, k, retrieval)

    def dense_candidates(self, vectors: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        """(passage id, cosine) of the top ``k`` of each vector, without the passages.

        One FAISS search for all the vectors; each query's result is the one it
        gets searched alone (``tests/test_batched_search.py``, every type).
        """
        import numpy as np

        if len(vectors) == 0 or self.size == 0:
            return [[] for _ in range(len(vectors))]
        k = max(1, min(k, self.size))
        scores, ids = self._vectors.search(np.ascontiguousarray(vectors, dtype=np.float32), k)
        return [
            [(int(i), float(s)) for s, i in zip(row_s, row_i) if i >= 0]
            for row_s, row_i in zip(scores, ids)
        ]

    def cosines(self, vector: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
        """Cosine of ``vector`` with the stored vectors of passages ``ids``."""
        return self.cosines_many(vector[None, :], [ids])[0]

    def cosines_many(
        self, vectors: np.ndarray, ids: Sequence[Sequence[int]]
    ) -> list[dict[int, float]]:
        """For each of ``vectors``, its cosine with the stored vectors of its ``ids``.

        The stored vectors of all of them are read in one call; each query's
        cosines are then its own product, as when it is searched alone.
        """
        import numpy as np

        wanted = sorted({int(i) for row in ids for i in row})
        if not wanted:
            return [{} for _ in ids]
        stored = self._vectors.reconstruct_batch(np.asarray(wanted, dtype=np.int64))
        at = {i: n for n, i in enumerate(wanted)}
        out = []
        for vector, row in zip(vectors, ids):
            if not len(row):
                out.append({})
                continue
            rows = stored[[at[int(i)] for i in row]]
            out.append({int(i): float(s) for i, s in zip(row, rows @ vector)})
        return out

    def search_vectors(self, vectors: np.ndarray, k: int) -> list[list[Hit]]:
        found = self.dense_candidates(vectors, k)
        chunks = self.chunks(i for row in found for i, _ in row)
        return [[Hit(i, s, chunks[i]) for i, s in row] for row in found]

    def chunks(self, ids: Iterable[int]) -> dict[int, Chunk]:
        wanted = sorted(set(ids))
        found: dict[int, Chunk] = {}
        # SQLite limits the number of bound parameters; fetch in slices.
        for at in range(0, len(wanted), 500):
            part = wanted[at : at + 500]
            marks = ",".join("?" * len(part))
            rows = self._db.execute(
                f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE id IN ({marks})", part
            ).fetchall()
            for row in rows:
                found[row[0]] = _row_to_chunk(row)
        missing = [i for i in wanted if i not in found]
        if missing:
            raise IndexLoadError(
                f"index at {self.path} is inconsistent: vector {missing[0]} has no passage "
                f"in {CHUNKS_FILE}; rebuild the index"
            )
        return found

    def iter_chunks(self) -> Iterator[Chunk]:
        """Every passage in id order, streamed (a document's passages are adjacent)."""
        for row in self._db.execute(f"SELECT {CHUNK_COLUMNS} FROM chunks ORDER BY id"):
            yield _row_to_chunk(row)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Attempts to open an index that a build keeps replacing while it is opened.
_OPEN_ATTEMPTS = 5
#: Past this many passages, a tantivy lexical part is searched with each query's
#: ``AUTO_MAX_TERMS`` rarest terms unless ``--lexical-max-terms`` says otherwise: at
#: 10,000,000 passages that takes the median query from 53 to 16 ms on 2 cores and keeps
#: 97 % of the exact top 50 (docs/measurements.md, "A tantivy query at 10 M").
AUTO_MAX_TERMS_PASSAGES = 2_000_000
AUTO_MAX_TERMS = 10


def open_index(path: Path, *, model: str | None = None, mmap: bool = True) -> Index:
    """Open the index at ``path`` for reading, checking that its files agree.

    A build may swap a new index in while the three files are being opened,
    and then they could come from two builds: the directory's identity is read
    before and after, and the index opened again if it changed. Once opened,
    the files stay the reader's even when a later build replaces them.
    """
    path = Path(path)
    for attempt in range(1, _OPEN_ATTEMPTS + 1):
        before = _identity(path)
        try:
            index = _open_once(path, model, mmap)
        except IndexLoadError:
            # Where a swap is two renames, the index is missing between them,
            # with the previous one parked beside it.
            between_renames = before is None and any(path.parent.glob(f".{path.name}.old-*"))
            changed = _identity(path) != before
            if not (changed or between_renames) or attempt == _OPEN_ATTEMPTS:
                raise
        else:
            if _identity(path) == before:
                return index
            index.close()
        time.sleep(0.01 * attempt)  # lets a swap in progress finish
    raise IndexLoadError(f"index at {path} kept being replaced while it was opened; try again")


def _identity(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _open_once(path: Path, model: str | None, mmap: bool) -> Index:
    from .dense.vectors import read_vectors  # numpy and faiss: not at import, for a quick --help

    meta = read_meta(path)
    if is_lexical_only(meta):
        return _open_lexical_only(path, meta, model)
    check_model(meta, model, path)
    try:
        vectors = read_vectors(path / VECTORS_FILE, mmap)
    except RuntimeError as exc:
        raise IndexLoadError(
            f"{path / VECTORS_FILE}: unreadable FAISS index; rebuild the index"
        ) from exc
    db, rows = _open_store(path)
    expected = meta["counts"].get("chunks")
    if "generation" in meta:  # updated in place (``generation``): base and generation
        vectors, rows = _layered(path, meta, vectors, db, mmap)
    if vectors.d != meta["model"]["dimension"]:
        db.close()
        raise IndexLoadError(
            f"index at {path} is inconsistent: {VECTORS_FILE} has dimension {vectors.d}, "
            f"{META_FILE} says {meta['model']['dimension']}; rebuild the index"
        )
    if not (vectors.ntotal == rows == expected):
        db.close()
        raise IndexLoadError(
            f"index at {path} is inconsistent: {VECTORS_FILE} holds {vectors.ntotal} vectors, "
            f"{CHUNKS_FILE} {rows} passages, {META_FILE} says {expected}; rebuild the index"
        )
    try:
        # Last: the checks above name a wrong count or dimension more precisely.
        check_vectors_file(path, meta)
    except IndexLoadError:
        db.close()
        raise
    return Index(path, meta, vectors, db)


def _open_store(path: Path) -> tuple[sqlite3.Connection, int]:
    """The index's passage store, opened read-only, and how many passages it holds."""
    db = connect_readonly(path / CHUNKS_FILE)
    try:
        (rows,) = db.execute("SELECT count(*) FROM chunks").fetchone()
    except sqlite3.DatabaseError as exc:
        db.close()
        raise IndexLoadError(
            f"{path / CHUNKS_FILE}: unreadable ({exc}); rebuild the index"
        ) from exc
    return db, int(rows)


def _open_lexical_only(path: Path, meta: dict[str, Any], model: str | None) -> Index:
    """An index with no vectors: its store, checked against meta.json's count."""
    if model is not None:
        raise UsageError(f"--model {model}: index at {path} was built with --retrieval lexical "
                         "and has no model; leave out --model")
    db, rows = _open_store(path)
    expected = meta["counts"].get("chunks")
    if "generation" in meta:
        _, rows = _layered(path, meta, None, db, False)
    if rows != expected:
        db.close()
        raise IndexLoadError(
            f"index at {path} is inconsistent: {CHUNKS_FILE} holds {rows} passages, "
            f"{META_FILE} says {expected}; rebuild the index"
        )
    return Index(path, meta, NoVectors(rows), db)


def _layered(path: Path, meta: dict[str, Any], base: Any, db: sqlite3.Connection,
             mmap: bool) -> tuple[Any, int]:
    """An updated index's live passages and vectors (``generation``); closes ``db`` on
    failure."""
    from .generation import open_layered_store, open_layered_vectors, removed_ids

    try:
        rows = open_layered_store(path, meta, db)
        if base is None:
            return None, rows
        if base.ntotal != meta["generation"]["base_chunks"]:
            raise IndexLoadError(
                f"index at {path} is inconsistent: {VECTORS_FILE} holds {base.ntotal} "
                f"vectors, {META_FILE} says its base holds {meta['generation']['base_chunks']}"
                "; rebuild the index")
        return open_layered_vectors(path, meta, base, removed_ids(db), mmap), rows
    except BaseException:
        db.close()
        raise


def connect_readonly(db_path: Path) -> sqlite3.Connection:
    # immutable=1: the file never changes under a reader (indexes are replaced
    # by rename, not edited), so SQLite can skip locking entirely.
    uri = sqlite_uri(db_path, "mode=ro&immutable=1")
    try:
        return sqlite3.connect(uri, uri=True, check_same_thread=False)
    except sqlite3.Error as exc:
        raise IndexLoadError(f"{db_path}: cannot open ({exc}); rebuild the index") from exc


def _row_to_chunk(row: Sequence[Any]) -> Chunk:
    _, doc_id, title, ordinal, start, end, text, url, source = row
    return Chunk(doc_id, title, ordinal, start, end, text, url, source)
