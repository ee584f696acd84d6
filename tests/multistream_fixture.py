"""Make a Wikimedia-style multistream dump and its index from an ordinary dump.

The header (everything before the first ``<page>``) is the first bz2 stream,
each group of ``per_stream`` pages its own stream, the closing tag the last
one; the index has a line ``offset:page_id:title`` per page, as Wikimedia's
``...-multistream-index.txt.bz2`` does.
"""

from __future__ import annotations

import bz2
import re
from pathlib import Path

_PAGE = re.compile(rb"[ \t]*<page>.*?</page>\n?", re.S)
_ID = re.compile(rb"<id>(\d+)</id>")
_TITLE = re.compile(rb"<title>(.*?)</title>", re.S)


def make_multistream(source: Path, folder: Path, per_stream: int = 2) -> tuple[Path, Path]:
    """(dump, index) in ``folder``, named as Wikimedia names them."""
    xml = bz2.decompress(source.read_bytes())
    pages = list(_PAGE.finditer(xml))
    header, footer = xml[: pages[0].start()], xml[pages[-1].end():]
    folder.mkdir(parents=True, exist_ok=True)
    dump = folder / "testwiki-20240101-pages-articles-multistream.xml.bz2"
    index = folder / "testwiki-20240101-pages-articles-multistream-index.txt.bz2"
    lines: list[bytes] = []
    with open(dump, "wb") as out:
        out.write(bz2.compress(header))
        for at in range(0, len(pages), per_stream):
            offset = out.tell()
            group = pages[at: at + per_stream]
            for page in group:
                text = page.group()
                page_id = _ID.search(text).group(1)  # type: ignore[union-attr]
                title = _TITLE.search(text).group(1)  # type: ignore[union-attr]
                lines.append(b"%d:%s:%s\n" % (offset, page_id, title))
            out.write(bz2.compress(b"".join(p.group() for p in group)))
        out.write(bz2.compress(footer))
    index.write_bytes(bz2.compress(b"".join(lines)))
    return dump, index
