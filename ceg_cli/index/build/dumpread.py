"""Reading a MediaWiki dump for ``--update``: only the pages whose revision changed are cleaned.

Each page's latest revision has a digest (``mediawiki.Revision.digest``: the page
id, title and namespace, the sha1 of its revision text as the dump's ``<sha1>``
gives it, what of the siteinfo enters its document, the cleaning rules) that is
known without converting its wikitext to text, the costly part of reading a
dump. A page whose digest is the one the index recorded for it is passed over
uncleaned; the others are cleaned and chunked. What comes back, in dump order,
is ``(page id, digest, chunks)``: ``chunks`` None for a page passed over (the
caller checks it against its record), else the page's passages (empty when the
chunker gave none). Redirects, pages outside the namespaces and pages that
clean to nothing are not documents and do not come back (an update removes them).

A multistream dump with its index is read in its ranges (``corpus.ranges``) by
reader processes, as a build with ``--workers`` reads it (``pool_engine``): each
is given the recorded digests of the pages its range holds (the index lists
each stream's page ids), so it returns chunks only for the pages that changed.
The processes end with this one, on an error and on Ctrl-C too (``processes``).
"""

from __future__ import annotations

import bisect
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from ...corpus.mediawiki import Revision, read_revisions
from ...corpus.multistream import StreamRange, index_pages, range_revisions
from ...corpus.ranges import SourceRange, plan_ranges
from ...types import Chunk
from .chunking import chunk_or_skip
from .pool_engine import AHEAD_PER_WORKER, _stop_readers, reader_count
from .processes import available_cores, reader_started, sigint_blocked

#: (page id, digest, passages; None: passed over uncleaned, its digest as recorded).
PageResult = tuple[str, str, "list[Chunk] | None"]


class DumpReading:
    """The pages of one dump for an update; ``pids``: the reader processes that read them."""

    def __init__(self, path: Path, known: Mapping[str, str], options: Any,
                 warn: Callable[[str], None]) -> None:
        self.path = path
        self.known = known
        self.options = options
        self.warn = warn
        self.pids: set[int] = set()

    def pages(self) -> Generator[PageResult, None, None]:
        options = self.options
        wanted = options.workers if options.workers is not None else available_cores()
        if wanted > 1:  # the ranges need the dump's index read: not for one process
            plan = plan_ranges([self.path], multistream_index=options.multistream_index)
            readers = reader_count(int(wanted), len(plan), self.warn) if len(plan) > 1 else 1
            if readers > 1 and plan[0].index is not None:
                return self._in_processes(plan, readers)
        return _judge_all(read_revisions(self.path, namespaces=options.namespaces,
                                         on_warning=self.warn),
                          self.known, options.chunk_words, options.language, self.warn)

    def _in_processes(self, plan: list[SourceRange],
                      readers: int) -> Generator[PageResult, None, None]:
        options = self.options
        known = _per_range(plan, self.known)
        pool = ProcessPoolExecutor(max_workers=readers,
                                   mp_context=multiprocessing.get_context("spawn"),
                                   initializer=reader_started, initargs=(os.getpid(),))
        ahead: deque[Future[Any]] = deque()
        submit = 0
        try:
            while True:
                with sigint_blocked():  # readers start with Ctrl-C held back, as a build's
                    while submit < len(plan) and len(ahead) < AHEAD_PER_WORKER * readers:
                        ahead.append(pool.submit(read_dump_range, plan[submit],
                                                 options.namespaces, options.chunk_words,
                                                 options.language, known[submit]))
                        submit += 1
                self.pids.update(p.pid for p in (getattr(pool, "_processes", None) or {})
                                 .values() if p.pid is not None)
                if not ahead:
                    break
                pid, pages, warnings = ahead.popleft().result()
                self.pids.add(pid)
                for message in warnings:
                    self.warn(message)
                yield from pages
        except BaseException:  # an error, Ctrl-C, or the caller stopped reading
            _stop_readers(pool)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def read_dump_range(part: SourceRange, namespaces: frozenset[int], chunk_words: int,
                    language: str, known: dict[str, str]
                    ) -> tuple[int, list[PageResult], list[str]]:
    """One range's pages (a reader process's job), with this process's id and the
    warnings met."""
    warnings: list[str] = []
    streams = StreamRange(part.start, part.end, part.first_page, part.pages)
    revisions = range_revisions(Path(part.path), part.header_end, streams,
                                namespaces=namespaces, on_warning=warnings.append)
    pages = list(_judge_all(revisions, known, chunk_words, language, warnings.append))
    return os.getpid(), pages, warnings


def _judge_all(revisions: Iterator[tuple[int, Revision]], known: Mapping[str, str],
               chunk_words: int, language: str,
               warn: Callable[[str], None]) -> Generator[PageResult, None, None]:
    seen: set[str] = set()
    for _number, revision in revisions:
        digest = revision.digest()
        page_id = revision.page_id
        # A page id met twice (not in a real dump) is compared by its caller, cleaned.
        if page_id not in seen and known.get(page_id) == digest:
            seen.add(page_id)
            yield page_id, digest, None
            continue
        seen.add(page_id)
        document = revision.document(warn)
        if document is None:
            continue
        yield page_id, digest, chunk_or_skip(document, chunk_words, warn, language) or []


def _per_range(plan: list[SourceRange], known: Mapping[str, str]) -> list[dict[str, str]]:
    """``known`` split by the range that holds each page (the dump's index says where)."""
    slices: list[dict[str, str]] = [{} for _ in plan]
    if not known:
        return slices
    starts = [part.start for part in plan]
    assert plan[0].index is not None
    for offset, page_id in index_pages(Path(plan[0].index)):
        digest = known.get(page_id)
        if digest is not None:
            at = bisect.bisect_right(starts, offset) - 1
            if at >= 0:
                slices[at][page_id] = digest
    return slices
