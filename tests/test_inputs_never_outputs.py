"""Inputs are never outputs (issue 34, items 1-3, 11, 13 and part of 14).

Each case is a probe command of the issue, run as the real ``ceg`` command
(in-process, or in a subprocess where the old behaviour hung) on the issue's
two-document corpus, indexed with the fake model (``HashEmbedder``): the
refused ones exit 2 with one line and change no file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

DOCS = [
    {"id": "a", "title": "Alpha", "text": "Alpha is a town in France. It was founded in 1200."},
    {"id": "b", "title": "Beta", "text": "Beta is a river in Spain."},
]
#: A labelled dataset for ``ceg eval`` in the generic format.
LABELLED = [
    {"id": "q1", "response": "Alpha is a town in France.", "label": True},
    {"id": "q2", "response": "Beta is a mountain in Peru.", "label": False},
]
RESPONSES = [{"id": "r1", "question": "Where is Alpha?", "response": "Alpha is a town in France."}]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def digests(*roots: Path) -> dict[str, str]:
    """sha256 of every file at or under ``roots`` (symlinks as their target's name)."""
    found: dict[str, str] = {}
    for root in roots:
        for path in [root, *sorted(root.rglob("*"))] if root.is_dir() else [root]:
            if path.is_symlink():
                found[str(path)] = "-> " + os.readlink(path)
            elif path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif path.is_dir():
                found[str(path)] = "dir"
    return found


def one_line(result: Result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def refused(result: Result, *words: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    line = one_line(result)
    for word in words:
        assert word in line, line
    return line


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CEG_INDEX", raising=False)
    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))
    write_jsonl(tmp_path / "docs.jsonl", DOCS)
    return tmp_path


@pytest.fixture
def idx(here: Path, run_cli: Any, fake_models: None) -> Path:
    """The issue's smallest setup: ``ceg index build docs.jsonl --index idx -q``."""
    result = run_cli("index", "build", "docs.jsonl", "--index", "idx", "-q")
    assert result.exit_code == 0, result.stderr
    return here / "idx"


# -- 1: ceg eval writes over its own dataset -------------------------------------------


@pytest.mark.parametrize(
    "outputs",
    [
        ["--out", "ev.jsonl"],
        ["--json", "ev.jsonl"],
        ["--out", "link.jsonl"],
        ["--json", "./sub/../ev.jsonl"],
        ["--out", "x.json", "--json", "x.json"],
    ],
    ids=["out", "json", "symlink", "other-spelling", "out-is-json"],
)
def test_eval_refuses_to_write_over_its_dataset_or_one_output_twice(
    idx: Path, run_cli: Any, outputs: list[str]
) -> None:
    data = write_jsonl(idx.parent / "ev.jsonl", LABELLED)
    (idx.parent / "link.jsonl").symlink_to("ev.jsonl")
    (idx.parent / "sub").mkdir()
    before = digests(idx.parent)
    result = run_cli("eval", "ev.jsonl", "--index", "idx", *outputs, "-q")
    refused(result, outputs[-2])
    assert digests(idx.parent) == before
    assert data.read_text(encoding="utf-8").count("\n") == 2


def test_eval_still_writes_its_outputs_elsewhere(idx: Path, run_cli: Any) -> None:
    write_jsonl(idx.parent / "ev.jsonl", LABELLED)
    result = run_cli("eval", "ev.jsonl", "--index", "idx", "--out", "p.jsonl",
                     "--json", "m.json", "-q")
    assert result.exit_code == 0, result.stderr
    assert len((idx.parent / "p.jsonl").read_text(encoding="utf-8").splitlines()) == 2
    assert json.loads((idx.parent / "m.json").read_text(encoding="utf-8"))["responses"]


def test_eval_refuses_an_output_inside_its_index(idx: Path, run_cli: Any) -> None:
    write_jsonl(idx.parent / "ev.jsonl", LABELLED)
    before = digests(idx)
    result = run_cli("eval", "ev.jsonl", "--index", "idx", "--json", "idx/meta.json", "-q")
    refused(result, "--json idx/meta.json", "inside the index")
    assert digests(idx) == before


# -- 2: ceg check and ceg report write over the index they read ------------------------


@pytest.mark.parametrize(
    ("option", "path"),
    [
        ("--out", "idx/meta.json"),
        ("--report", "idx/vectors.faiss"),
        ("--junit", "idx/chunks.sqlite"),
        ("--summary", "idx/summary.md"),  # a new file in an index folder corrupts it too
        ("--out", "idx/lexical/new.jsonl"),
        ("--out", "meta-link.json"),  # a hard link to idx/meta.json
        ("--report", "idx-link/vectors.faiss"),  # the index through a symlinked folder
    ],
)
def test_check_refuses_an_output_that_is_a_file_of_its_index(
    idx: Path, run_cli: Any, option: str, path: str
) -> None:
    here = idx.parent
    write_jsonl(here / "r.jsonl", RESPONSES)
    os.link(idx / "meta.json", here / "meta-link.json")
    (here / "idx-link").symlink_to("idx")
    before = digests(idx, here / "meta-link.json")
    result = run_cli("check", "r.jsonl", "--index", "idx", option, path, "-q")
    refused(result, f"{option} {path}")
    assert digests(idx, here / "meta-link.json") == before
    assert run_cli("index", "info", "--index", "idx").exit_code == 0


def test_check_library_refuses_out_inside_the_index(idx: Path) -> None:
    from ceg_cli.check.run import RunSettings
    from ceg_cli.errors import UsageError

    with pytest.raises(UsageError, match="inside the index"):
        RunSettings.resolve(responses="r.jsonl", index=idx, out=idx / "out.jsonl")


@pytest.fixture
def records(idx: Path, run_cli: Any) -> Path:
    """``rr.jsonl``: what ``ceg check`` wrote for the issue's responses."""
    write_jsonl(idx.parent / "r.jsonl", RESPONSES)
    result = run_cli("check", "r.jsonl", "--index", "idx", "--out", "rr.jsonl", "-q")
    assert result.exit_code == 0, result.stderr
    return idx.parent / "rr.jsonl"


@pytest.mark.parametrize(
    "args",
    [
        # The records name no index: any folder that holds a ceg index is refused ...
        ["--out", "idx/chunks.sqlite"],
        ["--out", "idx/report.html"],
        # ... and with --index, its files under any name.
        ["--index", "idx", "--out", "idx-link/meta.json"],
    ],
)
def test_report_refuses_an_output_inside_an_index(
    idx: Path, records: Path, run_cli: Any, args: list[str]
) -> None:
    (idx.parent / "idx-link").symlink_to("idx")
    before = digests(idx, records)
    result = run_cli("report", "rr.jsonl", *args)
    refused(result, f"--out {args[-1]}", "inside the index")
    assert digests(idx, records) == before


def test_report_and_check_still_write_beside_the_index(
    idx: Path, records: Path, run_cli: Any
) -> None:
    result = run_cli("report", "rr.jsonl", "--index", "idx", "--out", "idx-report.html")
    assert result.exit_code == 0, result.stderr
    assert (idx.parent / "idx-report.html").stat().st_size > 0


# -- 3: a build that reads its own index ------------------------------------------------


def test_build_of_the_index_from_itself_is_refused(idx: Path, run_cli: Any) -> None:
    # The issue's ./index held a README.md (a file an index folder may keep): the
    # build replaced the whole index by one passage of it.
    (idx / "README.md").write_text("# My index\n\nNotes about this index.\n", encoding="utf-8")
    before = digests(idx)
    result = run_cli("index", "build", "idx", "--index", "idx", "-q")
    refused(result, "idx: is the index being built")
    assert digests(idx) == before
    # The default --index is ./index: `ceg index build index`.
    (idx.parent / "idx").rename(idx.parent / "index")
    before = digests(idx.parent / "index")
    refused(run_cli("index", "build", "index", "-q"), "index: is the index being built")
    assert digests(idx.parent / "index") == before


def test_build_of_a_source_inside_the_target_is_refused(idx: Path, run_cli: Any) -> None:
    (idx / "README.md").write_text("# notes\n\nSome notes.\n", encoding="utf-8")
    before = digests(idx)
    result = run_cli("index", "build", "./idx/README.md", "docs.jsonl", "--index", "idx", "-q")
    refused(result, "idx/README.md: lies inside the index being built")
    assert digests(idx) == before


def test_build_into_a_folder_inside_a_source_is_refused(here: Path, run_cli: Any,
                                                        fake_models: None) -> None:
    (here / "notes.md").write_text("# Gamma\n\nGamma is a lake in Chile.\n", encoding="utf-8")
    before = digests(here)
    result = run_cli("index", "build", ".", "--index", "sub/idx", "-q")
    refused(result, ".: holds the index being built")
    assert digests(here) == before


# -- 11: one source under two spellings ----------------------------------------------------


def test_the_same_source_under_several_names_is_indexed_once(
    here: Path, run_cli: Any, fake_models: None
) -> None:
    (here / "r").mkdir()
    os.symlink("docs.jsonl", here / "link.jsonl")
    os.link(here / "docs.jsonl", here / "hard.jsonl")
    result = run_cli("index", "build", "docs.jsonl", "./../" + here.name + "/docs.jsonl",
                     "link.jsonl", "hard.jsonl", "--index", "idx", "-q")
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 3, result.stderr
    for name in (f"../{here.name}/docs.jsonl", "link.jsonl", "hard.jsonl"):
        assert any(f"{name}: is the same file as docs.jsonl; indexed once" in w
                   for w in warnings), result.stderr
    meta = json.loads((here / "idx" / "meta.json").read_text(encoding="utf-8"))
    assert meta["counts"]["documents"] == 2
    assert [s["path"] for s in meta["sources"]] == [str((here / "docs.jsonl").resolve())]
    # --append under another spelling: the same source, unchanged, skipped.
    again = run_cli("index", "build", "link.jsonl", "--index", "idx", "--append", "-q")
    assert again.exit_code == 0, again.stderr
    assert "unchanged, skipped: link.jsonl" in again.stderr
    meta = json.loads((here / "idx" / "meta.json").read_text(encoding="utf-8"))
    assert meta["counts"]["documents"] == 2


def test_the_same_folder_twice_is_indexed_once(
    here: Path, run_cli: Any, fake_models: None
) -> None:
    (here / "notes").mkdir()
    (here / "notes" / "g.md").write_text("# Gamma\n\nGamma is a lake in Chile.\n",
                                         encoding="utf-8")
    os.symlink("notes", here / "also")
    result = run_cli("index", "build", "notes", "also/", "./notes", "--index", "idx", "-q")
    assert result.exit_code == 0, result.stderr
    # Typer hands over ./notes as notes: the same name, so no second name to show.
    assert "also: is the same folder as notes; indexed once" in result.stderr
    assert "notes: named more than once; indexed once" in result.stderr
    assert result.stderr.count("warning") == 2, result.stderr
    meta = json.loads((here / "idx" / "meta.json").read_text(encoding="utf-8"))
    assert meta["counts"]["documents"] == 1


# -- 13: terminal escape sequences in documents ---------------------------------------------

HOSTILE = {
    "id": "h\x1b[31m",
    "title": "Gamma\x1b[2J\x1b[H",
    "url": "https://example.org/\x1b]0;owned\x07",
    "text": "Gamma is a lake in Chile.\x1b]0;pwned\x07 It is \x9b2J deep \u202eevil.",
}


def test_search_shows_control_characters_escaped(
    here: Path, run_cli: Any, fake_models: None
) -> None:
    write_jsonl(here / "hostile.jsonl", [HOSTILE])
    assert run_cli("index", "build", "hostile.jsonl", "--index", "idx", "-q").exit_code == 0
    result = run_cli("index", "search", "Gamma", "--index", "idx", "-k", "1")
    assert result.exit_code == 0, result.stderr
    for raw in ("\x1b[2J", "\x1b]0;", "\x07", "\x9b", "\u202e", "\x1b[31m"):
        assert raw not in result.stdout, repr(result.stdout)
    for escaped in ("Gamma\\x1b[2J\\x1b[H", "\\x1b]0;owned\\x07", "\\x1b]0;pwned\\x07",
                    "\\x9b2J", "\\u202eevil", "h\\x1b[31m"):
        assert escaped in result.stdout, repr(result.stdout)
    as_json = run_cli("index", "search", "Gamma", "--index", "idx", "-k", "1", "--json")
    assert as_json.exit_code == 0, as_json.stderr
    for raw in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert raw not in as_json.stdout, repr(as_json.stdout)
    hit = json.loads(as_json.stdout)
    assert (hit["title"], hit["text"], hit["url"]) == (
        HOSTILE["title"], HOSTILE["text"], HOSTILE["url"]
    )


def test_info_shows_control_characters_and_brackets_of_source_names_as_they_are(
    here: Path, run_cli: Any, fake_models: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ceg_cli.cli import index_cmd

    monkeypatch.setattr(index_cmd.out_console, "_width", 2000)  # one line a row
    name = "evil\x1b[2J[bold]x[red].jsonl"
    write_jsonl(here / name, DOCS)
    assert run_cli("index", "build", name, "--index", "idx", "-q").exit_code == 0
    result = run_cli("index", "info", "--index", "idx")
    assert result.exit_code == 0, result.stderr
    assert "\x1b[2J" not in result.stdout
    assert "evil\\x1b[2J[bold]x[red].jsonl" in result.stdout


# -- 14 (part): a FIFO source, empty field names ----------------------------------------


def ceg(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real command in its own process: a hang fails the test instead of the run."""
    import ceg_cli

    code = "import sys; from ceg_cli.cli.main import app; sys.argv[0] = 'ceg'; app()"
    # The ceg_cli this test imported, wherever the process starts.
    path = os.pathsep.join(
        [str(Path(ceg_cli.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    )
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": path})


def test_a_fifo_source_is_refused_not_waited_on(here: Path) -> None:
    os.mkfifo(here / "pipe.jsonl")
    out = ceg("index", "build", "pipe.jsonl", "--index", "idx", "-q", cwd=here)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "pipe.jsonl: is a named pipe (FIFO)" in lines[0], out.stderr
    assert not (here / "idx").exists()
    assert sorted(p.name for p in here.iterdir()) == ["docs.jsonl", "pipe.jsonl"]


@pytest.mark.parametrize(
    ("option", "value"),
    [("--response-field", ""), ("--response-field", " "), ("--question-field", ""),
     ("--llm-base-url", "")],
)
def test_empty_field_names_are_usage_errors(
    idx: Path, run_cli: Any, option: str, value: str
) -> None:
    write_jsonl(idx.parent / "r.jsonl", RESPONSES * 3)
    before = digests(idx.parent)
    result = run_cli("check", "r.jsonl", "--index", "idx", option, value, "--out", "o.jsonl",
                     "-q")
    refused(result, option)
    assert digests(idx.parent) == before


# -- issue 44, item 4: a hard link to a file of an index the command does not read ----------

#: Every file an index holds, and where a hard link to it is made (outside any index folder).
INDEX_FILES = ["meta.json", "vectors.faiss", "chunks.sqlite", "lexical/params.index.json",
               "lexical/vocab.index.json", "lexical/data.csc.index.npy",
               "lexical/ceg_counts.npz"]


@pytest.mark.parametrize("name", INDEX_FILES)
@pytest.mark.parametrize(
    "command",
    [
        ["check", "r.jsonl", "--out", "{link}"],
        ["check", "r.jsonl", "--index", "other", "--out", "{link}"],
        ["check", "r.jsonl", "--report", "{link}"],
        ["check", "r.jsonl", "--junit", "{link}"],
        ["check", "r.jsonl", "--summary", "{link}"],
        ["report", "rr.jsonl", "--out", "{link}"],
        ["eval", "ev.jsonl", "--index", "other", "--out", "{link}"],
        ["eval", "ev.jsonl", "--index", "other", "--json", "{link}"],
    ],
    ids=["check-out", "check-out-other-index", "check-report", "check-junit", "check-summary",
         "report", "eval-out", "eval-json"],
)
def test_an_output_that_is_a_hard_link_to_any_index_file_is_refused(
    idx: Path, records: Path, run_cli: Any, name: str, command: list[str]
) -> None:
    # The case: meta_link.json, a hard link to idx/meta.json, with --index naming
    # another index (or none: ./index is absent), was overwritten; `ceg index info` then
    # said "unreadable (Extra data ...)".
    here = idx.parent
    shutil.copytree(idx, here / "other")
    write_jsonl(here / "ev.jsonl", LABELLED)
    link = here / "links" / name.replace("/", "-")
    link.parent.mkdir()
    os.link(idx / name, link)
    before = digests(idx, here / "other", link, records)
    args = [str(link) if a == "{link}" else a for a in command]
    result = run_cli(*args, "-q") if command[0] != "report" else run_cli(*args)
    line = refused(result, f"{command[command.index('{link}') - 1]} {link}",
                   "is a ceg index's", "by its content")
    assert name.split("/")[-1].split(".")[0] in line or "lexical" in line, line
    assert digests(idx, here / "other", link, records) == before
    info = run_cli("index", "info", "--index", "idx")
    assert info.exit_code == 0 and "unreadable" not in info.stdout, info.stdout


def test_a_copy_of_a_meta_json_is_refused_and_an_ordinary_json_is_not(
    idx: Path, run_cli: Any
) -> None:
    here = idx.parent
    write_jsonl(here / "r.jsonl", RESPONSES)
    shutil.copy(idx / "meta.json", here / "meta-copy.json")
    refused(run_cli("check", "r.jsonl", "--index", "idx", "--out", "meta-copy.json", "-q"),
            "--out meta-copy.json: is a ceg index's meta.json")
    # An output ceg wrote before, and a JSON file of the user's, are written over as ever.
    (here / "mine.json").write_text('{"format_version": "x", "notes": [1, 2]}\n')
    for target in ("rr.jsonl", "rr.jsonl", "mine.json"):
        result = run_cli("check", "r.jsonl", "--index", "idx", "--out", target, "-q")
        assert result.exit_code == 0, result.stderr
        assert (here / target).read_text(encoding="utf-8").startswith('{"schema_version": ')


def test_a_fifo_output_is_never_read_to_be_sniffed(idx: Path) -> None:
    from ceg_cli.report.indexfiles import index_file_kind

    os.mkfifo(idx.parent / "pipe")
    assert index_file_kind(idx.parent / "pipe") is None  # returns at once, reads nothing
    assert index_file_kind(idx.parent / "missing") is None
