"""Every help text prints its brackets (issue 51 item 9): typer renders help as rich
markup, which read ``[tool.ceg]`` as a style and printed "(ceg.toml, or  in
pyproject.toml)". Walked over every command and group of ``ceg``, so a help text added
later is checked too."""

from __future__ import annotations

import re

import typer
from typer.testing import CliRunner

from ceg_cli.cli.main import app

BRACKETED = re.compile(r"\[[^\[\]\n]+\]")


def _tree() -> list[tuple[tuple[str, ...], object]]:
    found = []

    def walk(command, words):  # type: ignore[no-untyped-def]
        found.append((words, command))
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, (*words, name))

    walk(typer.main.get_command(app), ())
    return found


def _flat(text: str) -> str:
    """The help as one line: box edges and line breaks (rich wraps at spaces) out."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def _written(text: str | None) -> list[str]:
    return BRACKETED.findall((text or "").replace("\\[", "["))


def test_every_bracketed_help_text_is_printed() -> None:
    runner = CliRunner()
    checked = 0
    missing = []
    for words, command in _tree():
        result = runner.invoke(app, [*words, "--help"], terminal_width=100)
        assert result.exit_code == 0, (words, result.output)
        shown = _flat(result.output)
        texts = [getattr(command, "help", None)]
        texts += [getattr(p, "help", None) for p in getattr(command, "params", [])]
        for sub in (getattr(command, "commands", None) or {}).values():
            texts.append(sub.short_help or sub.help)
        for text in texts:
            for piece in _written(text):
                checked += 1
                if " ".join(piece.split()) not in shown:
                    missing.append(f"ceg {' '.join(words)} --help: {piece}")
    assert not missing, "lost to markup: " + "; ".join(missing)
    assert checked >= 3  # [tool.ceg] in ceg --help and ceg config --help, and more


def test_the_project_file_line_keeps_tool_ceg() -> None:
    for words in ((), ("config",)):
        result = CliRunner().invoke(app, [*words, "--help"], terminal_width=200)
        assert "ceg.toml, or [tool.ceg] in pyproject.toml" in _flat(result.output)
