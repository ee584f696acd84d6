"""The project file for the Python API and the pytest plugin: read and checked with
the keys of ``ceg``'s own commands, as the CLI reads it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import typer

from .. import config as project
from .optkeys import schema


@lru_cache(maxsize=1)
def cli_schema() -> dict[tuple[str, ...], dict[str, project.KeySpec]]:
    """The keys of ``ceg``'s commands (the command tree is built once)."""
    from .main import app

    return schema(typer.main.get_command(app))


def load_for_api(path: Path) -> project.ProjectFile:
    return project.load(path, cli_schema())
