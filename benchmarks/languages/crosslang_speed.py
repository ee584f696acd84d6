"""What the offline judge's cross-language rule costs: the judge with it and without it.

    .venv/bin/python benchmarks/languages/crosslang_speed.py [--xnli DIR] [--languages de,zh]
        [--pairs 200] [--repeats 3]

Items: XNLI dev's held part (``language_cuts.read_pairs``), the hypothesis in each
language against its English premise (the evidence in another language, as a
German answer against an English index), ``--pairs`` a language. The offline
judge judges them all with the cross-language rule (the shipped cut and embedder)
and without it (``CrossRule(None)``: the lexical rule alone, what ceg did before),
alternately, ``--repeats`` times after one warm-up each (the rule's warm-up loads
the embedder, timed on its own), with the judge's caches of passages and of
sentence vectors cleared before each; and the same with the evidence in the
segment's own language, where the rule decides nothing but the evidence's
language of each flagged segment is detected. Reported: the median seconds a
segment each way, their ratio, the embedder's load time, and the share of
segments the rule decided (flagged by the lexical rule, evidence in another language). Results:
``benchmarks/results/NAME.json``; record the machine's load beside the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    CACHE_DIR,
    command_line,
    environment,
    log,
    median,
    usage_error,
    write_results,
)
from language_cuts import XNLI_LANGUAGES, read_pairs  # noqa: E402


def items(folder: Path, lang: str, pairs: int, evidence: str = "en") -> list[Any]:
    """``pairs`` held hypotheses in ``lang``, each against its premise in ``evidence``."""
    from ceg_cli.types import Evidence, JudgeItem, Segment

    english = read_pairs(folder, evidence)["held"][:pairs]
    other = read_pairs(folder, lang)["held"][:pairs]
    return [JudgeItem(Segment(0, 0, len(h), h), (Evidence(0, "p", "", p, None),), None, h,
                      lang, "contexts")
            for (p, _, _), (_, h, _) in zip(english, other)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xnli", type=Path, default=CACHE_DIR / "xnli")
    parser.add_argument("--languages", default="de,zh")
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="crosslang_speed", help="results/NAME.json")
    args = parser.parse_args(argv)
    langs = [x.strip() for x in args.languages.split(",") if x.strip()]
    if any(x not in XNLI_LANGUAGES or x == "en" for x in langs) or args.pairs < 1:
        usage_error("--languages: XNLI languages other than en; --pairs: at least 1")
    from ceg_cli.judges.offline.crosslang import passage_language
    from ceg_cli.judges.offline.crossrule import CrossRule
    from ceg_cli.judges.offline.offline import OfflineJudge, passage
    from ceg_cli.types import SUPPORTED

    todo = [it for lang in langs for it in items(args.xnli, lang, args.pairs)]
    # Evidence in the segment's own language: what the rule costs a run it never decides.
    same = [it for lang in langs for it in items(args.xnli, lang, args.pairs, lang)]
    said: list[str] = []
    with_rule = OfflineJudge(on_warning=said.append)
    without = OfflineJudge(on_warning=said.append, cross_rule=CrossRule(None))
    t = time.perf_counter()
    embedder = with_rule.cross_rule.embedder()
    if embedder is not None:
        embedder.embed(["warm"])  # the weights load on the first call
    load_s = time.perf_counter() - t
    if with_rule.cross_rule.unavailable:
        usage_error(f"the cross-language rule is off here: {with_rule.cross_rule.unavailable}")
    before = without.judge(todo)
    after = with_rule.judge(todo)
    decided = sum(1 for v in after if v.reason.startswith("across languages"))
    times: dict[str, list[float]] = {"lexical": [], "rule": [], "same_lexical": [],
                                     "same_rule": []}
    for _ in range(args.repeats):
        for name, judge, batch in (("lexical", without, todo), ("rule", with_rule, todo),
                                   ("same_lexical", without, same),
                                   ("same_rule", with_rule, same)):
            # Cold caches each time: the passages' words and languages are read anew.
            passage.cache_clear()
            passage_language.cache_clear()
            with_rule.cross_rule._vectors.clear()  # the sentence vectors too
            t = time.perf_counter()
            judge.judge(batch)
            times[name].append((time.perf_counter() - t) / len(batch))
    med = {k: median(v) for k, v in times.items()}
    load = os.getloadavg()
    data = {"command": command_line(), "environment": environment(), "segments": len(todo),
            "languages": langs, "embedder_load_s": round(load_s, 3),
            "seconds_per_segment": {k: round(v, 6) for k, v in med.items()},
            "ratio": round(med["rule"] / med["lexical"], 2),
            "ratio_same_language": round(med["same_rule"] / med["same_lexical"], 2),
            "decided_by_rule": round(decided / len(todo), 4),
            "supported": {"lexical": sum(v.verdict == SUPPORTED for v in before),
                          "rule": sum(v.verdict == SUPPORTED for v in after)},
            "times": times, "load_average": [round(x, 2) for x in load]}
    path = write_results(args.name, data)
    print(f"{len(todo)} segments ({', '.join(langs)}, English evidence), median of "
          f"{args.repeats}: lexical {med['lexical'] * 1000:.2f} ms/segment, with the rule "
          f"{med['rule'] * 1000:.2f} ms/segment (x{data['ratio']}); embedder load "
          f"{load_s:.2f} s; the rule decided {decided} ({data['decided_by_rule']:.0%}); "
          f"supported {data['supported']['lexical']} -> {data['supported']['rule']}; "
          f"evidence in the segment's own language: {med['same_lexical'] * 1000:.2f} -> "
          f"{med['same_rule'] * 1000:.2f} ms/segment (x{data['ratio_same_language']}); "
          f"load average {load[0]:.2f}")
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
