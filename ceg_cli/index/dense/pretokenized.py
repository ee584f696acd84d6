"""Tokenizing in reader processes, the model's forward pass on their token ids.

On a fast device the model waits on the work in front of it: reading,
chunking and above all tokenizing, which ``SentenceTransformer.encode`` does in
the one process that also drives the model. With ``--workers N`` the reader
processes also tokenize (``tokenize``, with the model's own fast tokenizer,
which imports neither torch nor transformers), and this process only pads
batches of similar length and runs the model (``forward``).

Only where that gives the model's own token ids: ``tokenizer_state`` checks the
standalone tokenizer against the model's ``preprocess`` on probe texts and
says ``None`` (tokenize here, as before) for a model whose tokenizer is not a
fast one, whose inputs are other than ids, mask and token types, or whose ids
differ. Vectors then agree with ``encode``'s to the last float bits that
batching changes (``tests/test_pretokenized.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..layout import embed_text

if TYPE_CHECKING:
    import numpy as np

    from ...types import Chunk

__all__ = [
    "TokenizerState", "embed_passages", "forward", "state_of", "tokenize", "tokenizer_state",
]

#: Texts the standalone tokenizer must split exactly as the model does before
#: it is trusted: spaces around, case, accents, CJK, digits, past the length limit.
PROBES = (
    "  Abraham Lincoln was born on February 12, 1809, in Hodgenville, Kentucky.  ",
    "Ærøskøbing — Æsir; naïve café façade: Ångström (Å) 1,000.5 km²",
    "北京是中华人民共和国的首都。 東京 ソウル",
    "tab\tseparated\nand new-lined TEXT, with URLs like https://en.wikipedia.org/wiki/X_(y)",
    "word " * 600,
    "",
)
_INPUTS = frozenset({"input_ids", "attention_mask", "token_type_ids"})


@dataclass(frozen=True)
class TokenizerState:
    """What a reader process needs to tokenize as the model does (picklable)."""

    json: str  # the fast tokenizer, serialized by the ``tokenizers`` library
    max_length: int
    digest: str  # of ``json``: a process loads each tokenizer once
    pad_id: int
    inputs: tuple[str, ...]  # the model's input names, as ``preprocess`` gives them


def tokenizer_state(model: Any) -> TokenizerState | None:
    """The state to tokenize for sentence-transformers ``model`` elsewhere, or None.

    None where the standalone tokenizer would not give the model's own inputs
    on ``PROBES``: the caller then tokenizes in this process, as ``encode`` does.
    """
    tokenizer = getattr(model[0], "tokenizer", None) if len(model) else None
    backend = getattr(tokenizer, "backend_tokenizer", None)
    max_length = int(getattr(model, "max_seq_length", 0) or 0)
    if backend is None or max_length <= 0:
        return None
    preprocess = getattr(model, "preprocess", None) or model.tokenize
    expected = preprocess(list(PROBES))
    inputs = tuple(sorted(k for k, v in expected.items() if hasattr(v, "shape")))
    pad_id = getattr(tokenizer, "pad_token_id", None)
    if not _INPUTS >= set(inputs) or "input_ids" not in inputs or pad_id is None:
        return None
    text = backend.to_str()
    state = TokenizerState(
        text, max_length, hashlib.sha256(text.encode()).hexdigest(), int(pad_id), inputs
    )
    if "token_type_ids" in expected and bool(expected["token_type_ids"].any()):
        return None
    mine = tokenize(state, PROBES)
    for row, ids in enumerate(mine):
        length = int(expected["attention_mask"][row].sum())
        if expected["input_ids"][row][:length].tolist() != ids.tolist():
            return None
    return state


def state_of(embedder: Any) -> TokenizerState | None:
    """An embedder's ``tokenizer_state()`` where it has one (the torch backend), else None."""
    ask = getattr(embedder, "tokenizer_state", None)
    return ask() if ask is not None else None


def embed_passages(
    embedder: Any, chunks: Sequence[Chunk], ids: Sequence[np.ndarray] | None, embed_as: str
) -> np.ndarray:
    """The vectors of a build's ``chunks``: from their token ids where the reader
    gave them, else from their text (``embed_as``: meta.json's ``embed_text``)."""
    if ids is not None:
        return embedder.embed_tokens(ids)
    return embedder.embed([embed_text(c, embed_as) for c in chunks])


_LOADED: dict[str, Any] = {}


def tokenize(state: TokenizerState, texts: Sequence[str]) -> list[np.ndarray]:
    """Each text's token ids (int32, unpadded, truncated to the model's limit)."""
    import numpy as np

    tokenizer = _LOADED.get(state.digest)
    if tokenizer is None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(state.json)
        tokenizer.no_padding()
        tokenizer.enable_truncation(state.max_length)
        _LOADED.clear()  # one model per build
        _LOADED[state.digest] = tokenizer
    # sentence-transformers strips each text before its tokenizer sees it.
    encoded = tokenizer.encode_batch([t.strip() for t in texts])
    return [np.asarray(e.ids, dtype=np.int32) for e in encoded]


def forward(
    model: Any, state: TokenizerState, ids: Sequence[np.ndarray], *, batch_size: int
) -> np.ndarray:
    """Normalized sentence embeddings of token id rows, as ``encode`` gives for their texts.

    Rows go longest first in batches of ``batch_size``, so a batch pads little;
    the vectors come back in the order given.
    """
    import numpy as np
    import torch

    device = model.device
    out: np.ndarray | None = None
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            width = max(1, max(len(ids[i]) for i in rows))
            tokens = np.full((len(rows), width), state.pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                tokens[r, : len(ids[i])] = ids[i]
                mask[r, : len(ids[i])] = 1
            given = {"input_ids": tokens, "attention_mask": mask, "token_type_ids": mask * 0}
            features = {k: _to(torch.from_numpy(given[k]), device) for k in state.inputs}
            pooled = model(features)["sentence_embedding"]
            vectors = torch.nn.functional.normalize(pooled.float(), dim=1).cpu().numpy()
            if out is None:
                out = np.zeros((len(ids), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
    if out is None:
        return np.zeros((0, 0), dtype=np.float32)
    return out


def _to(tensor: Any, device: Any) -> Any:
    # Pinned memory lets the copy to a GPU overlap the previous batch's compute.
    if getattr(device, "type", str(device)) == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor
