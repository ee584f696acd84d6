"""Index builds on Ray: the sources' ranges read, chunked and embedded across a cluster.

``ceg index build --engine ray`` splits the sources into ranges
(``ceg_cli.corpus.ranges``) and hands them to Ray actors, each loading the
model once (on a GPU where the cluster has them). The driver (this process)
keeps a bounded number of ranges in flight, takes the results back **in range
order**, numbers the passages and commits them to the build's work directory
as the single-machine build does (``builder._fill``), so the index is the same:
the same passages in the same order, vectors equal up to floating point (a
range's embedding calls are cut after whole documents as the local build cuts
them, but ranges start new calls).

Failures: an actor whose process dies is restarted by Ray and its ranges are
redone (``MAX_RESTARTS``); a driver that dies leaves the committed ranges, which
``--resume`` skips (the position records the next range); a source missing or
unreadable on a worker is an ``InputError`` naming the source and the worker's
host.

``ray`` is an optional dependency (``pip install 'ceg-cli[ray]'``), imported
only here, and only when a Ray build runs.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...corpus.ranges import SourceRange, read_part
from ...errors import BackendError, InputError
from ...types import Chunk
from ..dense.embedding import Embedder, load_embedder
from ..layout import embed_text
from .buildwork import BuildWork, chunk_row
from .chunking import chunk_or_skip
from .ray_pool import (  # noqa: F401 - INSTALL_HINT and require_ray: the build's names
    INSTALL_HINT,
    _placements,
    cap_workers,
    in_order,
    launch,
    require_ray,
    wait_started,
)
from .ray_session import connect

#: Ranges given to each worker at once: one being embedded, one waiting, so
#: that no worker idles while the driver stores a result; memory stays bounded.
IN_FLIGHT_PER_WORKER = 2
#: Seconds between asking the workers how far they are inside their ranges.
PROGRESS_EVERY_S = 2.0


@dataclass
class RangeResult:
    """What a worker sends back for one range."""

    #: Passages as rows of the chunk store without their ids (``buildwork.chunk_row``).
    rows: list[tuple[Any, ...]]
    vectors: np.ndarray
    documents: int
    chunks: int
    warnings: list[str] = field(default_factory=list)
    host: str = ""
    embed_seconds: float = 0.0


@dataclass(frozen=True)
class RangeSettings:
    """How a worker reads, chunks and embeds: the build's options that matter there."""

    chunk_words: int
    namespaces: frozenset[int]
    embed_text: str
    #: Passages per embedding call, cut after whole documents (``builder.EMBED_CALL_SIZE``).
    call_size: int
    #: ``auto`` (each document's detected) or a language code.
    language: str = "auto"


def embed_range(
    part: SourceRange,
    key: str,
    embedder: Embedder,
    settings: RangeSettings,
    on_embedded: Callable[[int], None] | None = None,
) -> RangeResult:
    """Read, chunk and embed one range: a worker's job (callable without Ray too).

    ``key`` is the source's name in the index (its resolved path on the driver);
    ``on_embedded`` gets the passages embedded so far after each embedding call.
    """
    host = socket.gethostname()
    if not Path(part.path).exists():
        raise InputError(f"{part.path}: no such file or directory on worker host {host} "
                         "(every machine of the cluster must see the sources at the same path)")
    result = RangeResult([], np.zeros((0, 0), dtype=np.float32), 0, 0, host=host)
    vectors: list[np.ndarray] = []
    batch: list[Chunk] = []

    def embed() -> None:
        t0 = time.perf_counter()
        vectors.append(np.asarray(
            embedder.embed([embed_text(c, settings.embed_text) for c in batch]), dtype=np.float32
        ))
        result.embed_seconds += time.perf_counter() - t0
        result.rows.extend(chunk_row(c, key) for c in batch)
        batch.clear()
        if on_embedded is not None:
            on_embedded(len(result.rows))

    try:
        for doc in read_part(part, namespaces=settings.namespaces,
                             on_warning=result.warnings.append):
            chunks = chunk_or_skip(doc, settings.chunk_words, result.warnings.append,
                                   settings.language)
            if not chunks:  # skipped, or no text: not a document (as --update counts)
                continue
            result.documents += 1
            result.chunks += len(chunks)
            batch.extend(chunks)
            if len(batch) >= settings.call_size:
                embed()
    except InputError as exc:
        raise InputError(f"{exc} (on worker host {host})") from None
    if batch:
        embed()
    result.vectors = (np.concatenate(vectors) if vectors
                      else np.zeros((0, embedder.dimension), dtype=np.float32))
    return result


class Worker:
    """The Ray actor (``ray.remote(Worker)``): one model, loaded once, many ranges.

    It runs with a thread per range in flight and one more
    (``max_concurrency``): ranges still embed one at a time (a lock), and the
    spare thread answers ``progress`` meanwhile, so the driver can show
    passages embedded inside ranges that take minutes.
    """

    def __init__(self, model: Embedder | dict[str, Any]) -> None:
        # A dict: load_embedder's arguments (the CLI); else a model object
        # shipped by value (tests' fake model, a notebook's own embedder).
        self.embedder = load_embedder(**model) if isinstance(model, dict) else model
        #: Range number -> passages embedded so far, for the range being embedded.
        self.embedded: dict[int, int] = {}
        self._one_at_a_time = threading.Lock()

    def progress(self) -> dict[int, int]:
        return dict(self.embedded)

    def where(self) -> dict[str, Any]:
        import ray

        return {"host": socket.gethostname(), "node": ray.get_runtime_context().get_node_id(),
                "pid": os.getpid()}

    def run(
        self, part: SourceRange, key: str, settings: RangeSettings, number: int = -1
    ) -> RangeResult:
        def note(done: int) -> None:
            self.embedded[number] = done

        with self._one_at_a_time:
            try:
                return embed_range(part, key, self.embedder, settings, note)
            finally:
                self.embedded.pop(number, None)


def fill_on_ray(
    plan: list[SourceRange],
    per_source: dict[str, dict[str, Any]],
    keys: list[str],
    options: Any,
    model: Embedder | dict[str, Any],
    settings: RangeSettings,
    work: BuildWork,
    report: Any,
    on_warning: Callable[[str], None] | None,
    bars: Any,
    shard_passages: int,
) -> None:
    """Embed the ranges of ``plan`` not yet committed in ``work`` on Ray workers, in order.

    ``keys[i]`` names source ``i`` in the index; ``per_source`` (by key) gets
    each source's counts; ``report.workers`` and ``report.worker_nodes`` say
    where the work ran.
    """
    ray = require_ray()
    warn = on_warning or (lambda _message: None)
    stop = connect(ray, options.ray_address)
    actors: list[Any] = []
    try:
        actors = _start_workers(ray, model, options.workers, report,
                                len(plan) - work.position.get("range", 0), warn)
        next_id = work.position["next_id"]
        shown: dict[int, int] = {}  # range -> passages counted as embedded before it ended

        def in_flight(progress: dict[int, int]) -> None:
            for number, done in progress.items():
                if done > shown.get(number, 0):
                    bars.embedded.update(done - shown.get(number, 0))
                    shown[number] = done

        for number, result in _in_order(ray, actors, plan, keys, settings,
                                        work.position.get("range", 0), in_flight):
            part = plan[number]
            for message in (*part.warnings, *result.warnings):
                warn(message)
            if result.vectors.shape[1:] != (work.dimension,):
                raise BackendError(f"a Ray worker on {result.host} embedded with dimension "
                                   f"{result.vectors.shape[1:]}, not {work.dimension}")
            work.add(result.vectors, ((next_id + i, *row) for i, row in enumerate(result.rows)))
            next_id += len(result.rows)
            stats = per_source[keys[part.source]]
            stats["documents"] += result.documents
            stats["chunks"] += result.chunks
            report.embed_seconds += result.embed_seconds
            bars.range_read(part.kind, part.size, result.documents, result.chunks)
            bars.embedded.update(result.chunks - shown.pop(number, 0))
            work.commit_after_range("ray", number, next_id, per_source, shard_passages)
    finally:
        for actor in actors:
            ray.kill(actor)
        stop()


def _in_order(
    ray: Any,
    actors: list[Any],
    plan: list[SourceRange],
    keys: list[str],
    settings: RangeSettings,
    first: int,
    on_progress: Callable[[dict[int, int]], None] | None = None,
) -> Iterator[tuple[int, RangeResult]]:
    """(range number, result) from ``first`` on, in order, with a bounded number in flight.

    While none finishes, the workers are asked every ``PROGRESS_EVERY_S`` what
    they embedded so far (range number -> passages), for ``on_progress``.
    """
    def submit(actor: Any, number: int, part: SourceRange) -> Any:
        return actor.run.remote(part, keys[part.source], settings, number)

    idle = None if on_progress is None else (
        lambda: _report_progress(ray, actors, on_progress))
    parts = ((number, plan[number]) for number in range(first, len(plan)))
    for number, _part, result in in_order(ray, actors, parts, submit,
                                          per_actor=IN_FLIGHT_PER_WORKER,
                                          every=PROGRESS_EVERY_S, on_idle=idle):
        yield number, result


def _report_progress(
    ray: Any, actors: list[Any], on_progress: Callable[[dict[int, int]], None]
) -> None:
    """Ask every worker what it has embedded of its current range; a silent one is skipped."""
    asked = [a.progress.remote() for a in actors]
    ready, _ = ray.wait(asked, num_returns=len(asked), timeout=PROGRESS_EVERY_S)
    merged: dict[int, int] = {}
    for ref in ready:
        try:
            merged.update(ray.get(ref))
        except Exception:  # noqa: BLE001 - a restarting worker: its range reports later
            continue
    on_progress(merged)


def _start_workers(ray: Any, model: Embedder | dict[str, Any], workers: int | None,
                   report: Any, ranges: int = 1 << 30,
                   warn: Callable[[str], None] = lambda _message: None) -> list[Any]:
    """Start the actors: ``workers``, or one per GPU, or one per node; wait until they run.

    No more than the ``ranges`` to embed (silently: the rest would idle), and
    ``workers`` no more than the cluster's CPUs (saying so): each loads the
    model, and hundreds of them asked for hundredths of a CPU each took a
    machine's memory whole (issue 34).

    One per node (no GPUs, no ``workers``): each is pinned to its node and asks
    for all of that node's CPUs, which Ray also gives torch as its thread
    count; nodes without CPUs (a head started with ``--num-cpus=0``) get none.
    Otherwise each asks for an equal share of the cluster's CPUs (at most one
    node's) and a GPU (or a share of one) where the cluster has them, and
    ``SPREAD`` puts them on as many nodes as it can.
    """
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    if gpus and isinstance(model, dict) and model.get("device") == "auto":
        model = {**model, "device": "cuda"}  # each worker has its GPU: use it, or fail to start
    workers = cap_workers(workers, resources, warn)
    places = _placements(ray, workers, resources, gpus)[: max(1, ranges)]
    # A thread per range in flight (they take turns) and one for ``Worker.progress``.
    actors = launch(ray, Worker, [(model,)] * len(places), places, IN_FLIGHT_PER_WORKER + 1)
    where = wait_started(ray, actors, places, resources)
    report.workers = len(actors)
    report.worker_nodes = [w["node"] for w in where]
    return actors
