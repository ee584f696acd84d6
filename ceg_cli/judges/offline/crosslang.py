"""A warning, once, when the offline judge reads evidence in another language.

The offline judge counts a segment's words in its evidence. A German sentence
checked against English passages shares its names and numbers with them and
little else, so at the shipped cut (fitted on evidence in the segment's own
language) its true sentences were flagged for words no English passage can hold.
The segments it flags are now decided across languages by ``crossrule`` (numbers,
names and a multilingual embedder's cosine); the first segment whose evidence is
in another language is said once, naming what was compared, or, where the
rule is off (its embedder does not load here), that only names and numbers are
compared, why, and what to do: decide on names and numbers alone
(``--judge-threshold 0.5``, the rule's own cut) or use a judge that reads both
languages. Nothing is said where the cut is already the rule's.

The segment's language is its item's (the record's, as the check gave it, from
the whole answer), else detected; the evidence's is detected passage by passage,
on the passages its verdict cites (else its first ``EVIDENCE_PASSAGES``), and it
is in another language only where none of them is in the segment's: an index of
several languages raises no alarm for a segment that has evidence in its own.
Only a sure detection counts (by script, or from enough letters at a
high confidence), so a passage of names and numbers, or a short segment of
English the detector takes for Uzbek, says nothing. The evidence of a language's
first ``FIRST_READ`` segments is read, then of one in ``SAMPLE_EVERY``: the check
costs about 2 % of the judge's time in a long run of one language.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from ...lang import UNDETERMINED, base_language, detect, language_name
from ..cuts import Cuts
from ..english_only import ADVICE, given_language
from ..once import SayOnce

#: Passages read to tell the evidence's language where a verdict cites none, and how
#: sure the detector must be.
EVIDENCE_PASSAGES = 2
MIN_CONFIDENCE = 0.95
MIN_LETTERS = 60
#: Segments of each language whose evidence is read, then one in ``SAMPLE_EVERY``: a
#: detection costs about twice the judge's own time a segment, and a language mismatch
#: (an index in one language, answers in another) shows in a language's first segments.
FIRST_READ = 32
SAMPLE_EVERY = 64


def sure_language(text: str) -> str | None:
    """The language of ``text`` where the detector is sure of it: by its script, or from
    ``MIN_LETTERS`` letters at ``MIN_CONFIDENCE``."""
    found = detect(text)
    if found.method == "fallback" or base_language(found.language) == UNDETERMINED:
        return None
    if found.method == "detector" and (found.confidence < MIN_CONFIDENCE
                                       or found.letters < MIN_LETTERS):
        return None
    return found.language


@lru_cache(maxsize=4096)
def passage_language(text: str) -> str | None:
    """``sure_language`` of a passage, remembered: the same passages come back for the
    segments of one answer."""
    return sure_language(text)


def segment_language(item: Any) -> str | None:
    """The language of ``item``'s segment: its record's, as the check gave it (detected on
    the whole answer), else the segment's own where the detector is sure of it."""
    return given_language(item) or sure_language(item.segment.text)


def evidence_language(item: Any, segment: str, cited: Sequence[int] = ()) -> str | None:
    """The language of ``item``'s evidence where it is not ``segment``'s: each passage
    it cites (``cited``, else its first ``EVIDENCE_PASSAGES``) read on its own; None if
    any is surely in ``segment``'s language, or none is surely in another."""
    passages = ([item.evidence[i] for i in cited] if cited
                else item.evidence[:EVIDENCE_PASSAGES])
    other = None
    for passage in passages:
        found = passage_language(passage.text)
        if found is None:
            continue
        if base_language(found) == base_language(segment):
            return None
        other = other or found
    return other


class CrossLanguage:
    """Warns once (``on_warning``, else a ``RuntimeWarning``) on the first segment whose
    evidence is in another language, where the cut of its setting is above ``rule_cut``."""

    def __init__(self, cuts: Cuts, rule_cut: float,
                 on_warning: Callable[[str], None] | None = None,
                 rule: Any = None) -> None:  # a crossrule.CrossRule (it imports this module)
        self.cuts = cuts
        self.rule_cut = rule_cut
        #: The rule that decides the flagged segments across languages (``crossrule``).
        self.rule = rule
        self.once = SayOnce(on_warning)
        self._lock = threading.Lock()
        #: Segments seen, by language.
        self._seen: dict[str, int] = {}

    def check(self, items: Sequence[Any], verdicts: Sequence[Any] | None = None) -> None:
        """``verdicts``, one per item, name the passages each used (``cited``)."""
        for n, item in enumerate(items):
            if self.once.said:
                return
            if not item.evidence or max(self._cuts()) <= self.rule_cut:
                continue
            segment = segment_language(item)
            if segment is None:
                continue
            # The cut the segment is decided at: its language's where it has one.
            cut = self.cuts.for_language(item.setting, segment,
                                         item.response or item.segment.text).value
            if cut <= self.rule_cut or not self._read(base_language(segment)):
                continue
            cited = verdicts[n].cited if verdicts is not None else ()
            evidence = evidence_language(item, segment, cited)
            if evidence is None:
                continue
            said = (f"--judge offline: segments in {language_name(segment)} ({segment}) have "
                    f"evidence in {language_name(evidence)} ({evidence}); ")
            rule = self.rule
            if rule is not None and rule.cut is not None and rule.unavailable is None:
                said += (f"across languages it compares their numbers and names, and the "
                         f"meaning: {rule.cut.model}'s cosine between the segment and its best "
                         f"evidence sentence, which must reach {rule.cut.value:g} "
                         f"({rule.cut.source}); a month or a negation that one says and the "
                         f"other does not flags it; a surer judge that reads both languages: "
                         f"{ADVICE}")
            else:
                said += (f"across languages it compares only names and numbers, so at its cut "
                         f"{cut:g} true sentences with other words are flagged: "
                         f"--judge-threshold {self.rule_cut:g} decides on names and numbers "
                         f"alone, or use {ADVICE}")
                if rule is not None and rule.unavailable is not None:
                    said += f" (the cross-language rule is off: {rule.unavailable})"
            self.once.say(said, stacklevel=3)  # the judge's caller
            return

    def _cuts(self) -> list[float]:
        """Every cut the judge may decide at."""
        c = self.cuts
        return [c.index.value, c.contexts.value, *(x.value for x in c.languages.values()),
                *(x.value for x in c.scripts.values())]

    def _read(self, language: str) -> bool:
        """Whether this segment's evidence is read: the first ``FIRST_READ`` of its
        language, then one in ``SAMPLE_EVERY``."""
        with self._lock:
            seen = self._seen.get(language, 0)
            self._seen[language] = seen + 1
        return seen < FIRST_READ or (seen - FIRST_READ) % SAMPLE_EVERY == 0
