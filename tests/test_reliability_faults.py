"""Faults: killed runs, full disks, failing judges, concurrent runs; nothing lost.

The random-kill loops run ``ceg`` in subprocesses (the real CLI with the fake
model injected by a wrapper script, see ``reliability_harness``) and SIGKILL
them at stratified random moments of a measured uninterrupted run:

- ``ceg check`` with the offline judge, killed, then resumed with ``--resume``
  (every other time the resumed run is killed too): the final output must be
  byte-identical to an uninterrupted run's;
- ``ceg index build`` over an existing index, killed: the index must then be
  exactly the old one or exactly the new one, open and answer searches, and
  the next build must clean up after the killed one.

``CEG_RELIABILITY_KILLS`` sets the killed runs per command (default 3, as in
CI; ``benchmarks/check/reliability.py`` runs 50). Each test records its row of the
reliability table.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import MINI_WIKI
from multistream_fixture import make_multistream
from reliability_harness import (
    KILLS,
    RNG_SEED,
    ceg_command,
    clean_up_with_a_build,
    documents,
    index_state,
    kill_and_resume,
    kill_moments,
    leftovers,
    many_responses,
    run_and_kill,
    spread,
    timeline,
)

from ceg_cli import judges
from ceg_cli.errors import BackendError
from ceg_cli.index import embed_text, open_index
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.types import FACTUAL, JUDGE_ERROR, NOT_JUDGED, JudgeItem, Verdict

Row = Callable[[str, int, str], None]


@pytest.fixture
def row(record_property: Callable[[str, object], None]) -> Row:
    """Record one row of the reliability table."""

    def record(what: str, tries: int, outcome: str) -> None:
        record_property("reliability", {"what": what, "tries": tries, "outcome": outcome})

    return record


@pytest.fixture(scope="module")
def ceg(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command that runs ``ceg`` with the fake model, in a subprocess."""
    return ceg_command(tmp_path_factory.mktemp("wrapper"))


@pytest.mark.slow
def test_check_killed_at_random_then_resumed_equals_an_uninterrupted_run(
    ceg: list[str], hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """SIGKILL at random moments (and again during the resume): byte-identical output."""
    responses = many_responses(tmp_path / "responses.jsonl", 600)
    cmd = [*ceg, "check", str(responses), "--index", str(hash_index), "--quiet", "--out"]
    stats, total = kill_and_resume(cmd, tmp_path)
    assert total == 600
    row("`ceg check` (offline judge) SIGKILLed at random, then `--resume`d", stats.kill_points,
        stats.outcome(total))


def sigterm_as_interrupt(cmd: list[str], ready: Callable[[], bool],
                         env: dict[str, str] | None = None) -> float:
    """Run ``cmd``, SIGTERM it once ``ready()``; assert it ended as Ctrl-C ends ``ceg``
    (exit 130, ``interrupted`` its last line). Returns the seconds it took to end."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 600
        while not ready():
            assert proc.poll() is None, "the run ended before it could be stopped"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=120)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    said = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    assert status == 130, said
    assert said.strip().splitlines()[-1:] == ["interrupted"], said
    return took


@pytest.mark.slow
def test_check_sigtermed_while_the_verifier_scores_stops_at_once_and_resumes(
    ceg: list[str], hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """SIGTERM (a CI runner's cancel, ``timeout``, ``docker stop``) is handled as Ctrl-C:
    one ``interrupted`` line, exit 130, the records written so far kept whole (an
    uninterrupted run's first bytes), and ``--resume`` writes every other record once,
    in order. Before, SIGTERM killed ``ceg`` on the spot (no ``finally``: exit -15); a
    benchmark that turned it into an exit took seconds to minutes more in the
    interpreter's final garbage collection of the torch heap (``cli.main.run`` freezes
    that heap first).

    Not byte for byte after the cut: on a CPU the verifier's int8 layers scale each
    batch's activations, so a resume that starts inside a batch of the uninterrupted run
    scores its later records in other batches, a few thousandths apart
    (docs/reliability.md)."""
    responses = many_responses(tmp_path / "responses.jsonl", 40)
    cmd = [*ceg, "check", str(responses), "--index", str(hash_index), "--judge", "verifier",
           "--quiet", "--out"]
    reference = tmp_path / "reference.jsonl"
    done = subprocess.run([*cmd, str(reference)], capture_output=True, timeout=600)
    assert done.returncode in (0, 2), done.stderr.decode(errors="replace")
    out = tmp_path / "out.jsonl"
    # Stopped once its first records are written: the verifier is scoring the next.
    took = sigterm_as_interrupt(
        [*cmd, str(out)], lambda: out.exists() and out.read_bytes().count(b"\n") >= 1)
    written = out.read_bytes()
    kept = written.count(b"\n")
    assert 0 < kept < reference.read_bytes().count(b"\n")
    assert reference.read_bytes().startswith(written)
    resumed = subprocess.run([*cmd, str(out), "--resume"], capture_output=True, timeout=600)
    assert resumed.returncode == done.returncode, resumed.stderr.decode(errors="replace")
    assert out.read_bytes().startswith(written)

    def records(path: Path) -> list[tuple[Any, ...]]:
        return [(r["line"], r["id"], r.get("response"),
                 [s["text"] for s in r.get("segments") or ()])
                for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())]

    assert records(out) == records(reference)
    row("`ceg check --judge verifier` SIGTERMed while scoring, then `--resume`d", 1,
        f"exit 130 with one 'interrupted' line {took:.1f} s after the signal; "
        f"{kept} records kept whole; the resumed output has every record once, in order")


def test_check_sigtermed_mid_run_says_interrupted_and_keeps_its_records(
    ceg: list[str], hash_index: Path, tmp_path: Path
) -> None:
    """The fast twin of the verifier test: the run held at its judge's second batch,
    SIGTERM, exit 130 with one ``interrupted`` line and the first batch's records
    whole (before: exit -15, killed on the spot, no word). The verifier test resumes."""
    responses = many_responses(tmp_path / "responses.jsonl", 40)
    cmd = [*ceg, "check", str(responses), "--index", str(hash_index), "--quiet", "--out"]
    gate = tmp_path / "gate"
    gate.mkdir()
    out = tmp_path / "out.jsonl"
    sigterm_as_interrupt([*cmd, str(out), "--judge", "gated"], (gate / "waiting").exists,
                         env={**os.environ, "CEG_TEST_JUDGE_GATE": str(gate)})
    kept = out.read_bytes()
    assert kept.endswith(b"\n")
    records = [json.loads(line) for line in kept.splitlines()]  # each one whole
    assert 0 < len(records) < 40


def test_ceg_freezes_its_heap_before_the_interpreter_tears_it_down() -> None:
    """What is left after a command is the interpreter's teardown, whose garbage
    collections walked every object torch made (5 to 40 s after a verifier run on a
    busy machine, the time a SIGTERMed run took to end): ``run`` freezes the heap
    first, so the teardown does not walk it (atexit handlers run after)."""
    child = ("import atexit, gc\n"
             "from ceg_cli.cli.main import run\n"
             "atexit.register(lambda: print('frozen', gc.get_freeze_count()))\n"
             "run(['--version'])\n")
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    frozen = [line for line in done.stdout.splitlines() if line.startswith("frozen")]
    assert len(frozen) == 1 and int(frozen[0].split()[1]) > 1000, done.stdout


# -- ceg index build, killed at random -----------------------------------------------


@pytest.mark.slow
def test_index_build_killed_at_random_leaves_a_whole_index(
    ceg: list[str], hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """SIGKILL a rebuild at random: the index is the old or the new one, whole and usable."""
    corpus = documents(tmp_path / "docs.jsonl", 3000, "B")
    new = tmp_path / "new"
    cmd = [*ceg, "index", "build", str(corpus), "-q", "--index"]
    _, total, _ = timeline([*cmd, str(new)], new / "meta.json")
    old_state, new_state = index_state(hash_index), index_state(new)
    target = tmp_path / "index"
    outcomes = {"old": 0, "new": 0}
    with_leftovers = 0
    for at in kill_moments(KILLS, 0.0, total, random.Random(RNG_SEED)):
        shutil.copytree(hash_index, target)
        run_and_kill([*cmd, str(target)], at)
        state = index_state(target)
        which = "old" if state == old_state else "new" if state == new_state else None
        assert which is not None, f"killed at {at:.2f} s: neither the old nor the new index"
        outcomes[which] += 1
        with_leftovers += bool(leftovers(target))
        clean_up_with_a_build(target, tmp_path)
        shutil.rmtree(target)
    row("`ceg index build` over an index, SIGKILLed at random", KILLS,
        f"old index intact {outcomes['old']}, new index complete {outcomes['new']}, "
        f"neither 0; always opens and searches consistently; {with_leftovers} killed builds "
        "left a temporary directory, each removed by the next build")


def test_index_build_killed_at_random_then_resumed_equals_an_uninterrupted_build(
    ceg: list[str], tmp_path: Path, row: Row
) -> None:
    """SIGKILL a build at random moments, resume it with --resume, again until it ends.

    Each trial builds a new index from a JSONL file and a multistream dump (so
    resuming in the dump seeks its stream); every resumed run is killed at a
    random moment too, until one finishes. The result must be the index of an
    uninterrupted build: the same rows, the same vector bytes, the same meta.
    """
    corpus = documents(tmp_path / "docs.jsonl", 3000, "K")
    dump, _ = make_multistream(MINI_WIKI, tmp_path / "wiki", per_stream=2)
    env = {**os.environ, "CEG_TEST_SHARD": "200"}
    cmd = [*ceg, "index", "build", str(corpus), str(dump), "-q", "--resume", "--index"]
    reference = tmp_path / "reference"
    _, total, _ = timeline([*cmd, str(reference)], reference / "meta.json", env)
    want = index_state(reference)
    passages = [(r[1], r[3]) for r in want[1]]
    rng = random.Random(RNG_SEED)
    kills = trials = lost = duplicated = 0
    committed: list[int] = []
    while kills < KILLS:
        target = tmp_path / f"index-{trials}"
        trials += 1
        while True:
            killed = run_and_kill([*cmd, str(target)], rng.uniform(0.0, total), env)
            if killed.finished_first:
                assert killed.returncode == 0
                break
            kills += 1
            committed.append(_committed_passages(target))
        got = index_state(target)
        keys = [(r[1], r[3]) for r in got[1]]
        lost += len(set(passages) - set(keys))
        duplicated += len(keys) - len(set(keys))
        assert got == want, f"trial {trials}: not the index of an uninterrupted build"
        assert leftovers(target) == []
        shutil.rmtree(target)
    assert lost == duplicated == 0
    row("`ceg index build --resume` SIGKILLed at random, resumed until done", kills,
        f"{trials} builds of {len(passages):,} passages (JSONL + multistream dump, shards of "
        f"200), {kills} kills; committed at the kill min/median/max {spread(committed)}; "
        f"every build equal to an uninterrupted one (rows, vector bytes, meta); {lost} lost, "
        f"{duplicated} duplicated")


def _committed_passages(target: Path) -> int:
    """Passages the unfinished build of ``target`` has committed (0 if none)."""
    store = target.parent / f".{target.name}.building" / "chunks.sqlite"
    if not store.exists():
        return 0
    with contextlib.closing(sqlite3.connect(store)) as db:
        try:
            last = db.execute("SELECT position FROM build_progress ORDER BY shard DESC").fetchone()
        except sqlite3.Error:
            return 0
    return json.loads(last[0])["next_id"] if last else 0


SWAP_KILLS = {
    "before-swap": "old",
    "after-fsync": "old",
    "after-exchange": "new",
    "between-renames": "missing",
}


@pytest.mark.slow
@pytest.mark.parametrize("point", list(SWAP_KILLS))
def test_index_build_killed_at_each_step_of_the_swap(
    ceg: list[str], hash_index: Path, tmp_path: Path, row: Row, point: str
) -> None:
    """A build killed at each step of putting the new index in place."""
    corpus = documents(tmp_path / "docs.jsonl", 50, "B")
    target = tmp_path / "index"
    shutil.copytree(hash_index, target)
    env = {**os.environ, "CEG_TEST_KILL_AT": point}
    done = subprocess.run([*ceg, "index", "build", str(corpus), "-q", "--index", str(target)],
                          env=env, capture_output=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    expected = SWAP_KILLS[point]
    if expected == "missing":
        # Without renameat2 a swap is two renames; killed between them, the old
        # index waits whole beside the target, and the next build puts it back.
        assert not target.exists()
        (parked,) = [p for p in target.parent.iterdir() if ".old-" in p.name]
        assert index_state(parked) == index_state(hash_index)
        with pytest.raises(Exception, match="no index at"):
            open_index(target)
        outcome = "index missing (clear 'no index' error), the old one parked whole beside it"
    else:
        reference = hash_index if expected == "old" else None
        state = index_state(target)
        if reference is not None:
            assert state == index_state(reference)
        else:
            assert json.loads(state[0])["counts"]["chunks"] == 50
        outcome = f"the {expected} index in place, whole"
    clean_up_with_a_build(target, tmp_path)
    label = {"between-renames": "between the two renames (systems without renameat2)"}
    row(f"`ceg index build` killed {label.get(point, point.replace('-', ' '))}", 1,
        f"{outcome}; the next build cleans up")


# -- full disk -------------------------------------------------------------------------


def checked(run_cli: Any, responses: Path, index: Path, out: Path | str, *args: str) -> Any:
    return run_cli("check", responses, "--index", index, "--out", out, "--quiet", *args)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(("error:", "internal error"))]


def test_output_to_dev_full(run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path,
                            row: Row) -> None:
    """--out /dev/full: exit 3, one line saying the output is incomplete."""
    responses = many_responses(tmp_path / "r.jsonl", 20)
    result = checked(run_cli, responses, hash_index, "/dev/full")
    assert result.exit_code == 3
    assert error_lines(result.stderr) == [
        "error: /dev/full: cannot write (No space left on device); the output is incomplete"
    ]
    row("output to /dev/full", 1, "exit 3; one line 'No space left on device; the output is "
        "incomplete'")


def test_big_records_to_dev_full_name_the_full_disk(run_cli: Any, hash_model: None,
                                                    hash_index: Path, tmp_path: Path) -> None:
    """Records longer than the write buffer fail in the write itself; closing must not
    replace that error with the sync's (EINVAL on a device) and name the wrong cause."""
    responses = tmp_path / "big.jsonl"
    responses.write_text("".join(json.dumps({"id": n, "response": "Zorblax lives on Mars. "
                                             * 400}) + "\n" for n in range(3)),
                         encoding="utf-8")
    result = checked(run_cli, responses, hash_index, "/dev/full")
    assert result.exit_code == 3
    assert error_lines(result.stderr) == [
        "error: /dev/full: cannot write (No space left on device); the output is incomplete"
    ]


def test_out_to_a_pipe_is_written_and_not_synced(hash_index: Path, tmp_path: Path) -> None:
    """``--out /dev/stdout`` into a pipe: a pipe cannot be synced (EINVAL), which is no
    failure of the output; every record arrives and the run exits 0."""
    responses = many_responses(tmp_path / "r.jsonl", 3)
    done = subprocess.run(
        ["bash", "-c", '"$@" | cat', "ceg", *ceg_command(tmp_path), "check", str(responses),
         "--index", str(hash_index), "--out", "/dev/stdout", "--quiet"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3 and "cannot write" not in done.stderr


class FullDisk(io.RawIOBase):
    """A file on a disk with ``room`` bytes free: writes past it fail with ENOSPC."""

    def __init__(self, path: Path, mode: str, room: int) -> None:
        self._fh = open(path, mode.replace("b", "") + "b")  # noqa: SIM115
        self.room = room

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        part = bytes(data[: self.room])  # a short write first, as a real disk does
        self._fh.write(part)
        self._fh.flush()
        self.room -= len(part)
        return len(part)

    def fileno(self) -> int:
        return self._fh.fileno()

    def close(self) -> None:
        self._fh.close()
        super().close()


def test_disk_full_at_many_points_then_resume(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The disk fills at a record boundary, inside a record, at the first byte: exit 3, a
    prefix that does not end like a finished file; freed and resumed: identical."""
    import ceg_cli.report.output

    responses = many_responses(tmp_path / "r.jsonl", 60)
    reference = tmp_path / "reference.jsonl"
    assert checked(run_cli, responses, hash_index, reference).exit_code == 2
    full = reference.read_bytes()
    ends = [i + 1 for i, b in enumerate(full) if b == ord("\n")]
    rng = random.Random(RNG_SEED)
    rooms = [0, ends[0], ends[len(ends) // 2], ends[-2], *(rng.randrange(1, len(full))
                                                          for _ in range(KILLS))]
    real_open = open
    for room in rooms:
        out = tmp_path / "out.jsonl"

        def full_disk_open(path: Any, mode: str = "r", *args: Any, room: int = room,
                           **kwargs: Any) -> Any:
            raw = FullDisk(Path(path), mode, room)
            return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8")

        monkeypatch.setattr(ceg_cli.report.output, "open", full_disk_open, raising=False)
        result = checked(run_cli, responses, hash_index, out)
        monkeypatch.setattr(ceg_cli.report.output, "open", real_open, raising=False)
        assert result.exit_code == 3, result.stderr
        (line,) = error_lines(result.stderr)
        assert "No space left on device" in line and "the output is incomplete" in line
        data = out.read_bytes()
        assert full.startswith(data) and len(data) < len(full)
        resumed = checked(run_cli, responses, hash_index, out, "--resume")
        assert resumed.exit_code == 2
        assert out.read_bytes() == full
        out.unlink()
    row("disk full while writing the output (simulated ENOSPC at record boundaries, "
        "mid-record, first byte)", len(rooms),
        "exit 3, one line 'No space left on device; the output is incomplete'; the file a "
        "strict prefix; after `--resume` byte-identical")


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


def test_disk_full_on_a_real_tmpfs(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """A 64 KiB tmpfs fills up: exit 3, a torn or short file; remounted bigger and resumed."""
    responses = many_responses(tmp_path / "r.jsonl", 60)
    reference = tmp_path / "reference.jsonl"
    assert checked(run_cli, responses, hash_index, reference).exit_code == 2
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _can_mount():  # not root here: the simulated full disk above stands in
        row("disk full on a real 64 KiB tmpfs", 0, "not run: mounting needs root")
        return
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], check=True)
    try:
        out = disk / "out.jsonl"
        result = checked(run_cli, responses, hash_index, out)
        assert result.exit_code == 3
        (line,) = error_lines(result.stderr)
        assert "No space left on device" in line
        data = out.read_bytes()
        assert reference.read_bytes().startswith(data) and len(data) < reference.stat().st_size
        subprocess.run(["mount", "-o", "remount,size=16m", str(disk)], check=True)
        resumed = checked(run_cli, responses, hash_index, out, "--resume")
        assert resumed.exit_code == 2
        assert out.read_bytes() == reference.read_bytes()
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    row("disk full on a real 64 KiB tmpfs", 1,
        f"exit 3 with {len(data):,} of {reference.stat().st_size:,} bytes written; remounted "
        "bigger and resumed: byte-identical")


@pytest.mark.slow
def test_index_build_on_a_full_disk_keeps_the_old_index(
    ceg: list[str], hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """A rebuild that fills the disk: exit 3, the old index intact, nothing left behind."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _can_mount():
        row("`ceg index build` on a full disk (2 MiB tmpfs)", 0, "not run: mounting needs root")
        return
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True)
    try:
        target = disk / "index"
        shutil.copytree(hash_index, target)
        corpus = documents(tmp_path / "docs.jsonl", 3000, "B")
        done = subprocess.run([*ceg, "index", "build", str(corpus), "-q", "--index", str(target)],
                              capture_output=True, text=True)
        assert done.returncode == 3
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("error: disk full (No space left on device) while writing")
        assert index_state(target) == index_state(hash_index)
        assert leftovers(target) == []
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    row("`ceg index build` on a full disk (2 MiB tmpfs)", 1,
        "exit 3, one line naming 'No space left on device'; old index intact, no leftovers")


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A real RAM disk of ``size`` mounted at ``path`` (needs root, as the tests here have)."""
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                   check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


@pytest.fixture
def build_cli(run_cli: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``ceg index build`` in-process with the free fake model for every model name."""
    from conftest import HashEmbedder

    import ceg_cli.index.build.builder

    monkeypatch.setattr(ceg_cli.index.build.builder, "load_embedder",
                        lambda *a, **k: HashEmbedder())
    return lambda *args: run_cli("index", "build", *args, "-q")


def _bytes_text(n: int) -> str:
    from ceg_cli.index.diskfull import _bytes

    return _bytes(n)


def _room_needed(corpus: Path, tmp_path: Path) -> str:
    """What the index of ``corpus`` takes: its vectors and its chunk store, built elsewhere."""
    from conftest import HashEmbedder

    from ceg_cli.index.diskfull import _bytes

    roomy = tmp_path / "roomy"
    build_index([corpus], roomy, BuildOptions(), embedder=HashEmbedder())
    with open_index(roomy) as idx:
        vector_bytes = idx.size * idx.dimension * 4
    return _bytes(vector_bytes + (roomy / "chunks.sqlite").stat().st_size)


def test_index_build_on_a_full_tmpfs_says_where_and_how_much_it_needs(
    build_cli: Any, hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """The vectors do not fit: exit 3, one line naming the place and the room needed."""
    corpus = documents(tmp_path / "docs.jsonl", 600, "B")
    needed = _room_needed(corpus, tmp_path)
    needed_store = (tmp_path / "roomy" / "chunks.sqlite").stat().st_size
    with tmpfs(tmp_path / "disk", "1m") as disk:
        target = disk / "index"
        shutil.copytree(hash_index, target)
        result = build_cli(corpus, "--index", target)
        assert result.exit_code == 3
        (line,) = error_lines(result.stderr)
        # The passages' room is measured on the unfinished store (with its write-ahead
        # log), the expectation on a finished one; both hold the temporary path in every
        # row, so they differ by a little, and by machine: compare the parts, not one text.
        said = re.fullmatch(
            re.escape("error: disk full (No space left on device) while writing vectors.faiss "
                      f"of the new index for {target}: it needs about ")
            + r"(?P<total>[\d.]+ [KM]i?B) " + re.escape(f"in {disk} (600 vectors x 384 "
            "dimensions x 4 bytes = 900 KiB, and ") + r"(?P<store>\d+) KiB of passages\), "
            r"\d+ KiB is free there without the partial build; the previous index is "
            r"untouched: free some space, or build elsewhere with --index", line)
        assert said is not None, line
        store = int(said["store"])
        assert said["total"] == _bytes_text((900 + store) * 1024)
        assert 0.5 * needed_store <= store * 1024 <= 2 * needed_store, (store, needed_store)
        assert "internal error" not in result.stderr
        assert index_state(target) == index_state(hash_index)
        assert leftovers(target) == []
    row("`ceg index build` whose vectors do not fit (1 MiB tmpfs)", 1,
        f"exit 3, one line: disk full, where, needs about {needed}; old index intact")


def test_index_build_whose_chunk_store_fills_the_disk(
    build_cli: Any, tmp_path: Path, row: Row
) -> None:
    """SQLite finds the disk full: the same one line, with a floor on the room needed."""
    corpus = documents(tmp_path / "docs.jsonl", 3000, "B")
    with tmpfs(tmp_path / "disk", "128k") as disk:
        result = build_cli(corpus, "--index", disk / "index")
        assert result.exit_code == 3
        (line,) = error_lines(result.stderr)
        assert line.startswith("error: disk full (No space left on device) while writing "
                               f"chunks.sqlite of the new index for {disk / 'index'}: it "
                               "needs more than ")
        assert "of passages so far)" in line
        assert line.endswith("nothing kept: free some space, or build elsewhere with --index")
        assert list(disk.iterdir()) == []
    row("`ceg index build` whose chunk store fills the disk (128 KiB tmpfs)", 1,
        "exit 3, one line: disk full while writing chunks.sqlite, needs more than N; "
        "nothing left behind")


# Where an ordinary write finds no room: the line it gives after the common prefix.
ORDINARY_WRITES = {
    "write_json": ("meta.json", "it needs about "),
    "temp_dir": (".index.building", "it needs more room in "),
}


@pytest.mark.parametrize("where", list(ORDINARY_WRITES))
def test_index_build_with_no_room_for_an_ordinary_write(
    build_cli: Any, old_index: Path, hash_index: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, where: str,
) -> None:
    """ENOSPC from a plain file write or a mkdir is reported the same way."""
    import ceg_cli.index.build.builder
    import ceg_cli.index.indexdir

    def full(path: Path, *args: object) -> None:
        name = path.name if where == "write_json" else f".{path.name}.building"
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path.parent / name))

    # The work folder is made where the index directory's life is (indexdir.BuildTarget).
    module = ceg_cli.index.indexdir if where == "temp_dir" else ceg_cli.index.build.builder
    monkeypatch.setattr(module, where, full)
    corpus = documents(tmp_path / "docs.jsonl", 20, "B")
    result = build_cli(corpus, "--index", old_index)
    assert result.exit_code == 3
    (line,) = error_lines(result.stderr)
    file, needs = ORDINARY_WRITES[where]
    assert line.startswith("error: disk full (No space left on device) while writing "
                           f"{file} of the new index for {old_index}: {needs}")
    if where == "write_json":
        assert "(20 vectors x 384 dimensions x 4 bytes = 30 KiB, and " in line
    assert index_state(old_index) == index_state(hash_index)
    assert leftovers(old_index) == []


# -- the gate never passes by accident ---------------------------------------------------


class ScriptedJudge:
    """Supports every segment with its first passage, or fails the way it is told to."""

    name = "scripted"
    method = "supports everything, or fails as scripted (tests)"

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.calls = 0

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        self.calls += 1
        if self.mode == "backend-down" and self.calls == 2:
            raise BackendError("judge endpoint http://127.0.0.1:9/v1: connection refused")
        if self.mode == "bug" and self.calls == 2:
            raise RuntimeError("a bug in the judge")
        verdicts = [self.decide(i, item) for i, item in enumerate(items)]
        if self.mode == "too-few":
            return verdicts[:-1]
        return verdicts

    def decide(self, i: int, item: JudgeItem) -> Verdict:
        if self.mode == "all-not-judged" or (self.mode == "some-not-judged" and i % 3 == 0):
            return Verdict(NOT_JUDGED, JUDGE_ERROR, 0.0, (), "the judge gave no usable answer")
        if self.mode == "unknown-label":
            return Verdict("probably", "supported", 0.5, (), "")
        return Verdict(FACTUAL, "supported", 0.9, (0,) if item.evidence else (), "passage 1")


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, hash_model: None) -> None:
    monkeypatch.setattr(judges, "_REGISTRY", dict(judges._REGISTRY))
    judges.register("scripted", lambda arg, options: ScriptedJudge(arg or "ok"))


GOOD = b'{"id": "a", "response": "Aristotle was Greek. Plato taught him."}\n'
GATE_CASES = {
    "an empty responses file": (b"", "ok", 2, "no responses to check"),
    "blank lines only": (b"\n  \n\t\n", "ok", 2, "no responses to check"),
    "every line unreadable": (b"{\n[1]\n\xff\n", "ok", 2, "none of the 3 input lines"),
    "some lines unreadable": (GOOD + b"{oops\n", "ok", 2, "1 of 2 input lines could not"),
    "some segments not judged": (GOOD * 3, "some-not-judged", 3,
                                 "2 of 6 segments (in 2 responses) could not be judged"),
    "no segment judged": (GOOD * 3, "all-not-judged", 3, "none of the 6 segments could be"),
    "the judge's backend down mid-run": (GOOD * 40, "backend-down", 3, "connection refused"),
    "the judge crashes (a bug) mid-run": (GOOD * 40, "bug", 3, "internal error"),
    "the judge returns too few verdicts": (GOOD, "too-few", 3, "returned 1 verdicts for 2"),
    "the judge returns an unknown label": (GOOD, "unknown-label", 3, "unknown label"),
}


@pytest.mark.parametrize("case", list(GATE_CASES))
def test_the_gate_never_passes_by_accident(
    run_cli: Any, scripted: None, hash_index: Path, tmp_path: Path, row: Row, case: str
) -> None:
    """Even with the most lenient thresholds, a run that cannot vouch for a result fails."""
    data, mode, status, words = GATE_CASES[case]
    responses = tmp_path / "r.jsonl"
    responses.write_bytes(data)
    out = tmp_path / "out.jsonl"
    result = run_cli("check", responses, "--index", hash_index, "--judge", f"scripted:{mode}",
                     "--out", out, "--quiet", "--max-nonfactual-rate", "1",
                     "--max-nonfactual-responses", str(10**6))
    assert result.exit_code == status, result.stderr
    assert words in result.stderr
    assert "gate: passed" not in result.stderr
    written = [json.loads(line) for line in out.read_bytes().splitlines()] if out.exists() else []
    for record in written:  # nothing that was not judged reads as factual
        for seg in record["segments"]:
            if seg["verdict"] == JUDGE_ERROR:
                assert seg["label"] == NOT_JUDGED
        if any(seg["label"] != FACTUAL for seg in record["segments"]):
            assert record["label"] != FACTUAL
    if mode == "backend-down":
        # What was checked before the failure is kept, and a resume finishes the job.
        assert len(written) == 16
        resumed = run_cli("check", responses, "--index", hash_index, "--judge", "scripted:ok",
                          "--out", out, "--quiet", "--resume")
        reference = tmp_path / "reference.jsonl"
        run_cli("check", responses, "--index", hash_index, "--judge", "scripted:ok",
                "--out", reference, "--quiet")
        assert resumed.exit_code == 0 and out.read_bytes() == reference.read_bytes()
    kept = f"; {len(written)} records kept" if mode in ("backend-down", "bug") else ""
    resumed_note = ", `--resume` then completes it byte-identically" if kept and \
        mode == "backend-down" else ""
    row(f"gate: {case} (thresholds at their most lenient)", 1,
        f"exit {status}, '{words}'{kept}{resumed_note}; nothing unjudged labelled factual")


# -- concurrency --------------------------------------------------------------------------


@pytest.mark.slow
def test_two_checks_at_once_against_one_index(
    ceg: list[str], hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """Two `ceg check` runs on one index at the same time both finish, each output exact."""
    responses = many_responses(tmp_path / "r.jsonl", 200)
    cmd = [*ceg, "check", str(responses), "--index", str(hash_index), "--quiet", "--out"]
    reference = tmp_path / "reference.jsonl"
    assert subprocess.run([*cmd, str(reference)], capture_output=True).returncode == 2
    pairs = max(1, KILLS // 4)
    for pair in range(pairs):
        outs = [tmp_path / f"out-{pair}-{i}.jsonl" for i in range(2)]
        procs = [subprocess.Popen([*cmd, str(o)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for o in outs]
        assert [p.wait(timeout=300) for p in procs] == [2, 2]
        for o in outs:
            assert o.read_bytes() == reference.read_bytes()
    row("two `ceg check` runs on one index at once", pairs,
        "both finish with the status of a lone run; both outputs byte-identical to it")


@pytest.mark.slow
def test_a_rebuild_under_a_running_check(
    ceg: list[str], hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """`ceg index build` replaces the index mid-check: the check keeps reading the old files."""
    index = tmp_path / "index"
    shutil.copytree(hash_index, index)
    responses = many_responses(tmp_path / "r.jsonl", 80)
    cmd = [*ceg, "check", str(responses), "--index", str(index), "--quiet", "--out"]
    reference = tmp_path / "reference.jsonl"
    assert subprocess.run([*cmd, str(reference)], capture_output=True).returncode == 2

    gate = tmp_path / "gate"
    gate.mkdir()
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "CEG_TEST_JUDGE_GATE": str(gate)}
    proc = subprocess.Popen([*cmd, str(out), "--judge", "gated"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (gate / "waiting").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        from conftest import HashEmbedder

        build_index([documents(tmp_path / "other.jsonl", 300, "X")], index, BuildOptions(),
                    embedder=HashEmbedder())
        (gate / "go").touch()
        assert proc.wait(timeout=120) == 2
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()
    assert out.read_bytes() == reference.read_bytes()
    with open_index(index) as rebuilt:
        assert rebuilt.size == 300
    row("`ceg index build` replacing the index a running `ceg check` reads", 1,
        "the check's output byte-identical to a run on the old index; the new index in place")


def test_opening_an_index_while_it_is_rebuilt_over_and_over(
    hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """Readers open the index while builds keep replacing it: every open is one whole index."""
    from conftest import HashEmbedder

    target = tmp_path / "index"
    corpora = [documents(tmp_path / f"{p}.jsonl", 40, p) for p in ("A", "B")]  # equal counts
    build_index([corpora[0]], target, BuildOptions(), embedder=HashEmbedder())
    stop = threading.Event()
    builds = [0]
    errors: list[BaseException] = []

    def rebuild() -> None:
        try:
            while not stop.is_set():
                build_index([corpora[builds[0] % 2]], target, BuildOptions(),
                            embedder=HashEmbedder())
                builds[0] += 1
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    worker = threading.Thread(target=rebuild)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the threads as finely as possible
    opens = mixed = 0
    rng = random.Random(RNG_SEED)
    worker.start()
    try:
        deadline = time.monotonic() + max(3.0, KILLS)
        while time.monotonic() < deadline:
            with open_index(target) as index:
                index.use_embedder(HashEmbedder())
                opens += 1
                source = Path(index.meta["sources"][0]["path"]).stem
                i = rng.randrange(index.size)
                chunk = index.chunks([i])[i]
                (hit,) = index.search([embed_text(chunk, index.meta["embed_text"])], 1)[0]
                mixed += hit.chunk_id != i or not chunk.doc_id.startswith(f"{source}-")
    finally:
        stop.set()
        worker.join()
        sys.setswitchinterval(switch)
    assert errors == []
    assert builds[0] >= 3 and mixed == 0  # swaps did happen while the reader opened
    row("opening an index while builds keep replacing it (threads)", opens,
        f"{opens} opens during {builds[0]} rebuilds: 0 errors, 0 mixing files of two builds")


def build_cmd(ceg: list[str], corpus: Path, target: Path, *extra: str) -> list[str]:
    return [*ceg, "index", "build", str(corpus), "-q", "--index", str(target), *extra]


@pytest.fixture
def old_index(hash_index: Path, tmp_path: Path) -> Path:
    """A copy of ``hash_index`` at ``tmp_path / "index"``, for builds to replace."""
    shutil.copytree(hash_index, tmp_path / "index")
    return tmp_path / "index"


@contextlib.contextmanager
def held_build(
    ceg: list[str], corpus: Path, target: Path, gate: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """A `ceg index build` process that holds the lock, waiting at its model until
    ``gate/go`` exists; killed on exit if it is still running."""
    gate.mkdir()
    env = {**os.environ, "CEG_TEST_EMBED_GATE": str(gate)}
    with open(gate / "stderr", "wb") as stderr:
        proc = subprocess.Popen(build_cmd(ceg, corpus, target), env=env,
                                stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + 120
            while not (gate / "waiting").exists():
                assert proc.poll() is None and time.monotonic() < deadline, (
                    (gate / "stderr").read_text())
                time.sleep(0.02)
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def test_a_second_build_of_one_index_fails_at_once_naming_the_lock(
    ceg: list[str], hash_index: Path, old_index: Path, tmp_path: Path, row: Row
) -> None:
    """Two real processes build one index: the second, plain or --append, stops at once."""
    target = old_index
    second_corpus = documents(tmp_path / "second.jsonl", 20, "S")
    corpus = documents(tmp_path / "first.jsonl", 30, "F")
    with held_build(ceg, corpus, target, tmp_path / "gate") as first:
        for extra in ([], ["--append"]):
            second = subprocess.run(build_cmd(ceg, second_corpus, target, *extra),
                                    capture_output=True, text=True, timeout=120)
            assert second.returncode == 3, second.stderr
            assert second.stderr.strip() == (
                f"error: another 'ceg index build' is writing the index at {target} (process "
                f"{first.pid}): it holds the lock {tmp_path / '.index.lock'}; run this build "
                "again when that one has finished (the lock goes when its process ends, even "
                "if it is killed)")
            assert index_state(target) == index_state(hash_index)
        (tmp_path / "gate" / "go").touch()
        assert first.wait(timeout=120) == 0
    with open_index(target) as index:
        assert index.size == 30  # the first build's index, untouched by the second
    assert leftovers(target) == []
    row("two `ceg index build` (or `--append`) of one index at once", 2,
        "the second exits 3 at once, naming the lock and the first build's process; the "
        "first finishes and its index is in place")


def test_a_killed_build_leaves_no_stale_lock(
    ceg: list[str], old_index: Path, tmp_path: Path, row: Row
) -> None:
    """SIGKILL the build that holds the lock: the next build takes it and succeeds."""
    target = old_index
    corpus = documents(tmp_path / "docs.jsonl", 30, "F")
    with held_build(ceg, corpus, target, tmp_path / "gate") as first:
        first.kill()
    assert (tmp_path / ".index.lock").exists()  # SIGKILL: no cleanup
    again = subprocess.run(build_cmd(ceg, corpus, target), capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    with open_index(target) as index:
        assert index.size == 30
    assert leftovers(target) == []
    assert not (tmp_path / ".index.lock").exists()  # and removes the file the killed one left
    row("a build SIGKILLed while holding the lock", 1,
        "no stale lock: the next build takes it at once, succeeds, and removes the file")


def test_a_build_that_fills_the_disk_at_its_index_file_keeps_its_shards_for_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row: Row
) -> None:
    """Days of embedding are not lost to a full disk: the shards stay, --resume finishes."""
    from conftest import HashEmbedder

    import ceg_cli.index.build.builder
    from ceg_cli.errors import DiskFullError

    corpus = documents(tmp_path / "docs.jsonl", 300, "B")
    target = tmp_path / "index"
    real_write = ceg_cli.index.build.builder.write_vectors

    def full(source: Any, path: Path, *args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(ceg_cli.index.build.builder, "write_vectors", full)
    warnings: list[str] = []
    options = BuildOptions(shard_passages=100)
    with pytest.raises(DiskFullError) as failed:
        build_index([corpus], target, options, embedder=HashEmbedder(),
                    on_warning=warnings.append)
    message = str(failed.value)
    assert message.startswith(f"disk full (No space left on device) while writing vectors.faiss "
                              f"of the new index for {target}: it needs about ")
    assert message.endswith("free some space and run the same command with --resume")
    assert any("committed passages" in w for w in warnings), warnings
    assert list((tmp_path / ".index.building" / "shards").glob("*.npy"))

    monkeypatch.setattr(ceg_cli.index.build.builder, "write_vectors", real_write)
    report = build_index([corpus], target, BuildOptions(shard_passages=100, resume=True),
                         embedder=HashEmbedder())
    assert report.resumed_chunks >= 300 - 100
    reference = tmp_path / "reference"
    build_index([corpus], reference, BuildOptions(shard_passages=100), embedder=HashEmbedder())
    assert index_state(target)[1:] == index_state(reference)[1:]
    row("`ceg index build` whose index file fills the disk after shards were committed", 1,
        "exit 3, the unfinished build kept; --resume finishes it without re-embedding them")
