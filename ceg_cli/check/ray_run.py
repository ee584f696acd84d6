"""``ceg check --engine ray``: the responses checked by Ray workers across a cluster.

The driver (this process) reads the responses file as a local run does, and
cuts the responses into ranges of whole batches (``RANGE_BATCHES`` of the
run's ``batch_size``), so that every batch is the local run's batch and a
judge sees the calls it sees locally. Ray actors (``CheckWorker``), each
loading the judge (and the index, where the run reads one) once, check a
range at a time with the local run's own code (``FedRun.checked``: segments,
retrieval, judge, regeneration); the driver takes the results back in input
order and makes the records, the summary, JUnit and the gate of them as a
local run does (``CheckRun.execute``): the output is the local run's, byte for
byte. Workers never read the responses file: the driver ships the lines.

- **The index** must be at the same path on every node (a shared folder or a
  copy), opened memory-mapped there; a worker whose ``meta.json`` differs from
  the driver's, or that finds none, refuses to start with one line naming its
  node. Records with their own contexts need no index at all.
- **Resources**: ``--workers`` defaults to the CPUs of the cluster's nodes over
  what one judge needs (``judges.cpus_needed``), or, with
  ``--gpus-per-worker G``, to its GPUs over G; never more workers than the
  cluster has CPUs (as the build's ``--workers 999``). Each worker's torch
  threads are the CPUs it asked for.
- **LLM judges**: ``--concurrency`` is split between the workers, so it holds
  for the run; an LLM judge starts no more workers than that. The reply cache
  is the driver's file, written by one actor on the driver's machine
  (``llm.shared_cache``), which also has a prompt asked for once when two
  workers need it at the same time.
- **Faults**: a worker whose process dies is restarted by Ray, and its ranges
  are checked again (``MAX_RESTARTS``); nothing is written twice, since only the
  driver writes, in order. An error on a worker (a judge that fails) comes back
  with the records of the batches before it, which are written, and stops the
  run as the same error stops a local run. A killed driver leaves an output
  that ``--resume`` continues, as locally.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import BackendError, IndexLoadError, UsageError
from ..index.layout import META_FILE
from ..progress import Progress
from ..types import CheckedResponse, ResponseInput
from .settings import EngineOptions, RunSettings

#: Batches in a range: big enough that a worker's call costs little beside it, small
#: enough that a range redone after a worker died is little work lost.
RANGE_BATCHES = 8
#: Ranges given to each worker at once: one being checked, one waiting.
IN_FLIGHT_PER_WORKER = 2
#: Seconds between looks at which workers are alive, for the progress display.
PROGRESS_EVERY_S = 2.0
#: Environment variables a worker takes from the driver: where the LLM is and its key,
#: and ceg's own settings, so that a node's environment does not change the result.
DRIVER_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY")

Pair = tuple[CheckedResponse, "tuple[CheckedResponse, ...] | None"]


@dataclass(frozen=True)
class WorkerJob:
    """What a worker needs to check ranges as the driver would."""

    #: The run's settings, as a local run on the worker: the index by its absolute
    #: path, the judge's options with this worker's share of --concurrency.
    settings: RunSettings
    #: The run a worker makes of them (``run.FedRun``: the local run's code, fed ranges).
    make_run: Any
    use_index: bool
    #: sha256 of the driver's ``meta.json`` (None: no index read).
    index_digest: str | None
    cwd: str
    env: dict[str, str]
    #: Judges registered in the driver by a factory object (``judges.registered_here``).
    judges: dict[str, Any]
    threads: int
    #: The name of the run's ``SharedReplies`` actor (a name, not its handle: an actor
    #: made with a handle can fail to restart) and the cache file it holds; "": none.
    replies: str = ""
    replies_path: str = ""


@dataclass
class RangeResult:
    """What a worker sends back for one range."""

    pairs: list[Pair] = field(default_factory=list)
    #: What stopped the range after ``pairs`` (the batches before it are in ``pairs``).
    error: BaseException | None = None
    warnings: list[str] = field(default_factory=list)
    #: LLM calls, cache hits and tokens of this range (None: no LLM).
    usage: dict[str, int] | None = None
    regenerated: int = 0
    repaired: int = 0


class CheckWorker:
    """The Ray actor: one judge (and index) loaded once, ranges checked one at a time.

    It never raises while it starts: a failure (the index missing on its node,
    a model that cannot load) is kept and raised by ``hello``, so that the
    driver says it in one line.
    """

    def __init__(self, job: WorkerJob, number: int) -> None:
        self.number = number
        self.failure: BaseException | None = None
        self.warnings: list[str] = []
        self._one_at_a_time = threading.Lock()
        self.run: Any = None
        try:
            self.run = self._start(job)
        except Exception as exc:  # noqa: BLE001 - said by hello, as the error it is
            self.failure = _portable(exc)

    def _start(self, job: WorkerJob) -> Any:
        from ..judges import register

        os.environ.update(job.env)
        # Before torch is imported (the judge's or the index's model): its thread count.
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = str(job.threads)
        if os.path.isdir(job.cwd):
            os.chdir(job.cwd)  # relative paths in the options mean what they mean locally
        for prefix, (factory, usage) in job.judges.items():
            register(prefix, factory, usage=usage)
        if job.use_index and job.index_digest is not None:
            _same_index(job.settings.index, job.index_digest, _where())
        settings = job.settings
        if job.replies:
            import ray

            from ..llm.shared_cache import RemoteReplies

            replies = ray.get_actor(job.replies)
            ray.get(replies.forget.remote(self.number))  # what it claimed before a restart
            store = RemoteReplies(replies, job.replies_path, self.number)
            settings = replace(settings, judge_options={**settings.judge_options,
                                                        "cache_store": store})
        run = job.make_run(settings, job.use_index, on_warning=self.warnings.append)
        if "torch" in sys.modules:
            import torch

            torch.set_num_threads(job.threads)
        return run

    def hello(self) -> dict[str, Any]:
        """Where it runs and what it loaded; raises what kept it from starting."""
        if self.failure is not None:
            raise self.failure
        torch = sys.modules.get("torch")
        said, self.warnings[:] = list(self.warnings), []
        return {"where": _where(), "version": __version__, "judge": self.run.judge_info,
                "cuts": self.run.cuts, "check": self.run.settings.check, "pid": os.getpid(),
                "warnings": said,
                "threads": torch.get_num_threads() if torch is not None else None}

    def alive(self) -> bool:
        return True

    def run_range(self, items: list[ResponseInput], number: int) -> RangeResult:
        """Check one range, as a local run checks its batches."""
        if self.failure is not None:  # restarted, and failed to start this time
            raise self.failure
        with self._one_at_a_time:
            run = self.run
            before = (run.llm_usage(), run.regenerated, run.repaired)
            result = RangeResult()
            try:
                for pair in run.checked(items):
                    result.pairs.append(pair)
            except Exception as exc:  # noqa: BLE001 - the driver raises it after the pairs
                result.error = _portable(exc)
            usage = run.llm_usage()
            if usage is not None:
                result.usage = {k: v - (before[0] or {}).get(k, 0) for k, v in usage.items()}
            result.regenerated = run.regenerated - before[1]
            result.repaired = run.repaired - before[2]
            result.warnings, self.warnings[:] = list(self.warnings), []
            return result


def _where() -> str:
    """This worker's node, as a message names it: host, address and Ray node id."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    return f"{socket.gethostname()} ({ray.util.get_node_ip_address()}, Ray node {node[:8]})"


def meta_digest(index: Path) -> str:
    return hashlib.sha256((index / META_FILE).read_bytes()).hexdigest()


def _same_index(index: Path, digest: str, where: str) -> None:
    """Refuse to check against an index other than the driver's (or none)."""
    same = "every node must read the same index at the same path (a shared folder, or " \
           "the same copy on each)"
    try:
        found = meta_digest(index)
    except FileNotFoundError:
        raise IndexLoadError(f"{index}: no index there on the Ray worker node {where}; "
                             f"{same}") from None
    except OSError as exc:
        raise IndexLoadError(f"{index}: cannot read {META_FILE} on the Ray worker node "
                             f"{where} ({exc.strerror}); {same}") from None
    if found != digest:
        raise IndexLoadError(f"{index}: the index on the Ray worker node {where} is not the "
                             f"driver's (its {META_FILE} differs); {same}")


def _portable(exc: BaseException) -> BaseException:
    """``exc``, or a ``RuntimeError`` saying the same where it cannot travel to the driver."""
    from ray import cloudpickle

    try:
        cloudpickle.loads(cloudpickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any failure to pickle
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class RayChecks:
    """The driver's side: the workers started, ranges sent, results taken back in order."""

    def __init__(self, settings: RunSettings, use_index: bool, make_run: Any,
                 on_warning: Callable[[str], None] | None = None) -> None:
        from ..index.build.ray_pool import require_ray
        from ..index.build.ray_session import connect

        self.ray = require_ray()
        self.warn = on_warning or (lambda _message: None)
        self.said: set[str] = set()
        self.actors: list[Any] = []
        self.replies: Any = None
        self.replies_name = ""
        self.usage: dict[str, int] | None = None
        self.settings = settings
        self.reads_index = use_index
        #: Whether the index has no vectors (built with --retrieval lexical).
        self.lexical_only = False
        #: Leaves the cluster, or stops the Ray this run started (and its session folder).
        self.stop = connect(self.ray, settings.engine.ray_address)
        try:
            self._start(settings, use_index, make_run)
        except BaseException:
            self.close()
            raise

    def _start(self, settings: RunSettings, use_index: bool, make_run: Any) -> None:
        from ..index.build.ray_pool import launch, wait_started
        from ..judges import registered_here

        ray = self.ray
        digest = None
        index = settings.index.absolute()
        if use_index:
            from ..index import open_index
            from ..index.lexical.bm25 import resolve_method

            opened = open_index(settings.index)  # as a local run: missing, unreadable...
            try:
                if settings.search_width:  # refused here as locally, before a worker starts
                    opened.set_search_width(settings.search_width)
                method, warning = resolve_method(opened, settings.check.retrieval.method,
                                                 settings.check.retrieval.method_given)
                self.lexical_only = opened.lexical_only
            finally:
                opened.close()
            self._say([warning] if warning else [])
            digest = meta_digest(index)
            settings = replace(settings, check=replace(
                settings.check, retrieval=replace(settings.check.retrieval, method=method)))
        self.settings = settings
        resources = ray.cluster_resources()
        places, threads = _placements(ray, settings, resources, self.warn)
        jobs = _jobs(settings, make_run, index, use_index, digest, len(places), threads)
        judges = registered_here()
        cache = _reply_cache(settings)
        if cache is not None:
            self.replies_name = f"ceg-replies-{uuid.uuid4().hex}"
            self.replies = _start_replies(ray, cache, settings, self.replies_name)
        jobs = [replace(job, judges=judges, replies=self.replies_name,
                        replies_path=str(cache or "")) for job in jobs]
        self.actors = launch(ray, CheckWorker, [(job, n) for n, job in enumerate(jobs)],
                             places, IN_FLIGHT_PER_WORKER + 1)
        hellos = wait_started(ray, self.actors, places, resources, probe="hello")
        for hello in hellos:
            if hello["version"] != __version__:
                raise UsageError(
                    f"the Ray worker node {hello['where']} runs ceg {hello['version']}, this "
                    f"machine ceg {__version__}: every node needs the same versions of ceg, "
                    "Ray and Python")
            self._say(hello["warnings"])
        first = hellos[0]
        self.judge_info = first["judge"]
        #: The judge's cut in each setting, and where each came from (its thresholds.json,
        #: --judge-threshold, a project file), as the workers' judge has them: the driver
        #: creates no judge, and each record says the cut it was judged at.
        self.cuts = first["cuts"]
        self.settings = replace(settings, check=first["check"])
        #: Each worker's node, its process and its torch threads, for a test or a report.
        self.workers = [{"where": h["where"], "pid": h["pid"], "threads": h["threads"]}
                        for h in hellos]

    def checked(self, items: Iterable[ResponseInput], run: Any,
                progress: Progress | None = None) -> Iterator[Pair]:
        """(result, regeneration attempts) of each response, in input order; ``run``'s
        regeneration counts grow as results come back."""
        from ..index.build.ray_pool import in_order

        ray = self.ray
        size = RANGE_BATCHES * self.settings.check.batch_size
        lines: dict[int, tuple[int, int]] = {}

        def submit(actor: Any, number: int, part: list[ResponseInput]) -> Any:
            lines[number] = (part[0].line, part[-1].line)
            return actor.run_range.remote(part, number)

        alive = _Alive(ray, self.actors, progress)
        ranges = enumerate(iter(lambda it=iter(items): list(islice(it, size)), []))
        results = in_order(ray, self.actors, ranges, submit, per_actor=IN_FLIGHT_PER_WORKER,
                           every=PROGRESS_EVERY_S, on_idle=alive.look)
        expected = 0
        while True:
            try:
                number, _part, result = next(results)
            except StopIteration:
                return
            except BackendError as exc:  # its worker died more often than Ray restarts it
                first, last = lines.get(expected, (0, 0))
                raise BackendError(f"{exc} (it was checking lines {first} to {last} of "
                                   f"{self._source()})") from None
            lines.pop(number, None)
            expected = number + 1
            alive.look()
            self._say(result.warnings)
            if result.usage is not None:
                self.usage = {k: (self.usage or {}).get(k, 0) + v
                              for k, v in result.usage.items()}
            run.regenerated += result.regenerated
            run.repaired += result.repaired
            yield from result.pairs
            if result.error is not None:
                raise result.error

    def _source(self) -> str:
        return "standard input" if self.settings.responses == "-" else self.settings.responses

    def _say(self, messages: Iterable[str]) -> None:
        """A worker's warnings, each said once for the run (every worker says its own)."""
        for message in messages:
            if message not in self.said:
                self.said.add(message)
                self.warn(message)

    def llm_usage(self) -> dict[str, int] | None:
        return self.usage

    def close(self) -> None:
        """Stop the workers and the shared cache, and Ray if this run started it."""
        ray = self.ray
        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
        if self.replies is not None:
            try:
                ray.get(self.replies.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - stopping anyway: every reply was committed
                pass
            ray.kill(self.replies)
            self.replies = None
        stop, self.stop = self.stop, lambda: None
        stop()


class _Alive:
    """The workers that answer, for the progress display: asked at most every
    ``PROGRESS_EVERY_S``; one that has not answered that long after is not counted."""

    def __init__(self, ray: Any, actors: list[Any], progress: Progress | None) -> None:
        self.ray = ray
        self.actors = actors
        self.counter = None if progress is None else progress.counter(
            "Ray workers alive", "workers", total=len(actors))
        self.shown = len(actors)
        if self.counter is not None:
            self.counter.update(self.shown)
        self.asked: list[Any] = []
        self.last = time.monotonic()

    def look(self) -> None:
        now = time.monotonic()
        if self.counter is None or now - self.last < PROGRESS_EVERY_S:
            return
        if self.asked:
            ready, waiting = self.ray.wait(self.asked, num_returns=len(self.asked), timeout=0)
            alive = 0
            for ref in ready:
                try:
                    alive += bool(self.ray.get(ref))
                except Exception:  # noqa: BLE001 - dead, or failed to restart
                    continue
            self.counter.update(alive - self.shown)
            self.shown = alive
        self.asked = [actor.alive.remote() for actor in self.actors]
        self.last = now


def _uses_llm(settings: RunSettings) -> bool:
    names = [settings.judge] + ([settings.rewriter or ""] if settings.regenerate else [])
    return any(name.startswith("llm:") for name in names)


def _placements(ray: Any, settings: RunSettings, resources: dict[str, float],
                warn: Callable[[str], None]) -> tuple[list[dict[str, Any]], int]:
    """Each worker's resources and scheduling, and its torch threads.

    Without ``--workers``: the CPUs of each node over what one judge needs, summed
    (or, with ``--gpus-per-worker G``, each node's GPUs over G), each worker asking
    for that need. With it: each asks for an equal share of the cluster's CPUs (at
    most one node's), and no more workers than the cluster has CPUs, or GPUs for
    G each, or, for an LLM judge, --concurrency (saying so).
    """
    from ..index.build.ray_pool import _share, cap_workers
    from ..judges import cpus_needed

    engine: EngineOptions = settings.engine
    gpus = engine.gpus_per_worker
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    cpu_nodes = [n.get("CPU", 0.0) for n in nodes if n.get("CPU", 0.0) > 0]
    need = cpus_needed(settings.judge)
    if gpus:
        fit = sum(int(n.get("GPU", 0.0) // gpus) for n in nodes)
        if fit == 0:
            raise UsageError(f"--gpus-per-worker {gpus:g}: the Ray cluster has "
                             f"{resources.get('GPU', 0):g} GPUs; no worker could start")
    else:
        fit = max(1, sum(int(c // need) for c in cpu_nodes))
    count = cap_workers(engine.workers, resources, warn) or fit
    if engine.workers is not None and gpus and count > fit:
        warn(f"--workers {engine.workers}: the Ray cluster has {resources.get('GPU', 0):g} "
             f"GPUs, {gpus:g} per worker; starting {fit} worker{'s' if fit != 1 else ''}")
        count = fit
    concurrency = int(settings.judge_options.get("concurrency", 4))
    if _uses_llm(settings) and count > concurrency:
        if engine.workers is not None:
            warn(f"--workers {engine.workers}: --concurrency {concurrency} allows "
                 f"{concurrency} LLM request{'s' if concurrency != 1 else ''} at once; "
                 f"starting {concurrency} worker{'s' if concurrency != 1 else ''}")
        count = concurrency
    most = max(cpu_nodes, default=1.0)
    if engine.workers is None and not gpus:
        cpus = _share(min(need, most))
    else:
        cpus = _share(min(resources.get("CPU", 1.0) / count, most))
    place = {"num_cpus": cpus, "num_gpus": gpus, "scheduling_strategy": "SPREAD"}
    return [dict(place) for _ in range(count)], max(1, int(cpus))


def _jobs(settings: RunSettings, make_run: Any, index: Path, use_index: bool, digest: str | None,
          count: int, threads: int) -> list[WorkerJob]:
    """Each worker's job: a local run's settings, with its share of --concurrency."""
    concurrency = int(settings.judge_options.get("concurrency", 4))
    env = {k: v for k, v in os.environ.items() if k in DRIVER_ENV or k.startswith("CEG_")}
    options = dict(settings.judge_options)
    if settings.engine.gpus_per_worker and options.get("device") == "auto":
        options["device"] = "cuda"  # each worker has its GPU: use it, or fail to start
    jobs = []
    for n in range(count):
        share = concurrency // count + (1 if n < concurrency % count else 0)
        local = replace(settings, index=index, out=None, resume=False, engine=EngineOptions(),
                        judge_options={**options, "concurrency": max(1, share)})
        jobs.append(WorkerJob(local, make_run, use_index, digest, os.getcwd(), env, {}, threads))
    return jobs


def _reply_cache(settings: RunSettings) -> Path | None:
    """The LLM reply cache's file on the driver's machine, where an LLM judges with one."""
    if not _uses_llm(settings):
        return None
    from ..judges.llm_judges.llm import cache_path

    path = cache_path(settings.judge_options)
    return None if path is None else path.expanduser().absolute()


def _start_replies(ray: Any, path: Path, settings: RunSettings, name: str) -> Any:
    """The run's ``SharedReplies`` actor, on this machine (the cache is this machine's file)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from ..llm.shared_cache import SharedReplies

    concurrency = int(settings.judge_options.get("concurrency", 4))
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    # A thread per request that may be waiting on it (judge and rewriter), and a few more.
    return ray.remote(SharedReplies).options(
        name=name, num_cpus=0, scheduling_strategy=here, max_concurrency=2 * concurrency + 8,
    ).remote(str(path))


__all__ = ["CheckWorker", "RayChecks", "RangeResult", "WorkerJob", "meta_digest"]
