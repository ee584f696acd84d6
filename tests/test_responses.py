"""Reading responses files: every bad line kind is kept as an error, nothing is lost."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from ceg_cli.check.pipeline import ResponseInput
from ceg_cli.check.responses import FieldNames, parse_line, read_responses
from ceg_cli.errors import InputError

GOOD_BEFORE = b'{"id": "before", "response": "Aristotle was Greek."}'
GOOD_AFTER = b'{"id": "after", "response": "Plato taught him.", "question": "Who?"}'


def write(path: Path, *lines: bytes, end: bytes = b"\n") -> Path:
    path.write_bytes(b"".join(line + end for line in lines))
    return path


# Each bad line kind: the raw line, the field its error must name (None when
# the line is not an object at all), words the message must contain, the id
# the error item carries.
BAD_LINES = [
    pytest.param(b"\xff\xfe{}", None, "not valid UTF-8", 2, id="not-utf8"),
    pytest.param(b'{"response": "unterminated', None, "not valid JSON", 2, id="not-json"),
    pytest.param(b'["response", "x"]', None, "expected a JSON object, got array", 2, id="array"),
    pytest.param(b'"just a string"', None, "expected a JSON object, got string", 2, id="string"),
    pytest.param(b'{"id": "m", "question": "q"}', "response", "is missing", "m", id="missing"),
    pytest.param(b'{"id": "w", "response": 42}', "response", "must be a string, got number",
                 "w", id="response-number"),
    pytest.param(b'{"response": ["a", "b"]}', "response", "must be a string, got array", 2,
                 id="response-array"),
    pytest.param(b'{"response": null}', "response", "must be a string, got null", 2,
                 id="response-null"),
    pytest.param(b'{"id": "e", "response": ""}', "response", "is empty", "e", id="empty"),
    pytest.param(b'{"id": "s", "response": " \\n\\t "}', "response", "is empty", "s",
                 id="whitespace-only"),
    pytest.param(b'{"id": 1.5, "response": "x."}', "id", "must be a string or an integer", 2,
                 id="id-float"),
    pytest.param(b'{"id": true, "response": "x."}', "id", "got boolean", 2, id="id-bool"),
    pytest.param(b'{"id": {"a": 1}, "response": "x."}', "id", "got object", 2, id="id-object"),
    pytest.param(b'{"id": "q", "response": "x.", "question": 7}', "question",
                 "must be a string, got number", "q", id="question-number"),
    pytest.param(b'{"id": "p", "response": "x.", "prompt": ["a"]}', "prompt",
                 "must be a string, got array", "p", id="prompt-array"),
]


@pytest.mark.parametrize(("raw", "field", "words", "error_id"), BAD_LINES)
def test_bad_line_is_an_error_naming_file_line_and_field(
    tmp_path: Path, raw: bytes, field: str | None, words: str, error_id: object
) -> None:
    path = write(tmp_path / "responses.jsonl", GOOD_BEFORE, raw, GOOD_AFTER)
    items = list(read_responses(path))

    assert [i.line for i in items] == [1, 2, 3]
    before, bad, after = items
    assert bad.error is not None
    assert bad.error.startswith(f"{path}:2: "), bad.error
    assert words in bad.error
    if field is not None:
        assert f"'{field}'" in bad.error
    assert bad.id == error_id
    assert bad.response == ""  # an error item is never checked
    # The good lines around it are read in full.
    assert before == ResponseInput(
        "before", 1, "Aristotle was Greek.", None,
        {"id": "before", "response": "Aristotle was Greek."}, read={"response": "response"},
    )
    assert after.error is None
    assert (after.id, after.response, after.question) == ("after", "Plato taught him.", "Who?")


def test_error_item_keeps_the_parsed_fields() -> None:
    # The raw values of a bad object line are carried to its error record.
    item = parse_line(b'{"id": "x", "response": 5, "topic": "t"}', 4, "f.jsonl")
    assert item.error == "f.jsonl:4: field 'response' must be a string, got number"
    assert dict(item.fields) == {"id": "x", "response": 5, "topic": "t"}


def test_json_nested_too_deeply_is_an_error_not_a_crash() -> None:
    item = parse_line(b"[" * 100_000 + b"]" * 100_000, 1, "deep.jsonl")
    assert item.error is not None and item.error.startswith("deep.jsonl:1: ")


def test_id_defaults_to_the_line_number_and_keeps_its_type(tmp_path: Path) -> None:
    path = write(
        tmp_path / "r.jsonl",
        b'{"response": "A."}',
        b'{"id": 7, "response": "B."}',
        b'{"id": "7", "response": "C."}',
    )
    assert [i.id for i in read_responses(path)] == [1, 7, "7"]


def test_all_fields_are_carried(tmp_path: Path) -> None:
    obj = {"id": "a", "response": "A.", "model": "gpt", "meta": {"k": [1, 2]}, "n": None}
    path = write(tmp_path / "r.jsonl", json.dumps(obj).encode())
    (item,) = read_responses(path)
    assert dict(item.fields) == obj


def test_prompt_is_the_question_when_question_is_absent(tmp_path: Path) -> None:
    path = write(
        tmp_path / "r.jsonl",
        b'{"response": "A.", "prompt": "from prompt"}',
        b'{"response": "B.", "question": "from question", "prompt": "from prompt"}',
        b'{"response": "C.", "question": null, "prompt": "from prompt"}',
        b'{"response": "D."}',
        b'{"response": "E.", "question": ""}',
    )
    questions = [i.question for i in read_responses(path)]
    assert questions == ["from prompt", "from question", "from prompt", None, None]


def test_blank_lines_are_skipped_and_line_numbers_stay_physical(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(
        b'\n{"response": "A."}\r\n  \n\t\r\n{"response": "B."}\n\n'
    )
    items = list(read_responses(path))
    assert [(i.line, i.response, i.error) for i in items] == [(2, "A.", None), (5, "B.", None)]


def test_last_line_without_newline_is_read(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"response": "A."}\n{"response": "B."}')
    assert [i.response for i in read_responses(path)] == ["A.", "B."]


def test_field_names_map_response_and_question(tmp_path: Path) -> None:
    path = write(
        tmp_path / "r.jsonl",
        b'{"answer": "A.", "q": "asked", "question": "not this one"}',
        b'{"response": "ignored", "q": "asked"}',
        b'{"answer": 3}',
    )
    names = FieldNames(response="answer", question=("q",))
    first, second, third = read_responses(path, names)
    assert (first.response, first.question, first.error) == ("A.", "asked", None)
    assert second.error == f"{path}:2: field 'answer' is missing"
    assert third.error == f"{path}:3: field 'answer' must be a string, got number"


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b'{"id": "s1", "response": "A."}\nnot json\n{"response": "C."}\n'
    fake = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", fake)
    items = list(read_responses("-"))
    assert [(i.id, i.response) for i in items] == [("s1", "A."), (2, ""), (3, "C.")]
    assert items[1].error is not None and items[1].error.startswith("<stdin>:2: not valid JSON")


def test_a_directory_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        list(read_responses(tmp_path))


def test_a_missing_file_is_an_input_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(InputError, match="no such file") as info:
        list(read_responses(missing))
    assert str(missing) in str(info.value)


def test_a_utf8_byte_order_mark_on_the_first_line_is_ignored(tmp_path: Path) -> None:
    path = write(tmp_path / "bom.jsonl", b"\xef\xbb\xbf" + GOOD_BEFORE, GOOD_AFTER)
    items = list(read_responses(path))
    assert [i.error for i in items] == [None, None]
    assert [i.id for i in items] == ["before", "after"]
