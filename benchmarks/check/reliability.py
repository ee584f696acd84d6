"""The reliability table: each fault or bad input tried, how many times, and the outcome.

    .venv/bin/python benchmarks/check/reliability.py [--kills 50] [--examples 1000] [-k EXPR]
        [--results NAME]

Runs the reliability suite with pytest, at full strength:

- ``tests/test_reliability_input.py``: bad responses files, hostile corpus
  files, broken index directories, through the CLI;
- ``tests/test_reliability_hostile.py``: outputs that are the input or each
  other, ``--resume`` into a foreign output, lines carrying huge fields, NaN,
  lone surrogates, a closed stdin;
- ``tests/test_reliability_faults.py``: random SIGKILLs of ``ceg check`` and
  ``ceg index build`` (``--kills`` per command, 3 in CI), kills at each step of
  the index swap, full disks, failing judges against the gate, concurrent runs;
- ``tests/test_reliability_llm.py``: the LLM judge against a fake endpoint on
  loopback that times out, answers 429/500/503, drops connections, sends
  garbage; ``ceg check --judge llm:...`` killed at random and resumed;
- ``tests/test_properties.py``: hypothesis properties (``--examples`` each,
  200 in CI).

Each test records what it tried, how many times, and the outcome it observed
(``record_property("reliability", ...)``); this script collects those rows. A
test that fails marks its row FAILED, so every row of the table is a claim the
suite checked. Writes ``benchmarks/results/reliability.json`` and prints the
table as Markdown; exits 1 if any row failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (
    REPO,
    command_line,
    environment,
    log,
    markdown_table,
    results_name,
    write_results,
)

SUITE = [
    "tests/test_reliability_input.py",
    "tests/test_reliability_hostile.py",
    "tests/test_reliability_faults.py",
    "tests/test_reliability_llm.py",
    "tests/test_properties.py",
]


class Collector:
    """A pytest plugin keeping each test's reliability rows and its result."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when != "call" and not (report.when == "setup" and report.failed):
            return
        rows = [value for key, value in report.user_properties if key == "reliability"]
        if not rows:
            rows = [{"what": report.nodeid, "tries": 0, "outcome": "(no row recorded)"}]
        for value in rows:
            held = report.passed and value["tries"] > 0
            result = "held" if held else "not run" if report.passed else "FAILED"
            detail = ""
            if report.failed:
                detail = str(report.longrepr).strip().splitlines()[-1][:300]
            self.rows.append({**value, "result": result, "test": report.nodeid,
                              "seconds": round(report.duration, 2), "failure": detail})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=50,
                        help="random kills per command (default 50; CI runs 3)")
    parser.add_argument("--examples", type=int, default=1000,
                        help="hypothesis examples per property (default 1000; CI runs 200)")
    parser.add_argument("-k", dest="select", default=None, help="a pytest -k expression")
    parser.add_argument("--results", default="reliability",
                        help="name of the results file (benchmarks/results/NAME.json); give "
                        "another with -k, so that the full table is not replaced by a part")
    args = parser.parse_args()
    results_name(args.results)  # before any work: a bare name only

    # The test modules read these when pytest imports them, below.
    os.environ["CEG_RELIABILITY_KILLS"] = str(args.kills)
    os.environ["CEG_HYPOTHESIS_EXAMPLES"] = str(args.examples)
    import pytest

    collector = Collector()
    pytest_args = [*SUITE, "-q", "-p", "no:cacheprovider", "--rootdir", str(REPO)]
    if args.select:
        pytest_args += ["-k", args.select]
    os.chdir(REPO)
    started = time.perf_counter()
    log(f"running the reliability suite: {args.kills} kills per command, "
        f"{args.examples} examples per property")
    status = pytest.main(pytest_args, plugins=[collector])
    seconds = time.perf_counter() - started

    rows = collector.rows
    failed = [r for r in rows if r["result"] == "FAILED"]
    write_results(args.results, {
        "command": command_line(),
        "environment": environment(),
        "kills_per_command": args.kills,
        "examples_per_property": args.examples,
        "seconds": round(seconds, 1),
        "rows": rows,
        "all_held": not failed and status == 0,
    })
    print(f"Reliability: {len(rows)} rows, {sum(r['tries'] for r in rows):,} tries, "
          f"{len(failed)} failed ({seconds / 60:.1f} min; `{command_line()}`)\n")
    print(markdown_table(
        ["fault or bad input", "tries", "outcome", "result"],
        [[r["what"], f"{r['tries']:,}", r["outcome"] + (f" ({r['failure']})" if r["failure"]
                                                          else ""), r["result"]]
         for r in rows],
    ))
    return 0 if not failed and status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
