"""``ceg index build | info | search`` through Typer's CliRunner, and import cost."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ceg_cli.index.dense.embedding import DEFAULT_MODEL

BGWIKI = Path(__file__).parent / "data" / "wiki" / "bgwiki-utf16-sample.xml.bz2"
QUESTION = "Who tutored Alexander the Great?"


def _rows(index_dir: Path) -> list[tuple]:
    db = sqlite3.connect(index_dir / "chunks.sqlite")
    try:
        return db.execute("SELECT * FROM chunks ORDER BY id").fetchall()
    finally:
        db.close()


def _assert_one_line_error(stderr: str, *needles: str) -> None:
    line = stderr.strip()
    assert "\n" not in line, stderr
    assert line.startswith("error: "), stderr
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in line, (needle, line)


# --- help and imports -------------------------------------------------------------


def test_help(run_cli) -> None:
    top = run_cli("--help")
    assert top.exit_code == 0
    assert "index" in top.stdout
    group = run_cli("index", "--help")
    assert group.exit_code == 0
    for command in ("build", "info", "search"):
        assert command in group.stdout


def test_cli_import_leaves_heavy_libraries_out() -> None:
    # `ceg --help` must answer at once: no model or vector library at import.
    code = (
        "import sys, ceg_cli.cli.main, ceg_cli.index.build.builder, ceg_cli.index, "
        "ceg_cli.index.dense.embedding; "
        "heavy = ('torch', 'sentence_transformers', 'faiss', 'transformers'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- build ------------------------------------------------------------------------


@pytest.mark.slow
def test_build_reports_counts_and_matches_the_api_build(
    run_cli, tmp_path: Path, mini_wiki: Path, mini_index: Path
) -> None:
    target = tmp_path / "index"
    result = run_cli("index", "build", mini_wiki, "--index", target, "--quiet")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""  # stdout is for data; the report goes to stderr
    n = len(_rows(mini_index))
    assert f"indexed 4 documents, {n} passages" in result.stderr
    assert f"now holds 4 documents, {n} passages" in result.stderr
    assert _rows(target) == _rows(mini_index)


@pytest.mark.slow
def test_build_append_reports_unchanged_sources(run_cli, index_copy: Path, mini_wiki: Path) -> None:
    before = _rows(index_copy)
    result = run_cli("index", "build", mini_wiki, "--index", index_copy, "--append", "-q")
    assert result.exit_code == 0, result.stderr
    assert f"unchanged, skipped: {mini_wiki}" in result.stderr
    assert "indexed 0 documents, 0 passages" in result.stderr
    assert _rows(index_copy) == before


@pytest.mark.slow
def test_build_namespace_option_is_repeatable(
    run_cli, tmp_path: Path, hash_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fake model keeps this cheap: what is tested is that -n reaches the reader.
    monkeypatch.setattr("ceg_cli.index.build.builder.load_embedder", lambda *a, **k: hash_embedder)
    target = tmp_path / "index"
    result = run_cli("index", "build", BGWIKI, "--index", target, "-n", "0", "-n", "4", "-q")
    assert result.exit_code == 0, result.stderr
    info = run_cli("index", "info", "--index", target, "--json")
    meta = json.loads(info.stdout)
    assert meta["sources"][0]["namespaces"] == [0, 4]
    assert meta["counts"]["documents"] == 3
    assert "Уикипедия:Редактиране на страници" in {r[2] for r in _rows(target)}


def test_build_of_a_missing_source_exits_2_naming_it(run_cli, tmp_path: Path) -> None:
    target = tmp_path / "index"
    result = run_cli("index", "build", tmp_path / "missing.xml", "--index", target)
    assert result.exit_code == 2
    _assert_one_line_error(result.stderr, "missing.xml", "no such file")
    assert result.stdout == ""
    assert not target.exists()


def test_build_into_a_foreign_directory_exits_2(run_cli, tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text('{"id": "1", "title": "T", "text": "Some text."}\n')
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    result = run_cli("index", "build", source, "--index", target)
    assert result.exit_code == 2
    _assert_one_line_error(result.stderr, str(target), "notes.txt", "not a ceg index")
    assert [p.name for p in target.iterdir()] == ["notes.txt"]


# --- info -------------------------------------------------------------------------


@pytest.mark.slow
def test_info_shows_what_the_index_holds(run_cli, mini_index: Path, mini_wiki: Path) -> None:
    result = run_cli("index", "info", "--index", mini_index)
    assert result.exit_code == 0, result.stderr
    lines = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in result.stdout.splitlines()}
    n = len(_rows(mini_index))
    assert lines["documents"].strip() == "4"
    assert lines["passages"].strip() == str(n)
    assert f"{DEFAULT_MODEL} (dimension 384)" in lines["model"]
    assert str(mini_wiki.resolve()) in lines["source"]
    assert result.stderr == ""


@pytest.mark.slow
def test_info_json_is_meta_json(run_cli, mini_index: Path) -> None:
    result = run_cli("index", "info", "--index", mini_index, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == json.loads((mini_index / "meta.json").read_text())


@pytest.mark.slow
def test_info_reads_the_index_from_the_environment(run_cli, mini_index: Path) -> None:
    result = run_cli("index", "info", "--json", env={"CEG_INDEX": str(mini_index)})
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["counts"]["documents"] == 4


@pytest.mark.parametrize("command", [["info"], ["search", QUESTION]])
def test_missing_index_exits_2_with_one_line(run_cli, tmp_path: Path, command: list[str]) -> None:
    where = tmp_path / "no-index-here"
    result = run_cli("index", *command, "--index", where)
    assert result.exit_code == 2
    _assert_one_line_error(result.stderr, str(where), "ceg index build")
    assert result.stdout == ""


# --- search -----------------------------------------------------------------------


@pytest.mark.slow
def test_search_puts_the_aristotle_passage_first(run_cli, mini_index: Path) -> None:
    result = run_cli("index", "search", QUESTION, "-k", "3", "--index", mini_index)
    assert result.exit_code == 0, result.stderr
    heads = [line for line in result.stdout.splitlines() if line[:2] in ("1.", "2.", "3.", "4.")]
    assert len(heads) == 3
    assert heads[0].startswith("1. Aristotle  score 0.")
    assert "Alexander" in result.stdout


@pytest.mark.slow
def test_search_json_lines(run_cli, mini_index: Path) -> None:
    result = run_cli("index", "search", QUESTION, "-k", "3", "--json", "--index", mini_index)
    assert result.exit_code == 0, result.stderr
    hits = [json.loads(line) for line in result.stdout.splitlines()]
    assert [h["rank"] for h in hits] == [1, 2, 3]
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 < s <= 1.0 for s in scores)
    assert hits[0]["title"] == "Aristotle"
    assert "Alexander" in hits[0]["text"]
    assert hits[0]["url"] == "https://en.wikipedia.org/wiki/Aristotle"
    rows = {r[0]: r for r in _rows(mini_index)}
    for hit in hits:  # each record is the stored passage it names
        assert rows[hit["passage_id"]][6] == hit["text"]
        assert {"doc_id", "ordinal", "start", "end"} <= hit.keys()


def test_search_rejects_k_below_one(run_cli, tmp_path: Path) -> None:
    result = run_cli("index", "search", QUESTION, "-k", "0", "--index", tmp_path)
    assert result.exit_code == 2
    assert "Invalid value for '--top-k' / '-k'" in result.stderr
    assert "greater than or equal to" in result.stderr
