"""The Python API: ``Checker`` checks answers from a test or a script, as ``ceg check`` does.

A ``Checker`` loads the judge and the index (if any) once; each ``check`` then costs
only the answer's own work. Every option is the CLI's, checked by the CLI's own
``RunSettings.resolve`` (a bad one is a ``UsageError`` with the CLI's message); each
answer goes through the CLI's line parser and pipeline, and ``to_dict()`` is
``ceg check``'s record for the same line. What is public is ``ceg_cli.__all__``;
it changes only with the output's ``schema_version`` (docs/api.md).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .check.responses import parse_line
from .check.run import FedRun, RunSettings
from .errors import UsageError
from .report.records import SCHEMA_VERSION, to_record
from .types import FACTUAL, CheckedResponse, CitationCheck, Evidence, ResponseInput, Span

#: Where an answer given from Python "is" in messages (the CLI says FILE:LINE).
SOURCE = "<python>"

#: Options of ``ceg check`` that a ``Checker`` takes, by the keyword's name.
#: (--out, --resume, --junit, --report, --summary and the gate's thresholds are
#: about a run's files; a test decides with ``assert_grounded``.)
RUN_OPTIONS = (
    "top_k", "threshold", "query", "retrieval", "lexical_max_terms", "evidence",
    "contexts_field",
    "contexts_retrieval", "language",
    "response_field", "question_field", "citation_pattern", "device",
    "regenerate", "max_attempts", "rewriter", "judge_threshold",
    # Where the answers are checked: in this process, or by Ray workers (``--engine ray``).
    "engine", "ray_address", "workers", "gpus_per_worker",
)
LLM_OPTIONS = ("llm_base_url", "concurrency", "temperature", "no_cache", "cache_dir",
               "unparsable_as", "llm_prompt")
#: Options for a checker model (minicheck:, hhem:, nli:).
JUDGE_OPTIONS = ("judge_precision", "batch_tokens")


@dataclass(frozen=True)
class CheckedSegment:
    """One sentence (or list item) of an answer and the judge's decision on it."""

    text: str
    #: factual, nonfactual or not_judged.
    label: str
    #: Why: supported, contradicted, not_enough_evidence, no_claim or judge_error.
    verdict: str
    #: The judge's confidence that the sentence is supported, in [0, 1].
    score: float
    reason: str
    #: The passages that support it (empty unless it is supported).
    citations: tuple[Evidence, ...]
    #: Every passage it was judged on, best first.
    evidence: tuple[Evidence, ...]
    start: int
    end: int
    #: What the answer's own [n] markers came to, when it cited its contexts.
    citation_check: CitationCheck | None = None
    #: None for a whole sentence; ``clause`` or ``length`` for a piece of a sentence
    #: too long to be one segment (the record's ``split``, docs/output.md).
    split: str | None = None
    #: The stretches of the answer its judge found unsupported (empty unless it is
    #: flagged): ``answer[span.start:span.end] == span.text``; ``span.kind`` is number,
    #: name, word, date or segment; ``span.evidence`` the value a passage gives instead
    #: (``value``, and ``passage``: an index into ``evidence``), or None.
    spans: tuple[Span, ...] = ()


class CheckResult:
    """One checked answer: ``label``, ``segments``, and ``to_dict()``, ``ceg check``'s record."""

    def __init__(self, checked: CheckedResponse, record: dict[str, Any]) -> None:
        self.checked = checked
        self._record = record
        self.segments: tuple[CheckedSegment, ...] = tuple(
            CheckedSegment(
                text=r.segment.text, label=r.verdict.label, verdict=r.verdict.verdict,
                score=float(r.verdict.score), reason=r.verdict.reason,
                citations=tuple(r.evidence[i] for i in r.verdict.cited),
                evidence=r.evidence, start=r.segment.start, end=r.segment.end,
                citation_check=r.citation, split=r.segment.split, spans=r.spans,
            )
            for r in checked.segments
        )

    @property
    def label(self) -> str:
        """factual, nonfactual, not_judged, or error (the input could not be checked)."""
        return self.checked.label

    @property
    def error(self) -> str | None:
        return self.checked.error

    @property
    def response(self) -> str:
        return self.checked.input.response

    @property
    def question(self) -> str | None:
        return self.checked.input.question

    @property
    def language(self) -> str | None:
        """The language the answer was read in (``de``, ``zh``; ``und-Xxxx`` when only its
        script was known); None for an error."""
        return self.checked.language

    @property
    def flagged(self) -> tuple[CheckedSegment, ...]:
        """The segments not found factual (nonfactual, or not judged)."""
        return tuple(s for s in self.segments if s.label != FACTUAL)

    @property
    def annotated(self) -> str | None:
        return self._record.get("annotated")

    def to_dict(self) -> dict[str, Any]:
        """The JSONL record ``ceg check`` writes for this answer (a fresh copy)."""
        return json.loads(json.dumps(self._record))

    def __repr__(self) -> str:
        return (f"CheckResult(label={self.label!r}, segments={len(self.segments)}, "
                f"flagged={len(self.flagged)})")


class Checker:
    """Checks answers against an index, their own contexts, or both.

    ``Checker(index=None, judge=None, *, config=None, **options)``: ``options`` are
    ``ceg check``'s, by their keyword names (``top_k=5``, ``evidence="both"``,
    ``no_cache=True``); the defaults are the CLI's. The project file (``ceg.toml`` or
    ``[tool.ceg]``, found as the CLI finds it) sets what the keywords leave out
    (``None`` is "left out"): ``config=PATH`` names the file, ``config=False`` reads
    none. ``CEG_*`` variables that set options are not read: what a test checks does
    not depend on the shell it runs in (``CEG_CONFIG`` and ``CEG_NO_CONFIG``, which
    say which file applies, are).
    """

    def __init__(self, index: str | Path | None = None, judge: str | None = None, *,
                 config: str | Path | bool | None = None, **options: Any) -> None:
        from .check.options import OPTIONS, check_options, ignored_options, judge_options

        unknown = sorted(set(options) - set(RUN_OPTIONS) - set(LLM_OPTIONS)
                         - set(JUDGE_OPTIONS))
        if unknown:
            raise UsageError(
                f"Checker: unknown option {unknown[0]!r}; the options are "
                f"{', '.join(RUN_OPTIONS + LLM_OPTIONS + JUDGE_OPTIONS)}"
            )
        from_file = _project_values(config)
        # A cut the file sets says so where the run shows it (not "--judge-threshold").
        cut_source = (f"judge_threshold in {_project_file(config)}"
                      if "judge_threshold" in from_file
                      and options.get("judge_threshold") is None else None)
        options = {**from_file, **{k: v for k, v in options.items() if v is not None}}
        index = index if index is not None else from_file.get("index")
        judge = judge if judge is not None else from_file.get("judge")
        options.pop("index", None)
        options.pop("judge", None)
        # Every value checked as the CLI checks it (one table), before anything loads.
        # None, as for every option, is "not given": the default.
        given = check_options({**options, "judge": judge or OPTIONS["judge"].default}
                              | ({"index": index} if index is not None else {}))
        evidence = given.get("evidence")
        if index is None and evidence in ("index", "both"):
            raise UsageError(f"--evidence {evidence}: needs an index (Checker(index=...))")
        run_options = {k: v for k, v in given.items() if k in RUN_OPTIONS and v is not None}
        self.settings = RunSettings.resolve(
            responses=SOURCE,
            index=given.get("index") or Path(),
            judge=given["judge"],
            # The library computes on the CPU unless told (the CLI's --device is auto).
            judge_options=judge_options({**given, "device": given.get("device") or "cpu"}),
            judge_threshold_source=cut_source,
            **run_options,
        )
        for message in ignored_options(given):
            # Python's channel for "you may not mean this": shown once, filterable.
            warnings.warn(message, UserWarning, stacklevel=2)
        # As the CLI: --evidence contexts never reads the index.
        use_index = index is not None and self.settings.check.evidence != "contexts"
        self._run = FedRun(self.settings, use_index=use_index)
        self._closed = False
        self._judge_info = self._run.judge_info

    @property
    def judge(self) -> str:
        return str(self._judge_info["name"])

    @property
    def index(self) -> Path | None:
        return self.settings.index if self._run.reads_index else None

    def check(self, response: str, *, question: str | None = None,
              contexts: Sequence[Any] | None = None) -> CheckResult:
        """Check one answer; ``contexts`` (strings, ``{"text", "title", "id", "url"}``
        objects or LangChain documents) are its own evidence, and need no index."""
        self._refuse_closed()
        if not isinstance(response, str):
            raise UsageError(f"response: expected a string, got {type(response).__name__}")
        record: dict[str, Any] = {"response": response}
        if question is not None:
            record["question"] = question
        if contexts is not None:
            record["contexts"] = _plain_contexts(contexts)
        result = next(self._stream([record], field_names=False))
        if result.error is not None:
            # A bad argument, not a bad line of a file: said at once.
            raise UsageError(result.error)
        return result

    def check_many(self, items: Iterable[str | Mapping[str, Any]]) -> Iterator[CheckResult]:
        """Check many answers, batched as ``ceg check`` batches a file; results stream
        out in input order. An item is an answer (a string) or a record as a line of
        a responses file holds it (``response``, ``question``, ``contexts``, or the
        fields the options name); a record that cannot be checked comes out with
        ``label == "error"``, as ``ceg check`` writes it."""
        self._refuse_closed()
        return self._stream(items, field_names=True)

    def _refuse_closed(self) -> None:
        if self._closed:
            raise UsageError(
                "this Checker is closed (close() or the end of its `with` block): "
                "make a new Checker to check more answers"
            )

    def _stream(self, items: Iterable[Any], *, field_names: bool) -> Iterator[CheckResult]:
        run = self._run
        names = self.settings.fields
        if not field_names:  # check()'s own record uses the default names
            from .check.responses import FieldNames

            names = FieldNames()

        def inputs() -> Iterator[ResponseInput]:
            for line, item in enumerate(items, 1):
                # A stream begun before close() stops at the next answer, not in sqlite.
                self._refuse_closed()
                obj = {"response": item} if isinstance(item, str) else item
                try:
                    raw = json.dumps(obj).encode("utf-8")
                except (TypeError, ValueError) as exc:
                    yield ResponseInput(line, line, error=f"{SOURCE}:{line}: not JSON ({exc})")
                    continue
                yield run.evidence.prepare(parse_line(raw, line, SOURCE, names), SOURCE)

        regenerating = run.settings.regenerate
        for checked, attempts in run.results(inputs()):
            record = to_record(checked, self._judge_info, attempts if regenerating else None,
                               run.cuts)
            yield CheckResult(checked, record)

    def close(self) -> None:
        """Close the index and the judge (an LLM judge's cache); a closed Checker
        checks nothing more (``check`` raises ``UsageError``). Closing twice is fine."""
        if not self._closed:
            self._closed = True
            self._run.close()

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: The keys of a project file a Checker reads: its keywords (the rest of ``[check]``
#: is about a run's files and gate).
CHECKER_KEYS = ("index", "judge", *RUN_OPTIONS, *LLM_OPTIONS, *JUDGE_OPTIONS)


def _project_file(config: str | Path | bool | None) -> Path | None:
    """The project file a Checker reads, ``config`` as ``Checker`` takes it."""
    from . import config as project

    if config is False:
        return None
    if config is None or config is True:
        return project.find()
    if isinstance(config, (str, Path)) and str(config).strip():
        return Path(config)
    raise UsageError(f"Checker: config={config!r}: a path, False (no file) or None "
                     "(the nearest ceg.toml or [tool.ceg])")


def _project_values(config: str | Path | bool | None) -> dict[str, Any]:
    """What the project file sets for ``ceg check`` that a Checker takes (checked, paths
    relative to the file); ``config`` as ``Checker`` takes it."""
    path = _project_file(config)
    if path is None:
        return {}
    from .cli.projectfile import load_for_api

    settings = load_for_api(path).values_for(("check",))
    return {key: s.value for key, s in settings.items() if key in CHECKER_KEYS}


def _plain_contexts(contexts: Sequence[Any]) -> Any:
    """Contexts as JSON holds them: LangChain documents (``page_content``) as objects,
    as ``Document.model_dump()`` writes them (``id`` included: the document's own, which
    wins over its metadata's)."""
    if isinstance(contexts, str) or not isinstance(contexts, Sequence):
        return contexts  # parse_contexts says what is wrong, naming the field
    out = []
    for c in contexts:
        if hasattr(c, "page_content"):
            out.append({"page_content": c.page_content,
                        "metadata": dict(getattr(c, "metadata", None) or {}),
                        "id": getattr(c, "id", None)})
        else:
            out.append(c)
    return out


__all__ = ["Checker", "CheckResult", "CheckedSegment", "SCHEMA_VERSION"]
