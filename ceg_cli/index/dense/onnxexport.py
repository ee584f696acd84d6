"""ONNX exports of sentence-transformers models, for the ONNX backends
(``embedding.OnnxEmbedder``): exported once, cached under ``$CEG_CACHE_DIR/onnx/``,
keyed by the weights' digest.
"""

from __future__ import annotations

import hashlib
import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

#: The cache folder's subfolder of ONNX exports, one folder per weights digest.
ONNX_DIR = "onnx"
#: The kind of cache entry an export folder is (its ``cachedir`` marker).
ONNX_KIND = "onnx-export"
_ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_export(model: Any, location: str, *, quantized: bool) -> Path:
    """The ONNX file of ``model``'s transformer, exported once and cached.

    The key is the digest of the weight files and the torch and ONNX Runtime
    versions, so a changed model or exporter never reuses a stale file. Written
    to a temporary name and renamed, so two builds at once never read half a file.
    """
    import onnxruntime
    import torch

    from ...cachedir import cache_root, write_entry_marker

    key = hashlib.sha256(
        f"{_weights_digest(location)} torch {torch.__version__} "
        f"onnxruntime {onnxruntime.__version__}".encode()
    ).hexdigest()[:24]
    folder = cache_root() / ONNX_DIR / key
    path = folder / ("model-int8.onnx" if quantized else "model.onnx")
    if path.exists():
        os.utime(path)  # used now: ``ceg cache prune`` dates an export by its use
        return path
    folder.mkdir(parents=True, exist_ok=True)
    write_entry_marker(folder, ONNX_KIND)  # ``ceg cache prune`` removes only marked folders
    float_path = folder / "model.onnx"
    if not float_path.exists():
        _export_float(model, float_path)
    if quantized:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        # Per channel: per-tensor int8 weights fall under 0.99 cosine with the
        # float model on real passages (benchmarks/build/embed_speed.py).
        with _library_noise_hidden():
            quantize_dynamic(str(float_path), str(tmp), weight_type=QuantType.QInt8,
                             per_channel=True)
        os.replace(tmp, path)
    return path


@contextmanager
def _library_noise_hidden() -> Iterator[None]:
    """Hide what the exporter and the quantizer say about their own work.

    torch's tracer warns about the model's code (TracerWarning, advanced
    indexing) and ONNX Runtime's quantizer logs advice to the root logger:
    nothing a user of ceg can act on, and it came through ``--quiet``. Worse,
    that log call set up the root logger for the rest of the process (so a
    library's DEBUG lines came out after it): a handler that drops records
    keeps it from doing so. Both are put back as they were.
    """
    root = logging.getLogger()
    dropped = logging.NullHandler()
    root.addHandler(dropped)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.removeHandler(dropped)


def _export_float(model: Any, path: Path) -> None:
    import copy

    import torch

    # A copy is tokenized with and traced: the loaded model and its tokenizer are
    # shared by every torch embedder of the process, and an index built after an
    # export in the same process got other vectors (cosine 0.96 with those of a
    # build without one: tests/test_embed_backends.py).
    model = copy.deepcopy(model)

    class _Hidden(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    tokenize = getattr(model, "preprocess", None) or model.tokenize
    sample = tokenize(["an example passage", "another, longer example passage to pad"])
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_ONNX_INPUTS, "hidden")}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with torch.no_grad(), _library_noise_hidden():
        torch.onnx.export(
            _Hidden(model[0].auto_model.eval()),
            tuple(sample[k] for k in _ONNX_INPUTS),
            str(tmp),
            input_names=list(_ONNX_INPUTS),
            output_names=["hidden"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    os.replace(tmp, path)


@lru_cache(maxsize=4)
def _weights_digest(location: str) -> str:
    # Reads every weight file (90 MB for the default model): once per process.
    digest = hashlib.sha256()
    for file in sorted(Path(location).glob("*.safetensors")) or sorted(
        Path(location).glob("*.bin")
    ):
        with open(file, "rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()
