"""Synthetic verifier pairs from a corpus: what chatbots get wrong, made on purpose.

From each passage of a corpus (the enwiki sample, or a user's own index) one
sentence with a factual claim is taken, and pairs are made against evidence:

supported (label 1)
  ``original``   the sentence against its own passage;
  ``shortened``  the sentence cut before a trailing clause (", which ...",
                 "; ..."): fewer facts, still all in the passage.

not supported (label 0)
  ``number``     one number changed (a year by a few years, another value by a
                 factor or a digit), to one the passage does not hold;
  ``name``       one name replaced by a name of the same length in words taken
                 from another document of the corpus;
  ``swap``       two names of the sentence exchanged ("A defeated B" -> "B
                 defeated A");
  ``negation``   "not" added after the first auxiliary verb, or removed;
  ``elsewhere``  the sentence against another passage of its own document
                 (same topic, other facts: the usual retrieval miss);
  ``neighbour``  a sentence of another document against this passage.

Paraphrases that keep the facts would need a language model and are not made.
The generator is deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..claims import has_claim
from ..judges.offline.offline import specifics, tokenize
from ..sentences import sentence_spans
from .sources import Pair

__all__ = [
    "KINDS",
    "NUMBER",
    "Passage",
    "by_document",
    "claim_sentence",
    "make_pairs",
    "names_in",
]

KINDS = ("original", "shortened", "number", "name", "swap", "negation", "elsewhere", "neighbour")
NEGATIVE_KINDS = frozenset(KINDS[2:])

_AUX = re.compile(
    r"\b(is|was|are|were|has|had|have|can|could|will|would|did|does|do|should|may|might)\b"
)
_NEGATED = re.compile(
    r"\b(is|was|are|were|has|had|have|can|could|will|would|did|does|do)"
    r"( not|n't)\b"
)
#: A number as a sentence writes it: "1,000", "1908", "3.5" (not inside a word or a code).
NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\d,])|(?<![\w.,])\d+(?:\.\d+)?(?![\w])")
_CLAUSE = re.compile(r"(,\s+(?:which|who|where|while|although|and|but|making|including)\b|;)")


@dataclass(frozen=True)
class Passage:
    """A passage of the corpus, with the document it belongs to."""

    doc_id: str
    title: str
    text: str


def _sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in sentence_spans(text)]


def claim_sentence(p: Passage, rng: random.Random) -> str | None:
    """A sentence of ``p`` that makes a claim, 8 to 45 words, at random (None: none)."""
    cands = [
        s
        for s in _sentences(p.text)
        if 8 <= len(s.split()) <= 45 and has_claim(s) and s.rstrip()[-1:] in ".!?"
    ]
    return rng.choice(cands) if cands else None


def _change_number(sentence: str, evidence: str, rng: random.Random) -> str | None:
    matches = list(NUMBER.finditer(sentence))
    if not matches:
        return None
    m = rng.choice(matches)
    raw = m.group()
    value = float(raw.replace(",", ""))
    for _ in range(10):
        if "." not in raw and 1000 <= value <= 2100:  # a year
            new = str(int(value) + rng.choice([-1, 1]) * rng.randint(1, 12))
        elif "." in raw:
            new = f"{value * rng.choice([0.5, 0.8, 1.25, 1.5, 2, 3]):.{len(raw.split('.')[1])}f}"
        elif value < 10:
            new = str(int(value) + rng.choice([1, 2, 3]))
        else:
            new = f"{int(round(value * rng.choice([0.5, 0.7, 1.3, 1.5, 2, 3]))):,}"
            if "," not in raw:
                new = new.replace(",", "")
        if new != raw and new not in evidence:
            return sentence[: m.start()] + new + sentence[m.end() :]
    return None


def names_in(sentence: str) -> list[str]:
    """The names the offline judge finds in ``sentence``, in order."""
    return [sp.text for sp in specifics(sentence, tokenize(sentence)) if sp.kind == "name"]


def _replace_name(
    sentence: str, evidence: str, pool: Sequence[str], rng: random.Random
) -> str | None:
    names = names_in(sentence)
    if not names or not pool:
        return None
    old = rng.choice(names)
    same = [n for n in pool if len(n.split()) == len(old.split()) and n not in evidence]
    if not same:
        return None
    new = rng.choice(same)
    return sentence.replace(old, new, 1) if new != old else None


def _swap(sentence: str) -> str | None:
    names = list(dict.fromkeys(names_in(sentence)))
    if len(names) < 2:
        return None
    a, b = names[0], names[1]
    if a in b or b in a:
        return None
    marker = "\x00"
    out = sentence.replace(a, marker, 1).replace(b, a, 1).replace(marker, b, 1)
    return out if out != sentence else None


def _negate(sentence: str) -> str | None:
    m = _NEGATED.search(sentence)
    if m:
        return sentence[: m.start()] + m.group(1) + sentence[m.end() :]
    m = _AUX.search(sentence)
    if m:
        return sentence[: m.end()] + " not" + sentence[m.end() :]
    return None


def _shorten(sentence: str) -> str | None:
    m = _CLAUSE.search(sentence)
    if not m or len(sentence[: m.start()].split()) < 6:
        return None
    return sentence[: m.start()].rstrip() + "."


def make_pairs(
    passages: Iterable[Passage],
    *,
    seed: int = 0,
    source: str = "synthetic",
    per_passage: int = 3,
) -> Iterator[Pair]:
    """Pairs from ``passages`` (read in order; a document's passages must be adjacent).

    For each passage with a usable sentence: the ``original`` pair, and up to
    ``per_passage - 1`` other pairs of kinds chosen at random among those that
    apply, negatives twice as likely as ``shortened``. The group of every pair
    is its document, so a split by group keeps a document on one side.
    """
    rng = random.Random(seed)
    pool: list[str] = []  # names seen in earlier documents
    prev_sentence: str | None = None  # a sentence of the previous document
    for doc in by_document(passages):
        doc_names: list[str] = []
        for p in doc:
            sentence = claim_sentence(p, rng)
            if sentence is None:
                continue
            doc_names.extend(names_in(sentence))
            group = f"{source}:{p.doc_id}"
            yield Pair(source, group, sentence, p.text, 1, "original")
            options: list[tuple[str, str, str]] = []  # (kind, claim, evidence)
            for kind, made in (
                ("number", _change_number(sentence, p.text, rng)),
                ("name", _replace_name(sentence, p.text, pool, rng)),
                ("swap", _swap(sentence)),
                ("negation", _negate(sentence)),
            ):
                if made:
                    options.append((kind, made, p.text))
            others = [q for q in doc if q is not p and sentence not in q.text]
            if others:
                options.append(("elsewhere", sentence, rng.choice(others).text))
            if prev_sentence:
                options.append(("neighbour", prev_sentence, p.text))
            short = _shorten(sentence)
            rng.shuffle(options)
            # A changed number is what chatbots get wrong most: keep it when there is one.
            options.sort(key=lambda o: o[0] != "number")
            picked = options[: max(0, per_passage - 1 - (1 if short else 0))]
            if short and (rng.random() < 0.5 or not picked):
                picked = [("shortened", short, p.text), *picked]
            for kind, claim, evidence in picked[: per_passage - 1]:
                yield Pair(source, group, claim, evidence, int(kind == "shortened"), kind)
        if doc_names:
            pool.extend(dict.fromkeys(doc_names))
            del pool[:-5000]
        for p in reversed(doc):
            s = claim_sentence(p, rng)
            if s:
                prev_sentence = s
                break


def by_document(passages: Iterable[Passage]) -> Iterator[list[Passage]]:
    """Runs of adjacent passages of one document."""
    current: list[Passage] = []
    for p in passages:
        if current and p.doc_id != current[0].doc_id:
            yield current
            current = []
        current.append(p)
    if current:
        yield current
