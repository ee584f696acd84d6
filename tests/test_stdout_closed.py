"""A stdout whose reader has gone ends ceg quietly (issue 44, item 11).

``ceg models list | head -1`` printed "internal error: BrokenPipeError" and exited 3;
``ceg check ... | head`` said "stdout: cannot write (Broken pipe)"; ``--version`` and
``--help`` ended with 1, the code of a failed gate. Now every command ends with nothing
on stderr and exit 141 (128 + SIGPIPE, what a program that SIGPIPE ends gives), as
Python's documented recipe does it: stdout pointed at the null device, so nothing is
raised again when Python flushes it at exit.

Each case runs the real entry point (``ceg_cli.cli.main:run``) in its own process, with
its stdout the write end of a pipe whose read end is already closed: the first write
fails, whatever the command's speed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

import ceg_cli
from ceg_cli.cli.common import handle_errors
from ceg_cli.errors import ExitStatus

ENTRY = "import sys; from ceg_cli.cli.main import run; sys.argv[0] = 'ceg'; run()"


def with_stdout_closed(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before ceg writes a byte
    path = os.pathsep.join([str(Path(ceg_cli.__file__).parents[1]),
                            os.environ.get("PYTHONPATH", "")])
    try:
        return subprocess.run(
            [sys.executable, "-c", ENTRY, *map(str, args)], stdout=write_end,
            stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=120,
            env={**os.environ, "PYTHONPATH": path, "CEG_CACHE_DIR": str(cwd / "cache")},
        )
    finally:
        os.close(write_end)


@pytest.fixture
def responses(tmp_path: Path) -> Path:
    """Records checked on their own contexts: no model, no index."""
    paris = "Paris is the capital of France."
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"id": i, "response": paris, "contexts": [paris]}) + "\n"
                            for i in range(3)), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["models", "list"],
        ["models", "list", "--json"],
        ["--version"],
        ["--help"],
        ["index", "--help"],
        ["cache", "info"],
        ["cache", "info", "--json"],
        ["languages"],
        ["config", "show"],
    ],
    ids=" ".join,
)
def test_a_command_whose_stdout_is_closed_ends_quietly(args: list[str], tmp_path: Path) -> None:
    done = with_stdout_closed(*args, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (ExitStatus.STDOUT_CLOSED, "")


@pytest.mark.parametrize("json_out", [False, True])
def test_index_info_whose_stdout_is_closed_ends_quietly(
    hash_index: Path, tmp_path: Path, json_out: bool
) -> None:
    done = with_stdout_closed("index", "info", "--index", hash_index,
                              *(["--json"] if json_out else []), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (ExitStatus.STDOUT_CLOSED, "")


def test_ceg_check_to_a_closed_stdout_ends_quietly(responses: Path, tmp_path: Path) -> None:
    done = with_stdout_closed("check", responses, "--index", tmp_path / "none", "-q",
                              cwd=tmp_path)
    assert (done.returncode, done.stderr) == (ExitStatus.STDOUT_CLOSED, "")


def test_ceg_check_with_out_is_not_ended_by_a_closed_stdout(
    responses: Path, tmp_path: Path
) -> None:
    """Its data goes to --out: a closed stdout changes nothing, the gate decides."""
    out = tmp_path / "o.jsonl"
    done = with_stdout_closed("check", responses, "--index", tmp_path / "none", "-q",
                              "--out", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 3


def test_a_broken_pipe_that_is_not_stdout_stays_an_error() -> None:
    """A BrokenPipeError from another pipe (an LLM server's, a child's) while stdout is
    fine is a failure, said as one: never a quiet exit."""

    @handle_errors
    def command() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(typer.Exit) as info:
        command()
    assert info.value.exit_code == ExitStatus.RUNTIME
