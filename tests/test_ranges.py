"""Sources split into ranges (``ceg_cli.corpus.ranges``), as a Ray build shares them out.

Read one after another, the ranges must give exactly the documents and the
warnings of the whole source read on one machine: for JSONL cut at line
boundaries (bad lines, ids from line numbers and a byte-order mark included),
for a folder's files (a link out of the folder included), for a multistream
dump's streams, and for the sources that stay one range.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from conftest import MINI_WIKI
from multistream_fixture import make_multistream

import ceg_cli.corpus.ranges as ranges
from ceg_cli.corpus import iter_documents
from ceg_cli.corpus.ranges import plan_digest, plan_ranges, read_part


def _read_whole(path: Path, **kwargs: object) -> tuple[list[tuple[object, ...]], list[str]]:
    warnings: list[str] = []
    docs = list(iter_documents(path, on_warning=warnings.append, **kwargs))  # type: ignore[arg-type]
    return [(d.id, d.title, d.text, d.url) for d in docs], warnings


def _read_ranges(plan: list[ranges.SourceRange]) -> tuple[list[tuple[object, ...]], list[str]]:
    warnings: list[str] = []
    docs = []
    for part in plan:
        warnings += part.warnings
        docs += list(read_part(part, on_warning=warnings.append))
    return [(d.id, d.title, d.text, d.url) for d in docs], warnings


def _jsonl(path: Path, lines: int) -> Path:
    rows = []
    for i in range(lines):
        record: dict[str, object] = {"id": f"d{i}", "title": f"Topic {i}",
                                     "text": f"Topic {i} was described in {1000 + i}. " * 3}
        if i % 7 == 3:
            del record["id"]  # its id is its line number
        rows.append(json.dumps(record))
        if i % 11 == 5:
            rows.append('{"id": "cut", "text": "a line cut sho')  # warned with its line number
        if i % 13 == 8:
            rows.append("")
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(rows).encode("utf-8") + b"\n")
    return path


def test_jsonl_ranges_cut_at_lines_read_as_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ranges, "RANGE_BYTES", 700)
    monkeypatch.setattr(ranges, "_BLOCK", 1000)  # cuts fall across block ends too
    source = _jsonl(tmp_path / "docs.jsonl", 60)
    plan = plan_ranges([source])
    assert len(plan) > 8
    data = source.read_bytes()
    assert [p.start for p in plan[1:]] == [p.end for p in plan[:-1]] and plan[-1].end is None
    for part in plan:
        assert part.start == 0 or data[part.start - 1:part.start] == b"\n"
        assert part.line == data[:part.start].count(b"\n") + 1
    assert sum(p.size for p in plan) == len(data)
    docs, warnings = _read_ranges(plan)
    whole_docs, whole_warnings = _read_whole(source)
    assert docs == whole_docs and warnings == whole_warnings
    assert len(warnings) == 5 and warnings[0].endswith(
        "docs.jsonl:7: invalid JSON (Unterminated string starting at at column 23); line skipped")
    assert ("4", "Topic 3") in [(d[0], d[1]) for d in docs]  # id from its line number


def test_a_gzip_jsonl_file_and_a_dump_without_index_are_one_range(tmp_path: Path) -> None:
    plain = _jsonl(tmp_path / "docs.jsonl", 20)
    packed = tmp_path / "docs.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    plan = plan_ranges([packed, MINI_WIKI])
    assert [(p.source, p.kind, p.start, p.end) for p in plan] == [
        (0, "jsonl", 0, None), (1, "mediawiki", 0, None)]
    docs, warnings = _read_ranges(plan)
    jsonl_docs, jsonl_warnings = _read_whole(packed)
    wiki_docs, _ = _read_whole(MINI_WIKI)
    assert docs == jsonl_docs + wiki_docs and warnings == jsonl_warnings


def test_multistream_ranges_are_groups_of_whole_streams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ranges, "RANGE_PAGES", 3)  # streams of 2, 2, 2, 1 pages: 4, then 3
    dump, index = make_multistream(MINI_WIKI, tmp_path / "ms", per_stream=2)
    plan = plan_ranges([dump])
    assert [(p.first_page, p.pages) for p in plan] == [(0, 4), (4, 3)]
    assert plan[0].index == str(index) and plan[-1].end is None
    assert sum(p.size for p in plan) == dump.stat().st_size
    assert _read_ranges(plan) == _read_whole(MINI_WIKI)


def test_folder_ranges_are_runs_of_files_in_the_readers_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ranges, "RANGE_FILES", 3)
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    for i in range(8):
        (folder / ("sub" if i % 2 else ".") / f"page{i}.md").write_text(
            f"# Page {i}\n\nPage {i} is about topic {i}.\n", encoding="utf-8")
    (folder / "empty.txt").write_text("  \n", encoding="utf-8")
    outside = tmp_path / "secret.txt"
    outside.write_text("not for the index", encoding="utf-8")
    os.symlink(outside, folder / "link.txt")
    plan = plan_ranges([folder])
    assert [len(p.files) for p in plan] == [3, 3, 3]
    assert len(plan[0].warnings) == 1 and "outside the folder" in plan[0].warnings[0]
    assert _read_ranges(plan) == _read_whole(folder)


def test_the_plan_digest_changes_with_the_ranges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _jsonl(tmp_path / "docs.jsonl", 30)
    digest = plan_digest(plan_ranges([source]))
    assert plan_digest(plan_ranges([source])) == digest
    monkeypatch.setattr(ranges, "RANGE_BYTES", 500)
    assert plan_digest(plan_ranges([source])) != digest
