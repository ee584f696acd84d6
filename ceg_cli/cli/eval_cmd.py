"""``ceg eval``: check a labelled benchmark and report how right the labels are.

Wired into the ``ceg`` app as a single command
(``app.command("eval")(eval_cmd.eval_command)``). Metrics are data: the table
goes to stdout; progress and notes go to stderr.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .commands import given_or_none, judge_threshold_source
from .common import (
    ContextsRetrievalOption,
    DeviceOption,
    JudgeOption,
    JudgePrecisionOption,
    JudgeThresholdOption,
    LanguageOption,
    LexicalMaxTermsOption,
    QueryOption,
    QuietOption,
    RetrievalOption,
    SearchWidthOption,
    ThresholdOption,
    TopKOption,
    err_console,
    handle_errors,
    out_console,
    spec_option,
    warn,
)
from .progress import cli_progress

if TYPE_CHECKING:
    from rich.table import Table

    from ..progress import Progress


#: Rows of the table: (section, metric key, label); percentages unless in _COUNTS.
_ROWS = [
    ("segments", "count", "segments"),
    ("segments", "gold_nonfactual", "  gold nonfactual"),
    ("segments", "predicted_nonfactual", "  judged nonfactual"),
    ("segments", "balanced_accuracy", "segment balanced accuracy"),
    ("segments", "accuracy_factual", "  accuracy on factual segments"),
    ("segments", "accuracy_nonfactual", "  accuracy on nonfactual segments"),
    ("segments", "f1_nonfactual", "  F1, nonfactual"),
    ("segments", "auc_pr_factual", "  AUC-PR, factual"),
    ("segments", "auc_pr_nonfactual", "  AUC-PR, nonfactual"),
    ("segments", "prevalence_nonfactual", "  share nonfactual (AUC-PR floor)"),
    ("responses", "count", "responses"),
    ("responses", "gold_nonfactual", "  gold nonfactual"),
    ("responses", "predicted_nonfactual", "  judged nonfactual"),
    ("responses", "balanced_accuracy", "response balanced accuracy"),
    ("responses", "accuracy_factual", "  accuracy on factual responses"),
    ("responses", "accuracy_nonfactual", "  accuracy on nonfactual responses"),
    ("responses", "auc_pr_nonfactual", "  AUC-PR, nonfactual"),
    ("pairwise", "pairs", "pairs"),
    ("pairwise", "accuracy", "pairwise accuracy"),
    ("pairwise", "shorter_wins_accuracy", "  'shorter answer wins' rule"),
    ("pairwise", "length_matched_pairs", "length-matched pairs"),
    ("pairwise", "length_matched_accuracy", "  pairwise accuracy, length-matched"),
    ("pairwise", "shorter_wins_length_matched_accuracy", "  'shorter answer wins', matched"),
    ("retrieval", "segments", "segments with known gold evidence"),
    ("retrieval", "recall_at_1", "  recall@1"),
    ("retrieval", "recall_at_k", "  recall@k"),
    ("retrieval", "recall_judged", "  recall in the judge's evidence"),
]
_COUNTS = {
    "count",
    "gold_nonfactual",
    "predicted_nonfactual",
    "pairs",
    "length_matched_pairs",
    "segments",
}


@handle_errors
def eval_command(
    ctx: typer.Context,
    dataset: Path = typer.Argument(
        ...,
        help="Labelled benchmark (JSONL): FELM, HaluEval QA, FEVER or generic.",
        show_default=False,
        metavar="DATASET",
    ),
    format: str = typer.Option(
        None,
        "--format",
        "-f",
        help="felm, halueval, fever or jsonl (default: detected from the fields)",
        show_default=False,
    ),
    index: Path = spec_option(
        "index", None, envvar=None,
        help="Index to check against. FELM and HaluEval default to an index of their own "
        "corpus, built once and cached; FEVER and jsonl need one (else $CEG_INDEX, ./index).",
    ),
    build_corpus: bool = typer.Option(
        None,
        "--build-corpus/--no-build-corpus",
        help="Index the corpus that comes with the data: FELM references, HaluEval "
        "knowledge (default: when --index is not given)",
        show_default=False,
    ),
    evidence: str = spec_option(
        "evidence",
        help="What items are judged against: each item's own documents (contexts: a jsonl "
        "item's contexts, FELM's ref_contents, HaluEval's knowledge), the index, or both; "
        "auto takes a jsonl item's contexts where it has them and the index otherwise.",
    ),
    contexts_field: str = spec_option(
        "contexts_field",
        help="The field holding a jsonl item's contexts, dots for a nested one (default: "
        "contexts, then retrieved_contexts, then retrieval_context).",
    ),
    judge: str = JudgeOption,
    judge_threshold: float = JudgeThresholdOption,
    judge_precision: str = JudgePrecisionOption,
    top_k: int = TopKOption,
    threshold: float = ThresholdOption,
    query: str = QueryOption,
    retrieval: str = RetrievalOption,
    search_width: str = SearchWidthOption,
    lexical_max_terms: int = LexicalMaxTermsOption,
    contexts_retrieval: str = ContextsRetrievalOption,
    language: str = LanguageOption,
    out: Path = typer.Option(
        None, "--out", help="Write per-item predictions (JSONL).", show_default=False
    ),
    json_out: Path = typer.Option(
        None, "--json", help="Write the metrics (JSON).", show_default=False
    ),
    limit: int = typer.Option(
        None, "--limit", min=1, help="Check only the first N records (default: all).",
        show_default=False,
    ),
    llm_base_url: str = spec_option("llm_base_url"),
    concurrency: int = spec_option("concurrency"),
    temperature: float = spec_option("temperature"),
    no_cache: bool = spec_option("no_cache"),
    cache_dir: Path = spec_option("cache_dir"),
    llm_prompt: str = spec_option("llm_prompt"),
    unparsable_as: str = spec_option(
        "unparsable_as",
        help="What an LLM reply that cannot be read counts as (not_judged: a prediction "
        "of not factual, counted in the metrics' not_judged).",
    ),
    batch_tokens: int = spec_option("batch_tokens"),
    device: str = DeviceOption,
    quiet: bool = QuietOption,
) -> None:
    """Check a labelled benchmark and report balanced accuracy, AUC-PR, pairwise accuracy
    and retrieval recall."""
    from ..check.ctxsearch import context_search, reads_similarity
    from ..check.options import ignored_options, judge_options, judge_values
    from ..check.pipeline import CheckOptions
    from ..check.retrieve import RetrievalOptions
    from ..errors import UsageError
    from ..eval.datasets import load_dataset
    from ..eval.evaluate import prediction_record, run_evaluation
    from ..index import open_index
    from ..index.dense.searchwidth import parse
    from ..index.lexical.bm25 import resolve_method
    from ..judges import create_judge
    from ..judges.cuts import OPTION as CUT_OPTION
    from ..judges.cuts import SOURCE_OPTION as CUT_SOURCE_OPTION
    from ..lang.codes import check_language
    from ..report.output import refuse_index_files, refuse_same_files

    width = parse(search_width)
    # Before anything is read or written: no output may be the dataset, the
    # other output, or a file of an index (the given one, or any ceg index).
    outputs = [(flag, path) for flag, path in (("--out", out), ("--json", json_out)) if path]
    refuse_same_files([("dataset", dataset), *outputs])
    for flag, path in outputs:
        # Fail before a long run, not after it.
        if not path.resolve().parent.is_dir():
            raise UsageError(f"{flag} {path}: the folder {path.parent} does not exist")
    refuse_index_files(outputs, index)
    if device == "cuda":  # refused before any work, whether or not a model loads
        from ..index.dense.devices import resolve_device

        resolve_device(device)
    # What the judge reads (as ceg check's), and whether this run reads it.
    given = judge_values(locals())
    mode = evidence
    for message in ignored_options(given):
        warn(message)
    language = check_language(language)
    fields = _contexts_fields(mode, contexts_field, index, build_corpus)
    started = time.perf_counter()
    data = load_dataset(
        dataset, format, limit=limit, own_contexts=mode in ("contexts", "both"),
        contexts_fields=fields,
    )
    needs_index = _needs_index(data, mode, fields)
    if data.rebuilt_responses:
        lines = data.rebuilt_responses
        shown = ", ".join(str(n) for n in lines[:5]) + (" ..." if len(lines) > 5 else "")
        warn(
            f"{dataset}: {len(lines)} rows have no response text (lines {shown}); "
            "their 'segmented_response' segments, joined by spaces, are checked instead"
        )
    _report_bad_rows(dataset, data.bad_rows)
    with cli_progress(quiet) as progress, ExitStack() as stack:
        index_dir = None
        if needs_index:
            index_dir = _resolve_index(data, index, build_corpus, quiet, progress)
            refuse_index_files(outputs, index_dir)  # the fallback or the corpus index
        for_judge = {**judge_options(given), "on_warning": warn}
        if judge_threshold is not None:  # checked by the option table as it was parsed
            for_judge[CUT_OPTION] = judge_threshold
            label = judge_threshold_source(ctx)
            if label is not None:  # a project file's, not the flag
                for_judge[CUT_SOURCE_OPTION] = label
        checker = create_judge(judge, for_judge)
        close = getattr(checker, "close", None)
        if close is not None:  # an LLM judge's client and reply cache
            stack.callback(close)
        if not quiet:
            against = "each item's own contexts" if index_dir is None else f"index {index_dir}"
            if index_dir is not None and mode != "index":
                against += f", evidence {mode}"
            err_console.print(
                f"{dataset.name}: {len(data.examples)} responses ({data.format}), "
                f"{against}, judge {checker.name}, threshold {_cuts(checker, mode)}",
                markup=False,
            )
        checked = progress.counter("checked", "responses", total=len(data.examples))
        idx = None if index_dir is None else stack.enter_context(open_index(index_dir))
        if idx is not None:
            if idx.lexical_only:
                from ..check.evidence import refuse_on_lexical_only
                from ..index.lexical.lexonly import searched_by_bm25

                refuse_on_lexical_only(idx, checker)
                if not quiet:
                    err_console.print(searched_by_bm25(index_dir), markup=False)
            else:
                idx.embedder(device)
            if width:
                idx.set_search_width(width)
            ignored = idx.set_lexical_max_terms(lexical_max_terms)
            if ignored is not None:
                warn(ignored)
            asked = given_or_none(ctx, "retrieval", retrieval) is not None
            method, warning = resolve_method(idx, retrieval, asked)
            if warning is not None:
                warn(warning)
        else:
            method = retrieval  # a record's passages always have BM25
        options = CheckOptions(
            RetrievalOptions(top_k, threshold, method, max_terms=lexical_max_terms),
            query=query, evidence=mode,
            contexts_retrieval=contexts_retrieval, language=language,
        )
        contexts = None if mode == "index" else context_search(
            idx, device, method=contexts_retrieval,
            similarity=reads_similarity(checker), language=language,
        )
        evaluation = run_evaluation(
            data, idx, checker, options, contexts=contexts,
            on_result=lambda _r: checked.update(),
        )
    metrics = evaluation.metrics
    metrics["run"]["seconds"] = round(time.perf_counter() - started, 1)
    if out is not None:
        with open(out, "w", encoding="utf-8") as fh:
            for ex, res in zip(data.examples, evaluation.results):
                fh.write(json.dumps(prediction_record(ex, res), ensure_ascii=False) + "\n")
    if json_out is not None:
        json_out.write_text(
            json.dumps(metrics, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    out_console.print(render_table(metrics))


def _cuts(judge: Any, mode: str) -> str:
    """The judge's cut in the settings ``--evidence`` may judge in, and where it came from."""
    from ..check.run import cut_settings

    cuts = getattr(judge, "cuts", None)
    if cuts is None:
        return "none (the judge gives a label, not a score)"
    return str(cuts.describe(cut_settings(mode)))


def describe_threshold(run: dict[str, Any]) -> str:
    """The run's ``judge_threshold`` in words: "0.8333 (protocol, index setting)"."""
    cuts = run.get("judge_threshold")
    if not cuts:
        return "none"
    shown = dict.fromkeys(f"{c['value']:g} ({c['source']})" for c in cuts.values())
    return "; ".join(shown)


def _contexts_fields(
    mode: str, contexts_field: str | None, index: Path | None, build_corpus: bool | None
) -> tuple[str, ...] | None:
    """Where a jsonl item's contexts are read (None: not read); bad combinations refused."""
    from ..corpus.contexts import CONTEXT_FIELDS
    from ..errors import UsageError

    if contexts_field is not None and not contexts_field.strip(". "):
        raise UsageError(
            f"--contexts-field {contexts_field!r}: name the field that holds the contexts"
        )
    if mode == "index":
        if contexts_field is not None:
            raise UsageError("--contexts-field is read only with --evidence auto, contexts or both")
        return None
    if mode == "contexts":
        # Judged against its own documents only: an index would be built for nothing.
        if index is not None:
            raise UsageError("--index is not read with --evidence contexts; drop one of them")
        if build_corpus:
            raise UsageError(
                "--build-corpus is not read with --evidence contexts: each item is judged "
                "against its own documents"
            )
    return (contexts_field,) if contexts_field is not None else CONTEXT_FIELDS


def _needs_index(data: Any, mode: str, fields: tuple[str, ...] | None) -> bool:
    """Whether the run needs an index; an item that can be judged against nothing is refused."""
    from ..errors import UsageError

    if mode in ("contexts", "both") and data.format == "fever":
        raise UsageError(
            f"--evidence {mode}: the fever format carries no evidence text (only page "
            "titles); use --evidence index, or a jsonl file whose items carry contexts"
        )
    missing = [ex.input.line for ex in data.examples if ex.input.contexts is None]
    if mode == "contexts" and missing:
        tried = ", ".join(fields or ())
        raise UsageError(
            f"{data.path}:{missing[0]}: --evidence contexts: the item has no contexts "
            f"(fields tried: {tried}; name another with --contexts-field); "
            f"{len(missing)} of {len(data.examples)} items have none"
        )
    return mode in ("index", "both") or (mode == "auto" and bool(missing))


def _report_bad_rows(dataset: Path, bad_rows: list[str], shown: int = 20) -> None:
    """One warning per row left out (the first ``shown``), then how many more."""
    for message in bad_rows[:shown]:
        warn(f"{message}; row left out")
    if len(bad_rows) > shown:
        warn(f"{dataset}: {len(bad_rows) - shown} more rows left out (not shown)")


def _resolve_index(
    data: Any, index: Path | None, build_corpus: bool | None, quiet: bool, progress: Progress
) -> Path:
    """Which index to check against (flag, then the data's own corpus, then $CEG_INDEX, ./index)."""
    from ..errors import UsageError
    from ..eval.corpus import ensure_corpus_index
    from ..index import META_FILE

    if build_corpus is None:
        build_corpus = index is None and data.has_corpus
    if build_corpus:
        if not data.has_corpus:
            raise UsageError(
                f"--build-corpus: the {data.format} format carries no corpus; pass --index DIR"
            )
        if not quiet:
            err_console.print(f"corpus of {data.path.name}: {len(data.documents)} documents")
        path, built = ensure_corpus_index(data, index, progress=progress, on_warning=warn)
        if not quiet:
            err_console.print(f"{'built' if built else 'reusing'} corpus index {path}")
        return path
    if index is not None:
        return index
    fallback = Path(os.environ.get("CEG_INDEX") or "index")
    if (fallback / META_FILE).exists():
        return fallback
    need = (
        "an index of the Wikipedia pages its evidence comes from"
        if data.format == "fever"
        else "an index of the documents to check against"
    )
    raise UsageError(
        f"{data.path}: the {data.format} format needs {need}: pass --index DIR "
        "(build one with 'ceg index build SOURCE --index DIR', e.g. from a MediaWiki dump)"
    )


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return "–"
    if key in _COUNTS:
        return str(value)
    return f"{100 * value:.1f}"


def render_table(metrics: dict[str, Any]) -> Table:
    """The metrics as a table, with the paper's figures beside ours where they exist."""
    from rich.table import Table

    from ..eval.evaluate import reference_figures

    run = metrics["run"]
    sources = run.get("evidence_sources") or {}
    # The paper's figures are of its pooled-retrieval setting: not shown beside others.
    refs = {} if set(sources) - {"index"} else reference_figures(run["format"])
    evidence = run.get("evidence", "index")
    if set(sources) - {"index"}:  # say what the items were judged against, when not the index
        evidence += " (" + ", ".join(f"{name} {n}" for name, n in sources.items()) + ")"
    table = Table(
        title=f"ceg eval: {Path(run['dataset']).name} ({run['format']}), judge {run['judge']} "
        f"at judge threshold {describe_threshold(run)}, evidence {evidence}, "
        f"top-k {run['top_k']}, similarity threshold {run['threshold']}, "
        f"query {run['query']}, retrieval {run['retrieval']}",
        title_justify="left",
    )
    table.add_column("metric")
    table.add_column("ceg", justify="right")
    if refs:
        table.add_column("paper (full benchmark)", justify="left")
    for section, key, label in _ROWS:
        part = metrics.get(section)
        if not part or key not in part:
            continue
        row = [label, _fmt(key, part[key])]
        if refs:
            ref = refs.get(f"{section}.{key}", {})
            row.append(", ".join(f"{name} {100 * v:.4g}" for name, v in ref.items()))
        table.add_row(*row)
    if "pairwise" in metrics:
        table.caption = f"length-matched: {metrics['pairwise']['length_rule']}"
    return table
