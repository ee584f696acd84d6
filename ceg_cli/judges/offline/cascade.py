"""``--judge cascade:JUDGE``: the offline judge where its lexical score can tell, JUDGE elsewhere.

The offline judge's score tells two cases apart well: a number or a name the
evidence lacks (score under 0.5, the rule's own cut: flagged), and a segment
whose words are all but copied from its evidence (score at its cut or above:
supported). Between them, every number and name found but fewer words than its
cut asks for, it cannot tell a paraphrase from a changed claim: on XNLI's
paraphrases the share of words found is near chance in every language
(docs/measurements.md). Those segments, and only those, go to JUDGE (a model that
reads meaning: ``nli:mdeberta-v3-base-xnli`` after ``ceg models pull``, or
``llm:MODEL``), whose verdict stands, its reason prefixed with why it was asked.

The cascade's cut is the offline judge's (per setting and language, or
``--judge-threshold``): it bounds the band the offline judge cannot tell. JUDGE
keeps its own cut and options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ...errors import UsageError
from ...types import NONFACTUAL, NOT_ENOUGH_EVIDENCE, JudgeItem, Verdict

PREFIX = "cascade"
USAGE = "cascade:JUDGE (e.g. cascade:nli:mdeberta-v3-base-xnli)"


def cannot_tell(verdict: Verdict, rule_cut: float) -> bool:
    """Whether the offline judge's ``verdict`` is one its score cannot tell: flagged with
    every number and name found (a score from the rule's cut up to the judge's)."""
    return (verdict.label == NONFACTUAL and verdict.verdict == NOT_ENOUGH_EVIDENCE
            and verdict.score >= rule_cut)


class CascadeJudge:
    """The offline judge, then ``inner`` for the segments it cannot tell."""

    def __init__(self, offline: Any, inner: Any) -> None:
        from .offline import RULE_CUT

        self.offline, self.inner, self.rule_cut = offline, inner, RULE_CUT
        self.name = f"{PREFIX}:{inner.name}"
        self.method = (f"offline lexical support where it can tell; {inner.name} for the "
                       "segments whose every number and name is found but too few words to "
                       f"reach the cut ({inner.method})")
        self.cuts = offline.cuts
        #: Segments judged by each part, this judge's lifetime.
        self.counts = {"offline": 0, "inner": 0}
        if getattr(inner, "reads_similarity", False):
            self.reads_similarity = True

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        verdicts = self.offline.judge(items)
        unsure = [i for i, v in enumerate(verdicts) if cannot_tell(v, self.rule_cut)]
        self.counts["offline"] += len(items) - len(unsure)
        self.counts["inner"] += len(unsure)
        if unsure:
            second = self.inner.judge([items[i] for i in unsure])
            for i, v in zip(unsure, second, strict=True):
                verdicts[i] = replace(v, reason=(
                    f"{self.inner.name}, as the offline judge could not tell (every number "
                    f"and name found, score {verdicts[i].score:.3f} under its cut): "
                    f"{v.reason}"))
        return verdicts

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def create(arg: str, options: Mapping[str, Any]) -> CascadeJudge:
    """Registry factory for ``--judge cascade:JUDGE``. ``judge_threshold`` is the offline
    judge's; JUDGE gets every other option."""
    from .. import create_judge
    from ..cuts import OPTION, SOURCE_OPTION
    from .offline import create as offline

    inner_name = arg.strip()
    if inner_name.partition(":")[0] in (PREFIX, "offline"):
        raise UsageError(f"--judge cascade:{arg}: name a judge that reads meaning after the "
                         "offline one, as cascade:nli:MODEL or cascade:llm:MODEL")
    inner = create_judge(inner_name, {k: v for k, v in options.items()
                                      if k not in (OPTION, SOURCE_OPTION)})
    return CascadeJudge(offline("", options), inner)
