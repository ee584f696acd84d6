"""LangChain documents, as JSON holds them: the fields of a document object.

A LangChain ``Document`` reaches a JSON file in one of two forms:

- plain, as ``model_dump()`` or a hand-written export gives it:
  ``{"page_content": ..., "metadata": {...}, "id": ...}``;
- serialized, as ``langchain_core.load.dumpd`` (and ``dumps``) writes it:
  ``{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "document",
  "Document"], "kwargs": {"page_content": ..., "metadata": {...}, "id": ...,
  "type": "Document"}}``, where ``kwargs`` holds only the fields that were set
  (no ``metadata`` when it was empty), and a plain dict holding an ``lc`` key
  is wrapped as ``{"__lc_escaped__": {...}}`` so that it is not read as an
  object.

``document_fields`` reads either, and ceg's own ``{"text", "id", "title",
"url"}``, into one shape, so that a record's contexts and a JSONL corpus read
the same documents the same way. It checks the structure only; whoever calls it
checks the values' types, with its own way of saying what is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The last part of a serialized document's ``id``: ``["langchain", "schema",
#: "document", "Document"]`` (the namespace ``Document`` declares), or the module
#: path of a class that declares none (``["langchain_core", "documents", "base",
#: "Document"]``).
DOCUMENT_CLASS = "Document"
#: The ``type`` of a serialized object: a class and its arguments, an object it
#: could not serialize (``repr`` only), a secret named by an environment variable.
SERIALIZED_TYPES = ("constructor", "not_implemented", "secret")
#: Where ``dumpd`` wraps a plain dict that holds an ``lc`` key.
ESCAPED = "__lc_escaped__"


class NotADocument(ValueError):
    """An object that is not a document in any form read here; the message says what it is."""


@dataclass(frozen=True)
class DocumentFields:
    """A document object's fields as ceg names them, values as found (not yet checked).

    ``text_key`` is the key that held the text (``text`` or ``page_content``),
    None when neither is there; ``text`` is then None too.
    """

    text_key: str | None
    text: Any
    id: Any
    title: Any
    url: Any


def is_serialized(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is a LangChain object in the ``lc`` serialization format."""
    lc = obj.get("lc")
    return (
        isinstance(lc, int) and not isinstance(lc, bool)
        and obj.get("type") in SERIALIZED_TYPES and isinstance(obj.get("id"), list)
    )


def document_fields(obj: Mapping[str, Any]) -> DocumentFields:
    """The text, id, title and url of a document object in any form this module reads.

    ``text`` (ceg's) wins over ``page_content`` (LangChain's); ``id``,
    ``title`` and ``url`` are read from the object, else from its ``metadata``;
    a ``metadata.source`` that is a web address is the url. Raises
    ``NotADocument`` for a serialized LangChain object that is not a document
    and for a LangChain document whose ``metadata`` is not an object.
    """
    if is_serialized(obj):
        obj = _constructor_kwargs(obj)
    key = "text" if "text" in obj else "page_content" if "page_content" in obj else None
    metadata = _unescape(obj.get("metadata"))
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, Mapping):
        if key == "page_content":
            raise NotADocument(f"'metadata' must be an object, got {_json_name(metadata)}")
        metadata = {}  # ceg's own form has no metadata: another tool's field, not read
    url = _first(obj, metadata, "url")
    if url is None:
        source = metadata.get("source")
        if isinstance(source, str) and source.startswith(("http://", "https://")):
            url = source
    return DocumentFields(
        text_key=key,
        text=None if key is None else obj[key],
        id=_first(obj, metadata, "id"),
        title=_first(obj, metadata, "title"),
        url=url,
    )


def _first(obj: Mapping[str, Any], metadata: Mapping[str, Any], name: str) -> Any:
    """The object's own ``name``, else its metadata's: ``model_dump()`` writes a
    document without an id as ``"id": null``, its metadata may hold one."""
    value = obj.get(name)
    return metadata.get(name) if value is None else value


def _constructor_kwargs(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The fields of a serialized document (its ``kwargs``); anything else refused."""
    name = ".".join(str(part) for part in obj["id"][:8]) or "object"
    if obj["type"] != "constructor" or obj["id"][-1:] != [DOCUMENT_CLASS]:
        kind = "" if obj["type"] == "constructor" else f" ({obj['type']})"
        raise NotADocument(f"a serialized LangChain {name}{kind}, not a Document")
    kwargs = obj.get("kwargs")
    if not isinstance(kwargs, Mapping):
        raise NotADocument(
            f"a serialized LangChain Document whose 'kwargs' is {_json_name(kwargs)}, "
            "not an object"
        )
    return kwargs


def _unescape(value: Any) -> Any:
    """A plain dict that ``dumpd`` escaped, as it was."""
    if isinstance(value, Mapping) and len(value) == 1 and ESCAPED in value:
        return value[ESCAPED]
    return value


def _json_name(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity"
    return {
        dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
        int: "number", float: "number",
    }.get(type(value), type(value).__name__)
