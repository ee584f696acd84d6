"""The CLI's options as a user meets them: documented tables, ``--help``, variables, ``--debug``.

The defaults live in the code; ``--help`` shows them and the option tables of
the CLI reference (``docs/cli.md``) must say the same. These tests fail when
one of the three drifts.
"""

from __future__ import annotations

import enum
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ceg_cli.cli.main import app

REPO = Path(__file__).resolve().parent.parent
#: The CLI reference, where every command has its option table.
REFERENCE = REPO / "docs" / "cli.md"
CEG = Path(sys.executable).with_name("ceg")
#: Documented once for every command, at the top of the CLI reference.
EVERYWHERE = {"--quiet", "--help"}


def _commands() -> dict[tuple[str, ...], typer.core.TyperCommand]:
    """Every leaf command of ``ceg``, by its words (``("index", "build")``)."""
    found = {}

    def walk(command, path: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                walk(sub, (*path, name))
        else:
            found[path] = command

    walk(typer.main.get_command(app), ())
    return found


def _readme_tables() -> dict[tuple[str, ...], list[tuple[str, str]]]:
    """Per command named in a ``### `ceg ...``` heading, the (option, default) rows
    of the first option table below it."""
    tables: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    heading_commands: list[tuple[str, ...]] = []
    in_table = False
    for line in REFERENCE.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            heading_commands = [
                tuple(re.match(r"[a-z ]+", code[4:]).group(0).split())  # type: ignore[union-attr]
                for code in re.findall(r"`(ceg [^`]+)`", line)
            ] if line.startswith("### ") else []
            in_table = False
            continue
        if line.startswith("| option | default | meaning |") and heading_commands:
            in_table = True
            rows: list[tuple[str, str]] = []
            for command in heading_commands:
                tables.setdefault(command, rows)
            heading_commands = []
            continue
        if in_table and line.startswith("|---"):
            continue
        if in_table and line.startswith("| "):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows.append((cells[0], cells[1]))
        else:
            in_table = False
    return tables


def _names(cell: str) -> list[str]:
    """``"`--embed-title / --no-embed-title`"`` -> ``["--embed-title", "--no-embed-title"]``."""
    return re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", cell)


def _rendered(option) -> str | None:  # type: ignore[no-untyped-def]
    """The default as docs/cli.md writes it, or None where the code has none."""
    default = option.default
    if option.is_flag and option.secondary_opts == [] and isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, bool):
        return "on" if default else "off"
    if default is None:
        return None
    if isinstance(default, enum.Enum):
        return str(default.value)
    if isinstance(default, (list, tuple)):
        return ", ".join(str(v) for v in default)
    return str(default)


def _same(documented: str, code: str) -> bool:
    documented = documented.replace("`", "").strip().removeprefix("./")
    try:
        return float(documented) == float(code)
    except ValueError:
        return documented == code


COMMANDS = _commands()
TABLES = _readme_tables()


def test_every_command_has_an_option_table() -> None:
    assert set(COMMANDS) - set(TABLES) == set(), "commands with no option table in docs/cli.md"
    assert set(TABLES) - set(COMMANDS) == set(), "docs/cli.md tables for commands that do not exist"


@pytest.mark.parametrize("words", sorted(COMMANDS), ids=" ".join)
def test_readme_table_matches_the_command(words: tuple[str, ...]) -> None:
    command = COMMANDS[words]
    options = {
        name: param
        for param in command.params
        if isinstance(param, typer.core.TyperOption)
        for name in (*param.opts, *param.secondary_opts)
    }
    documented: set[str] = set()
    for cell, default in TABLES[words]:
        names = _names(cell)
        assert names, f"no option name in docs/cli.md cell {cell!r}"
        ours = [n for n in names if n in options]
        # A table shared by two commands may list an option of only one of them.
        if not ours:
            assert any(
                n in {o for p in other.params for o in getattr(p, "opts", [])}
                for other_words, other in COMMANDS.items()
                if TABLES.get(other_words) is TABLES[words]
                for n in names
            ), f"docs/cli.md documents {cell} for 'ceg {' '.join(words)}', which has no such option"
            continue
        param = options[ours[0]]
        documented.update((*param.opts, *param.secondary_opts))
        if param.required:
            assert default == "required", (cell, default)
            continue
        code = _rendered(param)
        if code is None:
            # No default in the code: docs/cli.md says what happens, in words.
            assert not re.fullmatch(r"`?-?[\d.]+`?", default), (cell, default)
        else:
            assert _same(default, code), (
                f"ceg {' '.join(words)} {cell}: docs/cli.md says {default!r}, the code {code!r}"
            )
    missing = {
        param.opts[0]
        for param in command.params
        if isinstance(param, typer.core.TyperOption)
        and not set(param.opts) & (documented | EVERYWHERE)
    }
    assert missing == set(), f"options of 'ceg {' '.join(words)}' missing from docs/cli.md"


def _help_lines(*words: str) -> list[str]:
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run(
        [str(CEG), *words, "--help"], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.splitlines()


@pytest.mark.parametrize("words", [("check",), ("eval",), ("index", "build"),
                                   ("index", "search"), ("judge", "train"), ("report",)],
                         ids=" ".join)
def test_help_shows_the_real_defaults(words: tuple[str, ...]) -> None:
    lines = _help_lines(*words)
    checked = 0
    for param in COMMANDS[words].params:
        if not isinstance(param, typer.core.TyperOption) or param.is_flag:
            continue
        if param.default is None or param.required:
            continue
        code = _rendered(param)
        assert code is not None
        shown = code
        row = [line for line in lines if re.search(rf"\s{re.escape(param.opts[0])}\s", line)]
        assert row, f"{param.opts[0]} not in ceg {' '.join(words)} --help"
        assert f"[default: {shown}]" in row[0], row[0]
        checked += 1
    assert checked >= 1


def test_retrieval_variables_apply_to_check_and_eval_and_are_range_checked(
    tmp_path: Path,
) -> None:
    runner = CliRunner()
    data = tmp_path / "d.jsonl"
    data.write_text('{"response": "x", "label": true}\n', encoding="utf-8")
    for command in (["check", str(data)], ["eval", str(data)]):
        for name, value, needle in (
            ("CEG_TOP_K", "0", "--top-k"),
            ("CEG_THRESHOLD", "1.5", "--threshold"),
            ("CEG_QUERY", "everything", "--query"),
        ):
            result = runner.invoke(
                app, [*command, "--index", str(tmp_path / "none")], env={name: value}
            )
            assert result.exit_code == 2, (command, name, result.output)
            assert name in result.output and needle in result.output, result.output
        # A flag wins over the variable: the run gets past option parsing and
        # stops at the missing index instead.
        result = runner.invoke(
            app,
            [*command, "--index", str(tmp_path / "none"), "--top-k", "3"],
            env={"CEG_TOP_K": "0"},
        )
        assert result.exit_code == 2 and "--top-k" not in result.output, result.output


def test_debug_flag_shows_the_traceback_through_the_installed_command(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-index")
    env = {k: v for k, v in os.environ.items() if k != "CEG_DEBUG"}
    plain = subprocess.run(
        [str(CEG), "index", "info", "--index", missing], capture_output=True, text=True, env=env
    )
    assert plain.returncode == 2
    assert plain.stderr.startswith("error: no index at") and "Traceback" not in plain.stderr
    for argv, extra in (
        ([str(CEG), "--debug", "index", "info", "--index", missing], {}),
        ([str(CEG), "index", "info", "--index", missing], {"CEG_DEBUG": "1"}),
    ):
        debug = subprocess.run(argv, capture_output=True, text=True, env={**env, **extra})
        assert debug.returncode != 0
        assert "Traceback (most recent call last)" in debug.stderr, debug.stderr
        assert "IndexLoadError: no index at" in debug.stderr
