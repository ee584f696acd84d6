"""``ceg index build | info | search``."""

from __future__ import annotations

import json
import re
from enum import Enum
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..index.dense.embedding import BACKENDS
from ..index.layout import ENGINES, LEXICAL_ENGINES
from ..index.lexical.lexonly import BUILD_RETRIEVALS
from .commands import CegTyper, given_or_none
from .common import (
    EmbedDevice,
    EmbedPrecision,
    IndexOption,
    LanguageOption,
    LexicalMaxTermsOption,
    QuietOption,
    RetrievalOption,
    SearchWidthOption,
    err_console,
    handle_errors,
    out_console,
    warn,
)
from .progress import cli_progress


class IndexType(str, Enum):
    """The names in ``ceg_cli.index.dense.vectors.INDEX_TYPES`` (kept in step by a test)."""

    auto = "auto"
    flat = "flat"
    hnsw = "hnsw"
    ivfpq = "ivfpq"
    ivfpqfs = "ivfpqfs"


app = CegTyper(help="Build, inspect and search an index.", no_args_is_help=True)
# The choices come from the embedding module (which imports no torch at load).
EmbedBackend = Enum("EmbedBackend", {name: name for name in BACKENDS}, type=str)  # type: ignore[misc]
Engine = Enum("Engine", {name: name for name in ENGINES}, type=str)  # type: ignore[misc]
BuildRetrieval = Enum(  # type: ignore[misc]
    "BuildRetrieval", {name: name for name in BUILD_RETRIEVALS}, type=str)
LexicalEngine = Enum(  # type: ignore[misc]
    "LexicalEngine", {name: name for name in LEXICAL_ENGINES}, type=str)


@app.command("build")
@handle_errors
def build(
    ctx: typer.Context,
    sources: list[Path] = typer.Argument(
        ...,
        metavar="SOURCE",
        help="MediaWiki XML dumps (.xml, .xml.bz2, .xml.gz), JSONL documents, or folders "
        "of .txt/.md files.",
        show_default=False,
    ),
    index: Path = IndexOption,
    model: str = typer.Option(
        None,
        "--model",
        help="sentence-transformers model: a local directory, or a name in the local "
        "cache (default: all-MiniLM-L6-v2, shipped offline)",
        show_default=False,
    ),
    chunk_words: int = typer.Option(100, "--chunk-words", min=1, help="Words per passage."),
    language: str = LanguageOption,
    namespace: list[int] = typer.Option(
        [0], "--namespace", "-n", help="MediaWiki namespaces to index (repeatable)."
    ),
    embed_title: bool = typer.Option(
        True,
        "--embed-title/--no-embed-title",
        help="Embed each passage with its document title in front.",
    ),
    append: bool = typer.Option(
        False, "--append", help="Add to the existing index; unchanged sources are skipped."
    ),
    update: bool = typer.Option(
        False, "--update", help="Bring the existing index in step with SOURCEs per document: "
        "re-embed changed documents, remove gone ones, add new ones; sources of the index not "
        "named are kept (docs/cli.md).",
    ),
    prune: bool = typer.Option(
        False, "--prune", help="With --update: also remove the index's sources not named."
    ),
    batch_size: int = typer.Option(
        64, "--batch-size", min=1, help="Passages per model batch."
    ),
    backend: EmbedBackend = typer.Option(
        None,
        "--backend",
        help="How the model computes: torch (float), onnx or onnx-int8 (CPU, need "
        "ceg-cli[fast]) (default: the index's own with --append, else torch)",
        show_default=False,
    ),
    device: EmbedDevice = typer.Option(
        "auto", "--device", help="auto: CUDA when torch sees one, else the CPU."
    ),
    precision: EmbedPrecision = typer.Option(
        "auto",
        "--precision",
        help="The model's float width: auto is float16 on CUDA (vectors within cosine "
        "0.99999 of float32's), float32 on the CPU; float16 needs CUDA.",
    ),
    follow_symlinks: bool = typer.Option(
        False,
        "--follow-symlinks",
        help="In folder sources, also read symbolic links that lead out of the folder "
        "(skipped with a warning by default).",
    ),
    multistream_index: Path = typer.Option(
        None,
        "--multistream-index",
        help="The index of the multistream dump among the SOURCEs "
        "(...-multistream-index.txt.bz2), where it is not beside the dump under that name.",
        show_default=False,
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue the unfinished build of the same SOURCEs and options that a killed "
        "run left beside the index, from its last committed shard.",
    ),
    index_type: IndexType = typer.Option(
        IndexType.auto,
        "--index-type",
        help="Vector index: flat (exact), hnsw or ivfpq (approximate, measured against "
        "exact search into meta.json); auto: flat for a small index, ivfpq from the size "
        "chosen by measurement (README, Index types).",
    ),
    lexical: bool = typer.Option(
        None,
        "--lexical/--no-lexical",
        help="Build the lexical (BM25) part that lexical and hybrid retrieval use "
        "(default: on, at any size).",
        show_default=False,
    ),
    retrieval: BuildRetrieval = typer.Option(
        "hybrid",
        "--retrieval",
        help="What the index is searched by: hybrid (vectors and the lexical part), dense "
        "(vectors only, as --no-lexical) or lexical (the lexical part only: nothing is "
        "embedded, so a build runs at the speed of reading; checks against it search by "
        "BM25).",
    ),
    lexical_engine: LexicalEngine = typer.Option(
        "auto",
        "--lexical-engine",
        help="The lexical part's engine: bm25s (in memory, about 3.9 GB per million "
        "passages to build), tantivy (streamed, bounded memory at any size); auto: bm25s "
        "up to 2,000,000 passages, tantivy beyond.",
    ),
    engine: Engine = typer.Option(
        "local",
        "--engine",
        help="local: read and embed in this process; ray: on Ray workers across a cluster "
        "(needs ceg-cli[ray]; README, Builds on Ray).",
    ),
    ray_address: str = typer.Option(
        None,
        "--ray-address",
        help="With --engine ray: the cluster's head node, HOST:PORT (as `ray start --head` "
        "prints it), ray://HOST:PORT or auto (default: start Ray on this machine).",
        show_default=False,
    ),
    workers: int = typer.Option(
        None,
        "--workers",
        min=1,
        help="With --engine ray: how many workers load the model and embed (default: one "
        "per GPU of the cluster, else one per node with CPUs). With --engine local: "
        "processes that read, chunk and tokenize while this one embeds (default: every "
        "core but one when the model runs on CUDA; every core with --retrieval lexical or "
        "a static model; else 1, a thread). With --update: processes that read a "
        "multistream dump's ranges (default: every core).",
        show_default=False,
    ),
    quiet: bool = QuietOption,
) -> None:
    """Build an index from corpus SOURCEs (replacing the index unless --append)."""
    from ..index.build.builder import BuildOptions, build_index
    from ..index.build.processes import terminate_as_interrupt
    from ..index.dense.embedding import BACKEND_WARNINGS
    from ..index.lexical.lexonly import kept_on_append

    kind = retrieval.value
    if (append or update) and given_or_none(ctx, "retrieval", retrieval) is None:
        kind = kept_on_append(index) or kind  # --append and --update keep an index's kind
    if backend and backend.value in BACKEND_WARNINGS:
        warn(BACKEND_WARNINGS[backend.value])
    options = BuildOptions(
        model=model,
        chunk_words=chunk_words,
        language=language,
        namespaces=frozenset(namespace),
        embed_text="title+text" if embed_title else "text",
        batch_size=batch_size,
        backend=backend.value if backend else None,
        device=device.value,
        precision=precision.value,
        append=append,
        update=update,
        prune=prune,
        follow_symlinks=follow_symlinks,
        resume=resume,
        multistream_index=multistream_index,
        index_type=index_type.value,
        lexical=lexical,
        lexical_engine=lexical_engine.value,
        retrieval=kind,
        engine=engine.value,
        ray_address=ray_address,
        workers=workers,
    )
    # SIGTERM stops a build as Ctrl-C does: its readers and Ray workers stopped, one line, 130.
    with terminate_as_interrupt(), cli_progress(quiet) as progress:
        report = build_index(sources, index, options, on_warning=warn, progress=progress)
    if report.worker_nodes:
        nodes = len(set(report.worker_nodes))
        err_console.print(f"embedded by {report.workers} Ray worker"
                          f"{'s' if report.workers != 1 else ''} on {nodes} node"
                          f"{'s' if nodes != 1 else ''}")
    if report.resumed_chunks:
        err_console.print(f"resumed: {report.resumed_chunks} passages were already committed")
    if report.update is not None:
        u = report.update
        if u.get("lexical_made"):  # --update --lexical on an index without a usable one
            err_console.print(f"made the lexical (BM25) part from every passage in "
                              f"{report.lexical_seconds:.1f} s, nothing embedded")
        err_console.print(
            f"updated {index}: {_count(u['added'], 'document')} added, {u['changed']} changed, "
            f"{u['removed']} removed, {u['unchanged']} unchanged; "
            f"{_count(u['passages_embedded'], 'passage')} embedded in {report.seconds:.1f} s; "
            f"it now holds {_count(report.total_documents, 'document')}, "
            f"{_count(report.total_chunks, 'passage')}")
        return
    for path in report.unchanged:
        err_console.print(f"unchanged, skipped: {path}")
    for path in report.replaced:
        err_console.print(f"changed, re-indexed: {path}")
    if report.lexical_seconds and not report.chunks:
        err_console.print(f"added the lexical (BM25) index in {report.lexical_seconds:.1f} s")
    err_console.print(
        f"indexed {_count(report.documents, 'document')}, "
        f"{_count(report.chunks, 'passage')} in {report.seconds:.1f} s; {index} now holds "
        f"{_count(report.total_documents, 'document')}, "
        f"{_count(report.total_chunks, 'passage')}"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


@app.command("info")
@handle_errors
def info(
    index: Path = IndexOption,
    as_json: bool = typer.Option(False, "--json", help="Print meta.json as it is."),
) -> None:
    """Show what an index holds."""
    from ..index import open_index

    with open_index(index) as idx:
        meta = idx.meta
    if as_json:
        typer.echo(json.dumps(meta, indent=2, ensure_ascii=False))
        return
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()

    def row(label: str, value: str) -> None:
        # meta.json is data (a copied index may hold anything): never markup, and its
        # control characters shown escaped, as search shows a document's.
        table.add_row(label, Text(shown(value)))

    row("index", str(index))
    row("format", str(meta["format_version"]))
    row("built by", f"ceg {meta.get('ceg_version', '?')} at {meta.get('updated_at')}")
    if "last_update" in meta:  # ``--update`` (index/update.py)
        u = meta["last_update"]
        row("last update", f"{u['at']}: {u['added']} added, {u['changed']} changed, "
            f"{u['removed']} removed, {u['unchanged']} unchanged documents; "
            f"{u['passages_embedded']} passages embedded (generation "
            f"{meta['generation']['number']})")
    row("documents", str(meta["counts"]["documents"]))
    row("passages", str(meta["counts"]["chunks"]))
    # Indexes built before languages read every document as English.
    languages = meta.get("languages") or {"en": meta["counts"]["documents"]}
    row("languages", ", ".join(f"{code} {n}" for code, n in languages.items())
        + ("" if "languages" in meta else " (built before languages: all read as English)"))
    if "model" not in meta:  # built with --retrieval lexical (the checked meta says so)
        row("model", "none: built with --retrieval lexical, no vectors (searched by BM25)")
    else:
        row("model", f"{meta['model']['name']} (dimension {meta['model']['dimension']})")
        # Indexes built before backends were recorded were built with the float model.
        row("backend", str(meta["model"].get("backend", "torch")))
        # Indexes from before --precision were all computed in float32.
        row("precision", str(meta["model"].get("precision", "float32")))
        row("embedded text", meta["embed_text"])
    # Indexes built before the engine was recorded were built in one process.
    build = meta.get("build", {"engine": "local", "workers": 1})
    row("build engine", f"{build['engine']}, {build['workers']} "
        f"worker{'s' if build['workers'] != 1 else ''}")
    row(
        "chunker",
        f"about {meta['chunker']['max_words']} words, cut at {meta['chunker']['boundaries']}",
    )
    if "faiss" in meta:
        digest = meta["faiss"].get("file_digest")
        row(
            "vectors",
            f"{meta['faiss']['type']}, {digest[:29]}" if digest
            else f"{meta['faiss']['type']} (no digest recorded: built before ceg checked one; "
            "a rebuild adds it)",
        )
        row("index type", _type_line(meta))
    row("lexical", _lexical_line(index, meta))
    for src in meta["sources"]:
        row(
            "source",
            f"{src['path']} ({src['kind']}, {src['documents']} documents, "
            f"{src['chunks']} passages, {src['digest'][:19]})",
        )
    out_console.print(table)


def _type_line(meta: dict) -> str:  # type: ignore[type-arg]
    from ..index.dense.vectors import describe

    kind = describe(meta)
    line = f"{kind['index_type']} ({kind['chosen']})"
    if kind["recall_at_10"] is not None:
        line += f", recall@10 {kind['recall_at_10']:.3f} against exact search"
        target = kind["target_recall"]
        if target is not None and kind["recall_at_10"] < target:
            line += f" (BELOW the {target} target: search wider with --search-width)"
        line += f", {kind['search_ms']} ms/query"
        if kind["batch_queries_per_s"] is not None:
            line += f", {kind['batch_queries_per_s']:,.0f} queries/s in a batch"
    if kind["search"]:
        settings = ", ".join(f"{name} {value}" for name, value in kind["search"].items())
        lists = kind["params"].get("nlist")
        line += f"; search: {settings}" + (f" (of {lists:,} lists)" if lists else "")
    return line


def _lexical_line(index: Path, meta: dict) -> str:  # type: ignore[type-arg]
    from ..index.lexical.bm25 import add_lexical_hint, lexical_problem, skipped_reason

    lexical = meta.get("lexical")
    if lexical is None:
        return (
            f"none: retrieval is dense only ({skipped_reason(meta)}); add it without "
            f"re-embedding: {add_lexical_hint(index, meta)}"
        )
    problem = lexical_problem(meta, index)
    if problem is not None:
        return (
            f"unusable: {problem}; dense retrieval works; rebuild it without re-embedding: "
            f"{add_lexical_hint(index, meta)}"
        )
    params = ", ".join(f"{k} {v}" for k, v in lexical["parameters"].items())
    from ..index.lexical.lexlang import is_legacy

    read = ("English tokenizer" if is_legacy(lexical.get("tokenizer"))
            else "each passage in its language")
    return (
        f"{lexical['library']} {lexical['version']} BM25 ({params}), "
        f"{lexical['passages']} passages of {lexical['text']}, {read}"
    )


@app.command("search")
@handle_errors
def search(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="The text to search for.", metavar="QUERY"),
    index: Path = IndexOption,
    k: int = typer.Option(5, "--top-k", "-k", min=1, help="Number of passages."),
    retrieval: str = RetrievalOption,
    search_width: str = SearchWidthOption,
    lexical_max_terms: int = LexicalMaxTermsOption,
    as_json: bool = typer.Option(False, "--json", help="One JSON object per passage."),
) -> None:
    """Print the passages found for QUERY, best first, with their cosine score (none on an
    index built without vectors, which is searched by BM25 alone)."""
    from ..index import open_index
    from ..index.dense.searchwidth import parse
    from ..index.lexical.bm25 import resolve_method

    width = parse(search_width)
    with open_index(index) as idx:
        if width:
            idx.set_search_width(width)
        ignored = idx.set_lexical_max_terms(lexical_max_terms)
        if ignored is not None:
            warn(ignored)
        given = given_or_none(ctx, "retrieval", retrieval) is not None
        method, warning = resolve_method(idx, retrieval, given)
        if warning is not None:
            warn(warning)
        hits = idx.search([query], k, method)[0]
    if not hits:
        # Not a failure (exit 1 is a failed gate): the answer is "nothing", said on stderr
        # so that stdout (--json lines) stays data.
        err_console.print(f"no passage of {index} matches {query!r} ({method} search)",
                          markup=False, highlight=False)
    for rank, hit in enumerate(hits, 1):
        c = hit.chunk
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "rank": rank,
                        # null on an index without vectors: no cosine to give
                        "score": None if hit.score is None else round(hit.score, 4),
                        "doc_id": c.doc_id,
                        "title": c.title,
                        "passage_id": hit.chunk_id,
                        "ordinal": c.ordinal,
                        "start": c.start,
                        "end": c.end,
                        "url": c.url,
                        "text": c.text,
                    },
                    ensure_ascii=False,
                ).translate(_JSON_ESCAPES)
            )
            continue
        # Documents are data, not terminal commands: their control characters are shown
        # escaped (\x1b), never sent raw; --json carries them as JSON escapes.
        out_console.print(
            f"[bold]{rank}. {escape(shown(c.title))}[/]  "
            f"{'' if hit.score is None else f'score {hit.score:.3f}  '}"
            f"[dim]doc {escape(shown(c.doc_id))} passage {hit.chunk_id}[/]"
        )
        if c.url:
            out_console.print(f"   [dim]{escape(shown(c.url))}[/]")
        text = shown(c.text, keep="\n\t")
        out_console.print(f"   {text}\n", markup=False)


#: Characters that move the cursor or change what a terminal shows: C0 and C1
#: controls (ESC starts colour, title and screen-clearing sequences) and the
#: bidirectional overrides that reorder a line on screen.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(text: object, keep: str = "") -> str:
    """``text`` with every control character escaped as Python writes it (``\\x1b``),
    apart from those in ``keep``."""

    def one(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        code = ord(char)
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"

    return _CONTROL.sub(one, str(text))


#: What json.dumps(ensure_ascii=False) leaves raw of _CONTROL (C1 controls, bidi
#: overrides), as JSON escapes; JSON text outside strings is ASCII, so this is safe.
_JSON_ESCAPES = {
    code: f"\\u{code:04x}"
    for code in (*range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))
}
