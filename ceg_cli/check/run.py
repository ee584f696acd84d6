"""One ``ceg check`` run: settings, reading, checking, writing, resuming, gating.

Kept apart from the CLI so that a notebook or another tool can run exactly
what the command runs; the CLI only parses flags and renders the summary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from itertools import chain, islice
from pathlib import Path
from typing import Any

from ..index.lexical.lexonly import searched_by_bm25
from ..judges.cuts import OPTION as CUT_OPTION
from ..judges.cuts import SETTINGS, Cuts, setting_of
from ..judges.cuts import SOURCE_OPTION as CUT_SOURCE_OPTION
from ..lang.codes import AUTO
from ..progress import Progress
from ..report.gate import GateResult, Summary, evaluate_gate
from ..report.output import RecordWriter, cut_torn_tail, read_finished
from ..report.records import to_record
from ..types import CheckedResponse, ResponseInput
from .evidence import RecordEvidence, RunEvidence, wants_index
from .pipeline import check
from .responses import read_responses
from .resume import _finished_record, _made_from, _skip_finished
from .settings import RunSettings

__all__ = ["CheckRun", "FedRun", "RunSettings"]


class CheckRun:
    """Checks every response of a file and keeps the summary for the gate."""

    def __init__(
        self,
        settings: RunSettings,
        *,
        on_bad_line: Callable[[str], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.on_bad_line = on_bad_line
        self.on_warning = on_warning
        self.judge: Any = None
        self.rewriter: Any = None
        self._rewriter_judge: Any = None
        self.index: Any = None
        #: Whether the index has no vectors (built with --retrieval lexical): its passages
        #: are found by BM25 alone, and the run's first line says so.
        self.lexical_only = False
        self.contexts: Any = None
        #: The judge's cut in each setting (None: it cuts no score, e.g. llm:).
        self.cuts: Cuts | None = None
        #: The cuts this run's records were decided at ("0.6429 (protocol, zh)"), in order.
        self.cuts_used: dict[str, None] = {}
        #: The Ray workers that check for this run (``--engine ray``), else None.
        self._ray: Any = None
        if settings.engine.name == "ray":
            self._start_on_ray(settings)
        else:
            self._load(settings)
        self.summary = Summary(
            judge=self.judge_info["name"],
            index=str(settings.index) if self.reads_index else "",
        )
        self.resumed = 0
        #: Responses rewritten by --regenerate, and how many came out all supported.
        self.regenerated = 0
        self.repaired = 0
        self._junit: Any = None

    def _load(self, settings: RunSettings) -> None:
        """Create the judge, the rewriter and the context search, and open the index: the
        run checks in this process."""
        from ..judges import create_judge

        on_warning = self.on_warning
        # The judge first: an unknown --judge is reported even when the index is
        # missing, and no index is left open when the judge cannot be created.
        # A judge that has something to say once (an endpoint without
        # log-probabilities) says it where the run's warnings go.
        judge_options = {**settings.judge_options, "on_warning": on_warning}
        self.judge = create_judge(settings.judge, judge_options)
        self.cuts = getattr(self.judge, "cuts", None)
        if settings.regenerate:
            from .regenerate import LlmRewriter

            # A separate rewriter lets a cheap judge (offline) flag and an LLM repair;
            # it rewrites, it decides nothing: the judge's cut is not its option.
            if settings.rewriter is not None:
                rewriter_options = {k: v for k, v in judge_options.items()
                                    if k not in (CUT_OPTION, CUT_SOURCE_OPTION)}
                self._rewriter_judge = create_judge(settings.rewriter, rewriter_options)
            self.rewriter = LlmRewriter(self._rewriter_judge or self.judge)
        self._pending, first = self._peek(settings)
        # What the run checks against: the index opened (and its model loaded) only
        # when needed, its retrieval method resolved, the contexts' search.
        self.evidence: RecordEvidence = RunEvidence(
            settings.index, settings.check, device=settings.device,
            context_fields=settings.fields.contexts, search_width=settings.search_width,
            judge=self.judge,
            use_index=self._wants_index(settings, first), on_warning=on_warning,
        )
        self.index = self.evidence.index
        self.lexical_only = self.index is not None and self.index.lexical_only
        self.settings = replace(settings, check=self.evidence.check)
        self.contexts = self.evidence.contexts
        self.judge_info = {"name": self.judge.name, "method": self.judge.method}

    def _start_on_ray(self, settings: RunSettings) -> None:
        """Start the Ray workers that check for this run, each with its judge and index;
        this process reads the responses, decides each one's evidence and writes what
        they return."""
        from ..judges import check_judge_name
        from .ray_run import RayChecks

        # As a local run: an unknown --judge before the responses file, which comes
        # before the index.
        check_judge_name(settings.judge)
        if settings.regenerate and settings.rewriter is not None:
            check_judge_name(settings.rewriter)
        self._pending, first = self._peek(settings)
        self._ray = RayChecks(settings, self._wants_index(settings, first), FedRun,
                              on_warning=self.on_warning)
        self.settings = self._ray.settings
        self.lexical_only = self._ray.lexical_only
        # The workers' judge: its name, method and cuts, as the local run's.
        self.judge_info = self._ray.judge_info
        self.cuts = self._ray.cuts
        self.evidence = RecordEvidence(
            self.settings.check, context_fields=settings.fields.contexts,
            reads_index=self._ray.reads_index, on_warning=self.on_warning,
        )

    def execute(
        self,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        *,
        junit: Path | None = None,
        progress: Progress | None = None,
    ) -> None:
        """Check every pending response, writing each record as it is finished.

        ``progress`` gets what only a run on Ray has to show (its workers alive)."""
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
        judge_info = self.judge_info
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
            for checked, attempts in self.results(self._report_bad(pending), progress):
                record = to_record(checked, judge_info, attempts, cuts)
                writer.write(record)
                if record["judge"]["threshold"] is not None:
                    self.cuts_used.setdefault(
                        f"{record['judge']['threshold']:g} ({record['judge']['threshold_source']})")
                self._count(checked)
                if on_record is not None:
                    on_record(record)
        finally:
            writer.close()

    @property
    def reads_index(self) -> bool:
        """Whether the run checks against the index (here, or on its Ray workers)."""
        return self.evidence.reads_index

    def results(
        self, items: Iterable[ResponseInput], progress: Progress | None = None
    ) -> Iterator[tuple[CheckedResponse, tuple[CheckedResponse, ...] | None]]:
        """``checked``, in this process or on the run's Ray workers, whichever it uses."""
        if self._ray is not None:
            return self._ray.checked(items, self, progress)
        return self.checked(items)

    def checked(
        self, items: Iterable[ResponseInput]
    ) -> Iterator[tuple[CheckedResponse, tuple[CheckedResponse, ...] | None]]:
        """Each response checked, with its regeneration attempts (None without
        --regenerate), in order: what a record is made of. A Ray worker runs this on the
        ranges it is given, so its records are the local run's."""
        stream = check(items, self.index, self.judge, self.settings.check, self.contexts)
        return self._regenerated(stream)

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
        if used and self.cuts_used and (self.cuts.languages or self.cuts.scripts):
            # Cuts per language: the ones this run's records were decided at.
            return "; ".join(self.cuts_used)
        settings = cut_settings(self.settings.check.evidence)
        if used and self.summary.evidence_sources:
            seen = {setting_of(source) for source in self.summary.evidence_sources}
            settings = tuple(s for s in SETTINGS if s in seen)
        language = self.settings.check.language
        if language != AUTO and (self.cuts.languages or self.cuts.scripts):
            # --language names the records' language: its cut ("0.6429 (protocol, zh)").
            cuts = dict.fromkeys(self.cuts.for_language(s, language) for s in settings)
            return "; ".join(c.describe() for c in cuts)
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
        if self._ray is not None:
            return self._ray.llm_usage()
        usages = [
            u for u in (getattr(j, "usage", None) for j in (self.judge, self._rewriter_judge))
            if isinstance(u, dict)
        ]
        if not usages:
            return None
        return {k: sum(u.get(k, 0) for u in usages) for k in usages[0]}

    def close(self) -> None:
        """Close the index and the judges, or stop the Ray workers (and Ray, if this run
        started it)."""
        if self._ray is not None:
            self._ray.close()
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


class FedRun(CheckRun):
    """A ``CheckRun`` fed its responses by the caller (the Python API, a Ray worker's
    ranges) instead of reading a file: the index is opened when ``use_index`` says so."""

    def __init__(self, settings: RunSettings, use_index: bool,
                 on_warning: Callable[[str], None] | None = None) -> None:
        self._use_index = use_index
        super().__init__(settings, on_warning=on_warning)

    def _peek(self, settings: RunSettings) -> tuple[Iterator[ResponseInput], None]:
        return iter(()), None

    def _wants_index(self, settings: RunSettings, first: ResponseInput | None) -> bool:
        return self._use_index


def lexical_only_note(run: CheckRun) -> str:
    """What the run's first line adds where the index has no vectors: how it is searched."""
    return f"; {searched_by_bm25(run.settings.index)}" if run.lexical_only else ""
