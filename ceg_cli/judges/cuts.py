"""A judge's cut on its own score: per setting, and where each came from.

A judge that scores a segment's support (offline, verifier, minicheck:, hhem:,
nli:, llm: with MiniCheck's prompt) supports it when the score reaches its cut.
The shipped judges take their cut from a ``thresholds.json`` in their own
folder (``ceg_cli/models/offline``, ``ceg_cli/models/verifier``): the
leave-one-domain-out protocol's cut for each setting a segment is checked in,
``index`` (passages of an index pooled over many documents) or ``contexts``
(the record's own documents), fitted by ``benchmarks/judges/contexts_eval.py`` and
re-fitted by ``tests/test_thresholds.py``. A judge may also have a cut per
language and per script (the offline judge's, fitted on XNLI paraphrases by
``benchmarks/languages/language_cuts.py``, re-fitted by ``tests/test_language_cuts.py``):
a record in a language with a cut is decided at it (``protocol, zh``), one in a
language without one at its script's, and says so (``protocol, Latn script: no
cut for xx``); English, and text read by the English rules, keep the setting's
cut. ``--judge-threshold T`` sets one cut for every setting and language. A
judge whose verdict is not a cut on a score (``llm:`` with the paper's prompt: a
label) has no ``cuts`` and refuses the option.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError

__all__ = ["OVERRIDE", "SETTINGS", "THRESHOLDS_FILE", "Cut", "Cuts", "check_threshold",
           "load_cuts", "one_cut", "overridden", "setting_of"]

#: The settings the protocol fitted a cut for.
SETTINGS = ("index", "contexts")
THRESHOLDS_FILE = "thresholds.json"
THRESHOLDS_FORMAT = 1
#: Where a language's cut is said to come from, beside its code: ``protocol, zh``.
LANGUAGE_SOURCE = "protocol"
#: A script without a cut of its own that takes another's: Japanese (kana and kanji) Han's.
SCRIPT_ALIASES = {"Jpan": "Hani", "Hira": "Hani", "Kana": "Hani"}
#: The option that overrides a judge's cuts, and the source it gives them.
OVERRIDE = "--judge-threshold"
#: The judge option (``create_judge(name, {OPTION: T})``) that carries it, and the one
#: that says where it came from when not the command line (a project file).
OPTION = "judge_threshold"
SOURCE_OPTION = "judge_threshold_source"


def setting_of(evidence_source: str) -> str:
    """The setting a record's segments are judged in, from its ``evidence_source``.

    ``contexts`` and ``none`` (an empty list of contexts) are the contexts
    setting; ``index`` is the index setting, and so is ``both``: the protocol's
    index setting judged each item against an index pooled over every item's
    documents, its own among them, which is what ``both`` gives a segment (its
    record's passages and the index's), where the contexts setting had the
    item's own documents only.
    """
    return "contexts" if evidence_source in ("contexts", "none") else "index"


@dataclass(frozen=True)
class Cut:
    """A score at or above which (or above which, for MiniCheck and HHEM, as their
    authors decide) a segment is supported, and where the number came from."""

    value: float
    source: str

    def describe(self) -> str:
        return f"{self.value:g} ({self.source})"


@dataclass(frozen=True)
class Cuts:
    """A judge's cut in each setting."""

    index: Cut
    contexts: Cut
    #: A cut per language (base code: ``zh``) and per script (ISO 15924: ``Latn``), in
    #: every setting, for text not read by the English rules; empty: none.
    languages: Mapping[str, Cut] = field(default_factory=dict, hash=False)
    scripts: Mapping[str, Cut] = field(default_factory=dict, hash=False)

    @classmethod
    def same(cls, value: float, source: str) -> Cuts:
        cut = Cut(value, source)
        return cls(cut, cut)

    def at(self, setting: str) -> Cut:
        return self.contexts if setting == "contexts" else self.index

    def for_language(self, setting: str, language: str | None, text: str = "") -> Cut:
        """The cut a segment in ``language`` (a code, ``und-Xxxx``, or None: the English
        rules) is decided at in ``setting``: its language's, else the script's of the
        tag or of ``text`` (Japanese, ``Jpan``, takes Han's), else the setting's, and the
        source says which."""
        if not language or not (self.languages or self.scripts):
            return self.at(setting)
        from ..lang import ENGLISH, UNDETERMINED, base_language, dominant_script

        code = base_language(language)
        if code == ENGLISH:
            return self.at(setting)
        if code in self.languages:
            return self.languages[code]
        tag = language.replace("_", "-").split("-")
        script = tag[1].title() if code == UNDETERMINED and len(tag) > 1 else (
            dominant_script(text) if text else "")
        script = SCRIPT_ALIASES.get(script, script)
        name = code if code != UNDETERMINED else language
        if script in self.scripts:
            cut = self.scripts[script]
            return Cut(cut.value, f"{cut.source}: no cut for {name}")
        cut = self.at(setting)
        return Cut(cut.value, f"{cut.source}: no cut for {name} or its script")

    def describe(self, settings: tuple[str, ...] = SETTINGS) -> str:
        """The cuts of ``settings``, one when they agree: ``0.833 (protocol, index
        setting); 0.833 (protocol, contexts setting)``; and how many languages and
        scripts have their own: ``; 14 other languages and 7 scripts their own (protocol)``."""
        cuts = list(dict.fromkeys(self.at(s) for s in settings))
        said = "; ".join(c.describe() for c in cuts)
        if self.languages or self.scripts:
            said += (f"; {len(self.languages)} other languages and {len(self.scripts)} "
                     f"scripts their own ({LANGUAGE_SOURCE})")
        return said

    def to_json(self, settings: tuple[str, ...] = SETTINGS) -> dict[str, dict[str, Any]]:
        return {s: {"value": self.at(s).value, "source": self.at(s).source} for s in settings}


def check_threshold(value: Any, flag: str = OVERRIDE) -> float | None:
    """``--judge-threshold``'s value: None (not given) or a number from 0 to 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{flag} {value!r}: a number from 0 to 1 is expected")
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise UsageError(
            f"{flag} {value}: the judge's score is between 0 and 1, and so is its cut"
        )
    return float(value)


def overridden(cuts: Cuts, options: Mapping[str, Any]) -> Cuts:
    """``cuts``, or the one cut ``options`` carries (``judge_threshold``) in every setting,
    from ``--judge-threshold`` or what ``judge_threshold_source`` names."""
    value = check_threshold(options.get(OPTION))
    if value is None:
        return cuts
    return Cuts.same(value, str(options.get(SOURCE_OPTION) or OVERRIDE))


def one_cut(default: float, source: str, options: Mapping[str, Any]) -> Cut:
    """A judge with one cut in every setting (minicheck:, hhem:, nli:): ``default``, from
    ``source``, or the override ``options`` carry."""
    return overridden(Cuts.same(default, source), options).index


def read_thresholds_file(path: Path) -> Any:
    """The parsed JSON of a thresholds file, None where there is no such file; one that
    cannot be read or parsed is refused in one line naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None


def load_cuts(directory: Path) -> Cuts | None:
    """The cuts in ``directory/thresholds.json``, or None when there is no such file.

    The file says the score it cuts, the cut for each setting and who fitted
    it (``source``, e.g. ``protocol``); every field is checked, so a wrong
    file is refused in one line naming it and the field.
    """
    path = directory / THRESHOLDS_FILE
    raw = read_thresholds_file(path)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: not a thresholds file (a JSON object is expected)")
    if raw.get("format") != THRESHOLDS_FORMAT:
        raise UsageError(
            f"{path}: format {raw.get('format')!r}; this ceg reads {THRESHOLDS_FORMAT}"
        )
    source = raw.get("source")
    if not isinstance(source, str) or not source.strip():
        raise UsageError(f"{path}: field 'source' is {source!r}; say who fitted the cuts")
    settings = raw.get("thresholds")
    if not isinstance(settings, dict) or set(settings) != set(SETTINGS):
        raise UsageError(
            f"{path}: field 'thresholds' is {settings!r}; one number for each of "
            f"{', '.join(SETTINGS)} is expected"
        )
    cuts = {}
    for setting in SETTINGS:
        value = settings[setting]
        check_threshold(value, f"{path}: field 'thresholds.{setting}'")
        cuts[setting] = Cut(float(value), f"{source}, {setting} setting")
    languages = _named_cuts(path, raw, "languages", source, _LANGUAGE_KEY)
    scripts = _named_cuts(path, raw, "scripts", source, _SCRIPT_KEY)
    return Cuts(cuts["index"], cuts["contexts"], languages,
                {k: Cut(c.value, f"{c.source} script") for k, c in scripts.items()})


_LANGUAGE_KEY = re.compile(r"^[a-z]{2,3}$")
_SCRIPT_KEY = re.compile(r"^[A-Z][a-z]{3}$")


def _named_cuts(path: Path, raw: dict[str, Any], name: str, source: str,
                key: re.Pattern[str]) -> dict[str, Cut]:
    """The optional ``languages`` (``{"zh": 0.64}``) or ``scripts`` (``{"Latn": 0.7}``)
    of a thresholds file, each key and value checked."""
    given = raw.get(name, {})
    if not isinstance(given, dict):
        raise UsageError(f"{path}: field '{name}' is {given!r}; an object of cuts is expected")
    out = {}
    for k, value in given.items():
        if not isinstance(k, str) or not key.match(k):
            kind = "a language code (zh)" if name == "languages" else "an ISO 15924 script (Latn)"
            raise UsageError(f"{path}: field '{name}' has key {k!r}; {kind} is expected")
        check_threshold(value, f"{path}: field '{name}.{k}'")
        out[k] = Cut(float(value), f"{source}, {k}")
    return out
