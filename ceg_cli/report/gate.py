"""The CI gate of ``ceg check``: a running summary and the pass/fail decision.

``Summary`` is fed one ``CheckedResponse`` at a time (``summary.add``) so a
run of any size streams; ``evaluate_gate`` turns it into a ``GateResult`` with
an exit status and one-line reasons. The JUnit and Markdown renderings are in
``ceg_cli.report.ci``. No CLI library is imported here.

Exit statuses (``ceg_cli.errors.ExitStatus``):

- **0** the gate passed.
- **1** the gate failed on a finding: the nonfactual rate is above
  ``max_nonfactual_rate`` or more responses than ``max_nonfactual_responses``
  are nonfactual. A value equal to a threshold passes ("at most R").
- **2** the input cannot vouch for a result: it had no lines at all, none of
  its lines could be read, or (by default, ``fail_on_errors``) some lines
  could not be read. Like a wholly unreadable file (``InputError``), this is
  fixed by changing the input, not by re-running.
- **3** the run cannot vouch for a result: some segments were not judged (the
  judge failed on them) and ``fail_on_not_judged`` is on (the default), or no
  segment at all could be judged. A retry may help.

When several apply, the status is the first of 2, 3, 1: a problem with the
input or the tool outranks a finding, because the numbers behind the finding
are incomplete. Every applicable reason is listed either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import ExitStatus, UsageError
from ..types import (
    CITE_UNCITED,
    CITE_UNSUPPORTED,
    CONTRADICTED,
    FACTUAL,
    JUDGE_ERROR,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    NOT_JUDGED,
    SUPPORTED,
    CheckedResponse,
    CitationCheck,
)
from .records import citation_counts

#: The label ``check`` gives a response whose input line could not be read.
ERROR = "error"
RESPONSE_LABELS = (FACTUAL, NONFACTUAL, NOT_JUDGED, ERROR)
SEGMENT_LABELS = (FACTUAL, NONFACTUAL, NOT_JUDGED)
VERDICTS = (SUPPORTED, CONTRADICTED, NOT_ENOUGH_EVIDENCE, NO_CLAIM, JUDGE_ERROR)

#: Longest segment text or message kept per flagged segment (characters).
MAX_TEXT = 300
#: Most flagged segments kept per response.
MAX_FLAGGED = 20


def shorten(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class ShownSpan:
    """An unsupported stretch of a flagged segment as the CI reports and the terminal show
    it: offsets into ``FlaggedSegment.text`` (shortened to one line), its kind, and the
    value a passage gives instead (or None)."""

    start: int
    end: int
    kind: str
    evidence: str | None = None


@dataclass(frozen=True)
class FlaggedSegment:
    """A segment that is not factual: what a reviewer needs, without evidence."""

    index: int
    text: str
    label: str
    verdict: str
    reason: str
    #: Its unsupported stretches (the record's ``spans``), in ``text``.
    spans: tuple[ShownSpan, ...] = ()

    def marked(self, before: str = "[[", after: str = "]]") -> str:
        """``text`` with each span between ``before`` and ``after``: "born in [[1812]]"."""
        out, at = [], 0
        for sp in self.spans:
            out += [self.text[at:sp.start], before, self.text[sp.start:sp.end], after]
            at = sp.end
        out.append(self.text[at:])
        return "".join(out)

    def quoted(self) -> str:
        """The spans quoted: "'1812' (date; a passage has '1809'), 'Springfield' (name)";
        empty where there are none."""
        return ", ".join(
            f"'{self.text[sp.start:sp.end]}' ({sp.kind}"
            + (f"; a passage has '{sp.evidence}')" if sp.evidence is not None else ")")
            for sp in self.spans if sp.kind != "segment"
        ) or ("the whole segment" if self.spans else "")


@dataclass(frozen=True)
class ResponseOutcome:
    """What the CI reports keep of a checked response: small, no evidence.

    ``flagged`` holds the nonfactual and not_judged segments (at most
    ``MAX_FLAGGED``, texts shortened); ``flagged_total`` counts them all.
    """

    id: str
    line: int
    label: str
    segments: int = 0
    flagged: tuple[FlaggedSegment, ...] = ()
    flagged_total: int = 0
    error: str | None = None
    #: The sentences whose citations failed (unsupported, uncited, naming no context,
    #: or citing an irrelevant context), one line each: ``[i] status: reason``.
    failed_citations: tuple[str, ...] = ()

    @classmethod
    def of(cls, checked: CheckedResponse) -> ResponseOutcome:
        flagged = [r for r in checked.segments if r.verdict.label != FACTUAL]
        return cls(
            id=str(checked.input.id),
            line=checked.input.line,
            label=checked.label,
            segments=len(checked.segments),
            flagged=tuple(
                _flagged(checked.input.response, r) for r in flagged[:MAX_FLAGGED]
            ),
            flagged_total=len(flagged),
            error=None if checked.error is None else shorten(checked.error),
            failed_citations=tuple(
                shorten(f"sentence {r.segment.index} ({r.citation.status}): "
                        f"{r.citation.reason}: {r.segment.text}")
                for r in checked.segments
                if r.citation is not None and _citation_failed(r.citation)
            )[:MAX_FLAGGED],
        )


def _flagged(response: str, r: Any) -> FlaggedSegment:
    """A flagged segment as the CI reports keep it: its text on one line, shortened, with
    the spans that fall in what is kept."""
    from ..spans import in_segment

    text, spans = shorten_spans(r.segment.text, in_segment(response, r.segment, r.spans))
    shown = tuple(
        ShownSpan(s, e, sp.kind, None if sp.evidence is None else sp.evidence.value)
        for (s, e), sp in zip(spans, r.spans) if s is not None and e is not None
    )
    return FlaggedSegment(r.segment.index, text, r.verdict.label, r.verdict.verdict,
                          shorten(r.verdict.reason), shown)


def shorten_spans(text: str, spans: list[tuple[int, int] | None], limit: int = MAX_TEXT
                  ) -> tuple[str, list[tuple[int | None, int | None]]]:
    """``shorten(text)`` and each span's offsets in it (None where the cut dropped it)."""
    short = shorten(text, limit)
    # Where each character of ``text`` went: whitespace runs become one blank, the
    # ends are stripped, and the cut keeps ``limit - 1`` characters and an ellipsis.
    where: list[int | None] = []
    at, blank = 0, False
    lead = len(text) - len(text.lstrip())
    for i, ch in enumerate(text):
        if i < lead or ch.isspace():
            blank = blank or (i >= lead)
            where.append(None)
            continue
        if blank and at:
            at += 1
        blank = False
        where.append(at)
        at += 1
    kept = len(short) - 1 if short.endswith("…") and short != " ".join(text.split()) else len(short)
    out: list[tuple[int | None, int | None]] = []
    for span in spans:
        s, e = span if span is not None else (0, 0)
        inside = [w for w in where[s:e] if w is not None and w < kept]
        out.append((inside[0], inside[-1] + 1) if inside else (None, None))
    return short, out


def _citation_failed(c: CitationCheck) -> bool:
    return c.status in (CITE_UNSUPPORTED, CITE_UNCITED) or bool(c.unresolved or c.irrelevant)


@dataclass
class Summary:
    """Counts over a run, accumulated one response at a time.

    ``judge``, ``index`` and ``seconds`` (wall time of the run) are set by the
    caller. ``examples`` keeps the first ``max_examples`` responses of each
    non-factual label (nonfactual, not_judged, error) for the Markdown summary.
    """

    judge: str = ""
    index: str = ""
    seconds: float = 0.0
    max_examples: int = 20
    responses: int = 0
    responses_by_label: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(RESPONSE_LABELS, 0)
    )
    segments: int = 0
    segments_by_label: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(SEGMENT_LABELS, 0)
    )
    #: Known verdicts always appear; a judge's own verdict names are added as met.
    segments_by_verdict: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    #: Responses with at least one not_judged segment, whatever their label.
    responses_not_fully_judged: int = 0
    #: The first bad input line and the first unjudged segment, for the gate's reasons.
    first_error: str | None = None
    first_not_judged: str | None = None
    examples: list[ResponseOutcome] = field(default_factory=list, repr=False)
    #: The first ``max_examples`` responses with a failed citation.
    citation_examples: list[ResponseOutcome] = field(default_factory=list, repr=False)
    #: The citations answers carried (``records.citation_counts``), over the run:
    #: responses checked, sentences with a claim, those their citations support,
    #: those citing nothing, citations, relevant ones, references naming no context.
    #: Responses by what their segments were checked against (index, contexts, both, none).
    evidence_sources: dict[str, int] = field(default_factory=dict)
    citations: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("responses", "sentences", "supported", "uncited", "citations", "relevant",
         "unresolved"), 0))

    def add(self, checked: CheckedResponse) -> ResponseOutcome:
        """Count one checked response; returns its ``ResponseOutcome``.

        An unknown response or segment label is a bug upstream and raises
        ``ValueError`` rather than being counted as anything.
        """
        if checked.label not in self.responses_by_label:
            raise ValueError(f"response {checked.input.id!r}: unknown label {checked.label!r}")
        for r in checked.segments:
            if r.verdict.label not in self.segments_by_label:
                raise ValueError(
                    f"response {checked.input.id!r} segment {r.segment.index}: "
                    f"unknown label {r.verdict.label!r}"
                )
        outcome = ResponseOutcome.of(checked)
        self.responses += 1
        self.responses_by_label[checked.label] += 1
        if any(r.verdict.label == NOT_JUDGED for r in checked.segments):
            self.responses_not_fully_judged += 1
        for r in checked.segments:
            self.segments += 1
            self.segments_by_label[r.verdict.label] += 1
            self.segments_by_verdict[r.verdict.verdict] = (
                self.segments_by_verdict.get(r.verdict.verdict, 0) + 1
            )
            if r.verdict.label == NOT_JUDGED and self.first_not_judged is None:
                self.first_not_judged = (
                    f"response {outcome.id}: " + shorten(r.verdict.reason or r.verdict.verdict)
                )
        if checked.label != ERROR:
            source = checked.evidence_source
            self.evidence_sources[source] = self.evidence_sources.get(source, 0) + 1
        if outcome.failed_citations and len(self.citation_examples) < self.max_examples:
            self.citation_examples.append(outcome)
        counts = citation_counts(checked.segments)
        if counts is not None:
            self.citations["responses"] += 1
            for key, value in counts.items():
                self.citations[key] += value
        if checked.label == ERROR and self.first_error is None:
            self.first_error = f"line {outcome.line}: {outcome.error or 'unreadable'}"
        # The guard keeps a long run from re-counting the kept examples each time.
        if checked.label != FACTUAL and len(self.examples) < 3 * self.max_examples:
            kept = sum(1 for e in self.examples if e.label == checked.label)
            if kept < self.max_examples:
                self.examples.append(outcome)
        return outcome

    @property
    def citation_recall(self) -> float | None:
        """Sentences with a claim that their citations support / sentences with a claim,
        over the responses whose citations were checked (None: there were none)."""
        c = self.citations
        return c["supported"] / c["sentences"] if c["sentences"] else None

    @property
    def citation_precision(self) -> float | None:
        """Relevant citations / citations (None: no citation was checked)."""
        c = self.citations
        return c["relevant"] / c["citations"] if c["citations"] else None

    @property
    def nonfactual_segments(self) -> int:
        return self.segments_by_label[NONFACTUAL]

    @property
    def not_judged_segments(self) -> int:
        return self.segments_by_label[NOT_JUDGED]

    @property
    def judged_segments(self) -> int:
        """Segments labelled factual or nonfactual (no_claim segments count as factual)."""
        return self.segments_by_label[FACTUAL] + self.segments_by_label[NONFACTUAL]

    @property
    def nonfactual_rate(self) -> float:
        """Nonfactual segments / judged segments; 0.0 when no segment was judged.

        Not-judged segments are left out of both sides: counting them as
        factual would flatter the rate, as nonfactual would blame the response
        for the judge's failure. The gate handles them on their own.
        Segments without a claim (verdict ``no_claim``) are factual, as in the
        paper, so they are in the denominator.
        """
        judged = self.judged_segments
        return self.nonfactual_segments / judged if judged else 0.0

    @property
    def nonfactual_responses(self) -> int:
        return self.responses_by_label[NONFACTUAL]

    @property
    def not_judged_responses(self) -> int:
        return self.responses_by_label[NOT_JUDGED]

    @property
    def error_responses(self) -> int:
        """Input lines that could not be read as a response."""
        return self.responses_by_label[ERROR]

    @property
    def checked_responses(self) -> int:
        return self.responses - self.error_responses

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready data (the examples are left out)."""
        return {
            "responses": self.responses,
            "responses_by_label": dict(self.responses_by_label),
            "nonfactual_responses": self.nonfactual_responses,
            "error_responses": self.error_responses,
            "segments": self.segments,
            "judged_segments": self.judged_segments,
            "nonfactual_segments": self.nonfactual_segments,
            "not_judged_segments": self.not_judged_segments,
            "responses_not_fully_judged": self.responses_not_fully_judged,
            "segments_by_label": dict(self.segments_by_label),
            "segments_by_verdict": dict(self.segments_by_verdict),
            "nonfactual_rate": self.nonfactual_rate,
            "seconds": self.seconds,
            "judge": self.judge,
            "index": self.index,
            "evidence_sources": dict(self.evidence_sources),
            "citations": dict(self.citations),
            "citation_recall": self.citation_recall,
            "citation_precision": self.citation_precision,
        }


@dataclass(frozen=True)
class GateOptions:
    """What makes ``ceg check`` fail; see the module docstring for exit statuses.

    ``None`` for a threshold means it is not checked; with neither threshold
    the gate only checks that the run is complete (input read, segments judged).
    ``fail_on_errors``: unreadable input lines fail the run (exit 2); a gate
    that passes while part of its input went unchecked vouches for nothing.
    ``fail_on_not_judged``: segments the judge could not judge fail the run
    (exit 3); when off, they are reported and left out of the rate.
    """

    max_nonfactual_rate: float | None = None
    max_nonfactual_responses: int | None = None
    fail_on_not_judged: bool = True
    fail_on_errors: bool = True
    #: Fail (exit 1) when the run's citation recall or precision is below these;
    #: a run with no citations to check fails them too (nothing vouches for them).
    min_citation_recall: float | None = None
    min_citation_precision: float | None = None

    def __post_init__(self) -> None:
        rate = self.max_nonfactual_rate
        if rate is not None and not (math.isfinite(rate) and 0.0 <= rate <= 1.0):
            raise UsageError(f"--max-nonfactual-rate {rate}: must be between 0 and 1")
        count = self.max_nonfactual_responses
        if count is not None and count < 0:
            raise UsageError(f"--max-nonfactual-responses {count}: must be 0 or more")
        for option, value in (("--min-citation-recall", self.min_citation_recall),
                              ("--min-citation-precision", self.min_citation_precision)):
            if value is not None and not (math.isfinite(value) and 0.0 <= value <= 1.0):
                raise UsageError(f"{option} {value}: must be between 0 and 1")


@dataclass(frozen=True)
class GateResult:
    passed: bool
    exit_status: ExitStatus
    #: One line per failed condition, in the order the statuses rank.
    reasons: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "exit_status": int(self.exit_status),
            "reasons": list(self.reasons),
        }


def evaluate_gate(summary: Summary, options: GateOptions = GateOptions()) -> GateResult:
    """Decide pass or fail for a finished run; see the module docstring.

    Exactly these conditions fail, each adding one reason:

    - no responses at all (exit 2): there is nothing to vouch for;
    - no line readable (exit 2), whatever ``fail_on_errors`` says;
    - some lines unreadable and ``fail_on_errors`` (exit 2);
    - no segment judged although there were segments (exit 3), whatever
      ``fail_on_not_judged`` says: a rate over nothing vouches for nothing;
    - some segments not judged and ``fail_on_not_judged`` (exit 3);
    - ``nonfactual_rate > max_nonfactual_rate`` (exit 1);
    - ``nonfactual_responses > max_nonfactual_responses`` (exit 1).

    Responses that are read but have no segments (empty answers) claim
    nothing: they pass, with a rate of 0.0.
    """
    failures: list[tuple[ExitStatus, str]] = []
    s = summary
    if s.responses == 0:
        failures.append((ExitStatus.USAGE, "no responses to check: the input has no lines"))
    elif s.checked_responses == 0:
        failures.append(
            (ExitStatus.USAGE, f"none of the {s.responses} input lines could be read "
             f"(first, {s.first_error})")
        )
    elif s.error_responses and options.fail_on_errors:
        failures.append(
            (ExitStatus.USAGE, f"{s.error_responses} of {s.responses} input lines could not "
             f"be read (first, {s.first_error})")
        )
    if s.not_judged_segments and s.judged_segments == 0:
        failures.append(
            (ExitStatus.RUNTIME, f"none of the {s.segments} segments could be judged "
             f"(first, {s.first_not_judged})")
        )
    elif s.not_judged_segments and options.fail_on_not_judged:
        failures.append(
            (ExitStatus.RUNTIME, f"{s.not_judged_segments} of {s.segments} segments "
             f"(in {_count(s.responses_not_fully_judged, 'response')}) could not be "
             f"judged (first, {s.first_not_judged})")
        )
    limit = options.max_nonfactual_rate
    if limit is not None and s.nonfactual_rate > limit:
        failures.append(
            (ExitStatus.GATE_FAILED, f"nonfactual rate {_beside(s.nonfactual_rate, limit)} "
             f"({s.nonfactual_segments} of {s.judged_segments} judged segments) exceeds "
             f"--max-nonfactual-rate {limit:g}")
        )
    most = options.max_nonfactual_responses
    if most is not None and s.nonfactual_responses > most:
        failures.append(
            (ExitStatus.GATE_FAILED, f"{s.nonfactual_responses} of {s.responses} responses are "
             f"nonfactual, more than --max-nonfactual-responses {most}")
        )
    for name, least, value, what in (
        ("recall", options.min_citation_recall, s.citation_recall,
         f"{s.citations['supported']} of {s.citations['sentences']} sentences with a claim "
         "supported by their citations"),
        ("precision", options.min_citation_precision, s.citation_precision,
         f"{s.citations['relevant']} of {s.citations['citations']} citations relevant"),
    ):
        if least is None:
            continue
        option = f"--min-citation-{name}"
        if value is None:
            failures.append((ExitStatus.GATE_FAILED, f"{option} {least:g}: no citation "
                             "was checked (no record both carried citation markers and had "
                             "contexts for them to name), so there was nothing to measure"))
        elif value < least:
            failures.append((ExitStatus.GATE_FAILED, f"citation {name} "
                             f"{_beside(value, least)} ({what}) is below {option} {least:g}"))
    if not failures:
        return GateResult(True, ExitStatus.OK, [])
    rank = [ExitStatus.USAGE, ExitStatus.RUNTIME, ExitStatus.GATE_FAILED]
    failures.sort(key=lambda f: rank.index(f[0]))
    return GateResult(False, failures[0][0], [reason for _, reason in failures])


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _beside(value: float, threshold: float) -> str:
    """``value`` with just enough digits that it never reads as ``threshold``."""
    for digits in range(3, 18):
        shown = f"{value:.{digits}g}"
        if shown != f"{threshold:g}" and float(shown) != threshold:
            return shown
    return repr(value)
