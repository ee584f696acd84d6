"""``--update`` of a folder: unchanged files are known by their bytes (issue 56).

Reading a folder as documents converts each Markdown file; at 100,000 passages
that conversion alone took most of a one-document update. An update now keeps a
file whose bytes the record knows without converting it, reads the others, and
loads the model only when a passage is to be embedded.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import HashEmbedder
from test_update import _build, _corpus, _embedder, _folder, _fresh, _text, _update, state

import ceg_cli.corpus.folder as folder_module
import ceg_cli.index.build.update as update_module
from ceg_cli.index.indexdir import folder_digests, source_digest


def _markdown(rng: random.Random, n: int) -> dict[str, str]:
    return {f"page{i:02d}.md": f"# Page {i}\n\n{_text(rng)}\n\n*{_text(rng)}*\n" for i in range(n)}


def test_unchanged_files_are_not_read_as_documents(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(11)
    docs = _markdown(rng, 12)
    folder = _folder(tmp_path / "docs", docs)
    _build([folder], tmp_path / "idx")
    docs["page03.md"] += "\nOne more sentence about the glacier.\n"
    _folder(folder, docs)
    _update([folder], tmp_path / "idx")  # the first: records each file's digest
    converted: list[str] = []
    real = folder_module.markdown_to_text

    def spy(text: str) -> Any:
        converted.append(text)
        return real(text)

    monkeypatch.setattr(folder_module, "markdown_to_text", spy)
    docs["page07.md"] = "# Page seven\n\nNow about a desert island.\n"
    docs["new.md"] = "# New\n\nZulu kilo lima.\n"
    del docs["page01.md"]
    _folder(folder, docs)
    report = _update([folder], tmp_path / "idx")
    u = report.update
    assert (u["added"], u["changed"], u["removed"], u["unchanged"]) == (1, 1, 1, 10)
    assert sorted(converted) == sorted([docs["page07.md"], docs["new.md"]])
    monkeypatch.undo()
    assert state(tmp_path / "idx") == _fresh([folder], tmp_path)


def test_a_file_whose_text_is_unchanged_keeps_its_passages(tmp_path: Path) -> None:
    """Bytes that change but give the same document (a Markdown emphasis mark that the
    conversion drops): the file is read, its passages compared, nothing embedded."""
    folder = _folder(tmp_path / "docs", {"a.md": "# A\n\nAlpha river.\n",
                                         "b.md": "# B\n\nBravo lake.\n"})
    _build([folder], tmp_path / "idx")
    _folder(folder, {"a.md": "# A\n\n**Alpha** river.\n", "b.md": "# B\n\nBravo lake.\n"})
    report = _update([folder], tmp_path / "idx")
    assert report.update["unchanged"] == 2 and report.update["passages_embedded"] == 0


def test_records_of_an_earlier_ceg_still_match(tmp_path: Path) -> None:
    """A record holding a file's text digest (what updates recorded before) or another
    reading rule's file digest matches once without embedding, then holds the new one."""
    rng = random.Random(12)
    docs = _markdown(rng, 6)
    folder = _folder(tmp_path / "docs", docs)
    _build([folder], tmp_path / "idx")
    docs["page00.md"] += "\nMore.\n"
    _folder(folder, docs)
    _update([folder], tmp_path / "idx")
    (gen,) = [p for p in (tmp_path / "idx").iterdir() if p.name.startswith("gen-")]
    with sqlite3.connect(gen / "chunks.sqlite") as db:
        db.execute("UPDATE documents SET digest = 'file:sha256:' || key WHERE key != 'page01.md'")
        db.execute("UPDATE documents SET digest = ? WHERE key = 'page01.md'",
                   (_text_digest(folder, "page01.md"),))
    docs["page02.md"] += "\nChanged.\n"
    _folder(folder, docs)
    report = _update([folder], tmp_path / "idx")
    u = report.update
    assert (u["changed"], u["unchanged"]) == (1, 5)
    assert u["passages_embedded"] == _fresh_count(folder, tmp_path, "page02.md")
    with sqlite3.connect(f"file:{_live_gen(tmp_path / 'idx')}/chunks.sqlite?mode=ro",
                         uri=True) as db:
        digests = dict(db.execute("SELECT key, digest FROM documents"))
    assert all(d.startswith("file:sha256:") and d != f"file:sha256:{k}"
               for k, d in digests.items())


def _text_digest(folder: Path, name: str) -> str:
    from ceg_cli.corpus.folder import read_folder
    from ceg_cli.index.build.docrecord import document_digest

    (doc,) = [d for d in read_folder(folder) if d.id == name]
    return document_digest(doc)


def _fresh_count(folder: Path, tmp: Path, name: str) -> int:
    from ceg_cli.corpus.folder import read_folder
    from ceg_cli.index.build.chunking import chunk_document

    (doc,) = [d for d in read_folder(folder) if d.id == name]
    return len(chunk_document(doc, 12))


def _live_gen(index: Path) -> Path:
    import json

    return index / json.loads((index / "meta.json").read_text())["generation"]["dir"]


def test_an_update_that_embeds_nothing_loads_no_model(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from ceg_cli.index.build.builder import BuildOptions, build_index

    docs = _corpus(random.Random(13), 5)
    folder = _folder(tmp_path / "docs", docs)
    _build([folder], tmp_path / "idx")
    loaded: list[str] = []
    real = update_module._load_model
    monkeypatch.setattr(update_module, "_load_model",
                        lambda meta, options: loaded.append("x") or real(meta, options))
    del docs["doc002.txt"]
    _folder(folder, docs)
    # No embedder given: the index's model would be loaded; nothing is to embed.
    report = build_index([folder], tmp_path / "idx", BuildOptions(chunk_words=12, update=True))
    assert report.update["removed"] == 1 and loaded == []
    assert state(tmp_path / "idx") == _fresh([folder], tmp_path)


def test_folder_digests_is_the_digest_builds_recorded(tmp_path: Path) -> None:
    """The folder digest, now read in one walk with each file's: the order of the
    paths' parts (``a/b`` before ``a-b``), hidden files and links to files counted,
    linked folders not descended; the same value as the rglob it replaced."""
    root = tmp_path / "f"
    (root / "a").mkdir(parents=True)
    (root / "a" / "b").write_text("one")
    (root / "a-b").write_text("two")
    (root / ".hidden").write_text("three")
    (root / "z").mkdir()
    (root / "z" / "c.md").write_text("four")
    os.symlink(root / "a-b", root / "link.txt")
    os.symlink(root / "z", root / "linked-dir")
    outer = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        outer.update(file.relative_to(root).as_posix().encode() + b"\0")
        outer.update(hashlib.sha256(file.read_bytes()).hexdigest().encode() + b"\n")
    digest, files, size = folder_digests(root)
    assert digest == source_digest(root) == "sha256:" + outer.hexdigest()
    assert list(files) == [".hidden", "a/b", "a-b", "link.txt", "z/c.md"]
    assert files["link.txt"] == hashlib.sha256(b"two").hexdigest()
    assert size == sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


# ------------------------------------------------------------------ the lexical part added


def test_update_lexical_adds_the_part_to_an_updated_index(tmp_path: Path) -> None:
    """An index updated in place refuses ``--append``, so the advice for a missing or
    damaged lexical part is ``--update --lexical``, and that makes the part from the
    live passages, nothing embedded, even when no document changed."""
    from ceg_cli.errors import IndexLoadError, UsageError
    from ceg_cli.index import open_index
    from ceg_cli.index.lexical.bm25 import resolve_method

    docs = _corpus(random.Random(14), 6)
    folder = _folder(tmp_path / "docs", docs)
    index = tmp_path / "idx"
    _build([folder], index, lexical=False)
    docs["doc001.txt"] = "Glacier tango meadow. Changed."
    _folder(folder, docs)
    _update([folder], index)
    with open_index(index) as opened, pytest.raises(UsageError) as caught:
        resolve_method(opened, "lexical")
    assert f"--update --lexical --index {index}" in str(caught.value)
    report = _update([folder], index, lexical=True)
    assert report.update["passages_embedded"] == 0 and report.update["unchanged"] == 6
    assert report.update["lexical_made"] is True
    meta = json.loads((index / "meta.json").read_text())
    assert "lexical" in meta and "lexical_skipped" not in meta
    assert state(index) == _fresh([folder], tmp_path)
    # A damaged part: named with its folder, and --update --lexical makes it again.
    live = _live_gen(index)
    victim = sorted((live / "lexical").iterdir())[0]
    victim.write_bytes(victim.read_bytes() + b"\0")
    with open_index(index) as opened, pytest.raises(IndexLoadError) as failed:
        opened.use_embedder(_embedder())
        opened.search(["glacier"], 3, "lexical")
    said = str(failed.value)
    assert said.startswith(f"index at {index} ({live.name}/)") and "\n" not in said
    assert f"--update --lexical --index {index}" in said
    _update([folder], index, lexical=True)
    assert state(index) == _fresh([folder], tmp_path)


def test_cli_says_when_an_update_made_the_lexical_part(tmp_path: Path, run_cli: Any,
                                                       fake_models: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(update_module, "load_embedder", lambda *a, **k: HashEmbedder())
    folder = _folder(tmp_path / "docs", _corpus(random.Random(16), 4))
    index = tmp_path / "idx"
    assert run_cli("index", "build", folder, "--index", index, "--no-lexical",
                   "-q").exit_code == 0
    result = run_cli("index", "build", folder, "--index", index, "--update", "--lexical", "-q")
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 2 and lines[0].startswith("made the lexical (BM25) part from every")
    assert lines[1].startswith(f"updated {index}: 0 documents added, 0 changed, 0 removed, "
                               "4 unchanged;")
    meta = json.loads((index / "meta.json").read_text())
    assert meta["last_update"]["lexical_made"] is True and "lexical" in meta
