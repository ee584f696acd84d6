"""The lexical (BM25) part on tantivy, for indexes past what bm25s builds in memory.

bm25s holds the whole term matrix while it builds (about 3.9 GB per million
passages), so a build beyond ``LEXICAL_AUTO_MAX`` passages used to leave the
lexical part out: exactly where the corpus is Wikipedia-sized and where BM25
finds a claim's passage first more often than dense search. tantivy (a
Lucene-class engine, Rust, abi3 wheels) writes its inverted index in segments
with a bounded heap, so a build streams the chunk store in batches:

- one field ``terms`` of ceg's own terms (``lexlang``: the same code that reads
  queries, so build and search agree in every language), joined by spaces and
  split back by tantivy's ``whitespace`` tokenizer; frequencies only, no
  positions, no stored text (ceg's chunk store keeps the passage);
- one integer field ``id``, the passage's row id (== its FAISS id), stored and
  indexed, so a hit names its passage and hybrid search can score given ids;
- memory: the writer's heap, ``HEAP_BYTES`` (tantivy flushes a segment when it
  fills), plus one batch of passages and their terms: bounded at any size;
- a commit every ``COMMIT_EVERY`` passages: a build stopped in the lexical pass
  (Ctrl-C, a kill) and run again with ``--resume`` goes on after the last commit
  (the passages are added in id order, so what a commit holds is the store's
  first passages), when ``PROGRESS_FILE`` says the part was being written with
  the same terms, text and passages; otherwise it starts the part over.

Readers write nothing into the index and take no lock, so a part on read-only
media (a Docker layer, read-only NFS, a CI cache) opens, also for another user.
tantivy itself takes its meta lock (a file it creates and opens for writing,
then ``flock``s) whenever a reader loads segments, and tantivy-py has no
read-only open (quickwit-oss/tantivy#557): a reader opens a private folder of
symbolic links to the part's files instead, in the temporary directory, where
tantivy's lock files land (``open_read_only``). The build makes the files it
wrote readable as the umask says: tantivy writes ``meta.json`` and
``.managed.json`` as 0600 whatever the umask (``_as_umask_says``).

Scores are tantivy's BM25 (Lucene's formula, k1 1.2, b 0.75, document lengths
in Lucene's one-byte norms); bm25s, kept for smaller indexes and every index
built before, uses Lucene's formula with k1 1.5. Both are recorded in meta.json.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import BackendError, IndexLoadError
from ...lang.codes import ENGLISH
from ...types import Chunk
from ..indexdir import write_json
from ..layout import LEXICAL_DIR, embed_text
from .lexlang import ANALYZER, corpus_terms, import_bm25s, is_legacy, queries_tokens
from .lexlang import tokenizer_entry as _tokenizer_entry

LIBRARY = "tantivy"
#: tantivy's BM25 parameters (fixed in tantivy: Lucene's defaults).
PARAMETERS = {"method": "lucene", "k1": 1.2, "b": 0.75}
#: The writer's memory budget: tantivy writes a segment each time it fills.
HEAP_BYTES = 256 * 1024 * 1024
#: Passages read from the chunk store, tokenized and handed to the writer at a time.
BATCH = 20_000
#: Passages between two commits: what a stopped build's --resume does again, at most.
COMMIT_EVERY = 500_000
#: In ``lexical/`` while it is written: what it is being written with (removed at the end).
PROGRESS_FILE = "ceg-progress.json"
#: tantivy's field names.
ID_FIELD, TERMS_FIELD = "id", "terms"
#: tantivy's empty lock files: not part of the index (never recorded in meta.json's
#: digests, never linked into a reader's folder: ``open_read_only``).
LOCK_FILES = frozenset({".tantivy-meta.lock", ".tantivy-writer.lock"})


def import_tantivy() -> Any:
    try:
        import tantivy
    except ImportError as exc:  # a main dependency: a broken install
        raise IndexLoadError(
            "the lexical part of this index needs the tantivy package: pip install tantivy"
        ) from exc
    return tantivy


def schema() -> Any:
    tantivy = import_tantivy()
    builder = tantivy.SchemaBuilder()
    builder.add_integer_field(ID_FIELD, stored=True, indexed=True, fast=True)
    builder.add_text_field(TERMS_FIELD, stored=False, tokenizer_name="whitespace",
                           index_option="freq")
    return builder.build()


def version() -> str:
    from importlib.metadata import version as dist_version

    return dist_version("tantivy")


def build(
    db: sqlite3.Connection, index_dir: Path, embed_mode: str,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Index every passage of the chunk store ``db`` into ``index_dir/lexical`` with
    tantivy, streamed in batches; the ``lexical`` entry of meta.json."""
    tantivy = import_tantivy()
    counts: Counter[str] = Counter()
    for language, n in db.execute("SELECT language, count(*) FROM chunks GROUP BY language"):
        counts[language or ENGLISH] += int(n)
    tokenizer = _tokenizer_entry(counts)
    out = index_dir / LEXICAL_DIR
    plan = {"tokenizer": tokenizer, "text": embed_mode, "passages": sum(counts.values()),
            "library": LIBRARY, "version": version()}
    resumed = _committed(out, plan, db)
    if resumed is None:
        # Nothing to go on from (a new build, or a part written with other terms,
        # text or passages): start the part over.
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        write_json(out / PROGRESS_FILE, plan)
        index = tantivy.Index(schema(), path=str(out))
        passages, last = 0, -1
    else:
        index, passages, last = resumed
    try:
        writer = index.writer(heap_size=HEAP_BYTES, num_threads=1)
    except ValueError as exc:  # tantivy's LockBusy, and its other refusals to open
        raise BackendError(
            f"{out}: tantivy cannot open its writer ({' '.join(str(exc).split())[:300]}); "
            "another ceg build of this index may be running: wait for it, or retry"
        ) from None
    try:
        if resumed is not None:
            writer.garbage_collect_files()  # the stopped writer's uncommitted segments
        Document = tantivy.Document
        pending = 0
        for rows in _batches(db, last):
            ids = [int(r[0]) for r in rows]
            texts = [embed_text(Chunk("", r[1], 0, 0, 0, r[2]), embed_mode) for r in rows]
            terms = passage_terms(texts, [r[3] or ENGLISH for r in rows], tokenizer)
            for row_id, words in zip(ids, terms):
                # The integer field takes a Python int: any other type panics the writer.
                writer.add_document(Document(**{ID_FIELD: row_id,
                                                TERMS_FIELD: " ".join(words)}))
            passages += len(ids)
            pending += len(ids)
            if pending >= COMMIT_EVERY:
                writer.commit()
                pending = 0
            if on_batch is not None:
                on_batch(len(ids))
        writer.commit()
    except BaseException as exc:
        # The writer holds the part's lock until it is dropped, and a traceback keeps it
        # alive: released now (its uncommitted documents dropped), so a retry in this
        # process (a notebook, --resume after a caught error) can open one.
        try:
            writer.rollback()
        finally:
            writer.wait_merging_threads()  # consumes the writer: the lock goes with it
        if isinstance(exc, ValueError):  # tantivy's own errors: one line, exit 3
            raise BackendError(f"{out}: tantivy failed writing the lexical part "
                               f"({' '.join(str(exc).split())[:300]})") from exc
        raise
    writer.wait_merging_threads()
    (out / PROGRESS_FILE).unlink()
    _as_umask_says(out)
    return {
        "library": LIBRARY,
        "version": version(),
        "dir": LEXICAL_DIR,
        "parameters": dict(PARAMETERS),
        "tokenizer": tokenizer,
        "text": embed_mode,
        "passages": passages,
        "heap_bytes": HEAP_BYTES,
    }


def _as_umask_says(folder: Path) -> None:
    """Give every file in ``folder`` the mode a new file gets under the process's umask
    (0644 under 022), so that an index built by a CI or service account is readable
    by the users the umask lets read it: tantivy writes some files 0600."""
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    for file in folder.iterdir():
        if file.is_file() and not file.is_symlink():
            os.chmod(file, 0o666 & ~mask)


def open_read_only(path: Path) -> tuple[Any, tempfile.TemporaryDirectory[str] | None]:
    """The tantivy index at ``path``, opened without writing to ``path``; and the
    private folder it is read through (removed when the reader goes, or at exit).

    tantivy creates and locks ``.tantivy-meta.lock`` in the folder it opens, even to
    read: it opens a new temporary folder holding a symbolic link to each of the
    part's files, so the lock is taken there. Where no such folder can be made
    (or on Windows) the part is opened in place, as before.
    """
    tantivy = import_tantivy()
    if sys.platform == "win32":
        return tantivy.Index.open(str(path)), None
    try:
        shadow = tempfile.TemporaryDirectory(prefix="ceg-tantivy-")
    except OSError:
        return tantivy.Index.open(str(path)), None
    root = Path(shadow.name)
    try:
        for file in Path(path).iterdir():
            if file.name not in LOCK_FILES:
                (root / file.name).symlink_to(os.path.abspath(file))
        return tantivy.Index.open(str(root)), shadow
    except BaseException:
        shadow.cleanup()  # links only: the part's own files are not touched
        raise


def _committed(out: Path, plan: Mapping[str, Any],
               db: sqlite3.Connection) -> tuple[Any, int, int] | None:
    """A part at ``out`` that a stopped build was writing as ``plan`` says, opened:
    (the index, the passages its last commit holds, the last of their ids); None when
    there is none, or it was written otherwise, or its passages are not the store's
    first ones."""
    tantivy = import_tantivy()
    try:
        # Compared as JSON reads back (a tuple in the tokenizer's entry is a list there).
        wanted = json.loads(json.dumps(plan))
        if json.loads((out / PROGRESS_FILE).read_text(encoding="utf-8")) != wanted:
            return None
        index = tantivy.Index.open(str(out))
        searcher = index.searcher()
        held = int(searcher.num_docs)
        if held == 0:
            return None
        top = searcher.search(tantivy.Query.all_query(), 1, count=False,
                              order_by_field=ID_FIELD, order=tantivy.Order.Desc).hits
    except (OSError, ValueError):
        return None
    row = db.execute("SELECT id FROM chunks ORDER BY id LIMIT 1 OFFSET ?", (held - 1,)).fetchone()
    if row is None or not top or int(top[0][0]) != int(row[0]):
        return None
    return index, held, int(row[0])


def _batches(db: sqlite3.Connection, last: int = -1) -> Iterator[list[tuple[Any, ...]]]:
    """The chunk store's passages after id ``last`` in id order, ``BATCH`` at a time
    (keyset paging: each query starts where the last ended, so memory holds one batch)."""
    while True:
        rows = db.execute(
            "SELECT id, title, text, language FROM chunks WHERE id > ? ORDER BY id LIMIT ?",
            (last, BATCH),
        ).fetchall()
        if not rows:
            return
        yield rows
        last = int(rows[-1][0])


def passage_terms(texts: Sequence[str], languages: Sequence[str],
                  tokenizer: Mapping[str, Any]) -> list[list[str]]:
    """The terms of each passage, as bm25s's index of the same passages would hold them."""
    if is_legacy(tokenizer):
        bm25s = import_bm25s()
        from .lexlang import TOKENIZER

        return [list(words) for words in bm25s.tokenize(list(texts), **TOKENIZER,
                                                         return_ids=False, show_progress=False)]
    assert tokenizer.get("analyzer") == ANALYZER
    return corpus_terms(texts, languages)


class TantivyLexical:
    """A tantivy lexical part, opened: the top passages of a query, and the BM25 score
    of given passages (hybrid search's candidates that BM25 did not rank).

    A query is a boolean query of one SHOULD term query per distinct term, a term
    the query holds n times boosted n times: bm25s (and so ceg's indexes before
    tantivy) adds a term's score once per occurrence in the query, and the two must
    rank alike. tantivy-py collects every search's top hits through a multi-collector,
    which scores every passage holding a query term (no block-max WAND): the time of
    a query grows with the postings of its terms. Searched with ``count=False`` (no
    count of the matches to keep) and the ids read from the fast field, not the doc
    store (``benchmarks/search/lexical_scale.py``, docs/measurements.md).

    ``max_terms`` (None: every term; ``store.Index`` gives 10 past 2,000,000
    passages unless told otherwise, since it changes results): only the query's
    ``max_terms`` rarest terms that some passage holds (fewest passages, so highest
    IDF; ties: first in the query; a term in no passage, a misspelling, is skipped
    first) are searched and scored, top list and hybrid candidates alike. Common
    terms hold the longest posting lists and the smallest IDF; what dropping them
    costs in recall is measured in docs/measurements.md.
    """

    def __init__(self, path: Path, passages: int | None = None,
                 tokenizer: Mapping[str, Any] | None = None,
                 max_terms: int | None = None) -> None:
        tantivy = import_tantivy()
        if max_terms is not None and max_terms < 1:
            raise ValueError(f"max_terms {max_terms}: at least 1 (or None: every term)")
        self.tokenizer = dict(tokenizer) if tokenizer is not None else None
        self.max_terms = max_terms
        try:
            # Read through a folder of links: tantivy locks the folder it opens.
            self._index, self._links = open_read_only(Path(path))
            self._searcher = self._index.searcher()
            held = int(self._searcher.num_docs)
        except (OSError, ValueError) as exc:
            raise IndexLoadError(f"{path}: unreadable tantivy index ({exc})") from exc
        if passages is not None and held != passages:
            raise IndexLoadError(
                f"{path}: the BM25 index holds {held} passages, the index {passages} (another "
                "index's BM25 index, or a damaged one)"
            )
        self._schema = self._index.schema
        self._tantivy = tantivy

    def terms(self, words: Sequence[str]) -> Counter[str]:
        """The terms searched for the query terms ``words``, each with the times the
        query holds it: all of them, or with ``max_terms`` the rarest."""
        counts = Counter(words)
        if self.max_terms is None or len(counts) <= self.max_terms:
            return counts
        freq = {w: int(self._searcher.doc_freq(TERMS_FIELD, w)) for w in counts}
        # A term in no passage (a misspelling: "qestion") is the "rarest" of all and
        # finds nothing: it must not take the place of a term that finds something.
        held = [w for w in counts if freq[w] > 0]
        # A stable sort of the terms in query order: first occurrence breaks ties.
        kept = set(sorted(held, key=freq.__getitem__)[: self.max_terms])
        return Counter({w: n for w, n in counts.items() if w in kept})

    def _query(self, terms: Mapping[str, int]) -> Any:
        Query, Occur = self._tantivy.Query, self._tantivy.Occur
        clauses = []
        for word, n in terms.items():
            query = Query.term_query(self._schema, TERMS_FIELD, word)
            # bm25s scores a word once per time the query holds it.
            clauses.append((Occur.Should, query if n == 1 else Query.boost_query(query, float(n))))
        return Query.boolean_query(clauses)

    def _hits(self, query: Any, limit: int) -> list[tuple[int, float]]:
        found = self._searcher.search(query, limit, count=False).hits
        ids = self._searcher.fast_field_values(ID_FIELD, [address for _, address in found])
        return [(int(i), float(score)) for (score, _), i in zip(found, ids)]

    def ranked(
        self, queries: Sequence[str], depth: int, also: Sequence[Sequence[int]] | None = None,
    ) -> list[tuple[list[int], dict[int, float]]]:
        """For each query: the ids of its top ``depth`` passages with a query term, best
        first (ties: lower id first), and the BM25 score of those and of ``also[n]``."""
        out = []
        for n, words in enumerate(queries_tokens(queries, self.tokenizer)):
            terms = self.terms(words)
            if not terms:
                top: list[tuple[int, float]] = []
            else:
                top = self._hits(self._query(terms), depth)
            top = sorted((h for h in top if h[1] > 0), key=lambda h: (-h[1], h[0]))
            scores = dict(top)
            wanted = [i for i in (also[n] if also is not None else ()) if i not in scores]
            if wanted and terms:
                scores.update(self._scores_of(terms, wanted))
            for i in wanted:
                scores.setdefault(i, 0.0)
            out.append(([i for i, _ in top], scores))
        return out

    def scores_of(self, words: Sequence[str], ids: Sequence[int]) -> dict[int, float]:
        """BM25 of passages ``ids`` for the query terms ``words`` (0 without a term)."""
        return self._scores_of(self.terms(words), ids)

    def _scores_of(self, terms: Mapping[str, int], ids: Sequence[int]) -> dict[int, float]:
        Query, Occur = self._tantivy.Query, self._tantivy.Occur
        only = Query.const_score_query(
            Query.term_set_query(self._schema, ID_FIELD, [int(i) for i in ids]), 0.0)
        query = Query.boolean_query([(Occur.Must, only), (Occur.Should, self._query(terms))])
        return dict(self._hits(query, len(ids)))
