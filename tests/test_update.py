"""``ceg index build SOURCES --update``: an index follows its documents (issue 56).

An update must leave the index a fresh build of the same sources would make: the
same passages, the same top-k by every method on a flat index, the same BM25
scores; it re-embeds only changed and new documents, and a kill at any of its
moments leaves the old index or the new one. ``HashEmbedder`` gives every text
its own fixed vector, so the comparisons with a fresh build are exact.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import HashEmbedder

import ceg_cli.index.build.update as update_module
from ceg_cli.errors import IndexBusyError, UsageError
from ceg_cli.index import open_index
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.generation import is_generation_name
from ceg_cli.index.indexdir import build_lock

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
         "zulu river mountain lake forest desert island valley canyon glacier meadow").split()
QUERIES = ["alpha river", "glacier tango meadow", "zulu", "desert island kilo", "mike oscar"]
OPTIONS = BuildOptions(chunk_words=12)


def _text(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(1, 6)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 9))]
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def _embedder() -> HashEmbedder:
    return HashEmbedder(dimension=16)


def _build(sources: list[Path], target: Path, **kw: Any) -> Any:
    options = BuildOptions(**{**OPTIONS.__dict__, **kw})
    return build_index(sources, target, options, embedder=_embedder())


def _update(sources: list[Path], target: Path, **kw: Any) -> Any:
    return _build(sources, target, update=True, **kw)


def _canonical(keys: list[Any], passages: list[Any]) -> tuple[Any, ...]:
    """A top-k as its scores in order and, for each run of equal scores but the last
    (which the k-th place may cut), its passages as a set.

    Equal scores are ordered by passage id, and an update numbers passages otherwise
    than a fresh build: which of two tied passages comes first is the one thing
    the two may differ in (docs/index-format.md, "Updates").
    """
    groups: list[tuple[Any, list[Any]]] = []
    for key, passage in zip(keys, passages):
        if groups and groups[-1][0] == key:
            groups[-1][1].append(passage)
        else:
            groups.append((key, [passage]))
    return tuple(keys), tuple(tuple(sorted(g)) for _, g in groups[:-1])


def state(target: Path) -> dict[str, Any]:
    """What a user can see of an index: its passages, its rankings, its BM25 scores."""
    with open_index(target) as index:
        out: dict[str, Any] = {
            "passages": sorted((c.source, c.doc_id, c.ordinal, c.title, c.start, c.end, c.text)
                               for c in index.iter_chunks()),
            "size": index.size,
            "counts": index.meta["counts"],
            "languages": index.meta["languages"],
            "per_source": sorted((s["path"], s["documents"], s["chunks"])
                                 for s in index.meta["sources"]),
        }
        methods = ["lexical"] if index.lexical_only else ["dense", "lexical", "hybrid"]
        if not index.lexical_only:
            index.use_embedder(_embedder())
        bm25 = [_bm25(index, q) for q in QUERIES] if index.has_lexical else None
        for method in methods:
            rankings = []
            # Hybrid fuses each method's top 50: a tie at the 50th place is broken by
            # passage id (bm25s) or segment order (tantivy), which decides the union that
            # the scores are normalised over. Searched to the full depth, no place is cut.
            k = index.size if method == "hybrid" else 5
            for n, row in enumerate(index.search(QUERIES, k, method)):
                row = row[:5]
                passages = [(h.chunk.doc_id, h.chunk.ordinal, h.chunk.text) for h in row]
                lex = [bm25[n].get(h.chunk_id, 0.0) for h in row] if bm25 is not None else []
                cosines = [h.score for h in row]
                keys: list[Any] = (cosines if method == "dense" else lex if method == "lexical"
                                   else list(zip(cosines, lex)))
                rankings.append(_canonical(keys, passages))
            out[method] = rankings
        if bm25 is not None:
            out["bm25"] = []
            for scores in bm25:
                chunks = index.chunks(scores)
                out["bm25"].append(sorted((chunks[i].doc_id, chunks[i].ordinal, score)
                                          for i, score in scores.items()))
    return out


def _bm25(index: Any, query: str) -> dict[int, float]:
    """Every passage's BM25 score for ``query`` (those above 0), by passage id."""
    lexical = index.lexical()
    if hasattr(lexical, "ranked"):  # tantivy: its whole ranking
        ((top, scores),) = lexical.ranked([query], index.size)
        return {i: float(scores[i]) for i in top}
    array = lexical.scores(query)
    return {int(i): float(array[i]) for i in range(len(array)) if array[i] > 0}


def _folder(path: Path, docs: dict[str, str]) -> Path:
    """Make the folder hold exactly ``docs`` (name -> text)."""
    path.mkdir(parents=True, exist_ok=True)
    for old in path.iterdir():
        if old.name not in docs:
            old.unlink()
    for name, text in docs.items():
        file = path / name
        if not file.exists() or file.read_text() != text:
            file.write_text(text)
    return path


def _corpus(rng: random.Random, n: int) -> dict[str, str]:
    return {f"doc{i:03d}.txt": _text(rng) for i in range(n)}


def _fresh(sources: list[Path], tmp: Path, name: str = "fresh", **kw: Any) -> dict[str, Any]:
    target = tmp / name
    shutil.rmtree(target, ignore_errors=True)
    _build(sources, target, **kw)
    try:
        return state(target)
    finally:
        shutil.rmtree(target)


# ------------------------------------------------------------------ what an update does


def test_an_update_says_what_it_did_and_equals_a_fresh_build(tmp_path: Path) -> None:
    rng = random.Random(1)
    docs = _corpus(rng, 8)
    folder = _folder(tmp_path / "docs", docs)
    _build([folder], tmp_path / "idx")
    docs["doc001.txt"] = _text(rng)  # changed
    del docs["doc002.txt"]  # removed
    docs["new.txt"] = "Zulu glacier meadow. A new document."  # added
    _folder(folder, docs)
    report = _update([folder], tmp_path / "idx")
    u = report.update
    assert (u["added"], u["changed"], u["removed"], u["unchanged"]) == (1, 1, 1, 6)
    assert u["passages_embedded"] == report.chunks > 0
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert meta["last_update"]["changed"] == 1 and meta["format_version"] == 3
    assert meta["counts"] == {"documents": 8, "chunks": state(tmp_path / "idx")["size"]}
    assert meta["sources"][0]["documents"] == 8
    assert state(tmp_path / "idx") == _fresh([folder], tmp_path)


def test_unchanged_documents_are_not_embedded_again(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(2)
    docs = _corpus(rng, 10)
    folder = _folder(tmp_path / "docs", docs)
    _build([folder], tmp_path / "idx")
    embedded: list[str] = []
    real = HashEmbedder.embed

    def spy(self: HashEmbedder, texts: Any) -> Any:
        embedded.extend(texts)
        return real(self, texts)

    monkeypatch.setattr(HashEmbedder, "embed", spy)
    for said in ("Only this one changed", "Changed again"):
        # The second: the record is there, nothing is chunked again.
        docs["doc004.txt"] = f"{said}. Kilo lima mike."
        _folder(folder, docs)
        report = _update([folder], tmp_path / "idx")
        assert report.update["changed"] == 1 and report.update["unchanged"] == 9
        assert embedded and all(said in t for t in embedded)
        embedded.clear()


def test_nothing_changed_writes_nothing(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "docs", _corpus(random.Random(3), 4))
    _build([folder], tmp_path / "idx")
    before = (tmp_path / "idx" / "meta.json").read_bytes()
    report = _update([folder], tmp_path / "idx")
    assert report.update["unchanged"] == 4 and report.update["passages_embedded"] == 0
    assert (tmp_path / "idx" / "meta.json").read_bytes() == before
    assert not [p for p in (tmp_path / "idx").iterdir() if is_generation_name(p.name)]


def test_update_of_a_missing_index_builds_it(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "docs", _corpus(random.Random(4), 3))
    _update([folder], tmp_path / "idx")
    assert state(tmp_path / "idx") == _fresh([folder], tmp_path)


def test_jsonl_ids_repeated_and_missing(tmp_path: Path) -> None:
    rng = random.Random(5)
    rows = [{"id": "a", "title": "A", "text": _text(rng)},
            {"id": "a", "title": "A again", "text": _text(rng)},
            {"title": "no id", "text": _text(rng)},
            {"id": 7, "title": "Seven", "text": _text(rng)}]
    source = tmp_path / "docs.jsonl"

    def write() -> None:
        source.write_text("".join(json.dumps(r) + "\n" for r in rows))

    write()
    _build([source], tmp_path / "idx")
    rows[1]["text"] = "The second a changed. Zulu zulu."
    rows.append({"id": "b", "title": "B", "text": "A new one. Glacier."})
    write()
    u = _update([source], tmp_path / "idx").update
    assert (u["added"], u["changed"], u["removed"], u["unchanged"]) == (1, 1, 0, 3)
    assert state(tmp_path / "idx") == _fresh([source], tmp_path)
    del rows[0]  # the second "a" is now the first: both read as changed
    write()
    _update([source], tmp_path / "idx")
    assert state(tmp_path / "idx") == _fresh([source], tmp_path)


def test_unnamed_sources_stay_and_prune_removes_them(tmp_path: Path) -> None:
    rng = random.Random(6)
    one = _folder(tmp_path / "one", _corpus(rng, 3))
    two = _folder(tmp_path / "two", {"x.txt": _text(rng), "y.txt": _text(rng)})
    _build([one, two], tmp_path / "idx")
    _folder(one, {**_corpus(random.Random(6), 3), "doc000.txt": "Edited. Alpha river."})
    u = _update([one], tmp_path / "idx").update
    assert (u["changed"], u["removed"], u["unchanged"]) == (1, 0, 2)
    assert state(tmp_path / "idx") == _fresh([one, two], tmp_path)
    u = _update([one], tmp_path / "idx", prune=True).update
    assert (u["removed"], u["unchanged"]) == (2, 3)
    assert state(tmp_path / "idx") == _fresh([one], tmp_path)
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert [s["path"] for s in meta["sources"]] == [str(one.resolve())]


def test_a_new_source_is_added(tmp_path: Path) -> None:
    rng = random.Random(7)
    one = _folder(tmp_path / "one", _corpus(rng, 3))
    two = _folder(tmp_path / "two", {"x.txt": _text(rng)})
    _build([one], tmp_path / "idx")
    u = _update([one, two], tmp_path / "idx").update
    assert (u["added"], u["unchanged"]) == (1, 3)
    assert state(tmp_path / "idx") == _fresh([one, two], tmp_path)


def test_a_lexical_only_index_is_updated(tmp_path: Path) -> None:
    rng = random.Random(8)
    docs = _corpus(rng, 6)
    folder = _folder(tmp_path / "docs", docs)
    _build([folder], tmp_path / "idx", retrieval="lexical")
    docs["doc000.txt"] = "Glacier tango meadow. Changed."
    del docs["doc003.txt"]
    _folder(folder, docs)
    _update([folder], tmp_path / "idx", retrieval="lexical")
    fresh = tmp_path / "fresh"
    _build([folder], fresh, retrieval="lexical")
    assert state(tmp_path / "idx") == state(fresh)


@pytest.mark.parametrize(("given", "named"), [
    ({"chunk_words": 30}, "--chunk-words 30"),
    ({"embed_text": "text"}, "--no-embed-title"),
    ({"language": "de"}, "--language de"),
    ({"index_type": "hnsw"}, "--index-type hnsw"),
    ({"retrieval": "lexical"}, "--retrieval lexical"),
    ({"append": True}, "--update and --append"),
    ({"resume": True}, "--update --resume"),
])
def test_settings_that_change_every_vector_are_refused(
    tmp_path: Path, given: dict[str, Any], named: str
) -> None:
    folder = _folder(tmp_path / "docs", _corpus(random.Random(9), 2))
    _build([folder], tmp_path / "idx")
    before = (tmp_path / "idx" / "meta.json").read_bytes()
    with pytest.raises(UsageError) as caught:
        _update([folder], tmp_path / "idx", **given)
    assert str(caught.value).startswith(named) and "\n" not in str(caught.value)
    assert (tmp_path / "idx" / "meta.json").read_bytes() == before


def test_another_model_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "docs", _corpus(random.Random(10), 2))
    _build([folder], tmp_path / "idx")
    with pytest.raises(UsageError, match="^--model other/model: index at .* was built with "
                       "test/hash-embedder"):
        build_index([folder], tmp_path / "idx", BuildOptions(chunk_words=12, update=True),
                    embedder=HashEmbedder(16, name="other/model"))


def test_prune_without_update_and_append_after_update_are_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "docs", _corpus(random.Random(11), 3))
    _build([folder], tmp_path / "idx")
    with pytest.raises(UsageError, match="^--prune goes with --update"):
        _build([folder], tmp_path / "idx", prune=True)
    (folder / "doc000.txt").write_text("Changed. Kilo.")
    _update([folder], tmp_path / "idx")
    with pytest.raises(UsageError, match="^--append: index at .* has been updated in place"):
        _build([folder], tmp_path / "idx", append=True)
    # A full build replaces an updated index, generations included.
    _build([folder], tmp_path / "idx")
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == [
        "chunks.sqlite", "lexical", "meta.json", "vectors.faiss"]


def test_two_updates_at_once_are_refused_by_the_lock(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "docs", _corpus(random.Random(12), 2))
    _build([folder], tmp_path / "idx")
    with build_lock(tmp_path / "idx"), pytest.raises(IndexBusyError):
        _update([folder], tmp_path / "idx")


def test_a_reader_keeps_the_index_it_opened(tmp_path: Path) -> None:
    rng = random.Random(13)
    docs = _corpus(rng, 6)
    folder = _folder(tmp_path / "docs", docs)
    _build([folder], tmp_path / "idx")
    with open_index(tmp_path / "idx") as reader:
        reader.use_embedder(_embedder())
        seen = {method: [[(h.chunk.doc_id, h.chunk.text) for h in r]
                         for r in reader.search(QUERIES, 5, method)]
                for method in ("dense", "lexical", "hybrid")}
        for round_ in range(2):  # the generation before the live one stays
            docs[f"doc00{round_}.txt"] = f"Round {round_}. Zulu zulu zulu."
            _folder(folder, docs)
            _update([folder], tmp_path / "idx")
            for method in ("dense", "lexical", "hybrid"):
                got = [[(h.chunk.doc_id, h.chunk.text) for h in r]
                       for r in reader.search(QUERIES, 5, method)]
                assert got == seen[method]
    assert state(tmp_path / "idx") == _fresh([folder], tmp_path)


def test_an_older_ceg_refuses_an_updated_index(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import ceg_cli.index.store

    folder = _folder(tmp_path / "docs", _corpus(random.Random(14), 2))
    _build([folder], tmp_path / "idx")
    (folder / "doc000.txt").write_text("Changed. Kilo.")
    _update([folder], tmp_path / "idx")
    monkeypatch.setattr(ceg_cli.index.store, "READ_FORMAT_VERSION", 2)
    with pytest.raises(Exception, match="index format 3 is newer than this ceg reads"):
        open_index(tmp_path / "idx")


def test_cli_update_prints_one_summary_line(tmp_path: Path, run_cli: Any, fake_models: None,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(update_module, "load_embedder", lambda *a, **k: HashEmbedder())
    folder = _folder(tmp_path / "docs", _corpus(random.Random(15), 40))
    index = tmp_path / "idx"
    assert run_cli("index", "build", folder, "--index", index, "-q").exit_code == 0
    (folder / "doc001.txt").write_text("Edited. Mike oscar.")
    result = run_cli("index", "build", folder, "--index", index, "--update", "-q")
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        f"updated {index}: 0 documents added, 1 changed, 0 removed, 39 unchanged;")
    info = run_cli("index", "info", "--index", index)
    assert "last update" in info.stdout and "1 changed" in info.stdout


# ------------------------------------------------------------------ the property


def test_a_plain_update_of_a_lexical_index_keeps_its_kind(tmp_path: Path,
                                                          run_cli: Any) -> None:
    """As ``--append`` does (issue 60 item 13): ``--update`` without ``--retrieval``
    updates an index built without vectors as one, in the singular where it is one."""
    folder = _folder(tmp_path / "docs", _corpus(random.Random(16), 6))
    index = tmp_path / "idx"
    built = run_cli("index", "build", folder, "--index", index, "--retrieval", "lexical",
                    "-q")
    assert built.exit_code == 0, built.stderr
    (folder / "new.txt").write_text("Added. November papa quebec.")
    result = run_cli("index", "build", folder, "--index", index, "--update", "-q")
    assert result.exit_code == 0, result.stderr
    assert f"updated {index}: 1 document added, 0 changed, 0 removed, 6 unchanged; " \
        "1 passage embedded" in result.stderr, result.stderr
    meta = json.loads((index / "meta.json").read_text(encoding="utf-8"))
    assert meta["retrieval"] == "lexical" and "model" not in meta
    # Asked for explicitly, another kind is still refused in one line.
    asked = run_cli("index", "build", folder, "--index", index, "--update",
                    "--retrieval", "hybrid")
    assert asked.exit_code == 2 and len(asked.stderr.strip().splitlines()) == 1, asked.stderr


@pytest.mark.parametrize("kind", [{}, {"lexical_engine": "tantivy"}, {"retrieval": "lexical"}],
                         ids=["bm25s", "tantivy", "lexical-only"])
def test_twenty_rounds_of_random_edits_equal_fresh_builds(tmp_path: Path,
                                                          kind: dict[str, Any]) -> None:
    """Random edits, deletions and additions, 20 rounds: after each update the index
    holds the passages of a fresh build, its counts and languages, and ranks as it does
    (dense, lexical, hybrid, BM25 scores), whatever the generations behind it; with
    either lexical engine, and without vectors."""
    rng = random.Random(56)
    docs = _corpus(rng, 12)
    folder = _folder(tmp_path / "docs", docs)
    target = tmp_path / "idx"
    _build([folder], target, **kind)
    serial = 100
    for round_ in range(20):
        for name in rng.sample(sorted(docs), k=min(len(docs), rng.randint(0, 3))):
            docs[name] = _text(rng)
        for name in rng.sample(sorted(docs), k=min(len(docs) - 2, rng.randint(0, 2))):
            del docs[name]
        for _ in range(rng.randint(0, 3)):
            serial += 1
            docs[f"doc{serial:03d}.txt"] = _text(rng)
        _folder(folder, docs)
        report = _update([folder], target, **kind)
        assert report.update["unchanged"] + report.update["changed"] + \
            report.update["added"] == len(docs), round_
        assert state(target) == _fresh([folder], tmp_path, **kind), f"round {round_}"
        named = {p.name for p in target.iterdir() if is_generation_name(p.name)}
        assert len(named) <= 2, named


# ------------------------------------------------------------------ kills


class Killed(BaseException):
    """Stands for SIGKILL: nothing of the update's own runs after it."""


def _scenario(tmp_path: Path) -> tuple[Path, Path, list[Path]]:
    """An index two updates old (so the next one drops a generation), and the
    sources of the update that the kills interrupt."""
    rng = random.Random(20)
    docs = _corpus(rng, 10)
    folder = _folder(tmp_path / "docs", docs)
    start = tmp_path / "start"
    _build([folder], start)
    for n in range(2):
        docs[f"doc00{n}.txt"] = _text(rng)
        _folder(folder, docs)
        _update([folder], start)
    for name in ("doc003.txt", "doc004.txt", "doc005.txt", "doc006.txt"):
        docs[name] = _text(rng) + " " + _text(rng)
    del docs["doc007.txt"]
    docs["late.txt"] = _text(rng)
    _folder(folder, docs)
    return start, folder, [folder]


def _steps(monkeypatch: pytest.MonkeyPatch, kill_at: int | None) -> list[str]:
    seen: list[str] = []

    def step(name: str) -> None:
        seen.append(name)
        if kill_at is not None and len(seen) == kill_at:
            raise Killed(name)

    monkeypatch.setattr(update_module, "_step", step)
    return seen


@pytest.mark.parametrize("first", [True, False])
def test_a_kill_at_every_moment_leaves_the_old_index_or_the_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: bool
) -> None:
    """Killed at each of its moments (first update of a built index; a third update,
    which also drops a generation): the old index or the new, whole; the next update
    finishes it and leaves only what meta.json names and the generation before."""
    monkeypatch.setattr(update_module, "EMBED_CALL_SIZE", 3)  # several batches
    start, folder, sources = _scenario(tmp_path)
    if first:
        shutil.rmtree(start)
        _build([_folder(tmp_path / "first", {"a.txt": "One. Alpha."})], start)
        sources = [folder]
    old = state(start)
    done = tmp_path / "done"
    shutil.copytree(start, done)
    steps = _steps(monkeypatch, None)
    _update(sources, done)
    new = state(done)
    assert old != new
    total = len(steps)
    assert total >= 10 + (not first), steps
    outcomes = {"old": 0, "new": 0}
    for at in range(1, total + 1):
        target = tmp_path / f"k{at}"
        shutil.copytree(start, target)
        _steps(monkeypatch, at)
        with pytest.raises(Killed):
            _update(sources, target)
        _steps(monkeypatch, None)
        got = state(target)
        assert got in (old, new), f"killed at step {at} ({steps[at - 1]})"
        outcomes["old" if got == old else "new"] += 1
        _update(sources, target)
        assert state(target) == new
        meta = json.loads((target / "meta.json").read_text())
        gens = {p.name for p in target.iterdir() if is_generation_name(p.name)}
        assert gens <= {meta["generation"]["dir"], meta["generation"]["previous"]}
        shutil.rmtree(target)
    assert outcomes["old"] and outcomes["new"]


def test_a_real_sigkill_mid_update_leaves_the_old_index(tmp_path: Path) -> None:
    """SIGKILL (no Python clean-up at all) while the lexical part is written, and
    after the switch: old, then new; a later update cleans up."""
    start, folder, sources = _scenario(tmp_path)
    old = state(start)
    here = Path(__file__).parent
    for at, expect in (("lexical", "old"), ("switched", "new")):
        target = tmp_path / f"kill-{at}"
        shutil.copytree(start, target)
        script = textwrap.dedent(f"""
            import os, signal, sys
            sys.path.insert(0, {str(here)!r})
            from pathlib import Path
            from conftest import HashEmbedder
            import ceg_cli.index.build.update as u
            from ceg_cli.index.build.builder import BuildOptions, build_index
            def step(name):
                if name == {at!r}:
                    os.kill(os.getpid(), signal.SIGKILL)
            u._step = step
            build_index([Path({str(folder)!r})], Path({str(target)!r}),
                        BuildOptions(chunk_words=12, update=True), embedder=HashEmbedder(16))
        """)
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
        assert proc.returncode == -9, proc.stderr.decode()
        got = state(target)
        if expect == "old":
            assert got == old
        else:
            assert got != old
            new = got
        _update(sources, target)
        assert state(target) == (new if expect == "new" else state(target))
    assert state(tmp_path / "kill-lexical") == state(tmp_path / "kill-switched")


# ------------------------------------------------------------------ breadth


def test_a_tantivy_lexical_part_is_updated(tmp_path: Path) -> None:
    """tantivy's part is written again from the live passages, so its BM25 scores are a
    fresh build's (deleting by term would keep the removed passages in its statistics
    until a merge)."""
    rng = random.Random(30)
    docs = _corpus(rng, 8)
    folder = _folder(tmp_path / "docs", docs)
    _build([folder], tmp_path / "idx", lexical_engine="tantivy")
    docs["doc002.txt"] = "Zulu river. Changed."
    del docs["doc005.txt"]
    docs["new.txt"] = _text(rng)
    _folder(folder, docs)
    _update([folder], tmp_path / "idx")
    fresh = tmp_path / "fresh"
    _build([folder], fresh, lexical_engine="tantivy")

    def tantivy_state(target: Path) -> list[Any]:
        with open_index(target) as index:
            assert index.meta["lexical"]["library"] == "tantivy"
            index.use_embedder(_embedder())
            out = []
            for method in ("lexical", "hybrid"):
                for row in index.search(QUERIES, 5, method):
                    out.append(sorted((round(h.score, 6), h.chunk.doc_id, h.chunk.ordinal)
                                      for h in row))
            lexical = index.lexical()
            for query in QUERIES:
                (top, scores), = lexical.ranked([query], 50)
                chunks = index.chunks(top)
                out.append(sorted((chunks[i].doc_id, chunks[i].ordinal, scores[i]) for i in top))
            return out

    assert tantivy_state(tmp_path / "idx") == tantivy_state(fresh)


@pytest.mark.parametrize("kind", ["hnsw", "ivfpq", "ivfpqfs"])
def test_an_approximate_index_keeps_its_trained_base(tmp_path: Path, kind: str) -> None:
    """The base's graph or quantizer is kept, removed passages hidden, the new ones
    searched exactly: recall@10 against exact search within 0.01 of a fresh build's."""
    import numpy as np

    rng = random.Random(31)
    docs = {f"d{i:03d}.txt": _text(rng) for i in range(150)}
    folder = _folder(tmp_path / "docs", docs)
    _build([folder], tmp_path / "idx", index_type=kind)
    for name in sorted(docs)[:20]:
        docs[name] = _text(rng)
    for name in sorted(docs)[20:30]:
        del docs[name]
    _folder(folder, docs)
    _update([folder], tmp_path / "idx")
    fresh = tmp_path / "fresh"
    _build([folder], fresh, index_type=kind)
    queries = [_text(rng) for _ in range(30)]

    def recall(target: Path) -> float:
        with open_index(target) as index:
            assert index.index_type == kind
            index.use_embedder(_embedder())
            texts = {}
            for c in index.iter_chunks():
                texts[(c.doc_id, c.ordinal)] = f"{c.title}. {c.text}" if c.title else c.text
            keys = sorted(texts)
            matrix = _embedder().embed([texts[k] for k in keys])
            found = index.search(queries, 10, "dense")
            qv = _embedder().embed(queries)
            hits = 0
            for row, vec in zip(found, qv):
                exact = {keys[i] for i in np.argsort(-(matrix @ vec), kind="stable")[:10]}
                hits += len(exact & {(h.chunk.doc_id, h.chunk.ordinal) for h in row})
                assert len({h.chunk_id for h in row}) == len(row) == 10
            return hits / (10 * len(queries))

    updated, built = recall(tmp_path / "idx"), recall(fresh)
    assert updated >= built - 0.01, (updated, built)


def test_a_wikipedia_dump_is_updated_per_page(tmp_path: Path) -> None:
    """A newer dump at the same path: the edited page re-embedded, the deleted one
    removed, the others (same page id, same text) untouched."""
    import bz2

    from conftest import MINI_WIKI

    text = bz2.decompress(MINI_WIKI.read_bytes()).decode("utf-8")
    dump = tmp_path / "wiki.xml"
    dump.write_text(text, encoding="utf-8")
    _build([dump], tmp_path / "idx")
    pages = json.loads((tmp_path / "idx" / "meta.json").read_text())["counts"]["documents"]
    with open_index(tmp_path / "idx") as index:
        ids = sorted({c.doc_id for c in index.iter_chunks()})
    edit = text.index(f"<id>{ids[0]}</id>")
    at = text.index(">", text.index("<text", edit)) + 1
    text = text[:at] + "Zulu glacier meadow, an edit of this revision. " + text[at:]
    gone = text.rindex("<page>", 0, text.index(f"<id>{ids[1]}</id>"))
    text = text[:gone] + text[text.index("</page>", gone) + len("</page>"):]
    dump.write_text(text, encoding="utf-8")
    u = _update([dump], tmp_path / "idx").update
    assert (u["changed"], u["removed"], u["added"], u["unchanged"]) == (1, 1, 0, pages - 2)
    assert state(tmp_path / "idx") == _fresh([dump], tmp_path)


def test_past_the_drift_bound_an_update_advises_a_rebuild(tmp_path: Path) -> None:
    rng = random.Random(40)
    docs = _corpus(rng, 40)
    folder = _folder(tmp_path / "docs", docs)
    _build([folder], tmp_path / "idx")
    said: list[str] = []
    docs["doc000.txt"] = _text(rng)
    _folder(folder, docs)
    options = BuildOptions(chunk_words=12, update=True)
    build_index([folder], tmp_path / "idx", options, embedder=_embedder(), on_warning=said.append)
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert not said and meta["last_update"]["rebuild_advised"] is False
    for name in sorted(docs)[1:10]:
        docs[name] = _text(rng)
    _folder(folder, docs)
    build_index([folder], tmp_path / "idx", options, embedder=_embedder(), on_warning=said.append)
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert meta["last_update"]["rebuild_advised"] is True
    assert len(said) == 1 and "a build without --update now makes it smaller" in said[0]


def test_a_generation_outside_the_index_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "docs", _corpus(random.Random(41), 2))
    _build([folder], tmp_path / "idx")
    (folder / "doc000.txt").write_text("Changed. Kilo.")
    _update([folder], tmp_path / "idx")
    meta_path = tmp_path / "idx" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["generation"]["dir"] = "../elsewhere"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(Exception, match="field 'generation.dir' should be a generation "
                       "folder's name"):
        open_index(tmp_path / "idx")


def test_an_index_from_before_languages_is_refused_with_advice(tmp_path: Path) -> None:
    import sqlite3

    folder = _folder(tmp_path / "docs", _corpus(random.Random(42), 3))
    _build([folder], tmp_path / "idx")
    with sqlite3.connect(tmp_path / "idx" / "chunks.sqlite") as db:
        db.execute("ALTER TABLE chunks DROP COLUMN language")
    (folder / "doc000.txt").write_text("Changed. Kilo.")
    with pytest.raises(UsageError, match="built before ceg recorded each passage's language; "
                       "rebuild it once without --update"):
        _update([folder], tmp_path / "idx")
