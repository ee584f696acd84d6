"""What an index directory holds: its file names, the chunk store's schema, a hit.

The names every part of the index package agrees on, kept apart from the code
that reads and writes them so that the builder, the lexical part and the
reader can all use them without importing each other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..types import Chunk

#: The format a build with vectors writes; one without (``lexonly``) writes 2.
FORMAT_VERSION = 1
#: The newest format this ceg reads (3: an index updated in place, ``generation``).
READ_FORMAT_VERSION = 3
META_FILE = "meta.json"
VECTORS_FILE = "vectors.faiss"
CHUNKS_FILE = "chunks.sqlite"
INDEX_FILES = (META_FILE, VECTORS_FILE, CHUNKS_FILE)
#: The lexical (BM25) part's folder in an index (``lexical``).
LEXICAL_DIR = "lexical"
#: In a build's work directory (``buildwork``): what is built, and the vectors' shards.
#: An update's generation folder in an index (``generation``): ``gen-`` and six digits.
GENERATION_PATTERN = r"gen-\d{6}"
MANIFEST = "manifest.json"
SHARDS = "shards"

CHUNK_SCHEMA = """
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY,
    doc_id TEXT NOT NULL,
    title TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    text TEXT NOT NULL,
    url TEXT,
    source TEXT NOT NULL,
    language TEXT
);
"""
CHUNK_COLUMNS = "id, doc_id, title, ordinal, start, end, text, url, source"


@dataclass(frozen=True)
class Hit:
    """One retrieved passage: its FAISS id, cosine similarity and the passage
    (score None: an index without vectors, ``lexonly``, has no cosine; its hits
    carry their BM25 score in ``bm25``, which the retrieval rule cuts on there)."""

    chunk_id: int
    score: float | None
    chunk: Chunk
    bm25: float | None = None


def embed_text(chunk: Chunk, mode: str) -> str:
    """The text that is embedded for a passage; ``mode`` is recorded in meta.json."""
    if mode == "title+text" and chunk.title:
        return f"{chunk.title}. {chunk.text}"
    return chunk.text


#: How a build reads and embeds (``meta.json``'s ``build.engine``): here, or on Ray
#: workers (``ray_engine``). Here, not in the builder, so that ``ceg --help`` lists
#: them without loading numpy.
ENGINES = ("local", "ray")
#: The lexical part's engines (``lexical.lexical_engine``): auto by size, or one named.
LEXICAL_ENGINES = ("auto", "bm25s", "tantivy")


def is_generation_name(name: str) -> bool:
    """Whether ``name`` is one an update writes in an index directory (``remove_built``)."""
    return re.fullmatch(GENERATION_PATTERN, name) is not None
