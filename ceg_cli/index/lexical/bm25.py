"""Lexical (BM25) retrieval beside the dense vectors, and their fusion.

A dense MiniLM query blurs names, numbers and rare terms, which is what a
chatbot most often gets wrong; BM25 matches them exactly. The index directory
holds a ``bm25s`` index in ``lexical/``, built in the same build as the vectors
from the same text that is embedded (``embed_text``: "Title. passage" by
default), one document per passage, row id == FAISS id.

Retrieval methods (``--retrieval``):

- ``dense`` (default): cosine similarity over the vectors (the CEG paper's
  retrieval);
- ``lexical``: BM25 order;
- ``hybrid``: per query, the union of each method's top
  ``FUSION_DEPTH``; a candidate missing from one list gets that method's score
  all the same (its cosine from the stored vector, its BM25 score from the
  lexical index); both scores are min-max normalised over the union and
  averaged with weight 0.5 each; order by that fused score. The rule is fixed,
  not tuned per dataset (issue 16; figures in the README, "Retrieval").

Dense stays the default because hybrid did not win on the project's dev data:
it finds the right passage first more often for HaluEval (+3.2 points at
rank 1) and the enwiki leads (+5.8), less often for FELM segments (-3.4), and
``ceg eval`` with the offline judge lost 1.9 points of FELM balanced accuracy
for 0.2 on HaluEval (``benchmarks/search/retrieval_recall.py``, ``benchmarks/judges/quality.py``).

Every hit keeps its cosine as ``score`` whatever the method, so the CEG
threshold rule (``retrieve.apply_threshold``) keeps its meaning.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import IndexLoadError, UsageError
from ...lang.codes import ENGLISH
from ...types import Chunk
from ..indexdir import sampled_digest
from ..layout import LEXICAL_DIR, LEXICAL_ENGINES, Hit, embed_text
from .lexical_tantivy import LOCK_FILES
from .lexlang import (
    TOKENIZER,
    corpus_tokens,
    import_bm25s,
    is_legacy,
    language_counts,
    queries_tokens,
    tokenizer_entry,
)

if TYPE_CHECKING:
    import numpy as np

RETRIEVAL_MODES = ("dense", "lexical", "hybrid")
DEFAULT_RETRIEVAL = "dense"
#: Candidates taken from each method before fusion (at least top-k).
FUSION_DEPTH = 50
#: Weight of the dense score in the fused score; the lexical score gets the rest.
DENSE_WEIGHT = 0.5
#: bm25s's defaults, recorded in meta.json. The tokenizer is English's (lowercase,
#: words of two or more characters, English stop words removed, no stemming) for
#: an English index, each passage's language's otherwise (``lexlang``).
BM25_PARAMS = {"method": "lucene", "k1": 1.5, "b": 0.75}



# --------------------------------------------------------------------------- building


def lexical_engine(requested: str, passages: int) -> str:
    """The engine a build writes the lexical part with: bm25s up to ``LEXICAL_AUTO_MAX``
    passages (rankings as before), tantivy beyond (streamed, bounded memory)."""
    if requested not in LEXICAL_ENGINES:
        raise UsageError(f"--lexical-engine {requested}: choose one of "
                         f"{', '.join(LEXICAL_ENGINES)}")
    if requested != "auto":
        return requested
    return "tantivy" if passages > LEXICAL_AUTO_MAX else "bm25s"


def append_engine(requested: str, meta: dict[str, Any] | None) -> str:
    """The engine an ``--append`` to the index of ``meta`` writes with: the one asked for,
    else the index's own tantivy (``auto`` would fall back to bm25s below its bound and
    change the index's rankings and memory); an index on bm25s stays on ``auto``'s rule."""
    lexical = (meta or {}).get("lexical") or {}
    if requested == "auto" and lexical.get("library") == "tantivy":
        return "tantivy"
    return requested


def build_lexical(
    db: sqlite3.Connection, index_dir: Path, embed_mode: str, engine: str = "auto"
) -> dict[str, Any]:
    """Index every passage of the chunk store ``db`` into ``index_dir/lexical``.

    bm25s cannot add to an index, so an ``--append`` rebuilds it from all the
    passages (about 0.4 s per 5,800 passages on 2 cores; 400 s, 3.9 GB of
    memory and 0.5 GB on disk per million: ``benchmarks/search/lexical_scale.py``);
    an ``--update`` keeps it in step instead (``bm25_update``) from the term counts
    this writes beside bm25s's files (``bm25_counts.COUNTS_FILE``), and calls this
    only where it cannot;
    past ``LEXICAL_AUTO_MAX`` passages (or with ``engine="tantivy"``) tantivy
    writes it streamed, in bounded memory (``lexical_tantivy``).
    Returns the ``lexical`` entry of meta.json.
    """
    (passages,) = db.execute("SELECT count(*) FROM chunks").fetchone()
    if lexical_engine(engine, int(passages)) == "tantivy":
        from . import lexical_tantivy

        entry = lexical_tantivy.build(db, index_dir, embed_mode)
        return {"files": lexical_files(index_dir), **entry}
    bm25s = import_bm25s()
    texts: list[str] = []
    languages: list[str | None] = []
    for title, text, language in db.execute(
        "SELECT title, text, language FROM chunks ORDER BY id"
    ):
        texts.append(embed_text(Chunk("", title, 0, 0, 0, text), embed_mode))
        languages.append(language)
    tokenizer = tokenizer_entry(language_counts(languages))
    if is_legacy(tokenizer):
        tokens = bm25s.tokenize(texts, **TOKENIZER, show_progress=False)
    else:
        tokens = corpus_tokens(texts, [lang or ENGLISH for lang in languages])
    retriever = bm25s.BM25(**BM25_PARAMS)
    retriever.index(tokens, show_progress=False)
    out = index_dir / LEXICAL_DIR
    shutil.rmtree(out, ignore_errors=True)
    retriever.save(str(out), show_progress=False)
    from .bm25_counts import counts_of_tokens, save_counts

    # The term counts an update needs to score the part again without reading it.
    counted = counts_of_tokens(tokens.ids, retriever.scores)
    if counted is not None:
        save_counts(out, *counted)
    return {
        "files": lexical_files(index_dir),
        "library": "bm25s",
        "version": bm25s.__version__,
        "dir": LEXICAL_DIR,
        "parameters": dict(BM25_PARAMS),
        "tokenizer": tokenizer,
        "text": embed_mode,
        "passages": len(texts),
    }


def lexical_files(index_dir: Path) -> dict[str, str]:
    """Sampled digest of each file of ``index_dir/lexical`` (recorded in meta.json),
    tantivy's empty lock files aside: a copy without them is whole."""
    out = index_dir / LEXICAL_DIR
    return {p.name: sampled_digest(p) for p in sorted(out.iterdir())
            if p.is_file() and p.name not in LOCK_FILES}


def lexical_problem(meta: Mapping[str, Any], path: Path) -> str | None:
    """Why the lexical part of the index at ``path`` cannot be used, or None.

    Its files must be the ones its build wrote (their sampled digests, for
    indexes built since they are recorded), so that a ``lexical/`` copied from
    another index is never searched as this one's.
    """
    entry = meta.get("lexical")
    if entry is None:
        return None
    folder = path / LEXICAL_DIR
    if not folder.is_dir():
        return f"{LEXICAL_DIR}/ is missing"
    recorded = entry.get("files")
    if recorded is not None:
        try:
            found = lexical_files(path)
        except OSError as exc:
            return f"{LEXICAL_DIR}/ is unreadable ({exc})"
        # Indexes built before LOCK_FILES recorded the lock files too: not compared.
        if found != {k: v for k, v in recorded.items() if k not in LOCK_FILES}:
            return (
                f"{LEXICAL_DIR}/ is not the BM25 index this index was built with (its files "
                "differ from those meta.json records: copied from another index, or damaged)"
            )
    if entry.get("passages") != meta["counts"]["chunks"]:
        return (
            f"{LEXICAL_DIR}/ holds {entry.get('passages')} passages, the chunk store "
            f"{meta['counts']['chunks']}"
        )
    return None


def check_lexical(meta: Mapping[str, Any], path: Path, index: Path | None = None) -> None:
    """Fail, saying how to repair it, when the lexical part cannot be used.

    ``path`` holds the part (an updated index's generation folder), ``index`` is the
    index (``path`` when None). Checked when lexical or hybrid search loads the part,
    not when the index opens: dense search needs nothing from ``lexical/``.
    """
    problem = lexical_problem(meta, path)
    if problem is not None:
        index = index or path
        where = "" if path == index else f" ({path.name}/)"
        raise IndexLoadError(
            f"index at {index}{where}: {problem}; rebuild the lexical part without "
            f"re-embedding: {add_lexical_hint(index, meta)}"
        )


def add_lexical_hint(path: Path, meta: Mapping[str, Any]) -> str:
    """How to give a dense-only index its lexical part without re-embedding: an
    ``--append`` adds it to an index as a full build wrote it, an ``--update`` to one
    updated in place (which refuses ``--append``)."""
    sources = " ".join(str(s["path"]) for s in meta.get("sources", []))
    how = "--update" if isinstance(meta.get("generation"), dict) else "--append"
    return f"ceg index build {sources} {how} --lexical --index {path}"


#: Passages up to which a build makes the lexical part unless told (``--lexical``,
#: bm25s builds in memory, about 3.9 GB per million passages
#: (``benchmarks/search/lexical_scale.py``): this many take about 8 GB, a third of the
#: project's 24 GB machine. Beyond it tantivy builds the lexical part
#: (``lexical_engine``); builds before that left it out.
LEXICAL_AUTO_MAX = 2_000_000
#: Bytes of memory bm25s takes to build, per passage (measured at one million).
LEXICAL_BUILD_BYTES = 3900


def want_lexical(
    requested: bool | None, passages: int, old_meta: Mapping[str, Any] | None = None
) -> tuple[bool, str]:
    """Whether a build makes the lexical part, and why (``lexical_skipped`` in meta.json).

    ``requested`` None is ``auto``: by size, unless an earlier build of this
    index was told ``--no-lexical``, which stays on ``--append``.
    """
    if requested is not None:
        return requested, "user: --no-lexical"
    if old_meta is not None and str(old_meta.get("lexical_skipped", "")).startswith("user"):
        return False, str(old_meta["lexical_skipped"])
    # At any size: past LEXICAL_AUTO_MAX passages tantivy builds it (lexical_engine).
    return True, ""


def skipped_reason(meta: Mapping[str, Any]) -> str:
    """Why an index has no lexical part, in words (``lexical_skipped``)."""
    skipped = str(meta.get("lexical_skipped") or "")
    if skipped.startswith("user"):
        return "built with --no-lexical"
    if skipped.startswith("auto"):
        return f"left out for its size: {skipped.removeprefix('auto: ')}"
    return "built before ceg made one"


def open_lexical(path: Path, passages: int | None, entry: Mapping[str, Any],
                 max_terms: int | None = None) -> Any:
    """The lexical part at ``path`` as meta.json's ``lexical`` entry says it was built:
    bm25s (``LexicalIndex``; every index before tantivy) or tantivy, which searches
    only each query's ``max_terms`` rarest terms where given."""
    if entry.get("library") == "tantivy":
        from .lexical_tantivy import TantivyLexical

        return TantivyLexical(path, passages, entry.get("tokenizer"), max_terms=max_terms)
    return LexicalIndex(path, passages, entry.get("tokenizer"))


class LexicalIndex:
    """A loaded bm25s index (memory-mapped): BM25 scores of every passage."""

    def __init__(
        self, path: Path, passages: int | None = None,
        tokenizer: Mapping[str, Any] | None = None,
    ) -> None:
        bm25s = import_bm25s()
        #: meta.json's ``lexical.tokenizer``: how the passages were read, and so the query.
        self.tokenizer = dict(tokenizer) if tokenizer is not None else dict(TOKENIZER)
        try:
            self._bm25 = bm25s.BM25.load(str(path), mmap=True, show_progress=False)
            held = int(self._bm25.scores["num_docs"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexLoadError(f"{path}: unreadable BM25 index ({exc})") from exc
        if passages is not None and held != passages:
            raise IndexLoadError(
                f"{path}: the BM25 index holds {held} passages, the index {passages} (another "
                "index's BM25 index, or a damaged one)"
            )

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every passage for ``query`` (zeros when no word is known)."""
        return next(self.scores_many([query]))

    def scores_many(self, queries: Sequence[str]) -> Iterator[np.ndarray]:
        """BM25 scores of every passage for each query in turn, the queries tokenized
        together (``lexlang.queries_tokens``: one bm25s call for an English index); each
        array is yielded (and can be dropped) before the next is made.

        The scores themselves are one array a query: a batch shares no work there
        (a sparse matrix product over 80 queries took 5 times as long as filling
        the arrays one by one, at 1 M passages).
        """
        import numpy as np

        for words in queries_tokens(queries, self.tokenizer):
            ids = self._bm25.get_tokens_ids(words)
            if not ids:
                yield np.zeros(self._bm25.scores["num_docs"], dtype=np.float32)
            else:
                yield np.asarray(self._bm25.get_scores_from_ids(ids))


# --------------------------------------------------------------------------- searching


class SearchedIndex(Protocol):
    """What lexical and hybrid search need of an opened index (``store.Index``)."""

    path: Path
    meta: dict[str, Any]

    @property
    def has_lexical(self) -> bool: ...

    def lexical(self) -> LexicalIndex: ...

    def dense_candidates(self, vectors: np.ndarray, k: int) -> list[list[tuple[int, float]]]: ...

    def cosines_many(
        self, vectors: np.ndarray, ids: Sequence[Sequence[int]]
    ) -> list[dict[int, float]]: ...

    def chunks(self, ids: Iterable[int]) -> dict[int, Chunk]: ...


def check_method(method: str) -> None:
    if method not in RETRIEVAL_MODES:
        raise UsageError(f"--retrieval {method}: choose one of {', '.join(RETRIEVAL_MODES)}")


def resolve_method(
    index: SearchedIndex, method: str, given: bool = True
) -> tuple[str, str | None]:
    """The method a run with ``method`` on ``index`` uses, and a warning, if any.

    ``hybrid`` on an index without a lexical part falls back to ``dense`` with a
    warning; ``lexical`` there is a usage error. On an index without vectors
    (``lexonly``) every method is ``lexical``: the default (``given`` False) without
    a word (the run's first line says it), ``dense`` or ``hybrid`` asked for refused.
    """
    check_method(method)
    if getattr(index, "lexical_only", False):
        if method != "lexical" and given:
            from .lexonly import refuse_method

            raise refuse_method(index.path, method)
        return "lexical", None
    if method == "dense" or index.has_lexical:
        return method, None
    how = add_lexical_hint(index.path, index.meta)
    if method == "lexical":
        raise UsageError(
            f"--retrieval lexical: index at {index.path} has no lexical part "
            f"({skipped_reason(index.meta)}); add it without re-embedding: {how}"
        )
    return "dense", (
        f"index at {index.path} has no lexical part: retrieval is dense only; "
        f"add it without re-embedding: {how}"
    )


def min_max(values: Sequence[float]) -> list[float]:
    """Scale to [0, 1]; equal values all become 0 (they tell the candidates nothing)."""
    low, high = min(values), max(values)
    if high <= low:
        return [0.0 for _ in values]
    return [(v - low) / (high - low) for v in values]


def fuse(dense: Mapping[int, float], lexical: Mapping[int, float]) -> list[tuple[int, float]]:
    """Passage ids by fused score, best first, with that score.

    ``dense`` and ``lexical`` map every candidate (the union) to each method's
    score; ties go to the higher cosine, then the lower id.
    """
    ids = sorted(dense)
    if set(ids) != set(lexical):
        raise ValueError("fuse: both methods must score every candidate")
    if not ids:
        return []
    d = min_max([dense[i] for i in ids])
    lx = min_max([lexical[i] for i in ids])
    fused = {i: DENSE_WEIGHT * a + (1.0 - DENSE_WEIGHT) * b for i, a, b in zip(ids, d, lx)}
    order = sorted(ids, key=lambda i: (-fused[i], -dense[i], i))
    return [(i, fused[i]) for i in order]


def search(
    index: SearchedIndex, queries: Sequence[str], vectors: np.ndarray | None, k: int,
    method: str,
) -> list[list[Hit]]:
    """The top ``k`` passages of each query by ``lexical`` or ``hybrid`` retrieval.

    ``vectors`` None (``lexical`` on an index without vectors): the hits' scores are
    None, there being no cosine, and each carries its BM25 score (``Hit.bm25``).

    The batch is searched together: one dense search (hybrid), the queries
    tokenized in one call, one read of the stored vectors of every candidate
    that needs its cosine, one read of the passages. Each query's result is
    the one it gets searched alone.
    """
    lexical = index.lexical()
    depth = max(FUSION_DEPTH, k)
    dense_lists = (index.dense_candidates(vectors, depth)
                   if method == "hybrid" and vectors is not None else None)
    lex_lists: list[list[int]] = []
    bm25_of: list[dict[int, float]] = []  # each query's BM25 score of its candidates
    if hasattr(lexical, "ranked"):  # tantivy: its top list, and the dense candidates scored
        also = None if dense_lists is None else [[i for i, _ in row] for row in dense_lists]
        for lex_ids, scores in lexical.ranked(queries, depth, also):
            lex_lists.append(lex_ids)
            bm25_of.append(scores)
    else:
        for n, bm25 in enumerate(lexical.scores_many(queries)):
            lex_ids = [int(i) for i in _top(bm25, depth) if bm25[i] > 0]  # no query word
            lex_lists.append(lex_ids)
            union = lex_ids if dense_lists is None else [i for i, _ in dense_lists[n]] + lex_ids
            bm25_of.append({i: float(bm25[i]) for i in union})
    ranked: list[list[tuple[int, float | None]]]
    if vectors is None:  # an index without vectors (lexonly): no cosine, its BM25 instead
        chunks = index.chunks(i for ids in lex_lists for i in ids[:k])
        return [[Hit(i, None, chunks[i], scores[i]) for i in ids[:k]]
                for ids, scores in zip(lex_lists, bm25_of)]
    elif dense_lists is None:
        cosines = index.cosines_many(vectors, [ids[:k] for ids in lex_lists])
        ranked = [[(i, cos[i]) for i in ids[:k]] for ids, cos in zip(lex_lists, cosines)]
    else:
        missing = []
        for ids, dense_list in zip(lex_lists, dense_lists):
            have = {i for i, _ in dense_list}
            missing.append([i for i in ids if i not in have])
        ranked = []
        for dense_list, extra, scores in zip(dense_lists, index.cosines_many(vectors, missing),
                                             bm25_of):
            dense = dict(dense_list) | extra
            order = fuse(dense, {i: scores[i] for i in dense})
            ranked.append([(i, dense[i]) for i, _ in order[:k]])
    chunks = index.chunks(i for row in ranked for i, _ in row)
    return [[Hit(i, s, chunks[i]) for i, s in row] for row in ranked]


def _top(scores: np.ndarray, depth: int) -> np.ndarray:
    """Positions of the ``depth`` highest scores, best first (ties: lower id first)."""
    import numpy as np

    depth = min(depth, len(scores))
    if depth == 0:
        return np.zeros(0, dtype=np.int64)
    pool = _pool(scores, depth)
    return pool[np.lexsort((pool, -scores[pool]))[:depth]]


def _pool(scores: np.ndarray, depth: int) -> np.ndarray:
    """Positions, ascending, that surely hold the ``depth`` highest scores and their ties.

    Those at or above a cut that at least ``depth`` scores reach (the cut is
    lowered from half the best score until they do): the ``depth``-th best is
    then at or above it too, so the best are all kept, ties at the cut
    included. When fewer than ``depth`` scores are positive: those, then the
    lowest positions among the zeros. Sorting or partitioning the whole array
    instead costs what its size does, and most of it is zeros (passages
    without a query word): ``argpartition`` over 1 M BM25 scores took 70-90 ms,
    the cut 3-4 ms (``benchmarks/search/lexical_scale.py``).
    """
    import numpy as np

    high = float(scores.max())
    if float(scores.min()) < 0:
        return np.arange(len(scores))
    cut = high / 2
    for _ in range(8):
        if cut <= 0:
            break
        pool = np.flatnonzero(scores >= cut)
        if len(pool) >= depth:
            return pool
        cut /= 4
    positive = np.flatnonzero(scores > 0)
    if len(positive) >= depth:
        return positive
    return np.union1d(positive, np.flatnonzero(scores == 0)[: depth - len(positive)])
