"""The ``nli:MODEL`` judge: a local NLI cross-encoder decides each segment.

For every (segment, passage) pair the model reads premise = the passage and
hypothesis = the segment, as in MNLI. A passage longer than the model's window
(its tokenizer's or its position embeddings' limit, less the hypothesis and the
special tokens) is cut into overlapping windows of tokens, and a passage scores
the highest entailment and the highest contradiction probability over its
windows: one window that states the fact is enough, and a contradiction in the
last window is not diluted by the others.

Across passages a segment is ``supported`` when some passage entails it with a
probability of at least ``threshold`` and more than it contradicts it (every
such passage is cited); ``contradicted`` when none supports it and some passage
contradicts it at or above ``threshold``; ``not_enough_evidence`` otherwise.
Segments with no factual claim are factual without running the model, as the
paper's FELM prompt counts them.

The model is read from a local directory or the local Hugging Face cache; it is
never downloaded at run time. Its label names come from its config
(``id2label``): ``entailment`` is required, with ``contradiction`` and
``neutral``, or ``not_entailment`` for two-label models (which can never
report a contradiction). A fact checker that names its classes by support
(``supported``/``unsupported``, ``consistent``/``hallucinated``) is read the
same way as a two-label model. A model whose labels say neither is refused,
naming the labels it has.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...claims import has_claim
from ...errors import UsageError
from ...progress import library_bars_off
from ...types import (
    CONTRADICTED,
    FACTUAL,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    SUPPORTED,
    JudgeItem,
    Verdict,
)
from ..cuts import Cuts, one_cut
from .precision import for_inference, kernels_option, precision_option

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_THRESHOLD",
    "LabelMap",
    "NliJudge",
    "PassageScore",
    "create",
    "decide",
    "label_map",
    "model_window",
    "window_spans",
]

DEFAULT_THRESHOLD = 0.5
#: Where that cut comes from, as a run shows it.
DEFAULT_CUT = "the nli judge's default"
DEFAULT_BATCH_SIZE = 16
#: Share of a window repeated at the start of the next one, so that a sentence
#: cut by one window boundary is whole in the neighbouring window.
_OVERLAP = 0.25
# Models whose position ids start after the padding index (RoBERTa numbers
# positions from padding_idx + 1), so fewer positions than the config says.
_OFFSET_POSITIONS = frozenset(
    "roberta xlm-roberta xlm-roberta-xl camembert longformer data2vec-text xmod".split()
)

_ENTAILMENT = frozenset({"entailment", "entail", "entails", "entailed"})
# Fact checkers that are not NLI models name their classes by support or
# consistency (MiniCheck-style "supported", HHEM-style "consistent"): their
# positive class is read as entailment, the other as "not entailment", never
# as a contradiction, which they do not tell apart.
_SUPPORT = frozenset("supported support consistent factual faithful grounded attributable".split())
_NOT_SUPPORT = frozenset(
    "unsupported notsupported inconsistent notconsistent hallucinated hallucination "
    "nonfactual notfactual unfaithful notfaithful ungrounded notgrounded "
    "notattributable unattributable".split()
)
_CONTRADICTION = frozenset(
    {"contradiction", "contradict", "contradicts", "contradicted", "contradictory"}
)
_NEUTRAL = frozenset({"neutral"})
_NOT_ENTAILMENT = frozenset({"notentailment", "nonentailment", "notentailed", "notentail"})
_NOT_LETTER = re.compile(r"[^a-z]")


# --- label mapping -----------------------------------------------------------


@dataclass(frozen=True)
class LabelMap:
    """Which model outputs are entailment and contradiction (None: the model has none)."""

    entailment: int
    contradiction: int | None
    neutral: int | None


def label_map(id2label: Mapping[Any, str], model: str = "") -> LabelMap:
    """Find the NLI classes by name in a config's ``id2label``.

    Names are matched case-insensitively, ignoring ``_``/``-`` ("ENTAILMENT",
    "Not_Entailment"). Every label must be an NLI label: a model that calls
    its outputs ``LABEL_0``... or ``positive``/``negative`` raises UsageError,
    since guessing which output means what would make every verdict a guess.
    """
    found: dict[str, list[int]] = {"entailment": [], "contradiction": [], "neutral": []}
    unknown = []
    for key, name in sorted(id2label.items(), key=lambda kv: int(kv[0])):
        norm = _NOT_LETTER.sub("", str(name).lower())
        if norm in _ENTAILMENT or norm in _SUPPORT:
            found["entailment"].append(int(key))
        elif norm in _CONTRADICTION:
            found["contradiction"].append(int(key))
        elif norm in _NEUTRAL or norm in _NOT_ENTAILMENT or norm in _NOT_SUPPORT:
            found["neutral"].append(int(key))
        else:
            unknown.append(str(name))
    labels = ", ".join(str(id2label[k]) for k in sorted(id2label, key=int))
    where = f"--judge nli:{model}: " if model else ""
    if unknown or len(found["entailment"]) != 1 or len(found["contradiction"]) > 1:
        raise UsageError(
            f"{where}the model's config has no NLI label names (id2label: {labels or 'none'}); "
            "it needs an 'entailment' label and 'contradiction'/'neutral' or 'not_entailment' "
            "(or a checker's 'supported'/'consistent' and 'unsupported'/'hallucinated'). "
            'If it is an NLI model with unnamed outputs, set "id2label" in its config.json '
            'to the names in output order, e.g. {"0": "entailment", "1": "neutral", '
            '"2": "contradiction"}'
        )
    contradiction = found["contradiction"][0] if found["contradiction"] else None
    neutral = found["neutral"][0] if found["neutral"] else None
    return LabelMap(found["entailment"][0], contradiction, neutral)


# --- windows -----------------------------------------------------------------


@dataclass(frozen=True)
class _Piece:
    """A stretch of the premise: one token (fast tokenizers) or one word (others)."""

    start: int
    end: int
    tokens: int
    starts_word: bool


def window_spans(
    tokens: Sequence[int], starts_word: Sequence[bool], budget: int, overlap: int
) -> list[tuple[int, int]]:
    """Cut pieces into windows of at most ``budget`` tokens overlapping by about ``overlap``.

    ``tokens[i]`` is the token count of piece i; windows are ``[i, j)`` ranges
    of pieces covering all of them. A window starts at a word start where
    that costs no more than half the window, so a word is rarely cut in two.
    A single piece over the budget is a window of its own (the tokenizer
    truncates it).
    """
    n = len(tokens)
    windows: list[tuple[int, int]] = []
    i = 0
    while i < n:
        j, total = i, 0
        while j < n and total + tokens[j] <= budget:
            total += tokens[j]
            j += 1
        j = max(j, i + 1)
        windows.append((i, j))
        if j >= n:
            break
        k, back = j, 0
        while k > i + 1 and back + tokens[k - 1] <= overlap:
            k -= 1
            back += tokens[k]
        aligned = k
        while aligned > i + 1 and not starts_word[aligned]:
            aligned -= 1
        if starts_word[aligned] and aligned - i >= (j - i) // 2:
            k = aligned
        i = k
    return windows


def model_window(tokenizer: Any, config: Any) -> int:
    """The most tokens one input may have: the tokenizer's and the positions' limit."""
    limits = []
    tok_max = getattr(tokenizer, "model_max_length", None)
    # Tokenizers without a recorded limit report a huge sentinel (1e30).
    if isinstance(tok_max, int) and 0 < tok_max < 1_000_000:
        limits.append(tok_max)
    pos_max = getattr(config, "max_position_embeddings", None)
    if isinstance(pos_max, int) and pos_max > 0:
        if getattr(config, "model_type", "") in _OFFSET_POSITIONS:
            pos_max -= (getattr(config, "pad_token_id", None) or 0) + 1
        limits.append(pos_max)
    return min(limits) if limits else 512


# --- aggregation -------------------------------------------------------------


@dataclass(frozen=True)
class PassageScore:
    """A passage's highest entailment and contradiction probability over its windows."""

    entailment: float
    contradiction: float


def decide(scores: Sequence[PassageScore], threshold: float = DEFAULT_THRESHOLD) -> Verdict:
    """Turn per-passage scores (in evidence order) into a verdict.

    Passages are named ``[n]`` by their 1-based rank in the evidence list;
    ``cited`` holds 0-based indices. ``score`` is the best entailment.
    """
    if not scores:
        return Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.0, (), "no evidence was retrieved")
    best = round(max(s.entailment for s in scores), 4)
    cited = tuple(
        i
        for i, s in enumerate(scores)
        if s.entailment >= threshold and s.entailment > s.contradiction
    )
    if cited:
        if len(cited) == 1:
            reason = f"passage [{cited[0] + 1}] entails ({scores[cited[0]].entailment:.2f})"
        else:
            listed = ", ".join(f"[{i + 1}] ({scores[i].entailment:.2f})" for i in cited)
            reason = f"passages {listed} entail"
        return Verdict(FACTUAL, SUPPORTED, best, cited, reason)
    worst = max(range(len(scores)), key=lambda i: scores[i].contradiction)
    if scores[worst].contradiction >= threshold:
        reason = f"passage [{worst + 1}] contradicts ({scores[worst].contradiction:.2f})"
        return Verdict(NONFACTUAL, CONTRADICTED, best, (), reason)
    return Verdict(
        NONFACTUAL, NOT_ENOUGH_EVIDENCE, best, (), f"no passage entails it (best {best:.2f})"
    )


# --- the judge ---------------------------------------------------------------


class NliJudge:
    """A sequence-classification NLI model on the CPU, batched over a call's pairs."""

    def __init__(
        self,
        name: str,
        tokenizer: Any,
        model: Any,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_tokens: int | None = None,
        threshold_source: str = DEFAULT_CUT,
    ) -> None:
        self.name = f"nli:{name}"
        self.labels = label_map(model.config.id2label, name)
        self.tokenizer = tokenizer
        self.model = model
        self.threshold = threshold
        #: The same cut in every setting (0.5, the option ``threshold``, or --judge-threshold).
        self.cuts = Cuts.same(threshold, threshold_source)
        self.batch_size = batch_size
        #: Padded tokens a batch may hold (None: only ``batch_size`` limits it).
        self.batch_tokens = batch_tokens
        self.max_length = model_window(tokenizer, model.config)
        self.special_tokens = int(tokenizer.num_special_tokens_to_add(pair=True))
        if self.max_length - self.special_tokens < 8:
            raise UsageError(
                f"--judge {self.name}: the model's window ({self.max_length} tokens) is too small"
            )
        self.method = (
            f"NLI cross-encoder {name}: premise = evidence window "
            f"(<= {self.max_length} tokens), hypothesis = segment; max entailment over windows"
            f", supported at >= {threshold:g}"
        )

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        """One verdict per item; all (window, segment) pairs go through the model together."""
        verdicts: list[Verdict | None] = [None] * len(items)
        rows: dict[tuple[str, str], int] = {}
        plan: list[tuple[int, list[list[int]]]] = []
        pieces_cache: dict[str, list[_Piece]] = {}
        for n, item in enumerate(items):
            hypothesis = item.segment.text
            if not has_claim(hypothesis):
                verdicts[n] = Verdict(FACTUAL, NO_CLAIM, 1.0, (), "no factual claim to check")
                continue
            if not item.evidence:
                verdicts[n] = decide([], self.threshold)
                continue
            hyp_tokens = len(self._token_ids(hypothesis))
            per_passage = []
            for ev in item.evidence:
                windows = self.windows(ev.text, hyp_tokens, pieces_cache)
                per_passage.append([rows.setdefault((w, hypothesis), len(rows)) for w in windows])
            plan.append((n, per_passage))
        probs = self.predict(list(rows))
        for n, per_passage in plan:
            scores = [
                PassageScore(
                    max((probs[r][0] for r in passage_rows), default=0.0),
                    max((probs[r][1] for r in passage_rows), default=0.0),
                )
                for passage_rows in per_passage
            ]
            verdicts[n] = decide(scores, self.threshold)
        return [v for v in verdicts if v is not None]

    def windows(
        self, premise: str, hypothesis_tokens: int, cache: dict[str, list[_Piece]] | None = None
    ) -> list[str]:
        """The premise as one window, or cut into overlapping windows that fit the model."""
        room = self.max_length - self.special_tokens
        # A very long segment gets at most half the window; the tokenizer trims the rest.
        budget = room - min(hypothesis_tokens, room // 2)
        pieces = cache.get(premise) if cache is not None else None
        if pieces is None:
            pieces = self._pieces(premise)
            if cache is not None:
                cache[premise] = pieces
        if not pieces:
            return []
        if sum(p.tokens for p in pieces) <= budget:
            return [premise]
        spans = window_spans(
            [p.tokens for p in pieces],
            [p.starts_word for p in pieces],
            budget,
            int(budget * _OVERLAP),
        )
        return [premise[pieces[i].start : pieces[j - 1].end] for i, j in spans]

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, float]]:
        """(entailment, contradiction) probabilities for (premise, hypothesis) pairs."""
        import torch

        from .batching import run_batches

        if not pairs:
            return []
        # Tokenized once, unpadded; each sorted batch is padded to its own longest pair.
        encoded = self.tokenizer(
            [p for p, _ in pairs],
            [h for _, h in pairs],
            padding=False,
            truncation="longest_first",
            max_length=self.max_length,
            verbose=False,
        )
        entail, contra = self.labels.entailment, self.labels.contradiction

        def forward(inputs: dict[str, Any]) -> Any:
            return torch.softmax(self.model(**inputs).logits.float(), dim=-1)

        rows = run_batches(
            encoded,
            self.tokenizer,
            forward,
            device=self.model.device,
            batch_size=self.batch_size,
            batch_tokens=self.batch_tokens,
        )
        return [(p[entail], p[contra] if contra is not None else 0.0) for p in rows]

    def _token_ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    def _pieces(self, text: str) -> list[_Piece]:
        if getattr(self.tokenizer, "is_fast", False):
            # verbose=False: a long passage is expected here, not worth a warning.
            encoded = self.tokenizer(
                text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
            )
            offsets = encoded["offset_mapping"]
            pieces, prev_end = [], -1
            for start, end in offsets:
                if end <= start:
                    continue
                pieces.append(_Piece(start, end, 1, prev_end < 0 or start > prev_end))
                prev_end = end
            return pieces
        # Slow tokenizers give no offsets: count tokens word by word instead.
        words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
        if not words:
            return []
        counts = self.tokenizer(
            [text[s:e] for s, e in words], add_special_tokens=False, verbose=False
        )
        return [
            _Piece(s, e, max(1, len(ids)), True) for (s, e), ids in zip(words, counts["input_ids"])
        ]


# --- loading -----------------------------------------------------------------


@lru_cache(maxsize=2)
def _load(
    location: str, device: str = "cpu", precision: str = "float32", kernels: str = "onednn"
) -> tuple[Any, Any]:
    # Loading costs seconds; a test session or an eval over several files
    # loads each model once.
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        with library_bars_off():
            tokenizer = AutoTokenizer.from_pretrained(location, local_files_only=True)
            model, info = AutoModelForSequenceClassification.from_pretrained(
                location, local_files_only=True, output_loading_info=True
            )
    except Exception as exc:  # noqa: BLE001 - transformers and safetensors raise many kinds
        if isinstance(exc, MemoryError):
            raise
        # What is on disk (or not there) is the caller's to fix: a usage error.
        if Path(location).is_dir():
            from .crossenc import model_folder_problem, weights_file

            folder = Path(location)
            problem = model_folder_problem(folder) or _one_line(exc)
            raise UsageError(f"{weights_file(folder)}: cannot load NLI model: {problem}") from None
        raise UsageError(
            f"cannot load NLI model {location!r}: not a local directory and not in the "
            "local Hugging Face cache (models are never downloaded at run time); "
            "pass the path of a local copy, which works offline"
        ) from None
    untrained = sorted(set(info.get("missing_keys", ())) | set(info.get("mismatched_keys", ())))
    if untrained:
        # transformers fills a missing head with random weights: every verdict
        # would be noise, so refuse rather than judge.
        raise UsageError(
            f"--judge nli:{location}: the model has no trained classification head "
            f"(initialized at random: {', '.join(map(str, untrained))}); an NLI judge needs "
            "a sequence-classification model fine-tuned for NLI, e.g. an MNLI cross-encoder"
        )
    import torch

    if model.dtype != torch.float32:
        # A checkpoint stored in half precision computes as asked, float32 by default.
        model = model.float()
    return tokenizer, for_inference(model, precision, kernels, device, location)


def create(arg: str, options: Mapping[str, Any]) -> NliJudge:
    """Create the judge for ``--judge nli:MODEL``.

    Options: ``threshold`` (entailment/contradiction probability, default
    0.5), ``batch_size`` (pairs per model call, default 16), ``batch_tokens``
    (padded tokens per model call, default 2,048 on a CPU, none on a GPU) and
    ``device`` (``cpu``, ``cuda`` or ``auto``; default ``cpu``).
    """
    threshold = _option(options, "threshold", DEFAULT_THRESHOLD, float, arg)
    batch_size = _option(options, "batch_size", DEFAULT_BATCH_SIZE, int, arg)
    if not 0.0 <= threshold <= 1.0:
        raise UsageError(f"--judge nli:{arg}: threshold must be in [0, 1], not {threshold}")
    cut = one_cut(threshold, DEFAULT_CUT if threshold == DEFAULT_THRESHOLD
                  else "the judge option threshold", options)
    if batch_size < 1:
        raise UsageError(f"--judge nli:{arg}: batch_size must be at least 1, not {batch_size}")
    path = Path(arg).expanduser()
    if path.exists() and not path.is_dir():
        raise UsageError(f"--judge nli:{arg}: a local model must be a directory")
    location = str(path.resolve()) if path.exists() else arg
    if not path.exists():
        from ...hub import cached_snapshot, resolve

        # An alias of `ceg models list` (nli:deberta-v3-large-nli) names a hub model.
        snapshot = cached_snapshot(arg)
        location = str(snapshot) if snapshot is not None else resolve(arg)
    from ...index.dense.devices import resolve_device
    from .batching import batch_tokens_option

    device = resolve_device(str(options.get("device", "cpu")))
    batch_tokens = batch_tokens_option(options, device, f"nli:{arg}")
    precision = precision_option(options, device, f"nli:{arg}")
    kernels = kernels_option(options, f"nli:{arg}")
    tokenizer, model = _load(location, device, precision, kernels)
    return NliJudge(
        arg,
        tokenizer,
        model,
        threshold=cut.value,
        batch_size=batch_size,
        batch_tokens=batch_tokens,
        threshold_source=cut.source,
    )


def _option(options: Mapping[str, Any], key: str, default: Any, kind: type, arg: str) -> Any:
    value = options.get(key)
    if value is None:
        return default
    try:
        return kind(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--judge nli:{arg}: {key} must be a number, not {value!r}") from exc


def _one_line(exc: BaseException) -> str:
    """The whole message on one line (transformers' first line can end mid-sentence)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
