"""Retrieval inside a record's own contexts, the way an index retrieves from a corpus.

Each context is cut into passages as ``ceg index build`` cuts a document
(``chunk_document``, the same words per passage), the passages are embedded
with the same model as the queries, and each segment takes the top ``k`` of its
record's passages by the same method (dense cosine, BM25 or their fusion:
``ceg_cli.index.lexical.search`` runs unchanged over a record's passages) and the
same CEG threshold rule. Passages are embedded in one batch across the records
of a batch, and a passage seen before in the run (the same retrieved text for
many questions) is not embedded again.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..index.chunking import DEFAULT_MAX_WORDS, chunk_document
from ..index.layout import Hit, embed_text
from ..index.lexical import BM25_PARAMS, TOKENIZER
from ..index.lexical import search as search_lexical
from ..types import Chunk, Context, Document, Evidence
from .retrieve import RetrievalOptions, apply_threshold

if TYPE_CHECKING:
    import numpy as np

    from ..index.embedding import Embedder

#: Passage vectors kept for the rest of a run (about 1.5 KB each at 384
#: dimensions: 30 MB); past it the least recently used are embedded again.
CACHE_PASSAGES = 20_000
DEFAULT_EMBED_MODE = "title+text"


class VectorCache:
    """Vectors of texts embedded before in this run, least recently used dropped first."""

    def __init__(self, capacity: int = CACHE_PASSAGES) -> None:
        self.capacity = capacity
        self._vectors: OrderedDict[bytes, Any] = OrderedDict()
        self.embedded = 0  # texts the model embedded
        self.reused = 0  # texts found here

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        keys = [hashlib.blake2b(t.encode("utf-8", "replace"), digest_size=16).digest()
                for t in texts]
        missing: dict[bytes, str] = {}
        for key, text in zip(keys, texts):
            if key in self._vectors:
                self._vectors.move_to_end(key)
            else:
                missing.setdefault(key, text)
        if missing:
            vectors = embedder.embed(list(missing.values()))
            for key, vector in zip(missing, vectors):
                self._vectors[key] = np.asarray(vector, dtype=np.float32)
            self.embedded += len(missing)
        self.reused += len(keys) - len(missing)
        out = np.vstack([self._vectors[k] for k in keys]) if keys else np.zeros((0, 0), "f4")
        while len(self._vectors) > self.capacity:
            self._vectors.popitem(last=False)
        return out


class _Bm25:
    """BM25 over one record's passages, with the index's parameters and tokenizer."""

    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s

        self._bm25 = bm25s.BM25(**BM25_PARAMS)
        self._bm25.index(bm25s.tokenize(list(texts), **TOKENIZER, show_progress=False),
                         show_progress=False)
        self._size = len(texts)

    def scores(self, query: str) -> np.ndarray:
        import bm25s
        import numpy as np

        tokens = bm25s.tokenize([query], **TOKENIZER, return_ids=False, show_progress=False)[0]
        ids = self._bm25.get_tokens_ids(tokens)
        if not ids:
            return np.zeros(self._size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids))


class RecordPassages:
    """One record's contexts cut into passages, searchable like an index
    (``ceg_cli.index.lexical.SearchedIndex``)."""

    path = Path("contexts")
    meta: dict[str, Any] = {}

    def __init__(
        self, passages: Sequence[tuple[Context, Chunk]], vectors: np.ndarray, mode: str
    ) -> None:
        self.passages = list(passages)
        self.vectors = vectors
        self._texts = [embed_text(chunk, mode) for _, chunk in self.passages]
        self._bm25: _Bm25 | None = None

    @property
    def has_lexical(self) -> bool:
        return True

    def lexical(self) -> _Bm25:
        if self._bm25 is None:
            self._bm25 = _Bm25(self._texts)
        return self._bm25

    def dense_candidates(self, vectors: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        import numpy as np

        if not self.passages:
            return [[] for _ in range(len(vectors))]
        scores = vectors @ self.vectors.T
        out = []
        for row in scores:
            # Best first; ties go to the earlier passage, as an exact index orders them.
            order = np.lexsort((np.arange(len(row)), -row))[:k]
            out.append([(int(i), float(row[i])) for i in order])
        return out

    def cosines(self, vector: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
        return {int(i): float(self.vectors[int(i)] @ vector) for i in ids}

    def chunks(self, ids: Iterable[int]) -> dict[int, Chunk]:
        return {int(i): self.passages[int(i)][1] for i in ids}

    def search(self, queries: Sequence[str], vectors: np.ndarray, k: int,
               method: str) -> list[list[Hit]]:
        if method == "dense":
            found = self.dense_candidates(vectors, k)
            return [[Hit(i, s, self.passages[i][1]) for i, s in row] for row in found]
        if not self.passages:
            return [[] for _ in queries]
        return search_lexical(self, queries, vectors, k, method)

    def evidence(self, hit: Hit) -> Evidence:
        context, chunk = self.passages[hit.chunk_id]
        return Evidence(
            passage_id=hit.chunk_id,
            doc_id=context.id or str(context.position),
            title=context.title or "",
            text=chunk.text,
            similarity=round(hit.score, 4),
            url=context.url,
            context=context.position,
            start=chunk.start,
            end=chunk.end,
        )


def cut_contexts(contexts: Sequence[Context], max_words: int) -> list[tuple[Context, Chunk]]:
    """Every context's passages, in context order (a blank context gives none)."""
    out = []
    for context in contexts:
        doc = Document(context.id or str(context.position), context.title or "", context.text,
                       context.url)
        out.extend((context, chunk) for chunk in chunk_document(doc, max_words))
    return out


class ContextSearch:
    """Finds each segment's evidence in its own record's contexts."""

    def __init__(
        self,
        embedder: Callable[[], Embedder],
        *,
        mode: str = DEFAULT_EMBED_MODE,
        max_words: int = DEFAULT_MAX_WORDS,
        cache: VectorCache | None = None,
    ) -> None:
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self.mode = mode
        self.max_words = max_words
        self.cache = cache if cache is not None else VectorCache()

    @property
    def embedder(self) -> Embedder:
        """The model, loaded on first use: a run with no contexts never loads it."""
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        return self.embedder.embed(list(queries))

    def prepare(self, records: Sequence[Sequence[Context]]) -> list[RecordPassages]:
        """Cut and embed the contexts of several records at once."""
        cut = [cut_contexts(contexts, self.max_words) for contexts in records]
        texts = [embed_text(chunk, self.mode) for passages in cut for _, chunk in passages]
        vectors = self.cache.embed(self.embedder, texts) if texts else None
        out = []
        at = 0
        for passages in cut:
            part = vectors[at: at + len(passages)] if vectors is not None and passages else None
            if part is None:
                import numpy as np

                part = np.zeros((0, 1), dtype=np.float32)
            out.append(RecordPassages(passages, part, self.mode))
            at += len(passages)
        return out


def retrieve_in(
    passages: RecordPassages,
    queries: Sequence[str],
    vectors: np.ndarray,
    options: RetrievalOptions,
) -> list[tuple[Evidence, ...]]:
    """Each query's evidence among one record's passages, best first, after the threshold."""
    if not queries:
        return []
    hits = passages.search(queries, vectors, options.top_k, options.method)
    return [
        tuple(passages.evidence(h) for h in apply_threshold(row, options.threshold))
        for row in hits
    ]
