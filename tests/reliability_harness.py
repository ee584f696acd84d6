"""The reliability tests' harness: ceg in a killable subprocess, kill loops, index states.

``ceg_command(dir)`` writes a wrapper script that runs the real CLI with the
fake model (``HashEmbedder``) for every model name, plus fault hooks chosen by
environment variables: ``CEG_TEST_KILL_AT`` SIGKILLs an index build at one
step of its swap, ``CEG_TEST_EMBED_GATE`` makes the model wait at each batch
until ``GATE/go`` exists (a build held mid-way), ``CEG_TEST_JUDGE_GATE``
registers a ``gated`` judge (the offline judge, pausing at its second batch
until ``GATE/go`` exists), ``CEG_TEST_SHARD`` sets the passages per committed
shard of a build (a quarter of it per embedding call), ``CEG_TEST_RANGE_BYTES`` the
size of a ranged build's ranges (``corpus.ranges.RANGE_BYTES``).
``kill_and_resume`` is the random-kill loop of ``ceg check``.

``CEG_RELIABILITY_KILLS`` sets the killed runs per command (default 3, as in
CI; ``benchmarks/check/reliability.py`` runs 50).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ceg_cli.index import embed_text, open_index
from ceg_cli.index.build.builder import BuildOptions, build_index

TESTS = Path(__file__).resolve().parent
#: Killed runs per command.
KILLS = int(os.environ.get("CEG_RELIABILITY_KILLS", "3"))
RNG_SEED = 20240216

WRAPPER = '''\
"""ceg with the fake model for every model name, and fault hooks, for the reliability tests."""
import os, signal, sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
import ceg_cli.index.build.builder, ceg_cli.index, ceg_cli.index.indexdir
from conftest import HashEmbedder

embed_gate = os.environ.get("CEG_TEST_EMBED_GATE")

class GatedEmbedder(HashEmbedder):
    """The fake model, waiting at its first batch until GATE/go exists."""
    def embed(self, texts):
        Path(embed_gate, "waiting").touch()
        while not Path(embed_gate, "go").exists():
            time.sleep(0.02)
        return super().embed(texts)

def load(name=None, **kwargs):
    return GatedEmbedder() if embed_gate else HashEmbedder()

ceg_cli.index.store.load_embedder = load
ceg_cli.index.build.builder.load_embedder = load

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

def then_die(module, name):
    real = getattr(module, name)
    def call(*args, **kwargs):
        real(*args, **kwargs)
        die()
    setattr(module, name, call)

range_bytes = os.environ.get("CEG_TEST_RANGE_BYTES")
if range_bytes:  # small ranges, so that a short --workers build has work for every reader
    import ceg_cli.corpus.ranges
    ceg_cli.corpus.ranges.RANGE_BYTES = int(range_bytes)

shard = os.environ.get("CEG_TEST_SHARD")
if shard:  # small shards and embedding calls, so that a short build commits many shards
    ceg_cli.index.build.builder.SHARD_PASSAGES = int(shard)
    ceg_cli.index.build.builder.EMBED_CALL_SIZE = max(1, int(shard) // 4)

kill_at = os.environ.get("CEG_TEST_KILL_AT", "")
if kill_at == "before-swap":
    ceg_cli.index.indexdir.swap_into_place = die
elif kill_at == "after-fsync":
    then_die(ceg_cli.index.indexdir, "fsync_tree")
elif kill_at == "after-exchange":
    then_die(ceg_cli.index.indexdir, "_exchange")
elif kill_at == "between-renames":
    ceg_cli.index.indexdir._exchange = lambda a, b: False  # as where renameat2 is missing
    real_rename = os.rename
    def rename(a, b):
        real_rename(a, b)
        if ".old-" in str(b):
            die()
    os.rename = rename

gate = os.environ.get("CEG_TEST_JUDGE_GATE")
if gate:
    from ceg_cli.judges import register
    from ceg_cli.judges.offline.offline import create

    class Gated:
        """The offline judge, waiting at its second batch until GATE/go exists."""
        def __init__(self, inner):
            self.inner, self.name, self.method, self.calls = inner, inner.name, inner.method, 0
            self.cuts = inner.cuts  # records name the offline judge's cut, as its own run's
        def judge(self, items):
            self.calls += 1
            if self.calls == 2:
                Path(gate, "waiting").touch()
                while not Path(gate, "go").exists():
                    time.sleep(0.02)
            return self.inner.judge(items)

    register("gated", lambda arg, options: Gated(create("", options)))

from ceg_cli.cli.main import run
if __name__ == "__main__":  # not in a reader process, which runs this file to start
    run(sys.argv[1:])
'''


def ceg_command(directory: Path) -> list[str]:
    """Write the wrapper script into ``directory``; the command that runs ``ceg`` with it."""
    script = directory / "ceg_fake_model.py"
    script.write_text(WRAPPER.format(tests=str(TESTS)), encoding="utf-8")
    return [sys.executable, str(script)]


@dataclass
class Killed:
    at: float
    finished_first: bool
    returncode: int


def run_and_kill(cmd: Sequence[str], at: float, env: dict[str, str] | None = None) -> Killed:
    """Run ``cmd`` and SIGKILL it ``at`` seconds after the start (unless it ended first)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        proc.wait(timeout=at)
        return Killed(at, True, proc.returncode)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)  # no handler, no cleanup: like a crash or the OOM killer
        proc.wait()
        return Killed(at, False, proc.returncode)


def timeline(cmd: Sequence[str], out: Path,
             env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """Run ``cmd`` to the end: (seconds to the first byte of ``out``, seconds in all, status)."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    first = None
    while proc.poll() is None:
        if first is None and out.exists() and out.stat().st_size:
            first = time.monotonic() - started
        time.sleep(0.005)
    total = time.monotonic() - started
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    assert proc.returncode in (0, 1, 2), err
    return (first if first is not None else total), total, proc.returncode


def kill_moments(n: int, low: float, high: float, rng: random.Random) -> list[float]:
    """``n`` moments in [low, high], one uniformly at random in each of n equal slices."""
    width = (high - low) / n
    moments = [low + width * (i + rng.random()) for i in range(n)]
    rng.shuffle(moments)
    return moments


def spread(values: Sequence[int]) -> str:
    ordered = sorted(values)
    return f"{ordered[0]}/{ordered[len(ordered) // 2]}/{ordered[-1]}"


# -- ceg check, killed at random and resumed ---------------------------------------

SUBJECTS = ["Aristotle", "Plato", "Alain Connes", "Actrius", "The book Animalia"]
FACTS = ["was born in 384 BC", "taught Alexander the Great", "is a French mathematician",
         "is a 1996 Catalan film", "won the Fields Medal in 1982", "never lived in Athens",
         "wrote about ethics, politics and biology"]


def many_responses(path: Path, n: int) -> Path:
    """``n`` lines: responses of one to four claims, some bad lines, some repeated ids."""
    rng = random.Random(7)
    lines = []
    for i in range(n):
        if i % 53 == 17:
            lines.append('{"id": "cut", "response": "Aristotle was')
            continue
        claims = " ".join(f"{rng.choice(SUBJECTS)} {rng.choice(FACTS)}."
                          for _ in range(rng.randint(1, 4)))
        rid = f"r{i}" if i % 41 else "repeated"
        lines.append(json.dumps({"id": rid, "question": f"Question {i}?", "response": claims}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass
class KillStats:
    runs: int = 0
    kill_points: int = 0
    finished_first: int = 0
    torn: int = 0
    lost: int = 0
    duplicated: int = 0
    on_disk: list[int] = field(default_factory=list)

    def outcome(self, total: int) -> str:
        return (
            f"{self.runs} runs, {self.kill_points - self.runs} resumes killed too; output "
            f"byte-identical every time; records on disk at the kill min/median/max "
            f"{spread(self.on_disk)} of {total}, {self.torn} torn last lines, "
            f"{self.finished_first} kills after the end; {self.lost} lost, "
            f"{self.duplicated} duplicated"
        )


def no_env(run: str) -> dict[str, str] | None:
    return None


def kill_and_resume(cmd: list[str], tmp_path: Path,
                    env_for: Callable[[str], dict[str, str] | None] = no_env,
                    kills: int = KILLS) -> tuple[KillStats, int]:
    """Kill ``cmd --out FILE`` at random moments and resume it; returns stats and line count.

    Every other time the resumed run is killed too. After the last resume the
    output must equal an uninterrupted run's, byte for byte. ``env_for`` gives
    the environment of the reference run ("reference") and of each trial's
    runs ("trial-N").
    """
    reference_path = tmp_path / "reference.jsonl"
    first, total, status = timeline([*cmd, str(reference_path)], reference_path,
                                    env_for("reference"))
    reference = reference_path.read_bytes()
    reference_lines = [json.loads(line)["line"] for line in reference.splitlines()]
    rng = random.Random(RNG_SEED)
    stats = KillStats()
    # Kill from halfway through start-up to the end of the writing.
    for trial, at in enumerate(kill_moments(kills, first / 2, total, rng)):
        out = tmp_path / f"out-{trial}.jsonl"
        env = env_for(f"trial-{trial}")
        killed = [run_and_kill([*cmd, str(out)], at, env)]
        if trial % 2:
            killed.append(run_and_kill([*cmd, str(out), "--resume"],
                                       rng.uniform(first / 2, total), env))
        stats.runs += 1
        stats.kill_points += len(killed)
        stats.finished_first += sum(k.finished_first for k in killed)
        data = out.read_bytes() if out.exists() else b""
        stats.on_disk.append(data.count(b"\n"))
        stats.torn += bool(data) and not data.endswith(b"\n")
        final = subprocess.run([*cmd, str(out), "--resume"], capture_output=True, env=env)
        assert final.returncode == status, final.stderr.decode(errors="replace")
        got = [json.loads(line)["line"] for line in out.read_bytes().splitlines()]
        stats.lost += len(set(reference_lines) - set(got))
        stats.duplicated += len(got) - len(set(got))
        assert out.read_bytes() == reference, f"trial {trial}: killed at {at:.2f} s"
        out.unlink()
    assert stats.lost == stats.duplicated == 0
    return stats, len(reference_lines)

def documents(path: Path, n: int, prefix: str) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({
                "id": f"{prefix}-{i}", "title": f"{prefix} topic {i}",
                "text": f"{prefix} topic {i} was first described in {1000 + i % 900}. "
                        f"Scholars still study {prefix} topic {i} today.",
            }) + "\n")
    return path


def index_state(path: Path) -> tuple[Any, ...]:
    """What an index holds, times left out; asserts it opens and answers consistently."""
    import sqlite3

    from conftest import HashEmbedder

    meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    for key in ("created_at", "updated_at"):
        meta.pop(key)
    for key in ("search_ms", "latency_queries", "convert_seconds"):  # measured at each build
        meta["faiss"].pop(key, None)
    with open_index(path) as index:
        index.use_embedder(HashEmbedder())
        assert index.size == meta["counts"]["chunks"]
        # A passage's own text must find that passage: vectors and store agree.
        for i in sorted({0, index.size // 2, index.size - 1}):
            chunk = index.chunks([i])[i]
            (hit,) = index.search([embed_text(chunk, meta["embed_text"])], 1)[0]
            assert hit.chunk_id == i and hit.score > 0.999
    db = sqlite3.connect(f"file:{path / 'chunks.sqlite'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT * FROM chunks ORDER BY id").fetchall()
    finally:
        db.close()
    return json.dumps(meta, sort_keys=True), rows, (path / "vectors.faiss").read_bytes()


def leftovers(target: Path) -> list[str]:
    """What a build left beside the index: its lock file included, which goes when the
    build ends (only a SIGKILLed build leaves it, and the next build removes it)."""
    return sorted(p.name for p in target.parent.iterdir()
                  if p.name.startswith(f".{target.name}."))


def clean_up_with_a_build(target: Path, tmp_path: Path) -> None:
    """The next build succeeds and removes what a killed one left behind."""
    from conftest import HashEmbedder

    tiny = documents(tmp_path / "tiny.jsonl", 2, "T")
    build_index([tiny], target, BuildOptions(), embedder=HashEmbedder())
    assert leftovers(target) == []
