"""One ``ceg check`` run: settings, reading, checking, writing, resuming, gating.

Kept apart from the CLI so that a notebook or another tool can run exactly
what the command runs; the CLI only parses flags and renders the summary.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import chain, islice
from pathlib import Path
from typing import Any

from ..errors import InputError, UsageError
from ..index.lexical import DEFAULT_RETRIEVAL
from ..index.searchwidth import parse as parse_search_width
from ..judges.cuts import OPTION as CUT_OPTION
from ..judges.cuts import SETTINGS, Cuts, setting_of
from ..judges.cuts import SOURCE_OPTION as CUT_SOURCE_OPTION
from ..lang.codes import AUTO, check_language
from ..report.gate import GateOptions, GateResult, Summary, evaluate_gate
from ..report.output import (
    RecordWriter,
    cut_torn_tail,
    read_finished,
    refuse_index_files,
    refuse_same_files,
)
from ..report.records import from_record, to_record
from ..types import CheckedResponse, ResponseInput
from .ctxsearch import DEFAULT_CONTEXT_RETRIEVAL
from .evidence import RunEvidence, wants_index
from .pipeline import DEFAULT_EVIDENCE, DEFAULT_QUERY, CheckOptions, check
from .responses import FieldNames, read_responses
from .retrieve import DEFAULT_THRESHOLD, DEFAULT_TOP_K, RetrievalOptions


@dataclass(frozen=True)
class RunSettings:
    responses: str
    index: Path
    out: Path | None
    judge: str
    check: CheckOptions
    fields: FieldNames
    gate: GateOptions
    resume: bool
    judge_options: dict[str, Any]
    #: Rewrite nonfactual responses with the LLM, up to ``max_attempts`` times.
    regenerate: bool = False
    max_attempts: int = 2
    #: The LLM that rewrites (``llm:MODEL``); default: the judge, if it is an LLM.
    rewriter: str | None = None
    #: Where the index's embedder computes queries (``--device``: auto, cpu or cuda).
    device: str = "cpu"
    #: Search settings that replace the ones the index was built with (``--search-width``).
    search_width: dict[str, int] = field(default_factory=dict)

    @classmethod
    def resolve(
        cls,
        *,
        responses: str,
        index: Path,
        out: Path | None = None,
        judge: str = "offline",
        top_k: int | None = None,
        threshold: float | None = None,
        query: str | None = None,
        retrieval: str | None = None,
        response_field: str = "response",
        question_field: str | None = None,
        max_rate: float | None = None,
        max_responses: int | None = None,
        resume: bool = False,
        judge_options: dict[str, Any] | None = None,
        regenerate: bool = False,
        max_attempts: int = 2,
        rewriter: str | None = None,
        device: str = "cpu",
        evidence: str | None = None,
        contexts_field: str | None = None,
        contexts_retrieval: str | None = None,
        citation_pattern: str | None = None,
        min_citation_recall: float | None = None,
        min_citation_precision: float | None = None,
        search_width: str | None = None,
        language: str = AUTO,
        judge_threshold: float | None = None,
        judge_threshold_source: str | None = None,
    ) -> RunSettings:
        """Checked settings (``check/options.py``'s table checks each value, as it
        checks the CLI's and a project file's); ``None`` takes the library's default
        (the CLI reads ``CEG_TOP_K``, ``CEG_THRESHOLD``, ``CEG_QUERY`` and ``CEG_RETRIEVAL``
        before it gets here)."""
        from .options import check_options

        checked = check_options({
            "index": index, "judge": judge, "top_k": top_k, "threshold": threshold,
            "query": query, "retrieval": retrieval, "response_field": response_field,
            "question_field": question_field, "max_nonfactual_rate": max_rate,
            "max_nonfactual_responses": max_responses, "regenerate": regenerate,
            "max_attempts": max_attempts, "rewriter": rewriter, "device": device,
            "evidence": evidence, "contexts_field": contexts_field,
            "contexts_retrieval": contexts_retrieval, "citation_pattern": citation_pattern,
            "min_citation_recall": min_citation_recall,
            "min_citation_precision": min_citation_precision, "search_width": search_width,
            "judge_threshold": judge_threshold,
        })
        top_k = DEFAULT_TOP_K if top_k is None else checked["top_k"]
        threshold = DEFAULT_THRESHOLD if threshold is None else checked["threshold"]
        query = query or DEFAULT_QUERY
        retrieval = retrieval or DEFAULT_RETRIEVAL
        max_rate = checked["max_nonfactual_rate"]
        min_citation_recall = checked["min_citation_recall"]
        min_citation_precision = checked["min_citation_precision"]
        index = checked["index"]
        # The judge's cut, for every setting (None: the judge's own per setting).
        judge_options = dict(judge_options or {})
        if checked["judge_threshold"] is not None:
            judge_options[CUT_OPTION] = checked["judge_threshold"]
            if judge_threshold_source is not None:  # a project file's, not the flag
                judge_options[CUT_SOURCE_OPTION] = judge_threshold_source
        if rewriter is not None and not regenerate:
            raise UsageError("--rewriter is used only with --regenerate")
        if device == "cuda":
            # Refused wherever given, even where no model would load (offline judge,
            # contexts ranked by BM25): a run never says it used what it could not.
            from ..index.devices import resolve_device

            resolve_device(device)
        evidence = evidence or DEFAULT_EVIDENCE
        language = check_language(language)
        contexts_retrieval = contexts_retrieval or DEFAULT_CONTEXT_RETRIEVAL
        if contexts_field is not None and evidence == "index":
            raise UsageError("--contexts-field is read only with --evidence auto, contexts or both")
        for option, least in (("--min-citation-recall", min_citation_recall),
                              ("--min-citation-precision", min_citation_precision)):
            if least is not None and evidence == "index":
                # The gate would always fail "with nothing to measure", though the
                # answers may well cite their contexts: the mode never reads them.
                raise UsageError(
                    f"{option}: citations are checked against each record's own contexts, "
                    "which --evidence index does not read; use --evidence auto, contexts "
                    "or both"
                )
        if resume and out is None:
            raise UsageError("--resume needs --out FILE: there is no file to resume into")
        if out is not None and out.is_dir():
            raise UsageError(f"--out {out}: is a directory; name a file")
        if out is not None:
            refuse_same_files([("responses file", responses), ("--out", out)])
            refuse_index_files([("--out", out)], index)
        return cls(
            responses=responses,
            index=index,
            out=out,
            judge=judge,
            check=CheckOptions(
                RetrievalOptions(top_k, threshold, retrieval), query=query, evidence=evidence,
                citation_pattern=citation_pattern, contexts_retrieval=contexts_retrieval,
                language=language,
            ),
            fields=_field_names(response_field, question_field, contexts_field),
            gate=GateOptions(
                max_nonfactual_rate=max_rate, max_nonfactual_responses=max_responses,
                min_citation_recall=min_citation_recall,
                min_citation_precision=min_citation_precision,
            ),
            resume=resume,
            judge_options=judge_options,
            regenerate=regenerate,
            max_attempts=max_attempts,
            rewriter=rewriter,
            device=device,
            search_width=parse_search_width(search_width),
        )


def _field_names(
    response_field: str, question_field: str | None, contexts_field: str | None
) -> FieldNames:
    """The fields read: a field the user names replaces the defaults tried for it."""
    default = FieldNames()
    return FieldNames(
        response=response_field,
        question=(question_field,) if question_field is not None else default.question,
        question_alternatives=() if question_field is not None else default.question_alternatives,
        contexts=(contexts_field,) if contexts_field is not None else default.contexts,
        response_alternatives=(
            default.response_alternatives if response_field == default.response else ()
        ),
    )


def _made_from(record: dict[str, Any]) -> tuple[Any, ...]:
    """What an output record says of its input line: number, id, readable, response."""
    error = record.get("label") == "error"
    return (record.get("line"), record.get("id"), error, _digest(record.get("response")))


def _input_made_from(item: ResponseInput) -> tuple[Any, ...]:
    error = item.error is not None
    return (item.line, item.id, error, _digest(None if error else item.response))


def _digest(text: str | None) -> bytes | None:
    if text is None:
        return None
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).digest()


def _finished_record(record: dict[str, Any], out: Path, number: int) -> CheckedResponse:
    try:
        return from_record(record)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise InputError(
            f"{out}: record {number} is not a complete ceg output record; "
            "refusing to resume into a file ceg did not write"
        ) from None


def _skip_finished(
    items: Iterator[ResponseInput], finished: list[tuple[Any, ...]], out: Path, responses: str
) -> None:
    """Consume the input lines ``finished`` holds records of; refuse any that differ."""
    source = "standard input" if responses == "-" else responses
    start_over = f"to start over, run without --resume (it replaces {out})"
    for number, made_from in enumerate(finished, 1):
        item = next(items, None)
        if item is None:
            raise InputError(
                f"--resume: {out} holds {len(finished)} records but {source} has only "
                f"{number - 1} response lines: it was made from another file; {start_over}"
            )
        if _input_made_from(item) != made_from:
            line, rid = made_from[0], made_from[1]
            there = f"line {item.line}, id {item.id!r}"
            if (item.line, item.id) == (line, rid):
                there += ", with another response"
            raise InputError(
                f"--resume: {out} was not made from {source}: its record {number} is "
                f"line {line}, id {rid!r}, where {source} has {there}; {start_over}"
            )


class CheckRun:
    """Checks every response of a file and keeps the summary for the gate."""

    def __init__(
        self,
        settings: RunSettings,
        *,
        on_bad_line: Callable[[str], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        from ..judges import create_judge

        self.settings = settings
        self.on_bad_line = on_bad_line
        # The judge first: an unknown --judge is reported even when the index is
        # missing, and no index is left open when the judge cannot be created.
        # A judge that has something to say once (an endpoint without
        # log-probabilities) says it where the run's warnings go.
        judge_options = {**settings.judge_options, "on_warning": on_warning}
        self.judge = create_judge(settings.judge, judge_options)
        #: The judge's cut in each setting (None: it cuts no score, e.g. llm:).
        self.cuts: Cuts | None = getattr(self.judge, "cuts", None)
        self.rewriter = None
        self._rewriter_judge: Any = None
        if settings.regenerate:
            from .regenerate import LlmRewriter

            # A separate rewriter lets a cheap judge (offline) flag and an LLM repair;
            # it rewrites, it decides nothing: the judge's cut is not its option.
            if settings.rewriter is not None:
                rewriter_options = {k: v for k, v in judge_options.items()
                                    if k not in (CUT_OPTION, CUT_SOURCE_OPTION)}
                self._rewriter_judge = create_judge(settings.rewriter, rewriter_options)
            self.rewriter = LlmRewriter(self._rewriter_judge or self.judge)
        self.on_warning = on_warning
        self._pending, first = self._peek(settings)
        # What the run checks against: the index opened (and its model loaded) only
        # when needed, its retrieval method resolved, the contexts' search.
        self.evidence = RunEvidence(
            settings.index, settings.check, device=settings.device,
            context_fields=settings.fields.contexts, search_width=settings.search_width,
            judge=self.judge,
            use_index=self._wants_index(settings, first), on_warning=on_warning,
        )
        self.index: Any = self.evidence.index
        self.settings = settings = replace(settings, check=self.evidence.check)
        self.contexts = self.evidence.contexts
        self.summary = Summary(
            judge=self.judge.name,
            index=str(settings.index) if self.index is not None else "",
        )
        self.resumed = 0
        #: Responses rewritten by --regenerate, and how many came out all supported.
        self.regenerated = 0
        self.repaired = 0
        self._junit: Any = None

    def execute(
        self,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        *,
        junit: Path | None = None,
    ) -> None:
        """Check every pending response, writing each record as it is finished."""
        settings = self.settings
        if junit is not None:
            from ..report.ci import JUnitWriter

            # Streams test cases to a spool file: memory stays flat for big runs.
            self._junit = JUnitWriter(junit)
        resume_into = settings.out if settings.resume else None
        finished: list[tuple[Any, ...]] = []
        if resume_into is not None:
            for number, record in enumerate(read_finished(resume_into, cut=False), 1):
                finished.append(_made_from(record))
                self._count(_finished_record(record, resume_into, number))
                self.resumed += 1
        judge_info = {"name": self.judge.name, "method": self.judge.method}
        cuts = self.cuts
        pending = self._pending
        if resume_into is not None:
            # Records are written one per input line, in input order: the
            # finished ones must be the input's first lines, or the output
            # was made from another file. Checked before the output is touched.
            _skip_finished(pending, finished, resume_into, settings.responses)
            cut_torn_tail(resume_into)
        writer = RecordWriter(settings.out, append=settings.resume)
        try:
            checked_stream = check(self._report_bad(pending), self.index, self.judge,
                                   settings.check, self.contexts)
            for checked, attempts in self._regenerated(checked_stream):
                record = to_record(checked, judge_info, attempts, cuts)
                writer.write(record)
                self._count(checked)
                if on_record is not None:
                    on_record(record)
        finally:
            writer.close()

    def _regenerated(
        self, stream: Iterable[CheckedResponse]
    ) -> Iterator[tuple[CheckedResponse, tuple[CheckedResponse, ...] | None]]:
        """Pairs each result with its regeneration attempts (None without --regenerate)."""
        if self.rewriter is None:
            for checked in stream:
                yield checked, None
            return
        from .regenerate import regenerate_batch

        it = iter(stream)
        # The gate judges the responses as given; regeneration is the repair
        # CEG proposes, reported beside them.
        while batch := list(islice(it, self.settings.check.batch_size)):
            results = regenerate_batch(
                batch, self.index, self.judge, self.rewriter, self.settings.check,
                max_attempts=self.settings.max_attempts,
                concurrency=int(self.settings.judge_options.get("concurrency", 4)),
                contexts=self.contexts,
            )
            for checked, regen in zip(batch, results):
                if regen is not None:
                    self.regenerated += 1
                    self.repaired += regen.repaired
                yield checked, regen.attempts if regen is not None else ()

    def _report_bad(self, items):  # type: ignore[no-untyped-def]
        source = "<stdin>" if self.settings.responses == "-" else self.settings.responses
        for item in items:
            item = self.evidence.prepare(item, source)
            if self.on_bad_line is not None:
                for message in item.warnings:
                    self.on_bad_line(message)
                if item.error is not None:
                    self.on_bad_line(item.error)
            yield item

    def _peek(self, settings: RunSettings) -> tuple[Iterator[ResponseInput], ResponseInput | None]:
        """The responses, and the first readable one (whether an index is needed depends on it)."""
        items = iter(read_responses(settings.responses, settings.fields))
        seen: list[ResponseInput] = []
        first = None
        for item in items:
            seen.append(item)
            if item.error is None:
                first = item
                break
        return chain(seen, items), first

    def _wants_index(self, settings: RunSettings, first: ResponseInput | None) -> bool:
        # A method so that a run fed from Python (ceg_cli.api) decides by its own argument.
        return wants_index(settings.check.evidence, settings.index, first)

    def describe_cuts(self, *, used: bool = False) -> str:
        """The judge's cut in the settings this run may judge in (by ``--evidence``), or,
        with ``used``, in those its records were judged in: "0.8333 (protocol, index
        setting); 0.8333 (protocol, contexts setting)"."""
        if self.cuts is None:
            return "none (the judge gives a label, not a score)"
        settings = cut_settings(self.settings.check.evidence)
        if used and self.summary.evidence_sources:
            seen = {setting_of(source) for source in self.summary.evidence_sources}
            settings = tuple(s for s in SETTINGS if s in seen)
        return self.cuts.describe(settings)

    def _count(self, checked: Any) -> None:
        outcome = self.summary.add(checked)
        if self._junit is not None:
            self._junit.add(outcome)

    def finish(self, *, markdown: Path | None = None) -> GateResult:
        """Decide the gate and write the CI files."""
        from ..report.ci import write_markdown_summary

        result = evaluate_gate(self.summary, self.settings.gate)
        if self._junit is not None:
            self._junit.close(self.summary)
        if markdown is not None:
            write_markdown_summary(markdown, self.summary, result, append=True)
        return result

    def llm_usage(self) -> dict[str, int] | None:
        """LLM calls, cache hits and tokens (judge and rewriter), if an LLM was used."""
        usages = [
            u for u in (getattr(j, "usage", None) for j in (self.judge, self._rewriter_judge))
            if isinstance(u, dict)
        ]
        if not usages:
            return None
        return {k: sum(u.get(k, 0) for u in usages) for k in usages[0]}

    def close(self) -> None:
        self.evidence.close()
        for judge in (self.judge, self._rewriter_judge):
            close_judge = getattr(judge, "close", None)
            if close_judge is not None:
                close_judge()


def cut_settings(evidence: str) -> tuple[str, ...]:
    """The settings a run with ``--evidence`` judges in: ``index`` and ``both`` the
    index setting (``cuts.setting_of``), ``contexts`` the contexts setting, ``auto``
    either, record by record."""
    if evidence in ("index", "both"):
        return ("index",)
    if evidence == "contexts":
        return ("contexts",)
    return SETTINGS
