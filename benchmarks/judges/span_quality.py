"""How well the spans point at the wrong words: token-level precision, recall and F1.

    .venv/bin/python benchmarks/judges/span_quality.py [--split test|dev|all] [--per-kind 40]
        [--languages en,de,...] [--name span_quality]

Three sets where the wrong words are known, each checked by ``ceg check``'s pipeline
(``Checker(judge="offline")``, so the spans are the records' ``spans``):

- **sample**: the four answers of ``sample_data/responses.jsonl`` with planted errors
  (its README's table; the wrong words, with their kinds, are written below in
  ``SAMPLE_GOLD``), checked against a lexical index of
  ``sample_data/enwiki-sample.xml.bz2`` (built once into ``benchmarks/.cache``, nothing
  embedded) as ``scripts/sample`` checks them: retrieval decides what the judge sees.
  One item an answer (kind ``mixed``).
- **dumps**: real article sentences of the sample dumps, ``sample_data``'s English one
  and ``../shared/data``'s Bulgarian one (``bgwiki-utf16-sample.xml.bz2``), with a
  number, a date (a year) or a name replaced here (every choice by a hash of the
  sentence, never at random: the same dumps give the same items); the replacement is
  the gold span. Each is checked with its paragraph, as the article has it, as its
  only context.
- **multilingual**: the planted errors of ``benchmarks/data/multilingual`` (real
  Wikipedia paragraphs in nine languages: ar de en es fr hi ja ru zh; its README), each
  checked with its own paragraph as its context; the gold span is where the planted
  sentence differs from the true one it was made from. ``--split``: ``test`` (held out,
  the default), ``dev`` or ``all``. Its ``negation`` errors (a verb negated: every word
  still in the evidence) are reported apart, not in the totals.

Tokens: words (a run of letters, marks and digits) in spaced scripts, one character in
Han, kana and Thai. A token is predicted when a span overlaps it, gold when the gold
span does. Per set, language and kind of error: **P** = predicted gold tokens /
predicted tokens, **R** = predicted gold tokens / gold tokens, **F1**, summed over the
planted items (micro); **flagged**: the share of planted items the judge flagged (a
segment-level recall: an item not flagged predicts nothing); **kind**: the share of
spans on a gold token whose ``kind`` is the error's (a year's ``date``, a number's
``number``, a name's ``name``; a ``word`` or ``segment`` span counts as not the kind).
For the true sentences of the multilingual set, **true flagged** is the share flagged
(each of their spans is a false alarm, not counted in P above).

**Cost**: the offline judge over every item above (its context as its evidence), with
its spans and with the span step replaced by one that gives none, alternating, median
of 7: what the spans add to the judge's time.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

# This folder (or, in a stage's folder, its parent) holds ``_common``.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    BENCH_DIR,
    ENWIKI_SAMPLE,
    REPO,
    SHARED_DATA,
    cache_dir,
    command_line,
    environment,
    log,
    markdown_table,
    results_name,
    write_results,
)

MULTILINGUAL = BENCH_DIR / "data" / "multilingual"
BGWIKI = SHARED_DATA / "wiki" / "bgwiki-utf16-sample.xml.bz2"
KINDS = ("number", "date", "name")

#: The wrong words of the sample's planted errors (sample_data/README.md), with kinds.
SAMPLE_GOLD: dict[str, list[tuple[str, str]]] = {
    "lincoln": [("Springfield", "name"), ("Massachusetts", "name"), ("1812", "date")],
    "aristotle": [("Julius Caesar", "name"), ("Rome", "name"), ("320", "date")],
    "aardvark": [("rainforests", "word"), ("South America", "name")],
    "agassi": [("Serena Williams", "name"), ("1995", "date")],
}


def tokens(text: str) -> list[tuple[int, int]]:
    """Token spans: words of spaced scripts, single characters of Han, kana and Thai."""
    import regex

    wide = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}"
    return [(m.start(), m.end()) for m in regex.finditer(f"[{wide}]|[^\\W_{wide}]+", text)]


def covered(toks: Sequence[tuple[int, int]], spans: Iterable[tuple[int, int]]) -> set[int]:
    """The indexes of the tokens that any of ``spans`` overlaps."""
    out = set()
    for s, e in spans:
        out.update(i for i, (a, b) in enumerate(toks) if a < e and s < b)
    return out


class Tally:
    """Token counts of one group of items."""

    def __init__(self) -> None:
        self.items = self.flagged = 0
        self.hit = self.predicted = self.gold = 0
        self.kind_right = self.kind_seen = 0

    def add(self, text: str, gold: Sequence[tuple[int, int, str]],
            spans: Sequence[dict[str, Any]], flagged: bool) -> None:
        """One item: its text, its gold spans (start, end, kind), the spans it got."""
        toks = tokens(text)
        want = covered(toks, [(s, e) for s, e, _ in gold])
        got = covered(toks, [(s["start"], s["end"]) for s in spans])
        self.items += 1
        self.flagged += flagged
        self.hit += len(want & got)
        self.predicted += len(got)
        self.gold += len(want)
        for sp in spans:
            mine = covered(toks, [(sp["start"], sp["end"])])
            kinds = {k for s, e, k in gold if covered(toks, [(s, e)]) & mine}
            if kinds:
                self.kind_seen += 1
                self.kind_right += sp["kind"] in kinds

    def figures(self) -> dict[str, Any]:
        p = self.hit / self.predicted if self.predicted else None
        r = self.hit / self.gold if self.gold else None
        f1 = 2 * p * r / (p + r) if p and r else (0.0 if p is not None and r is not None else None)
        return {"items": self.items, "flagged": _share(self.flagged, self.items),
                "precision": _round(p), "recall": _round(r), "f1": _round(f1),
                "kind_agrees": _share(self.kind_right, self.kind_seen),
                "tokens": {"gold": self.gold, "predicted": self.predicted, "hit": self.hit}}


def _share(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _hash(*parts: str) -> int:
    return int(hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:12], 16)


# -- the sets -----------------------------------------------------------------------


def sample_items() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in
            (REPO / "sample_data" / "responses.jsonl").read_text(encoding="utf-8").splitlines()]
    out = []
    for row in rows:
        if row["id"] not in SAMPLE_GOLD:
            continue
        gold = []
        for word, kind in SAMPLE_GOLD[row["id"]]:
            at = row["response"].index(word)
            gold.append((at, at + len(word), kind))
        # One item a response: its planted words are of several kinds ("mixed").
        out.append({"set": "sample", "language": "en", "kind": "mixed", "record": row,
                    "gold": gold})
    return out


def sample_index() -> Path:
    """A lexical index of the sample dump, built once (nothing is embedded)."""
    from typer.testing import CliRunner

    from ceg_cli.cli.main import app

    target = cache_dir() / "span_quality_sample_index"
    if not (target / "meta.json").exists():
        log(f"building a lexical index of {ENWIKI_SAMPLE.name} into {target}")
        built = CliRunner().invoke(app, ["index", "build", str(ENWIKI_SAMPLE), "--index",
                                         str(target), "--retrieval", "lexical", "--quiet"])
        if built.exit_code != 0:
            raise SystemExit(f"ceg index build failed: {built.output}")
    return target


def dump_items(per_kind: int) -> list[dict[str, Any]]:
    """Sentences of the sample dumps with a number, a year or a name replaced."""
    from ceg_cli.corpus.mediawiki import read_mediawiki

    out: list[dict[str, Any]] = []
    for path, language in ((ENWIKI_SAMPLE, "en"), (BGWIKI, "bg")):
        if not path.exists():
            log(f"{path}: not there, {language} left out")
            continue
        docs = list(read_mediawiki(path))
        out += planted(docs, language, per_kind)
    return out


def planted(docs: Sequence[Any], language: str, per_kind: int) -> list[dict[str, Any]]:
    import regex

    from ceg_cli.sentences import sentence_spans

    year = regex.compile(r"(?<![\d.,])(1[0-9]{3}|20[0-2][0-9])(?![\d.,])")
    number = regex.compile(r"(?<![\d.,])\d{2,3}(?![\d.,])")
    name = regex.compile(r"(?<=\s)\p{Lu}\p{Ll}{2,}(?:\s\p{Lu}\p{Ll}{2,})*")
    names: set[str] = set()
    candidates: list[tuple[int, str, str, str]] = []  # (hash, kind, sentence, paragraph)
    for doc in docs:
        for paragraph in doc.text.split("\n"):
            if len(paragraph) < 120 or any(c in paragraph for c in "|={}[]"):
                continue
            names.update(m.group() for m in name.finditer(paragraph))
            for s, e in sentence_spans(paragraph, None if language == "en" else language):
                sentence = paragraph[s:e]
                if not 40 <= len(sentence) <= 300:
                    continue
                for kind in KINDS:
                    candidates.append((_hash(language, kind, sentence), kind, sentence,
                                       paragraph))
    pool = sorted(names)
    out: list[dict[str, Any]] = []
    counts: dict[str, int] = defaultdict(int)
    for h, kind, sentence, paragraph in sorted(candidates):
        if counts[kind] >= per_kind:
            continue
        pattern = {"date": year, "number": number, "name": name}[kind]
        found = [m for m in pattern.finditer(sentence)
                 if kind != "number" or not year.fullmatch(m.group())]
        if not found:
            continue
        m = found[h % len(found)]
        old = m.group()
        if kind == "date":
            new = str(int(old) + 1 + h % 9)
        elif kind == "number":
            new = old[:-1] + str((int(old[-1]) + 1 + h % 8) % 10)
        else:
            others = [n for n in pool if n not in paragraph and len(n.split()) == len(old.split())]
            if not others:
                continue
            new = others[h % len(others)]
        if new in paragraph:
            continue
        text = sentence[:m.start()] + new + sentence[m.end():]
        counts[kind] += 1
        out.append({"set": "dumps", "language": language, "kind": kind,
                    "record": {"id": f"{language}-{kind}-{counts[kind]}", "response": text,
                               "contexts": [paragraph]},
                    "gold": [(m.start(), m.start() + len(new), kind)]})
    return out


def multilingual_items(split: str, languages: Sequence[str] | None) -> tuple[
        list[dict[str, Any]], list[dict[str, Any]]]:
    """The set's planted claims (with gold spans) and its true claims."""
    planted_out, true_out = [], []
    for path in sorted(MULTILINGUAL.glob("*.jsonl.gz")):
        language = path.name.split(".")[0]
        if languages and language not in languages:
            continue
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        passages = {r["id"]: r for r in rows if r["type"] == "passage"}
        claims = {r["id"]: r for r in rows if r["type"] == "claim"}
        for c in claims.values():
            if split != "all" and c["split"] != split:
                continue
            p = passages[c["passage"]]
            record = {"id": c["id"], "response": c["text"], "question": c.get("question"),
                      "contexts": [{"id": p["id"], "title": p["title"], "text": p["text"]}]}
            if c["supported"]:
                true_out.append({"set": "multilingual", "language": language, "kind": "true",
                                 "record": record, "gold": []})
                continue
            start, end = _difference(c["text"], claims[c["pair"]]["text"])
            planted_out.append({"set": "multilingual", "language": language,
                                "kind": c["error"], "record": record,
                                "gold": [(start, end, c["error"])]})
    return planted_out, true_out


def _difference(planted_text: str, true_text: str) -> tuple[int, int]:
    """Where ``planted_text`` differs from ``true_text``: between their common prefix and
    common suffix (an insertion, "nicht", is the inserted stretch)."""
    p = 0
    while p < min(len(planted_text), len(true_text)) and planted_text[p] == true_text[p]:
        p += 1
    s = 0
    while (s < min(len(planted_text), len(true_text)) - p
           and planted_text[-1 - s] == true_text[-1 - s]):
        s += 1
    return p, max(p + 1, len(planted_text) - s)


# -- cost ---------------------------------------------------------------------------


def overhead(items: Sequence[dict[str, Any]], repeats: int = 7) -> dict[str, Any]:
    """What computing the spans adds to the offline judge: the judge over ``items`` (each
    with its context as its evidence), with its spans and with ``analysis_spans``
    replaced by a function that gives none; medians of ``repeats`` alternating runs."""
    from unittest import mock

    from ceg_cli.judges import create_judge
    from ceg_cli.types import Evidence, JudgeItem, Segment

    judge_items = []
    for item in items:
        record = item["record"]
        text, ctx = record["response"], record["contexts"][0]
        ctx = ctx if isinstance(ctx, dict) else {"text": ctx, "title": ""}
        judge_items.append(JudgeItem(Segment(0, 0, len(text), text),
                                     (Evidence(0, "d", ctx.get("title", ""), ctx["text"], None),),
                                     None, text, item["language"]))
    judge = create_judge("offline", {})
    offline = sys.modules[type(judge).__module__]  # the judge's module, wherever it lives
    judge.judge(judge_items)  # warm the passage cache and the stemmers
    timings: dict[str, list[float]] = {"with": [], "without": []}
    for _ in range(repeats):
        for name in ("with", "without"):
            started = time.perf_counter()
            if name == "with":
                judge.judge(judge_items)
            else:
                with mock.patch.object(offline, "analysis_spans", lambda *a: ()):
                    judge.judge(judge_items)
            timings[name].append(time.perf_counter() - started)
    with_s, without_s = (sorted(v)[len(v) // 2] for v in timings.values())
    return {"items": len(judge_items), "repeats": repeats,
            "seconds_with_spans": round(with_s, 3), "seconds_without": round(without_s, 3),
            "added": round(with_s / without_s - 1, 3)}


# -- running ------------------------------------------------------------------------


def judged(items: list[dict[str, Any]], index: Path | None = None) -> None:
    """Each item's ``spans`` (all its segments') and ``flagged``, by ``ceg check``'s
    pipeline with the offline judge."""
    from ceg_cli import Checker

    by_language: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        by_language[item["language"]].append(item)
    for language, group in sorted(by_language.items()):
        options: dict[str, Any] = {"language": language}
        with Checker(index=index, judge="offline", **options) as checker:
            for item, result in zip(group, checker.check_many([i["record"] for i in group]),
                                    strict=True):
                segments = result.to_dict()["segments"]
                item["spans"] = [sp for s in segments for sp in s["spans"]]
                item["flagged"] = any(s["label"] == "nonfactual" for s in segments)


def tallies(items: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Figures by set, then by "language kind", "language all", "all kind" and "all"."""
    groups: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
    for item in items:
        keys = [f"{item['language']} {item['kind']}", f"all {item['kind']}"]
        if item["kind"] != "negation":
            keys += [f"{item['language']} all", "all all"]
        for key in keys:
            groups[item["set"]][key].add(item["record"]["response"], item["gold"],
                                         item["spans"], item["flagged"])
    return {name: {k: t.figures() for k, t in sorted(g.items())} for name, g in groups.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=("test", "dev", "all"), default="test")
    ap.add_argument("--per-kind", type=int, default=40,
                    help="items of each kind per language made from the dumps")
    ap.add_argument("--languages", default="", help="multilingual set languages (default: all)")
    ap.add_argument("--name", default="span_quality")
    args = ap.parse_args()
    name = results_name(args.name, "--name")
    languages = [x for x in args.languages.split(",") if x] or None
    started = time.perf_counter()
    sample = sample_items()
    judged(sample, sample_index())
    dumps = dump_items(args.per_kind)
    log(f"dumps: {len(dumps)} planted sentences")
    judged(dumps)
    planted_ml, true_ml = multilingual_items(args.split, languages)
    log(f"multilingual: {len(planted_ml)} planted, {len(true_ml)} true claims")
    judged(planted_ml + true_ml)
    figures = tallies(sample + dumps + planted_ml)
    true_flagged: dict[str, float | None] = {}
    for language in sorted({i["language"] for i in true_ml}):
        group = [i for i in true_ml if i["language"] == language]
        true_flagged[language] = _share(sum(i["flagged"] for i in group), len(group))
    log("timing the offline judge with and without spans")
    cost = overhead(dumps + planted_ml + true_ml)
    results = {"command": command_line(), "environment": environment(), "split": args.split,
               "per_kind": args.per_kind, "figures": figures, "overhead": cost,
               "multilingual_true_flagged": true_flagged,
               "seconds": round(time.perf_counter() - started, 1)}
    path = write_results(name, results)
    print(report(results, path))


def report(results: dict[str, Any], path: Path) -> str:
    def cell(x: Any) -> str:
        return "-" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)

    out = ["# Span quality (token level)", "", f"`{results['command']}`", "",
           f"Written to `{path.relative_to(REPO)}`; {results['seconds']} s.", ""]
    for set_name, groups in results["figures"].items():
        out += [f"## {set_name}", ""]
        rows = [[key.split()[0], key.split()[1], f["items"], cell(f["flagged"]),
                 cell(f["precision"]), cell(f["recall"]), cell(f["f1"]), cell(f["kind_agrees"])]
                for key, f in groups.items()]
        out += [markdown_table(["language", "kind", "items", "flagged", "P", "R", "F1",
                                "kind"], rows), ""]
    cost = results["overhead"]
    out += [f"Cost: the offline judge over {cost['items']} items took "
            f"{cost['seconds_with_spans']} s with spans, {cost['seconds_without']} s without "
            f"(median of {cost['repeats']}): {cost['added']:+.1%}.", ""]
    if results["multilingual_true_flagged"]:
        out += ["True sentences of the multilingual set flagged (false alarms): "
                + ", ".join(f"{k} {cell(v)}" for k, v in
                            results["multilingual_true_flagged"].items()), ""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
