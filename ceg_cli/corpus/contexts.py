"""A record's own evidence: the contexts a RAG system retrieved for its answer.

A responses line may carry the passages its answer was generated from. The
shapes the evaluation tools export are read without options:

- ``contexts`` (ceg's own), RAGAS's ``retrieved_contexts``, DeepEval's
  ``retrieval_context``: tried in that order, the first present is read;
- each a list whose items are strings, objects with ``text`` (and optional
  ``id``, ``title``, ``url``), or LangChain documents (``page_content`` and
  ``metadata``, whose ``id``, ``title``, ``url`` are read, and ``source`` as
  the url when it is a web address), plain or in LangChain's serialized
  ``lc`` form (``corpus.langchain``);
- a single string is one context; ``null`` is read as no contexts at all (the
  field is absent), as pandas writes a missing value.

``--contexts-field`` names another field, with dots for a nested one
(``retrieval.docs``); a key holding a dot is matched whole first.

Anything else is a bad line (an error record naming the file, line, field and
item): a number, ``NaN``, an object without text, a list inside the list, an
id that is not a string or an integer, contexts of more than
``MAX_CONTEXT_CHARS`` characters in all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..types import Context
from .langchain import NotADocument, document_fields

#: The fields tried, in order, when ``--contexts-field`` is not given.
CONTEXT_FIELDS = ("contexts", "retrieved_contexts", "retrieval_context")
#: The most text a record's contexts may hold in all. A RAG system passes a
#: model some thousands of words; a million characters (some 170,000 words,
#: 1,700 passages to embed, a minute or more on a CPU) is far beyond that, and a
#: line past it is more likely a whole corpus pasted into one record.
MAX_CONTEXT_CHARS = 1_000_000
_ABSENT = object()


class ContextsError(ValueError):
    """A record's contexts cannot be read; the message names the field and item."""


def lookup(obj: Mapping[str, Any], name: str) -> Any:
    """The value of field ``name`` in ``obj`` (dots walk into nested objects), or ``_ABSENT``."""
    if name in obj:
        return obj[name]
    value: Any = obj
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def find_contexts(
    obj: Mapping[str, Any], names: Sequence[str]
) -> tuple[str | None, tuple[Context, ...] | None]:
    """The field that holds ``obj``'s contexts and what it holds (``None, None``: none).

    Raises ``ContextsError`` for contexts that are there but cannot be read.
    """
    for name in names:
        value = lookup(obj, name)
        if value is _ABSENT or value is None:
            continue
        return name, parse_contexts(value, name)
    return None, None


def parse_contexts(value: Any, field: str) -> tuple[Context, ...]:
    """Read one field's value as contexts, 1-based by position."""
    if isinstance(value, str):
        items: list[Any] = [value]
    elif isinstance(value, list):
        items = value
    else:
        raise ContextsError(
            f"field '{field}' must be a list of texts or of objects with 'text', "
            f"got {_type_name(value)}"
        )
    out: list[Context] = []
    total = 0
    for position, item in enumerate(items, 1):
        context = _parse_item(item, position, field)
        total += len(context.text)
        if total > MAX_CONTEXT_CHARS:
            raise ContextsError(
                f"field '{field}' holds more than {MAX_CONTEXT_CHARS:,} characters of contexts "
                f"(past it at item {position}); ceg checks against up to that much a record"
            )
        out.append(context)
    return tuple(out)


def _parse_item(item: Any, position: int, field: str) -> Context:
    where = f"field '{field}' item {position}"
    if isinstance(item, str):
        return Context(position, item)
    if not isinstance(item, dict):
        raise ContextsError(
            f"{where} must be a text or an object with 'text', got {_type_name(item)}"
        )
    try:
        fields = document_fields(item)
    except NotADocument as exc:
        raise ContextsError(f"{where}: {exc}") from None
    if fields.text_key is None:
        raise ContextsError(f"{where} has no 'text' (nor LangChain's 'page_content')")
    text = fields.text
    if not isinstance(text, str):
        raise ContextsError(
            f"{where}: '{fields.text_key}' must be a string, got {_type_name(text)}"
        )
    rid = fields.id
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, (str, int))):
        raise ContextsError(f"{where}: 'id' must be a string or an integer, got {_type_name(rid)}")
    title = _optional_text(fields.title, where, "title")
    url = _optional_text(fields.url, where, "url")
    return Context(position, text, None if rid is None else str(rid), title, url)


def _optional_text(value: Any, where: str, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value or None
    raise ContextsError(f"{where}: '{name}' must be a string, got {_type_name(value)}")


def json_type_name(value: Any) -> str:
    """The JSON name of a parsed value's type, as messages about bad fields say it."""
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        type(None): "null",
        int: "number",
        float: "number",
    }.get(type(value), type(value).__name__)


def _type_name(value: Any) -> str:
    # A context that is NaN is named so: "got number" would puzzle whoever exported it.
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity"
    return json_type_name(value)
