"""What an index build takes and gives: its options, its report, its counters.

Shared by the builder and its engines (``local_engine``, ``ray_engine``), which
all read the options, add to the report and update the counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...progress import NO_PROGRESS, Progress
from ..dense.vectors import AUTO_LARGE_THRESHOLD, AUTO_THRESHOLD

__all__ = ["DEFAULT_EMBED_TEXT", "READ_COUNTED", "BuildCounters", "BuildOptions", "BuildReport"]

DEFAULT_EMBED_TEXT = "title+text"


@dataclass(frozen=True)
class BuildOptions:
    model: str | None = None
    chunk_words: int = 100
    namespaces: frozenset[int] = frozenset({0})
    embed_text: str = DEFAULT_EMBED_TEXT
    batch_size: int = 64
    #: ``torch``, ``onnx`` or ``onnx-int8``; None: the index's own on append, else torch.
    backend: str | None = None
    device: str = "auto"
    #: ``auto`` (float16 on CUDA, else float32), ``float32`` or ``float16`` (CUDA only).
    precision: str = "auto"
    append: bool = False
    #: Folder sources: read symbolic links that lead out of the folder.
    follow_symlinks: bool = False
    #: Continue the unfinished build that a killed run of the same build left.
    resume: bool = False
    #: Passages per committed shard (None: ``SHARD_PASSAGES``).
    shard_passages: int | None = None
    #: The index of the (one) multistream dump among the sources, where it is
    #: not beside the dump under Wikimedia's name.
    multistream_index: Path | None = None
    #: ``auto``, ``flat``, ``hnsw``, ``ivfpq`` or ``ivfpqfs`` (``ceg_cli.index.dense.vectors``).
    index_type: str = "auto"
    #: Passages from which ``auto`` builds an approximate index.
    auto_threshold: int = AUTO_THRESHOLD
    #: Passages from which ``auto`` builds ``ivfpqfs`` rather than ``ivfpq``.
    large_threshold: int = AUTO_LARGE_THRESHOLD
    #: ``auto`` (each document's language detected) or a language code (``lang.codes``).
    language: str = "auto"
    #: Build the lexical (BM25) part; None: by size (``lexical.want_lexical``).
    lexical: bool | None = None
    #: The lexical part's engine: ``auto`` (bm25s up to ``LEXICAL_AUTO_MAX`` passages,
    #: tantivy beyond), ``bm25s`` or ``tantivy`` (``lexical.lexical_engine``).
    lexical_engine: str = "auto"
    #: ``local`` (this process) or ``ray`` (``ray_engine``: workers across a cluster).
    engine: str = "local"
    #: The Ray cluster to join (None: start Ray on this machine).
    ray_address: str | None = None
    #: Ray workers (None: one per GPU of the cluster, else one per node with CPUs).
    workers: int | None = None
    #: What the index is searched by: ``hybrid`` (vectors and the lexical part, as
    #: ``lexical`` decides), ``dense`` (no lexical part) or ``lexical`` (no vectors:
    #: nothing embedded, ``lexonly``).
    retrieval: str = "hybrid"
    #: Bring the index in step with the sources per document (``update``).
    update: bool = False
    #: With ``update``: also remove the sources of the index that are not named.
    prune: bool = False


@dataclass
class BuildReport:
    path: Path
    documents: int = 0
    chunks: int = 0
    total_documents: int = 0
    total_chunks: int = 0
    unchanged: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    seconds: float = 0.0
    embed_seconds: float = 0.0
    #: Building the BM25 index (from all passages, also on --append); 0 if not built.
    lexical_seconds: float = 0.0
    #: Passages an earlier, unfinished run of this build had committed (--resume).
    resumed_chunks: int = 0
    #: The unfinished build's directory that this build started over in, if any.
    discarded: str | None = None
    #: Processes that read and embedded (Ray workers), and the Ray node of each.
    workers: int = 1
    worker_nodes: list[str] = field(default_factory=list)
    #: Whether the reading thread or processes tokenized for the model (``pretokenized``).
    pretokenized: bool = False
    #: What ``--update`` did (meta.json's ``last_update``); None for a build.
    update: dict[str, Any] | None = None


#: Sources whose bytes read are counted against their size (folders are not).
READ_COUNTED = ("mediawiki", "jsonl")


class BuildCounters:
    """The build's counters, updated by the reader thread and the embedder.

    With dumps or JSONL files among the sources, one more counts the bytes of
    them read against their size, which gives the time left.
    """

    def __init__(self, progress: Progress, file_bytes: int = 0, embeds: bool = True) -> None:
        self.pages = progress.counter("pages read", "pages")
        self.passages = progress.counter("passages", "passages")
        # A build that embeds nothing (--retrieval lexical) stores its passages, no more.
        self.embedded = progress.counter("embedded" if embeds else "stored", "passages")
        self.read = (
            progress.counter("files read", "bytes", total=file_bytes)
            if file_bytes
            else NO_PROGRESS.counter("files read", "bytes")
        )

    def range_read(self, kind: str, size: int, documents: int, chunks: int) -> None:
        """A range of a ranged build (Ray, reader processes) came back whole."""
        self.pages.update(documents)
        self.passages.update(chunks)
        if kind != "folder":  # dumps and JSONL files count bytes against their size
            self.read.update(size)
