"""Each indexed document's identity and digests: what ``--update`` compares.

A document is known by its source (the resolved path meta.json records) and
its key: its id in that source (a folder's relative path, a JSONL ``id``, a
dump's page id), with ``\\0`` and a count after it for the second and later
documents of one id in one source (a JSONL file may repeat an id). Two digests
say what it contributes:

- ``digest``: of the document as read (id, title, text, url, declared
  language): an update compares it without chunking the document. A folder's
  file is recorded by the digest of its bytes instead (``file_digest``: its path,
  its bytes and the reading rules), so an update recognises an unchanged file
  without converting its Markdown; a record with the other digest still matches
  once (the file is read and its document's digest compared);
- ``passages``: of its passages as stored (title, offsets, text, url,
  language): the only one an index built before the record can give, so its
  first update chunks each document of a changed source once and compares
  this one (a one-time pass that records ``digest`` for the next).

The record is the ``documents`` table of a generation's store (``generation``):
one row per live document, with where its passages are (``first``, ``count``:
a document's passages have adjacent ids).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...types import Chunk, Document

DOCUMENTS_SCHEMA = """
CREATE TABLE documents (
    source TEXT NOT NULL,
    key TEXT NOT NULL,
    digest TEXT,
    passages TEXT NOT NULL,
    first INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (source, key)
);
CREATE TABLE removed (id INTEGER PRIMARY KEY);
"""


@dataclass
class DocRecord:
    """One live document: its digests and its passages' ids ``first .. first+count-1``."""

    digest: str | None
    passages: str
    first: int
    count: int


def doc_key(doc_id: str, occurrence: int) -> str:
    return doc_id if occurrence == 0 else f"{doc_id}\0{occurrence}"


def document_digest(doc: Document) -> str:
    data = [doc.id, doc.title, doc.text, doc.url, doc.language]
    return "sha256:" + hashlib.sha256(
        json.dumps(data, ensure_ascii=False).encode("utf-8")).hexdigest()


def file_digest(relative: str, target: Path, sha256: str | None = None) -> str:
    """Digest of a folder's file as an update compares it: its relative path (the
    document's id), its bytes' ``sha256`` (hex; read from ``target`` when the folder's
    digest has not just given it) and the rules that make it a document
    (``folder.RULES`` and markdown-it's version), so a ceg that reads files otherwise
    reads them again."""
    import markdown_it

    from ...corpus.folder import RULES
    from ..indexdir import file_sha256

    data = [RULES, markdown_it.__version__, relative, sha256 or file_sha256(target)]
    return "file:sha256:" + hashlib.sha256(json.dumps(data).encode("utf-8")).hexdigest()


def passages_digest(rows: Iterable[Sequence[Any]]) -> str:
    """Digest of a document's passages: (title, start, end, text, url, language) each."""
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps(list(row), ensure_ascii=False).encode("utf-8") + b"\n")
    return "sha256:" + h.hexdigest()


def chunk_fields(c: Chunk) -> tuple[Any, ...]:
    """What ``passages_digest`` reads of a passage, as the store holds it."""
    return (c.title, c.start, c.end, c.text, c.url, c.language)


def from_store(db: sqlite3.Connection,
               table: str = "chunks") -> Iterator[tuple[str, str, DocRecord]]:
    """The record of every document of a store built before it had one (streamed).

    A document starts where the source or the id changes or the ordinal is 0.
    """
    seen: dict[tuple[str, str], int] = {}
    current: tuple[str, str] | None = None
    rows: list[tuple[Any, ...]] = []
    first = 0

    def flush() -> tuple[str, str, DocRecord]:
        assert current is not None
        source, doc_id = current
        n = seen.get(current, 0)
        seen[current] = n + 1
        return source, doc_key(doc_id, n), DocRecord(None, passages_digest(rows), first,
                                                     len(rows))

    for row in db.execute(
        "SELECT id, source, doc_id, ordinal, title, start, end, text, url, language "
        f"FROM {table} ORDER BY id"
    ):
        pid, source, doc_id, ordinal = row[:4]
        if current is None or (source, doc_id) != current or ordinal == 0:
            if current is not None:
                yield flush()
            current, rows, first = (source, doc_id), [], pid
        rows.append(row[4:])
    if current is not None:
        yield flush()


def read_record(db: sqlite3.Connection,
                schema: str = "gen") -> Iterator[tuple[str, str, DocRecord]]:
    for source, key, digest, passages, first, count in db.execute(
        f"SELECT source, key, digest, passages, first, count FROM {schema}.documents"
    ):
        yield source, key, DocRecord(digest, passages, first, count)
