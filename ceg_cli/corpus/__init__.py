"""Corpus readers: turn a SOURCE (a dump, a JSONL file, a folder) into Documents.

Every reader is a generator, so a corpus of any size is read in constant
memory; the caller decides how many documents to hold at once. Problems that
cost one document (a bad JSONL line, an empty page) go to ``on_warning``;
problems that make the whole source unreadable raise ``InputError``.
"""

from __future__ import annotations

from .sources import iter_documents, iter_positioned, source_kind

__all__ = ["iter_documents", "iter_positioned", "source_kind"]
