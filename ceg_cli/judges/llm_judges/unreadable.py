"""What an LLM judge's reply that cannot be read becomes, shared by both LLM prompts."""

from __future__ import annotations

from ...errors import UsageError
from ...types import FACTUAL, JUDGE_ERROR, NONFACTUAL, NOT_JUDGED, Verdict

__all__ = ["UNPARSABLE_CHOICES", "unparsable_verdict"]

#: not_judged fails the run (exit 3); the others count such a reply as that label.
UNPARSABLE_CHOICES = (NOT_JUDGED, NONFACTUAL, FACTUAL)


def unparsable_verdict(why: str, count_as: str) -> Verdict:
    """The verdict on a reply that cannot be read: not judged, or what ``count_as`` says.

    Never silently factual: ``factual`` here is the user's explicit choice.
    """
    if count_as not in UNPARSABLE_CHOICES:
        raise UsageError(
            f"count_unparsable_as {count_as!r}: choose one of " + ", ".join(UNPARSABLE_CHOICES)
        )
    if count_as == NOT_JUDGED:
        return Verdict(NOT_JUDGED, JUDGE_ERROR, 0.0, (), why)
    return Verdict(count_as, JUDGE_ERROR, 0.0, (), f"{why}; counted as {count_as} as configured")
