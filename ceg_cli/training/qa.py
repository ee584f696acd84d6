"""Synthetic question-answer pairs from a corpus: claims shaped like a QA test set's.

A chatbot's answer to a question is often a bare value ("1908", "Lowell"),
and the claim the judge can check is the question with its answer. From one
sentence of each passage a value is taken out (a year, another number or a
name) and the sentence becomes an echo question with the value's place asked
for ("Bette Davis was born in what year?"); the claim is the question followed
by an answer, as HaluEval writes its pairs, and the evidence is the passage:

supported (label 1)
  ``qa``        the value the sentence held;

not supported (label 0)
  ``qa-other``  a value of the same kind (a year, a number, a name of as many
                words) from another document, one the passage does not hold;
  ``qa-slot``   another value of the same kind that the passage does hold,
                in another place (never one the question itself names): the
                plausible wrong answer that word overlap cannot catch.

One supported and one unsupported pair per usable passage, the negative kind
chosen at random among those that apply. The group of a pair is its document.
Deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .sources import Pair
from .synthetic import NUMBER, Passage, by_document, claim_sentence, names_in

__all__ = ["QA_KINDS", "Gap", "make_qa_pairs", "question_for"]

QA_KINDS = ("qa", "qa-other", "qa-slot")

_YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")
_WORD_AFTER = re.compile(r"\s+([a-z][a-z-]*)")
#: A value a question can stand in for: a word of its own ("1911–2007", "(BEL)"
#: and "24-year" are left alone), ended by a space or a comma, stop, colon or semicolon.
_AFTER_OK = re.compile(r"(?:[,.;:]?(?:\s|$))")


@dataclass(frozen=True)
class Gap:
    """A value of a sentence that a question can ask for."""

    start: int
    end: int
    text: str
    kind: str  # "year" | "number" | "name"

    def same_kind(self, other: str) -> bool:
        return _kind_of(other, self.kind) == self.kind and (
            self.kind != "name" or len(other.split()) == len(self.text.split())
        )


def _kind_of(value: str, hint: str) -> str:
    if _YEAR.match(value):
        return "year"
    if NUMBER.fullmatch(value):
        return "number"
    return "name" if hint == "name" else "other"


def _standalone(sentence: str, start: int, end: int) -> bool:
    return (start == 0 or sentence[start - 1] == " ") and bool(_AFTER_OK.match(sentence, end))


def _plain_name(name: str) -> bool:
    """A name worth asking for: three letters or more, not an all-capitals abbreviation."""
    return len(name) >= 3 and not name.isupper()


def gaps(sentence: str) -> list[Gap]:
    """Years, other numbers and names of ``sentence``, in order, as questions can ask them."""
    out = [Gap(m.start(), m.end(), m.group(), _kind_of(m.group(), "number"))
           for m in NUMBER.finditer(sentence) if _standalone(sentence, m.start(), m.end())]
    taken = [(g.start, g.end) for g in out]
    for name in dict.fromkeys(names_in(sentence)):
        i = sentence.find(name)
        if (i < 0 or not _plain_name(name) or not _standalone(sentence, i, i + len(name))
                or any(s < i + len(name) and i < e for s, e in taken)):
            continue
        out.append(Gap(i, i + len(name), name, "name"))
        taken.append((i, i + len(name)))
    return sorted(out, key=lambda g: g.start)


def question_for(sentence: str, gap: Gap) -> str:
    """``sentence`` as an echo question asking for ``gap``: the value's place gets a wh-word.

    A year becomes "what year", a number before a noun "how many" (else "what
    number"), a name "who or what" ("What" opening the sentence, where a name
    is the subject). The full stop becomes a question mark.
    """
    if gap.kind == "year":
        ask = "what year"
    elif gap.kind == "number":
        ask = "how many" if _WORD_AFTER.match(sentence, gap.end) else "what number"
    else:
        ask = "who or what"
    if gap.start == 0:
        ask = "What" if gap.kind == "name" else ask[0].upper() + ask[1:]
    text = sentence[: gap.start] + ask + sentence[gap.end :]
    return text.rstrip().rstrip(".!?").rstrip() + "?"


def qa_claim(question: str, answer: str) -> str:
    """The question and the answer as one claim, as HaluEval's pairs are read."""
    return f"{question} {answer}"


def make_qa_pairs(
    passages: Iterable[Passage],
    *,
    seed: int = 0,
    source: str = "synthetic-qa",
) -> Iterator[Pair]:
    """A supported and an unsupported question-answer pair from each usable passage.

    ``passages`` are read in order; a document's passages must be adjacent.
    Values for ``qa-other`` come from earlier documents only.
    """
    rng = random.Random(seed)
    seen: dict[str, list[str]] = {"year": [], "number": [], "name": []}
    for doc in by_document(passages):
        found: dict[str, list[str]] = {"year": [], "number": [], "name": []}
        for p in doc:
            sentence = claim_sentence(p, rng)
            if sentence is None:
                continue
            here = gaps(sentence)
            if not here:
                continue
            for g in here:
                found[g.kind].append(g.text)
            gap = rng.choice(here)
            question = question_for(sentence, gap)
            if gap.text in question:  # the sentence names the value twice
                continue
            group = f"{source}:{p.doc_id}"
            wrong: list[tuple[str, str]] = []
            other = [v for v in seen[gap.kind][-2000:]
                     if gap.same_kind(v) and v not in p.text and v not in question]
            if other:
                wrong.append(("qa-other", rng.choice(other)))
            slot = sorted({g.text for g in gaps(p.text)
                           if gap.same_kind(g.text)
                           and g.text not in gap.text and gap.text not in g.text
                           and g.text not in question})
            if slot:
                wrong.append(("qa-slot", rng.choice(slot)))
            if not wrong:
                continue
            yield Pair(source, group, qa_claim(question, gap.text), p.text, 1, "qa")
            kind, answer = rng.choice(wrong)
            yield Pair(source, group, qa_claim(question, answer), p.text, 0, kind)
        for kind, values in found.items():
            seen[kind].extend(dict.fromkeys(values))
            del seen[kind][:-5000]
