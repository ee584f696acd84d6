"""The offline judge's rule for evidence in another language than the segment's.

The offline judge counts a segment's words in its evidence; a German sentence
checked against English passages shares its names and numbers with them and
little else, so its true sentences were flagged. Across languages the judge
therefore decides on what can be compared:

- **numbers and names**: every number of the segment, and every name written in
  a script the evidence writes (a Latin name is not asked of Russian evidence,
  which may hold it transliterated), must be found in the evidence, as the
  lexical rule finds them (``offline.analyse``);
- **meaning**: the cosine, by the packaged multilingual embedder
  ``thresholds.json`` names (``multilingual-e5-small-q4``: on XNLI it separated
  paraphrases from the rest better than ``use-multilingual-v3`` in each of its 14
  languages, docs/measurements.md), between the
  segment and its best evidence sentence must reach the cut fitted by the
  protocol on XNLI dev's parallel pairs, premise in one language and hypothesis
  in another (``benchmarks/languages/crosslang_cuts.py --ship``; re-fitted by
  ``tests/test_crosslang_cuts.py``).

Before the cosine decides, the checks a cosine cannot make (``crosschecks``): a
month named beside a number must be one the evidence names, and the segment and
its closest evidence sentence must agree in negation (each read with its own
language's negation words): a contradiction that keeps the topic ("nicht
fertiggestellt" against "was completed": cosine 0.90) is flagged (issue 58 item 3).

A segment with all of these is supported, citing the passage of its best sentence and
those holding its numbers and names; any other is flagged, its reason naming
what was compared, its score under its cut. The rule decides every segment whose
evidence is surely in another language (``crosslang.evidence_language``, every
passage read), whatever the lexical rule said: the words a segment shares with
evidence in another language are its names and numbers, which the rule checks,
and cognates, which prove nothing ("1930 lebten dort 330 Katzen." reached the
German cut on its two numbers; issue 60 item 2). A segment with evidence in its
own language is decided as before.

The embedder is loaded on the first such segment, once, from its package (its
weights ship inside it; nothing downloads). Where it cannot be loaded, the
verdicts are the lexical rule's, and the cross-language warning says why.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...types import FACTUAL, NONFACTUAL, NOT_ENOUGH_EVIDENCE, SUPPORTED, Verdict
from ..cuts import read_thresholds_file
from .analysis import composed
from .crosschecks import is_month, is_month_number, missing_months, negated

#: The key of the rule's cut in ``thresholds.json``.
KEY = "crosslang"
#: At most this many passages' sentences are embedded for one segment, and sentences.
MAX_PASSAGES = 8
MAX_SENTENCES = 64
#: The lexical rule's own cut (``offline.RULE_CUT``): under it a number or a name is missing.
RULE_CUT = 0.5
#: Sentence vectors kept between segments (about 1.5 kB each).
CACHED_VECTORS = 8192


@dataclass(frozen=True)
class CrossCut:
    """The cosine a cross-language segment needs, the embedder it is measured with,
    and where the number came from."""

    value: float
    model: str
    source: str

    def describe(self) -> str:
        return f"{self.model} cosine {self.value:g} ({self.source})"


def load_cross_cut(path: Path) -> CrossCut | None:
    """The rule's cut in the thresholds file ``path`` (``{"crosslang": {"cosine": 0.5,
    "model": "use-multilingual-v3", ...}}``), None where the file has none; a bad
    field is refused in one line naming the file and the field."""
    raw = read_thresholds_file(path)
    given = raw.get(KEY) if isinstance(raw, dict) else None
    if given is None:
        return None
    if not isinstance(given, dict):
        raise UsageError(f"{path}: field '{KEY}' is {given!r}; an object with 'cosine' and "
                         "'model' is expected")
    value = given.get("cosine")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise UsageError(f"{path}: field '{KEY}.cosine' is {value!r}; a number from 0 to 1 "
                         "is expected")
    from ...index.dense.packaged import packaged_model

    model = given.get("model")
    if not isinstance(model, str) or packaged_model(model) is None:
        raise UsageError(f"{path}: field '{KEY}.model' is {model!r}; a packaged multilingual "
                         "embedder (use-multilingual-v3, multilingual-e5-small-q4) is expected")
    return CrossCut(float(value), packaged_model(model).name,  # type: ignore[union-attr]
                    f"{raw.get('source', 'protocol')}, XNLI across languages")


def scripts_of(texts: Sequence[str]) -> frozenset[str]:
    """The scripts ``texts`` write words in (two letters or more of one)."""
    from ...lang.script import script_counts

    counts: dict[str, int] = {}
    for text in texts:
        for script, n in script_counts(text).items():
            counts[script] = counts.get(script, 0) + n
    return frozenset(s for s, n in counts.items() if n >= 2)


def names_and_numbers(analysis: Any, evidence: Sequence[Any],
                      language: str | None = None) -> tuple[list[Any], list[Any]]:
    """The specifics of ``analysis`` (``offline.analyse``) asked of evidence in another
    language, and those of them not found: every number, and each name written in a
    script the evidence writes, but a month in the segment's ``language`` ("31 Mart
    1889", "1889年5月"), which is compared as a month (``crosschecks``)."""
    from ...lang import dominant_script

    written = scripts_of([t for e in evidence for t in (e.text, e.title or "")])
    asked, missing = [], []
    for spec, where in zip(analysis.specifics, analysis.found):
        if spec.kind != "number" and dominant_script(spec.text) not in written:
            continue
        if spec.kind == "name" and all(is_month(w, language) for w in spec.text.split()):
            continue
        if spec.kind == "number" and is_month_number(spec.text, analysis.text, language):
            continue
        asked.append(spec)
        if not where:
            missing.append(spec)
    return asked, missing


_NUMBER = re.compile(r"\d+(?:[.,\u066b\u066c]\d+)*")


def without_numbers(text: str) -> str:
    """``text`` without its numbers, for the cosine: they are checked one by one (each
    must be found), and two shared numbers lift e5's cosine of unrelated sentences over
    the cut ("1930 lebten dort 330 Katzen." against "It is 330 metres tall ... until
    1930": 0.82 to 0.85 in de ar ru tr with them, 0.77 to 0.78 without; issue 60 item 2).
    Text that is nothing but numbers is kept whole."""
    out = _NUMBER.sub("", text)
    return out if any(ch.isalpha() for ch in out) else text


def evidence_sentences(item: Any, language: str | None) -> list[tuple[int, str]]:
    """(passage index, sentence) of the item's evidence, split as ceg splits text in
    ``language``."""
    from ...sentences import sentence_spans

    out: list[tuple[int, str]] = []
    for i, passage in enumerate(item.evidence[:MAX_PASSAGES]):
        for start, end in sentence_spans(passage.text, language):
            out.append((i, passage.text[start:end]))
            if len(out) >= MAX_SENTENCES:
                return out
    return out


def cosines(embedder: Any, segment: str, sentences: Sequence[str],
            cache: dict[str, Any] | None = None) -> list[float]:
    """The cosine of ``segment`` with each of ``sentences`` (the packaged embedders'
    rows are L2-normalized; e5 reads both sides as a query, its authors' way for
    symmetric similarity). ``cache``: vectors by text, read and filled (the same
    passages come back for the segments of an answer)."""
    import numpy as np

    embed = getattr(embedder, "embed_queries", None) or embedder.embed
    texts = [segment, *sentences]
    # Read once from the cache (another thread may clear it), then fill it.
    local = {t: v for t in dict.fromkeys(texts)
             if (v := (cache.get(t) if cache is not None else None)) is not None}
    todo = [t for t in dict.fromkeys(texts) if t not in local]
    if todo:
        new = dict(zip(todo, embed(todo)))
        local.update(new)
        if cache is not None:
            if len(cache) + len(new) > CACHED_VECTORS:
                cache.clear()
            cache.update(new)
    vectors = np.stack([local[t] for t in texts])
    return [float(x) for x in vectors[1:] @ vectors[0]]


def _named(specs: Sequence[Any]) -> str:
    from .reasons import MAX_NAMED

    shown = [f"'{s.text}'" for s in specs[:MAX_NAMED]]
    if len(specs) > MAX_NAMED:
        shown.append(f"{len(specs) - MAX_NAMED} more")
    return ", ".join(shown)


class CrossRule:
    """Decides the flagged segments whose evidence is in another language."""

    def __init__(self, cut: CrossCut | None,
                 load: Callable[[str], Any] | None = None) -> None:
        self.cut = cut
        self._load = load or _load_packaged
        self._lock = threading.Lock()
        self._embedder: Any = None
        self._vectors: dict[str, Any] = {}
        self._embedding = threading.Lock()
        #: Why the rule cannot run here (no cut shipped, the embedder's package missing).
        self.unavailable: str | None = None if cut is not None else (
            "no cross-language cut in thresholds.json")

    def embedder(self) -> Any:
        """The embedder, loaded on first use, once; None where it cannot be."""
        if self.unavailable is not None:
            return None
        with self._lock:
            if self._embedder is None and self.unavailable is None:
                assert self.cut is not None
                try:
                    self._embedder = self._load(self.cut.model)
                except UsageError as exc:
                    self.unavailable = str(exc)
            return self._embedder

    def apply(self, items: Sequence[Any], verdicts: list[Verdict],
              analyse: Callable[[Any], Any],
              cuts: Sequence[float] | None = None) -> list[Verdict]:
        """``verdicts`` (the lexical rule's, one per item) with each segment whose evidence
        is surely in another language decided by this rule, whatever the lexical rule
        said: words shared across languages are names and numbers, which it checks, and
        cognates, which prove nothing (issue 60 item 2). ``analyse`` is
        ``offline.analyse``; ``cuts``: the cut each item was decided at (a segment this
        rule flags scores under it)."""
        from .crosslang import evidence_language, segment_language

        for n, (item, verdict) in enumerate(zip(items, verdicts)):
            if self.unavailable is not None:
                break
            if verdict.verdict not in (SUPPORTED, NOT_ENOUGH_EVIDENCE) or not item.evidence:
                continue
            cut = cuts[n] if cuts is not None else 1.0
            if verdict.verdict == SUPPORTED and cut <= RULE_CUT:
                continue  # --judge-threshold 0.5 or below: names and numbers decide alone
            segment = segment_language(item)
            evidence = segment and evidence_language(item, segment)
            if not segment or not evidence:
                continue
            # In NFC, as the lexical rule read it: the cosine must not depend on the form.
            item = composed(item)
            verdicts[n] = self.decide(item, analyse(item), verdict, segment, evidence, cut)
        return verdicts

    def decide(self, item: Any, analysis: Any, verdict: Verdict, segment: str,
               evidence: str, cut: float = 1.0) -> Verdict:
        """The verdict on ``item`` (in ``segment``'s language, its evidence in
        ``evidence``'s) whose lexical verdict is ``verdict`` at the cut ``cut``."""
        asked, missing = names_and_numbers(analysis, item.evidence, segment)
        by_specifics = cut <= RULE_CUT  # --judge-threshold 0.5 or below: no cosine
        embedder = None if by_specifics else self.embedder()
        if embedder is None and not by_specifics:
            return verdict
        across = f"across languages ({segment} segment, {evidence} evidence)"

        def flagged(reason: str, score: float) -> Verdict:
            # Under the cut it was decided at, as every flagged segment's score is. A
            # number, name or month missing: under 0.5, as the lexical rule scores it.
            # Every one found but the meaning not shown (negation, cosine): from 0.5 up,
            # the band the cascade hands on to a judge that reads both languages.
            if score < RULE_CUT:
                below = min(verdict.score, score)
            elif cut > RULE_CUT:
                below = max(RULE_CUT, min(verdict.score, cut - 1e-4))
            else:
                below = min(verdict.score, cut - 1e-4)
            return Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, round(below, 4), (),
                           f"{across}: {reason}")

        if missing:
            return flagged(f"{_named(missing)} not in the evidence; numbers and names are "
                           "compared, then meaning", 0.4999)
        months = missing_months(item.segment.text, segment, [e.text for e in item.evidence],
                                evidence)
        if months:
            return flagged(f"the month {_month_list(months)} is not in the evidence; "
                           "numbers, names and months are compared, then meaning", 0.4999)
        if by_specifics:
            # Names, numbers and months decide alone, as docs/languages.md says of a cut
            # of 0.5: words of another language prove nothing either way.
            if not asked:
                return verdict
            held = tuple(sorted({where[0] for spec, where in zip(analysis.specifics,
                                                                 analysis.found)
                                 if spec in asked and where}))
            return Verdict(FACTUAL, SUPPORTED, round(max(RULE_CUT, verdict.score), 4), held,
                           f"{across}: {_named(asked)} found; at the cut {cut:g} numbers "
                           "and names decide alone")
        assert self.cut is not None and embedder is not None
        sentences = evidence_sentences(item, evidence)
        if not sentences:
            return verdict
        with self._embedding:  # one call into the model's engine at a time
            sims = cosines(embedder, without_numbers(item.segment.text),
                           [without_numbers(s) for _, s in sentences], self._vectors)
        best = max(range(len(sims)), key=sims.__getitem__)
        cos = sims[best]
        found = f"{_named(asked)} found, " if asked else "no number or name to find, "
        polarity = _polarity(item.segment.text, segment, sentences[best][1], evidence)
        if polarity:
            return flagged(f"{found}but {polarity} (cosine {cos:.3f}: a cosine reads the "
                           "topic, not the claim)", 1.0)
        if cos < self.cut.value:
            return flagged(f"{found}but the closest evidence sentence is at {self.cut.model} "
                           f"cosine {cos:.3f}, under the cut {self.cut.value:g}", 1.0)
        cited = {sentences[best][0]}
        for spec, where in zip(analysis.specifics, analysis.found):
            if spec in asked and where and not cited.intersection(where):
                cited.add(where[0])
        return Verdict(FACTUAL, SUPPORTED, round(max(0.5, min(1.0, cos)), 4),
                       tuple(sorted(cited)),
                       f"{across}: {found}and the cited sentence is at {self.cut.model} "
                       f"cosine {cos:.3f}, at or above the cut {self.cut.value:g}")


def _polarity(segment: str, segment_language: str, sentence: str,
              evidence_language: str) -> str | None:
    """Why the segment and its closest evidence sentence differ in negation, or None
    (the same, or a language ceg reads no negation words in)."""
    said = negated(segment, segment_language)
    held = negated(sentence, evidence_language)
    if said is None or held is None or said == held:
        return None
    if said:
        return "the segment says a negation its closest evidence sentence does not"
    return "its closest evidence sentence says a negation the segment does not"


def _month_list(months: Sequence[int]) -> str:
    import calendar

    return " and ".join(calendar.month_name[m] for m in months)


def _load_packaged(name: str) -> Any:
    """The packaged embedder ``name`` (``index/dense/packaged.py``); UsageError where its
    package is missing or its engine does not load here."""
    from ...index.dense.packaged import E5Embedder, UseEmbedder, packaged_model

    model = packaged_model(name)
    if model is None:
        raise UsageError(f"{name}: not a packaged multilingual embedder")
    return UseEmbedder(model) if model.backend == "numpy" else E5Embedder(model)


def compared_spans(items: Sequence[Any], verdicts: Sequence[Verdict],
                   analyse: Callable[[Any], Any]) -> list[Verdict]:
    """``verdicts`` with the spans of the segments this rule decided (their reason opens
    with "across languages"): a flagged one's, the numbers and names it compared and did
    not find, else the whole segment (its meaning was compared, no word can be pointed
    at); a supported one's, none. ``analyse`` is ``offline.analyse``; the other verdicts
    keep the lexical rule's spans."""
    import unicodedata
    from dataclasses import replace as replaced

    from .spans import analysis_spans, whole_segment

    out = list(verdicts)
    for n, (item, verdict) in enumerate(zip(items, verdicts)):
        if not verdict.reason.startswith("across languages ("):
            continue
        if verdict.label != NONFACTUAL:
            out[n] = replaced(verdict, spans=())
            continue
        analysis = analyse(item)
        _, missing = names_and_numbers(analysis, item.evidence)
        wanted = {unicodedata.normalize("NFC", s.text) for s in missing}
        kept = tuple(s for s in analysis_spans(item.segment.text, analysis)
                     if s.kind in ("number", "date", "name")
                     and unicodedata.normalize("NFC", s.text) in wanted)
        out[n] = replaced(verdict, spans=kept or (whole_segment(item.segment.text),))
    return out
