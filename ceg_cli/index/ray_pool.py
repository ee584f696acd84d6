"""What the engines on Ray share: installing Ray, asking for resources, errors.

``ray`` is an optional dependency (``pip install 'ceg-cli[ray]'``): it is
imported by ``require_ray``, and only when a run on Ray starts.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import BackendError, CegError, UsageError

INSTALL_HINT = "pip install 'ceg-cli[ray]'"
#: Times Ray restarts a worker whose process died, redoing its ranges.
MAX_RESTARTS = 3
#: Seconds the workers have to start (scheduling, loading the model).
START_TIMEOUT_S = 600.0


def require_ray() -> Any:
    """The ``ray`` module, or a ``UsageError`` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError(
            f"--engine ray needs Ray, which is not installed here: {INSTALL_HINT}"
        ) from None
    return ray


def _get(ray: Any, ref: Any) -> Any:
    """``ray.get``, with a worker's own error (a ``CegError``) raised as itself."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, CegError):
            raise type(cause)(str(cause)) from None
        raise
    except ray.exceptions.RayActorError as exc:
        raise BackendError(
            f"a Ray worker died (restarted up to {MAX_RESTARTS} times, or failed to start): "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None


def _share(amount: float) -> float:
    """A resource request Ray can grant: two decimals, rounded down, at least 0.01."""
    return max(0.01, math.floor(amount * 100) / 100)


def _placements(ray: Any, workers: int | None, resources: dict[str, float],
                gpus: int) -> list[dict[str, Any]]:
    """The resources and scheduling of each worker to start (see ``_start_workers``)."""
    nodes = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU", 0) > 0]
    if workers is None and not gpus and nodes:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return [{"num_cpus": _share(n["Resources"]["CPU"]), "num_gpus": 0,
                 "scheduling_strategy": NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)}
                for n in nodes]
    count = workers or gpus or 1
    most = max((n["Resources"]["CPU"] for n in nodes), default=1.0)
    cpus = _share(min(resources.get("CPU", 1) / count, most))
    # More workers than GPUs share them (each model is small beside a GPU's memory).
    gpu_share = _share(min(1.0, gpus / count)) if gpus else 0
    return [{"num_cpus": cpus, "num_gpus": gpu_share, "scheduling_strategy": "SPREAD"}
            for _ in range(count)]
