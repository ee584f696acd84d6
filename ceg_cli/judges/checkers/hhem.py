"""The ``hhem:ALIAS|DIR`` judge: Vectara's HHEM-2.1-open, run from its weights.

HHEM's hub repository (vectara/hallucination_evaluation_model) ships its model
as Python code to be executed (``trust_remote_code``): ``modeling_hhem_v2.py``
and ``configuration_hhem_v2.py``. ceg executes none of it. What that code does,
read in its ``HHEMv2ForSequenceClassification.predict``:

- the prompt is the config's ``prompt`` (by default
  ``"<pad> Determine if the hypothesis is true given the premise?\\n\\nPremise:
  {text1}\\n\\nHypothesis: {text2}"``) with text1 = the premise, text2 = the
  hypothesis, tokenized by the *foundation*'s tokenizer (``google/flan-t5-base``,
  named in the config's ``foundation``), padded, never truncated;
- the model is a ``T5ForTokenClassification`` of the foundation's T5 config,
  whose weights are the repository's ``model.safetensors`` under the prefix
  ``t5.``;
- the score is the softmax of the first token's logits, class 1 (consistent).

Here the same modules are built from transformers' own T5 classes and the
weights loaded into them, so no code from the model repository runs. Pairs
from every segment of a call are sorted by length and run in batches
(judges/checkers/batching.py, shared with MiniCheck and the NLI judge).

The premise is the segment's evidence, passages in rank order, one per line;
HHEM reads it whole (it has no window), so a supported segment cites every
passage. Supported when the score is above 0.5.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...claims import has_claim
from ...errors import UsageError
from ...types import (
    FACTUAL,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    SUPPORTED,
    JudgeItem,
    Verdict,
)
from ..cuts import Cuts, one_cut
from ..english_only import EnglishOnly
from .precision import for_inference, kernels_option, precision_option

__all__ = ["DEFAULT_PROMPT", "HhemJudge", "create", "load_hhem"]

DEFAULT_PROMPT = (
    "<pad> Determine if the hypothesis is true given the premise?\n\n"
    "Premise: {text1}\n\nHypothesis: {text2}"
)
DEFAULT_FOUNDATION = "google/flan-t5-base"
THRESHOLD = 0.5
#: Where that cut comes from, as a run shows it.
AUTHORS_CUT = "HHEM's authors"
DEFAULT_BATCH_SIZE = 16


class HhemJudge:
    """HHEM's T5 encoder and classifier over batches of (premise, hypothesis) prompts."""

    def __init__(
        self,
        name: str,
        tokenizer: Any,
        model: Any,
        prompt: str,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_tokens: int | None = None,
        threshold: float = THRESHOLD,
        threshold_source: str = AUTHORS_CUT,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.name = f"hhem:{name}"
        # Trained and measured on English: other languages are said once.
        self.english_only = EnglishOnly(self.name, on_warning)
        self.tokenizer = tokenizer
        self.model = model
        self.prompt = prompt
        self.batch_size = batch_size
        #: Padded tokens a batch may hold (None: only ``batch_size`` limits it).
        self.batch_tokens = batch_tokens
        self.threshold = threshold
        #: The same cut in every setting (the authors' 0.5, or --judge-threshold).
        self.cuts = Cuts.same(threshold, threshold_source)
        self.method = (
            f"HHEM-2.1-open {name}: premise = the evidence, hypothesis = the segment, "
            f"in HHEM's prompt; supported above {threshold:g}"
        )

    def prompt_text(self, premise: str, hypothesis: str) -> str:
        return self.prompt.format(text1=premise, text2=hypothesis)

    def encode(self, pairs: Sequence[tuple[str, str]]) -> list[list[int]]:
        texts = [self.prompt_text(p, h) for p, h in pairs]
        return [list(x) for x in self.tokenizer(texts, verbose=False)["input_ids"]]

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """HHEM's consistency score for each (premise, hypothesis) pair."""
        import torch

        from .batching import run_batches

        def forward(inputs: dict[str, Any]) -> Any:
            logits = self.model(**inputs).logits[:, 0, :]
            return torch.softmax(logits.float(), dim=-1)[:, 1:2]

        if not pairs:
            return []
        rows = run_batches(
            {"input_ids": self.encode(pairs)},
            self.tokenizer,
            forward,
            device=self.model.device,
            batch_size=self.batch_size,
            batch_tokens=self.batch_tokens,
        )
        return [float(row[0]) for row in rows]

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        self.english_only.check(items)
        verdicts: list[Verdict | None] = [None] * len(items)
        rows: dict[tuple[str, str], int] = {}
        plan: list[tuple[int, int, int]] = []
        for n, item in enumerate(items):
            hypothesis = item.segment.text
            if not has_claim(hypothesis):
                verdicts[n] = Verdict(FACTUAL, NO_CLAIM, 1.0, (), "no factual claim to check")
                continue
            premise = "\n".join(ev.text for ev in item.evidence)
            if not premise.strip():
                verdicts[n] = Verdict(
                    NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.0, (), "no evidence was retrieved"
                )
                continue
            row = rows.setdefault((premise, hypothesis), len(rows))
            plan.append((n, row, len(item.evidence)))
        scores = self.scores(list(rows))
        for n, row, passages in plan:
            score = scores[row]
            if score > self.threshold:
                verdicts[n] = Verdict(
                    FACTUAL,
                    SUPPORTED,
                    round(score, 4),
                    tuple(range(passages)),
                    f"HHEM consistency {score:.3f} over the evidence",
                )
            else:
                verdicts[n] = Verdict(
                    NONFACTUAL,
                    NOT_ENOUGH_EVIDENCE,
                    round(score, 4),
                    (),
                    f"HHEM consistency {score:.3f}, needs > {self.threshold:g}",
                )
        return [v for v in verdicts if v is not None]


def _foundation_dir(foundation: str, location: str) -> str:
    from ...hub import cached_snapshot

    path = Path(foundation).expanduser()
    if path.is_dir():
        return str(path)
    snap = cached_snapshot(foundation, weights=False)
    if snap is None:
        raise UsageError(
            f"--judge hhem:{location}: HHEM reads the tokenizer and T5 config of "
            f"{foundation}, which is not in the Hugging Face cache; run: "
            f"ceg models pull hhem-2.1-open (it pulls both)"
        )
    return str(snap)


@lru_cache(maxsize=2)
def load_hhem(location: str, device: str = "cpu", precision: str = "float32",
              kernels: str = "onednn") -> tuple[Any, Any, str]:
    """(tokenizer, T5ForTokenClassification, prompt) from an HHEM folder, no remote code."""
    from transformers import AutoTokenizer, T5Config, T5ForTokenClassification

    folder = Path(location)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{folder / 'config.json'}: cannot read HHEM's config: {exc}") from None
    weights = folder / "model.safetensors"
    if not weights.is_file():
        raise UsageError(f"{weights}: HHEM's weights are missing")
    foundation = _foundation_dir(str(config.get("foundation") or DEFAULT_FOUNDATION), location)
    prompt = str(config.get("prompt") or DEFAULT_PROMPT)
    try:
        tokenizer = AutoTokenizer.from_pretrained(foundation, local_files_only=True)
        t5_config = T5Config.from_pretrained(foundation, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds
        raise UsageError(
            f"{foundation}: cannot load HHEM's tokenizer or T5 config: {exc}"
        ) from None
    t5_config.num_labels = 2
    from safetensors.torch import load_file

    state = {
        k.removeprefix("t5."): v for k, v in load_file(str(weights)).items() if k.startswith("t5.")
    }
    model = T5ForTokenClassification(t5_config)
    missing, _unexpected = model.load_state_dict(state, strict=False)
    # The encoder's embedding is the shared one (tied); either name may be stored.
    missing = [
        k
        for k in missing
        if k not in {"transformer.shared.weight", "transformer.encoder.embed_tokens.weight"}
    ]
    if missing or not state:
        raise UsageError(
            f"{weights}: not HHEM's weights (missing {', '.join(missing[:3]) or 'everything'})"
        )
    model.tie_weights()
    return tokenizer, for_inference(model.float(), precision, kernels, device, location), prompt


def create(arg: str, options: Mapping[str, Any]) -> HhemJudge:
    """``--judge hhem:ALIAS|DIR``; options ``batch_size``, ``batch_tokens``, ``device``,
    ``precision`` (judges/checkers/precision.py) and ``kernels`` (judges/checkers/kernels.py)."""
    from ...index.dense.devices import resolve_device
    from .batching import batch_tokens_option
    from .minicheck import locate_model

    batch_size = int(options.get("batch_size") or DEFAULT_BATCH_SIZE)
    if batch_size < 1:
        raise UsageError(f"--judge hhem:{arg}: batch_size must be at least 1")
    device = resolve_device(str(options.get("device", "cpu")))
    batch_tokens = batch_tokens_option(options, device, f"hhem:{arg}")
    precision = precision_option(options, device, f"hhem:{arg}")
    location = locate_model(arg, "hhem")
    kernels = kernels_option(options, f"hhem:{arg}")
    cut = one_cut(THRESHOLD, AUTHORS_CUT, options)
    tokenizer, model, prompt = load_hhem(location, device, precision, kernels)
    return HhemJudge(
        arg, tokenizer, model, prompt, batch_size=batch_size, batch_tokens=batch_tokens,
        threshold=cut.value, threshold_source=cut.source,
        on_warning=options.get("on_warning"),
    )
