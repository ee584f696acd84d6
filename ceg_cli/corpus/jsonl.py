"""JSONL documents: one JSON object a line with ``id``, ``title``, ``text``, ``url``.

A LangChain document is read too, plain (``page_content`` and ``metadata``,
whose ``id``, ``title``, ``url`` are read, and ``source`` as the url when it is
a web address) or in LangChain's serialized ``lc`` form (``corpus.langchain``),
as a record's contexts are.

A bad line costs only itself: it is reported through ``on_warning`` with the
file and line number, and the rest of the file is still read. Lines are guarded
as a responses file's are (``ceg_cli.textio``): one longer than
``MAX_LINE_BYTES`` is skipped without being held, and JSON nested too deeply
for the parser is a bad line, not a crash.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from io import BufferedIOBase, BufferedReader
from pathlib import Path
from typing import Any

from ceg_cli.corpus.langchain import NotADocument, document_fields
from ceg_cli.corpus.mediawiki import CountingReader, open_dump
from ceg_cli.errors import InputError
from ceg_cli.textio import MAX_LINE_BYTES, capped_lines
from ceg_cli.types import Document

# An unpaired UTF-16 surrogate, which JSON can escape ("\ud800") but UTF-8
# cannot encode: storing or embedding it would crash the build.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _open_span(path: Path, start: int, end: int | None) -> BufferedIOBase:
    raw = open(path, "rb")
    raw.seek(start)
    return BufferedReader(CountingReader(raw, None, None if end is None else end - start))


def read_jsonl(
    path: Path,
    *,
    on_warning: Callable[[str], None] | None = None,
    on_read: Callable[[int], None] | None = None,
    span: tuple[int, int | None, int] | None = None,
) -> Iterator[Document]:
    """Yield a ``Document`` for each valid line of a JSONL file (``.gz`` too).

    ``id`` may be a string or an integer (a missing one becomes the line
    number); ``title`` defaults to the id; ``text`` must be a non-empty string.
    ``on_read`` is told how many bytes of the file (compressed) each read took.
    ``span`` reads only part of an uncompressed file: ``(start, end, line)``,
    bytes ``start`` to ``end`` (None: the end of the file) cut at line
    boundaries, whose first line is line number ``line`` of the file.
    """
    warn = on_warning or (lambda _message: None)
    try:
        stream = open_dump(path, on_read) if span is None else _open_span(path, *span[:2])
        with stream:
            before = 0 if span is None else span[2] - 1
            for counted, raw in capped_lines(stream):
                number = before + counted
                if raw is None:
                    warn(f"{path}:{number}: line is longer than {MAX_LINE_BYTES:,} bytes; "
                         "line skipped")
                    continue
                document = _parse_line(raw, number, path, warn)
                if document is not None:
                    yield document
    except (OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None


def _parse_line(
    raw: bytes, number: int, path: Path, warn: Callable[[str], None]
) -> Document | None:
    where = f"{path}:{number}"
    try:
        # utf-8-sig: a byte-order mark on the first line is not part of the JSON.
        line = raw.decode("utf-8-sig" if number == 1 else "utf-8").strip()
    except UnicodeDecodeError as exc:
        warn(f"{where}: not UTF-8 ({exc.reason} at byte {exc.start}); line skipped")
        return None
    if not line:
        return None
    if number == 1 and line.startswith("["):
        raise InputError(
            f"{path}: looks like a JSON array; expected JSON Lines (one object a line)"
        )
    try:
        record: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        warn(f"{where}: invalid JSON ({exc.msg} at column {exc.colno}); line skipped")
        return None
    except RecursionError:
        warn(f"{where}: JSON nested too deeply; line skipped")
        return None
    if not isinstance(record, dict):
        warn(f"{where}: expected a JSON object, got {type(record).__name__}; line skipped")
        return None
    try:
        fields = document_fields(record)
    except NotADocument as exc:
        warn(f"{where}: {exc}; line skipped")
        return None
    text_key = fields.text_key or "text"
    for key, value in (("id", fields.id), ("title", fields.title), (text_key, fields.text),
                       ("url", fields.url)):
        if isinstance(value, str) and _SURROGATE.search(value):
            warn(f"{where}: field '{key}' holds an unpaired surrogate escape; line skipped")
            return None

    text = fields.text
    if not isinstance(text, str):
        got = "missing" if text is None else f"a {type(text).__name__}, not a string"
        warn(f"{where}: field '{text_key}' is {got}; line skipped")
        return None
    text = text.strip()
    if not text:
        warn(f"{where}: field '{text_key}' is empty; line skipped")
        return None

    raw_id = fields.id
    # bool is an int subclass, but `true` is no id anyone meant.
    if raw_id is None:
        doc_id = str(number)
    elif isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) and str(raw_id):
        doc_id = str(raw_id)
    else:
        warn(f"{where}: field 'id' must be a string or an integer; line skipped")
        return None

    title = fields.title
    if title is not None and not isinstance(title, str):
        warn(f"{where}: field 'title' is not a string; using the id as title")
        title = None
    url = fields.url
    if url is not None and not isinstance(url, str):
        warn(f"{where}: field 'url' is not a string; ignored")
        url = None
    return Document(
        id=doc_id,
        title=title.strip() if title and title.strip() else doc_id,
        text=text,
        url=url or None,
        source=str(path),
    )
