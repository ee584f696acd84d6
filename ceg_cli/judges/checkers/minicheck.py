"""The ``minicheck:ALIAS|DIR`` judge: MiniCheck run as its authors run it, batched.

Read from Liyan06/MiniCheck, ``minicheck/inference.py`` and ``minicheck/minicheck.py``
(commit e9fd26ef8e542ac4021fa9d4493bf915b2bd68dc):

- the document is split into sentences per line (NLTK Punkt on each
  ``\\n``-separated block, a ``"\\n"`` item between blocks) and packed greedily
  into chunks of at most 400 tokens (the tokenizer's count of each sentence,
  without special tokens) for RoBERTa and DeBERTa, 500 whitespace words for
  Flan-T5; a chunk is its sentences joined by spaces, ``" \\n "`` turned back into
  ``"\\n"``, stripped, and empty chunks dropped;
- each chunk is read as one string, chunk + the tokenizer's ``eos_token`` + claim
  (``"predict: "`` in front for Flan-T5), truncated at 512 tokens (RoBERTa) or
  2,048 (DeBERTa, Flan-T5);
- the encoders' support is the softmax's class 1; Flan-T5 is decoded one step
  from the start token 0 and support is the softmax over the logits of token ids
  3 (no) and 209 (yes), taking 209;
- a claim scores the maximum support over chunks, supported above 0.5.

What differs is only the schedule: the reference runs one claim at a time;
here every (chunk, claim) pair of a call is tokenized once, sorted by length
and run in batches under ``torch.inference_mode`` (judges/checkers/batching.py: at most
``batch_size`` pairs and, on a CPU, ``batch_tokens`` padded tokens a batch). The parity tests
(tests/test_judge_minicheck.py) hold ids, chunks and scores to the reference
loop within 1e-5.

The document is the segment's evidence, passages in rank order, one per line
(each passage's lines stay lines). A chunk's citations are the passages its
sentences came from; a supported segment cites the passages of every chunk
that supports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...claims import has_claim
from ...errors import UsageError
from ...progress import library_bars_off
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

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "THRESHOLD",
    "DocChunk",
    "MiniCheckJudge",
    "create",
    "doc_chunks",
    "hub_name",
    "locate_model",
    "sentences_with_newlines",
]

THRESHOLD = 0.5
#: Where that cut comes from, as a run shows it.
AUTHORS_CUT = "MiniCheck's authors"
DEFAULT_BATCH_SIZE = 16
#: The reference's chunk sizes: tokens for the encoders, words for Flan-T5.
ENCODER_CHUNK_TOKENS = 400
T5_CHUNK_WORDS = 500
#: The reference's input limits by family (``max_model_len``).
MAX_LENGTH = {"roberta": 512, "deberta-v2": 2048, "t5": 2048}
#: Flan-T5's label tokens: 3 is "no" (unsupported), 209 is "yes" (supported).
T5_LABEL_IDS = (3, 209)


def sentences_with_newlines(text: str) -> list[str]:
    """Punkt sentences of each line, with a ``"\\n"`` item between lines (the reference's
    ``sent_tokenize_with_newlines``)."""
    from ...sentences import punkt_tokenizer

    punkt = punkt_tokenizer()
    out: list[str] = []
    for block in text.split("\n"):
        out.extend(punkt.tokenize(block))
        out.append("\n")
    return out[:-1]


@dataclass(frozen=True)
class DocChunk:
    """A chunk of the document and the passages (0-based evidence ranks) it holds."""

    text: str
    passages: tuple[int, ...]


def doc_chunks(passages: Sequence[str], size: int, count: Any) -> list[DocChunk]:
    """The reference's chunks of the document ``"\\n".join(passages)``.

    ``count(sentences)`` gives each sentence's size (tokens or words), all at once. Splitting each
    passage apart gives the same sentence list as splitting the joined document
    (the reference splits per line first), and says which passage each came from.
    """
    sents: list[tuple[str, int | None]] = []
    for p, text in enumerate(passages):
        if p:
            sents.append(("\n", None))
        sents.extend((s, None if s == "\n" else p) for s in sentences_with_newlines(text))
    if not sents:
        sents = [("", None)]
    groups: list[list[tuple[str, int | None]]] = []
    current: list[tuple[str, int | None]] = []
    total = 0
    sizes = count([sentence for sentence, _ in sents])
    for (sentence, p), n in zip(sents, sizes):
        if total + n > size:
            groups.append(current)  # the reference yields even an empty first chunk
            current, total = [(sentence, p)], n
        else:
            current.append((sentence, p))
            total += n
    if current:
        groups.append(current)
    out = []
    for group in groups:
        text = " ".join(s for s, _ in group).replace(" \n ", "\n").strip()
        if text:
            out.append(DocChunk(text, tuple(sorted({p for _, p in group if p is not None}))))
    return out


class MiniCheckJudge:
    """A MiniCheck model (RoBERTa, DeBERTa-v2 or T5) over batches of (chunk, claim) pairs."""

    def __init__(
        self,
        name: str,
        tokenizer: Any,
        model: Any,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_tokens: int | None = None,
        threshold: float = THRESHOLD,
        threshold_source: str = AUTHORS_CUT,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        family = str(getattr(model.config, "model_type", ""))
        if family not in MAX_LENGTH:
            raise UsageError(
                f"--judge minicheck:{name}: a {family or 'unknown'} model is not a MiniCheck "
                f"family (roberta, deberta-v2, t5)"
            )
        if tokenizer.eos_token is None:
            raise UsageError(f"--judge minicheck:{name}: the tokenizer has no eos_token")
        self.name = f"minicheck:{name}"
        # Trained and measured on English: other languages are said once.
        self.english_only = EnglishOnly(self.name, on_warning)
        self.family = family
        self.seq2seq = family == "t5"
        self.tokenizer = tokenizer
        self.model = model
        self.batch_size = batch_size
        #: Padded tokens a batch may hold (None: only ``batch_size`` limits it).
        self.batch_tokens = batch_tokens
        self.threshold = threshold
        #: The same cut in every setting (the authors' 0.5, or --judge-threshold).
        self.cuts = Cuts.same(threshold, threshold_source)
        self.max_length = MAX_LENGTH[family]
        self.chunk_size = T5_CHUNK_WORDS if self.seq2seq else ENCODER_CHUNK_TOKENS
        unit = "words" if self.seq2seq else "tokens"
        self.method = (
            f"MiniCheck ({family}) {name}: evidence in chunks of {self.chunk_size} {unit}, "
            f"each read with the segment; max support over chunks, supported above "
            f"{threshold:g}"
        )

    # --- the reference's pieces ---------------------------------------------

    def count(self, sentences: Sequence[str]) -> list[int]:
        """Each sentence's size as the reference counts it, one tokenizer call for all."""
        if self.seq2seq:
            return [len(s.split()) for s in sentences]
        ids = self.tokenizer(
            list(sentences),
            padding=False,
            add_special_tokens=False,
            max_length=self.max_length,
            truncation=True,
            verbose=False,
        )["input_ids"]
        return [len(x) for x in ids]

    def chunks(self, passages: Sequence[str]) -> list[DocChunk]:
        return doc_chunks(passages, self.chunk_size, self.count)

    def input_text(self, chunk: str, claim: str) -> str:
        text = self.tokenizer.eos_token.join([chunk, claim])
        return "predict: " + text if self.seq2seq else text

    # --- scoring -------------------------------------------------------------

    def encode(self, pairs: Sequence[tuple[str, str]]) -> list[list[int]]:
        """The model's input ids for (chunk, claim) pairs, truncated as the reference does."""
        texts = [self.input_text(c, claim) for c, claim in pairs]
        encoded = self.tokenizer(
            texts, max_length=self.max_length, truncation=True, padding=False, verbose=False
        )
        return [list(x) for x in encoded["input_ids"]]

    def support(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The support probability of each (chunk, claim) pair, in sorted, budgeted batches."""
        import torch

        from .batching import run_batches

        def forward(inputs: dict[str, Any]) -> Any:
            if self.seq2seq:
                rows = len(inputs["input_ids"])
                start = torch.zeros((rows, 1), dtype=torch.long, device=self.model.device)
                logits = self.model(**inputs, decoder_input_ids=start).logits[
                    :, 0, list(T5_LABEL_IDS)
                ]
            else:
                logits = self.model(**inputs).logits
            return torch.softmax(logits.float(), dim=-1)[:, 1:2]

        if not pairs:
            return []
        ids = self.encode(pairs)
        rows = run_batches(
            {"input_ids": ids},
            self.tokenizer,
            forward,
            device=self.model.device,
            batch_size=self.batch_size,
            batch_tokens=self.batch_tokens,
        )
        return [float(row[0]) for row in rows]

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        """One verdict per item; every item's (chunk, claim) pairs run together."""
        self.english_only.check(items)
        verdicts: list[Verdict | None] = [None] * len(items)
        rows: dict[tuple[str, str], int] = {}
        plan: list[tuple[int, list[DocChunk], list[int]]] = []
        for n, claim, chunks in claims_and_chunks(items, self.chunks, verdicts):
            plan.append((n, chunks, [rows.setdefault((c.text, claim), len(rows)) for c in chunks]))
        probs = self.support(list(rows))
        for n, chunks, chunk_rows in plan:
            verdicts[n] = self.decide(chunks, [probs[r] for r in chunk_rows])
        return [v for v in verdicts if v is not None]

    def decide(self, chunks: Sequence[DocChunk], support: Sequence[float]) -> Verdict:
        best = max(range(len(support)), key=lambda i: support[i])
        score = float(support[best])
        supporting = [i for i, s in enumerate(support) if s > self.threshold]
        if supporting:
            cited = tuple(sorted({p for i in supporting for p in chunks[i].passages}))
            where = ", ".join(f"[{p + 1}]" for p in chunks[best].passages)
            plural = "s" if len(chunks[best].passages) > 1 else ""
            reason = f"support {score:.3f} from the chunk of passage{plural} {where}"
            return Verdict(FACTUAL, SUPPORTED, round(score, 4), cited, reason)
        return Verdict(
            NONFACTUAL,
            NOT_ENOUGH_EVIDENCE,
            round(score, 4),
            (),
            f"no chunk supports it (best support {score:.3f}, needs > {self.threshold:g})",
        )


def claims_and_chunks(
    items: Sequence[JudgeItem],
    chunker: Callable[[Sequence[str]], list[DocChunk]],
    verdicts: list[Verdict | None],
) -> list[tuple[int, str, list[DocChunk]]]:
    """Each item to score: its position, its claim and its evidence's chunks (cut once
    for each distinct evidence). An item with nothing to score gets its verdict in
    ``verdicts`` instead: no claim (supported, ``no_claim``) or no evidence."""
    out = []
    cache: dict[tuple[str, ...], list[DocChunk]] = {}
    for n, item in enumerate(items):
        claim = item.segment.text
        if not has_claim(claim):
            verdicts[n] = Verdict(FACTUAL, NO_CLAIM, 1.0, (), "no factual claim to check")
            continue
        passages = tuple(ev.text for ev in item.evidence)
        chunks = cache.get(passages)
        if chunks is None:
            chunks = cache[passages] = chunker(passages) if passages else []
        if not chunks:
            verdicts[n] = Verdict(
                NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.0, (), "no evidence was retrieved"
            )
            continue
        out.append((n, claim, chunks))
    return out


# --- loading -----------------------------------------------------------------


def locate_model(arg: str, prefix: str) -> str:
    """A local folder for ``arg``: a directory, or an alias / repo in the HF cache."""
    from ...hub import cache_dir, cached_snapshot, resolve

    path = Path(arg).expanduser()
    if path.is_dir():
        return str(path.resolve())
    if path.exists():
        raise UsageError(f"--judge {prefix}:{arg}: a local model must be a directory")
    if not hub_name(arg):
        # A path (/abs/x, ./x, ~/x, a/b/c): pulling it is no advice, the hub has no such name.
        raise UsageError(
            f"--judge {prefix}:{arg}: no such directory (a local model is a folder with "
            "config.json, the weights and the tokenizer's files)"
        )
    snapshot = cached_snapshot(arg)
    if snapshot is None:
        raise UsageError(
            f"--judge {prefix}:{arg}: {resolve(arg)} is not in the Hugging Face cache "
            f"{cache_dir()} and not a local directory (ceg never downloads at check time); "
            f"run: ceg models pull {arg}"
        )
    return str(snapshot)


def hub_name(arg: str) -> bool:
    """Whether ``arg`` can name a model on the hub (an alias or OWNER/NAME), not a path."""
    from ...hub import check_name

    if arg.startswith((".", "~", "/", "\\")) or "\\" in arg:
        return False
    try:
        check_name(arg)
    except UsageError:
        return False
    return True


@lru_cache(maxsize=2)
def _load(
    location: str, device: str, precision: str = "float32", kernels: str = "onednn"
) -> tuple[Any, Any]:
    from transformers import (
        AutoConfig,
        AutoModelForSeq2SeqLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
    )

    try:
        with library_bars_off():
            config = AutoConfig.from_pretrained(location, local_files_only=True)
            tokenizer = AutoTokenizer.from_pretrained(location, local_files_only=True)
            auto = (
                AutoModelForSeq2SeqLM
                if config.model_type == "t5"
                else AutoModelForSequenceClassification
            )
            model, info = auto.from_pretrained(
                location, local_files_only=True, output_loading_info=True
            )
    except Exception as exc:  # noqa: BLE001 - transformers and safetensors raise many kinds
        if isinstance(exc, MemoryError):
            raise
        text = str(exc).strip().splitlines()
        raise UsageError(
            f"{location}: cannot load the model: {text[0] if text else type(exc).__name__}"
        ) from None
    untrained = sorted(set(info.get("missing_keys", ())) | set(info.get("mismatched_keys", ())))
    # T5 ties its output layer to the embeddings: a missing lm_head is not untrained.
    untrained = [
        k for k in untrained if not str(k).startswith(("lm_head", "encoder.embed", "decoder.embed"))
    ]
    if untrained:
        raise UsageError(
            f"{location}: the model has weights initialized at random "
            f"({', '.join(map(str, untrained))}); a checker needs its trained head"
        )
    if config.model_type != "t5" and int(getattr(config, "num_labels", 0)) != 2:
        raise UsageError(
            f"{location}: a MiniCheck encoder has 2 labels (unsupported, supported); "
            f"this one has {getattr(config, 'num_labels', '?')}"
        )
    return tokenizer, for_inference(model, precision, kernels, device, location)


def create(arg: str, options: Mapping[str, Any]) -> MiniCheckJudge:
    """``--judge minicheck:ALIAS|DIR``; options ``batch_size``, ``batch_tokens``,
    ``device``, ``precision`` (judges/checkers/precision.py) and ``kernels``
    (judges/checkers/kernels.py)."""
    from ...index.dense.devices import resolve_device
    from .batching import batch_tokens_option

    batch_size = int(options.get("batch_size") or DEFAULT_BATCH_SIZE)
    if batch_size < 1:
        raise UsageError(f"--judge minicheck:{arg}: batch_size must be at least 1")
    device = resolve_device(str(options.get("device", "cpu")))
    batch_tokens = batch_tokens_option(options, device, f"minicheck:{arg}")
    precision = precision_option(options, device, f"minicheck:{arg}")
    location = locate_model(arg, "minicheck")
    kernels = kernels_option(options, f"minicheck:{arg}")
    cut = one_cut(THRESHOLD, AUTHORS_CUT, options)
    tokenizer, model = _load(location, device, precision, kernels)
    return MiniCheckJudge(
        arg, tokenizer, model, batch_size=batch_size, batch_tokens=batch_tokens,
        threshold=cut.value, threshold_source=cut.source, on_warning=options.get("on_warning"),
    )
