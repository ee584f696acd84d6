"""The cached corpus index of ``ceg eval`` under two real processes at once.

Two runs of one dataset used to race: each rewrote the corpus file in place
while the other's reader thread could be in the middle of it, so one run could
save an index missing documents under a digest that says it is whole, and every
later run reused it. The processes here are real and so is the file; the fake
model only slows the first run down at chosen points, so that the second run's
rewrite lands while the first is still reading, every time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ceg_cli.eval.corpus import corpus_cache_dir, corpus_lock_path, ensure_corpus_index
from ceg_cli.eval.datasets import load_dataset
from ceg_cli.index import open_index, read_meta
from ceg_cli.index.indexdir import source_digest

TESTS = Path(__file__).parent
ROOT = TESTS.parent

#: More passages than the builder's reader runs ahead of the model (a queue of
#: 4 batches of 1,024), so the first run is still reading when the second writes.
ROWS = 10_000

RUN = r"""
import json, sys, time
from pathlib import Path
from conftest import HashEmbedder
from ceg_cli.eval.datasets import load_dataset
from ceg_cli.eval.corpus import ensure_corpus_index

role, data, flags = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])

def wait_for(seconds, *names):
    deadline = time.monotonic() + seconds
    while not any((flags / n).exists() for n in names) and time.monotonic() < deadline:
        time.sleep(0.01)

class FirstRunModel(HashEmbedder):
    # Run A's model: once reading has begun, let B start writing, go on while B
    # writes (A's reader reads on), then hold on until B is done or says it
    # waits for A, so that A saves its index last.
    calls = 0
    def embed(self, texts):
        self.calls += 1
        if self.calls == 1:
            (flags / "a-reading").touch()
            wait_for(30, "b-writing")
            time.sleep(0.3)
        elif self.calls == 2:
            wait_for(30, "b-done", "b-waits")
        return super().embed(texts)

def slowly(documents):
    # Run B writes its corpus slowly, as on a busy disk: the window in which the
    # file is shorter than what A has already read is about a second wide.
    for i, doc in enumerate(documents):
        if i % 500 == 0:
            time.sleep(0.05)
        yield doc

dataset = load_dataset(data)
if role == "a":
    path, built = ensure_corpus_index(dataset, embedder=FirstRunModel())
else:
    wait_for(60, "a-reading")
    (flags / "b-writing").touch()
    dataset.documents = slowly(dataset.documents)
    path, built = ensure_corpus_index(
        dataset, embedder=HashEmbedder(), on_warning=lambda m: (flags / "b-waits").touch()
    )
    (flags / "b-done").touch()
print(json.dumps({"built": built}))
"""


def write_halueval(path: Path, rows: int) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for n in range(rows):
            row = {
                "knowledge": f"Passage {n} says that river {n} flows into lake {n * 7 % 991} "
                f"after {n % 40 + 3} kilometres through the valley of town {n * 13 % 877}.",
                "question": f"Where does river {n} flow?",
                "right_answer": f"Into lake {n * 7 % 991}.",
                "hallucinated_answer": f"Into the sea near town {n}.",
            }
            fh.write(json.dumps(row) + "\n")
    return path


def test_two_runs_of_one_dataset_at_once_save_a_whole_index(tmp_path: Path) -> None:
    data = write_halueval(tmp_path / "qa.jsonl", ROWS)
    flags = tmp_path / "flags"
    flags.mkdir()
    env = {
        **os.environ,
        "CEG_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
    }
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", RUN, role, str(data), str(flags)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in ("a", "b")
    ]
    outputs = [run.communicate(timeout=180) for run in runs]
    for run, (_out, err) in zip(runs, outputs):
        assert run.returncode == 0, err
    built = [json.loads(out.strip().splitlines()[-1])["built"] for out, _ in outputs]

    dataset = load_dataset(data)
    index_dir = corpus_cache_dir(dataset, tmp_path / "cache") / "index"
    corpus = index_dir.parent / "index.corpus.jsonl"
    meta = read_meta(index_dir)
    # The index holds every document, and the digest it records is the corpus file's.
    assert meta["counts"]["documents"] == ROWS
    assert [s["digest"] for s in meta["sources"]] == [source_digest(corpus)]
    with open_index(index_dir) as idx:
        assert idx.size == ROWS
        ids = {c.doc_id for c in idx.chunks(range(idx.size)).values()}
    assert ids == {str(n) for n in range(ROWS)}
    # The second run waited for the first and reused its index.
    assert built == [True, False]
    assert not list(index_dir.parent.glob(".*.tmp"))


ONE_ROW = {
    "knowledge": "Mount Kenya is in Kenya.",
    "question": "Where is Mount Kenya?",
    "right_answer": "Kenya",
    "hallucinated_answer": "Peru",
}


def test_dropped_corpus_lines_are_reported(tmp_path: Path, hash_embedder: object) -> None:
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps(ONE_ROW) + "\n", encoding="utf-8")
    dataset = load_dataset(data)
    # A document the index reader drops (text only spaces): the caller hears of it.
    dataset.documents.append({"id": "9", "title": "9", "text": "  "})
    heard: list[str] = []
    ensure_corpus_index(dataset, tmp_path / "idx", embedder=hash_embedder, on_warning=heard.append)
    assert any("idx.corpus.jsonl:2: field 'text' is empty; line skipped" in m for m in heard)
    # Without a callback the same news arrives as a Python warning.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ensure_corpus_index(dataset, tmp_path / "idx2", embedder=hash_embedder)
    assert any("line skipped" in str(w.message) for w in caught)


def test_the_lock_sits_beside_the_index_and_is_released(
    tmp_path: Path, hash_embedder: object
) -> None:
    from filelock import FileLock

    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps(ONE_ROW) + "\n", encoding="utf-8")
    path, built = ensure_corpus_index(load_dataset(data), tmp_path / "idx", embedder=hash_embedder)
    assert built and corpus_lock_path(path) == tmp_path / "idx.corpus.lock"
    lock = FileLock(str(corpus_lock_path(path)))
    lock.acquire(timeout=0)  # free again: the build released it
    lock.release()


@pytest.fixture(autouse=True)
def _no_stray_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))


HOLD_THEN_PRUNE = r"""
import shutil, sys
from pathlib import Path
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
shutil.rmtree(Path(sys.argv[1]).parent)  # what `ceg cache prune` does, lock file and all
lock.release()
"""


def test_a_run_waiting_while_its_folder_is_pruned_takes_a_fresh_lock(tmp_path: Path) -> None:
    import threading

    from ceg_cli.eval.corpus import hold_corpus_lock

    index_dir = tmp_path / "eval" / "key" / "index"
    index_dir.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THEN_PRUNE, str(corpus_lock_path(index_dir))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    seen: list[object] = []
    waiting = threading.Event()

    def wait_then_hold() -> None:
        try:
            with hold_corpus_lock(index_dir, on_wait=lambda _m: waiting.set()) as held:
                seen.append((held, corpus_lock_path(index_dir).exists()))
        except BaseException as exc:  # handed to the test thread
            seen.append(exc)

    waiter = threading.Thread(target=wait_then_hold)
    waiter.start()
    assert waiting.wait(timeout=30)  # the run is waiting for the lock now
    holder.communicate("\n", timeout=30)
    waiter.join(timeout=30)
    assert seen == [(True, True)]
