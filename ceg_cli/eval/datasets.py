"""Labelled benchmarks as ``ResponseInput``s plus gold labels, for ``ceg eval``.

Four formats, one ``Example`` type:

- ``felm``: FELM rows (``prompt``, ``response``, ``segmented_response``,
  ``labels``; ``ref``/``ref_contents`` become the corpus). The checked
  segments are FELM's own, so the gold labels line up one to one.
- ``halueval``: HaluEval QA items (``knowledge``, ``question``,
  ``right_answer``, ``hallucinated_answer``): two responses per item, joined by
  a pair id; every ``knowledge`` passage is a corpus document.
- ``fever``: FEVER claims (``claim``, ``label``, ``evidence``): the claim is a
  one-segment response; NOT ENOUGH INFO claims are skipped; the gold evidence
  page titles give retrieval recall.
- ``jsonl``: ``response`` plus either ``segments: [{"text", "label"}]`` or a
  response ``label``; optional ``id``, ``question``/``prompt``, ``pair``,
  ``evidence_ids`` and ``evidence_titles``, and the item's own evidence in the
  fields ``ceg check`` reads (``contexts``, ``retrieved_contexts``,
  ``retrieval_context`` or ``--contexts-field``).

Asked for (``own_contexts``), a FELM row's ``ref_contents`` and a HaluEval
item's ``knowledge`` become that item's contexts, so it can be judged against
its own documents (``ceg eval --evidence contexts``) instead of a pooled index.

A labelled benchmark is read whole. A line that is not JSON, or a FELM or
generic row that is malformed, stops the run with the file, line and field. A
HaluEval or FEVER row whose text field holds no text (null, NaN, an empty list:
what converted copies of those benchmarks carry) is left out with a one-line
message in ``Dataset.bad_rows``, and the other rows run; a list of strings is
joined and a number is written out, as the text they stand for.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ..corpus.contexts import CONTEXT_FIELDS, ContextsError, find_contexts
from ..errors import UsageError
from ..types import Context, ResponseInput, Segment

FORMATS = ("felm", "halueval", "fever", "jsonl")


@dataclass(frozen=True)
class Example:
    """One response to check, with what a human said about it.

    ``label`` is the gold label of the whole response (True = factual);
    ``segment_labels`` the gold label of each of ``input.segments`` when the
    benchmark labels segments. ``pair`` joins the right and the hallucinated
    answer of one question (``role`` says which is which). ``evidence_ids`` and
    ``evidence_titles`` name the corpus documents that hold the gold evidence.
    """

    input: ResponseInput
    label: bool
    segment_labels: tuple[bool, ...] | None = None
    pair: str | None = None
    role: str | None = None
    evidence_ids: frozenset[str] = frozenset()
    evidence_titles: frozenset[str] = frozenset()


@dataclass
class Dataset:
    """A benchmark file read into examples, and the corpus it carries (if any)."""

    path: Path
    format: str
    examples: list[Example]
    #: Lines not turned into examples on purpose (FEVER's NOT ENOUGH INFO).
    skipped: int = 0
    #: Corpus documents (``id``, ``title``, ``text``, ``url``) shipped with the data.
    documents: list[dict[str, str]] = field(default_factory=list)
    #: What the corpus documents embed: HaluEval passages have no title worth embedding.
    embed_text: str = "title+text"
    #: FELM rows whose ``response`` was not text (NaN, null, a number: FELM's own
    #: ``eval/all.jsonl`` has such rows) and was rebuilt from their segments.
    rebuilt_responses: list[int] = field(default_factory=list)
    #: Rows left out, one message each naming file, line and field (``RowError``).
    bad_rows: list[str] = field(default_factory=list)
    #: FELM's references and HaluEval's knowledge become each item's contexts.
    own_contexts: bool = False
    #: The fields a generic row's contexts are read from (None: not read).
    contexts_fields: tuple[str, ...] | None = CONTEXT_FIELDS

    @property
    def has_corpus(self) -> bool:
        return bool(self.documents)


def load_dataset(
    path: Path,
    format: str | None = None,
    *,
    limit: int | None = None,
    own_contexts: bool = False,
    contexts_fields: tuple[str, ...] | None = CONTEXT_FIELDS,
) -> Dataset:
    """Read ``path`` in ``format`` (detected from the first record's fields when None).

    ``limit`` keeps the first N records (items, for HaluEval: 2N responses);
    the corpus still holds every document, so retrieval is not made easier.
    ``own_contexts`` gives each FELM and HaluEval item its own documents as
    contexts; ``contexts_fields`` are where a generic row's contexts are read
    (None: not read).
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    records = list(_records(path))
    if not records:
        raise UsageError(f"{path}: no records")
    if format is None:
        format = detect_format(path, records[0][0], records[0][1])
    elif format not in FORMATS:
        raise UsageError(f"--format {format}: unknown; choose one of: {', '.join(FORMATS)}")
    reader = _READERS[format]
    dataset = Dataset(path, format, [], own_contexts=own_contexts,
                      contexts_fields=contexts_fields)
    for n, (line, record) in enumerate(records):
        try:
            reader(dataset, n, line, record, keep=limit is None or n < limit)
        except RowError as exc:
            dataset.bad_rows.append(str(exc))
    if not dataset.examples:
        first = f" (first row left out: {dataset.bad_rows[0]})" if dataset.bad_rows else ""
        raise UsageError(f"{path}: no labelled examples in {format} format{first}")
    return dataset


class RowError(UsageError):
    """One row cannot be read; ``load_dataset`` leaves it out and reads on."""


def detect_format(path: Path, line: int, record: Mapping[str, Any]) -> str:
    """The format whose required fields the record has."""
    keys = set(record)
    if {"segmented_response", "labels"} <= keys:
        return "felm"
    if {"right_answer", "hallucinated_answer"} <= keys:
        return "halueval"
    if {"claim", "label"} <= keys:
        return "fever"
    if "response" in keys:
        return "jsonl"
    raise UsageError(
        f"{path}:{line}: cannot tell the format from the fields ({', '.join(sorted(keys))}); "
        "expected FELM (segmented_response, labels), HaluEval (right_answer, "
        "hallucinated_answer), FEVER (claim, label) or JSONL (response); "
        "or pass --format"
    )


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        with open(path, encoding="utf-8-sig") as fh:
            for number, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                try:
                    record = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise UsageError(
                        f"{path}:{number}: invalid JSON ({exc.msg} at column {exc.colno})"
                    ) from None
                if not isinstance(record, dict):
                    raise UsageError(f"{path}:{number}: expected a JSON object")
                yield number, record
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None


def _get(record: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = record.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        got = "missing" if value is None else f"of type {type(value).__name__}"
        raise UsageError(f"{where}: field '{key}' is {got}; expected a {kind.__name__}")
    return value


def _text(record: Mapping[str, Any], key: str, where: str) -> str:
    """The text of ``record[key]``; a list of strings is joined by spaces and a
    number written out; anything else that is not text is a ``RowError``."""
    value = record.get(key)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = " ".join(v.strip() for v in value if v.strip())
    elif isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    elif isinstance(value, float) and math.isfinite(value):
        value = str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str) and value.strip():
        return value
    got = "missing" if key not in record else _describe(record[key])
    raise RowError(f"{where}: field '{key}' is {got}; expected text")


def _row_id(record: Mapping[str, Any], line: int, where: str) -> str | int:
    """A row's ``id``: a string or an integer as given (an integral float becomes
    an integer), the line number when it is missing, null or empty."""
    value = record.get("id")
    if value is None or value == "":
        return line
    if isinstance(value, str) or isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise RowError(f"{where}: field 'id' is {_describe(value)}; expected a string or an integer")


def _describe(value: Any) -> str:
    """What a JSON value is, for a message: null, NaN, empty, a list, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "infinite"
    if isinstance(value, str):
        return "empty"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    if isinstance(value, dict):
        return "an object"
    return f"of type {type(value).__name__}"


def _optional_str(record: Mapping[str, Any], key: str, where: str) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise UsageError(
            f"{where}: field '{key}' is of type {type(value).__name__}; expected a str"
        )
    return value


# --- segments -----------------------------------------------------------------


def locate_segments(response: str, texts: Sequence[str]) -> tuple[str, tuple[Segment, ...]]:
    """Segments with character offsets, for segment texts given by a benchmark.

    Each text is searched in ``response`` in order, from where the previous one
    ended. When some text is not found verbatim (the benchmark edited it), the
    offsets are taken in the segments joined by single spaces instead, and that
    joined text is returned as the response, so that ``response[s.start:s.end]
    == s.text`` always holds.
    """
    segments = []
    at = 0
    for i, text in enumerate(texts):
        text = text.strip()
        start = response.find(text, at)
        if start < 0:
            return _joined(texts)
        segments.append(Segment(i, start, start + len(text), text))
        at = start + len(text)
    return response, tuple(segments)


def _joined(texts: Sequence[str]) -> tuple[str, tuple[Segment, ...]]:
    segments = []
    at = 0
    for i, text in enumerate(texts):
        text = text.strip()
        segments.append(Segment(i, at, at + len(text), text))
        at += len(text) + 1
    return " ".join(t.strip() for t in texts), tuple(segments)


# --- FELM -----------------------------------------------------------------------


def _read_felm(ds: Dataset, n: int, line: int, record: dict[str, Any], *, keep: bool) -> None:
    where = f"{ds.path}:{line}"
    refs = record.get("ref") or []
    contents = record.get("ref_contents") or []
    if not isinstance(refs, list) or not isinstance(contents, list):
        raise UsageError(f"{where}: fields 'ref' and 'ref_contents' must be lists")
    own: set[str] = set()
    known = {d["id"] for d in ds.documents}
    contexts: list[Context] = []
    for url, text in zip(refs, contents):
        if isinstance(url, str) and isinstance(text, str) and text.strip():
            own.add(url)
            contexts.append(
                Context(len(contexts) + 1, text, url, title_from_url(url), url)
            )
            if url not in known:
                ds.documents.append(
                    {"id": url, "title": title_from_url(url), "text": text, "url": url}
                )
                known.add(url)
    if not keep:
        return
    texts = _get(record, "segmented_response", list, where)
    labels = _get(record, "labels", list, where)
    response = record.get("response")
    if not isinstance(response, str) or not response.strip():
        # The segments are what is checked; the response only gives offsets.
        response = ""
        ds.rebuilt_responses.append(line)
    if len(texts) != len(labels):
        raise UsageError(
            f"{where}: {len(texts)} segments in 'segmented_response' but {len(labels)} 'labels'"
        )
    if not all(isinstance(t, str) for t in texts):
        raise UsageError(f"{where}: field 'segmented_response' must hold strings")
    gold = tuple(_label(v, f"{where}: field 'labels'") for v in labels)
    response, segments = locate_segments(response, texts)
    rid = record.get("index", line)
    fields: dict[str, Any] = {k: record[k] for k in ("index", "domain", "source") if k in record}
    ds.examples.append(
        Example(
            ResponseInput(
                rid, line, response, _optional_str(record, "prompt", where), fields, segments,
                contexts=tuple(contexts) if ds.own_contexts else None,
                read={"contexts": "ref_contents"} if ds.own_contexts else {},
            ),
            all(gold),
            gold,
            evidence_ids=frozenset(own),
        )
    )


def title_from_url(url: str) -> str:
    """A readable title for a reference URL: its last path part, or its host."""
    parts = urlsplit(url)
    for part in reversed([p for p in parts.path.split("/") if p]):
        name = re.sub(r"\.(html?|php|aspx?)$", "", unquote(part), flags=re.I)
        name = re.sub(r"[_\-+]+", " ", name).strip()
        if re.search(r"[A-Za-z]{3}", name) and name.lower() not in {"index", "wiki"}:
            return name
    return parts.netloc or url


# --- HaluEval ---------------------------------------------------------------------


def _read_halueval(ds: Dataset, n: int, line: int, record: dict[str, Any], *, keep: bool) -> None:
    where = f"{ds.path}:{line}"
    knowledge = _text(record, "knowledge", where)
    doc_id = str(n)
    # The title is the id: the passages have none, so the index embeds text only.
    ds.documents.append({"id": doc_id, "title": doc_id, "text": knowledge})
    ds.embed_text = "text"
    if not keep:
        return
    question = _text(record, "question", where)
    pair = str(n)
    # Both answers are read before either is kept: a pair is whole or left out.
    answers = [
        (role, _text(record, key, where), gold)
        for role, key, gold in (
            ("right", "right_answer", True),
            ("hallucinated", "hallucinated_answer", False),
        )
    ]
    for role, answer, gold in answers:
        ds.examples.append(
            Example(
                ResponseInput(
                    f"{n}-{role}", line, answer, question, {"pair": pair, "role": role},
                    contexts=(Context(1, knowledge, doc_id),) if ds.own_contexts else None,
                    read={"contexts": "knowledge"} if ds.own_contexts else {},
                ),
                gold,
                pair=pair,
                role=role,
                evidence_ids=frozenset({doc_id}),
            )
        )


# --- FEVER ------------------------------------------------------------------------

_FEVER_GOLD = {"SUPPORTS": True, "REFUTES": False}
_FEVER_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-COLON-": ":"}


def _read_fever(ds: Dataset, n: int, line: int, record: dict[str, Any], *, keep: bool) -> None:
    if not keep:
        return
    where = f"{ds.path}:{line}"
    label = record.get("label")
    if label == "NOT ENOUGH INFO":
        ds.skipped += 1
        return
    if not isinstance(label, str) or label not in _FEVER_GOLD:
        got = "missing" if "label" not in record else _describe(label)
        got = repr(label) if isinstance(label, str) else got
        raise RowError(
            f"{where}: field 'label' is {got}; expected SUPPORTS, REFUTES or NOT ENOUGH INFO"
        )
    claim = _text(record, "claim", where).strip()
    rid = _row_id(record, line, where)
    titles = set()
    evidence = record.get("evidence")
    # NOT ENOUGH INFO rows have [[[annotation, null, null, null]]]; others nest lists.
    for evidence_set in evidence if isinstance(evidence, list) else []:
        for item in evidence_set if isinstance(evidence_set, list) else []:
            if isinstance(item, list) and len(item) >= 3 and isinstance(item[2], str):
                titles.add(normalize_title(item[2]))
    segment = Segment(0, 0, len(claim), claim)
    ds.examples.append(
        Example(
            ResponseInput(rid, line, claim, None, {}, (segment,)),
            _FEVER_GOLD[label],
            (_FEVER_GOLD[label],),
            evidence_titles=frozenset(titles),
        )
    )


def normalize_title(title: str) -> str:
    """A page title compared the same way whether it comes from FEVER or a dump."""
    for escaped, char in _FEVER_ESCAPES.items():
        title = title.replace(escaped, char)
    return " ".join(title.replace("_", " ").split()).casefold()


# --- generic JSONL ------------------------------------------------------------------


def _read_jsonl(ds: Dataset, n: int, line: int, record: dict[str, Any], *, keep: bool) -> None:
    if not keep:
        return
    where = f"{ds.path}:{line}"
    response = _get(record, "response", str, where)
    question = _optional_str(record, "question", where) or _optional_str(record, "prompt", where)
    raw_segments = record.get("segments")
    segments: tuple[Segment, ...] | None = None
    segment_labels: tuple[bool, ...] | None = None
    if raw_segments is not None:
        if not isinstance(raw_segments, list) or not raw_segments:
            raise UsageError(f"{where}: field 'segments' must be a non-empty list")
        texts, gold = [], []
        for i, seg in enumerate(raw_segments):
            seg_where = f"{where}: segments[{i}]"
            if not isinstance(seg, dict):
                raise UsageError(f"{seg_where}: expected an object with 'text' and 'label'")
            texts.append(_get(seg, "text", str, seg_where))
            gold.append(_label(seg.get("label"), f"{seg_where}: field 'label'"))
        response, segments = locate_segments(response, texts)
        segment_labels = tuple(gold)
    if "label" in record:
        label = _label(record["label"], f"{where}: field 'label'")
        if segment_labels is not None and label != all(segment_labels):
            raise UsageError(f"{where}: field 'label' disagrees with the segment labels")
    elif segment_labels is not None:
        label = all(segment_labels)
    else:
        raise UsageError(f"{where}: no gold label: give 'label' or 'segments' with labels")
    pair = record.get("pair")
    name, contexts = None, None
    if ds.contexts_fields is not None:
        try:
            name, contexts = find_contexts(record, ds.contexts_fields)
        except ContextsError as exc:
            raise UsageError(f"{where}: {exc}") from None
    ds.examples.append(
        Example(
            ResponseInput(
                record.get("id", line), line, response, question, {}, segments,
                contexts=contexts, read={} if name is None else {"contexts": name},
            ),
            label,
            segment_labels,
            pair=None if pair is None else str(pair),
            evidence_ids=frozenset(str(x) for x in _str_list(record, "evidence_ids", where)),
            evidence_titles=frozenset(
                normalize_title(x) for x in _str_list(record, "evidence_titles", where)
            ),
        )
    )


def _str_list(record: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = record.get(key, [])
    if not isinstance(value, list) or not all(isinstance(x, (str, int)) for x in value):
        raise UsageError(f"{where}: field '{key}' must be a list of strings")
    return [str(x) for x in value]


_LABELS = {"factual": True, "true": True, "nonfactual": False, "false": False}


def _label(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _LABELS:
        return _LABELS[value.strip().lower()]
    raise UsageError(f"{where} is {value!r}; expected true/false or 'factual'/'nonfactual'")


_READERS = {
    "felm": _read_felm,
    "halueval": _read_halueval,
    "fever": _read_fever,
    "jsonl": _read_jsonl,
}
