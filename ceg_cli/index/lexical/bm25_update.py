"""An update's bm25s lexical part: the previous part kept in step, only new passages read.

See ``bm25_counts`` for what is stored and how the pairs are scored again; this
module decides whether the previous part can be kept (else the caller builds the
part again from every passage, ``bm25.build_lexical``) and writes the new one.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...lang.codes import ENGLISH
from ...types import Chunk
from ..layout import LEXICAL_DIR, embed_text
from .bm25 import BM25_PARAMS, lexical_files
from .bm25_counts import COUNTS_FILE, COUNTS_VERSION, SCORED_AS, save_counts, score_pairs
from .lexlang import TOKENIZER, corpus_terms, import_bm25s, is_legacy, tokenizer_entry

if TYPE_CHECKING:
    import numpy as np


def _compatible(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether passages read with the ``old`` tokenizer entry are read as ``new`` reads
    them (the entry's language counts may differ: they decide only the queries)."""
    if is_legacy(old) or is_legacy(new):
        return is_legacy(old) and is_legacy(new) and dict(old or TOKENIZER) == dict(new)
    assert old is not None
    if old.get("version") != new.get("version"):
        return False
    was = old.get("analyzers") or {}
    return all(was[code] == now for code, now in new["analyzers"].items() if code in was)


def update_lexical(db: sqlite3.Connection, index_dir: Path, embed_mode: str,
                   previous: Mapping[str, Any], previous_root: Path,
                   previous_rows: np.ndarray, ids: np.ndarray) -> dict[str, Any] | None:
    """Write ``index_dir/lexical`` from the bm25s part at ``previous_root/lexical``
    (meta.json's entry ``previous``) without tokenizing the passages it holds.

    ``ids`` are the live passages' ids in id order (the new part's documents, read
    from ``db``'s ``chunks``); ``previous_rows`` each one's document in the previous
    part, -1 for a passage to tokenize. Kept passages must keep their order.
    Returns the new ``lexical`` entry of meta.json, or None when the part must be
    built again from every passage: a part without ``COUNTS_FILE`` (built before
    it) or not as meta.json records it, another bm25s version (than the part's, or
    than those ``SCORED_AS`` names), parameters or text,
    or a tokenizer that would read the passages otherwise (an English index getting
    its first passage in another language, or a newer analyzer).
    """
    import numpy as np

    bm25s = import_bm25s()
    folder = previous_root / LEXICAL_DIR
    recorded = previous.get("files") or {}
    if previous.get("library") != "bm25s" or COUNTS_FILE not in recorded \
            or previous.get("version") != bm25s.__version__ \
            or bm25s.__version__ not in SCORED_AS \
            or previous.get("parameters") != BM25_PARAMS or previous.get("text") != embed_mode:
        return None
    try:
        if lexical_files(previous_root) != recorded:
            return None
        with np.load(folder / COUNTS_FILE) as side:
            if int(side["version"]) != COUNTS_VERSION:
                return None
            counts_o, lengths_o = side["counts"], side["lengths"]
        indptr_o = np.load(folder / "indptr.csc.index.npy")
        rows_o = np.load(folder / "indices.csc.index.npy")
        vocab_o = json.loads((folder / "vocab.index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError):
        return None
    n_old = len(lengths_o)
    if len(rows_o) != len(counts_o) or n_old != previous.get("passages"):
        return None
    languages = dict(db.execute("SELECT coalesce(language, ?), count(*) FROM chunks "
                                "GROUP BY 1", (ENGLISH,)))
    tokenizer = tokenizer_entry(languages)  # the new passages' languages counted too
    if not _compatible(previous.get("tokenizer"), tokenizer):
        return None

    previous_rows = np.asarray(previous_rows, dtype=np.int64)
    kept = previous_rows >= 0
    kept_old = previous_rows[kept]
    if len(kept_old) and (np.any(np.diff(kept_old) <= 0) or kept_old[-1] >= n_old):
        raise ValueError("update_lexical: kept passages must keep their order")
    n_new = len(previous_rows)
    new_row_of_old = np.full(n_old, -1, dtype=np.int32)
    new_row_of_old[kept_old] = np.flatnonzero(kept)

    # The passages to read: only the new ones.
    fresh_rows = np.flatnonzero(~kept)
    texts, langs = _fresh_texts(db, ids[fresh_rows], embed_mode)
    if is_legacy(tokenizer):
        terms = [list(t) for t in bm25s.tokenize(texts, **TOKENIZER, return_ids=False,
                                                  show_progress=False)]
    else:
        terms = corpus_terms(texts, [lang or ENGLISH for lang in langs])

    v_old = len(indptr_o) - 1  # bm25s's "" beyond its matrix is not a term
    tokens: list[str | None] = [None] * v_old
    for token, i in vocab_o.items():
        if i < v_old:
            tokens[i] = token
    column = {t: i for i, t in enumerate(tokens)}
    f_rows: list[int] = []
    f_cols: list[int] = []
    f_counts: list[int] = []
    f_lengths = np.zeros(len(fresh_rows), dtype=np.int64)
    for k, (row, words) in enumerate(zip(fresh_rows.tolist(), terms)):
        f_lengths[k] = len(words)
        for word, count in Counter(words).items():
            col = column.get(word)
            if col is None:
                col = column[word] = len(tokens)
                tokens.append(word)
            f_rows.append(row)
            f_cols.append(col)
            f_counts.append(count)
    v_ext = len(tokens)
    fr = np.asarray(f_rows, dtype=np.int64)
    fc = np.asarray(f_cols, dtype=np.int64)
    fn = np.asarray(f_counts, dtype=np.int64)

    # The kept pairs: in place, those of dropped passages left out.
    moved = new_row_of_old[rows_o]
    keep = moved >= 0
    kept_before = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    kept_indptr = kept_before[indptr_o]  # kept pairs before each old column
    kept_per_col = np.zeros(v_ext, dtype=np.int64)
    kept_per_col[:v_old] = np.diff(kept_indptr)
    fresh_per_col = np.bincount(fc, minlength=v_ext).astype(np.int64)
    total = kept_per_col + fresh_per_col
    alive = total > 0
    if not alive.any():
        return None  # no term left: as a full build (which fails the same way)
    # New pairs go after the kept ones of their column (their passages come last).
    order = np.lexsort((fr, fc))
    fr, fc, fn = fr[order], fc[order], fn[order]
    insert_at = np.concatenate([kept_indptr[1:], np.full(v_ext - v_old, kept_before[-1])])[fc]
    rows = np.insert(moved[keep], insert_at, fr.astype(np.int32))
    counts = np.insert(counts_o[keep], insert_at, fn.astype(np.int32))
    del moved, keep, kept_before
    indptr = np.concatenate([[0], np.cumsum(total[alive], dtype=np.int64)])
    lengths = np.zeros(n_new, dtype=np.int64)
    lengths[kept] = lengths_o[kept_old]
    lengths[fresh_rows] = f_lengths

    params = dict(BM25_PARAMS)
    data = score_pairs(indptr, rows, counts, lengths, float(params["k1"]), float(params["b"]))
    vocab = {t: i for i, t in enumerate(t for t, a in zip(tokens, alive.tolist()) if a)}
    if "" not in vocab:  # as bm25s's ``index(create_empty_token=True)`` adds it
        vocab[""] = len(vocab)
    retriever = bm25s.BM25(**params)
    retriever.scores = {"data": data, "indices": rows, "indptr": indptr, "num_docs": n_new}
    retriever.vocab_dict = vocab
    retriever.nonoccurrence_array = None
    out = index_dir / LEXICAL_DIR
    shutil.rmtree(out, ignore_errors=True)
    retriever.save(str(out), show_progress=False)
    save_counts(out, counts, lengths)
    return {
        "files": lexical_files(index_dir),
        "library": "bm25s",
        "version": bm25s.__version__,
        "dir": LEXICAL_DIR,
        "parameters": params,
        "tokenizer": tokenizer,
        "text": embed_mode,
        "passages": n_new,
    }


def _fresh_texts(db: sqlite3.Connection, ids: np.ndarray, embed_mode: str) -> tuple[
        list[str], list[str | None]]:
    """The embedded text and language of the passages ``ids`` (ascending), in that order."""
    texts: list[str] = []
    languages: list[str | None] = []
    wanted = [int(i) for i in ids]
    for start in range(0, len(wanted), 500):
        part = wanted[start:start + 500]
        found = {row[0]: row[1:] for row in db.execute(
            f"SELECT id, title, text, language FROM chunks WHERE id IN "
            f"({','.join('?' * len(part))})", part)}
        for i in part:
            title, text, language = found[i]
            texts.append(embed_text(Chunk("", title, 0, 0, 0, text), embed_mode))
            languages.append(language)
    return texts, languages
