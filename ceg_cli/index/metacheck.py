"""``meta.json`` checked once, field by field, against what its readers rely on.

Every part of ceg reads ``meta.json`` (info, search, append, check, eval); a
field of the wrong type (``counts: []``, ``model.name: 5``, ``format_version:
"1"``) would otherwise surface far from its cause, as an internal error or a
nonsense message. ``check_meta`` names the first wrong field in one line.

Fields are given as dotted paths; ``sources[]`` applies to each item of the
list. Optional fields are checked only when present: indexes built before a
field existed do not have it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import IndexLoadError
from .layout import GENERATION_PATTERN

#: "required" in FIELDS: where the index has vectors / where it has none.
_VECTORS = object()
_NO_VECTORS = object()


def _int(low: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _text(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _or_null(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or test(v)


def _positive(v: Any) -> bool:
    return _number(v) and v > 0


def _object(v: Any) -> bool:
    return isinstance(v, dict)


def _one_of(*values: str) -> Callable[[Any], bool]:
    return lambda v: v in values


#: The index types (``vectors.INDEX_TYPES`` but auto; not imported: faiss and numpy).
_TYPES = ("flat", "hnsw", "ivfpq", "ivfpqfs")
_TYPES_SAID = "flat, hnsw, ivfpq or ivfpqfs"

# (dotted field, required, test, what the test wants)
FIELDS: list[tuple[str, Any, Callable[[Any], bool], str]] = [
    ("format_version", True, _int(1), "a whole number >= 1"),
    ("ceg_version", False, _text, "a version string"),
    ("created_at", False, _text, "a date string"),
    ("updated_at", False, _text, "a date string"),
    ("retrieval", False, _one_of("lexical"), "'lexical' (or absent)"),
    # An index without vectors (``"retrieval": "lexical"``, ``lexonly``) has no model or
    # FAISS entry, and must have its lexical part.
    ("model", _VECTORS, _object, "an object"),
    ("model.name", True, _text, "a model name (a string)"),
    ("model.dimension", True, _int(1), "a whole number >= 1"),
    ("model.normalized", False, lambda v: isinstance(v, bool), "true or false"),
    ("model.max_seq_length", False, _or_null(_int(1)), "a whole number or null"),
    ("model.backend", False, _text, "a backend name (a string)"),
    ("model.precision", False, _text, "a float width (a string)"),
    ("model.weights_digest", False, _text, "a digest string"),
    ("embed_text", True, _one_of("text", "title+text"), "'text' or 'title+text'"),
    ("faiss", _VECTORS, _object, "an object"),
    ("faiss.type", True, _text, "a FAISS class name (a string)"),
    ("faiss.index_type", False, _one_of(*_TYPES), _TYPES_SAID),
    ("faiss.chosen", False, _text, "a string"),
    ("faiss.requested", False, _one_of(*_TYPES), _TYPES_SAID),
    ("faiss.params", False, _object, "an object"),
    # The search settings a build chose, shown by 'ceg index info' (the file holds
    # the ones searched with).
    ("faiss.params.nlist", False, _int(1), "a whole number >= 1"),
    ("faiss.params.nprobe", False, _int(1), "a whole number >= 1"),
    ("faiss.params.efSearch", False, _int(1), "a whole number >= 1"),
    ("faiss.params.k_factor", False, _positive, "a number > 0"),
    ("faiss.params.calibration", False, _object, "an object"),
    ("faiss.target_recall", False, _or_null(_number), "a number or null"),
    ("faiss.recall_reached", False, lambda v: isinstance(v, bool), "true or false"),
    ("faiss.measured_queries", False, _int(0), "a whole number >= 0"),
    ("faiss.batch_queries_per_s", False, _or_null(_number), "a number or null"),
    ("faiss.file_size", False, _int(0), "a whole number >= 0"),
    ("faiss.file_digest", False, _text, "a digest string"),
    ("faiss.recall_at_10", False, _or_null(_number), "a number or null"),
    ("faiss.search_ms", False, _or_null(_number), "a number or null"),
    ("chunker", True, _object, "an object"),
    ("chunker.max_words", True, _int(1), "a whole number >= 1"),
    ("chunker.boundaries", True, _text, "a string"),
    ("counts", True, _object, "an object"),
    ("counts.documents", True, _int(0), "a whole number >= 0"),
    ("counts.chunks", True, _int(0), "a whole number >= 0"),
    ("sources", True, lambda v: isinstance(v, list), "a list"),
    ("sources[]", True, _object, "an object"),
    ("sources[].path", True, _text, "a path (a string)"),
    ("sources[].kind", True, _text, "a source kind (a string)"),
    ("sources[].digest", True, _text, "a digest string"),
    ("sources[].documents", True, _int(0), "a whole number >= 0"),
    ("sources[].chunks", True, _int(0), "a whole number >= 0"),
    ("lexical", _NO_VECTORS, _object, "an object"),
    ("lexical.library", True, _text, "a string"),
    ("lexical.version", True, _text, "a string"),
    ("lexical.parameters", True, _object, "an object"),
    ("lexical.text", True, _one_of("text", "title+text"), "'text' or 'title+text'"),
    ("lexical.passages", True, _int(0), "a whole number >= 0"),
    ("lexical.files", False, _object, "an object"),
    ("lexical_skipped", False, _text, "a string"),
    # An index updated in place (``generation``): the folder it names is an update's own.
    ("generation", False, _object, "an object"),
    ("generation.number", True, _int(1), "a whole number >= 1"),
    ("generation.dir", True,
     lambda v: isinstance(v, str) and re.fullmatch(GENERATION_PATTERN, v) is not None,
     "a generation folder's name (gen-NNNNNN)"),
    ("generation.base_chunks", True, _int(0), "a whole number >= 0"),
    ("generation.delta_chunks", True, _int(0), "a whole number >= 0"),
    ("generation.removed", True, _int(0), "a whole number >= 0"),
    ("build", False, _object, "an object"),
    ("build.engine", True, _text, "an engine name (a string)"),
    ("build.workers", True, _int(1), "a whole number >= 1"),
]


def _required(required: Any, meta: dict[str, Any]) -> bool:
    if required is _VECTORS:
        return meta.get("retrieval") != "lexical"
    if required is _NO_VECTORS:
        return meta.get("retrieval") == "lexical"
    return bool(required)


def check_meta(meta: Any, meta_path: Path) -> None:
    """Fail with one line naming the first field of ``meta`` that is missing or wrong."""
    problem = meta_problem(meta)
    if problem is not None:
        raise IndexLoadError(f"{meta_path}: {problem}; rebuild the index")


def meta_problem(meta: Any) -> str | None:
    """What is wrong with ``meta`` as a ceg index's meta.json (the first field), or None."""
    if not isinstance(meta, dict):
        return f"not a ceg index's meta.json (a JSON object is expected, found {_shown(meta)})"
    for field, required, test, wanted in FIELDS:
        for name, value in _values(meta, field, _required(required, meta)):
            if value is _MISSING:
                return f"field '{name}' missing"
            if not test(value):
                return f"field '{name}' should be {wanted}, found {_shown(value)}"
    return None


def file_problem(meta_path: Path) -> str | None:
    """What makes the file ``meta_path`` not a ceg index's meta.json, or None."""
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"unreadable as JSON ({exc})"
    return meta_problem(meta)


_MISSING = object()


def _values(meta: dict[str, Any], field: str, required: bool) -> list[tuple[str, Any]]:
    """(concrete name, value or _MISSING) of ``field`` wherever its parents are present.

    A field of an optional parent that is absent is not looked for; one whose
    parent is present but of the wrong type was already reported by the parent.
    """
    found: list[tuple[str, Any]] = [("", meta)]
    parts = field.split(".")
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        items = part.endswith("[]")
        key = part[:-2] if items else part
        step: list[tuple[str, Any]] = []
        for name, holder in found:
            if not isinstance(holder, dict):
                continue
            here = f"{name}.{key}" if name else key
            if key not in holder:
                if last and required:
                    step.append((here, _MISSING))
                continue
            value = holder[key]
            if items and isinstance(value, list):
                step.extend((f"{here}[{i}]", v) for i, v in enumerate(value))
            elif not items:
                step.append((here, value))
        found = step
    return found


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
