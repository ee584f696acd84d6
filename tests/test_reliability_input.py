"""Bad input through the CLI: one clear line naming file, line and field; nothing else lost.

Responses files (``tests/data/bad/``) go through ``ceg check`` with the
offline judge on the mini dump indexed with fake vectors: every bad line is
reported once, on one line, and becomes an error record, and the good lines
around it give exactly the records they give without the bad lines. Hostile
corpus files go through ``ceg index build`` over an existing index, which must
survive untouched; broken index directories through ``ceg check``, which must
stop before it writes anything.

Each test records its row of the reliability table (``benchmarks/check/reliability.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from reliability_harness import leftovers
from typer.testing import Result

from ceg_cli import textio
from ceg_cli.check import responses as responses_module
from ceg_cli.index.build.builder import BuildOptions, build_index

DATA = Path(__file__).parent / "data"
BAD = DATA / "bad"
HOSTILE = DATA / "hostile"
GOOD_PREFIX = b'{"id": "g'

Row = Callable[[str, int, str], None]


@pytest.fixture
def row(record_property: Callable[[str, object], None]) -> Row:
    """Record one row of the reliability table."""

    def record(what: str, tries: int, outcome: str) -> None:
        record_property("reliability", {"what": what, "tries": tries, "outcome": outcome})

    return record


def check(run_cli: Any, responses: Path | str, index: Path, out: Path, *args: str) -> Result:
    return run_cli("check", responses, "--index", index, "--out", out, "--quiet", *args)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def without_line(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "line"}


def stderr_lines(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def assert_one_line_error(result: Result, *words: str) -> str:
    """Exactly one ``error:`` line, holding ``words``, and no traceback."""
    errors = [line for line in stderr_lines(result) if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    for word in words:
        assert word in errors[0], errors[0]
    assert "Traceback" not in result.stderr
    return errors[0]


# -- responses files ---------------------------------------------------------------

#: For each fixture: line number -> what its one-line error must say.
EXPECTED: dict[str, dict[int, str]] = {
    "truncated.jsonl": {2: "not valid JSON", 5: "not valid JSON"},
    "invalid-json.jsonl": {2: "not valid JSON", 3: "not valid JSON", 5: "not valid JSON",
                           6: "not valid JSON"},
    "wrong-types.jsonl": {
        2: "field 'response' must be a string, got number",
        3: "field 'id' must be a string or an integer, got array",
        4: "field 'question' must be a string, got object",
        6: "field 'response' must be a string, got object",
        7: "expected a JSON object, got array",
        8: "expected a JSON object, got null",
    },
    "empty-responses.jsonl": {
        2: "field 'response' is empty",
        3: "field 'response' is empty",
        4: "field 'response' is missing",
        6: "field 'response' must be a string, got null",
    },
    "invalid-utf8.jsonl": {
        2: "not valid UTF-8 (byte 33)",
        3: "not valid UTF-8 (byte 32)",
        4: "not valid UTF-8 (byte 39)",
        6: "field 'response' holds an unpaired surrogate escape",
    },
    "binary-garbage.jsonl": {},  # every line that is not a good one; see below
}


def bad_lines(path: Path) -> dict[int, str]:
    expected = EXPECTED[path.name]
    if expected:
        return expected
    lines = path.read_bytes().split(b"\n")
    return {
        n: "" for n, raw in enumerate(lines, 1) if raw.strip() and not raw.startswith(GOOD_PREFIX)
    }


def clean_copy(path: Path, tmp_path: Path) -> Path:
    """The good lines of ``path`` alone."""
    good = [raw for raw in path.read_bytes().split(b"\n") if raw.startswith(GOOD_PREFIX)]
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(b"".join(raw + b"\n" for raw in good))
    return clean


def assert_bad_lines_cost_only_themselves(
    run_cli: Any, src: Path, index: Path, tmp_path: Path, expected: dict[int, str]
) -> Result:
    out, clean_out = tmp_path / "out.jsonl", tmp_path / "clean-out.jsonl"
    result = check(run_cli, src, index, out)
    clean = check(run_cli, clean_copy(src, tmp_path), index, clean_out)
    assert clean.exit_code == 0, clean.stderr
    # Bad lines fail the run by default (exit 2): the input cannot vouch for a result.
    assert result.exit_code == 2, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr

    warnings = [line for line in stderr_lines(result) if line.startswith("warning:")]
    assert len(warnings) == len(expected), warnings
    by_line = {}
    for warning in warnings:
        head = f"warning: {src}:"
        assert warning.startswith(head), warning
        number = int(warning[len(head):].split(":", 1)[0])
        by_line[number] = warning.removeprefix("warning: ")
    assert sorted(by_line) == sorted(expected)
    for number, words in expected.items():
        assert words in by_line[number], by_line[number]

    got = records(out)
    non_blank = [n for n, raw in enumerate(src.read_bytes().split(b"\n"), 1) if raw.strip()]
    assert [r["line"] for r in got] == non_blank  # one record per line, in order
    errors = {r["line"]: r for r in got if r["label"] == "error"}
    assert {n: r["error"] for n, r in errors.items()} == by_line
    good = [without_line(r) for r in got if r["label"] != "error"]
    assert good == [without_line(r) for r in records(clean_out)]
    assert [r["id"] for r in good] == ["g1", "g2", "g3"]
    return result


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_lines_in_a_responses_file(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row, name: str
) -> None:
    """Each bad line: one warning naming file:line:field, an error record; good lines intact."""
    src = BAD / name
    expected = bad_lines(src)
    assert expected
    assert_bad_lines_cost_only_themselves(run_cli, src, hash_index, tmp_path, expected)
    row(f"responses file: {name.removesuffix('.jsonl').replace('-', ' ')}", len(expected),
        f"exit 2; {len(expected)} one-line errors naming file:line (and field); "
        "3 of 3 good records identical to a clean run")


def test_a_5_mb_line(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row
) -> None:
    """A 5 MB response is refused quickly, naming its size; the other lines are checked."""
    sentence = "Aristotle was a Greek philosopher who was born in Stagira in 384 BC. "
    huge = (sentence * (5_000_000 // len(sentence) + 1))[:5_000_000]
    good = (BAD / "truncated.jsonl").read_bytes().split(b"\n")
    src = tmp_path / "huge.jsonl"
    src.write_bytes(good[0] + b"\n" + json.dumps({"id": "huge", "response": huge}).encode()
                    + b"\n" + good[2] + b"\n" + good[3] + b"\n")
    EXPECTED[src.name] = {2: "field 'response' is 5,000,000 characters long"}
    started = time.perf_counter()
    try:
        assert_bad_lines_cost_only_themselves(run_cli, src, hash_index, tmp_path,
                                              EXPECTED[src.name])
    finally:
        del EXPECTED[src.name]
    seconds = time.perf_counter() - started
    assert seconds < 30
    row("responses file: one 5 MB line", 1,
        f"exit 2 in {seconds:.1f} s; error names file:2 and the size; good records identical")


def test_a_line_longer_than_the_line_limit_is_never_held(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A line past the byte limit (binary file, no newlines) is skipped without reading it whole."""
    monkeypatch.setattr(textio, "MAX_LINE_BYTES", 1 << 20)
    monkeypatch.setattr(responses_module, "MAX_LINE_BYTES", 1 << 20)
    good = (BAD / "truncated.jsonl").read_bytes().split(b"\n")
    src = tmp_path / "long-line.jsonl"
    src.write_bytes(good[0] + b"\n" + b"\x00\xff" * (5 << 20) + b"\n" + good[2] + b"\n"
                    + good[3] + b"\n")
    EXPECTED[src.name] = {2: "line is longer than 1,048,576 bytes"}
    try:
        assert_bad_lines_cost_only_themselves(run_cli, src, hash_index, tmp_path,
                                              EXPECTED[src.name])
    finally:
        del EXPECTED[src.name]
    row("responses file: a 10 MB binary line over the line limit (lowered to 1 MiB)", 1,
        "exit 2; skipped in 1 MiB reads, error names file:2; good records identical")


@pytest.mark.parametrize("kind", ["directory", "missing"])
def test_responses_path_that_is_not_a_file(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path, row: Row, kind: str
) -> None:
    """A directory or a missing file: exit 2, one line, and the previous output is kept."""
    src = tmp_path / "responses.jsonl"
    if kind == "directory":
        src.mkdir()
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"schema_version": 1, "id": "from an earlier run"}\n')
    before = out.read_bytes()
    result = check(run_cli, src, hash_index, out)
    assert result.exit_code == 2
    words = "is a directory" if kind == "directory" else "no such file"
    assert_one_line_error(result, str(src), words)
    assert out.read_bytes() == before
    row(f"responses path is a {kind if kind == 'directory' else 'missing file'}", 1,
        f"exit 2; one line '{words}'; an existing --out file left as it was")


# -- corpus files --------------------------------------------------------------------


def index_state(path: Path) -> tuple[bytes, list[tuple[Any, ...]], bytes]:
    db = sqlite3.connect(f"file:{path / 'chunks.sqlite'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT * FROM chunks ORDER BY id").fetchall()
    finally:
        db.close()
    return (path / "meta.json").read_bytes(), rows, (path / "vectors.faiss").read_bytes()


@pytest.fixture
def index_copy_hash(hash_index: Path, tmp_path: Path) -> Path:
    target = tmp_path / "index"
    shutil.copytree(hash_index, target)
    return target


HOSTILE_CASES = {
    "billion-laughs.xml": "refused a DOCTYPE declaration",
    "external-entity.xml": "refused a DOCTYPE declaration",
    "external-dtd.xml": "refused a DOCTYPE declaration",
    "not-mediawiki.xml": "not a MediaWiki XML dump (root element <rss>",
    "malformed.xml": "malformed XML",
    "truncated.xml.bz2": "truncated compressed file",
    "corrupt.xml.bz2": "cannot read",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_CASES))
def test_hostile_corpus_leaves_the_index_untouched(
    run_cli: Any, fake_models: None, index_copy_hash: Path, row: Row, name: str
) -> None:
    """Hostile XML and broken .bz2: exit 2, one line naming the file; the old index intact."""
    before = index_state(index_copy_hash)
    started = time.perf_counter()
    result = run_cli("index", "build", HOSTILE / name, "--index", index_copy_hash, "-q")
    seconds = time.perf_counter() - started
    assert result.exit_code == 2
    assert_one_line_error(result, str(HOSTILE / name), HOSTILE_CASES[name])
    assert "passwd" not in result.stderr and "root:" not in result.stderr
    assert index_state(index_copy_hash) == before
    assert leftovers(index_copy_hash) == []
    assert seconds < 20
    row(f"corpus: {name}", 1,
        f"exit 2 in {seconds:.1f} s; one line '{HOSTILE_CASES[name]}'; previous index intact")


def test_pages_without_text_are_skipped_by_name(
    run_cli: Any, fake_models: None, tmp_path: Path, row: Row
) -> None:
    """Pages with no text (empty, deleted, no revision, markup only): named and skipped."""
    index = tmp_path / "index"
    result = run_cli("index", "build", BAD / "no-text.xml", "--index", index, "-q")
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in stderr_lines(result) if line.startswith("warning:")]
    for title in ("Empty element", "Deleted text", "No revision", "Markup only"):
        assert sum(f"page '{title}'" in w for w in warnings) == 1, warnings
    assert all(w.startswith(f"warning: {BAD / 'no-text.xml'}: page ") for w in warnings)
    assert "indexed 1 documents, 1 passages" in result.stderr
    row("corpus: MediaWiki pages with no text (empty, deleted, no revision, markup only)", 4,
        "each skipped with a warning naming file and page; the page with prose indexed")


def test_a_corpus_with_no_text_at_all_does_not_replace_an_index(
    run_cli: Any, fake_models: None, index_copy_hash: Path, tmp_path: Path, row: Row
) -> None:
    """A dump holding no page with text: exit 2, and the previous index is kept."""
    text = (BAD / "no-text.xml").read_text(encoding="utf-8")
    empty = tmp_path / "empty.xml"
    empty.write_text(text[: text.index("  <page>\n    <title>Has text")] + "</mediawiki>\n",
                     encoding="utf-8")
    before = index_state(index_copy_hash)
    result = run_cli("index", "build", empty, "--index", index_copy_hash, "-q")
    assert result.exit_code == 2
    assert_one_line_error(result, "no documents")
    assert index_state(index_copy_hash) == before
    assert leftovers(index_copy_hash) == []
    row("corpus: a dump with no page that has text", 1,
        "exit 2, one line 'no documents'; the previous index kept")


def test_bad_jsonl_documents_cost_only_themselves(
    run_cli: Any, fake_models: None, tmp_path: Path, row: Row
) -> None:
    """JSONL documents: bad lines (surrogates, wrong types, garbage) warned and skipped."""
    src = tmp_path / "docs.jsonl"
    src.write_bytes(
        b'{"id": "1", "title": "A", "text": "Aristotle was Greek."}\n'
        b'{"id": "2", "text": "Lone \\ud800 surrogate."}\n'
        b'{"id": "3", "text": 7}\n'
        b"\xff\xfe garbage\n"
        b'{"id": "4", "title": "B", "text": "Plato taught Aristotle."}\n'
    )
    index = tmp_path / "index"
    result = run_cli("index", "build", src, "--index", index, "-q")
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in stderr_lines(result) if line.startswith("warning:")]
    assert [w.split(":")[2] for w in warnings] == ["2", "3", "4"]
    assert "field 'text'" in warnings[0] and "surrogate" in warnings[0]
    assert "indexed 2 documents" in result.stderr
    row("corpus: JSONL documents with a surrogate escape, a wrong type, garbage", 3,
        "each skipped with a warning naming file:line(:field); the 2 good documents indexed")


def test_deep_nesting_and_huge_jsonl_document_lines_cost_only_themselves(
    run_cli: Any, fake_models: None, tmp_path: Path, row: Row
) -> None:
    """JSONL documents: a line nested 100,000 deep and one over the line cap are skipped."""
    from ceg_cli.check.responses import MAX_LINE_BYTES

    deep = '{"id": "deep", "text": "Nested.", "meta": ' + "[" * 100_000 + "]" * 100_000 + "}"
    huge = json.dumps({"id": "huge", "text": "x " * (MAX_LINE_BYTES // 2)})
    src = tmp_path / "docs.jsonl"
    lines = [json.dumps(GOOD_DOCUMENTS[0]), deep, huge, json.dumps(GOOD_DOCUMENTS[1])]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = tmp_path / "index"
    result = run_cli("index", "build", src, "--index", index, "-q")
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    warnings = [line for line in stderr_lines(result) if line.startswith("warning:")]
    assert warnings == [
        f"warning: {src}:2: JSON nested too deeply; line skipped",
        f"warning: {src}:3: line is longer than {MAX_LINE_BYTES:,} bytes; line skipped",
    ]
    assert "indexed 2 documents" in result.stderr
    assert sorted(passages_by_document(index)) == ["g1", "g2"]
    row("corpus: JSONL document lines nested 100,000 deep, and over 32 MiB", 2,
        "each skipped with a warning naming file:line; the good documents indexed")


def symlinked_docs(tmp_path: Path) -> Path:
    """A docs folder as an untrusted branch may hold it: links out, links in, a FIFO."""
    docs, elsewhere = tmp_path / "docs", tmp_path / "elsewhere"
    (docs / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nAristotle taught Alexander.\n")
    (docs / "sub" / "notes.txt").write_text("Plato founded the Academy.\n")
    (elsewhere / "secret.txt").write_text("The deploy key is hunter2.\n")
    (docs / "passwd.txt").symlink_to("/etc/passwd")  # the reproduction
    (docs / "secret.txt").symlink_to(elsewhere / "secret.txt")
    (docs / "outside").symlink_to(elsewhere, target_is_directory=True)
    (docs / "alias.md").symlink_to("guide.md")  # inside the folder: read
    (docs / "sub-alias").symlink_to("sub", target_is_directory=True)
    (docs / "sub" / "up").symlink_to("..", target_is_directory=True)  # a loop
    os.mkfifo(docs / "pipe.txt")  # reading it would block forever
    return docs


def test_folder_links_out_of_the_folder_are_not_followed(
    run_cli: Any, fake_models: None, tmp_path: Path, row: Row
) -> None:
    """Links leaving a folder source are skipped by name; --follow-symlinks reads them."""
    docs = symlinked_docs(tmp_path)
    index = tmp_path / "index"
    result = run_cli("index", "build", docs, "--index", index, "-q")
    assert result.exit_code == 0, result.stderr
    warnings = sorted(line for line in stderr_lines(result) if line.startswith("warning:"))
    assert warnings == [
        f"warning: {docs / 'outside'}: a symbolic link to {tmp_path / 'elsewhere'}, outside "
        "the folder; not read (--follow-symlinks reads it)",
        f"warning: {docs / 'passwd.txt'}: a symbolic link to /etc/passwd, outside the folder; "
        "file skipped (--follow-symlinks reads it)",
        f"warning: {docs / 'pipe.txt'}: not a regular file; file skipped",
        f"warning: {docs / 'secret.txt'}: a symbolic link to "
        f"{tmp_path / 'elsewhere' / 'secret.txt'}, outside the folder; file skipped "
        "(--follow-symlinks reads it)",
    ]
    passages = passages_by_document(index)
    # Links inside the folder are read; linked folders inside are read once, by their own path.
    assert sorted(passages) == ["alias.md", "guide.md", "sub/notes.txt"]
    stored = " ".join(p for texts in passages.values() for p in texts)
    assert "root:" not in stored and "hunter2" not in stored and "root:" not in result.stderr

    result = run_cli("index", "build", docs, "--index", index, "-q", "--follow-symlinks")
    assert result.exit_code == 0, result.stderr
    assert [line for line in stderr_lines(result) if line.startswith("warning:")] == [
        f"warning: {docs / 'pipe.txt'}: not a regular file; file skipped"
    ]
    passages = passages_by_document(index)
    # Each real folder once: sub-alias and sub/up lead to folders already read.
    assert sorted(passages) == ["alias.md", "guide.md", "outside/secret.txt", "passwd.txt",
                                "secret.txt", "sub/notes.txt"]
    assert any(text.startswith("root:") for text in passages["passwd.txt"])
    row("corpus: a folder with links to /etc/passwd and to a folder outside, links inside, "
        "a link loop, a FIFO", 2,
        "links out skipped with a warning naming each (read with --follow-symlinks, each "
        "folder once); links inside read; the FIFO skipped by name")


def prose_line(chars: int) -> str:
    """Real prose (the mini dump's articles) as one line of ``chars`` characters or more.

    Shaped like a book or a log pasted into one JSONL ``text`` with its line
    breaks lost: sentence after sentence, no newline.
    """
    from conftest import MINI_WIKI

    from ceg_cli.corpus import iter_documents

    prose = " ".join(" ".join(doc.text.split()) for doc in iter_documents(MINI_WIKI))
    return " ".join([prose] * (chars // (len(prose) + 1) + 1))


def jsonl_documents(path: Path, *records: dict[str, str]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    return path


def passages_by_document(index: Path) -> dict[str, list[str]]:
    db = sqlite3.connect(f"file:{index / 'chunks.sqlite'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT doc_id, text FROM chunks ORDER BY id").fetchall()
    finally:
        db.close()
    out: dict[str, list[str]] = {}
    for doc_id, text in rows:
        out.setdefault(doc_id, []).append(text)
    return out


GOOD_DOCUMENTS = (
    {"id": "g1", "title": "Plato", "text": "Plato taught Aristotle in Athens."},
    {"id": "g2", "title": "Lyceum", "text": "Aristotle founded the Lyceum. It was a school."},
)


def test_a_20_mb_document_is_indexed_beside_the_good_ones(
    run_cli: Any, fake_models: None, tmp_path: Path, row: Row
) -> None:
    """A 20 MB one-line text: split in blocks, indexed whole; it once aborted the build."""
    book = prose_line(20_000_000)
    src = jsonl_documents(tmp_path / "docs.jsonl", GOOD_DOCUMENTS[0],
                          {"id": "book", "title": "A long book", "text": book}, GOOD_DOCUMENTS[1])
    index = tmp_path / "index"
    started = time.perf_counter()
    result = run_cli("index", "build", src, "--index", index, "-q")
    seconds = time.perf_counter() - started
    assert result.exit_code == 0, result.stderr
    assert "warning" not in result.stderr
    assert "indexed 3 documents" in result.stderr
    passages = passages_by_document(index)
    assert sorted(passages) == ["book", "g1", "g2"]
    # Every word of the book is in its passages, once, in order.
    assert [w for p in passages["book"] for w in p.split()] == book.split()
    row(f"corpus: a JSONL document of {len(book.encode()) / 1e6:.0f} MB on one line, "
        "beside 2 good ones", 1,
        f"exit 0 in {seconds:.0f} s; all 3 indexed, {len(passages['book']):,} passages of it")


def test_a_document_that_cannot_be_split_is_skipped_by_name(
    run_cli: Any, fake_models: None, tmp_path: Path, row: Row, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document that still trips NLTK's time limit costs only itself, with a warning."""
    import ceg_cli.index.build.chunking

    real = ceg_cli.index.build.chunking.sentence_spans

    def spans(text: str, language: str | None = None) -> list[tuple[int, int]]:
        if text.startswith("Pathological"):
            # What NLTK's regex guard raises past its limit.
            raise TimeoutError("regular-expression match exceeded its 5.0s time limit")
        return real(text, language)

    monkeypatch.setattr(ceg_cli.index.build.chunking, "sentence_spans", spans)
    src = jsonl_documents(tmp_path / "docs.jsonl", GOOD_DOCUMENTS[0],
                          {"id": "bad", "title": "Bad", "text": "Pathological. Text."},
                          GOOD_DOCUMENTS[1])
    index = tmp_path / "index"
    result = run_cli("index", "build", src, "--index", index, "-q")
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in stderr_lines(result) if line.startswith("warning:")]
    assert warnings == [
        f"warning: {src}: document 'bad' ('Bad') of 19 characters: sentence splitting ran "
        "past NLTK's time limit; document skipped"
    ]
    assert "indexed 2 documents" in result.stderr
    assert sorted(passages_by_document(index)) == ["g1", "g2"]
    row("corpus: a document whose sentence splitting still runs out of time", 1,
        "skipped with a warning naming file and document; the others indexed")


# -- index directories ---------------------------------------------------------------


def other_index(tmp_path: Path, dimension: int = 384, docs: int = 3) -> Path:
    src = tmp_path / "other.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": f"Document {i}."}) + "\n"
                           for i in range(docs)), encoding="utf-8")
    from conftest import HashEmbedder

    target = tmp_path / "other-index"
    build_index([src], target, BuildOptions(), embedder=HashEmbedder(dimension))
    return target


def break_index(index: Path, how: str, tmp_path: Path) -> str:
    """Break ``index`` in one way; returns words its one-line error must hold."""
    meta_path = index / "meta.json"
    if how.startswith("missing-"):
        (index / how.removeprefix("missing-")).unlink()
        return how.removeprefix("missing-")
    if how == "newer-format":
        meta = json.loads(meta_path.read_text())
        meta["format_version"] = 99
        meta_path.write_text(json.dumps(meta))
        return "index format 99 is newer than this ceg reads"
    if how == "truncated-meta":
        meta_path.write_bytes(meta_path.read_bytes()[:40])
        return "meta.json: unreadable"
    if how == "garbage-store":
        (index / "chunks.sqlite").write_bytes(b"not a database" * 100)
        return "chunks.sqlite: unreadable"
    if how == "garbage-vectors":
        (index / "vectors.faiss").write_bytes(b"\0" * 100)
        return "unreadable FAISS index"
    if how == "vectors-of-another-index":
        shutil.copy(other_index(tmp_path) / "vectors.faiss", index / "vectors.faiss")
        return "is inconsistent: vectors.faiss holds 3 vectors"
    if how == "vectors-of-another-dimension":
        meta = json.loads(meta_path.read_text())
        other = other_index(tmp_path, dimension=8, docs=meta["counts"]["chunks"])
        shutil.copy(other / "vectors.faiss", index / "vectors.faiss")
        return "vectors.faiss has dimension 8, meta.json says 384"
    if how == "built-with-another-model":
        # Built with a model of dimension 8; the model of that name now gives 384.
        meta = json.loads(meta_path.read_text())
        other = other_index(tmp_path, dimension=8, docs=meta["counts"]["chunks"])
        shutil.copy(other / "vectors.faiss", index / "vectors.faiss")
        meta["model"]["dimension"] = 8
        # The vectors file is the one its meta.json describes: only the model changed.
        meta["faiss"] = json.loads((other / "meta.json").read_text())["faiss"]
        meta_path.write_text(json.dumps(meta))
        return "has dimension 8 but model test/hash-embedder gives 384"
    raise AssertionError(how)


INDEX_FAULTS = [
    "missing-meta.json", "missing-vectors.faiss", "missing-chunks.sqlite", "newer-format",
    "truncated-meta", "garbage-store", "garbage-vectors", "vectors-of-another-index",
    "vectors-of-another-dimension", "built-with-another-model",
]


@pytest.mark.parametrize("how", INDEX_FAULTS)
def test_broken_index_stops_the_run_before_any_output(
    run_cli: Any, hash_model: None, index_copy_hash: Path, tmp_path: Path, row: Row, how: str
) -> None:
    """A broken index directory: exit 2, one line saying what is wrong; no output written."""
    words = break_index(index_copy_hash, how, tmp_path)
    out = tmp_path / "out.jsonl"
    result = check(run_cli, BAD / "truncated.jsonl", index_copy_hash, out)
    assert result.exit_code == 2, result.stderr
    line = assert_one_line_error(result, words)
    assert "rebuild" in line or "upgrade" in line
    assert not out.exists()
    row(f"index: {how.replace('-', ' ')}", 1, f"exit 2 before any output; one line '{words}'")


def test_appending_with_another_model_is_refused(
    run_cli: Any, fake_models: None, index_copy_hash: Path, row: Row
) -> None:
    """--append with another --model: exit 2 naming both models; the index intact."""
    before = index_state(index_copy_hash)
    result = run_cli("index", "build", BAD / "no-text.xml", "--index", index_copy_hash,
                     "--append", "--model", "other/model", "-q")
    assert result.exit_code == 2
    assert_one_line_error(result, "test/hash-embedder", "other/model")
    assert index_state(index_copy_hash) == before
    row("index: --append with another model", 1, "exit 2 naming both models; index intact")
