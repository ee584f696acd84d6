"""Sources split into ranges that can be read apart, on other machines, and put back in order.

A distributed build (``ceg_cli.index.build.ray_engine``) shares the reading out as
ranges: groups of whole bz2 streams of a Wikimedia multistream dump (read
with the dump's header, ``multistream.read_range``), byte ranges of an
uncompressed JSONL file cut at line boundaries (each knowing the number of its
first line, so that warnings and default ids name the right line), and lists
of a folder's files in the reader's order. Any other source (a dump without
its index, a gzip JSONL file) is one range. Read one after another with
``read_part``, the ranges give exactly the documents and warnings of the whole
sources read on one machine.

A range names its source by absolute path: the machine that reads it may run
in another directory, and must see the same files (a shared file system, or
the same copy on each machine).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ceg_cli.corpus.folder import read_text_files, text_files
from ceg_cli.corpus.jsonl import read_jsonl
from ceg_cli.corpus.multistream import (
    StreamRange,
    check_stream_start,
    index_beside,
    read_index,
    read_range,
)
from ceg_cli.corpus.sources import iter_positioned, source_kind
from ceg_cli.types import Document

#: Pages per range of a multistream dump (Wikimedia puts 100 in a stream).
RANGE_PAGES = 2000
#: Bytes per range of a JSONL file, and of a folder's files.
RANGE_BYTES = 4 << 20
#: Files per range of a folder at most (many small files read slowly too).
RANGE_FILES = 1000
_BLOCK = 1 << 20


@dataclass(frozen=True)
class SourceRange:
    """One part of one source, read on its own by ``read_part``."""

    #: Which of the build's sources (their order), and its absolute path.
    source: int
    path: str
    kind: str
    #: Bytes of the source this range reads (for progress).
    size: int
    #: JSONL: bytes ``start`` to ``end`` (None: the end), the first being line ``line``.
    #: Multistream: the streams from ``start`` to ``end``.
    start: int = 0
    end: int | None = None
    line: int = 1
    #: Multistream: where the page streams begin (the header before it), the
    #: pages before this range, and the pages in it.
    header_end: int = 0
    first_page: int = 0
    pages: int = 0
    #: Multistream: the dump's index.
    index: str | None = None
    #: Folder: (relative path, path to read) of each file, in the reader's order.
    files: tuple[tuple[str, str], ...] = ()
    #: Warnings the whole-source reader gives before this range's documents
    #: (a folder's walk: links skipped); said by whoever takes the range's results.
    warnings: tuple[str, ...] = ()


def plan_ranges(
    sources: Sequence[Path],
    *,
    follow_symlinks: bool = False,
    multistream_index: Path | None = None,
) -> list[SourceRange]:
    """The ranges of ``sources``, in the order a single-machine read meets their documents."""
    plan: list[SourceRange] = []
    for number, source in enumerate(sources):
        path = Path(source).absolute()
        kind = source_kind(path)
        if kind == "mediawiki":
            plan += _dump_ranges(number, path, multistream_index)
        elif kind == "jsonl":
            plan += _jsonl_ranges(number, path)
        else:
            plan += _folder_ranges(number, path, follow_symlinks)
    return plan


def plan_digest(plan: Sequence[SourceRange]) -> str:
    """What identifies a plan: a build resumes only with the same ranges."""
    text = json.dumps([asdict(part) for part in plan], sort_keys=True)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_part(
    part: SourceRange,
    *,
    namespaces: frozenset[int] = frozenset({0}),
    on_warning: Callable[[str], None] | None = None,
) -> Iterator[Document]:
    """The documents of one range (its leading ``warnings`` are the caller's to say)."""
    path = Path(part.path)
    if part.kind == "jsonl":
        whole = part.start == 0 and part.end is None  # also a gzip file's one range
        span = None if whole else (part.start, part.end, part.line)
        return read_jsonl(path, on_warning=on_warning, span=span)
    if part.kind == "folder":
        files = ((relative, Path(target)) for relative, target in part.files)
        return read_text_files(path, files, on_warning)
    if part.index is None:
        return (doc for _, doc in iter_positioned(path, namespaces=namespaces,
                                                  on_warning=on_warning))
    streams = StreamRange(part.start, part.end, part.first_page, part.pages)
    return (doc for _, doc in read_range(path, part.header_end, streams, namespaces=namespaces,
                                         on_warning=on_warning))


def _dump_ranges(number: int, path: Path, index: Path | None) -> list[SourceRange]:
    index = index or index_beside(path)
    size = path.stat().st_size
    if index is None:
        return [SourceRange(number, str(path), "mediawiki", size)]
    streams = read_index(index)
    check_stream_start(path, index, streams[0].start)
    header_end = streams[0].start
    plan: list[SourceRange] = []
    group: list[StreamRange] = []
    for i, stream in enumerate(streams):
        group.append(stream)
        if sum(s.pages for s in group) >= RANGE_PAGES or i == len(streams) - 1:
            end = group[-1].end
            plan.append(SourceRange(
                number, str(path), "mediawiki",
                (size if end is None else end) - group[0].start + (header_end if not plan else 0),
                start=group[0].start, end=end, header_end=header_end,
                first_page=group[0].first_page, pages=sum(s.pages for s in group),
                index=str(index.absolute()),
            ))
            group = []
    return plan


def _jsonl_ranges(number: int, path: Path) -> list[SourceRange]:
    """Byte ranges of about ``RANGE_BYTES``, each ending after a newline; a gzip file is one."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        if fh.read(2) == b"\x1f\x8b":
            return [SourceRange(number, str(path), "jsonl", size)]
        fh.seek(0)
        cuts: list[tuple[int, int]] = []  # (byte after a newline, number of the next line)
        start, base, lines = 0, 0, 0
        while block := fh.read(_BLOCK):
            at = 0
            while (want := max(at, start + RANGE_BYTES - base)) < len(block):
                newline = block.find(b"\n", want)
                if newline < 0:
                    break
                start = base + newline + 1
                cuts.append((start, lines + block.count(b"\n", 0, newline + 1) + 1))
                at = newline + 1
            lines += block.count(b"\n")
            base += len(block)
    bounds = [(0, 1), *[c for c in cuts if c[0] < size]]
    plan = []
    for i, (begin, line) in enumerate(bounds):
        end = bounds[i + 1][0] if i + 1 < len(bounds) else None
        plan.append(SourceRange(number, str(path), "jsonl", (end or size) - begin,
                                start=begin, end=end, line=line))
    return plan


def _folder_ranges(number: int, path: Path, follow_symlinks: bool) -> list[SourceRange]:
    """Runs of the folder's files of about ``RANGE_BYTES`` (at most ``RANGE_FILES`` files)."""
    warnings: list[str] = []
    files = text_files(path, follow_symlinks, warnings.append)
    plan: list[SourceRange] = []
    group: list[tuple[str, str]] = []
    size = 0
    for i, (relative, target) in enumerate(files):
        group.append((relative, str(target)))
        size += _file_size(target)
        if size >= RANGE_BYTES or len(group) >= RANGE_FILES or i == len(files) - 1:
            plan.append(SourceRange(number, str(path), "folder", size, files=tuple(group),
                                    warnings=tuple(warnings) if not plan else ()))
            group, size = [], 0
    if not plan:  # no text files: the walk's warnings still belong to the build
        plan.append(SourceRange(number, str(path), "folder", 0, warnings=tuple(warnings)))
    return plan


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the reader says what is wrong with it
