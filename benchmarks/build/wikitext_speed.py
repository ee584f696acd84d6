"""Cleaning wikitext: the token walk against mwparserfromhell's node tree, side by side.

    .venv/bin/python benchmarks/build/wikitext_speed.py [--repeats 5] [--passages 20000] \
        [--dump FILE] [--results wikitext_speed]

**Pages.** Every page ``ceg index build`` cleans (namespace 0, redirects
left out, each with its dump's dropped namespaces and language, recorded from
``ceg_cli.corpus.mediawiki``'s calls to ``clean_wikitext``) of two dumps:
``sample_data/enwiki-sample.xml.bz2`` (106 long articles) and the benchmark
dump of ``wikipedia_cpu.py`` (the sample's articles cut into a page per
section, repeated to about ``--passages`` passages at 5.2 a page: 3,846 pages
for 20,000), made once in ``benchmarks/.cache/wikitext_speed/``; ``--dump``
reads another dump instead.

**Sides.** ``tree``: ``clean_wikitext`` as it was, rendering mwparserfromhell's
node tree (``wikitext.render_tree``); ``tokens``: ``clean_wikitext`` as it is,
rendering the tokenizer's tokens (``wikitokens.render_tokens``, the tree only
where the walk gives up). The same pre-strip and tidy on both sides. One
process, one thread; each pass cleans every page of a set once; passes
alternate tree, tokens, tokens, tree, ... so a drift in the machine's load hits
both. Reported: CPU seconds a pass (``time.process_time``; wall seconds
beside), medians of ``--repeats`` passes, and the median of the pairs' ratios
(tree / tokens). Before timing, every page is cleaned both ways: pages whose
text differs (must be 0) and pages where the walk gave up, with why. One more
pass splits the token side into its stages: pre-strip (``_prepare``), the C
tokenizer, the walk, ``_tidy``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    ENWIKI_SAMPLE,
    cache_dir,
    command_line,
    environment,
    log,
    markdown_table,
    usage_error,
    write_results,
)

Page = tuple[str, tuple[str, ...], str | None]


@contextmanager
def _recording(calls: list[Page]) -> Iterator[None]:
    """Record mediawiki's clean_wikitext calls (their arguments) instead of cleaning."""
    from ceg_cli.corpus import mediawiki
    from ceg_cli.corpus.wikitext import DEFAULT_DROPPED_NAMESPACES

    def record(text: str, *, dropped_namespaces: Any = DEFAULT_DROPPED_NAMESPACES,
               language: str | None = None) -> str:
        calls.append((text, tuple(dropped_namespaces), language))
        return "recorded"

    real = mediawiki.clean_wikitext
    mediawiki.clean_wikitext = record  # type: ignore[assignment]
    try:
        yield
    finally:
        mediawiki.clean_wikitext = real  # type: ignore[assignment]


def pages_of(dump: Path) -> list[Page]:
    """The (wikitext, dropped namespaces, language) of every page a build cleans."""
    from ceg_cli.corpus.mediawiki import read_mediawiki

    calls: list[Page] = []
    with _recording(calls):
        for _ in read_mediawiki(dump):
            pass
    return calls


def tree_clean(text: str, dropped_namespaces: tuple[str, ...], language: str | None) -> str:
    """clean_wikitext through mwparserfromhell's node tree (what it did before the walk)."""
    from ceg_cli.corpus import wikitext as w

    dropped = w._dropped_prefixes(dropped_namespaces)
    return w._tidy("".join(w.render_tree(w._prepare(text, dropped, language), dropped)))


def tokens_clean(text: str, dropped_namespaces: tuple[str, ...], language: str | None) -> str:
    from ceg_cli.corpus.wikitext import clean_wikitext

    return clean_wikitext(text, dropped_namespaces=dropped_namespaces, language=language)


SIDES: dict[str, Callable[[str, tuple[str, ...], str | None], str]] = {
    "tree": tree_clean, "tokens": tokens_clean,
}


def identity(pages: list[Page]) -> dict[str, Any]:
    """Pages whose text differs between the sides, and where the walk gave up."""
    from ceg_cli.corpus import wikitokens

    before = Counter(wikitokens.FALLBACKS)
    differ = [n for n, page in enumerate(pages) if tree_clean(*page) != tokens_clean(*page)]
    gave_up = Counter(wikitokens.FALLBACKS)
    gave_up.subtract(before)
    return {"pages_differ": len(differ), "first_differing": differ[:5],
            "gave_up": sum(gave_up.values()), "gave_up_why": dict(+gave_up)}


def one_pass(side: str, pages: list[Page]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) to clean every page once."""
    clean = SIDES[side]
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    for page in pages:
        clean(*page)
    return time.process_time() - cpu, time.perf_counter() - wall


def stages(pages: list[Page]) -> dict[str, float]:
    """CPU seconds of the token side's stages over every page, one pass."""
    from mwparserfromhell.parser import Parser

    from ceg_cli.corpus import wikitext as w
    from ceg_cli.corpus.wikitokens import render_tokens

    spent = dict.fromkeys(("prepare", "tokenize", "walk", "tidy"), 0.0)
    for text, dropped_namespaces, language in pages:
        t0 = time.process_time()
        dropped = w._dropped_prefixes(dropped_namespaces)
        prepared = w._prepare(text, dropped, language)
        t1 = time.process_time()
        Parser()._tokenizer.tokenize(prepared, 0, False)
        t2 = time.process_time()
        pieces = render_tokens(prepared, dropped)  # tokenizes again: the walk is the rest
        t3 = time.process_time()
        if pieces is None:
            pieces = w.render_tree(prepared, dropped)
        t4 = time.process_time()
        w._tidy("".join(pieces))
        t5 = time.process_time()
        spent["prepare"] += t1 - t0
        spent["tokenize"] += t2 - t1
        spent["walk"] += (t3 - t2) - (t2 - t1) + (t4 - t3)
        spent["tidy"] += t5 - t4
    return {k: round(v, 3) for k, v in spent.items()}


def measure(name: str, pages: list[Page], repeats: int) -> dict[str, Any]:
    log(f"wikitext_speed: {name}: {len(pages)} pages, checking identity ...")
    result: dict[str, Any] = {"pages": len(pages), "chars": sum(len(p[0]) for p in pages)}
    result.update(identity(pages))
    times: dict[str, list[tuple[float, float]]] = {"tree": [], "tokens": []}
    for r in range(repeats):
        for side in ("tree", "tokens") if r % 2 == 0 else ("tokens", "tree"):
            times[side].append(one_pass(side, pages))
            log(f"wikitext_speed: {name}: pass {r + 1}/{repeats} {side} "
                f"{times[side][-1][0]:.2f} s CPU")
    for side, runs in times.items():
        result[side] = {"cpu_s": [round(c, 3) for c, _ in runs],
                        "wall_s": [round(w, 3) for _, w in runs],
                        "median_cpu_s": round(statistics.median(c for c, _ in runs), 3),
                        "median_wall_s": round(statistics.median(w for _, w in runs), 3)}
    ratios = [t[0] / k[0] for t, k in zip(times["tree"], times["tokens"], strict=True)]
    result["ratio_tree_over_tokens"] = round(statistics.median(ratios), 2)
    result["ratios"] = [round(x, 2) for x in ratios]
    result["token_stages_cpu_s"] = stages(pages)
    return result


def benchmark_dump(passages: int) -> Path:
    import wikipedia_cpu

    dump, _pages = wikipedia_cpu.make_dump(cache_dir() / "wikitext_speed", passages, 5.2)
    return dump


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--passages", type=int, default=20000)
    parser.add_argument("--dump", type=Path, help="a dump to read instead of the benchmark dump")
    parser.add_argument("--results", default="wikitext_speed")
    args = parser.parse_args()
    if args.repeats < 1 or args.passages < 1:
        usage_error("--repeats and --passages must be at least 1")
    if args.dump is not None and not args.dump.is_file():
        usage_error(f"--dump: {args.dump}: no such file")
    dump = args.dump or benchmark_dump(args.passages)
    load_before = environment()["load_average"]
    sets = {"enwiki-sample": measure("enwiki-sample", pages_of(ENWIKI_SAMPLE), args.repeats),
            dump.name: measure(dump.name, pages_of(dump), args.repeats)}
    env = environment()
    env["load_average_before"] = load_before
    print(report(sets, env))
    write_results(args.results, {"command": command_line(), "environment": env, "sets": sets})


def report(sets: dict[str, Any], env: dict[str, Any]) -> str:
    rows = []
    for name, r in sets.items():
        rows.append([name, f"{r['pages']:,}", f"{r['tree']['median_cpu_s']:.2f}",
                     f"{r['tokens']['median_cpu_s']:.2f}", f"{r['ratio_tree_over_tokens']:.2f}x",
                     r["pages_differ"], r["gave_up"]])
    lines = [f"Command: `{command_line()}`", "",
             f"Load average: {env['load_average_before']} before, {env['load_average']} after.",
             "", "clean_wikitext, CPU seconds a pass over every page (medians):", "",
             markdown_table(["pages of", "pages", "tree", "tokens", "tree / tokens",
                             "texts differ", "walk gave up"], rows),
             "", "Token side by stage (CPU seconds, one pass):", ""]
    stage_names = list(next(iter(sets.values()))["token_stages_cpu_s"])
    lines.append(markdown_table(["pages of", *stage_names],
                                [[name, *r["token_stages_cpu_s"].values()]
                                 for name, r in sets.items()]))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
