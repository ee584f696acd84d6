"""What issue 60's probe found unclear or silent (items 9-11 and 13-16), each as a user
meets it: the engine and kind an ``--append`` keeps, refusals that name what to do, the
build's and search's lines, and what a failure leaves behind.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import MINI_WIKI

from ceg_cli.errors import InputError, UsageError
from ceg_cli.index.store import read_meta

builder = importlib.import_module("ceg_cli.index.build.builder")
static = importlib.import_module("ceg_cli.index.dense.static")
lt = importlib.import_module("ceg_cli.index.lexical.lexical_tantivy")
BuildOptions, build_index = builder.BuildOptions, builder.build_index

LEXICAL = BuildOptions(retrieval="lexical")


def _docs(folder: Path, name: str = "docs.jsonl", text: str | None = None) -> Path:
    path = folder / name
    path.write_text(text if text is not None else json.dumps(
        {"id": "z1", "title": "Zorblat", "text": "Zorblat is a moon of the planet Quenzor."})
        + "\n")
    return path


# -- item 9: --lexical-engine on --append -------------------------------------------


def test_append_keeps_a_tantivy_part_on_tantivy(tmp_path: Path) -> None:
    target = tmp_path / "index"
    build_index([MINI_WIKI], target, BuildOptions(retrieval="lexical",
                                                  lexical_engine="tantivy"))
    build_index([_docs(tmp_path)], target, BuildOptions(retrieval="lexical", append=True))
    meta = read_meta(target)
    assert meta["lexical"]["library"] == "tantivy"
    assert meta["sources"][-1]["path"].endswith("docs.jsonl")
    assert meta["lexical"]["passages"] == meta["counts"]["chunks"]


@pytest.mark.parametrize("engine", ["auto", "tantivy"])
def test_an_empty_appended_source_is_refused_as_a_fresh_build_refuses_it(
    tmp_path: Path, engine: str
) -> None:
    target = tmp_path / "index"
    build_index([MINI_WIKI], target, BuildOptions(retrieval="lexical",
                                                  lexical_engine="tantivy"))
    before = read_meta(target)
    empty = _docs(tmp_path, "empty.jsonl", "")
    with pytest.raises(InputError, match="empty.jsonl: no documents with text; nothing "
                       "written to"):
        build_index([empty], target, BuildOptions(retrieval="lexical", append=True,
                                                  lexical_engine=engine))
    assert read_meta(target) == before  # the index as it was: tantivy, same passages
    with pytest.raises(InputError, match="no documents with text"):
        build_index([empty], tmp_path / "fresh", LEXICAL)


def test_an_engine_asked_for_when_no_source_changed_is_applied_and_said(
    tmp_path: Path
) -> None:
    target = tmp_path / "index"
    build_index([MINI_WIKI], target, BuildOptions(retrieval="lexical",
                                                  lexical_engine="tantivy"))
    said: list[str] = []
    report = build_index([MINI_WIKI], target, BuildOptions(
        retrieval="lexical", append=True, lexical_engine="bm25s"), on_warning=said.append)
    assert report.unchanged == [str(MINI_WIKI)] and report.chunks == 0
    assert read_meta(target)["lexical"]["library"] == "bm25s"
    assert said == [f"--lexical-engine bm25s: no source changed; rebuilt the lexical part "
                    f"of {target} with bm25s (it was tantivy), nothing re-embedded"]
    from ceg_cli.index import open_index

    with open_index(target) as index:
        hits = index.search(["Alain Connes mathematician"], 1, "lexical")[0]
    assert hits[0].chunk.title == "Alain Connes"
    # The same engine again: nothing to do, nothing said.
    said.clear()
    build_index([MINI_WIKI], target, BuildOptions(
        retrieval="lexical", append=True, lexical_engine="bm25s"), on_warning=said.append)
    assert said == []


# -- item 13: around --retrieval lexical --------------------------------------------


def test_a_plain_append_to_a_lexical_index_keeps_its_kind(tmp_path: Path,
                                                        run_cli: Any) -> None:
    target = tmp_path / "index"
    build_index([MINI_WIKI], target, LEXICAL)
    done = run_cli("index", "build", _docs(tmp_path), "--append", "--index", target,
                   "--quiet")
    assert done.exit_code == 0, done.stderr
    meta = read_meta(target)
    assert meta["retrieval"] == "lexical" and "model" not in meta
    assert meta["sources"][-1]["path"].endswith("docs.jsonl")
    # Asked for explicitly, another kind is still refused in one line.
    asked = run_cli("index", "build", _docs(tmp_path, "more.jsonl"), "--append",
                    "--retrieval", "hybrid", "--index", target)
    assert asked.exit_code == 2
    assert asked.stderr.strip().splitlines() == [
        f"error: index at {target} was built with --retrieval lexical (no vectors); append "
        "to it with --retrieval lexical, or rebuild it without"]


@pytest.mark.parametrize(("options", "said"), [
    (BuildOptions(retrieval="lexical", device="cuda"), "--device cuda"),
    (BuildOptions(retrieval="lexical", device="cpu"), "--device cpu"),
    (BuildOptions(retrieval="lexical", batch_size=8), "--batch-size 8"),
])
def test_a_device_or_batch_for_no_model_is_refused_as_backend_is(
    tmp_path: Path, options: BuildOptions, said: str
) -> None:
    target = tmp_path / "index"
    with pytest.raises(UsageError) as caught:
        build_index([MINI_WIKI], target, options)
    assert str(caught.value) == (
        f"{said}: --retrieval lexical embeds nothing, so this option says nothing; leave "
        "it out, or build without --retrieval lexical")
    assert not target.exists()


def test_an_error_from_ceg_retrieval_names_the_variable(tmp_path: Path,
                                                        run_cli: Any) -> None:
    target = tmp_path / "index"
    build_index([MINI_WIKI], target, LEXICAL)
    from_env = run_cli("index", "search", "Alain Connes", "--index", target,
                       env={"CEG_RETRIEVAL": "dense"})
    assert from_env.exit_code == 2
    (line,) = from_env.stderr.strip().splitlines()
    assert line.startswith("error: --retrieval dense: index at ")
    assert line.endswith(" (from $CEG_RETRIEVAL)")
    typed = run_cli("index", "search", "Alain Connes", "--index", target, "--retrieval",
                    "dense")
    assert typed.exit_code == 2 and "$CEG_RETRIEVAL" not in typed.stderr


# -- item 15: what search, build and a stopped run say ------------------------------


def test_a_search_that_finds_nothing_says_so_and_exits_0(tmp_path: Path,
                                                        run_cli: Any) -> None:
    target = tmp_path / "index"
    build_index([MINI_WIKI], target, LEXICAL)
    for extra in ([], ["--json"]):
        done = run_cli("index", "search", "xylophonequartz", "--index", target, *extra)
        assert done.exit_code == 0, done.stderr
        assert done.stdout == ""  # stdout stays data: no hit, no line
        assert done.stderr.strip().splitlines() == [
            f"no passage of {target} matches 'xylophonequartz' (lexical search)"]


def test_one_document_is_said_in_the_singular(tmp_path: Path, run_cli: Any) -> None:
    done = run_cli("index", "build", _docs(tmp_path), "--retrieval", "lexical", "--index",
                   tmp_path / "index", "--quiet")
    assert done.exit_code == 0, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("indexed 1 document, 1 passage in ")
    assert line.endswith("now holds 1 document, 1 passage")


def test_a_stopped_run_says_what_it_checked_over_the_time_it_ran() -> None:
    from ceg_cli.progress import PlainProgress

    now = [0.0]
    lines: list[str] = []
    progress = PlainProgress(lines.append, interval=30, clock=lambda: now[0])
    progress.counter("checked", "responses")
    read = progress.counter("read", "lines")
    now[0] = 4.0
    read.update(2)
    now[0] = 600.0  # ten minutes in one batch, then SIGTERM
    progress.close(stopped=True)
    assert lines[-2:] == ["checked: 0 responses in 600.0 s (stopped)",
                          "read: 2 lines in 600.0 s (stopped)"]


def test_the_cli_progress_closes_as_stopped_on_an_interrupt(
    capsys: pytest.CaptureFixture[str]
) -> None:
    from ceg_cli.cli.progress import cli_progress

    with pytest.raises(KeyboardInterrupt), cli_progress(False) as progress:
        progress.counter("checked", "responses")
        raise KeyboardInterrupt
    assert capsys.readouterr().err.splitlines()[-1].endswith(" s (stopped)")
    with cli_progress(False) as progress:
        progress.counter("checked", "responses").update(1)
    assert "(stopped)" not in capsys.readouterr().err


def test_the_max_terms_line_says_it_applies_to_tantivy_at_any_size(tmp_path: Path) -> None:
    from ceg_cli.index import open_index

    target = tmp_path / "index"
    build_index([MINI_WIKI], target, LEXICAL)  # bm25s at this size
    with open_index(target) as index:
        said = index.set_lexical_max_terms(5)
    assert said is not None and said.endswith(
        "which searches every term (it applies to a tantivy lexical part, of any size)")
    assert "2,000,000" not in said


# -- item 11: --resume names the real difference ------------------------------------


@pytest.mark.parametrize("workers", [1, 2])
def test_resume_of_a_lexical_build_without_it_says_to_pass_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    from conftest import HashEmbedder

    BuildWork = importlib.import_module("ceg_cli.index.build.buildwork").BuildWork

    monkeypatch.setattr(builder, "EMBED_CALL_SIZE", 4)
    monkeypatch.setattr(builder, "SHARD_PASSAGES", 10)
    calls = {"n": 0}
    # One thread commits every 10 passages; reader processes after each range (a source
    # here): the stop comes after one commit either way.
    name, stop_at = ("commit", 3) if workers == 1 else ("commit_after_range", 2)
    real = getattr(BuildWork, name)

    def stop(self: BuildWork, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == stop_at:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(BuildWork, name, stop)
    target = tmp_path / "index"
    sources = [MINI_WIKI, _docs(tmp_path)]
    with pytest.raises(KeyboardInterrupt):
        build_index(sources, target, BuildOptions(retrieval="lexical", workers=workers))
    monkeypatch.setattr(BuildWork, name, real)
    with pytest.raises(UsageError) as caught:
        build_index(sources, target, BuildOptions(resume=True, workers=1),
                    embedder=HashEmbedder())
    message = str(caught.value)
    assert message.startswith("--resume: the unfinished build in ")
    assert ": that build was --retrieval lexical (no model), this run embeds with " in message
    assert ": pass --retrieval lexical; run the same command as that build" in message
    assert "--workers" not in message


# -- item 16: what a failure leaves open --------------------------------------------


def test_cascade_closes_its_judge_when_the_offline_one_fails_to_load(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    import ceg_cli.judges as judges
    from ceg_cli.errors import CegError

    offline = importlib.import_module("ceg_cli.judges.offline.offline")

    closed: list[str] = []

    class Held:
        name = "held"

        def judge(self, items: Any) -> Any:
            raise AssertionError("never called")

        def close(self) -> None:
            closed.append("held")

    def broken(arg: str, options: Any) -> Any:
        raise CegError("the offline judge's data cannot be read")

    monkeypatch.setitem(judges._REGISTRY, "held", lambda arg, options: Held())
    monkeypatch.setattr(offline, "create", broken)
    with pytest.raises(CegError, match="cannot be read"):
        judges.create_judge("cascade:held")
    assert closed == ["held"]


def test_a_failed_tantivy_build_releases_its_writer_for_a_retry_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3


    target = tmp_path / "index"
    build_index([MINI_WIKI], target, LEXICAL)
    real = lt.passage_terms
    calls = {"n": 0}

    def fail_on_second(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("stopped while writing the lexical part")
        return real(*args, **kwargs)

    monkeypatch.setattr(lt, "BATCH", 5)
    monkeypatch.setattr(lt, "passage_terms", fail_on_second)
    part = tmp_path / "part"
    part.mkdir()
    db = sqlite3.connect(target / "chunks.sqlite")
    try:
        with pytest.raises(RuntimeError, match="stopped while writing") as caught:
            lt.build(db, part, "title+text")
    finally:
        db.close()
    # The failure's traceback is still held (as a notebook or a caller's log holds it),
    # and a writer on the same part opens: the failed one let its lock go.
    assert caught.value.__traceback__ is not None
    index = lt.import_tantivy().Index.open(str(part / "lexical"))
    index.writer(heap_size=lt.HEAP_BYTES, num_threads=1).wait_merging_threads()


def test_tantivys_lock_refusal_is_one_line(tmp_path: Path) -> None:
    from ceg_cli.errors import BackendError

    (tmp_path / "lexical").mkdir()
    index = lt.import_tantivy().Index(lt.schema(), path=str(tmp_path / "lexical"))
    held = index.writer(heap_size=lt.HEAP_BYTES, num_threads=1)
    target = tmp_path / "index"
    build_index([MINI_WIKI], target, LEXICAL)
    import sqlite3

    db = sqlite3.connect(target / "chunks.sqlite")
    try:
        monkey = pytest.MonkeyPatch()
        monkey.setattr(lt, "_committed", lambda out, plan, db: (index, 0, -1))
        with pytest.raises(BackendError) as caught:
            lt.build(db, tmp_path, "title+text")
        monkey.undo()
    finally:
        db.close()
        held.wait_merging_threads()
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'lexical'}: tantivy cannot open its writer (")
    assert "\n" not in message and "LockBusy" in message


def test_append_replacing_a_middle_source_reads_only_kept_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept passages' vectors are read run by run, never across the replaced
    source's span (flat memory at millions of passages), and are the same vectors."""
    import numpy as np
    from conftest import HashEmbedder

    read_vectors = importlib.import_module("ceg_cli.index.dense.vectors").read_vectors

    def source(name: str, words: str, n: int) -> Path:
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"id": f"{name}{i}", "title": f"{name} {i}",
                                            "text": f"{words} number {i} of {name}."})
                                + "\n" for i in range(n)))
        return path

    a, b, c = (source("a", "Apples grow", 6), source("b", "Boats float", 5),
               source("c", "Cats purr", 6))
    target = tmp_path / "index"
    build_index([a, b, c], target, BuildOptions(), embedder=HashEmbedder())
    b.write_text(b.read_text().replace("Boats float", "Barges sink"))
    spans: list[int] = []
    real_read = builder.read_vectors

    def recording(path: Path) -> Any:
        index = real_read(path)

        class Recorded:
            def reconstruct_n(self, first: int, n: int) -> Any:
                spans.append(n)
                return index.reconstruct_n(first, n)

        return Recorded()

    monkeypatch.setattr(builder, "read_vectors", recording)
    build_index([b], target, BuildOptions(append=True), embedder=HashEmbedder())
    assert sum(spans) == 12 and max(spans) == 6  # a's 6 and c's 6, never b's 5 between
    fresh = tmp_path / "fresh"
    build_index([a, c, b], fresh, BuildOptions(), embedder=HashEmbedder())
    got, want = read_vectors(target / "vectors.faiss"), read_vectors(fresh / "vectors.faiss")
    assert np.array_equal(got.reconstruct_n(0, 17), want.reconstruct_n(0, 17))


# -- item 10: folders ceg cannot write, a damaged static cache ----------------------


def test_a_read_only_index_folder_is_one_line_naming_it(
    tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a read-only folder (a mount, another user's) gives every write: EACCES or
    EROFS, named; simulated, since the tests run as root, whom permissions do not stop."""
    import errno

    target = tmp_path / "ro" / "index"
    lock = target.parent / ".index.lock"

    def refused(path: Path) -> Any:
        raise OSError(errno.EROFS, "Read-only file system", str(lock))

    import ceg_cli.index.indexdir as indexdir

    monkeypatch.setattr(indexdir, "build_lock", refused)
    done = run_cli("index", "build", _docs(tmp_path), "--retrieval", "lexical", "--index",
                   target)
    assert done.exit_code == 2
    assert done.stderr.strip().splitlines() == [
        f"error: cannot write {lock} (Read-only file system): ceg writes there; point it at "
        "a folder you can write (--index, --out, CEG_CACHE_DIR) or make this one writable"]


@pytest.fixture
def tiny_static(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """static-minilm made from a tiny stand-in of the default model, in a fresh cache."""
    from test_static_embed import _tiny_sentence_transformer


    source = _tiny_sentence_transformer(tmp_path / "st")
    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(static, "default_source", lambda: source)
    real = static.distill
    monkeypatch.setattr(static, "distill",
                        lambda src, target, **kw: real(src, target, dimension=6))
    return source


@pytest.mark.parametrize("damage", ["truncated", "not json", "no file"])
def test_a_damaged_static_cache_entry_is_made_again(tiny_static: Path, damage: str) -> None:

    model = static.static_model_path()
    good = static.StaticEmbedder().embed(["Plato taught Aristotle."])
    if damage == "truncated":
        weights = model / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:100])
    elif damage == "not json":
        (model / "tokenizer.json").write_text("<html>proxy error</html>")
    else:
        (model / "config.json").unlink()
    again = static.StaticEmbedder().embed(["Plato taught Aristotle."])
    assert (again == good).all()
    assert (model / "config.json").exists() and (model / "model.safetensors").stat().st_size > 100


def test_a_damaged_static_model_not_in_the_cache_is_one_line(tmp_path: Path) -> None:

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"\x00" * 10)
    with pytest.raises(UsageError, match=r"mine: not a readable static model \("):
        static.StaticEmbedder(folder)
    assert (folder / "model.safetensors").exists()  # not ceg's: left alone


def test_a_read_only_cache_folder_says_which_and_what_to_do(
    tiny_static: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno


    def refused(src: Path, target: Path, **kw: Any) -> Path:
        raise OSError(errno.EACCES, "Permission denied", str(target))

    monkeypatch.setattr(static, "distill", refused)
    with pytest.raises(UsageError) as caught:
        static.static_model_path()
    message = str(caught.value)
    assert message.startswith(f"cache folder {tmp_path / 'cache' / 'static'}: cannot write ")
    assert message.endswith("(Permission denied); static-minilm is made there once, on first "
                            "use: set CEG_CACHE_DIR to a folder you can write")


# -- item 14: static-minilm's first use, a killed one, the cache commands -----------


def _dead_pid() -> int:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_first_use_distillation_shows_progress(
    tiny_static: Path, capsys: pytest.CaptureFixture[str]
) -> None:

    static.static_model_path()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("distilling static-minilm from st (first use, once): "
                               "started (")
    assert lines[-1].startswith("distilling static-minilm from st (first use, once): ")
    assert " tokens in " in lines[-1]
    static.static_model_path()  # made: nothing to say
    assert capsys.readouterr().err == ""


def test_a_killed_distillations_folder_is_removed_only_when_provably_ceg_s(
    tiny_static: Path, tmp_path: Path
) -> None:
    from ceg_cli.cachedir import write_entry_marker

    model = static.static_model_path()
    entry = model.parent
    dead, other, third = _dead_pid(), _dead_pid(), _dead_pid()
    killed = entry / f".model.{dead}.tmp"
    killed.mkdir()
    (killed / static.STATIC_TMP).write_text(f"{dead}\n")
    (killed / "model.safetensors").write_bytes(b"\0" * 1000)
    unmarked = entry / f".model.{other}.tmp"  # no marker: not provably ceg's
    unmarked.mkdir()
    (unmarked / "model.safetensors").write_bytes(b"\0" * 10)
    alive = entry / f".model.{os.getppid()}.tmp"  # a live process's
    alive.mkdir()
    (alive / static.STATIC_TMP).write_text(f"{os.getppid()}\n")
    foreign = entry / f".model.{third}.tmp"  # marked, but holding a user's file
    foreign.mkdir()
    (foreign / static.STATIC_TMP).write_text(f"{third}\n")
    (foreign / "notes.txt").write_text("mine")
    write_entry_marker(entry, static.STATIC_KIND)
    static.static_model_path()
    assert not killed.exists()
    assert unmarked.exists() and alive.exists() and (foreign / "notes.txt").exists()


def test_cache_info_and_prune_count_static_models(
    tiny_static: Path, tmp_path: Path, run_cli: Any
) -> None:

    entry = static.static_model_path().parent
    cache = tmp_path / "cache"
    shown = run_cli("cache", "info", "--json", "--cache-dir", cache)
    kinds = {k["kind"]: k for k in json.loads(shown.stdout)["kinds"]}
    assert kinds["static models"]["entries"] == 1 and kinds["static models"]["bytes"] > 0
    old = 1_000_000_000.0
    os.utime(entry, (old, old))
    for path in entry.rglob("*"):
        os.utime(path, (old, old))
    done = run_cli("cache", "prune", "--older-than", "30", "--cache-dir", cache)
    assert done.exit_code == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert f"removed {entry}" in said
    assert "0 ONNX model exports and 1 static models older than 30 days" in said
    assert not entry.exists()
