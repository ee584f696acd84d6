"""Where the offline judge cannot decide, per language, and what a run says about it.

The offline judge's score tells a number or a name the evidence lacks (under 0.5) and
a sentence all but copied from its evidence (near 1) apart; between them, for each
language, is a band of scores where, on the dev data its cuts were chosen on (XNLI's
tune part and the article pairs' dev part, ``benchmarks/languages/language_cuts.py``), a true
segment and a wrong one are about as likely (the odds of a true one within 1.5 of
even, each class weighing the same): there the judge is at chance (issue 58 item 4).
The bands are shipped in ``thresholds.json`` (``bands``: ``{"de": [0.65, 0.75]}``).

A run counts the segments the offline judge decided by its lexical score (supported or
not enough evidence, not across languages) that fall in their language's band; when
most of them do, the run says so in one line with what reads meaning instead:
``--judge cascade:nli:mdeberta-v3-base-xnli``, which hands exactly those segments to a
multilingual NLI model fetched once by ``ceg models pull``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ..cuts import read_thresholds_file

#: The key of the bands in ``thresholds.json``.
KEY = "bands"
#: Share of a run's segments in their band from which the run suggests the cascade, and
#: the fewest segments that say anything.
MOST = 0.5
MIN_SEGMENTS = 10
CASCADE = "cascade:nli:mdeberta-v3-base-xnli"
PULL = "ceg models pull mdeberta-v3-base-xnli"
_DECIDED = frozenset({"supported", "not_enough_evidence"})


def load_bands(path: Path) -> dict[str, tuple[float, float]]:
    """The bands in the thresholds file ``path`` (none: empty); a bad one is refused in
    one line naming the file and the field."""
    raw = read_thresholds_file(path)
    given = raw.get(KEY, {}) if isinstance(raw, dict) else {}
    if not isinstance(given, dict):
        raise UsageError(f"{path}: field '{KEY}' is {given!r}; an object of [low, high] "
                         "score bands is expected")
    out = {}
    for lang, band in given.items():
        ok = (isinstance(band, list) and len(band) == 2
              and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in band)
              and 0 <= band[0] < band[1] <= 1)
        if not ok:
            raise UsageError(f"{path}: field '{KEY}.{lang}' is {band!r}; [low, high] with "
                             "0 <= low < high <= 1 is expected")
        out[str(lang)] = (float(band[0]), float(band[1]))
    return out


class Undecided:
    """Counts, over a run's records, the offline judge's segments in their language's
    band (``add``), and says when most are (``advice``)."""

    def __init__(self, bands: Mapping[str, tuple[float, float]]) -> None:
        self.bands = dict(bands)
        self.seen = 0
        self.inside = 0
        self.by_language: dict[str, list[int]] = {}

    def add(self, record: Mapping[str, Any]) -> None:
        judge = record.get("judge") or {}
        if not isinstance(judge, Mapping) or judge.get("name") != "offline":
            return
        from ...lang import base_language

        language = base_language(str(record.get("language") or "en"))
        band = self.bands.get(language)
        for seg in record.get("segments") or ():
            score = seg.get("score")
            if (seg.get("verdict") not in _DECIDED or not isinstance(score, (int, float))
                    or str(seg.get("reason", "")).startswith("across languages")):
                continue
            self.seen += 1
            counts = self.by_language.setdefault(language, [0, 0])
            counts[0] += 1
            if band is not None and band[0] <= score < band[1]:
                self.inside += 1
                counts[1] += 1

    @property
    def share(self) -> float | None:
        return self.inside / self.seen if self.seen else None

    def advice(self) -> str | None:
        """One line where most of the run's segments are in their band, else None."""
        share = self.share
        if share is None or self.seen < MIN_SEGMENTS or share <= MOST:
            return None
        where = ", ".join(
            f"{lang} {self.bands[lang][0]:g}-{self.bands[lang][1]:g}"
            for lang, (_, inside) in sorted(self.by_language.items(), key=lambda kv: -kv[1][1])
            if inside and lang in self.bands)
        return (f"--judge offline could not tell {self.inside} of {self.seen} segments "
                f"({share:.0%}): their score is in the band where it is at chance for their "
                f"language ({where}); a judge that reads meaning decides those: --judge "
                f"{CASCADE} (after {PULL})")


def for_judge(name: str) -> Undecided | None:
    """The counter for a run of the judge ``name``: the offline judge's, with the shipped
    bands; None for any other judge (the cascade already hands the band on)."""
    if name != "offline":
        return None
    from .offline import SHIPPED

    return Undecided(load_bands(SHIPPED / "thresholds.json"))
