"""Tiny random checkers of MiniCheck's and HHEM's architectures, built offline.

RoBERTa, DeBERTa-v2 (v3's relative-attention settings) and T5 (Flan-T5's gated
feed-forward, untied output layer), with tokenizers trained here with the
``tokenizers`` library and wrapped as ``PreTrainedTokenizerFast``. Weights are
random (seeded): parity with a reference procedure does not depend on them, and
speed depends only on the sizes. Used by the judge tests and by
benchmarks/check/checker_speed.py.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

WORDS = (
    "the a of in on to and was is were born city river king queen paris london berlin "
    "rome museum painter composer wrote built founded war peace treaty signed year north "
    "south east west island mountain capital bridge tower church school university "
    "scientist discovered element award prize novel poem song film actor director "
    "population million thousand hundred first second third largest oldest famous "
    "ancient modern empire republic president minister army navy ship train station"
).split()


def sentences(n: int, seed: int = 0, words: tuple[int, int] = (6, 18)) -> list[str]:
    """``n`` random sentences over ``WORDS``, each capitalised and ending in a full stop."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        w = [rng.choice(WORDS) for _ in range(rng.randint(*words))]
        if rng.random() < 0.3:
            w.insert(rng.randrange(len(w)), str(rng.randint(1000, 2020)))
        out.append(" ".join(w).capitalize() + ".")
    return out


def _corpus() -> list[str]:
    return sentences(400, seed=1) + ["predict: " + s for s in sentences(40, seed=2)]


def _fast(tok: Any, **special: str) -> Any:
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok, **special)


def roberta_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer)
    tok.post_processor = processors.RobertaProcessing(
        ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>"))
    )
    return _fast(
        tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
        sep_token="</s>",
        cls_token="<s>",
    )


def wordpiece_tokenizer(specials: list[str], template: str, vocab: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    unk = next(s for s in specials if "unk" in s.lower())
    tok = Tokenizer(models.WordPiece(unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab, special_tokens=specials, show_progress=False
    )
    tok.train_from_iterator(_corpus(), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=template,
        special_tokens=[(s, tok.token_to_id(s)) for s in specials if s in template],
    )
    return tok


def deberta_tokenizer() -> Any:
    tok = wordpiece_tokenizer(["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"], "[CLS] $A [SEP]", 300)
    return _fast(
        tok,
        bos_token="[CLS]",
        eos_token="[SEP]",
        pad_token="[PAD]",
        unk_token="[UNK]",
        mask_token="[MASK]",
        sep_token="[SEP]",
        cls_token="[CLS]",
    )


def t5_tokenizer() -> Any:
    tok = wordpiece_tokenizer(["<pad>", "</s>", "<unk>"], "$A </s>", 250)
    return _fast(tok, eos_token="</s>", pad_token="<pad>", unk_token="<unk>")


def build(
    family: str,
    folder: Path,
    *,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 2,
    seed: int = 0,
    id2label: dict[int, str] | None = None,
) -> Path:
    """Save a random ``family`` checker (roberta, deberta-v2, t5) and its tokenizer."""
    import torch
    from transformers import (
        DebertaV2Config,
        DebertaV2ForSequenceClassification,
        RobertaConfig,
        RobertaForSequenceClassification,
        T5Config,
        T5ForConditionalGeneration,
    )

    torch.manual_seed(seed)
    labels = id2label or {0: "unsupported", 1: "supported"}
    common: dict[str, Any] = {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": hidden * 4,
        # Wider than the default 0.02 in the tiny models, so random heads give
        # scores that differ; at real sizes that width makes the activations blow
        # up, so there the default holds.
        "initializer_range": 0.3 if hidden <= 64 else 0.02,
        "id2label": labels,
        "label2id": {v: k for k, v in labels.items()},
    }
    if family == "roberta":
        tokenizer = roberta_tokenizer()
        tokenizer.model_max_length = 512
        config = RobertaConfig(
            vocab_size=len(tokenizer),
            max_position_embeddings=514,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            **common,
        )
        model: Any = RobertaForSequenceClassification(config)
    elif family == "deberta-v2":
        tokenizer = deberta_tokenizer()
        tokenizer.model_max_length = 2048
        config = DebertaV2Config(
            vocab_size=len(tokenizer),
            max_position_embeddings=512,
            pad_token_id=0,
            relative_attention=True,
            position_biased_input=False,
            max_relative_positions=-1,
            position_buckets=256,
            pos_att_type=["p2c", "c2p"],
            norm_rel_ebd="layer_norm",
            share_att_key=True,
            **common,
        )
        model = DebertaV2ForSequenceClassification(config)
    elif family == "t5":
        tokenizer = t5_tokenizer()
        tokenizer.model_max_length = 2048
        config = T5Config(
            vocab_size=256,
            d_model=hidden,
            d_kv=hidden // heads,
            d_ff=hidden * 2,
            num_layers=layers,
            num_decoder_layers=layers,
            num_heads=heads,
            feed_forward_proj="gated-gelu",
            tie_word_embeddings=False,
            decoder_start_token_id=0,
            pad_token_id=0,
            eos_token_id=1,
        )
        model = T5ForConditionalGeneration(config)
    else:
        raise ValueError(family)
    model.eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
