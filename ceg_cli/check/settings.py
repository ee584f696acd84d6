"""The settings of one ``ceg check`` run, checked as the CLI checks them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..index.embedding import DEVICES
from ..index.lexical import DEFAULT_RETRIEVAL, check_method
from ..lang.codes import AUTO, check_language
from ..report.gate import GateOptions
from ..report.output import refuse_index_files, refuse_same_files
from .ctxsearch import CONTEXT_RETRIEVAL_MODES, DEFAULT_CONTEXT_RETRIEVAL
from .pipeline import (
    DEFAULT_EVIDENCE,
    DEFAULT_QUERY,
    EVIDENCE_MODES,
    QUERY_MODES,
    CheckOptions,
)
from .responses import FieldNames
from .retrieve import DEFAULT_THRESHOLD, DEFAULT_TOP_K, RetrievalOptions

#: Where the responses are checked (``--engine``): in this process, or by Ray workers
#: across a cluster (``ray_run``).
ENGINES = ("local", "ray")


@dataclass(frozen=True)
class EngineOptions:
    """Where a run checks: ``name`` (``ENGINES``) and, on Ray, the cluster and its workers."""

    name: str = "local"
    #: The cluster's head (HOST:PORT, ray://HOST:PORT or auto); None: Ray on this machine.
    ray_address: str | None = None
    #: Ray workers; None: the cluster's CPUs over what one judge needs (or its GPUs over
    #: ``gpus_per_worker``).
    workers: int | None = None
    #: GPUs each Ray worker asks for (a share of one, or several); 0: none.
    gpus_per_worker: float = 0.0


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
    engine: EngineOptions = EngineOptions()

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
        language: str = AUTO,
        engine: str = "local",
        ray_address: str | None = None,
        workers: int | None = None,
        gpus_per_worker: float | None = None,
    ) -> RunSettings:
        """Checked settings; ``None`` takes the library's default (the CLI reads
        ``CEG_TOP_K``, ``CEG_THRESHOLD``, ``CEG_QUERY`` and ``CEG_RETRIEVAL`` before
        it gets here)."""
        top_k = DEFAULT_TOP_K if top_k is None else top_k
        threshold = DEFAULT_THRESHOLD if threshold is None else threshold
        query = query or DEFAULT_QUERY
        retrieval = retrieval or DEFAULT_RETRIEVAL
        check_method(retrieval)
        if top_k < 1:
            raise UsageError(f"--top-k {top_k}: must be at least 1")
        if not -1.0 <= threshold <= 1.0:
            raise UsageError(f"--threshold {threshold}: a cosine similarity is between -1 and 1")
        if rewriter is not None and not regenerate:
            raise UsageError("--rewriter is used only with --regenerate")
        if rewriter is not None and not rewriter.startswith("llm:"):
            raise UsageError(f"--rewriter {rewriter}: name an LLM, as llm:MODEL")
        if regenerate and max_attempts < 1:
            raise UsageError(f"--max-attempts {max_attempts}: must be at least 1")
        if device not in DEVICES:
            raise UsageError(f"--device {device}: choose one of {', '.join(DEVICES)}")
        if query not in QUERY_MODES:
            raise UsageError(f"--query {query}: choose one of {', '.join(QUERY_MODES)}")
        evidence = evidence or DEFAULT_EVIDENCE
        if evidence not in EVIDENCE_MODES:
            raise UsageError(f"--evidence {evidence}: choose one of {', '.join(EVIDENCE_MODES)}")
        if contexts_field is not None and not contexts_field.strip(". "):
            raise UsageError(
                f"--contexts-field {contexts_field!r}: name the field that holds the contexts "
                "(dots for a nested one: retrieval.docs)"
            )
        if citation_pattern is not None:
            from .markers import compile_pattern

            compile_pattern(citation_pattern)  # a bad one is a usage error, now
        language = check_language(language)
        contexts_retrieval = contexts_retrieval or DEFAULT_CONTEXT_RETRIEVAL
        if contexts_retrieval not in CONTEXT_RETRIEVAL_MODES:
            raise UsageError(f"--contexts-retrieval {contexts_retrieval}: choose one of "
                             f"{', '.join(CONTEXT_RETRIEVAL_MODES)}")
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
        # An empty name matches no field: every line would be a bad line, one warning
        # each, where the call itself is wrong.
        if not response_field.strip():
            raise UsageError(
                f"--response-field {response_field!r}: name the field that holds the response"
            )
        if question_field is not None and not question_field.strip():
            raise UsageError(
                f"--question-field {question_field!r}: name the field that holds the question "
                "(leave the option out for question, then prompt)"
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
            judge_options=judge_options or {},
            regenerate=regenerate,
            max_attempts=max_attempts,
            rewriter=rewriter,
            device=device,
            engine=_engine(engine, ray_address, workers, gpus_per_worker),
        )


def _engine(
    name: str, ray_address: str | None, workers: int | None, gpus_per_worker: float | None
) -> EngineOptions:
    """The engine options, checked; on Ray, before anything loads: whether Ray is
    installed, and whether a cluster answers at ``ray_address``."""
    if name not in ENGINES:
        raise UsageError(f"--engine {name}: expected one of {', '.join(ENGINES)}")
    if name != "ray":
        for option, value in (("--ray-address", ray_address), ("--workers", workers),
                              ("--gpus-per-worker", gpus_per_worker)):
            if value is not None:
                raise UsageError(f"{option} goes with --engine ray")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers}: use at least 1")
    if gpus_per_worker is not None and not 0 <= gpus_per_worker < 1000:
        raise UsageError(f"--gpus-per-worker {gpus_per_worker}: a number of GPUs, 0 or more "
                         "(a share of one, as 0.5, or several)")
    if name == "ray":
        from ..index.ray_engine import check_reachable
        from ..index.ray_pool import require_ray

        require_ray()
        if ray_address:
            check_reachable(ray_address)
    return EngineOptions(name, ray_address or None, workers, gpus_per_worker or 0.0)


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
