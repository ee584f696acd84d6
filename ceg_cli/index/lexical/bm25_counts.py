"""The bm25s lexical part kept in step by an update, without reading the index again.

bm25s stores only each (term, passage) pair's BM25 score, which an update cannot
adjust: every score depends on the number of passages, their average length and
each term's document frequency, all of which an update changes. So a full build
also writes ``COUNTS_FILE`` beside bm25s's files: each stored pair's term count,
in bm25s's own order (its CSC matrix: ``indptr.csc.index.npy`` per term,
``indices.csc.index.npy`` the passage of each pair), and each passage's length
in terms. bm25s's ``vocab.index.json`` is the vocabulary (term -> column).

An update (``bm25_update.update_lexical``) then keeps the pairs of the passages that stay,
tokenizes only the passages it adds, drops the terms no live passage holds, and
scores every pair again in numpy with bm25s's "lucene" formula, in bm25s's
operation order and dtypes (``score_pairs``), so that the part it saves is scored as
a fresh build's is, and ``bm25s.BM25.load`` reads it as any other. The cost is
the new passages' tokenizing and a few linear passes over the stored pairs; no
sort of them and no passage of the index read again.

Kept pairs keep their order (a kept passage's rows and a kept term's columns
only move down), the new passages' pairs go after them in each column, new
terms after the kept ones: the vocabulary's ids differ from a fresh build's
(bm25s numbers terms by first appearance), the set of terms and every score do
not (``tests/test_lexical_update.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: ceg's side file in ``lexical/``: term counts aligned with bm25s's stored pairs.
COUNTS_FILE = "ceg_counts.npz"
#: Its layout's version (a key of the file): another layout is not read, the part rebuilt.
COUNTS_VERSION = 1
#: bm25s versions whose scoring ``score_pairs`` reproduces bit for bit (checked by
#: ``tests/test_lexical_update.py``): under another, an update writes the part again
#: from every passage, as a fresh build would score it, until this says otherwise.
SCORED_AS = ("0.3.16",)


def save_counts(folder: Path, counts: np.ndarray, lengths: np.ndarray) -> None:
    """Write ``COUNTS_FILE``: ``counts`` (int32, one per stored pair, bm25s's order)
    and ``lengths`` (int32, terms of each passage, in bm25s's document order)."""
    import numpy as np

    with open(folder / COUNTS_FILE, "wb") as f:
        np.savez(f, version=np.int32(COUNTS_VERSION), counts=counts.astype(np.int32),
                 lengths=lengths.astype(np.int32))


def counts_of_tokens(ids: Sequence[Sequence[int]], scores: Mapping[str, Any]) -> tuple[
        np.ndarray, np.ndarray] | None:
    """The counts and lengths of a full build's token ids (bm25s's ``Tokenized.ids``),
    aligned with the ``scores`` bm25s built from them (sorted by term, then passage,
    as bm25s's CSC matrix is); None when they do not line up (a bm25s that orders its
    matrix otherwise): the part is then written without them, and updated by a full
    rebuild."""
    from itertools import chain

    import numpy as np

    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    n = len(ids)
    flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
    keys = np.sort(flat * max(n, 1) + np.repeat(np.arange(n, dtype=np.int64), lengths))
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]])) if len(keys) \
        else np.zeros(0, dtype=np.int64)
    counts = np.diff(np.append(starts, len(keys)))
    docs = keys[starts] % max(n, 1)
    if len(docs) != len(scores["indices"]) or not np.array_equal(docs, scores["indices"]):
        return None
    return counts.astype(np.int32), lengths.astype(np.int32)


def score_pairs(indptr: np.ndarray, rows: np.ndarray, counts: np.ndarray, lengths: np.ndarray,
           k1: float, b: float) -> np.ndarray:
    """bm25s 0.3.16's lucene score of each stored pair (float32), computed as its
    ``build_index_from_ids`` does: the average length a float64 mean of the int64
    lengths; idf ``math.log(1 + (N - df + 0.5) / (df + 0.5))`` stored as float32;
    ``tf / (k1 * ((1 - b) + b * l_d / l_avg) + tf)`` in float64 (the length term is a
    numpy float64 scalar there, so the float32 counts are promoted); the product with
    the float32 idf in float64, rounded to float32 when stored."""
    import numpy as np

    n = len(lengths)
    l_avg = np.asarray(lengths, dtype=np.int64).mean()
    df = np.diff(indptr)
    values, where = np.unique(df, return_inverse=True)
    idf = np.asarray([math.log(1 + (n - int(d) + 0.5) / (int(d) + 0.5)) for d in values],
                     dtype=np.float32)[where]
    length_part = k1 * ((1 - b) + b * lengths.astype(np.int64) / l_avg)  # float64, per doc
    # The same operations as bm25s's, in place where it saves an array of the pairs.
    tf = counts.astype(np.float32).astype(np.float64)
    den = length_part[rows]
    den += tf
    np.divide(tf, den, out=tf)  # tf is now the tf component
    del den
    out = np.repeat(idf.astype(np.float64), df)
    out *= tf
    return out.astype(np.float32)
