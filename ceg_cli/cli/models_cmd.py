"""``ceg models list|pull``: the checker models ceg knows, and downloading one."""

from __future__ import annotations

import json

import typer

from .commands import CegTyper
from .common import err_console, handle_errors

app = CegTyper(
    help="Checker and embedding models: list what ceg knows and what is cached, pull one "
    "into the Hugging Face cache (the only command that downloads a model).",
    no_args_is_help=True,
)


def _human(size: int) -> str:
    if size <= 0:
        return "-"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


@app.command("list")
@handle_errors
def list_command(
    as_json: bool = typer.Option(False, "--json", help="Print the list as JSON."),
) -> None:
    """The known aliases and every cached model: cached, shipped with ceg or not, size,
    licence (no network)."""
    from ..hub import cache_dir, list_models

    root = cache_dir()
    rows = list_models(root)
    if as_json:
        payload = {
            "cache": str(root),
            "models": [
                {
                    "alias": r.alias or None,
                    "repo": r.repo,
                    "use": r.role or None,
                    "licence": r.licence or None,
                    "cached": r.cached,
                    "shipped": r.shipped,
                    "size_bytes": r.size_bytes,
                    "path": r.path,
                }
                for r in rows
            ],
        }
        typer.echo(json.dumps(payload, indent=2))
        return
    # Plain aligned columns: a table squeezed to a narrow terminal cut the names.
    # "installed": in the Hugging Face cache, or shipped by a package ceg installed.
    header = ("alias", "repository", "use", "licence", "installed", "size")
    lines = [header] + [
        (
            r.alias or "-",
            r.repo,
            r.role or "-",
            r.licence or "?",
            "cached" if r.cached else "shipped" if r.shipped else "no",
            _human(r.size_bytes),
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    typer.echo(f"Hugging Face cache: {root}")
    for line in lines:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())


@app.command("pull")
@handle_errors
def pull_command(
    name: str = typer.Argument(
        ..., help="An alias from `ceg models list` or OWNER/NAME.", metavar="NAME"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    """Download a model and its tokenizer into the Hugging Face cache."""
    from ..hub import cache_dir, check_name, pull

    repo = check_name(name)  # a bad name fails before anything is said or written
    if not quiet:
        err_console.print(f"pulling {repo} into {cache_dir()}")
    path = pull(name, progress=not quiet)
    typer.echo(str(path))
