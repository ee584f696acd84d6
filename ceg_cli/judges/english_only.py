"""A warning, once, when a checker trained on English judges text in another language.

MiniCheck and HHEM were trained and measured on English (LLM-AggreFact); their
verdicts on German or Chinese segments are unmeasured. They still run (a user
may know better), but the first non-English segment they see is said once, with
what to use instead. The language is the item's where the check names one (a
``language`` on the item, as ``--language`` sets), else the segment's,
detected offline (``ceg_cli.lang``); a segment whose language cannot be told
(a number, "OK") says nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..lang import ENGLISH, UNDETERMINED, base_language, detect, language_name
from .once import SayOnce

#: What to use for text in other languages.
ADVICE = (
    "--judge nli:mdeberta-v3-base-xnli (after ceg models pull mdeberta-v3-base-xnli) "
    "or llm:MODEL"
)


def given_language(item: Any) -> str | None:
    """The language the check gave a judge item (its record's), if it named one."""
    given = getattr(item, "language", None) or getattr(item.segment, "language", None)
    if given and base_language(str(given)) != UNDETERMINED:
        return str(given)
    return None


def item_language(item: Any) -> str | None:
    """The language of a judge item: the one the check gave it, else its segment's."""
    given = given_language(item)
    if given is not None:
        return given
    found = detect(item.segment.text)
    return None if found.method == "fallback" else found.language


class EnglishOnly:
    """Warns once (``on_warning``, else a ``RuntimeWarning``) on the first segment
    that is not English."""

    def __init__(self, judge: str, on_warning: Callable[[str], None] | None = None) -> None:
        self.judge = judge
        self.once = SayOnce(on_warning)

    def check(self, items: Sequence[Any]) -> None:
        if self.once.said:
            return
        for item in items:
            language = item_language(item)
            if language is None or base_language(language) == ENGLISH:
                continue
            self.once.say(
                f"--judge {self.judge} was trained on English; segments in "
                f"{language_name(language)} ({language}) are judged by it unmeasured: "
                f"for text in other languages use {ADVICE}",
                stacklevel=3,
            )
            return
