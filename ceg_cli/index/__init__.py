"""The index directory: FAISS vectors, a SQLite chunk store and ``meta.json``.

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

from .layout import (
    CHUNK_SCHEMA,
    CHUNKS_FILE,
    FORMAT_VERSION,
    INDEX_FILES,
    META_FILE,
    VECTORS_FILE,
    Hit,
    embed_text,
)
from .store import (
    Index,
    check_model,
    check_vectors_file,
    connect_readonly,
    open_index,
    read_meta,
)

__all__ = [
    "CHUNKS_FILE",
    "CHUNK_SCHEMA",
    "FORMAT_VERSION",
    "INDEX_FILES",
    "META_FILE",
    "VECTORS_FILE",
    "Hit",
    "Index",
    "check_model",
    "check_vectors_file",
    "connect_readonly",
    "embed_text",
    "open_index",
    "read_meta",
]
