"""Which language a text is written in, offline.

The script decides first: a text written mostly in a script that one language
owns (Thai, Hangul, kana, Greek, Georgian, ...) is that language, and Han
without kana is Chinese. Otherwise ``py3langid`` (BSD-3-Clause; langid.py's
naive Bayes model over byte n-grams, 4.6 MB inside its wheel, nothing
downloaded) ranks the languages of ``CANDIDATES`` written in that script.
Why py3langid: ``benchmarks/languages/langid.py`` compares the offline detectors on
short answers (figures and the choice in docs/measurements.md).

When the detector cannot name a language (a script with no candidates, such
as Ethiopic, or no n-gram the model knows), the text is ``und-Xxxx``:
undetermined, written in script ``Xxxx``, and ceg treats it by its script
alone; text with no letters at all ("42", emoji) is ``und``. Latin-script text
is the exception: too short to tell (under ``MIN_LETTERS`` letters: "Yes.")
it is English, ceg's language before it knew others, so a short English answer
is checked exactly as it always was.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import BackendError
from .codes import ENGLISH, UNDETERMINED
from .script import COMMON, SCRIPT_LANGUAGE, dominant_script, script_counts

__all__ = ["CANDIDATES", "ENGLISH_PRIOR", "Detection", "detect", "detect_within", "rank",
           "script_fallback"]

#: The languages the detector chooses among, by the script they are written in.
#: py3langid knows 97 languages and 43 varieties; those with few written texts
#: (Afrikaans, Frisian, Breton, Kabyle, Wu, ...) are left out, so that short texts of
#: the common ones are not given to them (py3langid alone gives "The Eiffel Tower is
#: 330 metres tall." to Afrikaans, and much Mandarin to Wu Chinese). With the rules
#: around it, this gained 3.4 points on three-word texts of XNLI test
#: (docs/measurements.md). Pass ``--language CODE`` for any other language. Scripts
#: that one language owns (``script.SCRIPT_LANGUAGE``) need no candidates.
CANDIDATES: dict[str, tuple[str, ...]] = {
    "Latn": tuple(
        "az bs ca cs cy da de en es et eu fi fr ga gl hr hu id is it lt lv ms nl no pl pt "
        "ro sk sl sq sv sw tl tr uz vi".split()
    ),
    "Cyrl": tuple("be bg kk ky mk mn ru sr uk".split()),
    "Arab": tuple("ar fa ps ug ur".split()),
    "Deva": tuple("hi mr ne".split()),
}
#: English is weighted this much more than its probability says among Latin-script
#: candidates: LLM answers are in English far more often than in any other one
#: language. On the first three words of XNLI dev hypotheses (benchmarks/languages/langid.py's
#: data) a weight of 2 took English from 92.5 % to 96.5 % right and cost the other
#: Latin-script languages 0.0 to 0.5 points; on whole sentences nothing moved.
ENGLISH_PRIOR = 2.0
#: Latin-script text with fewer letters than this ("Yes.", "OK") is too short to
#: tell a language by: it is English. On three-word texts (benchmarks/languages/langid.py's
#: data) 5 cost nothing against no limit, 8 cost 1.2 points and 12 cost 10.
MIN_LETTERS = 5
#: A detection is ``sure`` from this probability on, on at least ``SURE_LETTERS``
#: letters (a sentence or two); below, a short answer's question decides with it, and a
#: short context takes its record's language. On HaluEval dev's answers (mostly a name
#: or a few words) detection alone said English for 414 of 500; with the question for
#: those not sure, for all of them.
SURE_CONFIDENCE = 0.9
SURE_LETTERS = 40
#: Texts longer than this are detected on their start: more adds nothing.
MAX_CHARS = 2000


@dataclass(frozen=True)
class Detection:
    """A text's language and how it was found.

    ``language`` is a code (``de``) or ``und-Xxxx``; ``script`` the text's main
    script; ``method`` is ``script`` (the script names the language),
    ``detector`` (py3langid did) or ``fallback`` (neither could: see the module).
    """

    language: str
    script: str
    confidence: float
    method: str
    #: Letters of the text's script that the detection read.
    letters: int = 0

    @property
    def sure(self) -> bool:
        """Whether this is settled: the script named the language, or the detector did
        with ``SURE_CONFIDENCE`` on at least ``SURE_LETTERS`` letters. A short text
        ("Lars Ulrich and James Hetfield.") may be a name in any language: where it
        is not sure, its surroundings (the question, the record) decide."""
        if self.method == "script":
            return True
        return (self.method == "detector" and self.confidence >= SURE_CONFIDENCE
                and self.letters >= SURE_LETTERS)


_lock = threading.Lock()


@lru_cache(maxsize=1)
def _identifier() -> Any:
    """py3langid's identifier, loaded once per process (about a second)."""
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError as exc:
        raise BackendError(
            "detecting languages needs py3langid (pip install py3langid), one of ceg's "
            "dependencies; or name the language with --language CODE"
        ) from exc
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def rank(text: str, script: str) -> list[tuple[str, float]]:
    """The candidates of ``script`` by probability, best first, summing to one.

    py3langid's probabilities are a softmax over all its languages; renormalized
    over a subset they are exactly the softmax over that subset. English's is
    weighted by ``ENGLISH_PRIOR`` before.
    """
    wanted = set(CANDIDATES[script])
    with _lock:
        ranked = _identifier().rank(text)
    kept = [
        (lang, float(p) * (ENGLISH_PRIOR if lang == ENGLISH else 1.0))
        for lang, p in ranked
        if lang in wanted
    ]
    total = sum(p for _, p in kept)
    if total <= 0:
        return [(lang, 0.0) for lang, _ in kept]
    return sorted(((lang, p / total) for lang, p in kept), key=lambda x: -x[1])


def script_fallback(script: str) -> str:
    """What a text the detector cannot name is taken to be: English for Latin
    script (see the module), ``und-Xxxx`` for the others, ``und`` with no letters."""
    if script == COMMON:
        return UNDETERMINED
    if script == "Latn":
        return ENGLISH
    return f"{UNDETERMINED}-{script}"


def detect(text: str) -> Detection:
    """The language of ``text`` (see the module's docstring)."""
    sample = text[:MAX_CHARS]
    script = dominant_script(sample)
    if script == "Jpan":
        return Detection("ja", script, 1.0, "script")
    if script == "Hani":
        return Detection("zh", script, 1.0, "script")
    if script in SCRIPT_LANGUAGE:
        return Detection(SCRIPT_LANGUAGE[script], script, 1.0, "script")
    letters = script_counts(sample)[script]
    if script not in CANDIDATES or (script == "Latn" and letters < MIN_LETTERS):
        return Detection(script_fallback(script), script, 0.0, "fallback", letters)
    ranked = rank(sample, script)
    if not ranked or ranked[0][1] == ranked[-1][1]:  # no n-gram the model knows
        return Detection(script_fallback(script), script, 0.0, "fallback", letters)
    language, confidence = ranked[0]
    return Detection(language, script, confidence, "detector", letters)


def detect_within(text: str, surrounding: str) -> str:
    """The language of ``text`` that is part of something in language ``surrounding``
    (a record's context, in its record's language): its own where ``detect`` is sure
    of it, else ``surrounding``."""
    found = detect(text)
    if found.sure and not (found.script == "Hani" and surrounding in ("ja", "zh")):
        return found.language
    return surrounding


def detect_many(texts: Sequence[str]) -> list[Detection]:
    return [detect(t) for t in texts]
