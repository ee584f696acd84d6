"""A build's work directory: finished work committed in shards, so a killed build resumes.

``.NAME.building`` (``indexdir.work_path``) holds, while a build runs:

- ``owner``: the process id of the build working here (for the lock's message), and
  ceg's mark on the folder (``indexdir.made_by_ceg``), until the swap.
- ``manifest.json``: what is being built (sources and their digests, model,
  options); ``--resume`` continues only the same build.
- ``chunks.sqlite``: the passage rows, and the table ``build_progress``, one
  row per committed shard saying where reading reached (source, position in
  it, next passage id, documents and passages per source so far).
- ``shards/NNNNNN.npy``: each shard's vectors (shard 0: what an ``--append``
  keeps of the old index, maybe none).

A shard is committed in one step: its vectors are written to their file
(fsynced, then renamed into place), then its rows and its progress row are
committed in one SQLite transaction. The store is in WAL mode, so a killed
process loses the uncommitted transaction and nothing else; a shard file with
no progress row was written by a build killed in between, and is removed on
resume. Memory holds at most one shard of vectors until the final index is
written, streamed from the shard files (``vectors.write_vectors``: the build
gives a ``VectorSource``, ``vectors()``); the last, partial shard is committed with the index
(``finish``), not written as a shard. The shards are removed once the index
file is complete, so the vectors take twice their room on disk at the end.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import UsageError
from ...types import Chunk
from ..dense.faissfile import FileWriter
from ..dense.vectorsource import ShardFiles
from ..indexdir import claim, sqlite_uri, write_json
from ..layout import CHUNK_SCHEMA, CHUNKS_FILE, MANIFEST, SHARDS

_PROGRESS_SCHEMA = "CREATE TABLE build_progress (shard INTEGER PRIMARY KEY, position TEXT)"
#: Vectors read from a shard at a time while the index file is written.
READ_BATCH = 8192
_INSERT = "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


def chunk_row(chunk: Chunk, source: str) -> tuple[Any, ...]:
    """A passage's row of the chunk store, without its id (which comes first)."""
    return (chunk.doc_id, chunk.title, chunk.ordinal, chunk.start, chunk.end, chunk.text,
            chunk.url, source, chunk.language)


def source_counts(per_source: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Each source's documents and passages so far: part of a committed position."""
    return {key: {"documents": s["documents"], "chunks": s["chunks"]}
            for key, s in per_source.items()}


class BuildWork:
    """The work directory of one build, opened by ``create`` or ``reopen``."""

    def __init__(self, root: Path, db: sqlite3.Connection, dimension: int) -> None:
        self.root = root
        self.db = db
        self.dimension = dimension
        #: The last committed shard (-1: none yet) and where reading had reached.
        self.shard = -1
        self.position: dict[str, Any] = {}
        #: Rows written so far, committed or not (for the disk-full message).
        self.rows = 0
        self._pending: list[np.ndarray] = []

    @classmethod
    def create(cls, root: Path, manifest: dict[str, Any], dimension: int) -> BuildWork:
        """Start the work in ``root``, an empty directory."""
        claim(root)
        write_json(root / MANIFEST, manifest)
        (root / SHARDS).mkdir()
        db = _connect(root / CHUNKS_FILE)
        db.executescript(CHUNK_SCHEMA)
        db.execute(_PROGRESS_SCHEMA)
        db.commit()
        return cls(root, db, dimension)

    @classmethod
    def reopen(cls, root: Path, manifest: dict[str, Any], dimension: int) -> BuildWork | None:
        """The unfinished build in ``root``, ready to go on; None if there is nothing to resume.

        Raises ``UsageError`` when it is a build of other sources or options.
        """
        try:
            recorded = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if recorded != manifest:
            differ = sorted(k for k in manifest.keys() | recorded.keys()
                            if recorded.get(k) != manifest.get(k))
            raise UsageError(
                f"--resume: the unfinished build in {root} is of another build "
                f"({', '.join(differ)} differ){_what_to_pass(recorded, manifest)}; run the "
                "same command as that build, or leave out --resume to start over"
            )
        if not (root / CHUNKS_FILE).is_file():
            return None
        db = _connect(root / CHUNKS_FILE)
        try:
            last = db.execute(
                "SELECT shard, position FROM build_progress ORDER BY shard DESC LIMIT 1"
            ).fetchone()
            (rows,) = db.execute("SELECT count(*) FROM chunks").fetchone()
        except sqlite3.Error:
            last = None
        if last is None:
            db.close()
            return None
        claim(root)
        work = cls(root, db, dimension)
        work.shard, work.position = int(last[0]), json.loads(last[1])
        for file in (root / SHARDS).iterdir():
            if not file.name.endswith(".npy") or int(file.name.split(".")[0]) > work.shard:
                file.unlink()  # written by a build killed before it committed the rows
        vectors = ShardFiles(work._shard_files(), dimension).count
        if rows > work.position["next_id"]:
            # The last shard's rows, committed at the end ahead of its vectors (``rows_done``).
            db.execute("DELETE FROM chunks WHERE id >= ?", (work.position["next_id"],))
            db.commit()
            rows = work.position["next_id"]
        if not rows == vectors == work.position["next_id"]:
            db.close()
            return None
        work.rows = rows
        return work

    def add(self, vectors: np.ndarray, rows: Iterable[tuple[Any, ...]]) -> None:
        """Rows and their vectors, committed with the next shard."""
        self.db.executemany(_INSERT, rows)
        self._pending.append(np.asarray(vectors, dtype=np.float32))
        self.rows += len(vectors)

    @property
    def pending(self) -> int:
        return sum(len(v) for v in self._pending)

    def commit_after_range(
        self,
        engine: str,
        number: int,
        next_id: int,
        per_source: dict[str, dict[str, Any]],
        shard_passages: int,
    ) -> None:
        """After range ``number`` of a ranged build, commit once a shard's worth waits.

        The position is the next range: ``--resume`` goes on from there.
        """
        if self.pending >= shard_passages:
            self.commit({
                "engine": engine, "range": number + 1, "next_id": next_id,
                "kept": self.position["kept"], "sources": source_counts(per_source),
            })

    def commit(
        self, position: dict[str, Any], vectors: Iterable[np.ndarray] | None = None,
        count: int | None = None,
    ) -> None:
        """Save the pending vectors as the next shard and commit them with their rows.

        ``vectors`` (``count`` of them, in batches) replaces the pending
        vectors: a shard written in a stream, never whole in memory.
        """
        number = self.shard + 1
        if vectors is None:
            vectors, count = self._pending, self.pending
        part = self.root / SHARDS / f"{number:06d}.npy.part"
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {
            "descr": np.lib.format.dtype_to_descr(np.dtype("<f4")),
            "fortran_order": False,
            "shape": (count, self.dimension),
        })
        written = 0
        # Bytes written by hand: numpy writing to a file reports a full disk without its errno.
        with FileWriter(part) as out:
            out.write(header.getbuffer())
            for batch in vectors:
                out.write(np.ascontiguousarray(batch, dtype="<f4").tobytes())
                written += len(batch)
        if written != count:
            raise RuntimeError(f"{part}: {written} vectors written for {count}")
        os.replace(part, self.root / SHARDS / f"{number:06d}.npy")
        self.db.execute("INSERT INTO build_progress VALUES (?, ?)", (number, json.dumps(position)))
        self.db.commit()
        self.shard, self.position, self._pending = number, position, []

    def rows_done(self) -> None:
        """Every row is read and embedded: commit the last rows (a full disk shows here).

        Their vectors are not saved as a shard but go into the index; a build
        killed before it is in place drops these rows on resume and redoes
        them (at most one shard).
        """
        self.db.commit()

    def vectors(self) -> ShardFiles:
        """Every vector in id order (a ``vectors.VectorSource``): the shards, then the pending."""
        return ShardFiles(self._shard_files(), self.dimension, self._pending, READ_BATCH)

    def finish(self) -> None:
        """Commit the pending rows with the index; leave only the index's own files.

        The store becomes a plain SQLite file (readers open it read-only and
        immutable); the shards and the manifest go.
        """
        self.db.execute("DROP TABLE build_progress")
        self.db.commit()
        self.db.execute("PRAGMA journal_mode=DELETE")
        self.db.close()
        shutil.rmtree(self.root / SHARDS)
        # The owner file stays until the swap (``indexdir.swap_into_place``): it marks
        # the folder as ceg's, so a build that fails from here on can still remove it.
        (self.root / MANIFEST).unlink()


    def _shard_files(self) -> list[Path]:
        return sorted((self.root / SHARDS).glob("*.npy"))


def _what_to_pass(recorded: dict[str, Any], manifest: dict[str, Any]) -> str:
    """The option that changed between an unfinished build and this run, where the
    engine or the reading tells (``builder._manifest``): ``--engine``, ``--workers``."""
    was, now = recorded.get("engine"), manifest.get("engine")
    if was != now:
        return (f": that build ran with --engine {was}, this run with --engine {now}: pass "
                f"--engine {was}")
    if was != "local" or (recorded.get("ranges") is None) == (manifest.get("ranges") is None):
        return ""
    # The local engine cuts ranges only for reader processes (--workers 2 or more).
    if recorded.get("ranges") is None:
        return (": that build read in one thread (--workers 1), this run with reader "
                "processes (--workers 2 or more): pass --workers 1")
    # Any number of readers cuts the same ranges: the count itself is not recorded.
    return (": that build read with reader processes (--workers 2 or more), this run in one "
            "thread (--workers 1): pass --workers 2 or more")


def _connect(path: Path) -> sqlite3.Connection:
    # As a URI: so that ``builder._start`` can ATTACH the old store by its own URI.
    db = sqlite3.connect(sqlite_uri(path), uri=True, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    # WAL with NORMAL survives a killed process; the files are fsynced before the swap.
    db.execute("PRAGMA synchronous=NORMAL")
    return db
