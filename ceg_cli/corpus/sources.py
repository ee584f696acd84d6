"""Which reader reads a SOURCE (dump, JSONL file, folder), and reading it from a position."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ceg_cli.corpus.folder import read_folder
from ceg_cli.corpus.jsonl import read_jsonl
from ceg_cli.corpus.mediawiki import open_dump, read_mediawiki, read_mediawiki_pages
from ceg_cli.corpus.multistream import index_beside, read_from_page
from ceg_cli.errors import InputError, UsageError
from ceg_cli.types import Document

__all__ = ["iter_documents", "iter_positioned", "resolve_sources", "source_kind"]

_MEDIAWIKI_SUFFIXES = (".xml", ".xml.bz2", ".xml.gz")
_JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF8_BOM = b"\xef\xbb\xbf"


def source_kind(path: Path) -> str:
    """Say how ``path`` will be read: ``"mediawiki"``, ``"jsonl"`` or ``"folder"``.

    Decided by the name; a ``.bz2``/``.gz`` file with no telling name is
    decided by its first decompressed bytes (XML or JSON). Raises
    ``InputError`` for a missing path or an unknown format.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if path.is_dir():
        return "folder"
    name = path.name.lower()
    if name.endswith(_MEDIAWIKI_SUFFIXES):
        return "mediawiki"
    if name.endswith(_JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith((".bz2", ".gz")):
        kind = _sniff_compressed(path)
        if kind is not None:
            return kind
    raise InputError(
        f"{path}: unknown corpus format; expected a MediaWiki dump (.xml, .xml.bz2, "
        ".xml.gz), a JSONL file (.jsonl, .jsonl.gz) or a folder of .txt/.md files"
    )


#: What a source that is neither a file nor a folder is, for the message.
_SPECIAL = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def resolve_sources(
    sources: Sequence[Path],
    target: Path,
    *,
    on_warning: Callable[[str], None] | None = None,
) -> dict[Path, str]:
    """The sources of a build into ``target``, each once, with their kinds (``source_kind``).

    Refused (``UsageError``/``InputError``, before anything is read or written):
    a missing path; a named pipe, socket or device, which a build would read
    more than once (its digest, then its text: a pipe gives its data once and
    then waits forever); a source that is the index being built, lies inside
    it, or holds it (the build would index its own files, or read a folder it
    is writing into). The same file or folder under two spellings (``./a``,
    ``../r/a``, a symlink or a hard link: compared by device and inode) is
    kept once, under its first spelling, with a warning naming both.
    """
    target_real = os.path.realpath(target)
    kinds: dict[Path, str] = {}
    seen: dict[tuple[int, int], Path] = {}
    for source in map(Path, sources):
        try:
            info = os.stat(source)
        except FileNotFoundError:
            raise InputError(f"{source}: no such file or directory") from None
        except OSError as exc:
            raise InputError(f"{source}: cannot read ({exc.strerror})") from None
        for test, what in _SPECIAL:
            if test(info.st_mode):
                raise InputError(
                    f"{source}: is {what}, which a build cannot read twice (once for its "
                    "digest, then for its text); give a regular file or a folder"
                )
        _refuse_overlap(source, target, target_real)
        identity = (info.st_dev, info.st_ino)
        if identity in seen:
            if on_warning is not None:
                first = seen[identity]
                what = "folder" if stat.S_ISDIR(info.st_mode) else "file"
                same = (
                    "named more than once" if first == source else f"is the same {what} as {first}"
                )
                on_warning(f"{source}: {same}; indexed once")
            continue
        seen[identity] = source
        kinds[source] = source_kind(source)
    return kinds


def _refuse_overlap(source: Path, target: Path, target_real: str) -> None:
    """Refuse a source that is the target index, lies inside it or holds it."""
    real = os.path.realpath(source)
    if real == target_real:
        raise UsageError(
            f"{source}: is the index being built (--index {target}); a build cannot read "
            "its own index: name the documents to index"
        )
    if os.path.commonpath([real, target_real]) == target_real:
        raise UsageError(
            f"{source}: lies inside the index being built (--index {target}); move it out "
            "of the index folder"
        )
    if os.path.commonpath([real, target_real]) == real:
        raise UsageError(
            f"{source}: holds the index being built (--index {target}), which the build "
            "would read as documents while writing it; choose an --index outside it"
        )


def _sniff_compressed(path: Path) -> str | None:
    try:
        with open_dump(path) as stream:
            head = stream.read(64)
    except (OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None
    if head.startswith(_UTF16_BOMS):  # JSONL is UTF-8 by definition; this is XML
        return "mediawiki"
    head = head.removeprefix(_UTF8_BOM).lstrip()
    if head.startswith(b"<"):
        return "mediawiki"
    if head.startswith(b"{"):
        return "jsonl"
    return None


def iter_documents(
    path: Path,
    *,
    namespaces: frozenset[int] = frozenset({0}),
    follow_symlinks: bool = False,
    on_warning: Callable[[str], None] | None = None,
) -> Iterator[Document]:
    """Stream the documents of one corpus source.

    ``namespaces`` selects MediaWiki namespaces (articles only by default) and
    is ignored for other sources; ``follow_symlinks`` lets a folder source
    read symbolic links that lead out of it (see ``corpus.folder``).
    ``on_warning`` receives a one-line message, naming the file (and line or
    page), for each record skipped; without it such messages are dropped. The
    kind of source is checked at once, so a missing or unknown ``path`` raises
    ``InputError`` here; an unreadable file raises ``InputError`` while
    iterating.
    """
    path = Path(path)
    kind = source_kind(path)
    if kind == "mediawiki":
        return read_mediawiki(path, namespaces=namespaces, on_warning=on_warning)
    if kind == "jsonl":
        return read_jsonl(path, on_warning=on_warning)
    return read_folder(path, follow_symlinks=follow_symlinks, on_warning=on_warning)


def iter_positioned(
    path: Path,
    *,
    start: int = 0,
    namespaces: frozenset[int] = frozenset({0}),
    follow_symlinks: bool = False,
    on_warning: Callable[[str], None] | None = None,
    on_read: Callable[[int], None] | None = None,
    multistream_index: Path | None = None,
) -> Iterator[tuple[int, Document]]:
    """``iter_documents``, each document with the position reached after it.

    A position is where reading can start again: for a MediaWiki dump the
    number of ``<page>`` elements read (every page counts, also those not
    indexed), for JSONL and folders the number of documents yielded. From
    ``start``, the documents after that position are yielded; a multistream
    dump with its index (``multistream_index``, or beside it under Wikimedia's
    name: ``multistream.index_beside``) is read from the stream holding the
    next page, the others are read from their start and the
    first documents passed over. ``on_read`` counts the bytes a dump or a
    JSONL file reads (compressed, as the file's size is).
    """
    path = Path(path)
    kind = source_kind(path)
    if kind == "mediawiki":
        index = multistream_index or index_beside(path)
        if start and index is not None:
            return read_from_page(
                path, index, start, namespaces=namespaces, on_warning=on_warning, on_read=on_read
            )
        return read_mediawiki_pages(
            path, start_page=start, namespaces=namespaces, on_warning=on_warning, on_read=on_read
        )
    if kind == "jsonl":
        documents = read_jsonl(path, on_warning=on_warning, on_read=on_read)
    else:
        documents = read_folder(path, follow_symlinks=follow_symlinks, on_warning=on_warning)
    return _counted(documents, start)


def _counted(documents: Iterator[Document], start: int) -> Iterator[tuple[int, Document]]:
    for number, document in enumerate(documents, 1):
        if number > start:
            yield number, document
