"""The ``meta.json`` a build writes: what the index holds and how it was made.

``builder._write_index`` fills in what only the finished work knows (the index
file's type and digest, the lexical part, the documents' languages).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ... import __version__
from ..dense.embedding import Embedder
from ..layout import FORMAT_VERSION
from .buildopts import BuildOptions, BuildReport
from .chunking import CHARS_PER_WORD


def vector_precision(old_meta: dict[str, Any] | None, embedder: Embedder) -> str:
    """The float width the index's vectors were computed in: ``mixed`` where an
    append computed new ones in another than the index's own."""
    mine = str(getattr(embedder, "precision", "float32"))
    if old_meta is None or old_meta["counts"]["chunks"] == 0 or "model" not in old_meta:
        return mine
    recorded = str(old_meta["model"].get("precision", "float32"))
    return recorded if recorded == mine else "mixed"


def new_meta(
    embedder: Embedder,
    options: BuildOptions,
    sources: list[dict[str, Any]],
    report: BuildReport,
    old_meta: dict[str, Any] | None,
) -> dict[str, Any]:
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return {
        "format_version": FORMAT_VERSION,
        "ceg_version": __version__,
        "created_at": old_meta["created_at"] if old_meta else now,
        "updated_at": now,
        "model": {
            "name": embedder.name,
            "dimension": embedder.dimension,
            "normalized": True,
            "max_seq_length": getattr(embedder, "max_seq_length", None),
            "backend": getattr(embedder, "backend", "torch"),
            "precision": vector_precision(old_meta, embedder),
            # A static model's weights are made on the user's machine: their digest is
            # checked on open (``static.check_weights``).
            **({"weights_digest": embedder.weights_digest}
               if getattr(embedder, "weights_digest", None) else {}),
        },
        "embed_text": options.embed_text,
        "faiss": {"type": "IndexFlatIP", "metric": "inner_product"},
        "chunker": {
            "max_words": options.chunk_words,
            "boundaries": "sentence, newline",
            # Languages written without spaces: characters that count as one word.
            "chars_per_word": dict(CHARS_PER_WORD),
        },
        "language": options.language,
        "counts": {"documents": report.total_documents, "chunks": report.total_chunks},
        "sources": sources,
        "build": {"engine": options.engine, "workers": report.workers},
    }
