"""The HTML report: one self-contained file a reviewer opens from disk.

``ReportBuilder`` takes output records (``ceg_cli.report.records.to_record``) one at a
time and keeps a compact copy; ``render`` turns them and the run's summary
into one page: a static overview (counts, gate, judge, index, verdict chart)
written by ``html_overview``, and the responses embedded as JSON and drawn by a small script
one page at a time, so a 10,000-response report opens about as fast as a
50-response one. ``write_report`` does both for a records file or iterable.

Safety: checked text and evidence are data. The overview escapes everything
with ``html.escape``; the responses travel as JSON in a
``<script type="application/json">`` block with ``<``, ``>``, ``&`` and
U+2028/2029 escaped, so nothing in them can end the block; the script builds
the page with ``textContent``/``setAttribute`` only, and the page's Content
Security Policy lets only its own script run (by hash) and forbids every
network request.

The embedded data (``REPORT_DATA_VERSION``)::

    {"v": 2, "passages": [[title, url, text, doc_id, context?], ...],
     "contexts": [[id, title, url, text], ...],
     "responses": [{"id", "line", "label", "q", "err", "parts", "segs",
                    "fields"?, "regen"?, "ctx"?, "src"?, "cc"?}, ...]}

``parts`` is the response cut at segment boundaries, ``[[text, segment or
-1], ...]``, so the script needs no offsets (Python and JavaScript count
characters outside the BMP differently). A segment is ``{"l": label,
"v": verdict, "s": score, "r": reason, "c": [[marker, passage, similarity]],
"e": [[passage, similarity]], "p"?: [[piece, null or [kind, evidence]], ...]}``: ``p``,
on a segment with spans (the record's ``spans``), is its text cut at them, each span
with its kind and what a passage says instead ("'1809' (Abraham Lincoln)", or null),
drawn as ``<mark>``; passages are indices into ``passages``, each
passage stored once. ``e`` (the evidence the judge saw) is kept for flagged
segments only unless ``all_evidence``: supported segments keep their
citations, and the report stays a third of the records' size.

A record checked against its own contexts (``html_contexts``) adds ``ctx``:
``{"f": field, "n": [index into contexts, ...] (position n is n[n - 1]),
"hl": [[position, start, end, marker], ...]}``, the cited passages' spans in
UTF-16 units; ``src``: its ``evidence_source`` when not ``index``; ``cc``: its
``citation_check`` (``html_contexts.record_check``); and a segment ``cc``
(``html_contexts.segment_check``). A passage cut from a context has its
position as a fifth item. Contexts, like passages, are stored once: many
questions share a retrieved passage. An index-mode record has none of these.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import InputError
from ..types import FACTUAL
from .gate import GateResult, Summary
from .html_contexts import CitationTally, highlights, record_check, record_contexts, segment_check
from .html_overview import citation_figures, escape, filters, finite_number, overview
from .html_overview import index_info as _index_info  # noqa: F401  (tests import it here)
from .output import OutputError
from .records import RESERVED_KEYS, from_record

REPORT_DATA_VERSION = 2
#: Most carried-through input fields shown per response, and their length.
MAX_FIELDS = 12
MAX_FIELD_CHARS = 300
#: A regeneration value the report cannot read is shown as JSON, cut here.
MAX_RAW_CHARS = 20_000

# Every character that could end the JSON's <script> block or be read as a
# line terminator by older JavaScript parsers; lone surrogates, which UTF-8
# cannot encode, are escaped the same way.
_UNSAFE_IN_SCRIPT = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


def embed_json(value: Any) -> str:
    """``value`` as JSON that is safe inside ``<script type="application/json">``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _UNSAFE_IN_SCRIPT.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _raw(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)[:MAX_RAW_CHARS]


def iter_records(
    path: Path, warn: Callable[[str], None] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for each record of a ``ceg check`` output file.

    Unlike ``output.read_finished`` this never truncates the file: writing a
    report must leave its input as it was. A torn last line (an interrupted
    run) is skipped with a warning; any other bad line is an ``InputError``.
    """
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    with fh:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError):
                if not raw.endswith(b"\n"):
                    if warn is not None:
                        warn(f"{path}: line {number} is incomplete (interrupted run?); skipped")
                    return
                raise InputError(f"{path}: line {number}: not JSON") from None
            if not isinstance(record, dict) or "schema_version" not in record:
                raise InputError(
                    f"{path}: line {number}: not a ceg check output record (no schema_version)"
                )
            yield number, record


class ReportBuilder:
    """Collects records for one report; each is compacted as it is added."""

    def __init__(self, *, all_evidence: bool = False) -> None:
        self.all_evidence = all_evidence
        self.passages: list[list[Any]] = []
        self._passage_at: dict[tuple[Any, ...], int] = {}
        self.contexts: list[list[str | None]] = []
        self._context_at: dict[tuple[str | None, ...], int] = {}
        #: The records' own citation figures, for a summary that has none.
        self.citations = CitationTally()
        self.responses: list[dict[str, Any]] = []
        #: Counted from the records; ``render`` uses it when given no summary.
        self.summary = Summary()
        self.judges: dict[str, str] = {}

    def add(self, record: Mapping[str, Any], where: str = "record") -> None:
        """Add one output record; ``where`` names it in error messages."""
        try:
            self.summary.add(from_record(dict(record)))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"{where}: not a ceg check output record ({exc})") from None
        judge = record.get("judge")
        if isinstance(judge, Mapping) and judge.get("name"):
            self.judges.setdefault(str(judge["name"]), str(judge.get("method") or ""))
        self.responses.append(self._response(record))

    def _response(self, record: Mapping[str, Any]) -> dict[str, Any]:
        parts, segs = self._text_and_segments(record.get("response"), record.get("segments"))
        out: dict[str, Any] = {
            "id": "" if record.get("id") is None else str(record["id"]),
            "line": record.get("line") if isinstance(record.get("line"), int) else None,
            "label": str(record.get("label", "")),
            "q": _text(record.get("question")),
            "err": _text(record.get("error")),
            "parts": parts,
            "segs": segs,
        }
        # The contexts field is shown as contexts, the citation check beside its sentences.
        contexts = record_contexts(record)
        hidden = {"regeneration", "citation_check", contexts[0] if contexts else None}
        shown = [k for k in record if k not in RESERVED_KEYS and k not in hidden]
        if record.get("input") is not None:
            shown.append("input")
        fields = {}
        for key in shown[:MAX_FIELDS]:
            value = record[key]
            text = value if isinstance(value, str) else _raw(value)
            fields[str(key)] = " ".join(text.split())[:MAX_FIELD_CHARS]
        if fields:
            out["fields"] = fields
        if record.get("regeneration") is not None:
            out["regen"] = self._regeneration(record["regeneration"])
        if contexts is not None:
            field, items = contexts
            raw = record.get("segments")
            segments = [s for s in raw if isinstance(s, Mapping)] if isinstance(raw, list) else []
            out["ctx"] = {"f": field, "n": [self._context(c) for c in items],
                          "hl": highlights(segments, items)}
        source = record.get("evidence_source")
        if isinstance(source, str) and source != "index":
            out["src"] = source
        check = record_check(record.get("citation_check"))
        if check is not None:
            out["cc"] = check
            self.citations.add(check)
        return out

    def _context(self, context: Any) -> int:
        key = (context.id, context.title, context.url, context.text)
        at = self._context_at.get(key)
        if at is None:
            at = self._context_at[key] = len(self.contexts)
            self.contexts.append(list(key))
        return at

    def _text_and_segments(self, response: Any, segments: Any) -> tuple[list[Any], list[Any]]:
        text = response if isinstance(response, str) else ""
        raw = [s for s in segments if isinstance(s, Mapping)] if isinstance(segments, list) else []
        segs = [self._segment(s) for s in raw]
        for seg, out in zip(raw, segs):
            pieces = _pieces(text, seg)
            if pieces is not None:
                out["p"] = pieces
        return _cut(text, raw), segs

    def _segment(self, seg: Mapping[str, Any]) -> dict[str, Any]:
        label = str(seg.get("label", ""))
        out: dict[str, Any] = {
            "l": label,
            "v": str(seg.get("verdict", "")),
            "s": finite_number(seg.get("score")),
            "r": str(seg.get("reason") or ""),
        }
        cites: list[list[Any]] = []
        for c in seg.get("citations") or []:
            if isinstance(c, Mapping):
                marker = c.get("marker")
                marker = marker if isinstance(marker, int) else len(cites) + 1
                cites.append([marker, self._passage(c), finite_number(c.get("similarity"))])
        if cites:
            out["c"] = cites
        check = segment_check(seg.get("citation_check"))
        if check is not None:
            out["cc"] = check
        if label != FACTUAL or self.all_evidence:
            evidence = [
                [self._passage(e), finite_number(e.get("similarity"))]
                for e in seg.get("evidence") or []
                if isinstance(e, Mapping)
            ]
            if evidence:
                out["e"] = evidence
        return out

    def _passage(self, p: Mapping[str, Any]) -> int:
        key: tuple[Any, ...] = (str(p.get("passage_id")), str(p.get("doc_id")), str(p.get("text")))
        # A context's passage is numbered within its record: its context tells it apart.
        context = p.get("context") if p.get("source") == "context" else None
        if isinstance(context, int) and not isinstance(context, bool):
            key += (context, p.get("start"), p.get("end"), _text(p.get("title")),
                    _text(p.get("url")))
        else:
            context = None
        at = self._passage_at.get(key)
        if at is None:
            at = self._passage_at[key] = len(self.passages)
            entry: list[Any] = [_text(p.get("title")), _text(p.get("url")),
                                str(p.get("text") or ""), _text(p.get("doc_id"))]
            if context is not None:
                entry.append(context)
            self.passages.append(entry)
        return at

    def _regeneration(self, value: Any) -> dict[str, Any]:
        """Attempts to show side by side; the format is not fixed, so read it loosely.

        Accepted: a list of attempts, or ``{"attempts": [...], "final": ...}``;
        an attempt is a record-like object (``response``/``text``, ``label``,
        ``segments``) or a plain string. Anything else is shown as JSON.
        """
        attempts = value.get("attempts") if isinstance(value, Mapping) else value
        if not isinstance(attempts, list) or not attempts:
            return {"raw": _raw(value)}
        out = [self._attempt(a) for a in attempts]
        final = value.get("final") if isinstance(value, Mapping) else None
        if final is not None and final != attempts[-1]:
            out.append(self._attempt(final))
        out[-1]["final"] = True
        return {"attempts": out}

    def _attempt(self, attempt: Any) -> dict[str, Any]:
        if isinstance(attempt, str):
            return {"label": "", "parts": [[attempt, -1]], "segs": []}
        if not isinstance(attempt, Mapping):
            return {"raw": _raw(attempt)}
        text = attempt.get("response", attempt.get("text"))
        parts, segs = self._text_and_segments(text, attempt.get("segments"))
        out: dict[str, Any] = {"label": str(attempt.get("label") or ""), "parts": parts,
                               "segs": segs}
        if attempt.get("error"):
            out["err"] = str(attempt["error"])
        return out

    def data(self) -> dict[str, Any]:
        """The JSON the page's script reads (see the module docstring)."""
        return {"v": REPORT_DATA_VERSION, "passages": self.passages, "contexts": self.contexts,
                "responses": self.responses}

    def render(
        self,
        summary: Summary | None = None,
        gate: GateResult | None = None,
        *,
        index: Path | str | None = None,
        title: str | None = None,
        source: str | None = None,
    ) -> str:
        """The whole page as a string.

        ``summary`` defaults to the one counted from the records; ``gate``
        None shows "not evaluated"; ``index`` is the index directory (its
        ``meta.json`` is read for the model and size, when present).
        """
        s = summary if summary is not None else self.summary
        css, js = _assets("report.css"), _assets("report.js")
        rate = f"{s.nonfactual_rate:.1%}"
        values = {
            "csp": f"default-src 'none'; script-src {csp_hash(js)}; style-src {csp_hash(css)}; "
            "img-src data:; base-uri 'none'; form-action 'none'",
            "version": escape(__version__),
            "title": escape(title or f"ceg report: {s.responses:,} responses, {rate} nonfactual"),
            "css": css,
            "overview": overview(s, gate, self.judges, index, source,
                                 citation_figures(s, self.citations)),
            "filters": filters(Counter(r["label"] for r in self.responses)),
            "data": embed_json(self.data()),
            "js": js,
        }
        return string.Template(_assets("page.html")).substitute(values)

    def write(self, path: Path, summary: Summary | None = None,
              gate: GateResult | None = None, **options: Any) -> int:
        """Write the page to ``path`` (replaced whole, never half-written); returns bytes."""
        data = self.render(summary, gate, **options).encode("utf-8", errors="replace")
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise OutputError(f"{path}: cannot write the report ({exc.strerror})") from None
        return len(data)


def _cut(text: str, segments: list[Mapping[str, Any]]) -> list[list[Any]]:
    """``text`` as ``[[piece, segment index or -1], ...]`` along the segments' offsets.

    Offsets that do not fit the text (a hand-edited record) fall back to the
    segments' own texts, so every segment is still shown and highlighted.
    """
    spans = []
    for i, seg in enumerate(segments):
        start, end = seg.get("start"), seg.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= len(text)
                and text[start:end] == seg.get("text", text[start:end])):
            return _joined(text, segments)
        spans.append((start, end, i))
    spans.sort()
    parts: list[list[Any]] = []
    at = 0
    for start, end, i in spans:
        if start < at:
            return _joined(text, segments)
        if start > at:
            parts.append([text[at:start], -1])
        parts.append([text[start:end], i])
        at = end
    if at < len(text):
        parts.append([text[at:], -1])
    return parts


def _pieces(text: str, seg: Mapping[str, Any]) -> list[list[Any]] | None:
    """A flagged segment's text cut at its spans (``spans`` of the record):
    ``[[piece, None], [piece, [kind, what the evidence says or None]], ...]``; None where
    it has no span to show (none, only the whole segment's, or offsets that do not fit:
    the segment is then shown whole, as before spans)."""
    spans = seg.get("spans")
    start, end = seg.get("start"), seg.get("end")
    if not isinstance(spans, list) or not spans or not isinstance(start, int) or not isinstance(
            end, int) or not 0 <= start <= end <= len(text):
        return None
    out: list[list[Any]] = []
    at = start
    for sp in spans:
        if not isinstance(sp, Mapping) or sp.get("kind") == "segment":
            continue
        s, e = sp.get("start"), sp.get("end")
        if not (isinstance(s, int) and isinstance(e, int) and at <= s < e <= end
                and text[s:e] == sp.get("text")):
            return None
        if s > at:
            out.append([text[at:s], None])
        out.append([text[s:e], [str(sp.get("kind") or "word"), _span_evidence(sp)]])
        at = e
    if not out:
        return None
    if at < end:
        out.append([text[at:end], None])
    return out


def _span_evidence(span: Mapping[str, Any]) -> str | None:
    """What a passage says instead, in words: "'1809' (Abraham Lincoln)"; None if nothing."""
    ev = span.get("evidence")
    if not isinstance(ev, Mapping) or ev.get("value") is None:
        return None
    title = _text(ev.get("title"))
    return f"'{ev['value']}'" + (f" ({title})" if title else "")


def _joined(text: str, segments: list[Mapping[str, Any]]) -> list[list[Any]]:
    if not segments:
        return [[text, -1]] if text else []
    parts: list[list[Any]] = []
    for i, seg in enumerate(segments):
        if i:
            parts.append([" ", -1])
        parts.append([str(seg.get("text", "")), i])
    return parts


def _assets(name: str) -> str:
    """One of the page's files, shipped as package data in ``ceg_cli/report/assets``."""
    text = resources.files("ceg_cli.report").joinpath("assets", name).read_text(encoding="utf-8")
    # An inline style or script ends at the first "</": the assets must not hold one.
    if name != "page.html" and "</" in text:
        raise RuntimeError(f"report asset {name} contains '</'")
    return text


def csp_hash(text: str) -> str:
    """The Content-Security-Policy source expression that allows this inline text."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def write_report(
    path: Path,
    records: Path | str | Iterable[Mapping[str, Any]],
    summary: Summary | None = None,
    gate: GateResult | None = None,
    *,
    index: Path | str | None = None,
    title: str | None = None,
    all_evidence: bool = False,
    warn: Callable[[str], None] | None = None,
) -> ReportBuilder:
    """Write the HTML report of ``records`` (a ``ceg check`` output file, or records).

    ``summary`` and ``gate`` are the run's (``CheckRun.summary``, the result of
    ``CheckRun.finish``); without a summary one is counted from the records.
    Returns the builder, whose ``summary`` holds the counts of what was written.
    """
    builder = ReportBuilder(all_evidence=all_evidence)
    source = None
    if isinstance(records, (str, Path)):
        source = Path(records).name
        for number, record in iter_records(Path(records), warn):
            builder.add(record, f"{records}: line {number}")
    else:
        for n, item in enumerate(records, 1):
            builder.add(item, f"record {n}")
    builder.write(Path(path), summary, gate, index=index, title=title, source=source)
    return builder
