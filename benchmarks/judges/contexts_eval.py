"""Every shipped judge in two settings: a pooled index (as ``ceg eval`` has always run)
and each item's own documents (``ceg eval --evidence contexts``).

    .venv/bin/python benchmarks/judges/contexts_eval.py [--per-source 300] [--seed 1]
        [--judges offline,verifier] [--workdir DIR] [--ship]

Sets (all in ``shared/data``, each with its evidence attached):

- FELM world-knowledge dev (``felm/wk-dev.jsonl``): segments against the
  pooled index of every row's reference pages (``ceg eval``'s corpus index),
  or against their own row's ``ref_contents``. A test set: nothing is chosen
  on it.
- HaluEval QA dev (``halueval/qa-dev.jsonl``): both answers of each item against
  the pooled index of every item's ``knowledge``, or against their own.
- ``--per-source`` pairs (fixed seed) of each ``train/`` set that carries its
  evidence: the validation split of fever-nli, factcheck-gpt, summedits, frank,
  factcg and scifact (the shipped verifier was trained on their train split),
  and BEGIN and Citation-Integrity (held out of all training), read by
  ``ceg_cli.training`` as ``benchmarks/judges/transfer.py`` reads them. Each pair's
  claim is one labelled segment; its evidence is its one context, or one
  document of an index pooled over the sample's distinct evidence texts.

Each run goes through ``run_evaluation`` (what ``ceg eval`` runs) with the
default retrieval (top-k 5, threshold 0.35, dense, question+segment).
Reported per judge, set and setting: balanced accuracy at the protocol's cut
for the setting (fitted here, below; what ships) and at the judge's old cut
(the rule's 0.5 for the offline judge, the combiner's 0.5 for the verifier),
computed from the scores, and nonfactual AUC-PR (segments; responses for
HaluEval, plus its pairwise accuracy, which is at the cut the judge ran at:
``pairwise_accuracy_threshold``).

Thresholds per setting, leave-one-domain-out (``benchmarks/judges/transfer.py``'s
``fit_threshold`` and domains): for each train domain (encyclopedic,
summaries, llm-answers, dialogue, science) the cut on the judge's score that
maximises the mean balanced accuracy of the *other* domains is applied to it;
HaluEval (qa) and FELM (long-form) are scored, never fitted on, with the cut
fitted on all five train domains, which is also the threshold recorded for
that judge and setting. A segment is supported when its score is at least
the cut; a HaluEval answer when all its segments are.

The judges' scores on the train sets, per item, go to
``benchmarks/results/contexts_eval_scores.json`` (``--scores``): what the
cuts were fitted on, committed so that ``tests/test_thresholds.py`` re-fits
them offline and holds the shipped cuts (``ceg_cli/models/*/thresholds.json``)
to the fit; ``--ship`` writes the fitted cuts there. The file records a
digest of the verifier's model files, so a retrained verifier fails that test
until this is run again.

Results: ``benchmarks/results/contexts_eval.json``. Each (set, setting,
judge)'s scores are cached under ``benchmarks/.cache/contexts_eval/``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    SHARED_DATA,
    cache_dir,
    command_line,
    environment,
    log,
    markdown_table,
    results_name,
    work_dir,
    write_json,
    write_results,
)
from transfer import DOMAINS, balanced_accuracy, fit_threshold  # noqa: E402

from ceg_cli.training.sources import Pair  # noqa: E402

#: The train sets with evidence attached, by the domain transfer.py gives them.
SETS = {
    source: domain
    for domain, sources in DOMAINS.items()
    if domain != "nli"
    for source in sources
    if source != "vitaminc"
}
SETTINGS = ("index", "contexts")
#: Scored, never fitted on (test sets).
SCORE_ONLY = {"halueval-dev": "qa", "felm-dev": "long-form"}


def train_pairs(data: Path, per_source: int, seed: int) -> dict[str, list[Pair]]:
    """``per_source`` pairs of each set: validation split, or all of a held-out set."""
    from ceg_cli.training.dataset import HELD_OUT, held_out_pairs, load_pairs

    regular = [s for s in SETS if s not in HELD_OUT]
    out: dict[str, list[Pair]] = {s: [] for s in SETS}
    for p in load_pairs(data / "train", corpus=None, split="val",
                        caps={s: per_source for s in regular}, seed=seed):
        out[p.source].append(p)
    rng = np.random.default_rng(seed)
    for name, pairs in held_out_pairs(data / "train").items():
        if len(pairs) > per_source:
            pairs = [pairs[i] for i in sorted(rng.choice(len(pairs), per_source,
                                                         replace=False).tolist())]
        out[name] = pairs
    return out


def write_pairs(pairs: list[Pair], folder: Path, name: str) -> tuple[Path, Path]:
    """The pairs as labelled JSONL (one segment each, its evidence as its context),
    and the corpus of their distinct evidence texts for the pooled index."""
    labelled = folder / f"{name}.jsonl"
    corpus = folder / f"{name}.corpus.jsonl"
    docs: dict[str, str] = {}
    with open(labelled, "w", encoding="utf-8") as fh:
        for n, p in enumerate(pairs):
            doc = docs.setdefault(p.evidence, f"d{len(docs)}")
            claim = " ".join(p.claim.split())
            fh.write(json.dumps({
                "id": f"{name}-{n}", "response": claim,
                "segments": [{"text": claim, "label": bool(p.label)}],
                "contexts": [p.evidence], "evidence_ids": [doc],
            }, ensure_ascii=False) + "\n")
    with open(corpus, "w", encoding="utf-8") as fh:
        for text, doc in docs.items():
            fh.write(json.dumps({"id": doc, "title": "", "text": text}, ensure_ascii=False)
                     + "\n")
    return labelled, corpus


def run_one(dataset: Any, index: Any, judge: Any, setting: str, contexts: Any) -> dict[str, Any]:
    """One evaluation: the metrics, and each scored unit's gold label and score."""
    from ceg_cli.check.pipeline import CheckOptions
    from ceg_cli.eval.evaluate import run_evaluation

    options = CheckOptions(evidence=setting)
    started = time.monotonic()
    ev = run_evaluation(dataset, index if setting == "index" else None, judge, options,
                        contexts=contexts if setting == "contexts" else None)
    gold: list[int] = []
    score: list[float] = []
    unit: list[str] = []
    for ex, res in zip(dataset.examples, ev.results):
        if ex.segment_labels is not None:
            for g, s in zip(ex.segment_labels, res.segments):
                gold.append(int(g))
                score.append(s.verdict.score)
                unit.append(str(ex.input.id))
        else:  # HaluEval: an answer is as strong as its weakest segment
            gold.append(int(ex.label))
            score.append(min((s.verdict.score for s in res.segments), default=1.0))
            unit.append(str(ex.input.id))
    metrics = {k: v for k, v in ev.metrics.items() if k != "run"}
    metrics["evidence_sources"] = ev.metrics["run"]["evidence_sources"]
    metrics["seconds"] = round(time.monotonic() - started, 1)
    return {"metrics": metrics, "gold": gold, "score": score, "unit": unit}


class SharedVectors:
    """The model with a memory: a text embedded once serves both settings and every judge
    (the pooled index's passages are the contexts' passages, cut the same way)."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder
        self._seen: dict[str, np.ndarray] = {}

    def embed(self, texts: Any) -> np.ndarray:
        texts = list(texts)
        new = list(dict.fromkeys(t for t in texts if t not in self._seen))
        if new:
            self._seen.update(zip(new, self._embedder.embed(new)))
        if not texts:
            return np.zeros((0, self._embedder.dimension), dtype=np.float32)
        return np.stack([self._seen[t] for t in texts])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)


def evaluate_set(data: Any, judge: Any, setting: str, search: Any, corpus: Path | None,
                 index_dir: Path, embedder: Any) -> dict[str, Any]:
    """``run_one`` in ``setting``; the pooled index is built first when there is none."""
    from ceg_cli.eval.corpus import ensure_corpus_index
    from ceg_cli.index import open_index
    from ceg_cli.index.build.builder import BuildOptions, build_index

    if setting == "contexts":
        return run_one(data, None, judge, setting, search)
    if corpus is None:  # FELM, HaluEval: the corpus index ceg eval builds
        target, _ = ensure_corpus_index(data, index_dir, embedder=embedder)
    else:
        target = index_dir
        if not target.exists():
            build_index([corpus], target, BuildOptions(embed_text="text"), embedder=embedder)
    with open_index(target) as idx:
        idx.use_embedder(embedder)  # the model loaded once, not once per index
        return run_one(data, idx, judge, setting, None)


def cached_run(key: str, compute: Any, *args: Any) -> dict[str, Any]:
    """``compute(*args)``, from ``benchmarks/.cache/contexts_eval`` when run before."""
    path = cache_dir() / "contexts_eval" / f"{key}.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    out = compute(*args)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out), encoding="utf-8")
    tmp.replace(path)
    return out  # type: ignore[no-any-return]


def lodo(runs: dict[str, dict[str, Any]], domain_of: dict[str, str]) -> dict[str, Any]:
    """Each set scored at the cut fitted without its domain (score-only sets: all domains)."""
    y = np.concatenate([np.array(runs[s]["gold"]) for s in domain_of])
    p = np.concatenate([np.array(runs[s]["score"]) for s in domain_of])
    d = np.concatenate([np.array([domain_of[s]] * len(runs[s]["gold"])) for s in domain_of])
    per: dict[str, Any] = {}
    for name, run in runs.items():
        here = domain_of.get(name)
        fit = d != here if here is not None else np.ones(len(d), dtype=bool)
        cut = fit_threshold(p[fit], y[fit], d[fit])
        gold, score = np.array(run["gold"]), np.array(run["score"])
        per[name] = {"threshold": round(cut, 4),
                     "balanced_accuracy": round(balanced_accuracy(gold, score >= cut), 4)}
    return {"sets": per, "threshold_all_domains": round(fit_threshold(p, y, d), 4)}


#: The verifier's files that make its scores: a change to one is a new verifier.
VERIFIER_FILES = ("combiner.json", "model.safetensors", "config.json", "tokenizer.json",
                  "tokenizer_config.json")


def verifier_digest(directory: Path | None = None) -> dict[str, str]:
    """sha256 of each of the verifier's model files (default: the shipped model)."""
    from ceg_cli.judges.checkers.verifier import SHIPPED

    folder = directory or SHIPPED
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
            for name in VERIFIER_FILES if (folder / name).exists()}


def old_cut(judge: Any) -> float:
    """The cut the judge decided at before the protocol's shipped: the offline rule's
    0.5, the verifier's combiner's threshold."""
    from ceg_cli.judges.offline.offline import RULE_CUT

    combiner = getattr(judge, "combiner", None)
    return float(combiner.threshold) if combiner is not None else RULE_CUT


def scores_record(runs: dict[str, dict[str, dict[str, dict[str, Any]]]],
                  domain_of: dict[str, str]) -> dict[str, Any]:
    """Each judge's score and gold label of every train item, by setting and set: what
    the cuts are fitted on (``lodo``'s input), compact enough to commit."""
    out: dict[str, Any] = {}
    for jname, by_setting in runs.items():
        out[jname] = {
            setting: {
                name: {"domain": domain_of[name],
                       "gold": "".join(str(int(g)) for g in run["gold"]),
                       "score": [round(float(x), 4) for x in run["score"]]}
                for name, run in sets.items() if name in domain_of
            }
            for setting, sets in by_setting.items()
        }
    return out


def fit_scores(record: dict[str, Any]) -> float:
    """The protocol's cut for one judge and setting of a ``scores_record``: transfer.py's
    ``fit_threshold`` over every train set's items, rounded as the results record it."""
    y = np.concatenate([np.array([int(c) for c in s["gold"]]) for s in record.values()])
    p = np.concatenate([np.array(s["score"], dtype=float) for s in record.values()])
    d = np.concatenate([np.array([s["domain"]] * len(s["gold"])) for s in record.values()])
    return round(fit_threshold(p, y, d), 4)


def ship(fitted: dict[str, dict[str, float]]) -> None:
    """Write the fitted cuts into the shipped judges' ``thresholds.json``."""
    from ceg_cli.judges.checkers.verifier import SHIPPED as VERIFIER
    from ceg_cli.judges.cuts import THRESHOLDS_FILE
    from ceg_cli.judges.offline.offline import SHIPPED as OFFLINE

    for jname, folder in (("offline", OFFLINE), ("verifier", VERIFIER)):
        if jname not in fitted:
            continue
        path = folder / THRESHOLDS_FILE
        data = json.loads(path.read_text(encoding="utf-8"))
        data["thresholds"] = dict(fitted[jname])
        write_json(path, data)
        log(f"shipped {jname}: {fitted[jname]} in {path}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=SHARED_DATA)
    ap.add_argument("--per-source", type=int, default=300, help="pairs per train set")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--judges", default="offline,verifier")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where the labelled files and indexes go (default: a temporary folder)")
    ap.add_argument("--results", default="contexts_eval", help="results/NAME.json")
    ap.add_argument("--scores", default="contexts_eval_scores",
                    help="results/NAME.json for the per-item scores of the train sets")
    ap.add_argument("--ship", action="store_true",
                    help="write the fitted cuts into ceg_cli/models/*/thresholds.json")
    args = ap.parse_args()
    results_name(args.results)
    results_name(args.scores, "--scores")
    judge_names = [j.strip() for j in args.judges.split(",") if j.strip()]
    from ceg_cli.check.ctxsearch import DEFAULT_CONTEXT_RETRIEVAL, ContextSearch, reads_similarity
    from ceg_cli.eval.datasets import load_dataset
    from ceg_cli.index.dense.embedding import load_embedder
    from ceg_cli.judges import create_judge

    t0 = time.monotonic()
    model = load_embedder(None)
    judges = {name: create_judge(name, {"device": "cpu"}) for name in judge_names}
    runs: dict[str, dict[str, dict[str, dict[str, Any]]]] = {
        j: {s: {} for s in SETTINGS} for j in judge_names}
    sizes: dict[str, int] = {}
    with work_dir(args.workdir, prefix="ceg-contexts-eval-") as work:
        sets: list[tuple[str, Path, str | None, Path | None]] = [
            ("felm-dev", args.data / "felm" / "wk-dev.jsonl", "felm", None),
            ("halueval-dev", args.data / "halueval" / "qa-dev.jsonl", "halueval", None),
        ]
        for name, pairs in train_pairs(args.data, args.per_source, args.seed).items():
            labelled, corpus = write_pairs(pairs, work, name)
            sets.append((name, labelled, "jsonl", corpus))
        for name, path, fmt, corpus in sets:
            # One model for every judge and setting: a passage is embedded at most once.
            # A record's passages are ranked as ceg check ranks them by default (BM25),
            # and embedded only for a judge that reads similarities (the verifier).
            shared = SharedVectors(model)
            for setting in SETTINGS:
                data = load_dataset(path, fmt, own_contexts=setting == "contexts",
                                    contexts_fields=None if setting == "index" else ("contexts",))
                sizes[name] = len(data.examples)
                index_dir = work / f"{name}.index"
                for jname, judge in judges.items():
                    sample = "" if name in SCORE_ONLY else f"-{args.per_source}-{args.seed}"
                    key = f"{name}{sample}-{setting}-{jname}"
                    if setting == "contexts":  # results of another ranking are not these
                        key += f"-{DEFAULT_CONTEXT_RETRIEVAL}"
                    search = ContextSearch(
                        lambda: shared,  # noqa: B023 (used in this iteration)
                        similarity=reads_similarity(judge),
                    )

                    run = cached_run(key, evaluate_set, data, judge, setting, search,
                                     corpus, index_dir, shared)
                    m = run["metrics"]
                    part = m.get("segments") or m["responses"]
                    log(f"{name} {setting} {jname}: balanced accuracy "
                        f"{part['balanced_accuracy']:.3f}, AUC-PR nonfactual "
                        f"{part['auc_pr_nonfactual']:.3f} ({m['seconds']} s; "
                        f"{time.monotonic() - t0:.0f} s in all)")
                    runs[jname][setting][name] = run
    domain_of = {s: SETS[s] for s in SETS}
    report: dict[str, Any] = {"command": command_line(), "environment": environment(),
                              "per_source": args.per_source, "seed": args.seed,
                              "sizes": sizes, "domains": domain_of,
                              "score_only": SCORE_ONLY, "judges": {}}
    rows = []
    shipped: dict[str, dict[str, float]] = {}
    for jname in judge_names:
        report["judges"][jname] = {}
        before = old_cut(judges[jname])
        for setting in SETTINGS:
            sets_out = {}
            fitted = lodo(runs[jname][setting], domain_of)
            cut = fitted["threshold_all_domains"]
            shipped.setdefault(jname, {})[setting] = cut
            # The cut the judge ran at (what shipped when the cell was computed): the
            # metrics that depend on labels (pairwise accuracy) are at that cut.
            ran_at = judges[jname].cuts.at(setting).value
            for name, run in runs[jname][setting].items():
                m = run["metrics"]
                part = "segments" if "segments" in m else "responses"
                gold, score = np.array(run["gold"]), np.array(run["score"])
                sets_out[name] = {
                    "unit": part,
                    # At the cut of before (0.5) and at the protocol's, from the scores.
                    "old_threshold": before,
                    "balanced_accuracy_old_threshold": round(
                        balanced_accuracy(gold, score >= before), 4),
                    "threshold": cut,
                    "balanced_accuracy": round(balanced_accuracy(gold, score >= cut), 4),
                    "auc_pr_nonfactual": m[part]["auc_pr_nonfactual"],
                    "prevalence_nonfactual": m[part]["prevalence_nonfactual"],
                    "count": m[part]["count"],
                    "lodo_threshold": fitted["sets"][name]["threshold"],
                    "lodo_balanced_accuracy": fitted["sets"][name]["balanced_accuracy"],
                    "evidence_sources": m["evidence_sources"],
                    "seconds": m["seconds"],
                }
                if "pairwise" in m:
                    sets_out[name]["pairwise_accuracy"] = m["pairwise"]["accuracy"]
                    sets_out[name]["pairwise_accuracy_threshold"] = ran_at
                rows.append([jname, setting, name,
                             f"{100 * sets_out[name]['balanced_accuracy_old_threshold']:.1f}",
                             f"{100 * sets_out[name]['balanced_accuracy']:.1f}",
                             f"{100 * m[part]['auc_pr_nonfactual']:.1f}",
                             f"{100 * fitted['sets'][name]['balanced_accuracy']:.1f} "
                             f"({fitted['sets'][name]['threshold']:.3f})"])
            report["judges"][jname][setting] = {
                "sets": sets_out,
                # The cut a user of this setting would take: fitted on all train domains.
                "threshold": {"value": fitted["threshold_all_domains"], "setting": setting,
                              "fitted_on": sorted(set(domain_of.values()))},
            }
    report["seconds"] = round(time.monotonic() - t0, 1)
    write_results(args.results, report)
    scores = {"command": report["command"], "environment": report["environment"],
              "per_source": args.per_source, "seed": args.seed,
              "fit": "transfer.py's fit_threshold(score, gold, domain) over every set of a "
                     "judge and setting, rounded to 4 places (contexts_eval.fit_scores)",
              "verifier_model": verifier_digest() if "verifier" in judge_names else None,
              "judges": scores_record(runs, domain_of)}
    write_results(args.scores, scores)
    if args.ship:
        ship(shipped)
    print(markdown_table(["judge", "setting", "set", "balanced accuracy at the old cut",
                          "at the protocol's cut", "AUC-PR nonfactual",
                          "balanced accuracy at LODO cut (cut)"], rows))
    print(f"\nFitted on all train domains: {shipped}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
