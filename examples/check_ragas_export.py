#!/usr/bin/env python3
"""Check a RAGAS or DeepEval export with ceg from Python, and fail on ungrounded answers.

    python examples/check_ragas_export.py EXPORT [--index DIR] [--judge offline]
        [--max-nonfactual 0]

EXPORT is JSONL (one sample a line) or a JSON list, as RAGAS's
``EvaluationDataset.to_jsonl``/``to_list`` (``user_input``, ``response``,
``retrieved_contexts``) or DeepEval's test cases (``input``, ``actual_output``,
``retrieval_context``) write them: ceg reads both shapes without options. Prints one
line per sample and each flagged sentence; exits 1 when more than --max-nonfactual
samples are nonfactual (or any could not be checked), 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def samples(path: Path) -> Iterator[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        yield from json.loads(text)
        return
    for line in text.splitlines():
        if line.strip():
            yield json.loads(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("--index", default=None, help="For samples without contexts.")
    parser.add_argument("--judge", default="offline")
    parser.add_argument("--max-nonfactual", type=int, default=0)
    args = parser.parse_args(argv)

    from ceg_cli import Checker
    from ceg_cli.errors import CegError

    try:
        checker = Checker(index=args.index, judge=args.judge)
    except CegError as exc:  # a bad option: ceg's own one-line message
        print(f"error: {exc}", file=sys.stderr)
        return 2
    nonfactual = errors = 0
    with checker:
        for n, result in enumerate(checker.check_many(samples(args.export)), 1):
            print(f"sample {n}: {result.label}")
            if result.error is not None:
                errors += 1
                print(f"  {result.error}")
            nonfactual += result.label == "nonfactual"
            for segment in result.flagged:
                print(f"  - {segment.text!r}: {segment.reason}")
    print(f"{nonfactual} nonfactual, {errors} could not be checked")
    return 1 if errors or nonfactual > args.max_nonfactual else 0


if __name__ == "__main__":
    raise SystemExit(main())
