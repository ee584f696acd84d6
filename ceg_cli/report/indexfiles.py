"""Is this file some ceg index's file? Told from the file itself, wherever it lies.

``output.refuse_index_files`` refuses an output inside an index folder, and one that is a
file of the index a command reads under another name. A hard link to *another* index's
file is neither: its other names cannot be found from its path. What can be read is the
file: an index's files have shapes no output of ceg has, so an output that exists and has
one of them is refused, whichever index (if any) the command reads:

- ``meta.json``: a JSON object with ceg's ``format_version`` and ``ceg_version``;
- ``vectors.faiss``: FAISS's index header (a fourcc starting with ``I``, then the
  dimension, the count and FAISS's two ``1 << 20`` markers);
- ``chunks.sqlite``: an SQLite database;
- ``lexical/``: bm25s's NumPy arrays, its ``params.index.json`` (``k1``, ``b``,
  ``method``, ``num_docs``) and its ``vocab.index.json`` (an object of words to numbers),
  and ceg's ``ceg_counts.npz`` beside them (a zip of NumPy arrays whose first member is
  ``version.npy``).

Only the first bytes of a regular file are read; a FIFO, a device or a file that cannot
be read is never sniffed. A copy of an index's file is refused as a hard link is: ceg
writes none of these shapes, so naming another file loses nothing. Kept apart from
``output`` so that writing output loads no index code.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

__all__ = ["index_file_kind"]

_HEAD = 4096
#: How every record ``ceg check`` writes begins: such a file is ceg's output, never an index's.
_RECORD_START = b'{"schema_version": '
_SQLITE = b"SQLite format 3\x00"
_NUMPY = b"\x93NUMPY"
#: A zip's first local header, then (offset 30) its first member's name.
_ZIP = b"PK\x03\x04"
_COUNTS_FIRST = b"version.npy"
_FAISS_MARK = (1 << 20).to_bytes(8, "little") * 2
_META_RE = (re.compile(rb'"format_version"\s*:\s*[0-9]'), re.compile(rb'"ceg_version"\s*:'))
_PARAMS_RE = [re.compile(rb'"%s"\s*:' % key) for key in (b"k1", b"b", b"method", b"num_docs")]
# bm25s's vocabulary: {"word": 0, "other": 1, ...} and nothing else, as far as the head goes.
_VOCAB_RE = re.compile(rb'\s*\{\s*(?:"(?:[^"\\]|\\.)*"\s*:\s*[0-9]+\s*(?:,\s*|\}\s*$|$))+$')


def index_file_kind(path: str | Path) -> str | None:
    """What index file ``path`` is ("meta.json", "vectors.faiss", ...), or None when it is
    none, does not exist, is not a regular file or cannot be read."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as fh:
            head = fh.read(_HEAD)
    except OSError:
        return None
    if head.startswith(_RECORD_START):
        return None
    if head.startswith(_SQLITE):
        return "chunks.sqlite (an SQLite database)"
    if head.startswith(_NUMPY):
        return "lexical part (a NumPy array)"
    if head.startswith(_ZIP) and head[30:30 + len(_COUNTS_FIRST)] == _COUNTS_FIRST \
            and _NUMPY in head:
        return "lexical part (ceg's term counts, NumPy arrays)"
    if len(head) >= 32 and head[:1] == b"I" and head[16:32] == _FAISS_MARK:
        return "vectors.faiss (a FAISS index)"
    if head.lstrip()[:1] == b"{":
        if all(p.search(head) for p in _META_RE):
            return "meta.json"
        if all(p.search(head) for p in _PARAMS_RE):
            return "lexical/params.index.json"
        # A vocabulary longer than the head is cut after its last whole entry.
        whole = head if len(head) < _HEAD else head[: head.rfind(b",") + 1]
        if whole and _VOCAB_RE.match(whole):
            return "lexical/vocab.index.json"
    return None
