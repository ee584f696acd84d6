"""What the engines on Ray share: installing Ray, asking for resources, errors.

``ray`` is an optional dependency (``pip install 'ceg-cli[ray]'``): it is
imported by ``require_ray``, and only when a run on Ray starts.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from ...errors import BackendError, CegError, UsageError

INSTALL_HINT = "pip install 'ceg-cli[ray]'"
#: Times Ray restarts a worker whose process died, redoing its ranges.
MAX_RESTARTS = 3
#: Seconds the workers have to start (scheduling, loading the model).
START_TIMEOUT_S = 600.0

P = TypeVar("P")


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
    """``ray.get``, with a worker's own error raised as itself (as it would be raised
    here), not wrapped in Ray's, with the worker's traceback in its message."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, CegError):
            raise type(cause)(str(cause)) from None
        if isinstance(cause, Exception):
            raise cause from None
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


def cap_workers(workers: int | None, resources: dict[str, float],
                warn: Callable[[str], None]) -> int | None:
    """``workers``, at most the cluster's CPUs (saying so): each worker loads a model, and
    hundreds of them asked for hundredths of a CPU each took a machine's memory whole
    (issue 34)."""
    cpus = int(resources.get("CPU", 0))
    if workers is not None and cpus >= 1 and workers > cpus:
        warn(f"--workers {workers}: the Ray cluster has {cpus} CPU{'s' if cpus != 1 else ''}; "
             f"starting {cpus} worker{'s' if cpus != 1 else ''}")
        return cpus
    return workers


def launch(ray: Any, cls: type, args: list[tuple[Any, ...]], places: list[dict[str, Any]],
           threads: int) -> list[Any]:
    """One actor of ``cls`` per place (its resources and scheduling), built with its
    ``args``; Ray restarts one whose process dies and redoes its calls (``MAX_RESTARTS``).
    ``threads``: the calls an actor runs at once (``max_concurrency``)."""
    restarts = {"max_restarts": MAX_RESTARTS, "max_task_retries": MAX_RESTARTS}
    remote = ray.remote(cls)
    return [remote.options(**place, **restarts, max_concurrency=threads).remote(*arg)
            for place, arg in zip(places, args)]


def wait_started(ray: Any, actors: list[Any], places: list[dict[str, Any]],
                 resources: dict[str, float], probe: str = "where") -> list[Any]:
    """Each actor's answer to ``probe`` once all have started (loaded their model), or a
    ``BackendError`` saying what they asked for, the actors killed."""
    probes = [getattr(a, probe).remote() for a in actors]
    ready, _ = ray.wait(probes, num_returns=len(probes), timeout=START_TIMEOUT_S)
    if len(ready) < len(probes):
        for actor in actors:
            ray.kill(actor)
        gpus = int(resources.get("GPU", 0))
        asks = f"{places[0]['num_cpus']} CPUs" + (
            f" and {places[0]['num_gpus']} GPU" if places[0].get("num_gpus") else "")
        raise BackendError(
            f"only {len(ready)} of {len(places)} Ray workers started in {START_TIMEOUT_S:.0f} s "
            f"(each asks for {asks}; the cluster has {resources.get('CPU', 0):g} CPUs, "
            f"{gpus} GPUs): ask for fewer with --workers"
        )
    return [_get(ray, ref) for ref in probes]


def in_order(
    ray: Any,
    actors: list[Any],
    parts: Iterable[tuple[int, P]],
    submit: Callable[[Any, int, P], Any],
    *,
    per_actor: int = 2,
    every: float | None = None,
    on_idle: Callable[[], None] | None = None,
) -> Iterator[tuple[int, P, Any]]:
    """(number, part, result) of each of ``parts``, in their order, with at most
    ``per_actor`` parts per actor in flight: a worker has its next part at hand while the
    driver stores a result, and memory stays bounded, whatever the number of parts.

    ``submit(actor, number, part)`` starts one (an object ref); the least loaded actor
    gets the next part. ``parts`` is read only as far as they are sent. A part's
    result is fetched when its turn comes, so an error (raised as ``_get`` raises it)
    stops the run after every part before it was taken. While none finishes,
    ``on_idle`` is called every ``every`` seconds.
    """
    limit = per_actor * len(actors)
    load = [0] * len(actors)
    waiting: deque[tuple[int, P, Any, int]] = deque()  # in order: number, part, ref, actor
    done: set[Any] = set()
    source = iter(parts)
    more = True
    while True:
        while more and len(waiting) < limit:
            item = next(source, None)
            if item is None:
                more = False
                break
            number, part = item
            actor = load.index(min(load))
            waiting.append((number, part, submit(actors[actor], number, part), actor))
            load[actor] += 1
        if not waiting:
            return
        number, part, ref, actor = waiting[0]
        if ref not in done:
            running = [w[2] for w in waiting if w[2] not in done]
            ready, _ = ray.wait(running, num_returns=1, timeout=every if on_idle else None)
            if not ready and on_idle is not None:
                on_idle()
            for finished in ready:
                done.add(finished)
                load[next(w[3] for w in waiting if w[2] == finished)] -= 1
            continue
        waiting.popleft()
        done.discard(ref)
        yield number, part, _get(ray, ref)
