"""What an index build may touch, and indexes whose parts do not agree (issue 23).

Each case comes from a probe of careless and hostile inputs; each runs the
real ``ceg`` command (in-process) on JSONL corpora of 1, 3 and 150 documents,
with the fake model (``HashEmbedder``) for every model name. A build replaces
a whole directory, so it must refuse one that holds anything but its own
index; ``meta.json`` is checked field by field; the lexical part is checked
when it is used, so that dense search never depends on it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from ceg_cli.index.dense.embedding import Embedder

WORDS = ("harbour lantern orchard meadow granite falcon willow copper ember thistle "
         "saffron glacier juniper quartz beacon").split()


def corpus(path: Path, documents: int, title: str = "Title") -> Path:
    """A JSONL corpus: each document a few sentences of its own words."""
    with open(path, "w", encoding="utf-8") as fh:
        for n in range(documents):
            words = [WORDS[(n * 7 + i) % len(WORDS)] for i in range(6)]
            text = (f"Document {n} tells of the {words[0]} and the {words[1]} near town {n}. "
                    f"It names the {words[2]}, the {words[3]} and the {words[4]} {words[5]}.")
            fh.write(json.dumps({"id": f"d{n}", "title": f"{title} {n}", "text": text}) + "\n")
    return path


@pytest.fixture
def c1(tmp_path: Path) -> Path:
    return corpus(tmp_path / "c1.jsonl", 1)


@pytest.fixture
def c3(tmp_path: Path) -> Path:
    return corpus(tmp_path / "c3.jsonl", 3)


@pytest.fixture
def c150(tmp_path: Path) -> Path:
    return corpus(tmp_path / "c150.jsonl", 150)


def build(run_cli: Any, *args: str | Path) -> Result:
    return run_cli("index", "build", *args, "--quiet")


def meta_of(index: Path) -> dict[str, Any]:
    return json.loads((index / "meta.json").read_text(encoding="utf-8"))


def one_line(result: Result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with a file's bytes (None for a folder)."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


# -- 1, 3: a build replaces only what it wrote ------------------------------------------


def test_a_folder_with_another_programs_meta_json_is_refused_and_untouched(
    run_cli: Any, fake_models: None, c1: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "p"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "app.py").write_text("print('app')\n", encoding="utf-8")
    (folder / "meta.json").write_text('{"name": "app"}\n', encoding="utf-8")
    (folder / "important.txt").write_text("precious\n", encoding="utf-8")
    before = tree(folder)

    result = build(run_cli, c1, "--index", folder)

    assert result.exit_code == 2
    line = one_line(result)
    assert "meta.json is not a ceg index's" in line and "format_version" in line
    assert tree(folder) == before


def test_a_rebuild_refuses_an_index_that_holds_files_it_did_not_write(
    run_cli: Any, fake_models: None, c1: Path, c3: Path, tmp_path: Path
) -> None:
    index = tmp_path / "idx"
    assert build(run_cli, c1, "--index", index).exit_code == 0
    adapted = index / "adapted"  # what `ceg judge train --out idx/adapted` would make
    adapted.mkdir()
    (adapted / "model.safetensors").write_bytes(b"weights")
    before = tree(index)

    for args in ([c3, "--append"], [c3], [c1, "--append"]):
        result = build(run_cli, *args, "--index", index)
        assert result.exit_code == 2, args
        assert "adapted" in one_line(result) and "move them out" in one_line(result)
        assert tree(index) == before


def test_a_leftover_build_folder_loses_only_what_a_build_wrote(
    run_cli: Any, fake_models: None, c3: Path, tmp_path: Path
) -> None:
    index = tmp_path / "idx"
    # A dead build's folder (no process has this id), into which someone put a file.
    # A build marks its folder the moment it makes it (the owner file): that mark is
    # what lets a later build clean it up (issue 60, item 1).
    stale = tmp_path / f".idx.building-{2**22 + 17}"
    stale.mkdir()
    (stale / "owner").write_text(f"{2**22 + 17}\n", encoding="ascii")
    (stale / "chunks.sqlite").write_bytes(b"half a build")
    (stale / "notes.txt").write_text("mine\n", encoding="utf-8")

    assert build(run_cli, c3, "--index", index).exit_code == 0

    assert (stale / "notes.txt").read_text(encoding="utf-8") == "mine\n"
    assert not (stale / "chunks.sqlite").exists()


# -- 5, 9: the lexical part ---------------------------------------------------------------


def search(run_cli: Any, index: Path, retrieval: str) -> Result:
    return run_cli("index", "search", "granite falcon", "--index", index, "--retrieval",
                   retrieval, "--json")


def test_dense_search_needs_nothing_from_lexical_and_append_lexical_repairs_it(
    run_cli: Any, fake_models: None, c150: Path, tmp_path: Path
) -> None:
    index = tmp_path / "L"
    assert build(run_cli, c150, "--index", index).exit_code == 0
    expected = search(run_cli, index, "lexical").stdout
    shutil.rmtree(index / "lexical")

    assert search(run_cli, index, "dense").exit_code == 0
    broken = search(run_cli, index, "lexical")
    assert broken.exit_code == 2
    assert "lexical/ is missing" in one_line(broken) and "--append --lexical" in broken.stderr

    repair = build(run_cli, c150, "--append", "--lexical", "--index", index)

    assert repair.exit_code == 0, repair.stderr
    assert "added the lexical (BM25) index" in repair.stderr
    again = search(run_cli, index, "lexical")
    assert again.exit_code == 0 and again.stdout == expected


@pytest.mark.parametrize("retrieval", ["lexical", "hybrid"])
@pytest.mark.parametrize("donor_size", [3, 150])
def test_a_lexical_folder_from_another_index_is_refused(
    run_cli: Any, fake_models: None, tmp_path: Path, retrieval: str, donor_size: int
) -> None:
    index = tmp_path / "L"
    donor = tmp_path / "D"
    assert build(run_cli, corpus(tmp_path / "big.jsonl", 150), "--index", index).exit_code == 0
    # At 150, the donor has as many passages, other ones: only the recorded digests tell.
    other = corpus(tmp_path / "other.jsonl", donor_size, title="Other")
    assert build(run_cli, other, "--index", donor).exit_code == 0
    shutil.rmtree(index / "lexical")
    shutil.copytree(donor / "lexical", index / "lexical")

    result = search(run_cli, index, retrieval)

    assert result.exit_code == 2
    assert "not the BM25 index this index was built with" in one_line(result)
    assert search(run_cli, index, "dense").exit_code == 0


# -- 7, 8: options on --append ------------------------------------------------------------


def test_a_user_chosen_ivfpq_stays_on_append_after_a_fallback_to_flat(
    run_cli: Any, fake_models: None, c1: Path, c3: Path, tmp_path: Path
) -> None:
    index = tmp_path / "idx"
    assert build(run_cli, c3, "--index", index, "--index-type", "ivfpq").exit_code == 0
    first = meta_of(index)["faiss"]
    assert first["index_type"] == "flat"
    assert first["chosen"].startswith("fallback: --index-type ivfpq requested")

    assert build(run_cli, c1, "--append", "--index", index).exit_code == 0

    after = meta_of(index)["faiss"]
    assert after["requested"] == "ivfpq"
    assert after["chosen"].startswith("fallback: --index-type ivfpq requested")
    assert "this index has 4" in after["chosen"]


def test_append_with_no_changed_source_applies_no_lexical_and_explains_index_type(
    run_cli: Any, fake_models: None, c3: Path, tmp_path: Path
) -> None:
    index = tmp_path / "idx"
    assert build(run_cli, c3, "--index", index).exit_code == 0
    assert "lexical" in meta_of(index)

    dropped = build(run_cli, c3, "--append", "--no-lexical", "--index", index)

    assert dropped.exit_code == 0
    assert "removed the lexical (BM25) part" in dropped.stderr
    meta = meta_of(index)
    assert "lexical" not in meta and meta["lexical_skipped"] == "user: --no-lexical"
    assert not (index / "lexical").exists()

    typed = build(run_cli, c3, "--append", "--index-type", "hnsw", "--index", index)

    assert typed.exit_code == 0
    assert "--index-type hnsw: no source changed, so nothing was rebuilt" in typed.stderr
    assert meta_of(index)["faiss"].get("index_type", "flat") == "flat"


# -- 10: a complete build stopped at the swap ---------------------------------------------


def test_resume_puts_a_complete_build_in_place_without_embedding(
    run_cli: Any, fake_models: None, c3: Path, c150: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = tmp_path / "idx"
    assert build(run_cli, c3, "--index", index).exit_code == 0
    # The state a kill during the final rename leaves: the old index in place, the
    # new one whole in the work folder (meta.json written, the manifest gone).
    elsewhere = tmp_path / "complete"
    assert build(run_cli, c150, "--index", elsewhere).exit_code == 0
    os.rename(elsewhere, tmp_path / ".idx.building")
    finished = tree(tmp_path / ".idx.building")

    import ceg_cli.index.build.builder

    def no_model(*args: object, **kwargs: object) -> Embedder:
        raise AssertionError("the model was loaded: the build embedded again")

    monkeypatch.setattr(ceg_cli.index.build.builder, "load_embedder", no_model)
    result = build(run_cli, c150, "--resume", "--index", index)

    assert result.exit_code == 0, result.stderr
    assert "putting it in place, nothing re-embedded" in result.stderr
    assert tree(index) == finished
    assert not (tmp_path / ".idx.building").exists()


# -- 11, 13: meta.json of the wrong shape, and what info says -----------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"counts": []}, "counts"),
        ({"model": "x"}, "model"),
        ({"faiss": []}, "faiss"),
        ({"sources": ["a"]}, "sources[0]"),
        ({"lexical": "yes"}, "lexical"),
        ({"chunker": None}, "chunker"),
        ({"embed_text": 5}, "embed_text"),
        ({"build": "ray"}, "build"),
        ({"model.name": 5}, "model.name"),
        ({"counts.chunks": "150"}, "counts.chunks"),
        ({"format_version": "1"}, "format_version"),
    ],
)
def test_a_wrong_type_in_meta_json_is_one_line_naming_the_field(
    run_cli: Any, fake_models: None, c3: Path, tmp_path: Path, change: dict[str, Any],
    field: str,
) -> None:
    index = tmp_path / "idx"
    assert build(run_cli, c3, "--index", index).exit_code == 0
    meta = meta_of(index)
    ((key, value),) = change.items()
    holder = meta
    *parents, last = key.split(".")
    for part in parents:
        holder = holder[part]
    holder[last] = value
    (index / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

    for command in (["info"], ["search", "granite"]):
        result = run_cli("index", *command, "--index", index)
        assert result.exit_code == 2, (command, result.stderr)
        line = one_line(result)
        assert f"field '{field}'" in line and "meta.json" in line, line
        assert "missing" not in line and "internal error" not in line, line


def test_an_index_built_with_no_lexical_is_described_as_such(
    run_cli: Any, fake_models: None, c3: Path, tmp_path: Path
) -> None:
    index = tmp_path / "idx"
    assert build(run_cli, c3, "--index", index, "--no-lexical").exit_code == 0

    result = search(run_cli, index, "lexical")
    info = run_cli("index", "info", "--index", index)

    assert result.exit_code == 2
    for text in (one_line(result), info.stdout):
        assert "built with --no-lexical" in text and "before" not in text
