"""What the tests of ``ceg check --engine ray`` share: judges that reach Ray workers, inputs.

A judge registered in the test process by a factory object
(``judges.register``) goes to the workers with the run, pickled by value
(``ray_harness.by_value`` registers this module), as a notebook's own judge
would. ``hashed`` is the offline judge, and also lets the worker's index load
``HashEmbedder`` by its name, as the ``hash_model`` fixture does in the test
process: the worker is another process, which that fixture cannot reach.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import HashEmbedder
from reliability_harness import many_responses

from ceg_cli import judges
from ceg_cli.types import JudgeItem, Verdict

#: A word that makes ``crashing`` fail on the batch whose segments hold it.
BOOM = "Kaboom"


def _hash_model_here() -> None:
    """Make this process's index load ``HashEmbedder`` for its name (once)."""
    import ceg_cli.index.store as store

    real = getattr(store, "_before_hash_model", store.load_embedder)
    store._before_hash_model = real  # type: ignore[attr-defined]
    fake = HashEmbedder().name

    def load(name: str | None = None, **kwargs: Any) -> Any:
        return HashEmbedder() if name == fake else real(name, **kwargs)

    store.load_embedder = load  # type: ignore[assignment]


def hashed(arg: str, options: Mapping[str, Any]) -> Any:
    """The offline judge, in a process whose index loads ``HashEmbedder``."""
    from ceg_cli.judges.offline.offline import create

    _hash_model_here()
    return create(arg, options)


class Crashing:
    """The offline judge, but a bug when a segment holds ``BOOM``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.method = inner.name, inner.method
        self.cuts = inner.cuts  # the offline judge's cut, so records name it as its own

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        if any(BOOM in item.segment.text for item in items):
            raise RuntimeError("a bug in the judge")
        return list(self.inner.judge(items))


def crashing(arg: str, options: Mapping[str, Any]) -> Any:
    return Crashing(hashed(arg, options))


class KillsItsWorkerOnce:
    """The offline judge; the first worker process to judge SIGKILLs itself (once in all:
    the marker file says which process it was)."""

    def __init__(self, inner: Any, marker: str) -> None:
        self.inner = inner
        self.marker = marker
        self.name, self.method = inner.name, inner.method
        self.cuts = inner.cuts  # the offline judge's cut, so records name it as its own

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        try:
            with open(self.marker, "x") as fh:  # the first call anywhere, and only it
                fh.write(str(os.getpid()))
        except FileExistsError:
            return list(self.inner.judge(items))
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")


def killing(arg: str, options: Mapping[str, Any]) -> Any:
    """``--judge killing:MARKER``."""
    return KillsItsWorkerOnce(hashed("", options), arg)


@pytest.fixture
def ray_judges(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--judge hashed``, ``crashing``, ``killing:MARKER`` and ``slow``, here and on the
    workers."""
    import ceg_cli.index.store as store

    monkeypatch.setattr(judges, "_REGISTRY", dict(judges._REGISTRY))
    # Put back after the test: the loader, and no trace of the wrapping.
    monkeypatch.setattr(store, "load_embedder", store.load_embedder)
    monkeypatch.setattr(store, "_before_hash_model", store.load_embedder, raising=False)
    _hash_model_here()
    judges.register("hashed", hashed)
    judges.register("crashing", crashing)
    judges.register("killing", killing)
    judges.register("slow", slow)


def mixed_responses(path: Path, n: int) -> Path:
    """``many_responses`` (bad lines, repeated ids), every third record with contexts of
    its own (one citing them), and one line with ``BOOM`` past the middle."""
    many_responses(path, n)
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for number, line in enumerate(lines):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            out.append(line)
            continue
        if number % 3 == 1:
            record["contexts"] = [
                "Aristotle was born in 384 BC in Stagira.",
                {"title": "Plato", "text": "Plato taught Aristotle at the Academy in Athens."},
            ]
            record["response"] += " Plato taught Aristotle [2]."
        if number == n * 2 // 3:
            record["response"] = f"{BOOM} was born in 384 BC."
        out.append(json.dumps(record))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def without(path: Path, word: str) -> Path:
    """A copy of ``path`` without its lines holding ``word``."""
    kept = [line for line in path.read_text(encoding="utf-8").splitlines() if word not in line]
    copy = path.with_name(f"{path.stem}-no-{word}{path.suffix}")
    copy.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return copy


def timeless(text: str) -> str:
    """A report, JUnit file or summary table without the run's time, which differs."""
    text = re.sub(r'time="[0-9.]+"', 'time=""', text)
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "DATE UTC", text)
    # A table's cell is padded to its column's width, whatever the time's digits.
    return re.sub(r" *\b\d[\d,]*\.\d s\b", " T s", text)


class Slow:
    """The offline judge, a tenth of a second a batch: a run long enough to stop."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.method = inner.name, inner.method
        self.cuts = inner.cuts  # the offline judge's cut, so records name it as its own

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        import time

        time.sleep(0.1)
        return list(self.inner.judge(items))


def slow(arg: str, options: Mapping[str, Any]) -> Any:
    return Slow(hashed(arg, options))
