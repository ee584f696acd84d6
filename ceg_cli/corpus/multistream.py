"""Wikimedia's multistream dumps: independent bz2 streams, and an index of them.

``enwiki-DATE-pages-articles-multistream.xml.bz2`` is many bz2 streams one
after another: the first holds the ``<mediawiki>`` opening and ``<siteinfo>``,
each of the others about a hundred ``<page>`` elements, the last one the
closing tag. ``...-multistream-index.txt.bz2`` has a line per page,
``offset:page_id:title``, the offset being the byte where that page's stream
starts. Reading the index splits the dump into ranges of whole streams that
can be read on their own (each read as the header stream followed by its
pages), so a build can resume at the stream holding its next page rather than
decompress the whole dump again, and a distributed build can share the ranges
out. Read from start to end, the ranges give exactly the documents of the
whole dump.
"""

from __future__ import annotations

import bisect
import bz2
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ceg_cli.corpus.mediawiki import CountingReader, Revision, read_mediawiki_pages, read_revisions
from ceg_cli.errors import InputError
from ceg_cli.types import Document

#: The dump's name ends ``.xml.bz2``; its index's ends with this instead.
INDEX_SUFFIX = "-index.txt.bz2"
_CLOSING = b"</mediawiki>\n"


@dataclass(frozen=True)
class StreamRange:
    """Whole streams of a dump: bytes ``start`` to ``end`` (None: to the end of file)."""

    start: int
    end: int | None
    #: Pages of the dump before this range (so its first page is page ``first_page + 1``).
    first_page: int
    pages: int


def index_beside(dump: Path) -> Path | None:
    """The multistream index named after ``dump`` in its folder, if there is one."""
    name = dump.name
    if not name.endswith(".xml.bz2"):
        return None
    index = dump.with_name(name[: -len(".xml.bz2")] + INDEX_SUFFIX)
    return index if index.is_file() else None


def read_index(index: Path) -> list[StreamRange]:
    """One range per stream listed in ``index`` (a ``.bz2`` or a plain text file)."""
    offsets: list[int] = []
    counts: list[int] = []
    with open(index, "rb") as probe:
        compressed = probe.read(3) == b"BZh"
    try:
        with (bz2.open(index, "rb") if compressed else open(index, "rb")) as lines:
            for number, line in enumerate(lines, 1):
                head, sep, _rest = line.partition(b":")
                if not sep or not head.isdigit():
                    raise InputError(
                        f"{index}:{number}: not a multistream index line "
                        "(expected offset:page_id:title)"
                    )
                offset = int(head)
                if offsets and offset == offsets[-1]:
                    counts[-1] += 1
                elif offsets and offset < offsets[-1]:
                    raise InputError(f"{index}:{number}: offset {offset} goes backwards")
                else:
                    offsets.append(offset)
                    counts.append(1)
    except (OSError, EOFError) as exc:
        raise InputError(f"{index}: cannot read: {exc}") from None
    if not offsets:
        raise InputError(f"{index}: empty multistream index")
    ranges = []
    first = 0
    for i, (offset, count) in enumerate(zip(offsets, counts)):
        end = offsets[i + 1] if i + 1 < len(offsets) else None
        ranges.append(StreamRange(offset, end, first, count))
        first += count
    return ranges


def read_range(
    dump: Path,
    header_end: int,
    part: StreamRange,
    *,
    start_page: int = 0,
    namespaces: frozenset[int] = frozenset({0}),
    on_warning: Callable[[str], None] | None = None,
    on_read: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, Document]]:
    """The documents of one range, each with its page number in the whole dump.

    ``header_end`` is where the first page stream starts (the first range's
    ``start``): the bytes before it are the header, read first so that the
    range's pages are read with the dump's siteinfo (URLs, namespaces).
    """
    stream = io.BufferedReader(_RangeXml(dump, header_end, part, on_read))
    return read_mediawiki_pages(
        dump,
        start_page=start_page,
        namespaces=namespaces,
        on_warning=on_warning,
        stream=stream,  # type: ignore[arg-type]
        first_page=part.first_page,
    )


def range_revisions(
    dump: Path,
    header_end: int,
    part: StreamRange,
    *,
    namespaces: frozenset[int] = frozenset({0}),
    on_warning: Callable[[str], None] | None = None,
) -> Iterator[tuple[int, Revision]]:
    """``read_range``'s pages as revisions not yet cleaned (``mediawiki.read_revisions``)."""
    stream = io.BufferedReader(_RangeXml(dump, header_end, part, None))
    return read_revisions(dump, namespaces=namespaces, on_warning=on_warning,
                          stream=stream, first_page=part.first_page)  # type: ignore[arg-type]


def index_pages(index: Path) -> Iterator[tuple[int, str]]:
    """(stream offset, page id) of each line of a multistream ``index`` (``read_index``
    has checked its lines)."""
    with open(index, "rb") as probe:
        compressed = probe.read(3) == b"BZh"
    try:
        with (bz2.open(index, "rb") if compressed else open(index, "rb")) as lines:
            for line in lines:
                head, _, rest = line.partition(b":")
                page_id = rest.partition(b":")[0]
                if head.isdigit():
                    yield int(head), page_id.decode("utf-8", "replace").strip()
    except (OSError, EOFError) as exc:
        raise InputError(f"{index}: cannot read: {exc}") from None


def read_from_page(
    dump: Path,
    index: Path,
    start_page: int,
    *,
    namespaces: frozenset[int] = frozenset({0}),
    on_warning: Callable[[str], None] | None = None,
    on_read: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, Document]]:
    """The dump's documents after its first ``start_page`` pages, read from their stream on."""
    ranges = read_index(index)
    at = max(0, bisect.bisect_right([r.first_page for r in ranges], start_page) - 1)
    check_stream_start(dump, index, ranges[at].start)
    rest = StreamRange(ranges[at].start, None, ranges[at].first_page, 0)
    return read_range(
        dump, ranges[0].start, rest, start_page=start_page, namespaces=namespaces,
        on_warning=on_warning, on_read=on_read,
    )


def check_stream_start(dump: Path, index: Path, offset: int) -> None:
    """Refuse an index of another dump: its offsets do not start bz2 streams of this one."""
    with open(dump, "rb") as fh:
        fh.seek(offset)
        magic = fh.read(4)
    if not (magic[:3] == b"BZh" and magic[3:4].isdigit() and magic[3:4] != b"0"):
        raise InputError(
            f"{index}: offset {offset} is not the start of a bz2 stream in {dump}: "
            "not the multistream index of this dump"
        )


class _RangeXml(io.RawIOBase):
    """The decompressed header, then the range's pages, then a closing tag if it needs one."""

    def __init__(
        self, dump: Path, header_end: int, part: StreamRange,
        on_read: Callable[[int], None] | None,
    ) -> None:
        self._files = [open(dump, "rb"), open(dump, "rb")]
        self._files[1].seek(part.start)
        size = None if part.end is None else part.end - part.start
        self._parts: list[io.BufferedIOBase] = [
            bz2.BZ2File(io.BufferedReader(CountingReader(self._files[0], None, header_end))),
            bz2.BZ2File(io.BufferedReader(CountingReader(self._files[1], on_read, size))),
        ]
        # The last range holds the dump's own closing tag; the others need one.
        self._tail = b"" if part.end is None else _CLOSING

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: object) -> int:
        view = memoryview(buffer).cast("B")  # type: ignore[arg-type]
        while self._parts:
            n = self._parts[0].readinto(view)
            if n:
                return n
            self._parts.pop(0)
        n = min(len(view), len(self._tail))
        view[:n] = self._tail[:n]
        self._tail = self._tail[n:]
        return n

    def close(self) -> None:
        for file in self._files:
            file.close()
        super().close()
