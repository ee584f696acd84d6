"""Labelled (claim, evidence) pairs from the public sets in ``shared/data/train``.

Each reader yields ``Pair``s with a binary label (1: the evidence supports the
claim, 0: it does not) and a ``group``: the source document (or claim) the pair
belongs to, so that a split by group never puts one document on both sides.

How each set's labels map to supported / not supported (written down, as the
sets differ in what "not supported" means):

=================== ======================================= ===================================
set                 supported (1)                           not supported (0)
=================== ======================================= ===================================
esnli (SNLI)        entailment                              neutral, contradiction
mnli-binary         entailment                              not_entailment
fever-nli           entailment                              not_entailment
vitaminc            SUPPORTS                                REFUTES, NOT ENOUGH INFO
scifact             entailment                              not_entailment
summedits           label 1 (consistent)                    label 0
factcheck-gpt       completely-support                      refute, irrelevant
                                                            (partially-support: left out, it
                                                            is neither)
frank               Factuality == 1 (every sentence right)  Factuality < 1
factcg              orig_label 1                            orig_label 0
begin               Fully attributable                      Not fully attributable
                                                            (Generic: left out, no claim)
citation-integrity  SUPPORT on a cited abstract             REFUTE; a cited abstract with no
                                                            label for the claim
=================== ======================================= ===================================

Groups: the premise for SNLI/MultiNLI (three hypotheses share one), the claim
for FEVER (as the data README says), the Wikipedia page for VitaminC, the
document for the summary sets, the claim for Factcheck-GPT, the knowledge
snippet for BEGIN, the abstract for Citation-Integrity and SciFact.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Pair", "SOURCES", "read_source", "split_of"]


@dataclass(frozen=True)
class Pair:
    source: str
    group: str
    claim: str
    evidence: str
    label: int  # 1 supported, 0 not
    kind: str = ""  # for synthetic pairs: the perturbation ("" for real data)


def _h(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def split_of(group: str, val_share: float = 0.15) -> str:
    """``"val"`` or ``"train"`` by a hash of the group: stable across runs and machines."""
    x = int(hashlib.sha1(f"split:{group}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "val" if x < val_share else "train"


_DETOK = [
    (re.compile(r" ([.,;:!?%)\]'])"), r"\1"),
    (re.compile(r"([(\[$]) "), r"\1"),
    (re.compile(r" (n't|'s|'re|'ve|'ll|'d|'m)\b"), r"\1"),
    (re.compile(r"`` | ''"), '"'),
    (re.compile(r"-LRB- ?|-RRB- ?"), ""),
]


def _detok(text: str) -> str:
    """Undo PTB-style tokenization ("Edmonds , Tracey") so pairs read like prose."""
    for pattern, repl in _DETOK:
        text = pattern.sub(repl, text)
    return text.strip()


def _esnli(root: Path) -> Iterator[Pair]:
    for part in ("dev", "test"):
        d = root / "esnli"
        with (
            (d / f"s1.{part}").open(encoding="utf-8") as s1,
            (d / f"s2.{part}").open(encoding="utf-8") as s2,
            (d / f"labels.{part}").open(encoding="utf-8") as lab,
        ):
            for p, h, y in zip(s1, s2, lab):
                p, h, y = _detok(p), _detok(h), y.strip()
                if p and h and y:
                    yield Pair("esnli", "snli:" + _h(p), h, p, int(y == "entailment"))


def _mnli(root: Path) -> Iterator[Pair]:
    for part in ("dev.txt", "test.txt"):
        with (root / "mnli-binary" / part).open(encoding="utf-8") as f:
            for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                if len(row) != 3 or row[0] not in ("entailment", "not_entailment"):
                    continue
                y, p, h = row
                if p.strip() and h.strip():
                    yield Pair(
                        "mnli", "mnli:" + _h(p), h.strip(), p.strip(), int(y == "entailment")
                    )


def _fever_nli(root: Path) -> Iterator[Pair]:
    d = root / "fever-nli"
    with (
        (d / "dev.raw.input0").open(encoding="utf-8") as ev,
        (d / "dev.raw.input1").open(encoding="utf-8") as cl,
        (d / "dev.label").open(encoding="utf-8") as lab,
    ):
        for e, c, y in zip(ev, cl, lab):
            e, c = _detok(e), _detok(c)
            if e and c:
                yield Pair("fever-nli", "fever:" + _h(c), c, e, int(y.strip() == "entailment"))


def _vitaminc(root: Path) -> Iterator[Pair]:
    for part in ("real-test.jsonl", "synthetic-test.jsonl"):
        with (root / "vitaminc" / part).open(encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                c, e = _detok(str(r.get("claim") or "")), _detok(str(r.get("evidence") or ""))
                if c and e:
                    group = "vitaminc:" + str(r.get("page") or r.get("case_id"))
                    yield Pair("vitaminc", group, c, e, int(r.get("label") == "SUPPORTS"))


def _scifact(root: Path) -> Iterator[Pair]:
    for part in ("train.tsv", "dev.tsv"):
        with (root / "scifact" / part).open(encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                e, c = (row.get("sentence1") or "").strip(), (row.get("sentence2") or "").strip()
                if e and c:
                    y = int(row.get("entailment") == "entailment")
                    yield Pair("scifact", "scifact:" + _h(e[:200]), c, e, y)


def _summedits(root: Path) -> Iterator[Pair]:
    for path in sorted((root / "summedits").glob("summedits_*.json")):
        for r in json.loads(path.read_text(encoding="utf-8")):
            doc, summ = str(r.get("doc") or ""), str(r.get("summary") or "")
            if doc.strip() and summ.strip() and r.get("label") in (0, 1):
                yield Pair("summedits", "summedits:" + _h(doc), summ.strip(), doc, int(r["label"]))


def _factcheck_gpt(root: Path) -> Iterator[Pair]:
    path = root / "factcheck-gpt" / "subtask3_claim_evidence_stance.jsonl"
    with path.open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            stance = r.get("stance")
            if stance not in ("completely-support", "refute", "irrelevant"):
                continue
            c, e = str(r.get("claim") or "").strip(), str(r.get("evidence") or "").strip()
            if c and e:
                y = int(stance == "completely-support")
                yield Pair("factcheck-gpt", "fcgpt:" + _h(c), c, e, y)


def _frank(root: Path) -> Iterator[Pair]:
    d = root / "frank"
    articles: dict[str, dict[str, object]] = {}
    for r in json.loads((d / "human_annotations.json").read_text(encoding="utf-8")):
        h, model = str(r["hash"]), str(r["model_name"])
        if h not in articles:
            path = d / "articles" / f"{h}.json"
            if not path.exists():
                continue
            articles[h] = json.loads(path.read_text(encoding="utf-8"))
        art = articles[h]
        summary, article = art.get(model), art.get("article")
        if not isinstance(summary, str) or not isinstance(article, str) or not summary.strip():
            continue
        y = int(float(r["Factuality"]) >= 1.0)
        yield Pair("frank", "frank:" + h, summary.strip(), article, y)


def _factcg(root: Path) -> Iterator[Pair]:
    with (root / "factcg" / "CG2C_doc.json").open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            doc, claims = str(r.get("text_a") or ""), r.get("text_b") or []
            claim = claims[0] if isinstance(claims, list) and claims else str(claims)
            if doc.strip() and str(claim).strip() and r.get("orig_label") in (0, 1):
                yield Pair("factcg", "factcg:" + _h(doc), str(claim), doc, int(r["orig_label"]))


def _begin(root: Path) -> Iterator[Pair]:
    for path in sorted((root / "begin").glob("begin_*.tsv")):
        with path.open(encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                lab = (row.get("begin_label") or "").strip()
                if lab not in ("Fully attributable", "Not fully attributable"):
                    continue
                k, resp = (row.get("knowledge") or "").strip(), (row.get("response") or "").strip()
                if k and resp:
                    y = int(lab == "Fully attributable")
                    yield Pair("begin", "begin:" + _h(k), resp, k, y)


# Citation markers in the claims: "[<|cit|>]", "[<|cit|>, <|other_cit|>]", "(<|cit|>)", "<|cit|>".
_CITATION = re.compile(r"\s*[\[(]?(?:<\|[a-z_]+\|>[\s,;–-]*\d*[\s,;–-]*)+[\])]?")


def _citation_integrity(root: Path) -> Iterator[Pair]:
    d = root / "citation-integrity"
    corpus: dict[str, str] = {}
    with (d / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            corpus[str(r["doc_id"])] = " ".join(r.get("abstract") or [])
    for part in ("train", "dev", "test"):
        with (d / f"claims_{part}.jsonl").open(encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                claim = _CITATION.sub("", str(r.get("claim") or "")).strip()
                evidence = r.get("evidence") or {}
                for doc_id in r.get("cited_doc_ids") or []:
                    abstract = corpus.get(str(doc_id))
                    if not claim or not abstract:
                        continue
                    labels = [e.get("label") for e in evidence.get(str(doc_id), [])]
                    y = int(bool(labels) and all(lab == "SUPPORT" for lab in labels))
                    yield Pair("citation-integrity", f"citint:{doc_id}", claim, abstract, y)


SOURCES: dict[str, Callable[[Path], Iterator[Pair]]] = {
    "esnli": _esnli,
    "mnli": _mnli,
    "fever-nli": _fever_nli,
    "vitaminc": _vitaminc,
    "scifact": _scifact,
    "summedits": _summedits,
    "factcheck-gpt": _factcheck_gpt,
    "frank": _frank,
    "factcg": _factcg,
    "begin": _begin,
    "citation-integrity": _citation_integrity,
}


def read_source(name: str, root: Path) -> Iterator[Pair]:
    """The pairs of one set under ``root`` (the ``train/`` folder of the shared data)."""
    return SOURCES[name](root)
