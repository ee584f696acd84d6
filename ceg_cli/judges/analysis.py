"""What the offline judge measures of a segment against its evidence (``Analysis``),
made by ``offline.analyse`` and read by ``offline.decide`` and ``reasons``.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        return sum(self.covered) / len(self.covered) if self.covered else 1.0

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
