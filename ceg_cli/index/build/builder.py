"""Building an index directory: read, chunk, embed, store, swap into place.

The builder decides what to build (which sources are new, whether to append,
resume or start over), lets an engine read, chunk and embed them (here:
``local_engine``; on a cluster: ``ray_engine``), and writes the index file,
the lexical part and ``meta.json``. Memory stays flat whatever the dump's
size, apart from the vectors themselves.

The new index is written to a work directory beside the target (the directory's
life, links and lock included: ``indexdir.build_target``) and renamed
into place only when complete: an interrupted build leaves the previous index
untouched and never a half index that looks whole. Finished work is committed
in shards (``buildwork``): a build that is killed keeps what it committed, and
``--resume`` (``BuildOptions.resume``) continues it from where reading stood,
to the same index an uninterrupted build makes.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...corpus.ranges import SourceRange, plan_digest, plan_ranges
from ...corpus.sources import resolve_sources
from ...errors import InputError, UsageError
from ...progress import NO_PROGRESS, Progress
from ..dense.devices import check_device
from ..dense.embedding import Embedder, choose_backend, load_embedder
from ..dense.static import check_weights, is_static
from ..dense.vectors import fell_back, read_vectors, recall_missed, requested_type, write_vectors
from ..diskfull import disk_full_error
from ..indexdir import (
    BuildTarget,
    build_target,
    disk_full_errno,
    made_by_ceg,
    sampled_digest,
    source_digest,
    sqlite_uri,
    write_json,
)
from ..layout import CHUNKS_FILE, META_FILE, VECTORS_FILE
from ..lexical.bm25 import append_engine, build_lexical, want_lexical
from ..lexical.lexonly import (
    LEXICAL_ONLY,
    LEXICAL_ONLY_FORMAT,
    NoEmbedder,
    is_lexical_only,
)
from .buildchecks import appended_meta, check_options
from .buildmeta import new_meta, vector_precision  # noqa: F401 (imported from here)
from .buildopts import (
    READ_COUNTED,
    BuildCounters,
    BuildOptions,
    BuildReport,
)
from .buildwork import READ_BATCH, BuildWork
from .doclang import check_model_choice, default_model, document_languages
from .existing import check_target, finish_swap, unchanged
from .local_engine import fill_here
from .processes import available_cores

#: Passages handed to the model per call. sentence-transformers sorts each call
#: by length, so larger calls waste less on padding; this many is ~1 MB of text.
EMBED_CALL_SIZE = 1024
#: Passages per committed shard: a killed build loses at most this much work
#: (about four minutes of embedding at the 35 passages/s measured on 2 cores).
SHARD_PASSAGES = 8192


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
    lock (``build_lock``), rather than racing the first to the swap. A
    ``target`` that is a symbolic link builds into the link's target
    (``build_target``): the link stays.
    """
    started = time.perf_counter()
    target = Path(target)
    # Fails early on a bad path, a pipe, the index itself; drops a source named twice.
    kinds = resolve_sources(sources, target, on_warning=on_warning)
    options = check_options(options, kinds)
    if options.retrieval == LEXICAL_ONLY:
        embedder = NoEmbedder()
    if embedder is None:
        # Refused here, not by the model's loader: a refused run writes nothing, not even the lock.
        check_device(options.backend, options.device, options.precision)
    check_target(target)
    with build_target(target) as site:
        if options.update and (site.path / META_FILE).exists():
            from .update import update_index  # per document, in place (``generation``)

            report = update_index(kinds, site.path, options, embedder, on_warning, progress)
        else:
            report = _build(kinds, site, options, embedder, on_warning, progress)
    report.seconds = time.perf_counter() - started
    return report


def _build(
    kinds: dict[Path, str],
    site: BuildTarget,
    options: BuildOptions,
    embedder: Embedder | None,
    on_warning: Callable[[str], None] | None,
    progress: Progress,
) -> BuildReport:
    """The build's steps: what is at the target, which sources to read, the model,
    then the work folder, filled and put in place (``_run``)."""
    report = BuildReport(site.given)
    old_meta = appended_meta(site, options)
    if old_meta is not None:
        options = replace(options, lexical_engine=append_engine(options.lexical_engine, old_meta))
    sources = _Sources.of(kinds, old_meta, report)
    if options.resume and finish_swap(site, set(sources.digests.values()), options, report,
                                      on_warning):
        return report
    if old_meta is not None and not sources.todo:
        unchanged(site, old_meta, options, report, on_warning or (lambda _message: None))
        return report
    model, embedder, chosen_by_sample = _model(kinds, site.given, options, embedder, old_meta,
                                               on_warning)
    options = with_default_readers(options, embedder)
    plan = (
        plan_ranges(sources.todo, follow_symlinks=options.follow_symlinks,
                    multistream_index=options.multistream_index)
        if _uses_ranges(options) else None
    )
    job = _Job(kinds, site, options, embedder, model, chosen_by_sample, old_meta, sources,
               plan, report, on_warning, progress)
    _run(job)
    return report


@dataclass
class _Sources:
    """Which sources this build reads (``todo``) and what it keeps of the old index."""

    digests: dict[Path, str]
    todo: list[Path]
    #: Sources of the old index that a changed file of the same path replaces.
    replaced: set[str]
    kept: list[dict[str, Any]]

    @classmethod
    def of(cls, kinds: dict[Path, str], old_meta: dict[str, Any] | None,
           report: BuildReport) -> _Sources:
        digests = {path: source_digest(path) for path in kinds}
        old_sources: list[dict[str, Any]] = list(old_meta["sources"]) if old_meta else []
        known = {s["digest"] for s in old_sources}
        todo: list[Path] = []
        for path in kinds:
            if digests[path] in known:
                report.unchanged.append(str(path))
            else:
                todo.append(path)
        replaced = {str(p.resolve()) for p in todo} & {s["path"] for s in old_sources}
        report.replaced = sorted(replaced)
        kept = [s for s in old_sources if s["path"] not in replaced]
        return cls(digests, todo, replaced, kept)


def _model(
    kinds: dict[Path, str],
    target: Path,
    options: BuildOptions,
    embedder: Embedder | None,
    old_meta: dict[str, Any] | None,
    on_warning: Callable[[str], None] | None,
) -> tuple[Embedder | dict[str, Any] | None, Embedder, bool]:
    """(what Ray workers load: load_embedder's arguments or the model object; the
    model, loaded; whether it was chosen by the first documents, checked at the end)."""
    # Ray workers load the model themselves, unless given a model object.
    model: Embedder | dict[str, Any] | None = embedder
    chosen_by_sample = embedder is None and old_meta is None and not options.model \
        and options.language == "auto"
    if embedder is None:
        model = {
            "name": (old_meta["model"]["name"] if old_meta
                     else options.model or default_model(kinds, options, on_warning)),
            "batch_size": options.batch_size,
            "backend": choose_backend(
                options.backend, old_meta["model"].get("backend", "torch") if old_meta else None
            ),
            "device": options.device,
            # On Ray the driver records what workers on other machines compute:
            # float32 there, which every device computes alike.
            "precision": "float32" if options.engine == "ray" else options.precision,
        }
        embedder = load_embedder(**model)
    if old_meta is not None and not is_lexical_only(old_meta) and (
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
    if old_meta is not None and not is_lexical_only(old_meta):
        check_weights(old_meta["model"], embedder, target)
    return model, embedder, chosen_by_sample


@dataclass
class _Job:
    """Everything the work of one build needs, decided before it starts."""

    kinds: dict[Path, str]
    site: BuildTarget
    options: BuildOptions
    embedder: Embedder
    model: Embedder | dict[str, Any] | None
    chosen_by_sample: bool
    old_meta: dict[str, Any] | None
    sources: _Sources
    plan: list[SourceRange] | None
    report: BuildReport
    on_warning: Callable[[str], None] | None
    progress: Progress

    def warn(self, message: str) -> None:
        if self.on_warning is not None:
            self.on_warning(message)


def _run(job: _Job) -> None:
    """Fill a work folder (resumed, or new) and put the index in place; on a failure,
    keep what it committed for ``--resume`` or remove it, and say which."""
    target, report, embedder = job.site.given, job.report, job.embedder
    manifest = _manifest(job.sources.todo, job.kinds, job.sources.digests, job.options,
                         embedder, job.old_meta, job.sources.replaced, job.plan)
    tmp: Path | None = None
    work: BuildWork | None = None
    filled = False
    keep_work = False
    try:
        work, tmp = _open_work(job.site, manifest, embedder.dimension, job.options, report,
                               job.warn)
        new_sources = _fill_work(job, work)
        filled = True
        _write_index(job, work, tmp, new_sources)
        job.site.swap_in(tmp)
    except (OSError, sqlite3.Error, RuntimeError) as exc:
        code = disk_full_errno(exc)
        keep_work = _keep(work, tmp, job.warn)
        if code is None:
            raise
        rows = work.rows if work is not None else 0
        # Committed shards are kept, as for any other stop: days of embedding
        # must not be lost to a full disk that the user can free.
        raise disk_full_error(
            exc, code, target, tmp, rows, embedder.dimension, filled, keep_work
        ) from exc
    except BaseException as exc:
        # Ctrl-C, a failing model: what is committed stays for --resume; not
        # a source's fault (InputError), which the same build would meet again.
        if not isinstance(exc, InputError):
            keep_work = _keep(work, tmp, job.warn)
        raise
    finally:
        if work is not None and work.db is not None:
            work.db.close()
        if tmp is not None and not keep_work:
            job.site.discard(tmp)
        elif tmp is not None:
            job.site.keep(tmp)


def _fill_work(job: _Job, work: BuildWork) -> list[dict[str, Any]]:
    """Shard 0 (what an append keeps) if not yet committed, then every new source."""
    if work.shard < 0:
        _start(work, job.site.path if job.old_meta else None, job.sources.replaced)
    job.report.resumed_chunks = work.position["next_id"] - work.position["kept"]
    new_sources = _fill(job.sources.todo, job.kinds, job.sources.digests, job.options,
                        job.embedder, work, job.report, job.on_warning, job.progress, job.plan,
                        job.model)
    work.rows_done()
    return new_sources


def _write_index(job: _Job, work: BuildWork, tmp: Path, new_sources: list[dict[str, Any]]
                 ) -> None:
    """The lexical part, the vectors' index file and meta.json, written into ``tmp``."""
    options, report, old_meta = job.options, job.report, job.old_meta
    if old_meta is not None and not any(s["chunks"] for s in new_sources):
        # As a fresh build refuses: an appended source with no text is a wrong file.
        names = ", ".join(str(p) for p in job.sources.todo)
        raise InputError(f"{names}: no documents with text; nothing written to "
                         f"{job.site.given}")
    (total_chunks,) = work.db.execute("SELECT count(*) FROM chunks").fetchone()
    if total_chunks == 0:
        # A wrong file or namespace, most likely: never swap in an empty index.
        names = ", ".join(str(p) for p in job.sources.todo)
        raise InputError(f"{names}: no documents with text; nothing written to "
                         f"{job.site.given}")
    wanted, skipped = want_lexical(options.lexical, int(total_chunks), old_meta)
    wanted = wanted or options.retrieval == LEXICAL_ONLY
    lexical = None
    if wanted:
        t0 = time.perf_counter()
        lexical = build_lexical(work.db, tmp, options.embed_text, options.lexical_engine)
        report.lexical_seconds = time.perf_counter() - t0
    vectors = work.vectors()
    if vectors.count != total_chunks:
        raise RuntimeError(f"{tmp}: {vectors.count} vectors for {total_chunks} passages")
    written = None
    if options.retrieval != LEXICAL_ONLY:
        requested = requested_type(options.index_type, old_meta)
        # Streamed from the shards: memory holds a batch of vectors, not all of them.
        written = write_vectors(vectors, tmp / VECTORS_FILE, requested,
                                options.auto_threshold, progress=job.progress,
                                large=options.large_threshold)
        for said in (fell_back(written), recall_missed(written)):
            if said is not None:
                job.warn(said)
    languages = document_languages(work.db)
    if job.chosen_by_sample and isinstance(job.model, dict):
        check_model_choice(job.model["name"], languages, job.warn)
    work.finish()
    all_sources = job.sources.kept + new_sources
    report.total_chunks = int(total_chunks)
    report.total_documents = sum(s["documents"] for s in all_sources)
    meta = new_meta(job.embedder, options, all_sources, report, old_meta)
    meta["languages"] = languages
    if written is None:
        # No vectors: no model, no FAISS file (lexonly).
        del meta["model"], meta["faiss"]
        meta["format_version"] = LEXICAL_ONLY_FORMAT
        meta["retrieval"] = LEXICAL_ONLY
    else:
        meta["faiss"].update(written)
        meta["faiss"]["file_size"] = (tmp / VECTORS_FILE).stat().st_size
        meta["faiss"]["file_digest"] = sampled_digest(tmp / VECTORS_FILE)
    if lexical is not None:
        meta["lexical"] = lexical
    else:
        meta["lexical_skipped"] = skipped
    write_json(tmp / META_FILE, meta)


def _open_work(
    site: BuildTarget,
    manifest: dict[str, Any],
    dimension: int,
    options: BuildOptions,
    report: BuildReport,
    warn: Callable[[str], None],
) -> tuple[BuildWork, Path]:
    """The unfinished build to go on with (``--resume``), or a new one."""
    target, root = site.given, site.work
    if options.resume:
        work = BuildWork.reopen(root, manifest, dimension) if made_by_ceg(root) else None
        if work is not None:
            return work, root
        warn(f"--resume: no unfinished build of {target} to resume; building from the start")
    elif (root / "manifest.json").exists():
        report.discarded = str(root)
        warn(f"starting over: replacing the unfinished build in {root} (--resume would "
             "continue it)")
    tmp = site.new_work(resumable=True)  # the stable work_path
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
        "language": options.language,
        "namespaces": sorted(options.namespaces),
        "embed_text": options.embed_text,
        "follow_symlinks": options.follow_symlinks,
        # Batches decide the exact floats a model gives: resume cuts them the same way.
        "embed_call_size": EMBED_CALL_SIZE,
        "append_to": [old_meta["updated_at"], (old_meta.get("faiss") or {}).get("file_digest")]
        if old_meta else None,
        "replaced": sorted(replaced),
    }


def with_default_readers(options: BuildOptions, embedder: Embedder) -> BuildOptions:
    """``--workers`` left out on the local engine: reader processes on every core
    but the model's own when the model runs on a GPU, on every core when nothing is
    embedded (``--retrieval lexical``) or the model is static (``static-minilm``),
    else the reading thread.

    On a GPU the work in front of the model (reading, chunking, tokenizing) is
    the limit; on the CPU the model itself is, and reader processes would take
    cores from it (``benchmarks/gpu/gpu_build.py``).
    """
    if options.engine != "local" or options.workers is not None:
        return options
    if isinstance(embedder, NoEmbedder) or is_static(getattr(embedder, "name", None)):
        # Nothing to embed (--retrieval lexical), or a static model (thousands of passages
        # a second): reading is nearly all the work, on every core.
        return replace(options, workers=available_cores())
    if getattr(embedder, "device", "cpu") != "cuda":
        return options
    return replace(options, workers=max(1, available_cores() - 1))


def _uses_ranges(options: BuildOptions) -> bool:
    """Whether the build cuts its sources into ranges: on Ray, or with reader processes."""
    return options.engine == "ray" or (options.workers or 1) > 1


def _start(work: BuildWork, old: Path | None, replaced: set[str]) -> None:
    """Commit shard 0: what is kept of the ``old`` index (nothing for a new index)."""
    import numpy as np

    keep: list[int] = []
    if old is not None:
        db = work.db
        db.execute("ATTACH DATABASE ? AS old", (sqlite_uri(old / CHUNKS_FILE, "mode=ro"),))
        keep = [
            row[0]
            for row in db.execute("SELECT id, source FROM old.chunks ORDER BY id")
            if row[1] not in replaced
        ]
        # Row ids must equal vector positions, so kept rows are renumbered densely.
        # An index built before languages has no language column: its passages were
        # all read as English.
        old_columns = {row[1] for row in db.execute("PRAGMA old.table_info(chunks)")}
        language = "language" if "language" in old_columns else "'en'"
        db.executemany(
            "INSERT INTO chunks SELECT ?, doc_id, title, ordinal, start, end, text, url, source, "
            f"{language} FROM old.chunks WHERE id = ?",
            ((new, old_id) for new, old_id in enumerate(keep)),
        )
        db.commit()
        db.execute("DETACH DATABASE old")
    position = {"source": 0, "offset": 0, "next_id": len(keep), "kept": len(keep), "sources": {}}
    if not keep:
        work.commit(position)
        return
    kept = np.asarray(keep)
    if work.dimension == 0:  # an index without vectors (lexonly): its rows alone
        work.commit(position, [np.zeros((len(kept), 0), dtype=np.float32)], len(kept))
        return
    # The old vectors, memory-mapped, go to shard 0 a batch at a time.
    old_vectors = read_vectors(old / VECTORS_FILE)

    def batches() -> Iterator[np.ndarray]:
        for start in range(0, len(kept), READ_BATCH):
            ids = kept[start : start + READ_BATCH]
            # Each run of consecutive ids on its own: a replaced source in the middle is a
            # gap that one read from first to last would span (gigabytes at millions).
            runs = np.split(ids, np.flatnonzero(np.diff(ids) != 1) + 1)
            yield np.concatenate([old_vectors.reconstruct_n(int(run[0]), len(run))
                                  for run in runs])

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
    each loading ``model`` (load_embedder's arguments, or a model object);
    with ``--engine local --workers N`` (N > 1), N processes read its ranges and
    this one embeds them (``pool_engine``).
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

    files = sum(s["size"] for s in per_source.values() if s["kind"] in READ_COUNTED)
    bars = BuildCounters(progress, files, embeds=options.retrieval != LEXICAL_ONLY)
    shard_passages = options.shard_passages or SHARD_PASSAGES
    if plan is not None and on_warning is not None:
        on_warning = as_given(todo, on_warning)
    if plan is not None and options.engine == "local":
        from .pool_engine import fill_with_readers

        fill_with_readers(plan, per_source, [str(p.resolve()) for p in todo], options, embedder,
                          work, report, on_warning, bars, shard_passages, EMBED_CALL_SIZE)
    elif plan is not None:
        from .ray_engine import RangeSettings, fill_on_ray

        settings = RangeSettings(options.chunk_words, options.namespaces, options.embed_text,
                                 EMBED_CALL_SIZE, options.language)
        fill_on_ray(plan, per_source, [str(p.resolve()) for p in todo], options,
                    model or embedder, settings, work, report, on_warning, bars, shard_passages)
    else:
        fill_here(todo, options, embedder, work, report, on_warning, per_source, bars,
                  shard_passages, EMBED_CALL_SIZE)
    # The last, partial shard is committed with the index itself (``finish``):
    # its vectors go from memory into the index file.
    report.documents = sum(s["documents"] for s in per_source.values())
    report.chunks = sum(s["chunks"] for s in per_source.values())
    return list(per_source.values())


def as_given(sources: list[Path], warn: Callable[[str], None]) -> Callable[[str], None]:
    """``warn``, given messages that name a source by the absolute path of its range
    (``corpus.ranges``, read in another process) with that source's path as the
    user gave it, as a one-process build names it."""
    names = sorted(((str(p.absolute()), str(p)) for p in sources), key=lambda n: -len(n[0]))

    def say(message: str) -> None:
        for absolute, given in names:
            rest = message[len(absolute):]
            if message.startswith(absolute) and rest[:1] in ("", ":", "/", " ", os.sep):
                message = given + rest
                break
        warn(message)

    return say


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size
