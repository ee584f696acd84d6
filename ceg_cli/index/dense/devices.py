"""Where and at what precision an embedder computes: ``--device`` and ``--precision``."""

from __future__ import annotations

from ...errors import UsageError

#: Where it computes: ``auto`` is CUDA when torch sees a CUDA device, else the CPU.
DEVICES = ("auto", "cpu", "cuda")
#: The float width of the model's weights and activations when it builds an
#: index: ``auto`` is float16 on CUDA, float32 on the CPU. float16 vectors
#: agree with float32's at cosine >= 0.99999 (measured min 0.9999986 on 301
#: sample passages, on the CPU; ``tests/test_precision.py``); float16 on the
#: CPU is refused: about 50 times slower there (141 s for those 301 passages).
PRECISIONS = ("auto", "float32", "float16")


def resolve_device(device: str) -> str:
    """``cpu`` or ``cuda`` for a ``--device`` value; ``cuda`` without CUDA is a usage error."""
    if device not in DEVICES:
        raise UsageError(f"--device {device}: choose one of {', '.join(DEVICES)}")
    if device == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if device == "cuda":
        raise UsageError(
            f"--device cuda: torch {torch.__version__} sees no CUDA device on this machine; "
            "use --device cpu (or auto)"
        )
    return "cpu"


def resolve_precision(precision: str, device: str) -> str:
    """``float32`` or ``float16`` for a ``--precision`` value on a resolved ``device``."""
    if precision not in PRECISIONS:
        raise UsageError(f"--precision {precision}: choose one of {', '.join(PRECISIONS)}")
    if precision == "auto":
        return "float16" if device == "cuda" else "float32"
    if precision == "float16" and device != "cuda":
        raise UsageError(
            "--precision float16 runs on CUDA only (on the CPU it is about 50 times slower "
            "than float32): use --device cuda, or leave --precision out"
        )
    return precision


def check_device(backend: str | None, device: str, precision: str) -> None:
    """Refuse what ``load_embedder`` would refuse of ``--device`` and ``--precision``,
    without loading the model: a build checks them before it takes its lock.

    ``backend`` None (the index's own on ``--append``) is checked as torch's.
    """
    if backend in (None, "torch"):
        resolve_precision(precision, resolve_device(device))
    else:
        _check_cpu_backend(backend, device, precision)


def _check_cpu_backend(backend: str, device: str, precision: str) -> None:
    if precision == "float16":
        raise UsageError(f"--precision float16 goes with --backend torch on CUDA, not {backend}")
    if device == "cuda":
        raise UsageError(
            f"--backend {backend} runs on the CPU only: use --device cpu or auto, "
            "or --backend torch for CUDA"
        )
