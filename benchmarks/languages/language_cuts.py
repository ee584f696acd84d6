"""The offline judge's cut per language and per script, chosen across two domains.

    .venv/bin/python benchmarks/languages/language_cuts.py [--xnli DIR] [--articles DIR]
        [--before DIR] [--ship]

Two domains (issue 58): XNLI dev paraphrases (below) and answers written from an
article (``--articles``, default ``benchmarks/data/articles``, built by
``article_set.py``: each pair's segment against its XQuAD paragraph, with the
article's title, ``dev`` and ``test`` by article). **The choice** (``two_domains``):
a cut fitted on XNLI's tune part is scored on the articles' dev part and one fitted
there on XNLI's tune part; where the mean of the two beats the English cut's mean on
the same parts by ``MARGIN``, the cut fitted on both domains (each a domain) is
shipped, else the English cut. A language without article pairs takes its script's
(``script_two_domains``). ``chance_band``: per language, the scores from 0.5 where a
true segment's odds are within ``CHANCE_ODDS`` of even on those dev parts, shipped
as ``bands`` (``ceg_cli/judges/undecided.py``). Reported on the held parts, before
(the cuts in ``--before DIR``'s thresholds.json, default the shipped ones) and after.
Article scores: ``benchmarks/results/language_cuts_articles_scores.json``. What
follows is the XNLI part as issue 50 made it (its fits are still reported).

**Data.** XNLI dev (15 languages, the same pairs translated; CC BY-NC, evaluation
only, never committed): ``--xnli DIR`` (a folder of ``dev-LANG.tsv``, e.g.
``data/xnli`` of a clone of GautamGupta17/MESH), default ``benchmarks/.cache/xnli``.
Each hypothesis is a segment, its premise its only context (the contexts setting).
Entailment should be supported; contradiction, and neutral (the premise does not
say it: not enough evidence), should be flagged. The premises alternate between
two parts as ``benchmarks/languages/multilingual.py`` splits them (``read_xnli``): ``tune``
(the even premises: every cut is fitted on them) and ``held`` (the odd: the
figures reported; nothing is chosen on them).

**Scores.** ``offline.analyse(item, language)`` and ``offline.score``, the judge
told each file's language as ceg tells it a record's; a hypothesis the judge
decides before any score (no claim, only function words) is supported at any cut
and scores 1. Per language and part, the scores and labels (``e``, ``c``, ``n``)
go to ``benchmarks/results/language_cuts_scores.json`` (numbers only, no text):
``tests/test_language_cuts.py`` re-fits the shipped cuts from it.

**Cuts** (``benchmarks/judges/transfer.py``'s ``fit_threshold``: the cut that maximises
the mean over domains of balanced accuracy, entailment against the other two):

- a language's cut: fitted on its own tune part (one domain);
- a script's cut: fitted on the tune parts of the languages written in it, each
  language a domain (Latin: en de es fr sw tr vi; Cyrillic: bg ru; Arabic: ar ur;
  Devanagari, Greek, Han, Thai: one language each). A language ceg has no cut for
  gets its script's (Japanese text, ``Jpan``, Han's);
- leave one language out, the protocol's check that a script's cut carries to a
  language it was not fitted on: each language's held part at the cut fitted on
  the other languages of its script (of all other languages, for a script of one).

English keeps its shipped cuts (fitted on five English domains,
``contexts_eval.py``); its XNLI cut is fitted and reported but not shipped.

Reported per language, on the held part: balanced accuracy (entailment against
contradiction, the issue's figure, and against contradiction and neutral) and the
share of entailed hypotheses flagged, at the English cut (before), at the
language's own cut and at the leave-one-language-out cut; and, for ``--judge
cascade:JUDGE``, the share of pairs the offline judge hands on at each cut (every
name and number found, score under the cut) and its balanced accuracy on the pairs
it decides itself. ``--ship`` writes the chosen language and script cuts and the
bands into ``ceg_cli/models/offline/thresholds.json``.
Results: ``benchmarks/results/language_cuts.json``; the report on stdout.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    CACHE_DIR,
    RESULTS_DIR,
    command_line,
    environment,
    log,
    markdown_table,
    usage_error,
    write_json,
    write_results,
)
from transfer import balanced_accuracy, fit_threshold  # noqa: E402

XNLI_LANGUAGES = ("en", "ar", "bg", "de", "el", "es", "fr", "hi", "ru", "sw", "th", "tr",
                  "ur", "vi", "zh")
#: The script each XNLI language is written in (ISO 15924, as ``ceg_cli.lang`` names it).
SCRIPTS = {"en": "Latn", "de": "Latn", "es": "Latn", "fr": "Latn", "sw": "Latn", "tr": "Latn",
           "vi": "Latn", "bg": "Cyrl", "ru": "Cyrl", "ar": "Arab", "ur": "Arab",
           "hi": "Deva", "el": "Grek", "th": "Thai", "zh": "Hani"}
LABELS = {"entailment": "e", "contradiction": "c", "neutral": "n"}
PARTS = ("tune", "held")
SCORES = "language_cuts_scores"
#: The second domain (issue 58): answers written from an article, ``article_set.py``.
ARTICLES = Path(__file__).resolve().parent.parent / "data" / "articles"
ARTICLE_PARTS = ("dev", "test")
ARTICLE_SCORES = "language_cuts_articles_scores"
#: A cut fitted on one domain must carry to the other by this much balanced accuracy over
#: the English cut there (the mean of both ways), else the language keeps the English cut:
#: its data cannot separate the candidates (about a standard error on 150 pairs a class).
MARGIN = 0.02
#: Score bins of the band where the judge is at chance (issue 58 item 4), and how close to
#: even the odds of a true segment must be in a bin, on dev data, class-balanced.
BAND_BINS = tuple(round(0.5 + 0.05 * i, 2) for i in range(11))
CHANCE_ODDS = 1.5


def read_pairs(folder: Path, lang: str) -> dict[str, list[tuple[str, str, str]]]:
    """(premise, hypothesis, label letter) of every row, by part: the even premises
    ``tune``, the odd ``held``, as ``multilingual.read_xnli`` splits them."""
    out: dict[str, list[tuple[str, str, str]]] = {p: [] for p in PARTS}
    path = folder / f"dev-{lang}.tsv"
    if not path.is_file():
        usage_error(f"{path}: missing; give --xnli a folder of XNLI's dev-LANG.tsv "
                    "(GautamGupta17/MESH, data/xnli)")
    group, last = -1, None
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[2] not in LABELS:
                usage_error(f"{path}:{number}: expected premise, hypothesis and a label "
                            f"({', '.join(LABELS)}), tab-separated")
            premise, hypothesis, label = parts
            if premise != last:
                group, last = group + 1, premise
            out[PARTS[group % 2]].append((premise, hypothesis, LABELS[label]))
    return out


def judge_scores(pairs: Sequence[tuple[str, str, str]], lang: str) -> list[float]:
    """The offline judge's score of each hypothesis against its premise, told ``lang``."""
    from ceg_cli.judges.offline import offline
    from ceg_cli.types import Evidence, JudgeItem, Segment

    out = []
    for premise, hypothesis, _ in pairs:
        item = JudgeItem(Segment(0, 0, len(hypothesis), hypothesis),
                         (Evidence(0, "p", "", premise, None),), None, hypothesis,
                         lang, "contexts")
        if offline.verdict_without_evidence(item) is not None:
            out.append(1.0)
            continue
        a = offline.analyse(item, lang)
        out.append(offline.score(a) if a.content else 1.0)
    return out


def read_articles(folder: Path, lang: str) -> dict[str, list[tuple[str, str, str, str]]]:
    """(passage, title, segment, label letter: ``e`` true, ``c`` false) of a language's
    article pairs, by part (``dev``, ``test``); empty where the language has none."""
    import gzip
    import json

    path = folder / f"{lang}.jsonl.gz"
    out: dict[str, list[tuple[str, str, str, str]]] = {p: [] for p in ARTICLE_PARTS}
    if not path.is_file():
        return out
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    passages = {r["id"]: r for r in rows if r["type"] == "passage"}
    for r in rows:
        if r["type"] == "pair":
            p = passages[r["passage"]]
            out[r["split"]].append((p["text"], p["title"], r["text"],
                                    "e" if r["supported"] else "c"))
    return out


def article_scores(rows: Sequence[tuple[str, str, str, str]], lang: str) -> list[float]:
    """The offline judge's score of each pair's segment against its paragraph (with the
    article's title, as a record's context carries one), told ``lang``."""
    from ceg_cli.judges.offline import offline
    from ceg_cli.types import Evidence, JudgeItem, Segment

    out = []
    for passage, title, segment, _ in rows:
        item = JudgeItem(Segment(0, 0, len(segment), segment),
                         (Evidence(0, "p", title, passage, None),), None, segment,
                         lang, "contexts")
        if offline.verdict_without_evidence(item) is not None:
            out.append(1.0)
            continue
        a = offline.analyse(item, lang)
        out.append(offline.score(a) if a.content else 1.0)
    return out


# --------------------------------------------------------------------------- fitting

def arrays(record: dict[str, Any], langs: Sequence[str], part: str
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores, entailed (1/0) and language of ``langs``' rows in ``part``."""
    s = np.concatenate([np.array(record[lang][part]["score"], dtype=float) for lang in langs])
    y = np.concatenate([np.array([int(c == "e") for c in record[lang][part]["label"]])
                        for lang in langs])
    d = np.concatenate([np.array([lang] * len(record[lang][part]["label"])) for lang in langs])
    return s, y, d


def fit(record: dict[str, Any], langs: Sequence[str]) -> float:
    """The protocol's cut over ``langs``' tune parts (each language a domain), rounded
    as thresholds.json records it."""
    return round(fit_threshold(*arrays(record, langs, "tune")), 4)


def fit_all(record: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Every language's cut and every script's, from the scores record."""
    langs = [lang for lang in XNLI_LANGUAGES if lang in record]
    scripts: dict[str, list[str]] = {}
    for lang in langs:
        scripts.setdefault(SCRIPTS[lang], []).append(lang)
    return {"languages": {lang: fit(record, [lang]) for lang in langs},
            "scripts": {script: fit(record, members) for script, members in scripts.items()}}


def held_out(record: dict[str, Any], lang: str) -> float:
    """The cut ``lang`` gets when left out: fitted on the other languages of its
    script, or on every other language where its script has no other."""
    others = [x for x in record if x != lang and SCRIPTS[x] == SCRIPTS[lang]]
    return fit(record, others or [x for x in record if x != lang])


def measure(record: dict[str, Any], lang: str, cut: float) -> dict[str, Any]:
    """On ``lang``'s held part at ``cut``: balanced accuracy against contradiction
    and against contradiction and neutral, and the share of entailed flagged."""
    part = record[lang]["held"]
    s = np.array(part["score"], dtype=float)
    labels = np.array(list(part["label"]))
    passed = s >= cut
    ent, con, neu = passed[labels == "e"], passed[labels == "c"], passed[labels == "n"]
    tpr = float(ent.mean())
    # --judge cascade:JUDGE: what the offline judge cannot tell (every name and number
    # found, score under the cut) goes on to JUDGE; the rest it decides itself.
    routed = (s >= 0.5) & (s < cut)
    kept = ~routed
    k_ent, k_con = passed[kept & (labels == "e")], passed[kept & (labels == "c")]
    return {"cut": cut,
            "cascade_routed": round(float(routed.mean()), 4),
            "cascade_ba_decided": (round((float(k_ent.mean()) + float(1 - k_con.mean())) / 2, 4)
                                   if k_ent.size and k_con.size else None),
            "ba_contradiction": round((tpr + float(1 - con.mean())) / 2, 4),
            "ba_all": round((tpr + float(1 - np.concatenate([con, neu]).mean())) / 2, 4),
            "flag_rate_entailed": round(1 - tpr, 4),
            "pairs": {"e": int(ent.size), "c": int(con.size), "n": int(neu.size)}}


# ----------------------------------------------------------- two domains (issue 58)

def _part(record: dict[str, Any], lang: str, part: str) -> tuple[np.ndarray, np.ndarray]:
    s = np.array(record[lang][part]["score"], dtype=float)
    y = np.array([int(c == "e") for c in record[lang][part]["label"]])
    return s, y


def _ba(record: dict[str, Any], lang: str, part: str, cut: float) -> float:
    s, y = _part(record, lang, part)
    return round(balanced_accuracy(y, s >= cut), 4)


def two_domains(xnli: dict[str, Any], articles: dict[str, Any], lang: str,
                english: float) -> dict[str, Any]:
    """The protocol's choice for ``lang`` across XNLI (fitted on ``tune``) and the article
    pairs (fitted on ``dev``): a cut fitted on each domain is scored on the other, both
    ways; where that carries better than the English cut does on the same parts (by
    ``MARGIN``), the cut fitted on both domains together (each a domain) is chosen, else
    the English cut. Nothing is chosen on XNLI's held part or the articles' test part."""
    sx, yx = _part(xnli, lang, "tune")
    sa, ya = _part(articles, lang, "dev")
    on_xnli = round(float(fit_threshold(sx, yx, np.array(["x"] * len(sx)))), 4)
    on_articles = round(float(fit_threshold(sa, ya, np.array(["a"] * len(sa)))), 4)
    both = round(float(fit_threshold(np.concatenate([sx, sa]), np.concatenate([yx, ya]),
                                     np.array(["x"] * len(sx) + ["a"] * len(sa)))), 4)
    carried = round((_ba(articles, lang, "dev", on_xnli) + _ba(xnli, lang, "tune", on_articles))
                    / 2, 4)
    at_english = round((_ba(articles, lang, "dev", english) + _ba(xnli, lang, "tune", english))
                       / 2, 4)
    separates = carried >= at_english + MARGIN
    return {"fitted_on_xnli": on_xnli, "fitted_on_articles": on_articles,
            "fitted_on_both": both, "carried_ba": carried, "english_ba": at_english,
            "separates": separates, "chosen": both if separates else english,
            "source": "both domains" if separates else "English cut: the domains cannot "
                                                       "separate the candidates"}


def script_two_domains(xnli: dict[str, Any], articles: dict[str, Any],
                       members: Sequence[str], english: float) -> float:
    """A script's cut: fitted on the XNLI tune and article dev parts of its languages
    (each language and domain a domain) where every member with article pairs separates,
    else the English cut."""
    s, y, d = [], [], []
    for lang in members:
        for rec, part in ((xnli, "tune"), (articles, "dev")):
            if lang in rec:
                a, b = _part(rec, lang, part)
                s.append(a)
                y.append(b)
                d.append(np.array([f"{lang}:{part}"] * len(a)))
    cut = round(float(fit_threshold(np.concatenate(s), np.concatenate(y), np.concatenate(d))), 4)
    judged = [lang for lang in members if lang in articles]
    if judged and not all(two_domains(xnli, articles, lang, english)["separates"]
                          for lang in judged):
        return english
    return cut


def chance_band(xnli: dict[str, Any], articles: dict[str, Any], lang: str
                ) -> tuple[float, float] | None:
    """The scores from 0.5 up where the judge is at chance on ``lang``'s dev data (XNLI
    tune, article dev; each class weighing the same): the hull of the ``BAND_BINS`` bins
    whose odds of a true segment are within ``CHANCE_ODDS`` of even. None: no such bin."""
    s = [_part(xnli, lang, "tune")] + ([_part(articles, lang, "dev")] if lang in articles
                                      else [])
    score = np.concatenate([a for a, _ in s])
    y = np.concatenate([b for _, b in s])
    at_chance = []
    for lo, hi in zip(BAND_BINS, BAND_BINS[1:]):
        inside = (score >= lo) & (score < hi) if hi < 1.0 else (score >= lo) & (score < 1.0)
        t, f = float(inside[y == 1].mean()), float(inside[y == 0].mean())
        if t + f == 0:
            continue
        if f > 0 and t > 0 and 1 / CHANCE_ODDS <= t / f <= CHANCE_ODDS:
            at_chance.append((lo, hi))
    if not at_chance:
        return None
    return at_chance[0][0], at_chance[-1][1]


def share_in(record: dict[str, Any], lang: str, part: str, band: tuple[float, float] | None
             ) -> float | None:
    if band is None or lang not in record:
        return None
    s, _ = _part(record, lang, part)
    return round(float(((s >= band[0]) & (s < band[1])).mean()), 4)


def measure_both(xnli: dict[str, Any], articles: dict[str, Any], lang: str, cut: float
                 ) -> dict[str, Any]:
    """At ``cut``, on the held parts: XNLI (as ``measure``) and the articles' test part
    (balanced accuracy, share of true pairs flagged, share of all pairs flagged)."""
    out: dict[str, Any] = {"cut": cut, "xnli": measure(xnli, lang, cut)}
    if lang in articles:
        s, y = _part(articles, lang, "test")
        passed = s >= cut
        out["articles"] = {"ba": round(balanced_accuracy(y, passed), 4),
                           "flag_rate_true": round(float(1 - passed[y == 1].mean()), 4),
                           "flagged": round(float(1 - passed.mean()), 4),
                           "false_share": round(float(1 - y.mean()), 4),
                           "pairs": {"true": int(y.sum()), "false": int((1 - y).sum())}}
    return out


def fit_two_domains(xnli: dict[str, Any], articles: dict[str, Any], english: float
                    ) -> dict[str, Any]:
    """Every language's choice (those with article pairs; the others take their script's),
    every script's cut, and each language's chance band."""
    langs = [lang for lang in XNLI_LANGUAGES if lang in xnli and lang != "en"]
    choices = {lang: two_domains(xnli, articles, lang, english)
               for lang in langs if lang in articles}
    scripts: dict[str, list[str]] = {}
    for lang in langs:
        scripts.setdefault(SCRIPTS[lang], []).append(lang)
    return {"languages": {lang: c["chosen"] for lang, c in choices.items()},
            "choices": choices,
            "scripts": {sc: script_two_domains(xnli, articles, members, english)
                        for sc, members in scripts.items()},
            "bands": {lang: chance_band(xnli, articles, lang)
                      for lang in XNLI_LANGUAGES if lang in xnli}}


# --------------------------------------------------------------------------- main

def write_scores(record: dict[str, Any]) -> Path:
    """The per-pair scores, one line per language and part (37,000 numbers: compact)."""
    import json

    path = RESULTS_DIR / f"{SCORES}.json"
    lines = [f"{json.dumps(lang)}: {{" + ", ".join(
        f"{json.dumps(part)}: {json.dumps(record[lang][part], separators=(',', ':'))}"
        for part in PARTS) + "}" for lang in record]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text('{"command": ' + json.dumps(command_line()) + ', "scores": {\n'
                   + ",\n".join(lines) + "\n}}\n", encoding="utf-8")
    tmp.replace(path)
    return path


def ship(two: dict[str, Any]) -> Path:
    import json

    from ceg_cli.judges.cuts import THRESHOLDS_FILE
    from ceg_cli.judges.offline.offline import SHIPPED

    path = SHIPPED / THRESHOLDS_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    # English keeps the cuts of its five domains (contexts_eval.py).
    data["languages"] = dict(two["languages"])
    data["scripts"] = dict(two["scripts"])
    data["bands"] = {k: list(v) for k, v in two["bands"].items() if v is not None}
    data["languages_fitted"] = (
        "benchmarks/languages/language_cuts.py: the protocol across two domains, "
        "XNLI dev's tune part "
        "(entailment supported, contradiction and neutral flagged; the premise the only "
        "context) and the dev part of answers written from an article (benchmarks/data/"
        "articles, XQuAD paragraphs: copied or restated true, a changed number, answer or "
        "negation false): a cut fitted on each domain is scored on the other, both ways; "
        "where that carries better than the English cut by 0.02 balanced accuracy, the cut "
        "fitted on both domains is shipped, else the English cut; a language without "
        "article pairs takes its script's, fitted on its languages' parts of both domains. "
        "The scores are benchmarks/results/language_cuts_scores.json and "
        "language_cuts_articles_scores.json, re-fitted by tests/test_language_cuts.py; "
        "English keeps the thresholds above. bands: the scores from 0.5 where the judge is "
        "at chance on the same dev parts (a true segment's odds within 1.5 of even), "
        "ceg_cli/judges/undecided.py")
    write_json(path, data)
    return path


def write_article_scores(articles: dict[str, Any]) -> Path:
    import json

    path = RESULTS_DIR / f"{ARTICLE_SCORES}.json"
    lines = [f"{json.dumps(lang)}: {{" + ", ".join(
        f"{json.dumps(part)}: {json.dumps(articles[lang][part], separators=(',', ':'))}"
        for part in ARTICLE_PARTS) + "}" for lang in articles]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text('{"command": ' + json.dumps(command_line()) + ', "scores": {\n'
                   + ",\n".join(lines) + "\n}}\n", encoding="utf-8")
    tmp.replace(path)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xnli", type=Path, default=CACHE_DIR / "xnli")
    parser.add_argument("--articles", type=Path, default=ARTICLES,
                        help="the article pairs (benchmarks/languages/article_set.py)")
    parser.add_argument("--ship", action="store_true",
                        help="write the chosen cuts into ceg_cli/models/offline/thresholds.json")
    parser.add_argument("--before", type=Path, default=None,
                        help="a folder whose thresholds.json holds the cuts reported as "
                             "'before' (default: the shipped ones)")
    parser.add_argument("--name", default="language_cuts", help="results/NAME.json")
    args = parser.parse_args(argv)
    from ceg_cli.judges.cuts import load_cuts
    from ceg_cli.judges.offline.offline import shipped_cuts

    english = shipped_cuts().contexts.value
    old = load_cuts(args.before) if args.before is not None else shipped_cuts()
    if old is None:
        usage_error(f"--before {args.before}: no thresholds.json there")
    before = {lang: old.for_language("contexts", lang).value for lang in XNLI_LANGUAGES}
    record: dict[str, Any] = {}
    articles: dict[str, Any] = {}
    for lang in XNLI_LANGUAGES:
        pairs = read_pairs(args.xnli, lang)
        record[lang] = {part: {"score": judge_scores(rows, lang),
                               "label": "".join(r[2] for r in rows)}
                        for part, rows in pairs.items()}
        rows_a = read_articles(args.articles, lang)
        if any(rows_a.values()):
            articles[lang] = {part: {"score": article_scores(rows, lang),
                                     "label": "".join(r[3] for r in rows)}
                              for part, rows in rows_a.items()}
        log(f"[{lang}] scored {sum(len(r) for r in pairs.values())} XNLI pairs, "
            f"{sum(len(r) for r in rows_a.values())} article pairs")
    write_scores(record)
    write_article_scores(articles)
    fitted = fit_all(record)
    two = fit_two_domains(record, articles, english)
    table: dict[str, Any] = {}
    for lang in XNLI_LANGUAGES:
        script_cut = two["scripts"][SCRIPTS[lang]]
        chosen = english if lang == "en" else two["languages"].get(lang, script_cut)
        band = two["bands"].get(lang)
        table[lang] = {"script": SCRIPTS[lang],
                       "english_cut": measure(record, lang, english),
                       "own_cut": measure(record, lang, fitted["languages"][lang]),
                       "script_cut": measure(record, lang, fitted["scripts"][SCRIPTS[lang]]),
                       "left_out_cut": measure(record, lang, held_out(record, lang)),
                       "two_domains": {
                           "before": measure_both(record, articles, lang,
                                                  before.get(lang, english)),
                           "english": measure_both(record, articles, lang, english),
                           "xnli_only": measure_both(record, articles, lang,
                                                     fitted["languages"][lang]),
                           "after": measure_both(record, articles, lang, chosen),
                           "choice": two["choices"].get(lang),
                           "band": band,
                           "in_band": {"xnli_held": share_in(record, lang, "held", band),
                                       "articles_test": share_in(articles, lang, "test",
                                                                 band)}}}
    data = {"command": command_line(), "environment": environment(), "fitted": fitted,
            "two_domains": two, "held": table}
    path = write_results(args.name, data)
    rows = []
    for lang, r in table.items():
        t = r["two_domains"]

        def cell(m: dict[str, Any]) -> str:
            a = m.get("articles")
            art = f"{a['ba']:.2f} / {a['flagged']:.2f}" if a else "-"
            return (f"{m['cut']:g}: {m['xnli']['ba_all']:.2f} / "
                    f"{m['xnli']['flag_rate_entailed']:.2f}; {art}")
        rows.append([lang, cell(t["before"]), cell(t["after"]),
                     "-" if t["band"] is None else f"{t['band'][0]:g}-{t['band'][1]:g}",
                     t["in_band"]["xnli_held"], t["in_band"]["articles_test"]])
    print(markdown_table(["language", "before", "after", "chance band", "in band, XNLI",
                          "in band, articles"], rows))
    print("\ncut: XNLI held BA (entailment vs contradiction+neutral) / entailed flagged; "
          "articles test BA / all pairs flagged")
    print(f"\nscripts: {two['scripts']}")
    if args.ship:
        log(f"shipped: {ship(two)}")
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
