"""A persistent cache of LLM replies in one SQLite file.

A reply is stored under a digest of everything that decides it: the endpoint,
the model, the messages and the sampling parameters. The API key is not part
of the key and is never stored. A re-run of an unchanged file therefore finds
every reply here and makes no calls.

The file is shared safely: each thread gets its own connection, the database
runs in WAL mode (readers never block the writer) and waits for locks instead
of failing, so the threads of one run and two runs at once can use it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError

__all__ = [
    "CACHE_VERSION",
    "LLMCache",
    "ReplyCount",
    "cache_key",
    "count_replies_readonly",
    "default_cache_path",
]

#: Part of every key: bump it when what a stored reply means changes, so old
#: entries are simply never found again.
CACHE_VERSION = 1
#: How long a writer waits for another process's lock before giving up.
_BUSY_TIMEOUT_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    reply TEXT NOT NULL,
    created REAL NOT NULL
)
"""


#: The reply store's name in a cache folder.
CACHE_FILE = "llm.sqlite"


def default_cache_path() -> Path:
    """`$CEG_CACHE_DIR`/llm.sqlite, else `$XDG_CACHE_HOME`/ceg/llm.sqlite, else ~/.cache/ceg/..."""
    from ..cachedir import cache_root

    return cache_root() / CACHE_FILE


def cache_key(
    endpoint: str,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    params: Mapping[str, Any],
) -> str:
    """A digest of what decides a reply (never the API key)."""
    payload = {
        "v": CACHE_VERSION,
        "endpoint": endpoint.rstrip("/"),
        "model": model,
        "messages": [dict(m) for m in messages],
        "params": {k: v for k, v in params.items() if v is not None},
    }
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class LLMCache:
    """Replies (JSON-able dicts) by key, in a SQLite file created on first use."""

    def __init__(
        self, path: Path | str, *, advice: str = "delete the file or pass --no-cache"
    ) -> None:
        self.path = Path(path).expanduser()
        #: What an error tells the user to do (the commands that open the cache differ).
        self.advice = advice
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._closed = False

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored reply for ``key``, or None."""
        row = self._run(lambda c: c.execute("SELECT reply FROM replies WHERE key = ?", (key,)))
        found = row.fetchone()
        if found is None:
            return None
        try:
            value = json.loads(found[0])
        except json.JSONDecodeError:
            # A damaged entry is a miss: the call is made again and overwrites it.
            return None
        return value if isinstance(value, dict) else None

    def claim(self, key: str) -> dict[str, Any] | None:
        """The stored reply for ``key``, or None: the caller then asks the endpoint and
        ``put``s the reply, or ``release``s the key if the request fails. Here it is
        ``get``; the cache the Ray workers of a run share (``shared_cache``) also holds
        a second caller of a key back until the first's reply is stored, so that each
        prompt is sent once."""
        return self.get(key)

    def release(self, key: str) -> None:
        """Give up a ``claim`` without a reply (the request failed)."""

    def put(self, key: str, model: str, reply: Mapping[str, Any]) -> None:
        """Store ``reply`` under ``key`` (the last writer wins; equal keys mean equal replies)."""
        text = json.dumps(dict(reply), ensure_ascii=False)
        self._run(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO replies (key, model, reply, created) VALUES (?, ?, ?, ?)",
                (key, model, text, time.time()),
            )
        )

    def count(self) -> int:
        """How many replies are stored."""
        return int(self._run(lambda c: c.execute("SELECT COUNT(*) FROM replies")).fetchone()[0])

    def span(self) -> tuple[int, float | None, float | None]:
        """How many replies are stored, and when the oldest and the newest were (epoch s)."""
        row = self._run(
            lambda c: c.execute("SELECT COUNT(*), MIN(created), MAX(created) FROM replies")
        ).fetchone()
        return int(row[0]), row[1], row[2]

    def prune(self, before: float, *, dry_run: bool = False) -> int:
        """Delete the replies stored before ``before`` (epoch s); returns how many.

        One short transaction: a run using the cache at the same time waits for
        it (or it for the run) and at worst asks the endpoint again for a reply
        it had not read yet. The freed pages are then given back to the file
        system when no other connection is in the way (``VACUUM``); otherwise
        SQLite reuses them for later replies.
        """
        if dry_run:
            query = "SELECT COUNT(*) FROM replies WHERE created < ?"
            return int(self._run(lambda c: c.execute(query, (before,))).fetchone()[0])
        cursor = self._run(lambda c: c.execute("DELETE FROM replies WHERE created < ?", (before,)))
        removed = int(cursor.rowcount)
        if removed:
            try:
                conn = self._connection()
                conn.execute("VACUUM")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.OperationalError:
                pass  # busy: the space is reused instead of returned
        return removed

    def close(self) -> None:
        """Close every thread's connection; the cache cannot be used afterwards."""
        with self._lock:
            self._closed = True
            for conn in self._connections:
                conn.close()
            self._connections.clear()

    def _run(self, op: Any) -> Any:
        try:
            return op(self._connection())
        except sqlite3.DatabaseError as exc:
            raise UsageError(
                f"LLM cache {self.path}: {exc}; {self.advice}"
            ) from exc

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._lock:
            if self._closed:
                raise RuntimeError("the LLM cache is closed")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"LLM cache {self.path}: cannot create its folder: {exc}") from exc
            # Autocommit (isolation_level=None): each put is its own short
            # transaction, so another process never waits long for the lock.
            conn = None
            try:
                conn = sqlite3.connect(
                    self.path,
                    timeout=_BUSY_TIMEOUT_S,
                    isolation_level=None,
                    check_same_thread=False,
                )
                conn.execute("PRAGMA journal_mode=WAL")
                # In WAL mode NORMAL cannot corrupt the file; a crash may only
                # lose the last replies, which a re-run asks for again.
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(_SCHEMA)
            except sqlite3.DatabaseError as exc:
                if conn is not None:
                    conn.close()
                raise UsageError(f"LLM cache {self.path}: {exc}; {self.advice}") from exc
            self._connections.append(conn)
        self._local.conn = conn
        return conn


@dataclass(frozen=True)
class ReplyCount:
    """What a reply store holds: how many replies, the oldest and newest (epoch s), and
    how many were stored before the cut-off asked for."""

    count: int
    oldest: float | None
    newest: float | None
    older: int


#: The columns of ceg's ``replies`` table: a database without them is not ceg's cache.
_COLUMNS = frozenset({"key", "model", "reply", "created"})


def count_replies_readonly(path: Path, cutoff: float = 0.0, *, advice: str = "") -> ReplyCount:
    """Count the replies in the store at ``path`` without writing a byte anywhere near it.

    No journal, no ``-wal`` or ``-shm`` file is made, removed or touched, and the
    database is not switched to WAL: with no ``-wal`` content the file alone is the
    database, read ``immutable`` (no lock, no shared memory); with a ``-wal`` holding
    replies not yet checkpointed, SQLite would write ``-shm`` even for a read-only
    connection, so the two files are copied to a temporary folder and the copy is read.
    A folder, a file that is not SQLite, or a database without ceg's ``replies`` table
    is a UsageError (``advice`` says what to do): it is reported, never changed.
    """
    import shutil
    import tempfile

    where = f"LLM cache {path}"
    if path.is_dir():
        raise UsageError(f"{where}: is a folder, not ceg's reply store (an SQLite file); {advice}")
    wal = path.with_name(path.name + "-wal")
    try:
        wal_bytes = wal.stat().st_size
    except FileNotFoundError:
        wal_bytes = 0
    if wal_bytes == 0:
        return _count(f"{path.resolve().as_uri()}?mode=ro&immutable=1", cutoff, where, advice)
    with tempfile.TemporaryDirectory(prefix="ceg-llm-cache-") as tmp:
        copy = Path(tmp) / CACHE_FILE
        shutil.copyfile(path, copy)
        shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        return _count(f"{copy.as_uri()}?mode=ro", cutoff, where, advice)


def _count(uri: str, cutoff: float, where: str, advice: str) -> ReplyCount:
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise UsageError(f"{where}: cannot be opened ({exc}); {advice}") from exc
    try:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(replies)")}
        if not _COLUMNS <= columns:
            raise UsageError(
                f"{where}: an SQLite database without ceg's replies table, not ceg's reply "
                f"store; {advice}"
            )
        row = conn.execute(
            "SELECT COUNT(*), MIN(created), MAX(created), SUM(created < ?) FROM replies",
            (cutoff,),
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"{where}: not an SQLite database ceg can read ({exc}); {advice}") from exc
    finally:
        conn.close()
    return ReplyCount(int(row[0]), row[1], row[2], int(row[3] or 0))
