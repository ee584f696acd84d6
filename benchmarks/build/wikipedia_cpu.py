"""Indexing Wikipedia on a CPU: builds end to end from a multistream dump, and what they give.

    .venv/bin/python benchmarks/build/wikipedia_cpu.py [--passages 200000] \
        [--configs lexical-1,lexical,lexical-tantivy,static,minilm] [--minilm-passages 3000] \
        [--queries 200] [--workdir DIR] [--results wikipedia_cpu]

**The dump.** A Wikimedia-style multistream dump (one bz2 stream a hundred
pages, and its ``-multistream-index.txt.bz2``) made from the real articles of
``sample_data/enwiki-sample.xml.bz2``, wikitext and markup as they are. The
sample's articles are long (55 passages each against English Wikipedia's
4 to 5), so each is cut at its level-2 headings into pages of their own (a
section a page, the first under the article's title), about 5 passages a
page, as English Wikipedia's; these pages are repeated under new ids and titles until the dump holds
``--passages`` passages. What it cannot tell: the text repeats, so the
lexical part's vocabulary stays the sample's (query times at scale are
``lexical_scale.py``'s, which grows it by Heaps' law, and are quoted from
``results/lexical_engines_10m.json`` beside these); real dumps hold more
markup of some kinds (tables, references) and less of others.

**Configurations**, each ``ceg index build DUMP`` as a child process, its
peak memory (``VmHWM``) sampled every 0.2 s:

- ``lexical``: ``--retrieval lexical`` (nothing embedded), with its default
  reader processes (one a core); ``lexical-1``: the same reading in one
  thread (``--workers 1``); ``lexical-tantivy``: ``lexical`` with the lexical
  part written by tantivy (``--lexical-engine tantivy``, the engine past
  2,000,000 passages);
- ``static``: ``--model static-minilm`` (the static model distilled from the
  shipped MiniLM, made on first use; its time is not counted: it is made once
  before the timed build);
- ``minilm``: the default model, on a slice of ``--minilm-passages``
  passages (the full dump would take hours at its rate): its rate stands for
  any size.

For each: passages/s end to end (the command's wall time, start-up included),
peak memory (the build process's ``VmHWM``, and the sum of the resident
memory of it and its reader processes, sampled), size on disk, the lexical
query time (median and p95 of ``--queries`` real sample sentences searched
one at a time, and batched queries/s: all at once, as ``ceg check`` searches
a batch of segments) in a child process of its own (a query embeds itself too
where the index has vectors: lexical results carry their cosine), and
``ceg check sample_data/responses.jsonl`` against it with the offline judge:
segments/s (wall time, start-up included).

Results: ``benchmarks/results/wikipedia_cpu.json``, a row per configuration
with its ``passages`` count.
"""

from __future__ import annotations

import argparse
import bz2
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _common  # noqa: E402

CEG = [str(Path(sys.executable).with_name("ceg"))]
CONFIGS = ("lexical-1", "lexical", "lexical-tantivy", "static", "minilm")
PER_STREAM = 100
_PAGE = re.compile(r"<page>.*?</page>", re.S)
_TEXT = re.compile(r"(<text\b[^>]*>)(.*?)(</text>)", re.S)
_SECTION = re.compile(r"\n(?===[^=])")


def _escape_title(title: str) -> str:
    return title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def sample_pages() -> tuple[str, str, list[tuple[str, str]]]:
    """The sample dump's header and footer, and its articles cut into sections:
    (title, the page's wikitext, XML-escaped as it stands in the dump)."""
    xml = bz2.decompress(_common.ENWIKI_SAMPLE.read_bytes()).decode("utf-8")
    pages = list(_PAGE.finditer(xml))
    header, footer = xml[: pages[0].start()], xml[pages[-1].end():]
    sections: list[tuple[str, str]] = []
    for page in pages:
        body = page.group()
        if "<ns>0</ns>" not in body or "<redirect" in body:
            continue
        title = re.search(r"<title>(.*?)</title>", body).group(1)  # type: ignore[union-attr]
        text = _TEXT.search(body)
        if text is None:
            continue
        for number, part in enumerate(_SECTION.split(text.group(2))):
            if part.strip():
                sections.append((title if number == 0 else f"{title} ({number})", part))
    return header, footer, sections


def make_dump(folder: Path, passages: int, per_page: float) -> tuple[Path, int]:
    """The multistream dump of about ``passages`` passages (``per_page`` a page) and its
    index, in ``folder``; made once, kept for another run. Returns (dump, pages)."""
    dump = folder / f"benchwiki-{passages}-pages-articles-multistream.xml.bz2"
    index = folder / f"benchwiki-{passages}-pages-articles-multistream-index.txt.bz2"
    header, footer, sections = sample_pages()
    folder.mkdir(parents=True, exist_ok=True)
    wanted = max(1, round(passages / per_page))
    if dump.exists() and index.exists():
        return dump, wanted
    part, index_part = dump.with_suffix(".part"), index.with_suffix(".part")
    lines: list[bytes] = []
    with open(part, "wb") as out:
        out.write(bz2.compress(header.encode()))
        group: list[str] = []
        offset = out.tell()
        for n in range(wanted):
            title, text = sections[n % len(sections)]
            copy = n // len(sections)
            shown = title if copy == 0 else f"{title} [{copy}]"
            page_id = 1_000_000 + n
            group.append(
                f"  <page>\n    <title>{shown}</title>\n    <ns>0</ns>\n    <id>{page_id}</id>\n"
                f"    <revision>\n      <id>{page_id}</id>\n      <text xml:space=\"preserve\">"
                f"{text}</text>\n    </revision>\n  </page>\n"
            )
            lines.append(f"{offset}:{page_id}:{shown}\n".encode())
            if len(group) == PER_STREAM or n == wanted - 1:
                out.write(bz2.compress("".join(group).encode()))
                group = []
                offset = out.tell()
        out.write(bz2.compress(footer.encode()))
    index_part.write_bytes(bz2.compress(b"".join(lines)))
    os.replace(part, dump)
    os.replace(index_part, index)
    return dump, wanted


def passages_per_page(folder: Path) -> float:
    """Passages a section page gives, measured by a lexical build of one copy of them."""
    from ceg_cli.index.build.builder import BuildOptions, build_index

    _, _, sections = sample_pages()
    sample, _ = make_dump(folder / "probe", len(sections), 1.0)
    target = folder / "probe" / "index"
    if not (target / "meta.json").exists():
        build_index([sample], target, BuildOptions(retrieval="lexical"))
    chunks = json.loads((target / "meta.json").read_text())["counts"]["chunks"]
    return chunks / len(sections)


def tree_rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and every process under it (its reader processes), KiB."""
    total, todo = 0, [pid]
    while todo:
        here = todo.pop()
        total += _common.proc_status_kib(here, "VmRSS")["VmRSS"]
        try:
            for task in Path(f"/proc/{here}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return total


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build(config: str, dump: Path, target: Path) -> dict[str, Any]:
    args = [*CEG, "index", "build", str(dump), "--index", str(target), "--quiet"]
    if config.startswith("lexical"):
        args += ["--retrieval", "lexical"]
    if config == "lexical-1":
        args += ["--workers", "1"]
    if config == "lexical-tantivy":
        args += ["--lexical-engine", "tantivy"]
    if config == "static":
        args += ["--model", "static-minilm"]
    log = target.with_name(f"{target.name}.log")  # its warnings (pages left empty...)
    started = time.perf_counter()
    with open(log, "w") as said:
        proc = subprocess.Popen(_common.with_parent(args), stdout=subprocess.DEVNULL,
                                stderr=said)
        peak_tree = [0]

        def sample() -> None:
            peak_tree[0] = max(peak_tree[0], tree_rss_kib(proc.pid))

        try:
            code, peak, _anon = _common.watch(proc, sample)
        finally:
            _common.stop_child(proc)
    seconds = time.perf_counter() - started
    if code != 0:
        error = log.read_text(errors="replace").strip()[-500:]
        raise SystemExit(f"{config}: ceg index build exited {code}: {error}")
    meta = json.loads((target / "meta.json").read_text())
    passages = meta["counts"]["chunks"]
    return {
        "configuration": config,
        "passages": passages,
        "documents": meta["counts"]["documents"],
        "build_seconds": round(seconds, 1),
        "build_passages_per_s": round(passages / seconds, 1),
        "build_peak_rss_mb": round(peak / 1024, 1),
        # With reader processes: the sum over the build and its readers, sampled.
        "build_peak_rss_all_processes_mb": round(max(peak, peak_tree[0]) / 1024, 1),
        "disk_mb": round(disk_bytes(target) / 1e6, 1),
        "lexical_engine": meta["lexical"]["library"],
        "model": (meta.get("model") or {}).get("name", "none"),
    }


_QUERY_CHILD = r"""
import json, sys, time
from ceg_cli.index import open_index
index_dir, queries = sys.argv[1], json.loads(sys.stdin.read())
with open_index(index_dir) as index:
    method = "lexical"
    index.search(queries[:3], 5, method)  # warm: the lexical part loaded
    lexical = index.lexical()
    max_terms = index.lexical_max_terms
    times = []
    for q in queries:
        t0 = time.perf_counter()
        index.search([q], 5, method)
        times.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    index.search(queries, 5, method)
    batched = len(queries) / (time.perf_counter() - t0)
print(json.dumps({"times": times, "batched": batched, "max_terms": max_terms}))
"""


def query_times(target: Path, queries: list[str]) -> dict[str, Any]:
    out = subprocess.run(_common.with_parent([sys.executable, "-c", _QUERY_CHILD, str(target)]),
                         input=json.dumps(queries), capture_output=True, text=True, check=True)
    found = json.loads(out.stdout)
    times = sorted(found["times"])
    return {
        "lexical_query_median_ms": round(_common.median(times), 2),
        "lexical_query_p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
        "lexical_batched_queries_per_s": round(found["batched"], 1),
        # The terms of a query searched (None: all): past 2,000,000 passages, the rarest.
        "lexical_query_max_terms": found["max_terms"],
    }


def check_speed(target: Path) -> dict[str, Any]:
    responses = _common.REPO / "sample_data" / "responses.jsonl"
    started = time.perf_counter()
    out = subprocess.run(_common.with_parent([*CEG, "check", str(responses), "--index",
                                              str(target), "--quiet"]),
                         capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if out.returncode not in (0, 1):
        raise SystemExit(f"ceg check exited {out.returncode}: {out.stderr.strip()[-500:]}")
    segments = sum(len(json.loads(line)["segments"]) for line in out.stdout.splitlines())
    return {"check_seconds": round(seconds, 1), "check_segments": segments,
            "check_segments_per_s": round(segments / seconds, 2)}


def sample_queries(count: int) -> list[str]:
    """Real sentences of the sample articles' text, seeded."""
    from ceg_cli.corpus import iter_documents
    from ceg_cli.sentences import sentence_spans

    sentences = []
    for doc in iter_documents(_common.ENWIKI_SAMPLE):
        for start, end in sentence_spans(doc.text):
            words = doc.text[start:end].split()
            if 8 <= len(words) <= 40:
                sentences.append(" ".join(words))
    return random.Random(7).sample(sentences, count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", type=int, default=200_000)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--minilm-passages", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--results", default="wikipedia_cpu")
    args = parser.parse_args()
    name = _common.results_name(args.results)
    configs = [c for c in args.configs.split(",") if c]
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        _common.usage_error(f"--configs: unknown {', '.join(unknown)}; choose from "
                            f"{', '.join(CONFIGS)}")
    rows = []
    with _common.work_dir(args.workdir, prefix="ceg-wikipedia-cpu-") as work:
        per_page = passages_per_page(work)
        _common.log(f"{per_page:.1f} passages a section page")
        queries = sample_queries(args.queries)
        if "static" in configs:  # made once, before the timed build (first use makes it)
            from ceg_cli.index.dense.embedding import load_embedder

            load_embedder("static-minilm")
        for config in configs:
            size = args.minilm_passages if config == "minilm" else args.passages
            dump, pages = make_dump(work, size, per_page)
            target = work / f"index-{config}-{size}"
            if target.exists():
                _common.usage_error(f"{target}: left by an earlier run; give another --workdir")
            _common.log(f"{config}: building {pages:,} pages (about {size:,} passages)")
            row = build(config, dump, target)
            row.update(query_times(target, queries))
            row.update(check_speed(target))
            row["load_average"] = os.getloadavg()
            _common.log(json.dumps(row))
            rows.append(row)
    _common.write_results(name, {
        "command": _common.command_line(),
        "environment": _common.environment(),
        "passages_per_page": round(per_page, 2),
        "rows": rows,
    })
    print(_common.markdown_table(
        ["configuration", "passages", "build passages/s", "peak MB (all processes)",
         "disk MB",
         "query median ms", "query p95 ms", "batched queries/s", "check segments/s"],
        [[r["configuration"], f"{r['passages']:,}", r["build_passages_per_s"],
          r["build_peak_rss_all_processes_mb"], r["disk_mb"], r["lexical_query_median_ms"],
          r["lexical_query_p95_ms"], r["lexical_batched_queries_per_s"],
          r["check_segments_per_s"]] for r in rows]))


if __name__ == "__main__":
    main()
