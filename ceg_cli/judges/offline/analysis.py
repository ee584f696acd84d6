"""What the offline judge measures of a segment against its evidence (``Analysis``),
made by ``offline.analyse`` and read by ``offline.decide`` and ``reasons``.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, replace
from functools import partial

from ...types import JudgeItem
from .langwords import Specific, Token


@dataclass(frozen=True)
class Analysis:
    """The measurements a verdict is made from."""

    content: tuple[Token, ...]  # distinct content words and numbers of the segment
    covered: tuple[bool, ...]  # each found in some passage (of the one document: passage_docs)
    specifics: tuple[Specific, ...]
    found: tuple[tuple[int, ...], ...]  # for each specific, the passages containing it
    hints: tuple[tuple[Specific, str, str], ...]  # (missing number, evidence number, shared word)
    passage_keys: tuple[frozenset[str], ...]
    #: The segment as read (layout cleaned), for quoting what is missing.
    text: str = ""
    #: (found, total) units of coverage where they are not the content words: the
    #: characters of text read in pairs of them (``_units``).
    units: tuple[int, int] | None = None
    #: For each content word, whether it counts toward coverage; None: every one (the
    #: English rules). In other languages a number or a name is checked (it must be in
    #: one passage), not counted as a word: "1930 lebten dort 330 Katzen." is two
    #: words, not four of which two are found (issue 60 item 2).
    counted: tuple[bool, ...] | None = None
    #: The document of each passage where the specifics must be found in one document's
    #: passages (the index setting); empty: anywhere in the evidence (a record's contexts).
    passage_docs: tuple[str, ...] = ()
    #: Content word keys in the evidence but not in the one document ``covered`` was
    #: counted in (``passage_docs``: the document holding the most of the segment).
    elsewhere: tuple[str, ...] = ()

    @property
    def coverage(self) -> float:
        """Share of the content words found in the evidence (1.0 if there are none)."""
        if self.units is not None and self.units[1]:
            return self.units[0] / self.units[1]
        found, total = self.words
        return found / total if total else 1.0

    @property
    def words(self) -> tuple[int, int]:
        """(found, total) of the content words that count toward coverage."""
        if self.counted is None:
            return sum(self.covered), len(self.covered)
        pairs = [c for c, k in zip(self.covered, self.counted) if k]
        return sum(pairs), len(pairs)

    @property
    def specifics_found(self) -> float:
        """Share of the specifics found, each in one passage (1.0 if there are none)."""
        return sum(1 for f in self.found if f) / len(self.found) if self.found else 1.0

    @property
    def together(self) -> bool:
        """Whether the passages of one document hold every specific found (always, when
        ``passage_docs`` is empty or nothing was found)."""
        found = [f for f in self.found if f]
        if not found or not self.passage_docs:
            return True
        held = [{self.passage_docs[p] for p in f} for f in found]
        return bool(set.intersection(*held))

    @property
    def specifics_together(self) -> float:
        """Share of the specifics found in the passages of the one document holding the
        most of them (``specifics_found`` when ``passage_docs`` is empty)."""
        if not self.found or not self.passage_docs:
            return self.specifics_found
        docs = set(self.passage_docs)
        best = max(sum(1 for f in self.found if any(self.passage_docs[p] == d for p in f))
                   for d in docs)
        return best / len(self.found)

    @property
    def missing(self) -> list[Specific]:
        return [s for s, f in zip(self.specifics, self.found) if not f]


def composed(item: JudgeItem) -> JudgeItem:
    """``item`` with its segment's and passages' text in NFC, so that no verdict depends on
    the Unicode form ("Mu\u0308nchen" is "M\u00fcnchen"). The judge's verdicts carry no
    offsets: the record's offsets still point into the text the user gave."""
    texts = [item.segment.text, *(t for e in item.evidence for t in (e.text, e.title))]
    if all(unicodedata.is_normalized("NFC", t) for t in texts):
        return item
    nfc = partial(unicodedata.normalize, "NFC")
    return replace(
        item, segment=replace(item.segment, text=nfc(item.segment.text)),
        evidence=tuple(replace(e, text=nfc(e.text), title=nfc(e.title)) for e in item.evidence),
    )
