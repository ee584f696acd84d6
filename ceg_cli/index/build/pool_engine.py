"""The single-machine engine with reader processes (``--engine local --workers N``).

The single-machine build reads, cleans and chunks in one thread beside the
model; on a fast model (a GPU) that thread is the limit. With ``--workers N``
(N > 1) the sources are cut into the ranges a Ray build uses
(``corpus.ranges``), N processes read, chunk and tokenize them (with the
model's own tokenizer, where ``pretokenized`` can prove it gives the model's
ids), and this process runs the model on their passages in range order, a
range's passages in calls of ``call_size`` cut after whole documents, as a Ray
worker does, and commits shards after whole ranges: ``--resume`` goes on from
the first range not committed (the manifest records the plan). The index
holds the same passages, in the same order, as a one-worker build; vectors
can differ in the last float bits, since embedding calls are cut per range
(as on Ray) and batched by token length.

The processes are started with ``spawn``: they import the corpus readers and
the ``tokenizers`` library, not torch, and never share the model's threads.
They end with this process, however it ends (``processes``): stopped here
when the build stops (an error, Ctrl-C, SIGTERM), by the kernel or their
watchdog when it is killed. More readers than ranges to read would idle, and
more than the machine's cores would only take turns: ``reader_count`` caps them.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

from ...corpus.ranges import SourceRange, read_part
from ...types import Chunk
from ..dense.embedding import Embedder
from ..dense.pretokenized import TokenizerState, embed_passages, state_of, tokenize
from ..layout import embed_text
from .buildwork import BuildWork, chunk_row
from .chunking import chunk_or_skip
from .processes import available_cores, reader_started, sigint_blocked

if TYPE_CHECKING:
    import numpy as np

__all__ = ["fill_with_readers", "read_range", "reader_count"]

#: Ranges read ahead per process: one being read, one waiting for the model.
AHEAD_PER_WORKER = 2


def read_range(
    part: SourceRange,
    namespaces: frozenset[int],
    chunk_words: int,
    embed_as: str = "text",
    tokenizer: TokenizerState | None = None,
    language: str = "auto",
) -> tuple[list[list[Chunk]], list[str], list[np.ndarray] | None]:
    """One range's passages, grouped by document, the warnings met and, given the
    model's ``tokenizer``, each passage's token ids (a process's job)."""
    warnings: list[str] = []
    documents = []
    for doc in read_part(part, namespaces=namespaces, on_warning=warnings.append):
        chunks = chunk_or_skip(doc, chunk_words, warnings.append, language)
        if chunks:  # skipped, or no text: not a document (as --update counts)
            documents.append(chunks)
    if tokenizer is None:
        return documents, warnings, None
    texts = [embed_text(c, embed_as) for chunks in documents for c in chunks]
    return documents, warnings, tokenize(tokenizer, texts)


def fill_with_readers(
    plan: list[SourceRange],
    per_source: dict[str, dict[str, Any]],
    keys: list[str],
    options: Any,
    embedder: Embedder,
    work: BuildWork,
    report: Any,
    on_warning: Callable[[str], None] | None,
    bars: Any,
    shard_passages: int,
    call_size: int,
) -> None:
    """Embed the ranges of ``plan`` not yet committed in ``work``, read by ``options.workers``.

    ``keys[i]`` names source ``i`` in the index; ``per_source`` (by key) gets
    each source's counts.
    """
    warn = on_warning or (lambda _message: None)
    submit = work.position.get("range", 0)
    workers = reader_count(int(options.workers), len(plan) - submit, warn)
    report.workers = workers
    # Where the model allows it, the readers tokenize too: this process only runs the model.
    state = state_of(embedder)
    report.pretokenized = state is not None
    next_id = work.position["next_id"]
    pool = ProcessPoolExecutor(max_workers=workers,
                               mp_context=multiprocessing.get_context("spawn"),
                               initializer=reader_started, initargs=(os.getpid(),))
    ahead: deque[tuple[int, Future[Any]]] = deque()
    try:
        while True:
            # Readers start here, at a submit: with Ctrl-C held back (``sigint_blocked``).
            with sigint_blocked():
                while submit < len(plan) and len(ahead) < AHEAD_PER_WORKER * workers:
                    read = pool.submit(read_range, plan[submit], options.namespaces,
                                       options.chunk_words, options.embed_text, state,
                                       options.language)
                    ahead.append((submit, read))
                    submit += 1
            if not ahead:
                break
            number, read = ahead.popleft()
            documents, warnings, tokens = read.result()
            part = plan[number]
            for message in (*part.warnings, *warnings):
                warn(message)
            key = keys[part.source]
            batch: list[Chunk] = []
            chunks = 0
            for doc_chunks in documents:
                batch.extend(doc_chunks)
                chunks += len(doc_chunks)
                if len(batch) >= call_size:
                    ids = tokens[chunks - len(batch) : chunks] if tokens is not None else None
                    next_id = _embed(batch, ids, key, options, embedder, work, report, bars,
                                     next_id)
                    batch = []
            if batch:
                ids = tokens[chunks - len(batch) : chunks] if tokens is not None else None
                next_id = _embed(batch, ids, key, options, embedder, work, report, bars, next_id)
            stats = per_source[key]
            stats["documents"] += len(documents)
            stats["chunks"] += chunks
            bars.range_read(part.kind, part.size, len(documents), chunks)
            work.commit_after_range("local", number, next_id, per_source, shard_passages)
    except BaseException:
        # Stopped (an error, Ctrl-C, SIGTERM): a reader would otherwise finish its
        # range first, and the build would wait for it on its way out.
        _stop_readers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def reader_count(asked: int, ranges: int, warn: Callable[[str], None]) -> int:
    """The reader processes to start: ``asked`` (``--workers``), no more than the
    ``ranges`` left to read (silently: the rest would idle) nor than this
    machine's cores (saying so: they would take turns on them)."""
    wanted = max(1, min(asked, ranges))
    cores = available_cores()
    if wanted <= cores:
        return wanted
    warn(f"--workers {asked}: this machine has {cores} core{'s' if cores != 1 else ''} for "
         f"this build; starting {cores} reader process{'es' if cores != 1 else ''}")
    return cores


def _stop_readers(pool: ProcessPoolExecutor) -> None:
    processes = getattr(pool, "_processes", None) or {}  # the executor's own record of them
    for process in list(processes.values()):
        if process.is_alive():
            process.terminate()
    for process in list(processes.values()):
        process.join(timeout=5)


def _embed(
    batch: list[Chunk],
    ids: list[np.ndarray] | None,
    key: str,
    options: Any,
    embedder: Embedder,
    work: BuildWork,
    report: Any,
    bars: Any,
    next_id: int,
) -> int:
    t0 = time.perf_counter()
    vectors = embed_passages(embedder, batch, ids, options.embed_text)
    report.embed_seconds += time.perf_counter() - t0
    work.add(vectors, ((next_id + i, *chunk_row(c, key)) for i, c in enumerate(batch)))
    bars.embedded.update(len(batch))
    return next_id + len(batch)
