"""The offline judge's rule across languages, fitted and measured on XNLI dev's parallel pairs.

    .venv/bin/python benchmarks/languages/crosslang_cuts.py [--xnli DIR] [--model NAME] [--ship]
        [--languages de,zh] [--name NAME]

**Data.** XNLI dev (15 languages, the same pairs translated; CC BY-NC, evaluation
only, never committed), read and split as ``language_cuts.py`` reads it: the even
premises ``tune`` (every cut is fitted on them), the odd ``held`` (the figures
reported). The translations are parallel, row for row, so a hypothesis in one
language can be checked against its premise in another. For each of the 14
languages X other than English, two directions: the segment (hypothesis) in X
against its evidence (premise) in English, ``X|en``, and the segment in English
against evidence in X, ``en|X``; beside them the same-language pairs ``X|X`` for
the figure to compare with. Entailment should be supported; contradiction and
neutral flagged.

**What the judge does** (``ceg_cli/judges/crossrule.py``): evidence being in another
language, a segment is supported when every number, and every name written in a script
the evidence writes, is found (``names_and_numbers``), and the embedder's cosine between
the segment and its best premise sentence (premises split by ``ceg_cli.sentences``)
reaches the cut, whatever the lexical rule said (since issue 60 item 2; before, a
lexical pass stood). Per pair the record keeps the lexical pass (``lex``, the "before"
figure), the names-and-numbers pass (``found``), the cosine in thousandths (``cos``) and
the label (``e``, ``c``, ``n``): numbers only,
``benchmarks/results/crosslang_cuts_scores.json.gz``, which
``tests/test_crosslang_cuts.py`` re-fits the shipped cut from, and ``--refit`` re-fits
and re-measures without XNLI or the embedder. The committed cosines were taken with the
numbers in the text and without the negation and month checks (``crosschecks``) the
rule now makes first; re-scoring them needs XNLI embedded again (about 75,000 texts).

**Cut** (``transfer.py``'s ``fit_threshold``: the cut that maximises the mean over
domains of balanced accuracy, entailment against the other two), each direction a
domain: the shipped cut on every direction's tune part; leave one language out,
the protocol's check: each language's held pairs at the cut fitted on the other
languages' directions.

Reported per language on the held part: balanced accuracy (entailment against
contradiction, the issue's figure; and against contradiction and neutral) and the
share of entailed hypotheses flagged, across languages before (the lexical rule
alone, today) and after (the rule at the left-out cut), beside the same-language
figure (the lexical rule at the language's cut). Embeddings are cached in
``benchmarks/.cache/crosslang/MODEL``. Results: ``benchmarks/results/NAME.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
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
from language_cuts import PARTS, XNLI_LANGUAGES, read_pairs  # noqa: E402
from transfer import fit_threshold  # noqa: E402

OTHERS = tuple(lang for lang in XNLI_LANGUAGES if lang != "en")
#: The score fitted where a number or name is missing (the cosine elsewhere).
MISSING = -1.0


def directions(lang: str) -> tuple[str, str]:
    """``lang``'s two cross-language directions, segment|evidence."""
    return f"{lang}|en", f"en|{lang}"


# --------------------------------------------------------------------------- scoring

def premise_sentences(premises: Sequence[str], lang: str) -> tuple[list[str], list[int]]:
    """The sentences of ``premises`` as ceg splits them, and the premise of each."""
    from ceg_cli.sentences import sentence_spans

    out, owner = [], []
    for i, p in enumerate(premises):
        spans = sentence_spans(p, lang) or [(0, len(p))]
        for a, b in spans:
            out.append(p[a:b])
            owner.append(i)
    return out, owner


def embeddings(model: str, lang: str, kind: str, texts: Sequence[str]) -> np.ndarray:
    """Embeddings of ``texts`` by ``model`` (cached in benchmarks/.cache/crosslang)."""
    path = CACHE_DIR / "crosslang" / model / f"{lang}-{kind}.npy"
    if path.is_file():
        cached = np.load(path)
        if len(cached) == len(texts):
            return cached
    from ceg_cli.judges.offline.crossrule import _load_packaged

    embedder = _load_packaged(model)
    embed = getattr(embedder, "embed_queries", None) or embedder.embed
    t = time.perf_counter()
    vectors = np.asarray(embed(list(texts)), dtype=np.float32)
    rate = len(texts) / (time.perf_counter() - t)
    log(f"[{model}] {lang} {kind}: {len(texts)} texts, {rate:.0f}/s")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


class Language:
    """One language's XNLI dev rows (both parts, in order), its premises' sentences and
    their embeddings."""

    def __init__(self, folder: Path, lang: str, model: str) -> None:
        parts = read_pairs(folder, lang)
        self.lang = lang
        self.rows = [r for part in PARTS for r in parts[part]]
        self.part = [part for part in PARTS for _ in parts[part]]
        premises = list(dict.fromkeys(r[0] for r in self.rows))
        index = {p: i for i, p in enumerate(premises)}
        self.premise_of = [index[r[0]] for r in self.rows]
        self.sentences, self.owner = premise_sentences(premises, lang)
        self.hyp = embeddings(model, lang, "hypotheses", [r[1] for r in self.rows])
        self.sent = embeddings(model, lang, "sentences", self.sentences)
        self.by_premise: dict[int, list[int]] = {}
        for k, i in enumerate(self.owner):
            self.by_premise.setdefault(i, []).append(k)


def lexical(segment: str, evidence: str, lang: str) -> tuple[bool, bool]:
    """Whether the offline judge's lexical rule supports ``segment`` (in ``lang``, read as
    ceg reads a record in it) against ``evidence`` at its shipped cut, and whether every
    number and name the cross-language rule asks of ``evidence`` is in it."""
    from ceg_cli.judges.offline import offline
    from ceg_cli.judges.offline.crossrule import names_and_numbers
    from ceg_cli.types import Evidence, JudgeItem, Segment

    item = JudgeItem(Segment(0, 0, len(segment), segment),
                     (Evidence(0, "p", "", evidence, None),), None, segment, lang, "contexts")
    if offline.verdict_without_evidence(item) is not None:
        return True, True
    a = offline.analyse(item, lang)
    if not a.content:
        return True, True
    cut = offline.item_cut(offline.shipped_cuts(), item).value
    return offline.score(a) >= cut, not names_and_numbers(a, item.evidence)[1]


def score_direction(seg: Language, ev: Language) -> dict[str, dict[str, Any]]:
    """Per part: the lexical pass, the names-and-numbers pass, the cosine (thousandths)
    of the best evidence sentence, and the label, of each of ``seg``'s hypotheses
    against its premise in ``ev``'s language."""
    out = {part: {"lex": [], "found": [], "cos": [], "label": []} for part in PARTS}
    for r, ((_, hyp, label), (premise, _, other)) in enumerate(zip(seg.rows, ev.rows)):
        if label != other:
            usage_error(f"XNLI dev-{seg.lang}.tsv and dev-{ev.lang}.tsv are not parallel "
                        f"(row {r + 1}: {label} against {other})")
        passed, found = lexical(hyp, premise, seg.lang)
        sims = ev.sent[ev.by_premise[ev.premise_of[r]]] @ seg.hyp[r]
        rec = out[seg.part[r]]
        rec["lex"].append("1" if passed else "0")
        rec["found"].append("1" if found else "0")
        rec["cos"].append(int(round(float(sims.max()) * 1000)))
        rec["label"].append(label)
    return {part: {"lex": "".join(v["lex"]), "found": "".join(v["found"]), "cos": v["cos"],
                   "label": "".join(v["label"])} for part, v in out.items()}


# --------------------------------------------------------------------------- fitting

def rule_score(part: dict[str, Any]) -> np.ndarray:
    """What the cut is fitted on: the cosine where every number and name is found,
    ``MISSING`` else. The rule decides every segment whose evidence is in another
    language, whatever the lexical rule said (issue 60 item 2: before, a lexical pass,
    ``lex``, stood; the refit without it gives the same cut, 0.848)."""
    cos = np.array(part["cos"], dtype=float) / 1000
    found = np.array([c == "1" for c in part["found"]])
    return np.where(found, cos, MISSING)


def lexical_pass(part: dict[str, Any]) -> np.ndarray:
    """Where the lexical rule alone (what ceg did before the rule) supports."""
    return np.array([c == "1" for c in part["lex"]])


def fit(record: dict[str, Any], names: Sequence[str]) -> float:
    """The protocol's cut over the tune parts of ``names`` (directions, each a domain)."""
    s = np.concatenate([rule_score(record[n]["tune"]) for n in names])
    y = np.concatenate([np.array([c == "e" for c in record[n]["tune"]["label"]], dtype=int)
                        for n in names])
    d = np.concatenate([np.array([n] * len(record[n]["tune"]["label"])) for n in names])
    return round(float(fit_threshold(s, y, d)), 4)


def cross_names(record: dict[str, Any], leave_out: str | None = None) -> list[str]:
    return [n for lang in OTHERS if lang != leave_out for n in directions(lang) if n in record]


def measure(passed: np.ndarray, labels: str) -> dict[str, Any]:
    """Balanced accuracy against contradiction and against contradiction and neutral,
    and the share of entailed flagged."""
    lab = np.array(list(labels))
    ent, con, neu = passed[lab == "e"], passed[lab == "c"], passed[lab == "n"]
    tpr = float(ent.mean())
    return {"ba_contradiction": round((tpr + 1 - float(con.mean())) / 2, 4),
            "ba_all": round((tpr + 1 - float(np.concatenate([con, neu]).mean())) / 2, 4),
            "flag_rate_entailed": round(1 - tpr, 4)}


def held_table(record: dict[str, Any], same: dict[str, Any]) -> dict[str, Any]:
    """Per language, on the held part: its directions before (lexical) and after (the
    rule at the left-out cut and at the shipped one), and the same-language figure."""
    shipped = fit(record, cross_names(record))
    table = {}
    for lang in OTHERS:
        names = [n for n in directions(lang) if n in record]
        if not names:
            continue
        left_out = fit(record, cross_names(record, lang))
        parts = [record[n]["held"] for n in names]
        labels = "".join(p["label"] for p in parts)
        s = np.concatenate([rule_score(p) for p in parts])
        lex = np.concatenate([lexical_pass(p) for p in parts])
        table[lang] = {
            "left_out_cut": left_out,
            "before": measure(lex, labels),
            "after_left_out": measure(s >= left_out, labels),
            "after_shipped": measure(s >= shipped, labels),
            "by_direction": {n: measure(rule_score(record[n]["held"]) >= left_out,
                                        record[n]["held"]["label"]) for n in names},
        }
        if lang in same:
            table[lang]["same_language"] = same[lang]
    return {"shipped_cut": shipped, "languages": table}


# --------------------------------------------------------------------------- main

def write_scores(record: dict[str, Any], model: str, name: str) -> Path:
    """The per-pair scores, one line per direction (numbers only), gzipped (the checkout
    travels to a GPU machine under a size bound): ``NAME_scores.json.gz``."""
    import gzip

    path = RESULTS_DIR / f"{name}_scores.json.gz"
    lines = [f"{json.dumps(n)}: {{" + ", ".join(
        f"{json.dumps(part)}: {json.dumps(record[n][part], separators=(',', ':'))}"
        for part in PARTS) + "}" for n in record]
    tmp = path.with_name(f".{path.name}.tmp")
    text = ('{"command": ' + json.dumps(command_line()) + ', "model": '
            + json.dumps(model) + ', "scores": {\n' + ",\n".join(lines) + "\n}}\n")
    tmp.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    tmp.replace(path)
    return path


def ship(cut: float, model: str) -> Path:
    from ceg_cli.judges.cuts import THRESHOLDS_FILE
    from ceg_cli.judges.offline.crossrule import KEY
    from ceg_cli.judges.offline.offline import SHIPPED

    path = SHIPPED / THRESHOLDS_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    data[KEY] = {
        "cosine": cut, "model": model,
        "fitted": "benchmarks/languages/crosslang_cuts.py --ship: fit_threshold on XNLI dev's tune "
                  "part across languages (hypothesis in one language, premise in the other, "
                  "English and each of 14 others both ways, each direction a domain; "
                  "entailment supported, contradiction and neutral flagged): the cosine "
                  f"by {model} between the segment and its best evidence sentence that a "
                  "segment whose numbers and names are all found needs (every segment whose "
                  "evidence is in another language); the scores are "
                  "benchmarks/results/crosslang_cuts_scores.json.gz, re-fitted by "
                  "tests/test_crosslang_cuts.py"}
    write_json(path, data)
    return path


def refit(name: str, ship_it: bool) -> int:
    """``--refit``: the cut and the held table from the committed per-pair scores, the
    same-language figures carried from the results file they came with."""
    import gzip

    committed = json.loads(gzip.decompress((RESULTS_DIR / f"{name}_scores.json.gz")
                                           .read_bytes()).decode("utf-8"))
    before = json.loads((RESULTS_DIR / f"{name}.json").read_text(encoding="utf-8"))
    record = committed["scores"]
    same = {lang: r["same_language"] for lang, r in before["languages"].items()
            if "same_language" in r}
    table = held_table(record, same)
    for lang, r in before["languages"].items():
        if "same_language_with_rule" in r:
            table["languages"][lang]["same_language_with_rule"] = r["same_language_with_rule"]
    data = {"command": command_line(), "scores_from": committed["command"],
            "environment": environment(), "model": committed["model"], **table}
    path = write_results(name, data)
    log(f"refitted: cut {table['shipped_cut']}; results: {path}")
    if ship_it:
        log(f"shipped: {ship(table['shipped_cut'], committed['model'])}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xnli", type=Path, default=CACHE_DIR / "xnli")
    parser.add_argument("--model", default="multilingual-e5-small-q4",
                        help="a packaged multilingual embedder (index/dense/packaged.py); "
                             "use-multilingual-v3 was measured too (docs/measurements.md)")
    parser.add_argument("--languages", default=",".join(OTHERS),
                        help="comma-separated XNLI languages to pair with English")
    parser.add_argument("--ship", action="store_true",
                        help="write the fitted cut into ceg_cli/models/offline/thresholds.json")
    parser.add_argument("--name", default="crosslang_cuts", help="results/NAME.json")
    parser.add_argument("--refit", action="store_true",
                        help="re-fit and re-measure from the committed results/NAME_scores.json.gz "
                             "(no XNLI, no embedder), keeping its same-language figures")
    args = parser.parse_args(argv)
    if args.refit:
        return refit(args.name, args.ship)
    from ceg_cli.index.dense.packaged import packaged_model

    model = packaged_model(args.model)
    if model is None:
        usage_error(f"--model {args.model}: not a packaged multilingual embedder")
    langs = [x.strip() for x in args.languages.split(",") if x.strip()]
    bad = [x for x in langs if x not in OTHERS]
    if bad:
        usage_error(f"--languages: {', '.join(bad)} not among {', '.join(OTHERS)}")
    english = Language(args.xnli, "en", model.name)
    record: dict[str, Any] = {}
    same: dict[str, Any] = {}
    for lang in langs:
        other = Language(args.xnli, lang, model.name)
        record[f"{lang}|en"] = score_direction(other, english)
        record[f"en|{lang}"] = score_direction(english, other)
        own = score_direction(other, other)["held"]
        same[lang] = {"lexical": measure(lexical_pass(own), own["label"]),
                      "cosines": own["cos"], "found": own["found"], "lex": own["lex"],
                      "label": own["label"]}
        log(f"[{lang}] scored {3 * len(other.rows)} pairs")
    write_scores(record, model.name, args.name)
    table = held_table(record, {k: v["lexical"] for k, v in same.items()})
    # The same rule on same-language pairs, at the shipped cross cut: for the record only
    # (same-language segments keep the lexical rule).
    for lang, v in same.items():
        s = rule_score({"cos": v["cosines"], "found": v["found"], "lex": v["lex"]})
        table["languages"][lang]["same_language_with_rule"] = measure(
            s >= table["shipped_cut"], v["label"])
    data = {"command": command_line(), "environment": environment(), "model": model.name,
            **table}
    path = write_results(args.name, data)
    rows = []
    for lang, r in table["languages"].items():
        b, a, d = r["before"], r["after_left_out"], r["by_direction"]
        same_c = r["same_language"]["ba_contradiction"]
        rows.append([
            lang, f"{b['ba_contradiction']:.2f}", f"{b['flag_rate_entailed']:.2f}",
            f"{r['left_out_cut']:g}", f"{a['ba_contradiction']:.2f}", f"{a['ba_all']:.2f}",
            f"{a['flag_rate_entailed']:.2f}",
            " / ".join(f"{d[n]['ba_contradiction']:.2f}" for n in directions(lang)),
            f"{same_c:.2f}", f"{r['same_language']['flag_rate_entailed']:.2f}",
            f"{100 * (a['ba_contradiction'] - same_c):+.1f}"])
    print(markdown_table(
        ["lang", "before: BA c", "flagged", "after: left-out cut", "BA c", "BA c+n", "flagged",
         "BA c, X\\|en / en\\|X", "same language: BA c", "flagged", "Δ"], rows))
    print(f"\nXNLI dev held part, both directions (X|en, en|X); {model.name}; shipped cut "
          f"{table['shipped_cut']}")
    if args.ship:
        log(f"shipped: {ship(table['shipped_cut'], model.name)}")
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
