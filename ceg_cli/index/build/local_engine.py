"""The single-machine build engine: read and chunk in a thread, embed in this one.

Reading, chunking and (where ``pretokenized`` allows) tokenizing run in a
producer thread while the main thread runs the model (both release the GIL
while they compute), so the pipeline around the model costs little. Memory
stays flat whatever the dump's size: documents and passages stream through a
bounded queue. Batches are cut after whole
documents and committed in shards (``buildwork``), so a resumed build cuts the
same batches as one that never stopped.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...corpus import iter_positioned
from ...types import Chunk
from ..dense.embedding import Embedder
from ..dense.pretokenized import TokenizerState, embed_passages, state_of, tokenize
from ..layout import embed_text
from .buildopts import READ_COUNTED, BuildCounters, BuildOptions, BuildReport
from .buildwork import BuildWork, chunk_row, source_counts
from .chunking import chunk_or_skip

if TYPE_CHECKING:
    import numpy as np

__all__ = ["fill_here", "produce_in_background"]


def fill_here(
    todo: list[Path],
    options: BuildOptions,
    embedder: Embedder,
    work: BuildWork,
    report: BuildReport,
    on_warning: Callable[[str], None] | None,
    per_source: dict[str, dict[str, Any]],
    bars: BuildCounters,
    shard_passages: int,
    call_size: int,
) -> None:
    """Read and chunk in a thread, embed here: the single-machine engine.

    ``call_size`` passages (cut after whole documents) go to the model at once.
    """
    next_id = work.position["next_id"]
    position = work.position
    # Where the model allows it, the reading thread tokenizes too (the
    # tokenizer releases the GIL), and the model runs on batches of similar
    # token length: 1.18x encode's rate on 2 cores (benchmarks/gpu/gpu_build.py).
    state = state_of(embedder)
    report.pretokenized = state is not None
    for batch, position, ids in produce_in_background(
        todo, options, per_source, work.position, bars, on_warning, call_size, state
    ):
        t0 = time.perf_counter()
        vecs = embed_passages(embedder, batch, ids, options.embed_text)
        report.embed_seconds += time.perf_counter() - t0
        work.add(vecs, ((next_id + i, *chunk_row(c, c.source)) for i, c in enumerate(batch)))
        next_id += len(batch)
        bars.embedded.update(len(batch))
        if work.pending >= shard_passages:
            work.commit({**position, "next_id": next_id, "kept": work.position["kept"]})


def produce_in_background(
    todo: list[Path],
    options: BuildOptions,
    per_source: dict[str, dict[str, Any]],
    start: dict[str, Any],
    bars: BuildCounters,
    on_warning: Callable[[str], None] | None,
    call_size: int,
    tokenizer: TokenizerState | None = None,
) -> Iterator[tuple[list[Chunk], dict[str, Any], list[np.ndarray] | None]]:
    """Yield batches of passages read and chunked by a worker thread, from ``start``,
    with their token ids where given the model's ``tokenizer``.

    Each batch comes with the position after it: the source and the place in
    it (``iter_positioned``) where reading would go on, and each source's
    counts so far. Batches are cut after whole documents only, so a build
    resumed from a batch's position cuts the same batches as one that never
    stopped.
    """
    out: queue.Queue[Any] = queue.Queue(maxsize=4)
    stop = threading.Event()

    def snapshot(source: int, offset: int) -> dict[str, Any]:
        return {"source": source, "offset": offset, "sources": source_counts(per_source)}

    def ready(batch: list[Chunk], position: dict[str, Any]) -> tuple[Any, ...]:
        if tokenizer is None:
            return batch, position, None
        return batch, position, tokenize(
            tokenizer, [embed_text(c, options.embed_text) for c in batch]
        )

    def work() -> None:
        try:
            batch: list[Chunk] = []
            for number, path in enumerate(todo):
                if number < start["source"]:
                    continue  # read to its end by an earlier run
                stats = per_source[str(path.resolve())]
                for offset, doc in iter_positioned(
                    path,
                    start=start["offset"] if number == start["source"] else 0,
                    namespaces=options.namespaces,
                    follow_symlinks=options.follow_symlinks,
                    on_warning=on_warning,
                    on_read=bars.read.update if stats["kind"] in READ_COUNTED else None,
                    multistream_index=options.multistream_index,
                ):
                    # Store the resolved path so that --append recognises the source.
                    chunks = chunk_or_skip(doc, options.chunk_words, on_warning,
                                           options.language)
                    if not chunks:  # skipped, or no text: not a document (as --update counts)
                        continue
                    stats["documents"] += 1
                    stats["chunks"] += len(chunks)
                    bars.pages.update(1)
                    bars.passages.update(len(chunks))
                    for c in chunks:
                        batch.append(with_source(c, stats["path"]))
                    if len(batch) >= call_size:
                        _put(out, ready(batch, snapshot(number, offset)), stop)
                        batch = []
                    if stop.is_set():
                        return
            if batch:
                _put(out, ready(batch, snapshot(len(todo), 0)), stop)
            _put(out, None, stop)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            _put(out, exc, stop)

    worker = threading.Thread(target=work, name="ceg-read", daemon=True)
    worker.start()
    try:
        while True:
            item = out.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join(timeout=5)


def _put(out: queue.Queue[Any], item: Any, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            out.put(item, timeout=0.2)
            return
        except queue.Full:
            continue


def with_source(chunk: Chunk, source: str) -> Chunk:
    if chunk.source == source:
        return chunk
    return Chunk(
        chunk.doc_id,
        chunk.title,
        chunk.ordinal,
        chunk.start,
        chunk.end,
        chunk.text,
        chunk.url,
        source,
        chunk.language,
    )
