"""The settings of one ``ceg check`` run, checked as the CLI checks them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..index.dense.searchwidth import parse as parse_search_width
from ..index.lexical.bm25 import DEFAULT_RETRIEVAL
from ..judges.cuts import OPTION as CUT_OPTION
from ..judges.cuts import SOURCE_OPTION as CUT_SOURCE_OPTION
from ..lang.codes import AUTO, check_language
from ..report.gate import GateOptions
from ..report.output import refuse_index_files, refuse_same_files
from .ctxsearch import DEFAULT_CONTEXT_RETRIEVAL
from .pipeline import DEFAULT_EVIDENCE, DEFAULT_QUERY, CheckOptions
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
    #: Search settings that replace the ones the index was built with (``--search-width``).
    search_width: dict[str, int] = field(default_factory=dict)
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
        search_width: str | None = None,
        lexical_max_terms: int | None = None,
        language: str = AUTO,
        judge_threshold: float | None = None,
        judge_threshold_source: str | None = None,
        engine: str = "local",
        ray_address: str | None = None,
        workers: int | None = None,
        gpus_per_worker: float | None = None,
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
            "lexical_max_terms": lexical_max_terms,
            "judge_threshold": judge_threshold,
        })
        top_k = DEFAULT_TOP_K if top_k is None else checked["top_k"]
        threshold = DEFAULT_THRESHOLD if threshold is None else checked["threshold"]
        query = query or DEFAULT_QUERY
        retrieval_given = retrieval is not None
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
            from ..index.dense.devices import resolve_device

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
                RetrievalOptions(top_k, threshold, retrieval, retrieval_given,
                                 checked["lexical_max_terms"]), query=query,
                evidence=evidence,
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
            engine=_engine(engine, ray_address, workers, gpus_per_worker),
        )


def _engine(
    name: str, ray_address: str | None, workers: int | None, gpus_per_worker: float | None
) -> EngineOptions:
    """The engine options, checked; on Ray, before anything loads: whether Ray is
    installed, and whether a cluster answers at ``ray_address``."""
    if name not in ENGINES:
        raise UsageError(f"--engine {name}: expected one of {', '.join(ENGINES)}")
    # With the local engine the Ray options are warned of (options.ignored_options), not
    # refused: a project file's top-level workers may be meant for index build's readers.
    for option, value, kinds in (("--workers", workers, (int,)),
                                 ("--gpus-per-worker", gpus_per_worker, (int, float)),
                                 ("--ray-address", ray_address, (str,))):
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            what = {int: "an integer", float: "a number", str: "a string"}[kinds[-1]]
            raise UsageError(f"{option} {value!r}: expected {what}, got "
                             f"{type(value).__name__}")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers}: use at least 1")
    if gpus_per_worker is not None and not 0 <= gpus_per_worker < 1000:
        raise UsageError(f"--gpus-per-worker {gpus_per_worker}: a number of GPUs, 0 or more "
                         "(a share of one, as 0.5, or several)")
    if name == "ray":
        from ..index.build.ray_pool import require_ray
        from ..index.build.ray_session import check_reachable

        require_ray()
        if ray_address:
            check_reachable(ray_address)
    if name != "ray":
        return EngineOptions()
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


