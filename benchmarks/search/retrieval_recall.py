"""Retrieval recall on the shared benchmarks: embedded text, and retrieval method.

    .venv/bin/python benchmarks/search/retrieval_recall.py [--index DIR ...] \
        [--variants title+text,text] [--retrieval dense,lexical,hybrid] \
        [--models default,static-minilm]

``--models``: the embedding models to compare, each a ``--model`` of ``ceg
index build`` (``default`` is the shipped MiniLM); with more than one, every
configuration is named by its model too, and all are paired against the first.

For each embedded-text variant (``BuildOptions.embed_text``: ``title+text``
puts "Title. " in front of every passage before it is embedded, ``text``
embeds the passage alone) and each retrieval method (``--retrieval``: dense
cosine, lexical BM25, or their fusion, ``ceg_cli.index.lexical.bm25``), one column:

- **fever**: the 12 FEVER claims whose evidence is the Aristotle article of
  the enwiki sample, each claim as the query: is a passage of Aristotle in the
  top 1 / top 5?
- **enwiki-lead**: for each article of the enwiki sample, its first sentence
  with the title's words removed ("... is a political philosophy that
  advocates ..."), as the query: is a passage of that article in the top 1 /
  top 5? A query that does not name its subject is where an embedded title
  could hurt. The sentence is in the index word for word, so this is easy;
  it shows harm, not skill.
- **felm**: FELM world-knowledge responses (wk-dev): every reference a
  response cites becomes a document (its scraped ``ref_contents``), titled
  from its URL (a Wikipedia URL gives the article title; another URL the last
  readable path segment, else the host name). Each response segment is a
  query; a hit is a passage of one of that response's own references. Many
  titles, real response sentences (pronouns included): the realistic case.
- **halueval**: all 250 ``knowledge`` passages of HaluEval QA (qa-dev) as
  JSONL documents, id = item index. HaluEval gives no titles (each passage
  joins two HotpotQA paragraphs), so the documents have ``title: ""``, which
  the JSONL reader replaces with the id: under ``title+text`` the embedded
  text starts "17. ". Queries: question + right answer, and question only;
  a hit is the item's own passage.

recall@1/@5/@20 and MRR@10 for each; the milliseconds per query of the
search alone (top 20: scoring, fusing, fetching the passages), the query's
embedding (the same for every method: lexical and hybrid need the cosine too)
timed apart;
and for each index the lexical part's build time (rebuilt from the chunk
store, as ``--append`` does) and its size beside the vectors and passages.

The enwiki indexes are reused when given with ``--index`` (their
``meta.json`` says which variant they are) or found in ``benchmarks/.cache``;
otherwise they are built there (about 4 minutes each on 2 cores). One built
before the lexical part gets it added (``ceg index build --append``, seconds). FELM and
HaluEval corpora are small and built in a temporary directory every run; FELM
text (CC BY-NC-SA) is never written into the repository, and results hold
aggregate figures only.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (
    ENWIKI_SAMPLE,
    SHARED_DATA,
    cache_dir,
    command_line,
    environment,
    log,
    markdown_table,
    median,
    results_name,
    work_dir,
    write_results,
)

VARIANTS = ("title+text", "text")
KS = (1, 5, 20)
MRR_DEPTH = 10
FEVER = SHARED_DATA / "fever" / "fever-dev-in-enwiki-sample.jsonl"
FELM = SHARED_DATA / "felm" / "wk-dev.jsonl"
HALUEVAL = SHARED_DATA / "halueval" / "qa-dev.jsonl"


@dataclass(frozen=True)
class Task:
    """Queries and, for each, the document ids that count as a hit."""

    name: str
    queries: list[str]
    targets: list[frozenset[str]]


# --------------------------------------------------------------------------- metrics


def score(index: Any, task: Task, method: str) -> dict[str, Any]:
    """recall@k (a passage of a target document in the top k) and MRR@10, by document."""
    from ceg_cli.index.lexical.bm25 import search

    started = time.perf_counter()
    vectors = index.embedder().embed(task.queries)
    embedded = time.perf_counter()
    depth = max(*KS, MRR_DEPTH)
    if method == "dense":
        hits = index.search_vectors(vectors, depth)
    else:
        hits = search(index, task.queries, vectors, depth, method)
    searched = time.perf_counter()
    ranks: list[int | None] = []
    for found, target in zip(hits, task.targets):
        rank = next((r for r, h in enumerate(found, 1) if h.chunk.doc_id in target), None)
        ranks.append(rank)
    n = len(task.queries)
    result: dict[str, Any] = {"queries": n}
    for k in KS:
        result[f"hits@{k}"] = sum(1 for r in ranks if r is not None and r <= k)
        result[f"recall@{k}"] = round(result[f"hits@{k}"] / n, 4)
    result[f"mrr@{MRR_DEPTH}"] = round(sum(1 / r for r in ranks if r and r <= MRR_DEPTH) / n, 4)
    result["embed_ms_per_query"] = round(1000 * (embedded - started) / n, 2)
    result["search_ms_per_query"] = round(1000 * (searched - embedded) / n, 2)
    result["_ranks"] = ranks  # for the paired comparison; not written out
    return result


def paired(a: list[int | None], b: list[int | None], k: int) -> dict[str, Any]:
    """Queries only A / only B finds in the top k, and the exact McNemar (sign test) p."""
    only_a = sum(1 for x, y in zip(a, b) if _hit(x, k) and not _hit(y, k))
    only_b = sum(1 for x, y in zip(a, b) if _hit(y, k) and not _hit(x, k))
    n = only_a + only_b
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2**n if n else 1.0
    return {
        "only_first": only_a,
        "only_second": only_b,
        "p_two_sided": float(f"{min(1.0, 2 * tail):.3g}"),
    }


def _hit(rank: int | None, k: int) -> bool:
    return rank is not None and rank <= k


# --------------------------------------------------------------------------- tasks


def chunk_rows(index: Any, sql: str) -> list[tuple[Any, ...]]:
    """Rows of the index's chunk store (read-only; the Index API fetches by id only)."""
    from ceg_cli.index import CHUNKS_FILE, connect_readonly

    db = connect_readonly(index.path / CHUNKS_FILE)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def doc_ids_by_title(index: Any) -> dict[str, str]:
    rows = chunk_rows(index, "SELECT DISTINCT title, doc_id FROM chunks")
    return {title: doc_id for title, doc_id in rows}


def fever_task(index: Any) -> Task:
    by_title = doc_ids_by_title(index)
    queries: list[str] = []
    targets: list[frozenset[str]] = []
    for line in FEVER.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        titles = {ev[2].replace("_", " ") for group in item["evidence"] for ev in group}
        missing = titles - by_title.keys()
        if missing:
            raise SystemExit(f"FEVER evidence {sorted(missing)} is not in index {index.path}")
        queries.append(item["claim"])
        targets.append(frozenset(by_title[t] for t in titles))
    return Task("fever", queries, targets)


def strip_title_words(sentence: str, title: str) -> str:
    """The sentence without the words of the title (plurals and possessives too)."""
    words = re.findall(r"\w+", re.sub(r"\(.*?\)", "", title))
    out = sentence
    for word in words:
        out = re.sub(rf"\b{re.escape(word)}(?:s|es|'s|’s)?\b", " ", out, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", out).strip()


def lead_task(index: Any) -> Task:
    from ceg_cli.sentences import sentence_spans

    rows = chunk_rows(index, "SELECT doc_id, title, text FROM chunks WHERE ordinal = 0 ORDER BY id")
    queries: list[str] = []
    targets: list[frozenset[str]] = []
    for doc_id, title, text in rows:
        spans = sentence_spans(text)
        if not spans:
            continue
        query = strip_title_words(text[spans[0][0] : spans[0][1]], title)
        if len(query.split()) < 4:  # nothing left to search with
            continue
        queries.append(query)
        targets.append(frozenset({doc_id}))
    return Task("enwiki-lead", queries, targets)


_GENERIC_SEGMENTS = {"index", "faq", "wiki", "article", "articles", "news", "post", "en", "main"}


def title_from_url(url: str) -> str:
    """A document title from a reference URL (see the module docstring)."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").removeprefix("www.")
    segments = [unquote(s) for s in parts.path.split("/") if s]
    if host.endswith("wikipedia.org") and len(segments) >= 2 and segments[0] == "wiki":
        # Some FELM URLs carry the comma that followed them in the annotator's text.
        return segments[-1].replace("_", " ").rstrip(",;")
    for segment in reversed(segments):
        stem = re.sub(r"\.(s?html?|php|aspx?)$", "", segment, flags=re.IGNORECASE)
        words = re.sub(r"[-_+]+", " ", stem).strip()
        if re.search(r"[^\W\d_]{3}", words) and words.lower() not in _GENERIC_SEGMENTS:
            return words
    return host or url


def felm_corpus(workdir: Path) -> tuple[Path, list[Task], dict[str, Any]]:
    """FELM references as JSONL documents, and the segments that cite them."""
    ids: dict[str, str] = {}
    docs: list[dict[str, str]] = []
    queries: list[str] = []
    with_question: list[str] = []  # ceg check's default query: question + segment
    targets: list[frozenset[str]] = []
    for line in FELM.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        own: set[str] = set()
        for url, content in zip(item["ref"], item["ref_contents"]):
            if not (content or "").strip():
                continue
            if url not in ids:
                ids[url] = f"ref{len(ids)}"
                docs.append({"id": ids[url], "title": title_from_url(url), "text": content})
            own.add(ids[url])
        if not own:
            continue
        for segment in item["segmented_response"]:
            if segment.strip():
                queries.append(segment)
                with_question.append(f"{item['prompt']} {segment}")
                targets.append(frozenset(own))
    path = workdir / "felm-refs.jsonl"
    _write_jsonl(path, docs)
    wiki_ids = {ids[u] for u in ids if "wikipedia.org/wiki/" in u}
    info = {"documents": len(docs), "wikipedia_titles": len(wiki_ids), "segments": len(queries)}
    # Titles from Wikipedia URLs are real titles; titles from other URLs are
    # slugs, often close to the question asked, so the two are reported apart.
    split = [
        Task(
            name, [q for q, t in zip(queries, targets) if keep(t)], [t for t in targets if keep(t)]
        )
        for name, keep in (
            ("felm: wikipedia refs", lambda t: t <= wiki_ids),
            ("felm: other refs", lambda t: not t <= wiki_ids),
        )
    ]
    return path, [
        Task("felm", queries, targets),
        *split,
        Task("felm q+segment", with_question, targets),
    ], info


def halueval_corpus(workdir: Path) -> tuple[Path, list[Task]]:
    items = [json.loads(line) for line in HALUEVAL.read_text(encoding="utf-8").splitlines()]
    docs = [{"id": str(i), "title": "", "text": item["knowledge"]} for i, item in enumerate(items)]
    path = workdir / "halueval-knowledge.jsonl"
    _write_jsonl(path, docs)
    targets = [frozenset({str(i)}) for i in range(len(items))]
    with_answer = [f"{item['question']} {item['right_answer']}" for item in items]
    question = [item["question"] for item in items]
    return path, [
        Task("halueval q+a", with_answer, targets),
        Task("halueval q", question, targets),
    ]


def _write_jsonl(path: Path, records: Sequence[dict[str, str]]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")


# --------------------------------------------------------------------------- indexes


def embed_mode(index_dir: Path) -> str:
    meta = json.loads((index_dir / "meta.json").read_text(encoding="utf-8"))
    return str(meta["embed_text"])


def index_key(index_dir: Path) -> tuple[str, str]:
    """(embedded-text variant, model name) of an index, from its meta.json."""
    meta = json.loads((index_dir / "meta.json").read_text(encoding="utf-8"))
    return str(meta["embed_text"]), str(meta["model"]["name"])


def cached_enwiki_index(mode: str, embedder: Any) -> Path:
    """``benchmarks/.cache/enwiki-sample-MODE[-MODEL]``, built unless it is already up to date."""
    from ceg_cli.index.build.builder import BuildOptions, build_index, source_digest
    from ceg_cli.index.dense.embedding import DEFAULT_MODEL

    slug = "" if embedder.name == DEFAULT_MODEL else "-" + re.sub(r"\W+", "-", embedder.name)
    target = cache_dir() / f"enwiki-sample-{mode}{slug}"
    if (target / "meta.json").exists():
        meta = json.loads((target / "meta.json").read_text(encoding="utf-8"))
        digests = [s["digest"] for s in meta["sources"]]
        if (meta["embed_text"], meta["model"]["name"]) == (mode, embedder.name) \
                and digests == [source_digest(ENWIKI_SAMPLE)]:
            with_lexical(target, mode)
            return target
    log(f"building {target} (about 4 minutes) ...")
    started = time.perf_counter()
    build_index([ENWIKI_SAMPLE], target, BuildOptions(embed_text=mode), embedder=embedder)
    log(f"  built in {time.perf_counter() - started:.0f} s")
    return target


def with_lexical(target: Path, mode: str) -> None:
    """Add the lexical part to an index built before it existed (no re-embedding)."""
    from ceg_cli.index.build.builder import BuildOptions, build_index

    meta = json.loads((target / "meta.json").read_text(encoding="utf-8"))
    if "lexical" not in meta:
        log(f"adding the lexical part to {target} ...")
        sources = [Path(s["path"]) for s in meta["sources"]]
        build_index(sources, target, BuildOptions(embed_text=mode, append=True))


def lexical_cost(index_dir: Path) -> dict[str, Any]:
    """Seconds to build the lexical part from the chunk store, and the sizes on disk."""
    from ceg_cli.index import CHUNKS_FILE, VECTORS_FILE, connect_readonly
    from ceg_cli.index.lexical.bm25 import LEXICAL_DIR, build_lexical

    with work_dir(None, prefix="ceg-lexical-") as scratch:
        db = connect_readonly(index_dir / CHUNKS_FILE)
        try:
            started = time.perf_counter()
            entry = build_lexical(db, scratch, embed_mode(index_dir))
            seconds = time.perf_counter() - started
        finally:
            db.close()

    def size(path: Path) -> int:
        files = path.rglob("*") if path.is_dir() else [path]
        return sum(f.stat().st_size for f in files if f.is_file())

    return {
        "passages": entry["passages"],
        "build_seconds": round(seconds, 2),
        "lexical_bytes": size(index_dir / LEXICAL_DIR),
        "vectors_bytes": size(index_dir / VECTORS_FILE),
        "chunks_bytes": size(index_dir / CHUNKS_FILE),
    }


def build_small(source: Path, target: Path, mode: str, embedder: Any) -> Path:
    from ceg_cli.index.build.builder import BuildOptions, build_index

    build_index([source], target, BuildOptions(embed_text=mode), embedder=embedder)
    return target


def evaluate(
    index_dir: Path, tasks: Callable[[Any], list[Task]], embedder: Any, methods: Sequence[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per method, per task: the scores."""
    from ceg_cli.index import open_index

    with open_index(index_dir) as index:
        index.use_embedder(embedder)
        index.search(["warm up"], 1, "hybrid")  # loads the lexical index before timing
        built = tasks(index)
        return {m: {task.name: score(index, task, m) for task in built} for m in methods}


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--index",
        type=Path,
        action="append",
        default=[],
        help="an existing enwiki-sample index (repeatable; its meta.json names its variant)",
    )
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument(
        "--retrieval", default="dense", help="methods, comma-separated: dense,lexical,hybrid"
    )
    parser.add_argument(
        "--models", default="default",
        help="embedding models, comma-separated (default: the shipped MiniLM; static-minilm)",
    )
    parser.add_argument("--name", default="retrieval_recall", help="results/NAME.json")
    args = parser.parse_args(argv)
    results_name(args.name, "--name")  # before any work: a bare name only
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"--variants: unknown {sorted(unknown)}; choose from {VARIANTS}")
    from ceg_cli.index.lexical.bm25 import RETRIEVAL_MODES

    methods = [m for m in args.retrieval.split(",") if m]
    if set(methods) - set(RETRIEVAL_MODES):
        parser.error(f"--retrieval: choose from {RETRIEVAL_MODES}")
    from ceg_cli.index.dense.embedding import load_embedder

    models = [m.strip() for m in args.models.split(",") if m.strip()] or ["default"]
    embedders = [load_embedder(None if m == "default" else m) for m in models]
    many = len(embedders) > 1

    def named(embedder: Any, text: str) -> str:
        return f"{short_name(embedder.name)} {text}" if many else text

    configs = [(e, v, m) for e in embedders for v in variants for m in methods]
    labels = [named(e, label(v, m, len(variants), len(methods))) for e, v, m in configs]
    given = {index_key(p): p.resolve() for p in args.index}
    results: dict[str, dict[str, dict[str, Any]]] = {}
    indexes: dict[str, str] = {}
    felm_info: dict[str, Any] = {}
    lexical: dict[str, dict[str, Any]] = {}
    with work_dir(None, prefix="ceg-bench-") as work:
        felm_path, felm_tasks, felm_info = felm_corpus(work)
        halu_path, halu_tasks = halueval_corpus(work)
        for embedder in embedders:
            tag = short_name(embedder.name)
            for mode in variants:
                enwiki = given.get((mode, embedder.name)) or cached_enwiki_index(mode, embedder)
                with_lexical(enwiki, mode)
                indexes[named(embedder, mode)] = str(enwiki)
                log(f"[{tag} {mode}] enwiki sample: {enwiki}")
                rows = evaluate(
                    enwiki, lambda idx: [fever_task(idx), lead_task(idx)], embedder, methods
                )
                log(f"[{tag} {mode}] FELM references, HaluEval knowledge ...")
                felm_dir = build_small(felm_path, work / f"felm-{tag}-{mode}", mode, embedder)
                halu_dir = build_small(halu_path, work / f"halueval-{tag}-{mode}", mode, embedder)
                for part in (
                    evaluate(felm_dir, lambda _idx: felm_tasks, embedder, methods),
                    evaluate(halu_dir, lambda _idx: halu_tasks, embedder, methods),
                ):
                    for method in methods:
                        rows[method] |= part[method]
                for method in methods:
                    key = named(embedder, label(mode, method, len(variants), len(methods)))
                    results[key] = rows[method]
                if embedder is embedders[0]:  # the lexical part is the same for every model
                    for name, where in (
                        ("enwiki", enwiki), ("felm", felm_dir), ("halueval", halu_dir)
                    ):
                        lexical[f"{name} ({mode})"] = lexical_cost(where)

    # Each configuration against the first (the default embedded text, dense).
    first = results[labels[0]]
    comparison = {
        other: {
            task: {
                f"@{k}": paired(first[task]["_ranks"], results[other][task]["_ranks"], k)
                for k in KS
            }
            for task in first
        }
        for other in labels[1:]
    }
    for row in results.values():
        for task in row.values():
            del task["_ranks"]
    data = {
        "command": command_line(),
        "model": ", ".join(e.name for e in embedders),
        "models": [e.name for e in embedders],
        "variants": variants,
        "retrieval": methods,
        "configs": labels,
        "lexical": lexical,
        "embed_ms_per_query": _median_embed(results),
        "enwiki_indexes": indexes,
        "felm_corpus": felm_info,
        "halueval_titles": "'' (the JSONL reader substitutes the id)",
        "results": results,
        "paired": comparison,
        "environment": environment(),
    }
    path = write_results(args.name, data)
    print(render(data))
    print(f"\nresults: {path}")
    return 0


TASK_LABELS = {
    "fever": "FEVER claims → Aristotle (enwiki sample)",
    "enwiki-lead": "lead sentence minus title words → its article (enwiki sample)",
    "felm": "FELM wk segment → its own references (titles from URLs)",
    "felm: wikipedia refs": "  ... segments whose references are all Wikipedia",
    "felm: other refs": "  ... segments with a non-Wikipedia reference (slug titles)",
    "felm q+segment": "FELM wk question + segment (ceg check's query) → own references",
    "halueval q+a": "HaluEval question + right answer → own knowledge",
    "halueval q": "HaluEval question only → own knowledge",
}


def short_name(model: str) -> str:
    """A model's name in a configuration's label: the last part of a hub name."""
    return model.rstrip("/").rsplit("/", 1)[-1]


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def render(data: dict[str, Any]) -> str:
    configs = data["configs"]
    header = ["task", "queries"]
    for c in configs:
        header += [*(f"{c} @{k}" for k in KS), f"{c} search ms/query"]
    rows = []
    for task, label_ in TASK_LABELS.items():
        first = data["results"][configs[0]][task]
        row: list[Any] = [label_, first["queries"]]
        for c in configs:
            r = data["results"][c][task]
            row += [f"{r[f'recall@{k}']:.3f} ({r[f'hits@{k}']})" for k in KS]
            row.append(f"{r['search_ms_per_query']:.2f}")
        rows.append(row)
    felm = data["felm_corpus"]
    paired_part = []
    for other, by_task in data["paired"].items():
        paired_rows = [
            [TASK_LABELS[task]]
            + [f"{c[f'@{k}']['only_first']} / {c[f'@{k}']['only_second']}" for k in KS]
            + [_p(c[f"@{k}"]["p_two_sided"]) for k in KS]
            for task, c in by_task.items()
        ]
        a, b = configs[0], other
        paired_part += [
            "",
            f"Paired, query by query: hits only {a} / only {b}, and the exact McNemar p:",
            "",
            markdown_table(
                ["task", *(f"@{k} only {a} / only {b}" for k in KS), *(f"p @{k}" for k in KS)],
                paired_rows,
            ),
        ]
    cost_rows = [
        [
            name,
            c["passages"],
            f"{c['build_seconds']:.2f}",
            f"{c['lexical_bytes'] / 1e6:.2f}",
            f"{c['vectors_bytes'] / 1e6:.2f} + {c['chunks_bytes'] / 1e6:.2f}",
        ]
        for name, c in data["lexical"].items()
    ]
    return "\n".join(
        [
            f"## Retrieval recall by document ({data['model']})",
            "",
            f"    {data['command']}",
            "",
            markdown_table(header, rows),
            *paired_part,
            "",
            "The lexical part (BM25, rebuilt from the chunk store as --append does):",
            "",
            markdown_table(
                ["index", "passages", "build s", "lexical MB", "vectors + passages MB"],
                cost_rows,
            ),
            "",
            "recall@k: share of queries with a passage of a target document in the top k "
            "(hit counts in brackets); search ms/query: the search alone (top 20), without "
            "embedding the query, which every method needs (median over tasks: "
            f"{data['embed_ms_per_query']:.1f} ms per query).",
            f"FELM corpus: {felm['documents']} reference documents "
            f"({felm['wikipedia_titles']} Wikipedia), {felm['segments']} segments. "
            f"HaluEval titles: {data['halueval_titles']}.",
            "enwiki indexes: " + ", ".join(f"{m} = {p}" for m, p in data["enwiki_indexes"].items()),
        ]
    )


def _median_embed(results: dict[str, dict[str, dict[str, Any]]]) -> float:
    return round(median([t["embed_ms_per_query"] for r in results.values() for t in r.values()]), 2)


def label(variant: str, method: str, variants: int, methods: int) -> str:
    """A column's name: the method, the variant, or both when both vary."""
    if methods > 1 and variants > 1:
        return f"{variant} {method}"
    return method if methods > 1 else variant


if __name__ == "__main__":
    sys.exit(main())
