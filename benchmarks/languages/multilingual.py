"""How well ceg checks text in each language, beside English on the same pipeline.

    .venv/bin/python benchmarks/languages/multilingual.py [--split test|dev|all]
        [--languages en,de,...]
        [--judge offline] [--model NAME] [--cross-model NAME|same] [--retrieval dense]
        [--language off|auto|code]
        [--xnli DIR] [--xnli-judges offline,verifier,nli-tiny] [--xnli-pairs 200]
        [--skip-xnli] [--segmentation-only] [--name multilingual] [--workdir DIR]

Two data sets:

- **The end-to-end set** (``benchmarks/data/multilingual``, built by
  ``multilingual_set.py`` from real Wikipedia paragraphs of MLQA, PIAF, JSQuAD and
  TyDi QA; its README gives sources and licences): per language, the passages (the
  corpus), true sentences taken from them and the same sentences with a planted
  error, and answers of 2-4 sentences with their reference split. ``--split``:
  ``test`` (held out: the figures to report; never tune on it), ``dev`` (tune on
  it) or ``all``.
- **XNLI dev** (15 languages, translations of the same English pairs; CC BY-NC,
  evaluation only, never committed): ``--xnli DIR`` (a folder of ``dev-LANG.tsv``,
  e.g. ``data/xnli`` of a clone of GautamGupta17/MESH), else
  ``benchmarks/.cache/xnli``; skipped, said once, when neither holds it. Its
  premises alternate between two parts (``--xnli-part``): ``tune`` (tune on it)
  and ``held`` (the figures to report). XNLI's test split has no labels in that
  copy. Its hypotheses paraphrase their premise: the case a lexical judge finds
  hard, where the set above copies its true sentences word for word.

Per language of the end-to-end set:

- **seg. F1**: ``ceg_cli.check.segment.segment_response`` on the answers against
  the reference split: boundary F1 (a boundary counts where a segment starts at
  the offset a reference sentence starts), and the share of answers split exactly.
- **R@5 mono**: each true sentence, with its question as ``ceg check`` queries
  (``--query``), searched in the language's own index (its passages): is its
  passage in the top 5?
- **R@5 x-ling** (MLQA languages): the same query searched in the English index:
  is the English paragraph that says the same thing in the top 5? The English index
  searched across languages is built with ``--cross-model`` (default
  ``multilingual``: a user who checks German answers against English documents
  builds them with a model that reads both; ``same``: the English index of the
  monolingual columns, built with ``--model`` or ceg's default for English).
- **BA**: balanced accuracy of ``ceg check`` (``--judge``; retrieval from the
  language's index as above) on true sentences (should be factual) against
  planted errors (should be nonfactual); a sentence ceg splits in two is
  nonfactual if either part is. **flag rate**: the share of true sentences flagged.
  **BA gold**: the same with the sentence's own passage given as its context (no
  retrieval): the judge alone. **BA x-ling**: sentences checked against the English
  index. Per kind of planted error, the share caught (``caught``) is in the JSON.

**The offline judge alone**: the same claims against their own passage, and the
XNLI pairs, through ``offline.decide`` called directly and told each set's
language where the judge takes one: what issue 39.6 changed, apart from
retrieval and from how ceg passes a language along (run it on a checkout from
before 39.6 for the "before" figures).

Per XNLI language: balanced accuracy of each of ``--xnli-judges`` on entailment
(should be factual) against contradiction (should be nonfactual), the premise as
the hypothesis's only context; the first ``--xnli-pairs`` pairs of each label, the
same rows in every language (XNLI's languages are translations of one set).
``nli-tiny`` is ``nli:`` on a one-layer BERT with random weights and a character
vocabulary built here: it tests that the ``nli:`` path reads every script, and its
figures mean nothing else.

Language support is discovered at run time: where this checkout's ceg takes a
language (a ``language`` option of ``Checker`` and ``BuildOptions``, a ``language``
parameter of ``segment_response``), ``--language`` passes ``auto`` or each set's
own code (``code``); ``off`` (the default) passes none, as ceg ran before
languages existed. Results: ``benchmarks/results/NAME.json``; the report (Markdown)
on stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    CACHE_DIR,
    command_line,
    environment,
    log,
    markdown_table,
    results_name,
    usage_error,
    work_dir,
    write_results,
)
from multilingual_set import DEFAULT_OUT, LANGUAGES, PARALLEL, read_set  # noqa: E402

XNLI_LANGUAGES = ("en", "ar", "bg", "de", "el", "es", "fr", "hi", "ru", "sw", "th", "tr",
                  "ur", "vi", "zh")
XNLI_JUDGES = ("offline", "verifier", "nli-tiny")
K = 5


# --------------------------------------------------------------------------- metrics

def balanced_accuracy(positives: Sequence[bool], negatives: Sequence[bool]) -> float | None:
    """``positives``: for each item that should pass, whether it passed; ``negatives``:
    for each that should be flagged, whether it was. The mean of the two rates."""
    if not positives or not negatives:
        return None
    return (sum(positives) / len(positives) + sum(negatives) / len(negatives)) / 2


def boundary_scores(
    reference: Sequence[Sequence[int]], predicted: Sequence[Sequence[int]]
) -> dict[str, Any]:
    """Boundary precision, recall and F1 over answers, and the share split exactly.

    Each answer is given by the offsets where its sentences start; the first (the
    answer's start) is not a boundary.
    """
    tp = fp = fn = exact = 0
    for ref, pred in zip(reference, predicted, strict=True):
        r, p = set(ref[1:]), set(pred[1:])
        tp += len(r & p)
        fp += len(p - r)
        fn += len(r - p)
        exact += r == p
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    n = len(reference)
    return {
        "answers": n, "boundaries": tp + fn, "precision": round(precision, 4),
        "recall": round(recall, 4), "f1": round(f1, 4),
        "exact": round(exact / n, 4) if n else None,
    }


def recall_at(ranked: Sequence[Sequence[str]], targets: Sequence[str], k: int = K) -> float | None:
    """The share of queries whose target is among the first ``k`` ranked ids."""
    if not targets:
        return None
    return sum(1 for got, want in zip(ranked, targets, strict=True) if want in got[:k]) / len(
        targets
    )


def judged(claims: Sequence[dict[str, Any]], passed: Sequence[bool]) -> dict[str, Any]:
    """BA, flag rate on true sentences, and the share of each kind of error caught."""
    pos = [ok for c, ok in zip(claims, passed, strict=True) if c["supported"]]
    neg = [not ok for c, ok in zip(claims, passed, strict=True) if not c["supported"]]
    kinds: dict[str, list[bool]] = {}
    for c, ok in zip(claims, passed, strict=True):
        if not c["supported"]:
            kinds.setdefault(c["error"], []).append(not ok)
    ba = balanced_accuracy(pos, neg)
    return {
        "true": len(pos), "planted": len(neg),
        "balanced_accuracy": None if ba is None else round(ba, 4),
        "flag_rate_true": round(1 - sum(pos) / len(pos), 4) if pos else None,
        "caught": {k: round(sum(v) / len(v), 4) for k, v in sorted(kinds.items())},
        "caught_n": {k: len(v) for k, v in sorted(kinds.items())},
    }


# --------------------------------------------------------------------------- language plumbing

def language_support() -> dict[str, bool]:
    """Which parts of this checkout's ceg take a language."""
    from ceg_cli.api import RUN_OPTIONS
    from ceg_cli.check.segment import segment_response
    from ceg_cli.index.build.builder import BuildOptions

    return {
        "check": "language" in RUN_OPTIONS,
        "build": "language" in {f.name for f in dataclasses.fields(BuildOptions)},
        "segment": "language" in inspect.signature(segment_response).parameters,
    }


def language_value(mode: str, lang: str) -> str | None:
    return None if mode == "off" else ("auto" if mode == "auto" else lang)


# --------------------------------------------------------------------------- the end-to-end set

def segmentation(responses: Sequence[dict[str, Any]], language: str | None) -> dict[str, Any]:
    from ceg_cli.check.segment import segment_response

    kwargs = {"language": language} if language is not None else {}
    predicted = [[s.start for s in segment_response(r["text"], **kwargs)] for r in responses]
    return boundary_scores([r["starts"] for r in responses], predicted)


def build(rows: Sequence[dict[str, Any]], target: Path, model: str | None,
          language: str | None) -> Path:
    """The index of the set's passages at ``target``, reused when built from the same."""
    from ceg_cli.index.build.builder import BuildOptions, build_index

    docs = target.with_suffix(".jsonl")
    body = "".join(
        json.dumps({"id": r["id"], "title": r["title"], "text": r["text"]}, ensure_ascii=False)
        + "\n"
        for r in rows if r["type"] == "passage"
    )
    stamp = target / "bench-stamp.json"
    want = {"docs": body, "model": model, "language": language}
    if stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")) == want:
        return target
    docs.write_text(body, encoding="utf-8")
    options: dict[str, Any] = {"model": model}
    if language is not None:
        options["language"] = language
    started = time.perf_counter()
    build_index([docs], target, BuildOptions(**options))
    log(f"  built {target.name} in {time.perf_counter() - started:.0f} s")
    stamp.write_text(json.dumps(want), encoding="utf-8")
    return target


def ranked_docs(index_dir: Path, queries: Sequence[str], retrieval: str) -> list[list[str]]:
    from ceg_cli.index import open_index

    with open_index(index_dir) as index:
        hits = index.search(list(queries), K, retrieval)
    return [list(dict.fromkeys(h.chunk.doc_id for h in found)) for found in hits]


def query_of(claim: dict[str, Any], mode: str) -> str:
    from ceg_cli.check.pipeline import build_query
    from ceg_cli.types import Segment

    segment = Segment(0, 0, len(claim["text"]), claim["text"])
    return build_query(segment, claim.get("question"), mode)


def check_claims(
    claims: Sequence[dict[str, Any]], judge: str, options: dict[str, Any],
    index: Path | None = None, passages: dict[str, dict[str, Any]] | None = None,
) -> list[bool]:
    """Whether ``ceg check`` passes each claim (label factual), against ``index`` or, with
    ``passages``, against the claim's own passage as its only context."""
    from ceg_cli.api import Checker

    with Checker(index=index, judge=judge, **options) as checker:
        return run_checker(checker, claims, passages)


def run_checker(
    checker: Any, claims: Sequence[dict[str, Any]],
    passages: dict[str, dict[str, Any]] | None = None,
) -> list[bool]:
    records = []
    for c in claims:
        record: dict[str, Any] = {"response": c["text"]}
        if c.get("question"):
            record["question"] = c["question"]
        if passages is not None:
            p = passages[c["passage"]]
            record["contexts"] = [{"text": p["text"], "title": p["title"], "id": p["id"]}]
        records.append(record)
    results = list(checker.check_many(records))
    errors = [r.error for r in results if r.error]
    if errors:
        raise SystemExit(f"multilingual.py: ceg check refused a record: {errors[0]}")
    return [r.label == "factual" for r in results]


def end_to_end(args: argparse.Namespace, work: Path, support: dict[str, bool]) -> dict[str, Any]:
    sets = {lang: read_set(args.set, lang) for lang in args.languages}
    if "en" not in sets and any(lang in PARALLEL for lang in sets):
        sets["en"] = read_set(args.set, "en")  # the cross-lingual targets
    out: dict[str, Any] = {}
    indexes: dict[str, Path] = {}
    for lang, rows in sets.items():
        lang_arg = language_value(args.language, lang)
        log(f"[{lang}] index ...")
        indexes[lang] = build(rows, work / f"index-{lang}", args.model,
                              lang_arg if support["build"] else None)
    cross_index = indexes.get("en")
    if "en" in sets and args.cross_model != "same" and any(
        lang in PARALLEL and lang != "en" for lang in args.languages
    ):
        log("[en] index for cross-lingual search ...")
        lang_arg = language_value(args.language, "en")
        cross_index = build(sets["en"], work / "index-en-cross", args.cross_model,
                            lang_arg if support["build"] else None)
    for lang in args.languages:
        rows = sets[lang]
        lang_arg = language_value(args.language, lang)
        options: dict[str, Any] = {"query": args.query, "retrieval": args.retrieval}
        if lang_arg is not None and support["check"]:
            options["language"] = lang_arg
        in_split = [r for r in rows if args.split in ("all", r.get("split"))]
        claims = [r for r in in_split if r["type"] == "claim"]
        responses = [r for r in in_split if r["type"] == "response"]
        passages = {r["id"]: r for r in rows if r["type"] == "passage"}
        trues = [c for c in claims if c["supported"]]
        log(f"[{lang}] {len(claims)} claims, {len(responses)} answers ...")
        queries = [query_of(c, args.query) for c in trues]
        result: dict[str, Any] = {
            "segmentation": segmentation(
                responses, lang_arg if support["segment"] else None
            ),
            "recall@5_mono": _round(recall_at(
                ranked_docs(indexes[lang], queries, args.retrieval), [c["passage"] for c in trues]
            )),
            "judge": judged(claims, check_claims(claims, args.judge, options, indexes[lang])),
            "judge_gold": judged(
                claims, check_claims(claims, args.judge, options, passages=passages)
            ),
        }
        crossing = [c for c in claims if c.get("en_passage")]
        if crossing and lang != "en":
            cross_true = [c for c in crossing if c["supported"]]
            result["recall@5_cross"] = _round(recall_at(
                ranked_docs(cross_index, [query_of(c, args.query) for c in cross_true],
                            args.retrieval),
                [c["en_passage"] for c in cross_true],
            ))
            result["judge_cross"] = judged(
                crossing, check_claims(crossing, args.judge, options, cross_index)
            )
        out[lang] = result
    return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


# --------------------------------------------------------------------------- XNLI

def read_xnli(
    folder: Path, lang: str, per_label: int, part: str = "all"
) -> list[tuple[str, str, bool]]:
    """(premise, hypothesis, entailed) for the first ``per_label`` rows of each label.

    ``part``: ``tune`` (the even-numbered premises: tune on them), ``held`` (the odd:
    held out, the figures to report) or ``all``. A premise's three hypotheses stay in
    one part, and XNLI's languages are row by row translations, so each part holds
    the same pairs in every language.
    """
    rows: list[tuple[str, str, bool]] = []
    seen: Counter[str] = Counter()
    path = folder / f"dev-{lang}.tsv"
    group, last = -1, None
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                raise SystemExit(f"multilingual.py: {path}:{number}: expected 3 tab-separated "
                                 f"fields (premise, hypothesis, label), got {len(parts)}")
            premise, hypothesis, label = parts
            if premise != last:
                group, last = group + 1, premise
            if part != "all" and (group % 2 == 0) != (part == "tune"):
                continue
            if label not in ("entailment", "contradiction") or seen[label] >= per_label:
                continue
            seen[label] += 1
            rows.append((premise, hypothesis, label == "entailment"))
    return rows


def tiny_nli(target: Path, texts: Iterable[str]) -> Path:
    """A one-layer BERT with random weights over the characters of ``texts``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    chars = sorted({c for t in texts for c in t.lower() if not c.isspace()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars]
    target.mkdir(parents=True, exist_ok=True)
    (target / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer(str(target / "vocab.txt"), model_max_length=256)
    labels = {0: "entailment", 1: "neutral", 2: "contradiction"}
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=256, id2label=labels,
                        label2id={v: k for k, v in labels.items()})
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    return target


def xnli(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    data = {lang: read_xnli(args.xnli, lang, args.xnli_pairs, args.xnli_part)
            for lang in XNLI_LANGUAGES}
    judges = {j: j for j in args.xnli_judges}
    if "nli-tiny" in judges:
        model = tiny_nli(work / "nli-tiny", (p + h for rows in data.values() for p, h, _ in rows))
        judges["nli-tiny"] = f"nli:{model}"
    from ceg_cli.api import Checker

    out: dict[str, Any] = {}
    for name, judge in judges.items():
        out[name] = {}
        with Checker(judge=judge) as checker:
            for lang, rows in data.items():
                started = time.perf_counter()
                claims = [{"text": h, "passage": str(i), "supported": ok,
                           "error": "contradiction"} for i, (_, h, ok) in enumerate(rows)]
                passages = {str(i): {"id": str(i), "title": "", "text": p}
                            for i, (p, _, _) in enumerate(rows)}
                result = judged(claims, run_checker(checker, claims, passages))
                out[name][lang] = {k: result[k] for k in (
                    "true", "planted", "balanced_accuracy", "flag_rate_true")}
                log(f"[xnli {name} {lang}] BA {result['balanced_accuracy']} "
                    f"({time.perf_counter() - started:.0f} s)")
    return out


# --------------------------------------------------------------------------- the judge alone

def offline_alone(
    args: argparse.Namespace, with_xnli: bool
) -> dict[str, Any]:
    """The offline judge on each true sentence and planted error against its own
    passage, and on each XNLI pair, called directly and told the language where
    this checkout's judge takes one (``offline.analyse(item, language)``): what
    issue 39.6 changes, apart from retrieval and from how ceg passes a language."""
    from ceg_cli.judges.offline import offline
    from ceg_cli.types import Evidence, JudgeItem, Segment

    told = "language" in inspect.signature(offline.analyse).parameters
    # Where this checkout's judge has cuts (the protocol's), each item is also decided at
    # the setting's (English) cut and at the one the judge takes for its language.
    cuts = offline.shipped_cuts() if hasattr(offline, "shipped_cuts") else None
    per_language = cuts is not None and hasattr(offline, "item_cut")

    def run(rows: Sequence[tuple[str, str, str, dict[str, Any]]], lang: str,
            at_cuts: dict[str, Any]) -> dict[str, Any]:
        claims, passed = [], []
        english, language = [], []
        for text, passage, title, claim in rows:
            it = JudgeItem(Segment(0, 0, len(text), text),
                           (Evidence(0, "p", title, passage, None),), None, text, lang,
                           "contexts")
            a = offline.analyse(it, lang) if told else offline.analyse(it)
            claims.append(claim)
            passed.append(offline.decide(it, a).label == "factual")
            if cuts is not None:
                english.append(offline.decide(it, a, cuts.contexts.value).label == "factual")
            if per_language:
                cut = offline.item_cut(cuts, it).value
                language.append(offline.decide(it, a, cut).label == "factual")
        if cuts is not None:
            at_cuts[lang] = {"english": {"cut": cuts.contexts.value, **judged(claims, english)}}
            if per_language:
                cut = offline.item_cut(cuts, it)
                at_cuts[lang]["language"] = {"cut": cut.value, "source": cut.source,
                                             **judged(claims, language)}
        return judged(claims, passed)

    out: dict[str, Any] = {"told_the_language": told, "set": {}, "xnli": {},
                           "set_cuts": {}, "xnli_cuts": {}}
    for lang in args.languages:
        rows = read_set(args.set, lang)
        passages = {r["id"]: r for r in rows if r["type"] == "passage"}
        items = [(c["text"], passages[c["passage"]]["text"], passages[c["passage"]]["title"], c)
                 for c in rows if c["type"] == "claim" and args.split in ("all", c["split"])]
        out["set"][lang] = run(items, lang, out["set_cuts"])
    if with_xnli:
        for lang in XNLI_LANGUAGES:
            pairs = read_xnli(args.xnli, lang, args.xnli_pairs, args.xnli_part)
            items = [(h, p, "", {"supported": ok, "error": "contradiction"})
                     for p, h, ok in pairs]
            out["xnli"][lang] = run(items, lang, out["xnli_cuts"])
    return out


# --------------------------------------------------------------------------- report

def _p(x: Any) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def render(data: dict[str, Any]) -> str:
    supported = ", ".join(k for k, v in data["language_support"].items() if v) or "nothing"
    lines = [f"# Multilingual checks ({data['split']} split)", "",
             f"`{data['command']}`", "", f"judge `{data['judge']}`, embedder "
             f"`{data['model'] or 'default'}` (English index searched across languages: "
             f"`{data.get('cross_model') or 'same'}`), language `{data['language']}` "
             f"(taken by: {supported})", ""]
    e2e = data.get("end_to_end") or {}
    if e2e:
        header = ["language", "seg. F1", "seg. exact", "R@5 mono", "R@5 x-ling", "BA",
                  "flag rate (true)", "BA gold", "BA x-ling", "claims (true/planted)"]
        rows = []
        for lang, r in e2e.items():
            j = r["judge"]
            rows.append([
                lang, _p(r["segmentation"]["f1"]), _p(r["segmentation"]["exact"]),
                _p(r["recall@5_mono"]), _p(r.get("recall@5_cross")),
                _p(j["balanced_accuracy"]), _p(j["flag_rate_true"]),
                _p(r["judge_gold"]["balanced_accuracy"]),
                _p((r.get("judge_cross") or {}).get("balanced_accuracy")),
                f"{j['true']}/{j['planted']}",
            ])
        lines += [markdown_table(header, rows), ""]
        kinds = ("number", "date", "name", "negation")
        rows = [[lang] + [_p(r["judge"]["caught"].get(k)) for k in kinds]
                for lang, r in e2e.items()]
        lines += ["Planted errors caught, by kind (retrieval from the language's index):", "",
                  markdown_table(["language", *kinds], rows), ""]
    alone = data.get("offline_alone") or {}
    if alone:
        told = "told the language" if alone["told_the_language"] else "no language (before 39.6)"
        for name, part in (("set", "the set, own passage"), ("xnli", "XNLI")):
            res = alone.get(name) or {}
            if res:
                rows = [[lang, _p(r["balanced_accuracy"]), _p(r["flag_rate_true"])]
                        for lang, r in res.items()]
                lines += [f"The offline judge alone ({part}; {told}), at the rule's cut 0.5:",
                          "", markdown_table(["language", "BA", "flag rate (true)"], rows), ""]
            cut_res = alone.get(f"{name}_cuts") or {}
            if cut_res:
                rows = [[lang, _p(r["english"]["balanced_accuracy"]),
                         _p(r["english"]["flag_rate_true"])]
                        + ([f"{r['language']['cut']:g} ({r['language']['source']})",
                            _p(r["language"]["balanced_accuracy"]),
                            _p(r["language"]["flag_rate_true"])] if "language" in r else [])
                        for lang, r in cut_res.items()]
                header = ["language", "BA, English cut", "flagged (true), English cut"]
                if any("language" in r for r in cut_res.values()):
                    header += ["language's cut", "BA", "flagged (true)"]
                lines += [f"The offline judge alone ({part}), at the shipped cuts:", "",
                          markdown_table(header, rows), ""]
    xn = data.get("xnli") or {}
    if xn:
        langs = list(next(iter(xn.values())))
        rows = [[name] + [_p(res[lang]["balanced_accuracy"]) for lang in langs]
                for name, res in xn.items()]
        lines += [f"XNLI dev ({data['xnli_part']} part), entailment against contradiction, "
                  "balanced accuracy:", "",
                  markdown_table(["judge", *langs], rows), ""]
    elif data.get("xnli_skipped"):
        lines += [f"XNLI: skipped ({data['xnli_skipped']})", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--split", choices=("test", "dev", "all"), default="test")
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--judge", default="offline")
    parser.add_argument("--model", default=None, help="embedding model (default: ceg's)")
    parser.add_argument("--cross-model", default="multilingual",
                        help="model of the English index searched across languages, or "
                             "'same' (the monolingual English index)")
    parser.add_argument("--query", default="question+segment")
    parser.add_argument("--retrieval", default="dense")
    parser.add_argument("--language", default="off",
                        help="off (pass none), auto, or code (each set's own language)")
    parser.add_argument("--xnli", type=Path, default=None)
    parser.add_argument("--xnli-judges", default=",".join(XNLI_JUDGES))
    parser.add_argument("--xnli-pairs", type=int, default=200, help="pairs per label and language")
    parser.add_argument("--xnli-part", choices=("held", "tune", "all"), default="held",
                        help="premises held out (odd), to tune on (even), or all")
    parser.add_argument("--skip-xnli", action="store_true")
    parser.add_argument("--skip-set", action="store_true")
    parser.add_argument("--segmentation-only", action="store_true",
                        help="only the set's segmentation (no index, no judge)")
    parser.add_argument("--name", default="multilingual", help="results/NAME.json")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    results_name(args.name, "--name")
    args.languages = [x for x in args.languages.split(",") if x]
    unknown = sorted(set(args.languages) - set(LANGUAGES))
    if unknown:
        usage_error(f"--languages: {unknown[0]} is not in the set; "
                    f"choose from {','.join(LANGUAGES)}")
    args.xnli_judges = [x for x in args.xnli_judges.split(",") if x]
    if set(args.xnli_judges) - set(XNLI_JUDGES):
        usage_error(f"--xnli-judges: choose from {','.join(XNLI_JUDGES)}")
    if args.language not in ("off", "auto", "code"):
        usage_error(f"--language {args.language}: choose off, auto or code")
    support = language_support()
    if args.language != "off" and not any(support.values()):
        usage_error(f"--language {args.language}: this checkout's ceg takes no language")
    if args.model is not None:
        import _standin

        if args.model == _standin.NAME:
            _standin.install()
    skipped = None
    if args.xnli is None:
        args.xnli = CACHE_DIR / "xnli"
    if args.skip_xnli:
        skipped = "--skip-xnli"
    elif not (args.xnli / "dev-en.tsv").is_file():
        skipped = (f"no XNLI dev files in {args.xnli}; clone GautamGupta17/MESH and give "
                   "--xnli MESH/data/xnli")
        log(f"XNLI: {skipped}")

    data: dict[str, Any] = {
        "command": command_line(), "environment": environment(), "split": args.split,
        "judge": args.judge, "model": args.model, "cross_model": args.cross_model,
        "query": args.query,
        "retrieval": args.retrieval, "language": args.language,
        "language_support": support, "xnli_pairs_per_label": args.xnli_pairs,
        "xnli_part": args.xnli_part,
    }
    if args.segmentation_only:
        data["segmentation"] = {
            lang: segmentation([r for r in read_set(args.set, lang) if r["type"] == "response"
                                and args.split in ("all", r.get("split"))],
                               language_value(args.language, lang)
                               if support["segment"] else None)
            for lang in args.languages
        }
        print(markdown_table(["language", "seg. F1", "seg. exact", "answers"],
                             [[lang, _p(r["f1"]), _p(r["exact"]), r["answers"]]
                              for lang, r in data["segmentation"].items()]))
        log(f"results: {write_results(args.name, data)}")
        return 0
    with work_dir(args.workdir, prefix="ceg-multilingual-") as work:
        if not args.skip_set:
            data["end_to_end"] = end_to_end(args, work, support)
        data["offline_alone"] = offline_alone(args, skipped is None)
        if skipped is None:
            data["xnli"] = xnli(args, work)
        else:
            data["xnli_skipped"] = skipped
    path = write_results(args.name, data)
    print(render(data))
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
