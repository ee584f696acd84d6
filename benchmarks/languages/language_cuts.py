"""The offline judge's cut per language and per script, fitted on XNLI dev paraphrases.

    .venv/bin/python benchmarks/languages/language_cuts.py [--xnli DIR] [--ship]

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
it decides itself. ``--ship`` writes the
language and script cuts into ``ceg_cli/models/offline/thresholds.json``.
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
from transfer import fit_threshold  # noqa: E402

XNLI_LANGUAGES = ("en", "ar", "bg", "de", "el", "es", "fr", "hi", "ru", "sw", "th", "tr",
                  "ur", "vi", "zh")
#: The script each XNLI language is written in (ISO 15924, as ``ceg_cli.lang`` names it).
SCRIPTS = {"en": "Latn", "de": "Latn", "es": "Latn", "fr": "Latn", "sw": "Latn", "tr": "Latn",
           "vi": "Latn", "bg": "Cyrl", "ru": "Cyrl", "ar": "Arab", "ur": "Arab",
           "hi": "Deva", "el": "Grek", "th": "Thai", "zh": "Hani"}
LABELS = {"entailment": "e", "contradiction": "c", "neutral": "n"}
PARTS = ("tune", "held")
SCORES = "language_cuts_scores"


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


def ship(fitted: dict[str, dict[str, float]]) -> Path:
    import json

    from ceg_cli.judges.cuts import THRESHOLDS_FILE
    from ceg_cli.judges.offline.offline import SHIPPED

    path = SHIPPED / THRESHOLDS_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    # English keeps the cuts of its five domains (contexts_eval.py).
    data["languages"] = {k: v for k, v in fitted["languages"].items() if k != "en"}
    data["scripts"] = dict(fitted["scripts"])
    data["languages_fitted"] = (
        "benchmarks/languages/language_cuts.py: fit_threshold on the judge's scores of XNLI dev's "
        "tune part (entailment supported, contradiction and neutral flagged; the premise "
        "the only context), a language on its own pairs, a script on its languages' (each "
        "a domain); the scores are benchmarks/results/language_cuts_scores.json, re-fitted "
        "by tests/test_language_cuts.py; English keeps the thresholds above")
    write_json(path, data)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xnli", type=Path, default=CACHE_DIR / "xnli")
    parser.add_argument("--ship", action="store_true",
                        help="write the fitted cuts into ceg_cli/models/offline/thresholds.json")
    parser.add_argument("--name", default="language_cuts", help="results/NAME.json")
    args = parser.parse_args(argv)
    from ceg_cli.judges.offline.offline import shipped_cuts

    english = shipped_cuts().contexts.value
    record: dict[str, Any] = {}
    for lang in XNLI_LANGUAGES:
        pairs = read_pairs(args.xnli, lang)
        record[lang] = {part: {"score": judge_scores(rows, lang),
                               "label": "".join(r[2] for r in rows)}
                        for part, rows in pairs.items()}
        log(f"[{lang}] scored {sum(len(r) for r in pairs.values())} pairs")
    write_scores(record)
    fitted = fit_all(record)
    table: dict[str, Any] = {}
    for lang in XNLI_LANGUAGES:
        own = fitted["languages"][lang]
        table[lang] = {"script": SCRIPTS[lang],
                       "english_cut": measure(record, lang, english),
                       "own_cut": measure(record, lang, own),
                       "script_cut": measure(record, lang, fitted["scripts"][SCRIPTS[lang]]),
                       "left_out_cut": measure(record, lang, held_out(record, lang))}
    data = {"command": command_line(), "environment": environment(), "fitted": fitted,
            "held": table}
    path = write_results(args.name, data)
    rows = []
    for lang, r in table.items():
        rows.append([lang, r["script"]] + [
            f"{r[k]['cut']:.3f}: {r[k]['ba_contradiction']:.2f} / {r[k]['ba_all']:.2f} / "
            f"{r[k]['flag_rate_entailed']:.2f}"
            for k in ("english_cut", "own_cut", "left_out_cut")])
    print(markdown_table(["language", "script", "English cut", "own cut",
                          "left-out cut"], rows))
    print("\ncut: BA (entailment vs contradiction) / BA (vs contradiction+neutral) / "
          "entailed flagged, XNLI dev held part")
    print(f"\nscripts: {fitted['scripts']}")
    print("\n--judge cascade:JUDGE at the language's cut (English's: its shipped one): share "
          "of held pairs the offline judge hands on; BA (entailment vs contradiction) on "
          "those it decides itself:\n")
    shipped = {lang: r["english_cut" if lang == "en" else "own_cut"] for lang, r in table.items()}
    print(markdown_table(["language", "cut", "handed on", "BA decided", "BA all"], [
        [lang, f"{r['cut']:g}", f"{r['cascade_routed']:.2f}", f"{r['cascade_ba_decided']:.2f}",
         f"{r['ba_contradiction']:.2f}"] for lang, r in shipped.items()]))
    if args.ship:
        log(f"shipped: {ship(fitted)}")
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
