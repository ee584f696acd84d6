"""Index builds on Ray (``--engine ray``), in local mode: the index of a single-machine build.

Ray runs once for this module on this machine (``ray.init(num_cpus=2)``); the
fake model reaches the workers pickled by value (``conftest`` is registered
with Ray's cloudpickle), as a notebook's own embedder would. Ranges, embedding
calls and shards are made small so a few hundred passages cross many of each.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import MINI_WIKI, HashEmbedder, need_extra
from multistream_fixture import make_multistream
from ranged_builds import meta_of, mixed_sources, rows_of, same_index, vectors_of
from ray_harness import TESTS_DIR, by_value, no_ray_auth, session_folders_of, short_ray_temp
from reliability_harness import documents, leftovers

import ceg_cli.corpus.ranges
import ceg_cli.index.build.builder
from ceg_cli.errors import InputError, UsageError
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.build.ray_engine import INSTALL_HINT, _placements
from ceg_cli.index.build.ray_session import check_reachable
from ceg_cli.index.indexdir import work_path

ray: Any = need_extra("ray", "ray")


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    by_value(__name__)
    with no_ray_auth(), short_ray_temp() as temp:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level="WARNING", object_store_memory=100_000_000, _temp_dir=str(temp))
        yield
        ray.shutdown()


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges of about 1 KB or 2 pages or 2 files, embedding calls of about 8 passages."""
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_BYTES", 1000)
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_PAGES", 2)
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_FILES", 2)
    monkeypatch.setattr(ceg_cli.index.build.builder, "EMBED_CALL_SIZE", 8)


@pytest.fixture(scope="module")
def multistream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dump, _ = make_multistream(MINI_WIKI, tmp_path_factory.mktemp("ms"), per_stream=2)
    return dump


def test_a_ray_build_is_the_single_machine_build(
    small: None, tmp_path: Path, multistream: Path
) -> None:
    sources = mixed_sources(tmp_path, multistream)
    local_warnings: list[str] = []
    build_index(sources, tmp_path / "local", embedder=HashEmbedder(),
                on_warning=local_warnings.append)
    warnings: list[str] = []
    report = build_index(sources, tmp_path / "ray",
                         BuildOptions(engine="ray", workers=2, shard_passages=20),
                         embedder=HashEmbedder(), on_warning=warnings.append)
    assert report.workers == 2 and len(report.worker_nodes) == 2
    assert report.chunks == len(rows_of(tmp_path / "local")) > 150
    same_index(tmp_path / "ray", tmp_path / "local")
    assert warnings == local_warnings and len(warnings) == 2
    assert meta_of(tmp_path / "ray")["build"] == {"engine": "ray", "workers": 2}
    assert meta_of(tmp_path / "local")["build"] == {"engine": "local", "workers": 1}
    assert leftovers(tmp_path / "ray") == []


def test_a_lexical_only_ray_build_is_the_single_machine_one(
    small: None, tmp_path: Path, multistream: Path
) -> None:
    """--retrieval lexical on Ray: the workers read and chunk, nothing is embedded, and the
    passages and the lexical part are those of a build in one thread (issue 48)."""
    sources = mixed_sources(tmp_path, multistream)
    build_index(sources, tmp_path / "local", BuildOptions(retrieval="lexical"))
    report = build_index(sources, tmp_path / "ray",
                         BuildOptions(engine="ray", workers=2, shard_passages=20,
                                      retrieval="lexical"))
    assert report.workers == 2
    assert rows_of(tmp_path / "ray") == rows_of(tmp_path / "local")
    meta = meta_of(tmp_path / "ray")
    assert meta["retrieval"] == "lexical" and "model" not in meta
    assert meta["lexical"]["passages"] == meta_of(tmp_path / "local")["lexical"]["passages"]
    assert not (tmp_path / "ray" / "vectors.faiss").exists()
    assert leftovers(tmp_path / "ray") == []


def test_a_worker_that_loses_its_source_names_it_and_its_host(
    small: None, tmp_path: Path
) -> None:
    first = documents(tmp_path / "first.jsonl", 40, "F")
    second = documents(tmp_path / "second.jsonl", 5, "S")
    # On the worker, the first embedding call deletes the second source: as if
    # that machine did not see it. One worker, two ranges in flight: the
    # second source's range is read after that.
    deleting = DeletesAtFirstCall(second)
    with pytest.raises(InputError) as caught:
        build_index([first, second], tmp_path / "index", BuildOptions(engine="ray", workers=1),
                    embedder=deleting)
    assert str(caught.value) == (
        f"{second}: no such file or directory on worker host {socket.gethostname()} (every "
        "machine of the cluster must see the sources at the same path)")
    assert not (tmp_path / "index").exists() and leftovers(tmp_path / "index") == []


def test_append_on_ray_is_the_single_machine_append(small: None, tmp_path: Path) -> None:
    first = documents(tmp_path / "first.jsonl", 30, "F")
    second = documents(tmp_path / "second.jsonl", 30, "S")
    for name, options in (("local", BuildOptions()), ("ray", BuildOptions(engine="ray"))):
        build_index([first], tmp_path / name, embedder=HashEmbedder())
        report = build_index([first, second], tmp_path / name,
                             BuildOptions(**{**options.__dict__, "append": True}),
                             embedder=HashEmbedder())
        assert report.unchanged == [str(first)] and report.chunks == 30
    same_index(tmp_path / "ray", tmp_path / "local")
    assert meta_of(tmp_path / "ray")["build"] == {"engine": "ray", "workers": 1}  # one node


def test_importing_the_builder_and_the_cli_leaves_ray_out() -> None:
    code = ("import sys, ceg_cli.cli.main, ceg_cli.index.build.builder, ceg_cli.corpus.ranges; "
            "print('ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


def test_a_source_unreadable_on_a_worker_names_it_and_its_host(tmp_path: Path) -> None:
    whole = documents(tmp_path / "docs.jsonl", 200, "G").read_bytes()
    packed = tmp_path / "docs.jsonl.gz"
    packed.write_bytes(gzip.compress(whole)[:-300])  # cut short: the end cannot be read
    with pytest.raises(InputError, match=rf"^{packed}: cannot read: .* \(on worker host "
                       rf"{re.escape(socket.gethostname())}\)$"):
        build_index([packed], tmp_path / "index", BuildOptions(engine="ray"),
                    embedder=HashEmbedder())
    assert leftovers(tmp_path / "index") == []


def test_resume_refuses_the_unfinished_build_of_the_other_engine(
    small: None, tmp_path: Path
) -> None:
    docs = documents(tmp_path / "docs.jsonl", 40, "E")
    with pytest.raises(RuntimeError, match="model crashed"):
        build_index([docs], tmp_path / "index", BuildOptions(shard_passages=10),
                    embedder=CrashesAfter(3))
    with pytest.raises(UsageError, match=r"another build \(engine, ranges differ\)"):
        build_index([docs], tmp_path / "index", BuildOptions(engine="ray", resume=True),
                    embedder=HashEmbedder())


class _Cluster:
    """What ``_placements`` asks of Ray: a head (aa...) without CPUs, nodes of 4 (bb...)
    and 16 (dd...) CPUs, and a dead one."""

    @staticmethod
    def nodes() -> list[dict[str, object]]:
        return [{"NodeID": hexid * 28, "Alive": alive, "Resources": {"CPU": cpus}}
                for hexid, alive, cpus in (("aa", True, 0.0), ("bb", True, 4.0),
                                           ("cc", False, 8.0), ("dd", True, 16.0))]


def test_workers_go_one_per_node_with_its_cpus_or_share_the_cluster() -> None:
    resources = {"CPU": 20.0}
    per_node = _placements(_Cluster, None, resources, 0)
    assert [(p["num_cpus"], p["scheduling_strategy"].node_id) for p in per_node] == [
        (4.0, "bb" * 28), (16.0, "dd" * 28)]  # the head, with no CPUs, gets none
    assert all(p["scheduling_strategy"].soft is False for p in per_node)
    shared = _placements(_Cluster, 8, resources, 0)
    assert [(p["num_cpus"], p["num_gpus"]) for p in shared] == [(2.5, 0)] * 8
    on_gpus = _placements(_Cluster, None, {"CPU": 20.0, "GPU": 4.0}, 4)
    assert [(p["num_cpus"], p["num_gpus"]) for p in on_gpus] == [(5.0, 1.0)] * 4
    more_than_gpus = _placements(_Cluster, 8, {"CPU": 20.0, "GPU": 4.0}, 4)
    assert {p["num_gpus"] for p in more_than_gpus} == {0.5}


class CrashesAfter(HashEmbedder):
    def __init__(self, calls: int) -> None:
        super().__init__()
        self.calls = calls

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls -= 1
        if self.calls < 0:
            raise RuntimeError("model crashed")
        return super().embed(texts)


class DeletesAtFirstCall(HashEmbedder):
    def __init__(self, victim: Path) -> None:
        super().__init__()
        self.victim = victim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.victim.exists():
            self.victim.unlink()
        return super().embed(texts)


def test_the_options_that_go_with_ray_alone_are_refused_without_it(tmp_path: Path) -> None:
    docs = documents(tmp_path / "docs.jsonl", 3, "D")
    with pytest.raises(UsageError, match="--ray-address goes with --engine ray"):
        build_index([docs], tmp_path / "index", BuildOptions(ray_address="ray://h:1"),
                    embedder=HashEmbedder())
    with pytest.raises(UsageError, match="--engine spark: expected one of local, ray"):
        build_index([docs], tmp_path / "index", BuildOptions(engine="spark"),
                    embedder=HashEmbedder())


def test_an_address_where_no_cluster_listens_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free once closed: nothing listens there
    started = time.monotonic()
    with pytest.raises(UsageError, match=rf"^--ray-address 127.0.0.1:{port}: nothing answers "
                       r"there \(Connection refused\); start the cluster with `ray start --head`"):
        check_reachable(f"127.0.0.1:{port}")
    assert time.monotonic() - started < 5
    with pytest.raises(UsageError, match="expected HOST:PORT"):
        check_reachable("head-node")

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded before the address was checked")

    monkeypatch.setattr(ceg_cli.index.build.builder, "load_embedder", no_model)
    docs = documents(tmp_path / "docs.jsonl", 3, "D")
    with pytest.raises(UsageError, match=rf"^--ray-address 127.0.0.1:{port}: nothing answers"):
        build_index([docs], tmp_path / "index",
                    BuildOptions(engine="ray", ray_address=f"127.0.0.1:{port}"))


def test_without_ray_installed_the_command_says_how_to_install_it(tmp_path: Path) -> None:
    docs = documents(tmp_path / "docs.jsonl", 3, "D")
    script = textwrap.dedent(f"""
        import sys
        sys.modules["ray"] = None  # import ray fails, as where it is not installed
        from ceg_cli.cli.main import app
        app(["index", "build", {str(docs)!r}, "--index", {str(tmp_path / "index")!r},
             "--engine", "ray", "-q"], prog_name="ceg")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().endswith(
        f"--engine ray needs Ray, which is not installed here: {INSTALL_HINT}")
    assert "Traceback" not in done.stderr and not (tmp_path / "index").exists()


DRIVER = """
import sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
import numpy as np
import ceg_cli.corpus.ranges, ceg_cli.index.build.builder
from ceg_cli.index.build.builder import BuildOptions, build_index
from conftest import HashEmbedder
from ray_harness import by_value

class Slow(HashEmbedder):
    def embed(self, texts):
        time.sleep(0.3)
        return super().embed(texts)

by_value()
ceg_cli.corpus.ranges.RANGE_BYTES = 1000  # as the fixture small: the same plan
ceg_cli.corpus.ranges.RANGE_PAGES = 2
ceg_cli.corpus.ranges.RANGE_FILES = 2
ceg_cli.index.build.builder.EMBED_CALL_SIZE = 8
sources = [Path(p) for p in sys.argv[2:]]
build_index(sources, Path(sys.argv[1]), BuildOptions(engine="ray", workers=2, shard_passages=20,
            resume=True), embedder=Slow())
"""


def test_a_killed_driver_leaves_shards_that_resume_finishes(
    small: None, tmp_path: Path, multistream: Path
) -> None:
    sources = mixed_sources(tmp_path, multistream)
    build_index(sources, tmp_path / "local", embedder=HashEmbedder())
    target = tmp_path / "index"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(tests=str(TESTS_DIR)), encoding="utf-8")
    # Its own session: the driver's local Ray (raylet, workers) is killed with it below.
    driver = subprocess.Popen([sys.executable, str(script), str(target), *map(str, sources)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    try:
        committed = _wait_for_shards(work_path(target), 3, driver)
        os.killpg(driver.pid, signal.SIGKILL)  # the driver, like a crash; its Ray with it
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
        for folder in session_folders_of(driver.pid):  # what SIGKILL left no one to remove
            shutil.rmtree(folder)
    assert committed >= 3 and not target.exists()
    report = build_index(sources, target,
                         BuildOptions(engine="ray", workers=2, shard_passages=20, resume=True),
                         embedder=HashEmbedder())
    assert report.resumed_chunks >= 40
    same_index(target, tmp_path / "local")
    assert leftovers(target) == []


def _wait_for_shards(root: Path, shards: int, proc: subprocess.Popen[bytes]) -> int:
    """Wait until the build in ``root`` has committed ``shards`` shards after shard 0."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            # Closed at once: an open reader would keep the resumed build from finishing.
            with closing(sqlite3.connect(f"file:{root / 'chunks.sqlite'}?mode=ro",
                                         uri=True)) as db:
                (done,) = db.execute("SELECT max(shard) FROM build_progress").fetchone()
        except sqlite3.Error:
            done = None
        if done is not None and done >= shards:
            return int(done)
        time.sleep(0.1)
    raise AssertionError("the driver committed too few shards in 120 s")


@pytest.mark.slow
def test_the_command_builds_on_ray_with_the_real_model(
    tmp_path: Path, mini_wiki: Path, mini_index: Path
) -> None:
    """The real ``ceg`` entry point starts Ray on this machine; its worker loads the model."""
    ceg = str(Path(sys.executable).with_name("ceg"))
    target = tmp_path / "index"
    done = subprocess.run([ceg, "index", "build", str(mini_wiki), "--index", str(target),
                           "--engine", "ray", "--workers", "1", "-q"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "embedded by 1 Ray worker on 1 node" in done.stderr
    same_index(target, mini_index)
    assert np.allclose(vectors_of(target), vectors_of(mini_index), atol=1e-5)
    info = subprocess.run([ceg, "index", "info", "--index", str(target)], capture_output=True,
                          text=True, timeout=120)
    assert re.search(r"^build engine +ray, 1 worker +$", info.stdout, re.M), info.stdout


class SlowHashEmbedder(HashEmbedder):
    """The fake model, a tenth of a second per call: a range takes long enough to watch."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        time.sleep(0.1)
        return super().embed(texts)


class RecordedCounter:
    def __init__(self) -> None:
        self.updates: list[int] = []

    def update(self, n: int = 1) -> None:
        self.updates.append(n)


class RecordedProgress:
    def __init__(self) -> None:
        self.counters: dict[str, RecordedCounter] = {}

    def counter(self, label: str, unit: str, total: int | None = None) -> RecordedCounter:
        return self.counters.setdefault(label, RecordedCounter())


def test_passages_embedded_inside_a_range_are_shown_as_it_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ceg_cli.index.build.ray_engine

    monkeypatch.setattr(ceg_cli.index.build.builder, "EMBED_CALL_SIZE", 4)
    monkeypatch.setattr(ceg_cli.index.build.ray_engine, "PROGRESS_EVERY_S", 0.1)
    docs = documents(tmp_path / "docs.jsonl", 60, "P")  # one range: far below RANGE_BYTES
    progress = RecordedProgress()
    report = build_index([docs], tmp_path / "ray", BuildOptions(engine="ray", workers=1),
                         embedder=SlowHashEmbedder(), progress=progress)
    embedded = progress.counters["embedded"].updates
    assert progress.counters["pages read"].updates == [60]  # the one range, when it ended
    assert len(embedded) >= 3, embedded  # and passages while it ran
    assert sum(embedded) == report.chunks == 60
