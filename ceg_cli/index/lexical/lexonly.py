"""Indexes built without embedding (``ceg index build --retrieval lexical``).

Such an index holds the chunk store and the lexical (BM25) part only: no
model, no vectors. Its ``meta.json`` says ``"retrieval": "lexical"`` and has
no ``model`` or ``faiss`` entry, and its format is ``LEXICAL_ONLY_FORMAT`` so
that a ceg from before them says "upgrade" rather than "field missing".

The build runs the same pipeline as any other (readers, shards, ``--resume``,
``--append``, Ray) with ``NoEmbedder``, whose vectors have no dimensions:
reading, chunking and storing become the whole cost. A search of such an index
is lexical, and its passages have no cosine (``similarity`` null in a record):
in place of the threshold rule, which cuts on the cosine, a passage other than the
top-1 is kept when its BM25 score reaches ``retrieve.LEXICAL_KEEP`` (0.5) of the
top-1's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import UsageError

if TYPE_CHECKING:
    import numpy as np

#: meta.json's ``retrieval`` for an index with no vectors.
LEXICAL_ONLY = "lexical"
#: The index format of a lexical-only index (a dense index stays at 1).
LEXICAL_ONLY_FORMAT = 2
#: What manifests and reports name as the model of a build that embeds nothing.
NO_MODEL = "none"
#: What the retrieval option of a build may say, as ``ceg check --retrieval`` does.
BUILD_RETRIEVALS = ("hybrid", "dense", "lexical")


class NoEmbedder:
    """The model of a build that embeds nothing: every passage gets an empty vector."""

    name = NO_MODEL
    dimension = 0
    backend = "none"
    device = "cpu"
    precision = "float32"
    max_seq_length = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        return np.zeros((len(texts), 0), dtype=np.float32)


def is_lexical_only(meta: Mapping[str, Any]) -> bool:
    """Whether ``meta`` (an index's meta.json) is of an index with no vectors."""
    return meta.get("retrieval") == LEXICAL_ONLY


def kept_on_append(target: Any) -> str | None:
    """``lexical`` where ``target`` holds an index built with ``--retrieval lexical``: an
    ``--append`` that does not say ``--retrieval`` keeps the index's kind (the build
    checks the index again under its lock); None otherwise."""
    import json
    from pathlib import Path

    from ..layout import META_FILE

    try:
        meta = json.loads((Path(target) / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return LEXICAL_ONLY if isinstance(meta, dict) and is_lexical_only(meta) else None


def refuse_method(path: Any, method: str) -> UsageError:
    """The one line for ``--retrieval dense|hybrid`` asked of a lexical-only index."""
    return UsageError(
        f"--retrieval {method}: index at {path} was built with --retrieval lexical and has "
        "no vectors; search it with --retrieval lexical (the default for it), or rebuild it "
        "without --retrieval lexical"
    )


def searched_by_bm25(path: Any) -> str:
    """What a run against such an index says of its retrieval (its first line)."""
    return (f"retrieval lexical (BM25): index at {path} was built with --retrieval lexical "
            "and has no vectors")


class NoVectors:
    """Stands for the FAISS index of an index without vectors: it counts passages."""

    d = 0

    def __init__(self, ntotal: int) -> None:
        self.ntotal = ntotal
