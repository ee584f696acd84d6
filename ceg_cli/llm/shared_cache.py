"""One reply cache for the LLM judges of a run's Ray workers: one writer, each prompt sent once.

``ceg check --engine ray`` runs its LLM judges on many workers, perhaps on many
machines, while the reply cache is one SQLite file on the driver's machine
(``LLMCache``). ``SharedReplies`` is a Ray actor on that machine that holds it:
the one process that writes it. Each worker's ``LLMClient`` holds a
``RemoteReplies`` in place of the file, whose calls go to that actor.

The actor also sees every request the workers are about to make: a worker
that asks for a prompt another worker is already asking for waits for that
reply instead of sending the prompt again (``claim``). A run with repeated
prompts thus makes one call per distinct prompt, as a local run does (one
batch's identical prompts are sent once, later batches find the reply in the
cache). A claim dies with its worker (``forget``: a restarted worker gives up
what it claimed before it died) and after ``lease`` seconds at most.

``ray`` is imported only by the callers; these classes are plain Python.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .cache import LLMCache

__all__ = ["RemoteReplies", "SharedReplies"]

#: Seconds a claim holds other workers back at most, should its worker hang.
LEASE_S = 3600.0


class SharedReplies:
    """The Ray actor: the run's ``LLMCache`` and the prompts being asked for right now.

    Its methods run on many threads at once (``max_concurrency``): a caller
    waiting for another's reply holds only its own thread.
    """

    def __init__(self, path: str, lease: float = LEASE_S) -> None:
        self.cache = LLMCache(path)
        self.lease = lease
        self._changed = threading.Condition()
        #: key -> (the worker asking for it, when its claim lapses).
        self._asked: dict[str, tuple[int, float]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.cache.get(key)

    def claim(self, key: str, owner: int) -> dict[str, Any] | None:
        """The stored reply, after waiting for it while another worker asks for it; or
        None: ``owner`` is to ask for it (and then ``put`` or ``release`` it)."""
        with self._changed:
            while True:
                hit = self.cache.get(key)
                if hit is not None:
                    return hit
                now = time.monotonic()
                holder = self._asked.get(key)
                if holder is None or holder[1] <= now or holder[0] == owner:
                    self._asked[key] = (owner, now + self.lease)
                    return None
                self._changed.wait(timeout=holder[1] - now)

    def put(self, key: str, model: str, reply: Mapping[str, Any]) -> None:
        try:
            self.cache.put(key, model, reply)
        finally:
            self.release(key)

    def release(self, key: str) -> None:
        with self._changed:
            self._asked.pop(key, None)
            self._changed.notify_all()

    def forget(self, owner: int) -> None:
        """Give up every claim of ``owner``: it (re)starts, and asks afresh for what it needs."""
        with self._changed:
            for key in [k for k, (who, _) in self._asked.items() if who == owner]:
                del self._asked[key]
            self._changed.notify_all()

    def stored(self) -> int:
        return self.cache.count()

    def close(self) -> None:
        self.cache.close()


class RemoteReplies:
    """``LLMCache``'s methods, answered by the run's ``SharedReplies`` actor (``owner``:
    the worker's number, so that its claims die with it)."""

    def __init__(self, actor: Any, path: str, owner: int) -> None:
        self.actor = actor
        self.path = Path(path)
        self.owner = owner

    def get(self, key: str) -> dict[str, Any] | None:
        return self._call(self.actor.get.remote(key))

    def claim(self, key: str) -> dict[str, Any] | None:
        return self._call(self.actor.claim.remote(key, self.owner))

    def put(self, key: str, model: str, reply: Mapping[str, Any]) -> None:
        self._call(self.actor.put.remote(key, model, dict(reply)))

    def release(self, key: str) -> None:
        self._call(self.actor.release.remote(key))

    def close(self) -> None:
        """Nothing: the driver closes the shared cache once every worker is done."""

    @staticmethod
    def _call(ref: Any) -> Any:
        import ray

        from ..errors import CegError

        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, CegError):  # the cache file's own error, said as itself
                raise type(cause)(str(cause)) from None
            raise
