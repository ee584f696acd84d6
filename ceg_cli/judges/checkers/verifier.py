"""The ``verifier`` judge: a trained cross-encoder and the lexical evidence, combined.

For each segment with a claim:

1. the **evidence window** (``window.select_window``): the sentences of the
   retrieved passages that best cover the segment, ~90 words;
2. a **cross-encoder** (all-MiniLM-L6-v2 fine-tuned on labelled pairs and on
   synthetic perturbations, ``ceg_cli.training``) reads segment and window and
   gives P(entailment);
3. the **lexical analysis** of the offline judge (which numbers and names are
   missing, the share of content words found) and the **retrieval** signals
   (similarity of the top passage, how many passages agree);
4. a **logistic regression** over these features (``features.FEATURES``),
   fitted and calibrated on the validation split of the training data, gives
   P(supported); the segment is factual when it reaches the cut for the
   setting it is checked in: the leave-one-domain-out protocol's, from
   ``thresholds.json`` beside the model (``judges/cuts.py``), else the
   combiner's own ``threshold``; ``--judge-threshold`` overrides both.

The verdict keeps reasons a person can check: "'1812' not in the evidence;
entailment 0.12 over passages [2, 3]; P(supported) 0.21".

``--judge verifier`` uses the model shipped in the package
(``ceg_cli/models/verifier``); ``--judge verifier:DIR`` a directory written by
``ceg judge train`` (same layout: ``combiner.json``, the cross-encoder's
config, weights and tokenizer, ``MODEL_CARD.md``). Nothing is downloaded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...types import (
    CONTRADICTED,
    FACTUAL,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    SUPPORTED,
    JudgeItem,
    Verdict,
)
from ..cuts import Cuts, load_cuts, overridden
from ..offline import offline
from .features import FEATURES, Features, compute
from .window import DEFAULT_WINDOW_WORDS, Window, select_window

__all__ = ["SHIPPED", "Assessment", "Combiner", "VerifierJudge", "assess", "create",
           "load_combiner", "model_cuts"]

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "verifier"
COMBINER_FILE = "combiner.json"
COMBINER_FORMAT = 1


@dataclass(frozen=True)
class Combiner:
    """A logistic regression over standardized features, with its decision threshold."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float
    max_length: int = 160
    window_words: int = DEFAULT_WINDOW_WORDS
    quantize: bool = True

    def probability(self, values: Sequence[float]) -> float:
        z = self.intercept + sum(
            c * (v - m) / s for c, v, m, s in zip(self.coef, values, self.mean, self.scale)
        )
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": COMBINER_FORMAT,
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "threshold": self.threshold,
            "max_length": self.max_length,
            "window_words": self.window_words,
            "quantize": self.quantize,
        }


def load_combiner(directory: Path) -> Combiner:
    """The combiner in ``directory``; every field is checked, so a wrong file is refused
    (one line naming it and the field) rather than scoring wrongly."""
    path = directory / COMBINER_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"{directory}: not a verifier model directory (no {COMBINER_FILE}); "
            "make one with `ceg judge train`, or use --judge verifier for the shipped model"
        ) from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: not a combiner (a JSON object is expected)")
    if raw.get("format") != COMBINER_FORMAT:
        raise UsageError(f"{path}: format {raw.get('format')!r}; this ceg reads {COMBINER_FORMAT}")
    features = raw.get("features")
    if not isinstance(features, list) or tuple(features) != FEATURES:
        raise UsageError(
            f"{path}: made for features {features}; this ceg computes {list(FEATURES)}"
        )
    vectors = {key: _numbers(path, raw, key, len(FEATURES)) for key in ("mean", "scale", "coef")}
    if any(s == 0 for s in vectors["scale"]):
        raise UsageError(f"{path}: field 'scale' holds 0; every scale must be non-zero")
    threshold = _number(path, raw, "threshold")
    if not 0.0 <= threshold <= 1.0:
        raise UsageError(f"{path}: field 'threshold' is {threshold}; it must be in [0, 1]")
    return Combiner(
        tuple(features),
        vectors["mean"],
        vectors["scale"],
        vectors["coef"],
        _number(path, raw, "intercept"),
        threshold,
        _count(path, raw, "max_length", 160),
        _count(path, raw, "window_words", DEFAULT_WINDOW_WORDS),
        _flag(path, raw, "quantize", True),
    )


def _number(path: Path, raw: Mapping[str, Any], key: str) -> float:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{path}: field '{key}' is {value!r}; a finite number is expected")
    return float(value)


def _numbers(path: Path, raw: Mapping[str, Any], key: str, n: int) -> tuple[float, ...]:
    value = raw.get(key)
    if not isinstance(value, list) or len(value) != n:
        got = f"has {len(value)} values" if isinstance(value, list) else f"is {value!r}"
        raise UsageError(f"{path}: field '{key}' {got}; one number per feature ({n}) is expected")
    return tuple(_number(path, {f"{key}[{i}]": v}, f"{key}[{i}]") for i, v in enumerate(value))


def _count(path: Path, raw: Mapping[str, Any], key: str, default: int) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{path}: field '{key}' is {value!r}; a whole number >= 1 is expected")
    return value


def _flag(path: Path, raw: Mapping[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise UsageError(f"{path}: field '{key}' is {value!r}; true or false is expected")
    return value


@dataclass(frozen=True)
class Assessment:
    """What the verifier measured on one item, before the combiner weighs it."""

    window: Window
    analysis: offline.Analysis
    entailment: float
    features: Features


def assess(
    items: Sequence[JudgeItem],
    entailment: Callable[[list[tuple[str, str]]], list[float]],
    *,
    window_words: int = DEFAULT_WINDOW_WORDS,
) -> list[Assessment]:
    """Window, cross-encoder, lexical analysis and features of each item (with evidence).

    The one path from an item to its features: ``ceg check`` runs it, and the
    combiner is fitted on what it returns (``ceg_cli.training.combiner``).
    """
    windows = [
        select_window(
            it.segment.text,
            [e.text for e in it.evidence],
            max_words=window_words,
            titles=[e.title for e in it.evidence],
        )
        for it in items
    ]
    ents = entailment([(it.segment.text, w.text) for it, w in zip(items, windows)])
    out = []
    for it, w, ent in zip(items, windows, ents):
        a = offline.analyse(it)
        lexical = offline.decide(it, a).label == FACTUAL
        sims = [e.similarity for e in it.evidence]
        if None in sims:  # a caller's ContextSearch without similarity=True
            raise ValueError("the verifier reads each passage's cosine similarity: search "
                             "contexts with ContextSearch(..., similarity=True)")
        feats = compute(a, ent, w.overlap, sims, lexical)  # type: ignore[arg-type]
        out.append(Assessment(w, a, ent, feats))
    return out


@lru_cache(maxsize=2)
def _cross_encoder(directory: str, quantize: bool, device: str = "cpu") -> tuple[Any, Any]:
    from .crossenc import load_cross_encoder

    return load_cross_encoder(directory, quantize=quantize, device=device)


def _passages_named(idx: Sequence[int]) -> str:
    shown = ", ".join(str(i + 1) for i in sorted(set(idx)))
    return f"passage{'s' if len(set(idx)) > 1 else ''} [{shown}]" if idx else "the evidence"


class VerifierJudge:
    """Lexical, retrieval and cross-encoder evidence, weighed by a calibrated model."""

    method = (
        "trained verifier (offline): all-MiniLM-L6-v2 cross-encoder over an evidence window, "
        "combined with lexical and retrieval features by a calibrated logistic regression"
    )
    #: Its features include each passage's cosine similarity to the query, so a
    #: record's own passages are embedded for it even when BM25 ranks them.
    reads_similarity = True

    def __init__(
        self, directory: Path, name: str = "verifier", batch_size: int = 32, device: str = "cpu",
        cuts: Cuts | None = None,
    ) -> None:
        self.directory = directory
        self.name = name
        self.combiner = load_combiner(directory)
        self.batch_size = batch_size
        #: ``cpu`` or ``cuda`` (resolved: ``--device auto`` is one of them by now).
        self.device = device
        #: The cut on P(supported) in each setting: ``cuts``, else the model's own.
        self.cuts = cuts if cuts is not None else model_cuts(directory, self.combiner)

    def entailment(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        from .crossenc import score_pairs

        tok, model = _cross_encoder(str(self.directory), self.combiner.quantize, self.device)
        return score_pairs(
            tok, model, pairs, max_length=self.combiner.max_length, batch_size=self.batch_size
        )

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        out = [offline.verdict_without_evidence(item) for item in items]
        todo = [i for i, v in enumerate(out) if v is None]
        found = assess(
            [items[i] for i in todo], self.entailment, window_words=self.combiner.window_words
        )
        for i, assessment in zip(todo, found):
            out[i] = self._decide(assessment, self.cuts.at(items[i].setting).value)
        return [v for v in out if v is not None]

    def _decide(self, m: Assessment, cut: float) -> Verdict:
        a, ent, sources = m.analysis, m.entailment, m.window.sources
        # The score as the record shows it decides, so that score >= cut holds there.
        p = round(self.combiner.probability(m.features.values), 4)
        tail = f"entailment {ent:.2f} over {_passages_named(sources)}; P(supported) {p:.3f}"
        if p >= cut:
            cited = tuple(offline.cite(a)) or tuple(sorted(set(sources)))[: offline.MAX_CITED]
            return Verdict(FACTUAL, SUPPORTED, p, cited, tail)
        tail += f", under the cut {cut:g}"
        if a.missing or a.coverage < 1.0:
            reason = f"{offline.missing_reason(a)}; {tail}"
        else:
            reason = f"every word found, but {tail}"
        contradicted = ent < 0.1 and not a.missing and a.coverage >= 0.8
        return Verdict(
            NONFACTUAL,
            CONTRADICTED if contradicted else NOT_ENOUGH_EVIDENCE,
            p,
            (),
            reason,
        )


def model_cuts(directory: Path, combiner: Combiner) -> Cuts:
    """A model's cuts: its ``thresholds.json`` (the shipped model's: the protocol's per
    setting), else its combiner's one ``threshold`` in every setting."""
    cuts = load_cuts(directory)
    if cuts is not None:
        return cuts
    return Cuts.same(combiner.threshold, f"{COMBINER_FILE} of {directory.name}")


def create(arg: str, options: Mapping[str, Any]) -> VerifierJudge:
    """Registry factory: ``verifier`` (the shipped model) or ``verifier:DIR``."""
    from ...index.dense.devices import resolve_device

    device = resolve_device(str(options.get("device", "cpu")))
    if not arg:
        if not (SHIPPED / COMBINER_FILE).exists():
            raise UsageError(
                f"the shipped verifier is missing from {SHIPPED}; reinstall ceg, "
                "or use --judge offline"
            )
        return _with_options(VerifierJudge(SHIPPED, device=device), options)
    path = Path(arg).expanduser()
    if not path.is_dir():
        raise UsageError(f"--judge verifier:{arg}: no such directory")
    return _with_options(VerifierJudge(path.resolve(), name=f"verifier:{arg}", device=device),
                         options)


def _with_options(judge: VerifierJudge, options: Mapping[str, Any]) -> VerifierJudge:
    """The judge with ``judge_threshold`` (one cut for every setting), if given."""
    judge.cuts = overridden(judge.cuts, options)
    return judge
