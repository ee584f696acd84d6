"""The processes of ``ceg index build --workers N`` end with it, and are no more than the
machine has (issue 34, items 8-10 and parts of 14).

The real command runs in a subprocess (``reliability_harness``'s wrapper: the
fake model, held at its first batch until the test lets it go), with its
reader processes reading small ranges; its descendants are found in
``/proc`` before it is stopped, and must all be gone a bounded time after,
whether it was SIGKILLed, SIGTERMed or given Ctrl-C. Every process a test
started is SIGKILLed in its ``finally``, by id.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import HashEmbedder, need_extra
from proc_harness import default_sigint, descendants, kill_all, wait_until_gone
from ranged_builds import meta_of
from reliability_harness import ceg_command, documents

import ceg_cli.corpus.ranges
import ceg_cli.index.build.builder
import ceg_cli.index.build.pool_engine
from ceg_cli.errors import UsageError
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.build.pool_engine import reader_count

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

@pytest.fixture(scope="module")
def ceg(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return ceg_command(tmp_path_factory.mktemp("ceg"))


@contextmanager
def held_reader_build(
    ceg: Sequence[str], tmp_path: Path, *extra: str
) -> Iterator[tuple[subprocess.Popen[bytes], dict[int, int], Path]]:
    """A real ``ceg index build --workers 2`` in its own session, held at its model
    with its readers started: (process, its descendants, its stderr file)."""
    corpus = documents(tmp_path / "docs.jsonl", 300, "K")  # about 20 ranges of 2,000 bytes
    gate = tmp_path / "gate"
    gate.mkdir()
    env = {**os.environ, "CEG_TEST_EMBED_GATE": str(gate), "CEG_TEST_RANGE_BYTES": "2000"}
    stderr_path = tmp_path / "stderr"
    readers = min(2, ceg_cli.index.build.pool_engine.available_cores())
    found: dict[int, int] = {}
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [*ceg, "index", "build", str(corpus), "--index", str(tmp_path / "index"), "-q",
             "--workers", "2", *extra],
            env=env, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
            preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + 120
        # The readers and the resource tracker, and the model waiting for its first batch.
        while not ((gate / "waiting").exists() and len(found) >= readers + 1):
            assert proc.poll() is None, stderr_path.read_text()
            assert time.monotonic() < deadline, (found, stderr_path.read_text())
            time.sleep(0.05)
            found.update(descendants(proc.pid))
        time.sleep(0.5)  # the readers at work on their ranges, or done and waiting for more
        found.update(descendants(proc.pid))
        yield proc, found, stderr_path
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        kill_all(found)


def test_readers_end_when_their_build_is_sigkilled(ceg: list[str], tmp_path: Path) -> None:
    with held_reader_build(ceg, tmp_path) as (proc, found, _):
        proc.send_signal(signal.SIGKILL)  # no handler, no cleanup: like the OOM killer
        proc.wait(timeout=30)
        assert wait_until_gone(found) == [], "left running after the build was SIGKILLed"


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_sigterm_and_ctrl_c_stop_a_reader_build_with_one_line(
    ceg: list[str], tmp_path: Path, how: str
) -> None:
    """SIGTERM to the build, or SIGINT to its whole process group as a terminal's
    Ctrl-C sends it: ``interrupted`` and exit 130, no reader's traceback, no process left."""
    with held_reader_build(ceg, tmp_path) as (proc, found, stderr_path):
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 130, stderr_path.read_text()
        assert wait_until_gone(found) == []
    assert stderr_path.read_text().strip() == "interrupted"
    assert not (tmp_path / "index").exists()


# -- how many readers ---------------------------------------------------------------


def test_readers_are_no_more_than_the_ranges_nor_the_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said: list[str] = []
    monkeypatch.setattr(ceg_cli.index.build.pool_engine, "available_cores", lambda: 4)
    assert reader_count(2, 12, said.append) == 2
    assert reader_count(999, 3, said.append) == 3  # past the ranges: trimmed, silently
    assert reader_count(3, 0, said.append) == 1
    assert said == []
    assert reader_count(999, 12, said.append) == 4
    assert said == ["--workers 999: this machine has 4 cores for this build; starting 4 "
                    "reader processes"]


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges of about 1 KB, embedding calls of about 8 passages."""
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_BYTES", 1000)
    monkeypatch.setattr(ceg_cli.index.build.builder, "EMBED_CALL_SIZE", 8)


def test_workers_999_starts_what_the_machine_has_and_says_so(
    run_cli: Any, fake_models: None, small: None, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[int] = []
    real = ceg_cli.index.build.pool_engine.ProcessPoolExecutor

    def counted(*args: Any, max_workers: int, **kwargs: Any) -> Any:
        started.append(max_workers)
        return real(*args, max_workers=max_workers, **kwargs)

    monkeypatch.setattr(ceg_cli.index.build.pool_engine, "ProcessPoolExecutor", counted)
    monkeypatch.setattr(ceg_cli.index.build.pool_engine, "available_cores", lambda: 2)
    docs = documents(tmp_path / "docs.jsonl", 60, "W")  # about 9 ranges
    result = run_cli("index", "build", docs, "--index", tmp_path / "idx", "--workers", "999",
                     "--quiet")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == (
        "warning: --workers 999: this machine has 2 cores for this build; starting 2 reader "
        "processes")
    assert started == [2]
    assert meta_of(tmp_path / "idx")["build"] == {"engine": "local", "workers": 2}


# -- refused runs, warnings, --resume ------------------------------------------------


@pytest.mark.parametrize("options", [["--device", "cpu", "--precision", "float16"],
                                     ["--device", "cuda"]])
def test_a_refused_build_leaves_not_even_its_lock(
    run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: list[str]
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    docs = documents(tmp_path / "docs.jsonl", 3, "R")
    result = run_cli("index", "build", docs, "--index", tmp_path / "idx", *options)
    assert result.exit_code == 2, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]


def test_reader_warnings_name_the_sources_as_given(
    run_cli: Any, fake_models: None, small: None, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "in").mkdir()
    docs = documents(tmp_path / "in" / "docs.jsonl", 40, "G")
    with open(docs, "a", encoding="utf-8") as fh:
        fh.write("{not json\n")
    monkeypatch.chdir(tmp_path / "in")
    said = {}
    for workers in ("1", "2"):
        result = run_cli("index", "build", "docs.jsonl", "--index", f"../idx{workers}",
                         "--workers", workers, "--quiet")
        assert result.exit_code == 0, result.stderr
        said[workers] = [line for line in result.stderr.splitlines()
                         if line.startswith("warning:")]
    assert said["2"] == said["1"] and len(said["1"]) == 1
    assert said["2"][0].startswith("warning: docs.jsonl:41: invalid JSON"), said


class Stopping(HashEmbedder):
    """The fake model, stopping the build (as Ctrl-C would) at its ``calls``-th call."""

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.left = calls

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.left -= 1
        if self.left < 0:
            raise KeyboardInterrupt
        return super().embed(texts)


@pytest.mark.parametrize(("before", "after", "hint"), [
    (2, 1, "that build read with reader processes (--workers 2 or more), this run in one "
           "thread (--workers 1): pass --workers 2 or more"),
    (1, 3, "that build read in one thread (--workers 1), this run with reader processes "
           "(--workers 2 or more): pass --workers 1"),
])
def test_resume_with_other_workers_names_the_option(
    small: None, tmp_path: Path, before: int, after: int, hint: str
) -> None:
    docs = documents(tmp_path / "docs.jsonl", 80, "S")
    with pytest.raises(KeyboardInterrupt):
        build_index([docs], tmp_path / "idx", BuildOptions(workers=before, shard_passages=10),
                    embedder=Stopping(6))
    with pytest.raises(UsageError) as refused:
        build_index([docs], tmp_path / "idx",
                    BuildOptions(workers=after, shard_passages=10, resume=True),
                    embedder=HashEmbedder())
    assert f"(ranges differ): {hint}; run the same command" in str(refused.value)
    # What it says to pass works: the same build goes on.
    report = build_index([docs], tmp_path / "idx",
                         BuildOptions(workers=before, shard_passages=10, resume=True),
                         embedder=HashEmbedder())
    assert report.resumed_chunks > 0


@pytest.mark.slow
def test_the_onnx_export_says_nothing_and_leaves_logging_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """torch's tracer warnings and ONNX Runtime's quantizer advice came through --quiet."""
    import logging
    import warnings

    need_extra("onnxruntime", "fast")
    from ceg_cli.index.dense.embedding import (
        OnnxEmbedder,
        _load_sentence_transformer,
        resolve_model,
    )

    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))  # a fresh export
    spec = resolve_model(None)
    # Imported first: importing these libraries adds warning filters of their own.
    _load_sentence_transformer(spec.location, "cpu")
    import onnxruntime.quantization  # noqa: F401
    import torch.onnx  # noqa: F401

    capfd.readouterr()  # the loader's progress bar (the CLI turns it off)
    handlers = list(logging.getLogger().handlers)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        filters = list(warnings.filters)
        OnnxEmbedder(spec, quantized=True)
        assert warnings.filters == filters
    assert [f"{w.category.__name__}: {w.message}" for w in seen] == []
    assert logging.getLogger().handlers == handlers
    assert capfd.readouterr().err == ""
