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
   P(supported); the segment is factual when it reaches the model's threshold.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import BackendError, UsageError
from ..segment import has_claim
from ..types import (
    CONTRADICTED,
    FACTUAL,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    SUPPORTED,
    JudgeItem,
    Verdict,
)
from . import offline
from .features import FEATURES, compute
from .window import DEFAULT_WINDOW_WORDS, select_window

__all__ = ["SHIPPED", "Combiner", "VerifierJudge", "create", "load_combiner"]

SHIPPED = Path(__file__).resolve().parent.parent / "models" / "verifier"
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
    if raw.get("format") != COMBINER_FORMAT:
        raise UsageError(f"{path}: format {raw.get('format')!r}; this ceg reads {COMBINER_FORMAT}")
    if tuple(raw["features"]) != FEATURES:
        raise UsageError(
            f"{path}: made for features {raw['features']}; this ceg computes {list(FEATURES)}"
        )
    return Combiner(
        tuple(raw["features"]),
        tuple(raw["mean"]),
        tuple(raw["scale"]),
        tuple(raw["coef"]),
        float(raw["intercept"]),
        float(raw["threshold"]),
        int(raw.get("max_length", 160)),
        int(raw.get("window_words", DEFAULT_WINDOW_WORDS)),
        bool(raw.get("quantize", True)),
    )


@lru_cache(maxsize=2)
def _cross_encoder(directory: str, quantize: bool) -> tuple[Any, Any]:
    from ..training.crossenc import load_cross_encoder

    try:
        return load_cross_encoder(directory, quantize=quantize)
    except OSError as exc:
        raise BackendError(f"verifier model in {directory}: cannot load: {exc}") from None


def _passages_named(idx: Sequence[int]) -> str:
    shown = ", ".join(str(i + 1) for i in sorted(set(idx)))
    return f"passage{'s' if len(set(idx)) > 1 else ''} [{shown}]" if idx else "the evidence"


class VerifierJudge:
    """Lexical, retrieval and cross-encoder evidence, weighed by a calibrated model."""

    method = (
        "trained verifier (offline): all-MiniLM-L6-v2 cross-encoder over an evidence window, "
        "combined with lexical and retrieval features by a calibrated logistic regression"
    )

    def __init__(self, directory: Path, name: str = "verifier", batch_size: int = 32) -> None:
        self.directory = directory
        self.name = name
        self.combiner = load_combiner(directory)
        self.batch_size = batch_size

    def entailment(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        from ..training.crossenc import score_pairs

        tok, model = _cross_encoder(str(self.directory), self.combiner.quantize)
        return score_pairs(
            tok, model, pairs, max_length=self.combiner.max_length, batch_size=self.batch_size
        )

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        out: list[Verdict | None] = [None] * len(items)
        todo: list[int] = []
        for i, item in enumerate(items):
            text = offline.clean(item.segment.text).strip()
            if not has_claim(text) or offline._LIST_NUMBER.match(text):
                out[i] = Verdict(FACTUAL, NO_CLAIM, 1.0, (), "no factual claim to check")
            elif not item.evidence:
                out[i] = Verdict(
                    NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.0, (), "no evidence was retrieved"
                )
            else:
                todo.append(i)
        windows = {
            i: select_window(
                items[i].segment.text,
                [e.text for e in items[i].evidence],
                max_words=self.combiner.window_words,
                titles=[e.title for e in items[i].evidence],
            )
            for i in todo
        }
        probs = self.entailment([(items[i].segment.text, windows[i].text) for i in todo])
        for i, ent in zip(todo, probs):
            out[i] = self._decide(
                items[i], windows[i].text, windows[i].sources, windows[i].overlap, ent
            )
        return [v for v in out if v is not None]

    def _decide(
        self, item: JudgeItem, window: str, sources: Sequence[int], overlap: float, ent: float
    ) -> Verdict:
        a = offline.analyse(item)
        lexical = offline.decide(item, a)
        feats = compute(
            a, ent, overlap, [e.similarity for e in item.evidence], lexical.label == FACTUAL
        )
        p = self.combiner.probability(feats.values)
        where = _passages_named(sources)
        tail = f"entailment {ent:.2f} over {where}; P(supported) {p:.2f}"
        if p >= self.combiner.threshold:
            cited = tuple(offline._cite(a)) or tuple(sorted(set(sources)))[: offline.MAX_CITED]
            return Verdict(FACTUAL, SUPPORTED, round(p, 4), cited, f"{tail}")
        if a.missing or a.coverage < 1.0:
            reason = f"{offline._missing_reason(a)}; {tail}"
        else:
            reason = f"every word found, but {tail}"
        contradicted = ent < 0.1 and not a.missing and a.coverage >= 0.8
        return Verdict(
            NONFACTUAL,
            CONTRADICTED if contradicted else NOT_ENOUGH_EVIDENCE,
            round(p, 4),
            (),
            reason,
        )


def create(arg: str, options: Mapping[str, Any]) -> VerifierJudge:
    """Registry factory: ``verifier`` (the shipped model) or ``verifier:DIR``."""
    if not arg:
        if not (SHIPPED / COMBINER_FILE).exists():
            raise UsageError(
                f"the shipped verifier is missing from {SHIPPED}; reinstall ceg, "
                "or use --judge offline"
            )
        return VerifierJudge(SHIPPED)
    path = Path(arg).expanduser()
    if not path.is_dir():
        raise UsageError(f"--judge verifier:{arg}: no such directory")
    return VerifierJudge(path.resolve(), name=f"verifier:{arg}")
