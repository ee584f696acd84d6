"""HTML report size and time to open, for 100 and 10,000 responses.

    .venv/bin/python benchmarks/check/report_open.py [--records FILE | --index DIR]
        [--sizes 100 10000] [--runs 3]

Real records first: ``--records`` (a ``ceg check`` output), or the sample
responses checked with the offline judge against ``--index`` (default
``$CEG_INDEX``, else ``./index``; cached in ``benchmarks/.cache``). They are
replicated to each size with perturbations: each copy gets its own id, line
and question, and two corpora are simulated:

- **shared**: copies cite the same passages (a small corpus, as in the
  sample; the report stores each passage once);
- **distinct**: every copy's passages are new (id and text changed), the
  worst case for size: nothing is shared between responses.

For each, the report is written (``ceg_cli.report.html.write_report``, timed)
and opened ``--runs`` times in Debian's headless Chromium, each in a fresh
browser context, from a ``file://`` URL. **Open** is navigation start to
interactive: the page's script sets ``data-ready-ms`` (``performance.now()``,
whose origin is navigation start) after it has parsed the data and drawn the
first page of responses and its controls work. **Filter** is the in-page time
of a click on "Nonfactual" (recompute the matches and draw their first page);
**search** is from the keystroke to the list's update, including the page's
120 ms pause that waits for the end of typing. Medians are reported.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (
    REPO,
    cache_dir,
    command_line,
    environment,
    log,
    markdown_table,
    work_dir,
    write_results,
)

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-quic",
]
SAMPLE = REPO / "sample_data" / "responses.jsonl"
#: A search term present in one sample response; its copies are what the search finds.
SEARCH = "julius caesar"


def real_records(records: Path | None, index: Path) -> list[dict[str, Any]]:
    if records is None:
        records = cache_dir() / "report_open-sample-checked.jsonl"
        if not records.exists():
            from ceg_cli.check.run import CheckRun, RunSettings

            log(f"checking {SAMPLE.name} against {index} ...")
            run = CheckRun(RunSettings.resolve(responses=str(SAMPLE), index=index, out=records))
            try:
                run.execute()
            finally:
                run.close()
    return [json.loads(line) for line in records.read_text(encoding="utf-8").splitlines()]


def synthesize(base: list[dict[str, Any]], n: int, distinct: bool) -> list[dict[str, Any]]:
    """``n`` records from ``base``: new ids, lines, questions; new passages if ``distinct``."""
    out = []
    for k in range(n):
        record = copy.deepcopy(base[k % len(base)])
        copy_no = k // len(base)
        record["id"] = f"{record['id']}-{k}"
        record["line"] = k + 1
        if record.get("question"):
            record["question"] = f"{record['question']} (variant {k})"
        if distinct and copy_no:
            for seg in record.get("segments", []):
                for p in seg.get("citations", []) + seg.get("evidence", []):
                    p["passage_id"] += copy_no * 10_000_000
                    p["text"] = f"{p['text']} (copy {copy_no})"
        out.append(record)
    return out


def measure_open(browser: Any, path: Path) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
    try:
        page = context.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("console", lambda m: problems.extend([m.text] if m.type == "error" else []))
        started = time.perf_counter()
        page.goto(path.as_uri(), timeout=120_000)
        page.wait_for_selector("html[data-ready]", timeout=120_000)
        wall = (time.perf_counter() - started) * 1000
        ready = float(page.get_attribute("html", "data-ready-ms") or "nan")
        heap = page.evaluate("() => performance.memory ? performance.memory.usedJSHeapSize : 0")
        filter_ms = page.evaluate(
            """() => { const t = performance.now();
                       document.getElementById('filter-nonfactual').click();
                       return performance.now() - t; }"""
        )
        page.evaluate("() => document.getElementById('filter-all').click()")
        search_ms = page.evaluate(
            """(term) => new Promise((resolve) => {
                 const status = document.getElementById('status');
                 const search = document.getElementById('search');
                 const t = performance.now();
                 new MutationObserver(() => resolve(performance.now() - t))
                   .observe(status, {childList: true, characterData: true, subtree: true});
                 search.value = term;
                 search.dispatchEvent(new Event('input'));
               })""",
            SEARCH,
        )
        if problems:
            raise RuntimeError(f"{path}: the page reported errors: {problems}")
        return {"ready_ms": ready, "wall_ms": wall, "filter_ms": filter_ms,
                "search_ms": search_ms, "heap_mb": heap / 1e6}
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=Path, help="a ceg check output to replicate")
    parser.add_argument("--index", type=Path,
                        default=Path(os.environ.get("CEG_INDEX", "index")))
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from ceg_cli.report.html import write_report

    base = real_records(args.records, args.index)
    rows, results = [], []
    with work_dir(None, prefix="ceg-report-open-") as work, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS,
                                     headless=True)
        for n in args.sizes:
            for mode in ("shared", "distinct"):
                records = synthesize(base, n, distinct=mode == "distinct")
                jsonl = sum(len(json.dumps(r, ensure_ascii=False)) + 1 for r in records)
                path = work / f"report-{n}-{mode}.html"
                started = time.perf_counter()
                write_report(path, records)
                write_s = time.perf_counter() - started
                log(f"{n} responses, {mode} passages: {path.stat().st_size / 1e6:.1f} MB "
                    f"written in {write_s:.2f} s; opening {args.runs} times ...")
                runs = [measure_open(browser, path) for _ in range(args.runs)]
                med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                results.append({"responses": n, "passages": mode,
                                "records_jsonl_bytes": jsonl, "report_bytes": path.stat().st_size,
                                "write_seconds": write_s, "median": med, "runs": runs})
                rows.append([f"{n:,}", mode, f"{jsonl / 1e6:.2f}",
                             f"{path.stat().st_size / 1e6:.2f}", f"{write_s:.2f}",
                             f"{med['ready_ms']:.0f}", f"{med['filter_ms']:.0f}",
                             f"{med['search_ms']:.0f}", f"{med['heap_mb']:.0f}"])
        browser.close()
    print(markdown_table(
        ["responses", "passages", "records MB", "report MB", "write s", "open ms",
         "filter ms", "search ms", "JS heap MB"], rows))
    path = write_results("report_open", {
        "command": command_line(), "environment": environment(), "runs": args.runs,
        "base_records": len(base), "search_term": SEARCH, "results": results,
    })
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
