"""Building an index directory: read, chunk, embed, store, swap into place.

Reading and chunking run in a producer thread while the main thread embeds
(the model releases the GIL while it computes), so the pipeline around the
model costs little. Memory stays flat whatever the dump's size, apart from the
vectors themselves: documents and passages stream through a bounded queue.

The new index is written to a work directory beside the target and renamed
into place only when complete: an interrupted build leaves the previous index
untouched and never a half index that looks whole. Finished work is committed
in shards (``buildwork``): a build that is killed keeps what it committed, and
``--resume`` (``BuildOptions.resume``) continues it from where reading stood,
to the same index an uninterrupted build makes.
"""

from __future__ import annotations

import os
import queue
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__
from ..corpus import iter_positioned, source_kind
from ..corpus.ranges import SourceRange, plan_digest, plan_ranges
from ..errors import DiskFullError, InputError, UsageError
from ..progress import NO_PROGRESS, Progress
from ..types import Chunk
from .buildwork import READ_BATCH, BuildWork, chunk_row, source_counts
from .chunking import chunk_or_skip
from .embedding import Embedder, choose_backend, load_embedder
from .indexdir import (
    FOREIGN_OK,
    build_lock,
    disk_full_errno,
    sampled_digest,
    source_digest,
    swap_into_place,
    temp_dir,
    work_path,
    write_json,
)
from .layout import CHUNKS_FILE, ENGINES, FORMAT_VERSION, META_FILE, VECTORS_FILE, embed_text
from .lexical import LEXICAL_DIR, build_lexical, skipped_warning, want_lexical
from .store import check_model, check_vectors_file, connect_readonly, read_meta
from .vectors import AUTO_THRESHOLD, read_vectors, requested_type, write_vectors

#: Passages handed to the model per call. sentence-transformers sorts each call
#: by length, so larger calls waste less on padding; this many is ~1 MB of text.
EMBED_CALL_SIZE = 1024
DEFAULT_EMBED_TEXT = "title+text"
#: Passages per committed shard: a killed build loses at most this much work
#: (about four minutes of embedding at the 35 passages/s measured on 2 cores).
SHARD_PASSAGES = 8192


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
    #: ``auto``, ``flat``, ``hnsw`` or ``ivfpq`` (``ceg_cli.index.vectors``).
    index_type: str = "auto"
    #: Passages from which ``auto`` builds an approximate index.
    auto_threshold: int = AUTO_THRESHOLD
    #: Build the lexical (BM25) part; None: by size (``lexical.want_lexical``).
    lexical: bool | None = None
    #: ``local`` (this process) or ``ray`` (``ray_engine``: workers across a cluster).
    engine: str = "local"
    #: The Ray cluster to join (None: start Ray on this machine).
    ray_address: str | None = None
    #: Ray workers (None: one per GPU of the cluster, else one per node with CPUs).
    workers: int | None = None


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


def build_index(
    sources: Sequence[Path],
    target: Path,
    options: BuildOptions = BuildOptions(),
    *,
    embedder: Embedder | None = None,
    on_warning: Callable[[str], None] | None = None,
    progress: Progress = NO_PROGRESS,
) -> BuildReport:
    """Build (or with ``options.append``, extend) the index at ``target``.

    ``progress`` gets three counters: pages read, passages, passages embedded.

    One build of an index at a time: a second one fails at once, naming the
    lock (``build_lock``), rather than racing the first to the swap.
    """
    started = time.perf_counter()
    target = Path(target)
    kinds = {Path(s): source_kind(Path(s)) for s in sources}  # fails early on a bad path
    if options.chunk_words < 10:
        raise UsageError(f"--chunk-words {options.chunk_words}: use at least 10 words")
    _check_multistream_index(kinds, options.multistream_index)
    _check_engine(options)
    _check_target(target)
    with build_lock(target):
        report = _build(kinds, target, options, embedder, on_warning, progress)
    report.seconds = time.perf_counter() - started
    return report


def _build(
    kinds: dict[Path, str],
    target: Path,
    options: BuildOptions,
    embedder: Embedder | None,
    on_warning: Callable[[str], None] | None,
    progress: Progress,
) -> BuildReport:
    report = BuildReport(target)
    old_meta = read_meta(target) if options.append and (target / META_FILE).exists() else None
    if old_meta is not None:
        check_model(old_meta, options.model, target)
        check_vectors_file(target, old_meta)
        _check_same_settings(old_meta, options, target)

    digests = {path: source_digest(path) for path in kinds}
    old_sources: list[dict[str, Any]] = list(old_meta["sources"]) if old_meta else []
    known = {s["digest"] for s in old_sources}
    todo: list[Path] = []
    for path in kinds:
        if digests[path] in known:
            report.unchanged.append(str(path))
        else:
            todo.append(path)
    replaced_keys = {str(p.resolve()) for p in todo} & {s["path"] for s in old_sources}
    report.replaced = sorted(replaced_keys)

    if old_meta is not None and not todo:
        # Every source is already indexed as it is: nothing to embed or rewrite.
        report.total_chunks = old_meta["counts"]["chunks"]
        report.total_documents = old_meta["counts"]["documents"]
        wanted, _ = want_lexical(options.lexical, report.total_chunks, old_meta)
        if "lexical" not in old_meta and wanted:
            # Built before the lexical part existed, or without it: add it, not re-embedding.
            report.lexical_seconds = _add_lexical(target, old_meta)
        return report
    # Ray workers load the model themselves, unless given a model object.
    model: Embedder | dict[str, Any] | None = embedder
    if embedder is None:
        model = {
            "name": old_meta["model"]["name"] if old_meta else options.model,
            "batch_size": options.batch_size,
            "backend": choose_backend(
                options.backend, old_meta["model"].get("backend", "torch") if old_meta else None
            ),
            "device": options.device,
        }
        embedder = load_embedder(**model)
    if old_meta is not None and (
        embedder.name != old_meta["model"]["name"]
        or embedder.dimension != old_meta["model"]["dimension"]
    ):
        # Vectors of two models in one index compare meaningless numbers.
        built = old_meta["model"]
        raise UsageError(
            f"index at {target} was built with model {built['name']} (dimension "
            f"{built['dimension']}); cannot append with {embedder.name} (dimension "
            f"{embedder.dimension}): use that model, or rebuild without --append"
        )
    plan = (
        plan_ranges(todo, follow_symlinks=options.follow_symlinks,
                    multistream_index=options.multistream_index)
        if options.engine == "ray" else None
    )
    manifest = _manifest(todo, kinds, digests, options, embedder, old_meta, replaced_keys, plan)
    kept_sources = [s for s in old_sources if s["path"] not in replaced_keys]
    warn = on_warning or (lambda _message: None)
    tmp: Path | None = None
    work: BuildWork | None = None
    filled = False
    keep_work = False
    try:
        work, tmp = _open_work(target, manifest, embedder.dimension, options, report, warn)
        if work.shard < 0:
            _start(work, target if old_meta else None, replaced_keys)
        report.resumed_chunks = work.position["next_id"] - work.position["kept"]
        new_sources = _fill(todo, kinds, digests, options, embedder, work, report, on_warning,
                            progress, plan, model)
        work.rows_done()
        filled = True
        (total_chunks,) = work.db.execute("SELECT count(*) FROM chunks").fetchone()
        if total_chunks == 0:
            # A wrong file or namespace, most likely: never swap in an empty index.
            names = ", ".join(str(p) for p in todo)
            raise InputError(f"{names}: no documents with text; nothing written to {target}")
        wanted, skipped = want_lexical(options.lexical, int(total_chunks), old_meta)
        lexical = None
        if wanted:
            t0 = time.perf_counter()
            lexical = build_lexical(work.db, tmp, options.embed_text)
            report.lexical_seconds = time.perf_counter() - t0
        elif skipped.startswith("auto"):
            warn(skipped_warning(int(total_chunks)))
        vectors = work.vectors()
        if vectors.count != total_chunks:
            raise RuntimeError(f"{tmp}: {vectors.count} vectors for {total_chunks} passages")
        requested = requested_type(options.index_type, old_meta)
        # Streamed from the shards: memory holds a batch of vectors, not all of them.
        written = write_vectors(vectors, tmp / VECTORS_FILE, requested, options.auto_threshold,
                                progress=progress)
        work.finish()
        all_sources = kept_sources + new_sources
        report.total_chunks = int(total_chunks)
        report.total_documents = sum(s["documents"] for s in all_sources)
        meta = _meta(embedder, options, all_sources, report, old_meta)
        meta["faiss"].update(written)
        meta["faiss"]["file_size"] = (tmp / VECTORS_FILE).stat().st_size
        meta["faiss"]["file_digest"] = sampled_digest(tmp / VECTORS_FILE)
        if lexical is not None:
            meta["lexical"] = lexical
        else:
            meta["lexical_skipped"] = skipped
        write_json(tmp / META_FILE, meta)
        swap_into_place(tmp, target)
    except (OSError, sqlite3.Error, RuntimeError) as exc:
        code = disk_full_errno(exc)
        if code is None:
            keep_work = _keep(work, tmp, warn)
            raise
        rows = work.rows if work is not None else 0
        # Committed shards are kept, as for any other stop: days of embedding
        # must not be lost to a full disk that the user can free.
        keep_work = _keep(work, tmp, warn)
        raise _disk_full(
            exc, code, target, tmp, rows, embedder.dimension, filled, keep_work
        ) from exc
    except BaseException as exc:
        # Ctrl-C, a failing model: what is committed stays for --resume; not
        # a source's fault (InputError), which the same build would meet again.
        if not isinstance(exc, InputError):
            keep_work = _keep(work, tmp, warn)
        raise
    finally:
        if work is not None and work.db is not None:
            work.db.close()
        if tmp is not None and tmp.exists() and not keep_work:
            shutil.rmtree(tmp, ignore_errors=True)
    return report


def _open_work(
    target: Path,
    manifest: dict[str, Any],
    dimension: int,
    options: BuildOptions,
    report: BuildReport,
    warn: Callable[[str], None],
) -> tuple[BuildWork, Path]:
    """The unfinished build to go on with (``--resume``), or a new one."""
    root = work_path(target)
    if options.resume:
        work = BuildWork.reopen(root, manifest, dimension) if root.is_dir() else None
        if work is not None:
            return work, root
        warn(f"--resume: no unfinished build of {target} to resume; building from the start")
    elif (root / "manifest.json").exists():
        report.discarded = str(root)
        warn(f"starting over: replacing the unfinished build in {root} (--resume would "
             "continue it)")
    tmp = temp_dir(target, True)  # resumable: the stable work_path
    return BuildWork.create(tmp, manifest, dimension), tmp


def _keep(work: BuildWork | None, tmp: Path | None, warn: Callable[[str], None]) -> bool:
    """Whether an unfinished build keeps its directory: only if it committed new work."""
    if work is None or tmp is None or work.shard < 1:
        return False
    done = work.position["next_id"] - work.position["kept"]
    warn(
        f"the unfinished build keeps its {done:,} committed passages in {tmp}: run the same "
        "command with --resume to go on from there"
    )
    return True


def _manifest(
    todo: list[Path],
    kinds: dict[Path, str],
    digests: dict[Path, str],
    options: BuildOptions,
    embedder: Embedder,
    old_meta: dict[str, Any] | None,
    replaced: set[str],
    plan: list[SourceRange] | None,
) -> dict[str, Any]:
    """What makes two builds the same build: --resume continues only the same one."""
    return {
        # A Ray build commits after whole ranges: it resumes only with the same ranges.
        "engine": options.engine,
        "ranges": plan_digest(plan) if plan is not None else None,
        "sources": [
            {"path": str(p.resolve()), "kind": kinds[p], "digest": digests[p]} for p in todo
        ],
        "model": {"name": embedder.name, "dimension": embedder.dimension},
        "chunk_words": options.chunk_words,
        "namespaces": sorted(options.namespaces),
        "embed_text": options.embed_text,
        "follow_symlinks": options.follow_symlinks,
        # Batches decide the exact floats a model gives: resume cuts them the same way.
        "embed_call_size": EMBED_CALL_SIZE,
        "append_to": [old_meta["updated_at"], old_meta["faiss"].get("file_digest")]
        if old_meta else None,
        "replaced": sorted(replaced),
    }


def _disk_full(
    exc: BaseException,
    code: int,
    target: Path,
    tmp: Path | None,
    count: int,
    dimension: int,
    filled: bool,
    kept: bool = False,
) -> DiskFullError:
    """Say where the disk filled up and how much room the new index needs there.

    ``kept``: the unfinished build stays for ``--resume`` (it committed shards),
    so its room is not free again; the index file needs the vectors' room
    once more beside their shards.
    """
    where = target.parent.resolve()
    if isinstance(exc, sqlite3.Error):
        file = CHUNKS_FILE
    elif isinstance(exc, OSError) and exc.filename:
        file = Path(exc.filename).name
    else:
        file = VECTORS_FILE  # FAISS, the only writer that raises RuntimeError
    vector_bytes = count * dimension * 4
    store_bytes = 0
    if tmp is not None:
        # Until the build finishes, most new rows sit in the store's write-ahead log.
        for name in (CHUNKS_FILE, f"{CHUNKS_FILE}-wal"):
            if (tmp / name).exists():
                store_bytes += (tmp / name).stat().st_size
    # The partial build is removed next; the room it holds is the user's again.
    partial = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file()) if tmp else 0
    free = _bytes(shutil.disk_usage(where).free + (0 if kept else partial))
    if kept:
        what = "for the index file" if filled else "so far, and more to come"
        needs = (
            f"{'about' if filled else 'more than'} {_bytes(vector_bytes)} more in {where} "
            f"{what} ({count:,} vectors x {dimension} dimensions x 4 bytes), {free} is free "
            "there"
        )
        return DiskFullError(
            f"disk full ({os.strerror(code)}) while writing {file} of the new index for "
            f"{target}: it needs {needs}; the unfinished build is kept in {tmp}: free some "
            "space and run the same command with --resume"
        )
    if count or store_bytes:
        # Until every passage is read, the count is a floor: more were coming.
        total = _bytes(vector_bytes + store_bytes)
        needs = (
            f"{'about' if filled else 'more than'} {total} in {where} ({count:,} vectors x "
            f"{dimension} dimensions x 4 bytes = {_bytes(vector_bytes)}, and "
            f"{_bytes(store_bytes)} of passages{'' if filled else ' so far'}), {free} is free "
            "there without the partial build"
        )
    else:
        needs = f"more room in {where} than the {free} free there"
    kept = "the previous index is untouched" if (target / META_FILE).exists() else "nothing kept"
    return DiskFullError(
        f"disk full ({os.strerror(code)}) while writing {file} of the new index for "
        f"{target}: it needs {needs}; {kept}: free some space, or build elsewhere with --index"
    )


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{max(1, round(n / 1024)) if n else 0} KiB"


def _add_lexical(target: Path, meta: dict[str, Any]) -> float:
    """Give the index at ``target`` its lexical part, as a new index swapped in.

    The vectors and passages are hard links (copies where links fail): indexes
    are never changed in place, so sharing the files is safe. Returns seconds.
    """
    started = time.perf_counter()
    tmp = temp_dir(target)
    try:
        for name in (VECTORS_FILE, CHUNKS_FILE):
            try:
                os.link(target / name, tmp / name)
            except OSError:
                shutil.copy2(target / name, tmp / name)
        with closing(connect_readonly(tmp / CHUNKS_FILE)) as db:
            lexical = build_lexical(db, tmp, meta["embed_text"])
        meta = {k: v for k, v in meta.items() if k != "lexical_skipped"}
        write_json(tmp / META_FILE, {**meta, "lexical": lexical})
        swap_into_place(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return time.perf_counter() - started


def _check_multistream_index(kinds: dict[Path, str], index: Path | None) -> None:
    if index is None:
        return
    dumps = [p for p, kind in kinds.items() if kind == "mediawiki"]
    if len(dumps) != 1:
        raise UsageError(
            f"--multistream-index {index}: it belongs to one dump, and the sources hold "
            f"{len(dumps)} MediaWiki dumps; build that dump on its own"
        )
    if not index.is_file():
        raise UsageError(f"--multistream-index {index}: no such file")


def _check_engine(options: BuildOptions) -> None:
    if options.engine not in ENGINES:
        raise UsageError(f"--engine {options.engine}: expected one of {', '.join(ENGINES)}")
    if options.workers is not None and options.workers < 1:
        raise UsageError(f"--workers {options.workers}: use at least 1")
    if options.engine == "ray":
        from .ray_engine import check_reachable, require_ray

        # Before the model loads: say at once how to install Ray, or that no cluster answers.
        require_ray()
        if options.ray_address:
            check_reachable(options.ray_address)
    elif options.ray_address or options.workers:
        raise UsageError("--ray-address and --workers go with --engine ray")


def _check_target(target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise UsageError(f"--index {target}: exists and is not a directory")
    if target.is_dir() and not (target / META_FILE).exists():
        foreign = [p.name for p in target.iterdir() if p.name not in FOREIGN_OK]
        foreign = [n for n in foreign if n not in (VECTORS_FILE, CHUNKS_FILE, LEXICAL_DIR)]
        if foreign:
            raise UsageError(
                f"--index {target}: the directory holds other files "
                f"({', '.join(sorted(foreign)[:3])}) and is not a ceg index; "
                "choose another directory"
            )


def _check_same_settings(meta: dict[str, Any], options: BuildOptions, target: Path) -> None:
    recorded = meta["chunker"]["max_words"]
    if recorded != options.chunk_words:
        raise UsageError(
            f"index at {target} was built with --chunk-words {recorded}; appending with "
            f"{options.chunk_words} would mix passage sizes: use {recorded} or rebuild"
        )
    if meta["embed_text"] != options.embed_text:
        raise UsageError(
            f"index at {target} embeds '{meta['embed_text']}'; this run asked for "
            f"'{options.embed_text}': rebuild the index to change it"
        )


def _start(work: BuildWork, old: Path | None, replaced: set[str]) -> None:
    """Commit shard 0: what is kept of the ``old`` index (nothing for a new index)."""
    import numpy as np

    keep: list[int] = []
    if old is not None:
        db = work.db
        db.execute("ATTACH DATABASE ? AS old", (f"file:{(old / CHUNKS_FILE).as_posix()}?mode=ro",))
        keep = [
            row[0]
            for row in db.execute("SELECT id, source FROM old.chunks ORDER BY id")
            if row[1] not in replaced
        ]
        # Row ids must equal vector positions, so kept rows are renumbered densely.
        db.executemany(
            "INSERT INTO chunks SELECT ?, doc_id, title, ordinal, start, end, text, url, source "
            "FROM old.chunks WHERE id = ?",
            ((new, old_id) for new, old_id in enumerate(keep)),
        )
        db.commit()
        db.execute("DETACH DATABASE old")
    position = {"source": 0, "offset": 0, "next_id": len(keep), "kept": len(keep), "sources": {}}
    if not keep:
        work.commit(position)
        return
    # The old vectors, memory-mapped, go to shard 0 a batch at a time.
    old_vectors = read_vectors(old / VECTORS_FILE)
    kept = np.asarray(keep)

    def batches() -> Iterator[np.ndarray]:
        for start in range(0, len(kept), READ_BATCH):
            ids = kept[start : start + READ_BATCH]
            first, last = int(ids[0]), int(ids[-1])
            yield old_vectors.reconstruct_n(first, last - first + 1)[ids - first]

    work.commit(position, batches(), len(kept))


def _fill(
    todo: list[Path],
    kinds: dict[Path, str],
    digests: dict[Path, str],
    options: BuildOptions,
    embedder: Embedder,
    work: BuildWork,
    report: BuildReport,
    on_warning: Callable[[str], None] | None,
    progress: Progress,
    plan: list[SourceRange] | None = None,
    model: Embedder | dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Stream every source in ``todo`` into ``work``, from where it stands, in shards.

    With a ``plan`` (``--engine ray``), Ray workers read and embed its ranges,
    each loading ``model`` (load_embedder's arguments, or a model object).
    """
    per_source: dict[str, dict[str, Any]] = {}
    for path in todo:
        key = str(path.resolve())
        done = work.position["sources"].get(key, {"documents": 0, "chunks": 0})
        per_source[key] = {
            "path": key,
            "kind": kinds[path],
            "digest": digests[path],
            "size": _size(path),
            "documents": done["documents"],
            "chunks": done["chunks"],
        }
        if kinds[path] == "mediawiki":
            per_source[key]["namespaces"] = sorted(options.namespaces)

    files = sum(s["size"] for s in per_source.values() if s["kind"] in _READ_COUNTED)
    bars = _Bars(progress, files)
    shard_passages = options.shard_passages or SHARD_PASSAGES
    if plan is not None:
        from .ray_engine import RangeSettings, fill_on_ray

        settings = RangeSettings(options.chunk_words, options.namespaces, options.embed_text,
                                 EMBED_CALL_SIZE)
        fill_on_ray(plan, per_source, [str(p.resolve()) for p in todo], options,
                    model or embedder, settings, work, report, on_warning, bars, shard_passages)
    else:
        _fill_here(todo, options, embedder, work, report, on_warning, per_source, bars,
                   shard_passages)
    # The last, partial shard is committed with the index itself (``finish``):
    # its vectors go from memory into the index file.
    report.documents = sum(s["documents"] for s in per_source.values())
    report.chunks = sum(s["chunks"] for s in per_source.values())
    return list(per_source.values())


def _fill_here(
    todo: list[Path],
    options: BuildOptions,
    embedder: Embedder,
    work: BuildWork,
    report: BuildReport,
    on_warning: Callable[[str], None] | None,
    per_source: dict[str, dict[str, Any]],
    bars: _Bars,
    shard_passages: int,
) -> None:
    """Read and chunk in a thread, embed here: the single-machine engine."""
    next_id = work.position["next_id"]
    position = work.position
    for batch, position in _produce_in_background(
        todo, options, per_source, work.position, bars, on_warning
    ):
        t0 = time.perf_counter()
        vecs = embedder.embed([embed_text(c, options.embed_text) for c in batch])
        report.embed_seconds += time.perf_counter() - t0
        work.add(vecs, ((next_id + i, *chunk_row(c, c.source)) for i, c in enumerate(batch)))
        next_id += len(batch)
        bars.embedded.update(len(batch))
        if work.pending >= shard_passages:
            work.commit({**position, "next_id": next_id, "kept": work.position["kept"]})


def _produce_in_background(
    todo: list[Path],
    options: BuildOptions,
    per_source: dict[str, dict[str, Any]],
    start: dict[str, Any],
    bars: _Bars,
    on_warning: Callable[[str], None] | None,
) -> Iterator[tuple[list[Chunk], dict[str, Any]]]:
    """Yield batches of passages read and chunked by a worker thread, from ``start``.

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
                    on_read=bars.read.update if stats["kind"] in _READ_COUNTED else None,
                    multistream_index=options.multistream_index,
                ):
                    # Store the resolved path so that --append recognises the source.
                    chunks = chunk_or_skip(doc, options.chunk_words, on_warning)
                    if chunks is None:
                        continue
                    stats["documents"] += 1
                    stats["chunks"] += len(chunks)
                    bars.pages.update(1)
                    bars.passages.update(len(chunks))
                    for c in chunks:
                        batch.append(_with_source(c, stats["path"]))
                    if len(batch) >= EMBED_CALL_SIZE:
                        _put(out, (batch, snapshot(number, offset)), stop)
                        batch = []
                    if stop.is_set():
                        return
            if batch:
                _put(out, (batch, snapshot(len(todo), 0)), stop)
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


def _with_source(chunk: Chunk, source: str) -> Chunk:
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
    )


#: Sources whose bytes read are counted against their size (folders are not).
_READ_COUNTED = ("mediawiki", "jsonl")


class _Bars:
    """The build's counters, updated by the reader thread and the embedder.

    With dumps or JSONL files among the sources, one more counts the bytes of
    them read against their size, which gives the time left.
    """

    def __init__(self, progress: Progress, file_bytes: int = 0) -> None:
        self.pages = progress.counter("pages read", "pages")
        self.passages = progress.counter("passages", "passages")
        self.embedded = progress.counter("embedded", "passages")
        self.read = (
            progress.counter("files read", "bytes", total=file_bytes)
            if file_bytes
            else NO_PROGRESS.counter("files read", "bytes")
        )


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def _meta(
    embedder: Embedder,
    options: BuildOptions,
    sources: list[dict[str, Any]],
    report: BuildReport,
    old_meta: dict[str, Any] | None,
) -> dict[str, Any]:
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return {
        "format_version": FORMAT_VERSION,
        "ceg_version": __version__,
        "created_at": old_meta["created_at"] if old_meta else now,
        "updated_at": now,
        "model": {
            "name": embedder.name,
            "dimension": embedder.dimension,
            "normalized": True,
            "max_seq_length": getattr(embedder, "max_seq_length", None),
            "backend": getattr(embedder, "backend", "torch"),
        },
        "embed_text": options.embed_text,
        "faiss": {"type": "IndexFlatIP", "metric": "inner_product"},
        "chunker": {"max_words": options.chunk_words, "boundaries": "sentence, newline"},
        "counts": {"documents": report.total_documents, "chunks": report.total_chunks},
        "sources": sources,
        "build": {"engine": options.engine, "workers": report.workers},
    }
