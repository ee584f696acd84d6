"""Retrieval inside a record's own contexts, the way an index retrieves from a corpus.

Each context is cut into passages as ``ceg index build`` cuts a document
(``chunk_document``, the same words per passage), and each segment takes the
top ``k`` of its record's passages (``--contexts-retrieval``):

- ``lexical`` (the default): by BM25 over the record's passages, with the
  index's parameters and tokenizer; the best passage always, the others only
  if they share a word with the query. No threshold: a record's contexts were
  retrieved for it, and the CEG threshold (a cosine) exists to drop what a
  search of a whole corpus brings in by chance. Nothing is embedded, so a
  passage's ``similarity`` is null, unless the judge reads similarities (the
  verifier), when the cosine of each passage kept is computed and reported.
  Measured (``benchmarks/check/contexts_speed.py``): embedding every record's
  passages cost most of a run, 6.4 segments/s against 51.6 for an index on 2
  cores.
- ``dense`` and ``hybrid``: exactly as an index ranks (cosine, or its fusion with
  BM25: ``ceg_cli.index.lexical.bm25.search`` runs unchanged over a record's
  passages), with the same threshold rule. Passages are embedded with the same
  model as the queries, in one batch across the records of a batch, and a
  passage seen before in the run (the same retrieved text for many questions)
  is not embedded again.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..index.build.chunking import DEFAULT_MAX_WORDS, chunk_document
from ..index.layout import Hit, embed_text
from ..index.lexical.bm25 import BM25_PARAMS
from ..index.lexical.bm25 import search as search_lexical
from ..index.lexical.lexlang import (
    TOKENIZER,
    corpus_tokens,
    import_bm25s,
    is_legacy,
    language_counts,
    queries_tokens,
    tokenizer_entry,
)
from ..lang.codes import AUTO, ENGLISH
from ..lang.detect import detect, detect_within
from ..types import Chunk, Context, Document, Evidence
from .retrieve import RetrievalOptions, apply_threshold

if TYPE_CHECKING:
    import numpy as np

    from ..index.dense.embedding import Embedder

#: Passage vectors kept for the rest of a run (about 1.5 KB each at 384
#: dimensions: 30 MB); past it the least recently used are embedded again.
CACHE_PASSAGES = 20_000
DEFAULT_EMBED_MODE = "title+text"
#: How a record's own passages are ranked (``--contexts-retrieval``).
CONTEXT_RETRIEVAL_MODES = ("lexical", "dense", "hybrid")
DEFAULT_CONTEXT_RETRIEVAL = "lexical"


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
    """BM25 over one record's passages, with the index's parameters and, as an index
    reads them (``index.lexical.lexlang``), each passage in its context's language and the
    query in the union of theirs; all English, exactly as before languages."""

    def __init__(self, texts: Sequence[str], languages: Sequence[str | None] = ()) -> None:
        bm25s = import_bm25s()
        languages = list(languages) or [None] * len(texts)
        self.tokenizer = tokenizer_entry(language_counts(languages))
        if is_legacy(self.tokenizer):
            tokens = bm25s.tokenize(list(texts), **TOKENIZER, show_progress=False)
        else:
            tokens = corpus_tokens(texts, [lang or ENGLISH for lang in languages])
        self._size = len(texts)
        # Passages with not one word between them (".", "a", emoji): bm25s cannot
        # index an empty vocabulary, and no query could match one anyway.
        self._bm25: Any = None
        if tokens.vocab:
            self._bm25 = bm25s.BM25(**BM25_PARAMS)
            self._bm25.index(tokens, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        return next(self.scores_many([query]))

    def scores_many(self, queries: Sequence[str]) -> Iterator[np.ndarray]:
        import numpy as np

        if self._bm25 is None:
            for _ in queries:
                yield np.zeros(self._size, dtype=np.float32)
            return
        for words in queries_tokens(queries, self.tokenizer):
            ids = self._bm25.get_tokens_ids(words)
            if not ids:
                yield np.zeros(self._size, dtype=np.float32)
            else:
                yield np.asarray(self._bm25.get_scores_from_ids(ids))


class RecordPassages:
    """One record's contexts cut into passages, searchable like an index
    (``ceg_cli.index.lexical.bm25.SearchedIndex``)."""

    path = Path("contexts")
    meta: dict[str, Any] = {}

    def __init__(
        self, passages: Sequence[tuple[Context, Chunk]], vectors: np.ndarray | None, mode: str
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
            self._bm25 = _Bm25(self._texts, [chunk.language for _, chunk in self.passages])
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
        if self.vectors is None:
            raise RuntimeError("these passages were not embedded")
        return {int(i): float(self.vectors[int(i)] @ vector) for i in ids}

    def cosines_many(
        self, vectors: np.ndarray, ids: Sequence[Sequence[int]]
    ) -> list[dict[int, float]]:
        return [self.cosines(vector, row) for vector, row in zip(vectors, ids)]

    def ranked(self, query: str, vector: np.ndarray | None, ids: Sequence[int],
               k: int) -> list[Hit]:
        """Up to ``k`` of passages ``ids``, best first: by cosine where the passages were
        embedded, else by BM25 (ties: the earlier passage). A hit's score is its
        cosine, or None where there is none."""
        import numpy as np

        ids = [int(i) for i in ids]
        if not ids:
            return []
        if self.vectors is not None and vector is not None:
            cos = self.cosines(vector, ids)
            best = sorted(ids, key=lambda i: (-cos[i], i))[:k]
            return [Hit(i, cos[i], self.passages[i][1]) for i in best]
        bm25 = self.lexical().scores(query)
        pick = np.asarray(ids)
        best = pick[np.lexsort((pick, -bm25[pick]))[:k]]
        return [Hit(int(i), None, self.passages[int(i)][1]) for i in best]  # type: ignore[arg-type]

    def bm25_hits(self, queries: Sequence[str], vectors: np.ndarray | None,
                  k: int) -> list[list[Hit]]:
        """``--contexts-retrieval lexical``: each query's top ``k`` passages by BM25, the
        best always and the others only with a word of the query; each with its cosine
        where the passages were embedded (for a judge that reads it), else None."""
        import numpy as np

        out = []
        for n, query in enumerate(queries):
            scores = self.lexical().scores(query)
            order = np.lexsort((np.arange(len(scores)), -scores))[:k]
            keep = [int(i) for rank, i in enumerate(order) if rank == 0 or scores[i] > 0]
            cos = (self.cosines(vectors[n], keep)
                   if self.vectors is not None and vectors is not None else {})
            out.append([Hit(i, cos.get(i), self.passages[i][1])  # type: ignore[arg-type]
                        for i in keep])
        return out

    def chunks(self, ids: Iterable[int]) -> dict[int, Chunk]:
        return {int(i): self.passages[int(i)][1] for i in ids}

    def search(self, queries: Sequence[str], vectors: np.ndarray | None, k: int,
               method: str) -> list[list[Hit]]:
        if not self.passages:
            return [[] for _ in queries]
        if method == "lexical":
            return self.bm25_hits(queries, vectors, k)
        if vectors is None:
            raise RuntimeError(f"{method} ranking needs the queries' vectors")
        if method == "dense":
            found = self.dense_candidates(vectors, k)
            return [[Hit(i, s, self.passages[i][1]) for i, s in row] for row in found]
        return search_lexical(self, queries, vectors, k, method)

    def evidence(self, hit: Hit) -> Evidence:
        context, chunk = self.passages[hit.chunk_id]
        return Evidence(
            passage_id=hit.chunk_id,
            doc_id=context.id or str(context.position),
            title=context.title or "",
            text=chunk.text,
            similarity=None if hit.score is None else round(hit.score, 4),
            url=context.url,
            context=context.position,
            start=chunk.start,
            end=chunk.end,
        )


def cut_contexts(
    contexts: Sequence[Context], max_words: int, language: str | None = None,
    record_language: str | None = None,
) -> list[tuple[Context, Chunk]]:
    """Every context's passages, in context order (a blank context gives none).

    ``language``: each context's (a code), ``auto`` to detect each one's own (a
    record's contexts may be in another language than its response: a context
    detection is not sure of, a short one, takes ``record_language``), or None
    (English, as before languages); each passage records it.
    """
    out = []
    for context in contexts:
        doc = Document(context.id or str(context.position), context.title or "", context.text,
                       context.url)
        if language != AUTO:
            code = language
        elif record_language is not None:
            code = detect_within(context.text, record_language)
        else:
            code = detect(context.text).language
        out.extend(
            (context, chunk if code is None else replace(chunk, language=code))
            for chunk in chunk_document(doc, max_words, code)
        )
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
        method: str = DEFAULT_CONTEXT_RETRIEVAL,
        similarity: bool = False,
        language: str | None = None,
    ) -> None:
        if method not in CONTEXT_RETRIEVAL_MODES:
            raise ValueError(f"method {method!r}: one of {CONTEXT_RETRIEVAL_MODES}")
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self.mode = mode
        self.max_words = max_words
        self.cache = cache if cache is not None else VectorCache()
        #: How passages are ranked: ``CONTEXT_RETRIEVAL_MODES``.
        self.method = method
        #: Whether passages and queries are embedded: to rank them (dense, hybrid) or
        #: because the judge reads each passage's cosine (``similarity``).
        self.embeds = method != "lexical" or similarity
        #: The contexts' language: a code, ``auto`` (each context's own), None (English).
        self.language = language

    @property
    def embedder(self) -> Embedder:
        """The model, loaded on first use: a run with no contexts never loads it."""
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray | None:
        """The queries' vectors, or None where nothing is embedded."""
        from ..index.dense.embedding import query_vectors

        return query_vectors(self.embedder, list(queries)) if self.embeds else None

    def prepare(
        self, records: Sequence[Sequence[Context]],
        languages: Sequence[str | None] | None = None,
    ) -> list[RecordPassages]:
        """Cut the contexts of several records at once (``languages``: each record's), and
        embed them if ranking needs it."""
        import numpy as np

        languages = list(languages) if languages is not None else [None] * len(records)
        cut = [cut_contexts(contexts, self.max_words, self.language, record_language)
               for contexts, record_language in zip(records, languages)]
        if not self.embeds:
            return [RecordPassages(passages, None, self.mode) for passages in cut]
        texts = [embed_text(chunk, self.mode) for passages in cut for _, chunk in passages]
        vectors = self.cache.embed(self.embedder, texts) if texts else None
        out = []
        at = 0
        for passages in cut:
            part = vectors[at: at + len(passages)] if vectors is not None and passages else None
            if part is None:
                part = np.zeros((0, 1), dtype=np.float32)
            out.append(RecordPassages(passages, part, self.mode))
            at += len(passages)
        return out


def retrieve_in(
    passages: RecordPassages,
    queries: Sequence[str],
    vectors: np.ndarray | None,
    options: RetrievalOptions,
) -> list[tuple[Evidence, ...]]:
    """Each query's evidence among one record's passages, best first: by BM25
    (``options.method`` lexical), or as an index ranks, after the threshold rule."""
    if not queries:
        return []
    hits = passages.search(queries, vectors, options.top_k, options.method)
    if options.method == "lexical":
        return [tuple(passages.evidence(h) for h in row) for row in hits]
    return [
        tuple(passages.evidence(h) for h in apply_threshold(row, options.threshold))
        for row in hits
    ]


def context_search(
    index: Any, device: str, *, method: str = DEFAULT_CONTEXT_RETRIEVAL,
    similarity: bool = False, language: str | None = None,
) -> ContextSearch:
    """What searches records' own contexts: with the index's model, passage size and
    embedded text where there is an index, else the default model; loaded on first use,
    and only if ranking or the judge (``similarity``) needs vectors."""
    if index is not None:
        chunker = index.meta.get("chunker") or {}
        if getattr(index, "lexical_only", False):  # no model of its own: the default one
            from ..index.dense.embedding import load_embedder

            def model() -> Any:
                return load_embedder(None, device=device)
        else:
            def model() -> Any:
                return index.embedder(device)
        return ContextSearch(
            model,
            mode=str(index.meta.get("embed_text", DEFAULT_EMBED_MODE)),
            max_words=int(chunker.get("max_words", DEFAULT_MAX_WORDS)),
            method=method, similarity=similarity, language=language,
        )
    from ..index.dense.embedding import load_embedder

    return ContextSearch(lambda: load_embedder(None, device=device), method=method,
                         similarity=similarity, language=language)


def reads_similarity(judge: Any) -> bool:
    """Whether ``judge`` reads its passages' cosine similarities (``reads_similarity``;
    the verifier's features do): then a record's passages are embedded whatever ranks them."""
    return bool(getattr(judge, "reads_similarity", False))
