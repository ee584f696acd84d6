"""Writing records as they finish, and reading back what an interrupted run left."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ceg_cli.errors import ExitStatus, InputError
from ceg_cli.report.output import OutputError, RecordWriter, read_finished


def record(n: int) -> dict[str, Any]:
    return {"schema_version": 1, "id": f"r{n}", "line": n, "label": "factual",
            "response": f"Réponse {n}.\nLine two."}


def line(n: int) -> bytes:
    return (json.dumps(record(n), ensure_ascii=False) + "\n").encode("utf-8")


# -- read_finished -------------------------------------------------------------


def test_torn_last_line_is_dropped_and_the_file_cut_to_the_last_complete_line(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    complete = line(1) + line(2) + line(3)
    out.write_bytes(complete + line(4)[:25])
    assert list(read_finished(out)) == [record(1), record(2), record(3)]
    assert out.read_bytes() == complete


@pytest.mark.parametrize("keep", [1, 5, 18, 19, 20, 40, -1])
def test_torn_anywhere_in_the_line(tmp_path: Path, keep: int) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(line(1) + line(2)[:keep])
    assert list(read_finished(out)) == [record(1)]
    assert out.read_bytes() == line(1)


def test_torn_first_line(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(line(1)[:30])
    assert list(read_finished(out)) == []
    assert out.read_bytes() == b""


def test_torn_inside_a_multibyte_character(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    torn = line(2)
    cut = torn.index("é".encode()) + 1  # half of a two-byte character
    out.write_bytes(line(1) + torn[:cut])
    assert list(read_finished(out)) == [record(1)]
    assert out.read_bytes() == line(1)


def test_a_whole_record_without_its_newline_is_dropped_too(tmp_path: Path) -> None:
    # The newline is written with the record; without it the write was cut.
    out = tmp_path / "out.jsonl"
    out.write_bytes(line(1) + line(2)[:-1])
    assert list(read_finished(out)) == [record(1)]
    assert out.read_bytes() == line(1)


def test_complete_file_is_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(line(1) + line(2))
    before = out.stat().st_mtime_ns
    assert [r["id"] for r in read_finished(out)] == ["r1", "r2"]
    assert out.read_bytes() == line(1) + line(2)
    assert out.stat().st_mtime_ns == before


def test_missing_or_empty_file_has_no_records(tmp_path: Path) -> None:
    assert list(read_finished(tmp_path / "missing.jsonl")) == []
    assert not (tmp_path / "missing.jsonl").exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert list(read_finished(empty)) == []


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b'{"id": 1, "response": "A."}\n{"id": 2, "response": "B."}\n',
                     id="responses-file"),
        pytest.param(b"# notes\nsome text\n", id="text"),
        pytest.param(b"[1, 2]\n", id="json-array"),
        pytest.param(line(1) + b"\n" + line(2), id="blank-line-inside"),
        pytest.param(line(1) + b"not json\n" + line(3), id="garbage-inside"),
        pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00", id="binary"),
        pytest.param(b"my precious notes, no newline at the end", id="one-line-no-newline"),
        pytest.param(b'{"id": 1, "response": "A."}', id="one-object-no-newline"),
    ],
)
def test_refuses_a_file_that_is_not_ceg_output_and_leaves_it_alone(
    tmp_path: Path, content: bytes
) -> None:
    out = tmp_path / "notes.jsonl"
    out.write_bytes(content)
    with pytest.raises(InputError, match="refusing to resume") as info:
        list(read_finished(out))
    assert info.value.exit_status == ExitStatus.USAGE
    assert str(out) in str(info.value)
    assert out.read_bytes() == content


# -- RecordWriter --------------------------------------------------------------


def test_each_record_is_on_disk_while_the_writer_is_open(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "out.jsonl"  # the folder is created
    writer = RecordWriter(out)
    try:
        writer.write(record(1))
        assert out.read_bytes() == line(1)
        writer.write(record(2))
        assert out.read_bytes() == line(1) + line(2)
        # What a resumed run would see if this one died now.
        assert list(read_finished(out)) == [record(1), record(2)]
    finally:
        writer.close()
    assert out.read_bytes() == line(1) + line(2)


def test_writer_overwrites_unless_appending(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(line(1))
    appender = RecordWriter(out, append=True)
    appender.write(record(2))
    appender.close()
    assert out.read_bytes() == line(1) + line(2)
    writer = RecordWriter(out)
    writer.write(record(3))
    writer.close()
    assert out.read_bytes() == line(3)


def test_writer_to_stdout_flushes_and_does_not_close_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    writer = RecordWriter(None)
    writer.write(record(1))
    assert capsys.readouterr().out == line(1).decode("utf-8")
    writer.close()
    print("still open")
    assert capsys.readouterr().out == "still open\n"


def test_unwritable_output_is_an_output_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(OutputError, match="cannot write") as info:
        RecordWriter(blocker / "out.jsonl")
    assert info.value.exit_status == ExitStatus.RUNTIME


def test_records_ceg_writes_start_the_way_resume_expects(tmp_path: Path) -> None:
    # read_finished recognizes a torn line of ours by its first bytes.
    from ceg_cli.check.pipeline import CheckedResponse, ResponseInput
    from ceg_cli.report.records import to_record

    judge = {"name": "test", "method": "test"}
    out = tmp_path / "out.jsonl"
    writer = RecordWriter(out)
    writer.write(to_record(CheckedResponse(ResponseInput("a", 1, "A.")), judge))
    writer.write(to_record(CheckedResponse(ResponseInput(2, 2, error="bad"), (), "error"), judge))
    writer.close()
    lines = out.read_bytes().splitlines(keepends=True)
    assert len(lines) == 2
    for raw in lines:
        assert raw.startswith(b'{"schema_version": ')
        out.write_bytes(lines[0] + raw[:30])
        assert len(list(read_finished(out))) == 1
        assert out.read_bytes() == lines[0]
