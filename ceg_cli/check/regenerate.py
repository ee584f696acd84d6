"""The CEG regeneration loop: rewrite nonfactual responses from the evidence.

For a response with nonfactual segments the LLM is given the question, its
previous answer, the nonfactual segments and the passages retrieved for them
(the paper's prompt), and the new answer is checked the same way; this
repeats until every segment is supported or ``max_attempts`` are spent.
Rewrites of a batch run concurrently; the new answers are checked together.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from ..errors import UsageError
from ..index import Index
from ..judges import Judge
from ..types import FACTUAL, NONFACTUAL, CheckedResponse, Evidence
from .pipeline import CheckOptions, check_batch

if TYPE_CHECKING:
    from .ctxsearch import ContextSearch

DEFAULT_MAX_ATTEMPTS = 2


class Rewriter(Protocol):
    """Produces a new answer from the old one and the evidence (the LLM)."""

    def rewrite(
        self,
        question: str | None,
        previous: str,
        nonfactual: Sequence[str],
        documents: Sequence[Evidence],
        *,
        cite: bool = False,
    ) -> str: ...


@dataclass(frozen=True)
class Regeneration:
    """Every attempt, checked; ``attempts[-1]`` is the final answer."""

    attempts: tuple[CheckedResponse, ...]

    @property
    def final(self) -> CheckedResponse:
        return self.attempts[-1]

    @property
    def repaired(self) -> bool:
        return self.final.label == FACTUAL


class LlmRewriter:
    """Rewrites with the LLM judge's own client: one cache, one set of counters."""

    def __init__(self, judge: Judge) -> None:
        client = getattr(judge, "client", None)
        if client is None:
            raise UsageError(
                f"--regenerate needs an LLM to rewrite answers; --judge {judge.name} is not "
                "one: use --judge llm:MODEL or --rewriter llm:MODEL"
            )
        self.client = client
        self.model: str = judge.model  # type: ignore[attr-defined]
        self.temperature: float = getattr(judge, "temperature", 0.0)

    def rewrite(
        self,
        question: str | None,
        previous: str,
        nonfactual: Sequence[str],
        documents: Sequence[Evidence],
        *,
        cite: bool = False,
    ) -> str:
        from ..llm.generate import regenerate_response

        return regenerate_response(
            self.client, self.model, question, previous, list(nonfactual), list(documents),
            temperature=self.temperature, cite=cite,
        )


def documents_for(checked: CheckedResponse) -> list[Evidence]:
    """The passages retrieved for the nonfactual segments, each once, best first: a
    record's own passages ranked by BM25 alone (no cosine) first, in the order found,
    then the others by cosine."""
    seen: dict[tuple[int, int], Evidence] = {}
    for r in checked.segments:
        if r.verdict.label == FACTUAL:
            continue
        for ev in r.evidence:
            seen.setdefault(ev.key, ev)
    return sorted(seen.values(),
                  key=lambda e: (0, 0.0) if e.similarity is None else (1, -e.similarity))


def needs_regeneration(checked: CheckedResponse) -> bool:
    return checked.error is None and checked.label == NONFACTUAL


def regenerate_batch(
    batch: Sequence[CheckedResponse],
    index: Index | None,
    judge: Judge,
    rewriter: Rewriter,
    options: CheckOptions,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    concurrency: int = 4,
    contexts: ContextSearch | None = None,
) -> list[Regeneration | None]:
    """For each checked response, its regeneration (None when it needed none)."""
    attempts: list[list[CheckedResponse]] = [[] for _ in batch]
    current = list(batch)
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for _ in range(max_attempts):
            todo = [i for i, c in enumerate(current) if needs_regeneration(c)]
            if not todo:
                break
            texts = list(
                pool.map(
                    lambda i: rewriter.rewrite(
                        current[i].input.question,
                        current[i].input.response,
                        [r.segment.text for r in current[i].segments
                         if r.verdict.label != FACTUAL],
                        documents_for(current[i]),
                        # An answer that cited its contexts is rewritten citing them.
                        cite=any(r.citation is not None for r in current[i].segments),
                    ),
                    todo,
                )
            )
            # A blank rewrite claims nothing and would pass as "factual": it is kept
            # as a failed attempt instead, and ends that response's loop.
            inputs = [
                replace(current[i].input, response=t, segments=None,
                        error=None if t.strip() else "the LLM returned an empty response")
                for i, t in zip(todo, texts)
            ]
            checked = check_batch(inputs, index, judge, options, contexts)
            for i, new in zip(todo, checked):
                attempts[i].append(new)
                current[i] = new
    return [Regeneration(tuple(a)) if a else None for a in attempts]
