"""``ceg index build SOURCES --update``: bring an index in step with its sources, per document.

Each document of the named sources is compared with the index's record of it
(``docrecord``): unchanged documents keep their passages and vectors untouched,
changed ones are chunked and embedded again, documents gone from a named source
are removed, a new source is added. Sources the index holds but the run does not
name are kept (LangChain's ``scoped_full``); with ``prune`` (``--prune``) they are
removed too (``full``).

Nothing of the index is copied: the update writes a new generation folder
beside the base files (``generation``: the passages added since the base, the
removed ids, the record, their vectors, the lexical part) and switches
``meta.json`` to it with one ``os.replace``. A kill before that leaves the old
index, after it the new one; the generation before stays until the next update,
so a reader that opened it (a long ``ceg check``) keeps finding its files.
Settings that would change every vector are refused in one line.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import __version__
from ...corpus import iter_documents
from ...errors import InputError, UsageError
from ...progress import NO_PROGRESS, Progress
from ..dense.embedding import Embedder, choose_backend, load_embedder
from ..generation import (
    LAYERED_FORMAT,
    attach_generation,
    generation_name,
    generation_of,
    is_generation_name,
    removed_ids,
)
from ..indexdir import (
    folder_digests,
    remove_built,
    source_digest,
    write_json,
)
from ..layout import CHUNK_SCHEMA, CHUNKS_FILE, LEXICAL_DIR, META_FILE, VECTORS_FILE
from ..lexical.lexonly import NoEmbedder, is_lexical_only
from ..store import connect_readonly, read_meta
from .buildopts import BuildOptions, BuildReport
from .buildwork import chunk_row
from .chunking import chunk_or_skip
from .docrecord import (
    DOCUMENTS_SCHEMA,
    DocRecord,
    chunk_fields,
    doc_key,
    document_digest,
    file_digest,
    from_store,
    passages_digest,
    read_record,
)
from .updatefiles import (
    check_settings,
    fsync_dir,
    lexical_missing,
    write_generation_vectors,
)

if TYPE_CHECKING:
    import numpy as np

#: Passages handed to the model at once (the builder's ``EMBED_CALL_SIZE``).
EMBED_CALL_SIZE = 1024
#: Past this share of the base's passages changed (removed, or added since), an update
#: says a rebuild is better: the base's files hold that much dead weight, the
#: generation's exact vectors cost their whole count at every search, and an
#: approximate base's trained quantizer or graph has not seen that share of the corpus.
REBUILD_SHARE = 0.25
#: The document keys of one source: (source, key).
Key = tuple[str, str]


def _step(name: str) -> None:
    """A named moment of an update (the kill tests stop it at each one)."""


def update_index(
    kinds: dict[Path, str],
    target: Path,
    options: BuildOptions,
    embedder: Embedder | None,
    on_warning: Callable[[str], None] | None = None,
    progress: Progress = NO_PROGRESS,
) -> BuildReport:
    """Update the index at ``target`` (its build lock held) to the sources ``kinds``."""
    started = time.perf_counter()
    warn = on_warning or (lambda _message: None)
    meta = read_meta(target)
    check_settings(meta, options, target)
    lexical_only = is_lexical_only(meta)
    if lexical_only:
        embedder = NoEmbedder()
    if embedder is not None and not lexical_only and (
            embedder.name != meta["model"]["name"]
            or embedder.dimension != meta["model"]["dimension"]):
        raise UsageError(
            f"--model {embedder.name}: index at {target} was built with "
            f"{meta['model']['name']} (dimension {meta['model']['dimension']}); an update "
            "keeps every vector: leave out --model, or rebuild without --update"
        )
    tidy(target, generation_of(meta))
    report = BuildReport(target)
    plan = _Plan(target, meta, options, kinds, warn, prune=options.prune)
    plan.compare()
    summary = plan.summary()
    if not (summary["added"] or summary["changed"] or summary["removed"]
            or plan.lexical_wanted):
        report.total_chunks = meta["counts"]["chunks"]
        report.total_documents = meta["counts"]["documents"]
        report.unchanged = [str(p) for p in kinds]
        report.update = {**summary, "passages_embedded": 0, "written": False}
        report.seconds = time.perf_counter() - started
        plan.close()
        return report
    if embedder is None:
        # Loaded once the sources are compared, and only when a passage is to be
        # embedded: the model's import and load are most of a small update's time.
        embedder = _load_model(meta, options) if plan.fresh else _Unneeded(meta)
    new_meta = plan.write(embedder, progress, report)
    entry = new_meta["generation"]
    drift = (entry["delta_chunks"] + entry["removed"]) / max(1, entry["base_chunks"])
    if new_meta["last_update"]["rebuild_advised"]:
        warn(f"index at {target}: {drift:.0%} of its base's passages have changed since its "
             f"full build (more than {REBUILD_SHARE:.0%}): a build without --update now "
             "makes it smaller and its search as fast and as trained as a new index's")
    report.update = new_meta["last_update"]
    report.total_chunks = new_meta["counts"]["chunks"]
    report.total_documents = new_meta["counts"]["documents"]
    report.documents = summary["added"] + summary["changed"]
    report.chunks = new_meta["last_update"]["passages_embedded"]
    report.seconds = time.perf_counter() - started
    return report


def _load_model(meta: dict[str, Any], options: BuildOptions) -> Embedder:
    return load_embedder(
        meta["model"]["name"], batch_size=options.batch_size,
        backend=choose_backend(options.backend, meta["model"].get("backend", "torch")),
        device=options.device,
        # The index's own float width, unless told: its new vectors computed as its old.
        precision=options.precision if options.precision != "auto"
        else str(meta["model"].get("precision", "float32")).replace("mixed", "auto"),
    )


class _Unneeded:
    """The index's model where an update embeds nothing (documents removed, or kept
    ones moved): its name and dimension, for the vectors it copies; never loaded."""

    def __init__(self, meta: dict[str, Any]) -> None:
        self.name = meta["model"]["name"]
        self.dimension = int(meta["model"]["dimension"])

    def embed(self, texts: Any) -> Any:
        raise AssertionError("an update with nothing to embed called the model")


def tidy(target: Path, entry: dict[str, Any] | None) -> None:
    """Remove what no reader can be on: generation folders other than the one meta.json
    names (``entry``) and the one before it (a killed update's, older ones), and the
    base's own lexical part once the generation before is not the base."""
    keep = {entry["dir"], entry.get("previous") or ""} if entry is not None else set()
    for child in sorted(target.iterdir()):
        if child.is_dir() and is_generation_name(child.name) and child.name not in keep:
            remove_built(child)
            _step("dropped")
    if entry is not None and entry.get("previous") and (target / LEXICAL_DIR).is_dir():
        import shutil

        shutil.rmtree(target / LEXICAL_DIR, ignore_errors=True)


class _Plan:
    """What an update changes: read the sources, compare, then write the generation."""

    def __init__(self, target: Path, meta: dict[str, Any], options: BuildOptions,
                 kinds: dict[Path, str], warn: Callable[[str], None], prune: bool) -> None:
        self.target = target
        self.meta = meta
        self.options = options
        self.kinds = kinds
        self.warn = warn
        self.prune = prune
        self.entry = generation_of(meta)
        self.number = self.entry["number"] if self.entry else 0
        self.db = connect_readonly(target / CHUNKS_FILE)
        columns = {row[1] for row in self.db.execute("PRAGMA main.table_info(chunks)")}
        if "language" not in columns:
            self.db.close()
            raise UsageError(f"--update: index at {target} was built before ceg recorded each "
                             "passage's language; rebuild it once without --update, then "
                             "update it")
        (self.base_total,) = self.db.execute("SELECT count(*) FROM main.chunks").fetchone()
        if self.entry is not None:
            attach_generation(self.db, target / self.entry["dir"])
            self.record: dict[Key, DocRecord] = {
                (s, k): r for s, k, r in read_record(self.db)}
        else:
            # An index as a full build wrote it: its record, once, from its passages.
            self.record = {(s, k): r for s, k, r in from_store(self.db, "main.chunks")}
        #: Each source's digest and size, and each folder source's files' sha256: a
        #: folder is read once for all three.
        self.contents: dict[Path, dict[str, str]] = {}
        self.digests: dict[Path, str] = {}
        self.sizes: dict[Path, int] = {}
        for p in kinds:
            if kinds[p] == "folder":
                self.digests[p], self.contents[p], self.sizes[p] = folder_digests(p)
            else:
                self.digests[p], self.sizes[p] = source_digest(p), p.stat().st_size
        self.named = {str(p.resolve()): p for p in kinds}
        self.old_sources = {s["path"]: s for s in meta["sources"]}
        #: ``--lexical`` on an index without a usable lexical part: one is made (the
        #: update writes a generation even when no document changed).
        self.lexical_wanted = options.lexical is True and lexical_missing(target, meta)
        #: Documents live after the update that keep their passages: key -> record.
        self.kept: dict[Key, DocRecord] = {}
        #: (key, digest, chunks) of each document to embed, in reading order.
        self.fresh: list[tuple[Key, str, list[Any]]] = []
        self.counts = {"added": 0, "changed": 0, "unchanged": 0, "removed": 0}

    def close(self) -> None:
        self.db.close()

    def compare(self) -> None:
        by_source: dict[str, list[Key]] = {}
        for key in self.record:
            by_source.setdefault(key[0], []).append(key)
        for source, path in self.named.items():
            old = self.old_sources.get(source)
            if old is not None and old["digest"] == self.digests[path] and \
                    self._same_namespaces(old, path):
                for key in by_source.get(source, []):  # the same bytes: every document kept
                    self.kept[key] = self.record[key]
                self.counts["unchanged"] += len(by_source.get(source, []))
                continue
            self._read(source, path)
        for source, keys in by_source.items():
            if source in self.named:
                continue
            if self.prune:
                continue
            for key in keys:  # not named: kept as it is (scoped_full)
                self.kept[key] = self.record[key]
        live = set(self.kept) | {key for key, _, _ in self.fresh}
        self.counts["removed"] = sum(1 for key in self.record if key not in live)

    def _same_namespaces(self, old: dict[str, Any], path: Path) -> bool:
        """Whether a dump's bytes give the documents they gave: the same namespaces read."""
        if self.kinds[path] != "mediawiki" or "namespaces" not in old:
            return True
        return sorted(old["namespaces"]) == sorted(self.options.namespaces)

    def _read(self, source: str, path: Path) -> None:
        if self.kinds[path] == "folder":
            self._read_folder(source, path)
            return
        if self.kinds[path] == "mediawiki":
            self._read_dump(source, path)
            return
        options = self.options
        occurrences: dict[str, int] = {}
        for doc in iter_documents(path, namespaces=options.namespaces,
                                  follow_symlinks=options.follow_symlinks,
                                  on_warning=self.warn):
            n = occurrences.get(doc.id, 0)
            occurrences[doc.id] = n + 1
            self._consider((source, doc_key(doc.id, n)), doc, document_digest(doc))

    def _read_folder(self, source: str, path: Path) -> None:
        """A folder, file by file: a file whose bytes the record knows is kept without
        reading it as a document (its Markdown is not converted); the others are read."""
        from ...corpus.folder import read_text_files, text_files

        contents = self.contents.get(path, {})
        for relative, target in text_files(path, self.options.follow_symlinks, self.warn):
            key = (source, relative)
            old = self.record.get(key)
            try:
                digest = file_digest(relative, target, contents.get(relative))
            except OSError:
                digest = None  # read_text_files says why, and skips it
            if old is not None and digest is not None and old.digest == digest:
                self._keep(key, old)
                continue
            for doc in read_text_files(path, [(relative, target)], self.warn):
                self._consider(key, doc, digest or document_digest(doc))

    def _keep(self, key: Key, old: DocRecord, digest: str | None = None) -> None:
        """Keep a document's passages and vectors; the record takes ``digest`` (when
        given: the one this run compared, where the record held another)."""
        self.kept[key] = old if digest is None or digest == old.digest else \
            DocRecord(digest, old.passages, old.first, old.count)
        self.counts["unchanged"] += 1

    def _consider(self, key: Key, doc: Any, digest: str) -> None:
        """Keep, or chunk to embed, one document read; ``digest`` is what the record
        will hold. A record from an earlier ceg may hold the document's text digest
        (a folder's file) or only its passages' digest (a full build's): both are
        compared once, and the record then holds ``digest``. A document whose digest
        changed but whose passages did not keeps them (nothing embedded)."""
        old = self.record.get(key)
        if old is not None and old.digest is not None and (
                old.digest == digest or old.digest == document_digest(doc)):
            self._keep(key, old, digest)
            return
        options = self.options
        self._chunked(key, digest,
                      chunk_or_skip(doc, options.chunk_words, self.warn, options.language))

    def _chunked(self, key: Key, digest: str, chunks: list[Any] | None) -> None:
        """A document read and chunked: kept where its passages are the stored ones (the
        one-time pass of an index built before the record, bytes that changed but not
        the text, another ceg's reading or cleaning rules), else to embed."""
        if not chunks:
            return  # no text: not indexed (removed, if it was)
        old = self.record.get(key)
        if old is not None and passages_digest(chunk_fields(c) for c in chunks) == old.passages:
            self._keep(key, old, digest)
            return
        self.fresh.append((key, digest, chunks))
        self.counts["changed" if old is not None else "added"] += 1

    def _read_dump(self, source: str, path: Path) -> None:
        """A dump: pages whose revision digest is the record's are not cleaned
        (``dumpread``); a multistream dump is read by reader processes."""
        from .dumpread import DumpReading

        # The record's digests by page id, where one key holds the id (the rest compared here).
        ids: dict[str, int] = {}
        for src, recorded in self.record:
            if src == source:
                page_id = recorded.partition("\0")[0]
                ids[page_id] = ids.get(page_id, 0) + 1
        known = {recorded: r.digest for (src, recorded), r in self.record.items()
                 if src == source and r.digest is not None and ids.get(recorded) == 1}
        self.reading = DumpReading(path, known, self.options, self.warn)
        occurrences: dict[str, int] = {}
        with closing(self.reading.pages()) as pages:
            for page_id, digest, chunks in pages:
                n = occurrences.get(page_id, 0)
                occurrences[page_id] = n + 1
                key = (source, doc_key(page_id, n))
                old = self.record.get(key)
                if old is not None and old.digest == digest:
                    self._keep(key, old)
                    continue
                if chunks is None:  # passed over for another key's digest: an id met twice
                    raise InputError(f"{path}: page id {page_id} appears more than once in "
                                     "the dump; update it with --workers 1")
                self._chunked(key, digest, chunks)

    def summary(self) -> dict[str, int]:
        return dict(self.counts)

    # ------------------------------------------------------------------ writing

    def write(self, embedder: Embedder | _Unneeded, progress: Progress,
              report: BuildReport) -> dict[str, Any]:
        import numpy as np

        started = time.perf_counter()
        number = self.number + 1
        folder = self.target / generation_name(number)
        remove_built(folder)
        folder.mkdir()
        _step("folder")
        out = sqlite3.connect(folder / CHUNKS_FILE)
        out.execute("PRAGMA journal_mode=OFF")
        out.execute("PRAGMA synchronous=OFF")
        out.executescript(CHUNK_SCHEMA + DOCUMENTS_SCHEMA)
        next_id = int(self.base_total)
        vectors: list[np.ndarray] = []
        documents: list[tuple[Any, ...]] = []
        # Kept documents of the last generation: copied with their vectors (the base's
        # stay where they are).
        kept_delta = sorted((r.first, key) for key, r in self.kept.items()
                            if r.first >= self.base_total)
        old_vectors = None
        if kept_delta and embedder.dimension:
            from ..dense.vectors import read_vectors

            old_vectors = read_vectors(self.target / self.entry["dir"] / VECTORS_FILE)
        for first, key in kept_delta:
            r = self.kept[key]
            rows = self.db.execute(
                "SELECT doc_id, title, ordinal, start, end, text, url, source, language "
                "FROM gen.chunks WHERE id BETWEEN ? AND ? ORDER BY id",
                (first, first + r.count - 1)).fetchall()
            out.executemany("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?)",
                            ((next_id + i, *row) for i, row in enumerate(rows)))
            if old_vectors is not None:
                vectors.append(old_vectors.reconstruct_n(first - self.base_total, r.count))
            documents.append((*key, r.digest, r.passages, next_id, r.count))
            next_id += r.count
        _step("kept")
        embedded = 0
        bar = progress.counter("embedded", "passages", total=sum(len(c) for _, _, c in self.fresh))
        batch: list[Any] = []

        def flush() -> None:
            nonlocal batch, next_id, embedded
            if not batch:
                return
            from ..dense.pretokenized import embed_passages

            report.embed_seconds -= time.perf_counter()
            vecs = embed_passages(embedder, batch, None, self.options.embed_text)
            report.embed_seconds += time.perf_counter()
            if embedder.dimension:
                vectors.append(np.asarray(vecs, dtype=np.float32))
            out.executemany("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?)",
                            ((next_id + i, *chunk_row(c, c.source)) for i, c in enumerate(batch)))
            next_id += len(batch)
            embedded += len(batch)
            bar.update(len(batch))
            batch = []
            _step("embedded")

        from .local_engine import with_source

        for key, digest, chunks in self.fresh:
            chunks = [with_source(c, key[0]) for c in chunks]
            documents.append((*key, digest, passages_digest(chunk_fields(c) for c in chunks),
                              next_id + len(batch), len(chunks)))
            batch.extend(chunks)
            if len(batch) >= EMBED_CALL_SIZE:
                flush()
        flush()
        live_base = {r.first for r in self.kept.values() if r.first < self.base_total}
        # The base passages removed before (the previous generation's) and now.
        before = removed_ids(self.db) if self.entry is not None else np.zeros(0, np.int64)
        gone = set(before.tolist())
        for r in self.record.values():
            if r.first < self.base_total and r.first not in live_base:
                gone.update(range(r.first, r.first + r.count))
        removed = sorted(gone)
        out.executemany("INSERT INTO removed VALUES (?)", ((i,) for i in removed))
        out.executemany("INSERT INTO documents VALUES (?,?,?,?,?,?)", documents)
        out.executemany("INSERT INTO documents VALUES (?,?,?,?,?,?)",
                        ((*key, r.digest, r.passages, r.first, r.count)
                         for key, r in self.kept.items() if r.first < self.base_total))
        out.commit()
        out.close()
        _step("store")
        delta_total = next_id - int(self.base_total)
        live_total = int(self.base_total) - len(removed) + delta_total
        if live_total == 0:
            remove_built(folder)
            raise InputError(f"{self.target}: the update would leave no passages; nothing "
                             "changed (remove the index yourself if that is what you want)")
        entry: dict[str, Any] = {
            "number": number, "dir": folder.name,
            "previous": self.entry["dir"] if self.entry else None,
            "base_chunks": int(self.base_total), "delta_chunks": delta_total,
            "removed": len(removed),
        }
        if embedder.dimension:
            entry.update(write_generation_vectors(folder, vectors, embedder.dimension,
                                                  delta_total))
        _step("vectors")
        lexical = None
        languages: dict[str, int] = {}
        with closing(connect_readonly(self.target / CHUNKS_FILE)) as view:
            attach_generation(view, folder)
            if self.lexical_wanted:  # none, or one it cannot use: made from every passage
                from ..lexical.bm25 import build_lexical

                t0 = time.perf_counter()
                lexical = build_lexical(view, folder, self.meta["embed_text"],
                                        (self.meta.get("lexical") or {}).get(
                                            "library", self.options.lexical_engine))
                report.lexical_seconds = time.perf_counter() - t0
            elif "lexical" in self.meta:
                t0 = time.perf_counter()
                lexical = self._lexical(view, folder, kept_delta, before, removed,
                                        delta_total)
                report.lexical_seconds = time.perf_counter() - t0
            from .doclang import document_languages

            languages = document_languages(view)
        _step("lexical")
        meta = self._new_meta(entry, documents, lexical, languages, embedded,
                              time.perf_counter() - started)
        from ..indexdir import fsync_tree

        fsync_tree(folder)
        _step("synced")
        write_json(self.target / META_FILE, meta)  # the switch
        fsync_dir(self.target)
        _step("switched")
        self.close()
        tidy(self.target, entry)
        return meta

    def _lexical(self, view: sqlite3.Connection, folder: Path,
                 kept_delta: list[tuple[int, Key]], removed_before: np.ndarray,
                 removed: list[int], delta_total: int) -> dict[str, Any]:
        """The new generation's lexical part: the previous bm25s part kept in step with
        only the new passages tokenized (``lexical.bm25_update``), or, where that cannot be
        (tantivy, a part built before its counts file, a tokenizer that changes),
        built again from every live passage."""
        import numpy as np

        from ..generation import lexical_root, live_ids
        from ..lexical.bm25 import build_lexical

        previous = self.meta["lexical"]
        if previous.get("library") == "bm25s":
            from ..lexical.bm25_update import update_lexical

            base = int(self.base_total)
            before = (live_ids(base, removed_before, int(self.entry["delta_chunks"]))
                      if self.entry is not None else np.arange(base, dtype=np.int64))
            ids = live_ids(base, np.asarray(removed, dtype=np.int64), delta_total)
            # Each live passage's id in the previous generation: a base passage keeps its
            # id; kept documents of the last generation were copied first, in id order.
            source = ids.copy()
            at = base
            for first, key in kept_delta:
                count = self.kept[key].count
                source[np.searchsorted(ids, at):np.searchsorted(ids, at + count)] = \
                    np.arange(first, first + count)
                at += count
            source[np.searchsorted(ids, at):] = -1  # the fresh passages
            rows = np.where(source >= 0, np.searchsorted(before, source), -1)
            lexical = update_lexical(view, folder, self.meta["embed_text"], previous,
                                     lexical_root(self.target, self.meta), rows, ids)
            if lexical is not None:
                return lexical
        return build_lexical(view, folder, self.meta["embed_text"], previous["library"])

    def _new_meta(self, entry: dict[str, Any], documents: list[tuple[Any, ...]],
                  lexical: dict[str, Any] | None, languages: dict[str, int], embedded: int,
                  seconds: float) -> dict[str, Any]:
        meta = {k: v for k, v in self.meta.items()
                if k != "lexical" and not (k == "lexical_skipped" and lexical is not None)}
        per_source: dict[str, list[int]] = {}
        for row in documents:
            counts = per_source.setdefault(row[0], [0, 0])
            counts[0] += 1
            counts[1] += row[5]
        for key, r in self.kept.items():
            if r.first < self.base_total:
                counts = per_source.setdefault(key[0], [0, 0])
                counts[0] += 1
                counts[1] += r.count
        sources = []
        for old in self.meta["sources"]:
            path = old["path"]
            if path in self.named:
                continue
            if self.prune:
                continue
            sources.append(old)
        for path_key, path in self.named.items():
            docs, chunks = per_source.get(path_key, [0, 0])
            src = dict(self.old_sources.get(path_key) or {})
            src.update({"path": path_key, "kind": self.kinds[path],
                        "digest": self.digests[path], "size": self.sizes[path],
                        "documents": docs, "chunks": chunks})
            if self.kinds[path] == "mediawiki":
                src["namespaces"] = sorted(self.options.namespaces)
            sources.append(src)
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        meta.update({
            "format_version": LAYERED_FORMAT,
            "ceg_version": __version__,
            "updated_at": now,
            "generation": entry,
            "counts": {"documents": sum(s["documents"] for s in sources),
                       "chunks": sum(s["chunks"] for s in sources)},
            "sources": sources,
            "languages": languages,
            "last_update": {"at": now, **self.counts, "passages_embedded": embedded,
                            "seconds": round(seconds, 3), "prune": self.prune,
                            "lexical_made": bool(self.lexical_wanted),
                            "rebuild_advised": (entry["delta_chunks"] + entry["removed"])
                            > REBUILD_SHARE * entry["base_chunks"]},
        })
        if lexical is not None:
            meta["lexical"] = lexical
        return meta
