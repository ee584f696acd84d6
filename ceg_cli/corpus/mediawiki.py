"""A streaming reader for MediaWiki XML export dumps (schema 0.8 to 0.11).

Memory does not grow with the dump: the XML is parsed incrementally and each
page (and each superseded revision of a full-history dump) is dropped from the
tree as soon as it has been read. Tags are matched by local name, so every
export schema version (each has its own namespace URI) is read the same way.

The parser is fed bytes, never decoded text, so expat honours the XML
declaration and the byte-order mark (dumps in UTF-16 read correctly).
defusedxml refuses DTDs, entity declarations and external references, which
rules out entity-expansion bombs and reads of local files; a real dump has
none of them.

``read_revisions`` gives each page's latest revision before its wikitext is
cleaned, with a digest of what its document is made of (``Revision.digest``):
``ceg index build --update`` cleans only the pages whose digest it has not
recorded (``index.build.dumpread``).
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from io import BufferedIOBase
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote
from xml.etree.ElementTree import Element, ParseError, TreeBuilder

from defusedxml import (
    DefusedXmlException,
    DTDForbidden,
    EntitiesForbidden,
    ExternalReferenceForbidden,
)
from defusedxml.ElementTree import DefusedXMLParser, iterparse

from ceg_cli.corpus.wikilocal import language_of, local_names, pages_language, redirect_pattern
from ceg_cli.corpus.wikitext import DEFAULT_DROPPED_NAMESPACES, clean_wikitext, cleaning_rules
from ceg_cli.errors import InputError
from ceg_cli.types import Document

_BZ2_MAGIC = b"BZh"
_GZIP_MAGIC = b"\x1f\x8b"
# Namespace keys whose links are not prose: Media (-2), File (6), Category (14).
_DROPPED_NAMESPACE_KEYS = frozenset({"-2", "6", "14"})
_NAMESPACE_KEY = {"media": -2, "file": 6, "category": 14}
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


def open_dump(path: Path, on_read: Callable[[int], None] | None = None) -> BufferedIOBase:
    """Open a dump for reading bytes, decompressing by content, not by name.

    ``on_read`` is told how many bytes of the file (compressed) each read
    took, so that progress can be shown against the file's size.
    """
    with open(path, "rb") as probe:
        magic = probe.read(3)
    raw: BinaryIO = open(path, "rb")
    if on_read is not None:
        raw = io.BufferedReader(CountingReader(raw, on_read))
    if magic.startswith(_BZ2_MAGIC):
        return bz2.BZ2File(raw, "rb")  # also reads multistream dumps
    if magic.startswith(_GZIP_MAGIC):
        return _closing_gzip(raw)
    return raw  # type: ignore[return-value]


def _closing_gzip(raw: BinaryIO) -> BufferedIOBase:
    stream = gzip.GzipFile(fileobj=raw, mode="rb")
    stream.myfileobj = raw  # closed with the stream, as gzip.open's own file is
    return stream  # type: ignore[return-value]


class CountingReader(io.RawIOBase):
    """A file's bytes, from where it stands, up to ``limit`` bytes; each read reported."""

    def __init__(
        self, raw: BinaryIO, on_read: Callable[[int], None] | None, limit: int | None = None
    ) -> None:
        self._raw = raw
        self._on_read = on_read
        self._left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._left is not None:
            view = view[: self._left]
        n = self._raw.readinto(view)  # type: ignore[attr-defined]
        if self._left is not None:
            self._left -= n
        if self._on_read is not None and n:
            self._on_read(n)
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def read_mediawiki(
    path: Path,
    *,
    namespaces: frozenset[int] = frozenset({0}),
    on_warning: Callable[[str], None] | None = None,
) -> Iterator[Document]:
    """Yield the latest revision of each non-redirect page in ``namespaces``.

    Raises ``InputError`` (naming the file) when the file is not a readable
    MediaWiki dump; documents read before the problem have been yielded.
    """
    for _page, document in read_mediawiki_pages(path, namespaces=namespaces, on_warning=on_warning):
        yield document


def read_mediawiki_pages(
    path: Path,
    *,
    start_page: int = 0,
    namespaces: frozenset[int] = frozenset({0}),
    on_warning: Callable[[str], None] | None = None,
    on_read: Callable[[int], None] | None = None,
    stream: BufferedIOBase | None = None,
    first_page: int = 0,
) -> Iterator[tuple[int, Document]]:
    """``read_mediawiki``, each document with the number of ``<page>``s read so far.

    That number, counting every page (redirects and other namespaces too), is
    where a build can resume: pages before ``start_page`` are passed over
    without being cleaned. ``stream`` reads decompressed XML from elsewhere
    than the whole file (a range of a multistream dump, whose first page is
    page ``first_page`` of the dump).
    """
    warn = on_warning or (lambda _message: None)
    # No DTD at all: that rules out entity bombs and external entities before
    # any expansion could start. Entities and external references stay
    # forbidden too, as a second line.
    parser = DefusedXMLParser(
        target=TreeBuilder(), forbid_dtd=True, forbid_entities=True, forbid_external=True
    )
    with _input_errors(path, parser), (stream or open_dump(path, on_read)) as xml:
        events = iterparse(xml, events=("start", "end"), parser=parser)
        yield from _read_pages(events, path, namespaces, warn, start_page, first_page)


@contextmanager
def _input_errors(path: Path, parser: DefusedXMLParser) -> Iterator[None]:
    """Turn parser, decompressor and defusedxml errors into one-line InputErrors."""
    try:
        yield
    except ParseError as exc:
        raise InputError(f"{path}: malformed XML: {exc}") from None
    except DefusedXmlException as exc:
        # defusedxml's exceptions carry no position; its expat parser does.
        line = getattr(getattr(parser, "parser", None), "CurrentLineNumber", None)
        where = f"{path}:{line}" if line else str(path)
        raise InputError(f"{where}: refused {_refusal(exc)}; a MediaWiki dump has none") from None
    except EOFError as exc:
        raise InputError(f"{path}: truncated compressed file ({exc})") from None
    except (OSError, zlib.error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise InputError(f"{path}: cannot read: {reason}") from None


def _refusal(exc: DefusedXmlException) -> str:
    if isinstance(exc, DTDForbidden):
        return f"a DOCTYPE declaration <!DOCTYPE {exc.name}>"
    if isinstance(exc, EntitiesForbidden):
        return f"an entity declaration <!ENTITY {exc.name}>"
    if isinstance(exc, ExternalReferenceForbidden):
        return f"an external reference to {exc.sysid or exc.pubid!r}"
    return f"unsafe XML ({type(exc).__name__})"


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _child_text(elem: Element, name: str) -> str | None:
    for child in elem:
        if _local(child.tag) == name:
            return child.text or ""
    return None


class _Site:
    """What <siteinfo> tells us: how to build URLs, what links to drop, which
    pages are redirects; in the wiki's language (``wikilocal``)."""

    def __init__(self) -> None:
        self.url_prefix: str | None = None
        self.dropped_namespaces: set[str] = set(DEFAULT_DROPPED_NAMESPACES)
        self.namespace_keys: dict[str, int] = {}
        self.xml_lang: str | None = None
        self.language: str | None = None
        #: The language of every page (``wikilocal.pages_language``); None: detected.
        self.pages_language: str | None = None
        self.redirect = redirect_pattern(())

    def read(self, siteinfo: Element) -> None:
        base = _child_text(siteinfo, "base")
        if base:
            self.url_prefix = _url_prefix(base.strip())
        for elem in siteinfo.iter():
            if _local(elem.tag) != "namespace" or not elem.text:
                continue
            key = elem.get("key", "")
            name = elem.text.strip()
            if key.lstrip("-").isdigit():
                self.namespace_keys[_folded(name)] = int(key)
            if key in _DROPPED_NAMESPACE_KEYS:
                self.dropped_namespaces.add(_folded(name))
        # The aliases editors type (German "Bild:", Chinese "分类:") and the
        # redirect words are the language's, not in the dump.
        dbname = _child_text(siteinfo, "dbname")
        self.language = language_of(self.xml_lang, dbname)
        self.pages_language = pages_language(self.language, dbname)
        names = local_names(self.language)
        for kind, key in _NAMESPACE_KEY.items():
            for name in names[kind]:
                self.dropped_namespaces.add(_folded(name))
                self.namespace_keys.setdefault(_folded(name), key)
        self.redirect = redirect_pattern(names["redirect"])

    def url(self, title: str) -> str | None:
        if self.url_prefix is None:
            return None
        return self.url_prefix + quote(title.replace(" ", "_"), safe="/:@!$()*,;~'")

    def namespace_of(self, title: str) -> int:
        # Only used when a page has no <ns> (which the 0.8+ schemas require).
        prefix, sep, _ = title.partition(":")
        return self.namespace_keys.get(_folded(prefix), 0) if sep else 0


def _folded(name: str) -> str:
    """A namespace name compared as MediaWiki does: any case, "_" as a space."""
    return " ".join(name.replace("_", " ").split()).casefold()


def _url_prefix(base: str) -> str:
    """``https://en.wikipedia.org/wiki/Main_Page`` -> ``https://en.wikipedia.org/wiki/``."""
    if "?title=" in base:  # wikis without short URLs: /index.php?title=Main_Page
        return base.partition("?title=")[0] + "?title="
    return base.rpartition("/")[0] + "/"


def _read_pages(
    events: Iterator[tuple[str, Element]],
    path: Path,
    namespaces: frozenset[int],
    warn: Callable[[str], None],
    start_page: int = 0,
    pages: int = 0,
) -> Iterator[tuple[int, Document]]:
    for number, revision in _read_revisions(events, path, namespaces, warn, start_page, pages):
        document = revision.document(warn)
        if document is not None:
            yield number, document


def read_revisions(
    path: Path,
    *,
    namespaces: frozenset[int] = frozenset({0}),
    on_warning: Callable[[str], None] | None = None,
    stream: BufferedIOBase | None = None,
    first_page: int = 0,
) -> Iterator[tuple[int, Revision]]:
    """``read_mediawiki_pages``, each page as its latest ``Revision``, not yet cleaned.

    Every page ``read_mediawiki_pages`` would clean is here (in its namespaces,
    not a redirect, with a revision); ``Revision.document`` cleans it, and
    ``Revision.digest`` says what its document would be made of without cleaning.
    """
    warn = on_warning or (lambda _message: None)
    parser = DefusedXMLParser(
        target=TreeBuilder(), forbid_dtd=True, forbid_entities=True, forbid_external=True
    )
    with _input_errors(path, parser), (stream or open_dump(path)) as xml:
        events = iterparse(xml, events=("start", "end"), parser=parser)
        yield from _read_revisions(events, path, namespaces, warn, 0, first_page)


def _read_revisions(
    events: Iterator[tuple[str, Element]],
    path: Path,
    namespaces: frozenset[int],
    warn: Callable[[str], None],
    start_page: int = 0,
    pages: int = 0,
) -> Iterator[tuple[int, Revision]]:
    site = _Site()
    root: Element | None = None
    page: Element | None = None
    latest: tuple[str, str] | None = None  # (timestamp, text) of the newest revision so far
    for event, elem in events:
        name = _local(elem.tag)
        if event == "start":
            if root is None:
                if name != "mediawiki":
                    raise InputError(
                        f"{path}: not a MediaWiki XML dump (root element <{name}>, "
                        "expected <mediawiki>)"
                    )
                root = elem
                site.xml_lang = elem.get(_XML_LANG)
            elif name == "page":
                page, latest = elem, None
            continue
        if name == "revision" and page is not None:
            timestamp = _child_text(elem, "timestamp") or ""
            # ">=": with equal or missing timestamps the later one in the file wins.
            if latest is None or timestamp >= latest[0]:
                latest = (timestamp, _child_text(elem, "text") or "")
            page.remove(elem)  # a full-history dump may hold thousands per page
        elif name == "siteinfo":
            site.read(elem)
        elif name == "page" and root is not None:
            pages += 1
            revision = (
                _page_revision(elem, latest, site, path, namespaces, warn)
                if pages > start_page
                else None
            )
            page, latest = None, None
            root.clear()  # drop every page read so far
            if revision is not None:
                yield pages, revision


def _page_revision(
    page: Element,
    latest: tuple[str, str] | None,
    site: _Site,
    path: Path,
    namespaces: frozenset[int],
    warn: Callable[[str], None],
) -> Revision | None:
    """The page's latest revision, if the page is one to index: what can be told
    without cleaning its wikitext (its namespace, whether it is a redirect)."""
    title = (_child_text(page, "title") or "").strip()
    ns_text = _child_text(page, "ns")
    try:
        namespace = int(ns_text) if ns_text is not None else site.namespace_of(title)
    except ValueError:
        warn(f"{path}: page {title!r}: bad <ns> {ns_text!r}; skipped")
        return None
    if namespace not in namespaces:
        return None
    if _child_text(page, "redirect") is not None:
        return None
    if latest is None:
        warn(f"{path}: page {title!r}: no revision, so no text; skipped")
        return None
    wikitext = latest[1]
    if site.redirect.match(wikitext):
        return None
    page_id = (_child_text(page, "id") or "").strip() or title
    return Revision(page_id, title, namespace, wikitext, site, path)


class Revision:
    """A page's latest revision as read, before its wikitext is cleaned."""

    __slots__ = ("namespace", "page_id", "path", "site", "title", "wikitext")

    def __init__(self, page_id: str, title: str, namespace: int, wikitext: str, site: _Site,
                 path: Path) -> None:
        self.page_id = page_id
        self.title = title
        self.namespace = namespace
        self.wikitext = wikitext
        self.site = site
        self.path = path

    def digest(self) -> str:
        """What the page's document is made of, known without cleaning: the page, the
        revision text's sha1 (``revision_sha1``: the dump's ``<sha1>``), what of the
        siteinfo enters the document or its cleaning, and the cleaning rules (``wikitext.
        cleaning_rules``). Equal digests: the same document; the cleaning is what costs."""
        site = self.site
        data = ["mediawiki-revision", cleaning_rules(), self.page_id, self.title,
                self.namespace, revision_sha1(self.wikitext), site.url(self.title),
                site.pages_language, site.language, sorted(site.dropped_namespaces)]
        return "revision:sha256:" + hashlib.sha256(
            json.dumps(data, ensure_ascii=False).encode("utf-8")).hexdigest()

    def document(self, warn: Callable[[str], None] | None = None) -> Document | None:
        """The page's document: its wikitext cleaned (None, warned, if nothing is left)."""
        site = self.site
        text = clean_wikitext(
            self.wikitext, dropped_namespaces=site.dropped_namespaces, language=site.language
        )
        if not text:
            if warn is not None:
                warn(f"{self.path}: page {self.title!r}: no text left after removing markup; "
                     "skipped")
            return None
        return Document(id=self.page_id, title=self.title, text=text, url=site.url(self.title),
                        source=str(self.path), language=site.pages_language)


def revision_sha1(wikitext: str) -> str:
    """The revision text's sha1 as MediaWiki writes it in ``<sha1>``: base 36, 31 digits.

    Computed rather than read: it costs a small fraction of parsing the page, and it
    is the text's own (a hand-edited dump keeps a stale ``<sha1>``; older exporters
    write none)."""
    number = int.from_bytes(hashlib.sha1(wikitext.encode("utf-8")).digest(), "big")
    digits = []
    while number:
        number, rest = divmod(number, 36)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[rest])
    return "".join(reversed(digits)).rjust(31, "0")
