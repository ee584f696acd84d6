"""``ceg cache info|prune``: what the cache folder holds, and removing what is old."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import typer
from rich.table import Table

from .commands import CegTyper
from .common import err_console, handle_errors, out_console, warn

app = CegTyper(
    help="The cache of LLM replies, eval corpus indexes and ONNX model exports: show it, "
    "prune it.",
    no_args_is_help=True,
)

CacheDirOption = typer.Option(
    None,
    "--cache-dir",
    help="The cache folder (default: $CEG_CACHE_DIR, else $XDG_CACHE_HOME/ceg, else "
    "~/.cache/ceg).",
    show_default=False,
)


def _root(cache_dir: Path | None) -> Path:
    """The cache folder asked for; one that names a file is refused (exit 2)."""
    from ..cachedir import cache_root
    from ..errors import UsageError

    root = cache_dir if cache_dir is not None else cache_root()
    if root.exists() and not root.is_dir():
        where = "--cache-dir" if cache_dir is not None else "the cache folder ($CEG_CACHE_DIR)"
        raise UsageError(f"{where} {root}: is a file, not a folder")
    return root


@app.command("info")
@handle_errors
def info(
    cache_dir: Path = CacheDirOption,
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """Where the cache is, and per kind: entries, size, oldest and newest."""
    from ..cacheprune import cache_info

    root = _root(cache_dir)
    kinds = cache_info(root)
    if as_json:
        payload = {
            "path": str(root),
            "kinds": [
                {
                    "kind": k.kind,
                    "path": str(k.path),
                    "entries": k.entries,
                    "bytes": k.bytes,
                    "oldest": _iso(k.oldest),
                    "newest": _iso(k.newest),
                    "not_ceg": k.foreign,
                }
                for k in kinds
            ],
        }
        typer.echo(json.dumps(payload, indent=2))
        return
    table = Table(title=f"cache {root}", title_justify="left", box=None, pad_edge=False)
    for name, justify in (("kind", "left"), ("entries", "right"), ("size", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("oldest")
    table.add_column("newest")
    for k in kinds:
        table.add_row(
            k.kind, str(k.entries), _size(k.bytes), _iso(k.oldest) or "–", _iso(k.newest) or "–"
        )
    out_console.print(table)
    for k in kinds:
        if k.foreign:
            warn(f"{k.path}: {k.foreign} entries not ceg's, left alone (not counted)")


@app.command("prune")
@handle_errors
def prune(
    older_than: float = typer.Option(
        ...,
        "--older-than",
        min=0.0,
        help="Remove LLM replies stored, and eval corpus indexes, ONNX model exports and "
        "static models last used, more than DAYS ago.",
        metavar="DAYS",
    ),
    cache_dir: Path = CacheDirOption,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Say what would be removed; remove nothing."
    ),
) -> None:
    """Remove what was not used for DAYS days; safe while other ceg commands run."""
    from ..cacheprune import prune_cache

    older_than += 0.0  # -0 is 0
    root = _root(cache_dir)
    report = prune_cache(root, older_than * 86400.0, dry_run=dry_run)
    for entry in report.busy:
        warn(f"{entry}: a ceg eval is building this corpus index now; left alone")
    for entry in report.foreign:
        warn(f"{entry}: not ceg's, left alone")
    for entry in report.removed:
        err_console.print(f"{'would remove' if dry_run else 'removed'} {entry}", highlight=False)
        left = report.left.get(entry)
        if left:
            shown = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
            warn(
                f"{entry}: holds {shown}, which ceg did not write: "
                f"{'would be' if dry_run else 'was'} left there, and the folder with it"
            )
    freed = _size(report.bytes_freed)
    what = (
        f"{report.replies_removed} LLM replies, {report.indexes_removed} eval corpus "
        f"indexes, {report.exports_removed} ONNX model exports and {report.statics_removed} "
        f"static models older than {older_than:g} days"
    )
    if not dry_run:
        done = f"removed {what}, {freed} freed"
    elif report.indexes_removed or report.exports_removed or report.statics_removed:
        done = f"would remove {what} (they hold {freed})"
    else:
        done = f"would remove {what}"
    err_console.print(
        f"{root}: {done}; kept {report.replies_kept} replies, {report.indexes_kept} indexes, "
        f"{report.exports_kept} exports and {report.statics_kept} static models"
    )


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
