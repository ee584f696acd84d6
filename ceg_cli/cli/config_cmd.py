"""``ceg config show``: every option's effective value and where it came from."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any

import typer

from ..errors import UsageError
from .commands import PROJECT, CegTyper, ConfigReadingCommand
from .common import handle_errors
from .optkeys import leaf_commands, option_keys

app = CegTyper(
    help="The project file (ceg.toml, or [tool.ceg] in pyproject.toml) that pins a "
    "team's options: show what every command would run with.",
    no_args_is_help=True,
)


def _shown(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_shown(v) for v in value]
    return value


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value) or "-"
    return str(value)


def effective(ctx: typer.Context, words: tuple[str, ...], command: Any,
              args: list[str]) -> dict[str, dict[str, Any]]:
    """Each key of ``command`` run with ``args``: its value and where it came from."""
    for param in command.params:
        param.required = False  # shown without its input files (nothing runs)
    # Under the root, as a run makes it: messages say "ceg check", not "ceg config show".
    with command.make_context(" ".join(words), list(args), parent=ctx.find_root()) as sub:
        loaded = sub.meta.get(PROJECT)
        settings = loaded.values_for(words) if loaded is not None else {}
        out = {}
        for key, param in option_keys(command).items():
            source = sub.get_parameter_source(param.name)
            name = source.name if source is not None else "DEFAULT"
            entry = {"value": _shown(sub.params.get(param.name))}
            if name == "COMMANDLINE":
                entry |= {"source": "flag", "from": next(o for o in param.opts
                                                         if o.startswith("--"))}
            elif name == "ENVIRONMENT":
                entry |= {"source": "env", "from": param.envvar}
            elif name == "DEFAULT_MAP" and key in settings:
                entry |= {"source": "file", "from": settings[key].where(loaded.path)}
            else:
                entry |= {"source": "default", "from": None}
            out[key] = entry
        return out


@app.command(
    "show", cls=ConfigReadingCommand,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@handle_errors
def show_command(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print the values as JSON."),
    words: list[str] = typer.Argument(
        None, metavar="[COMMAND] [OPTIONS]", show_default=False,
        help="A command (check, eval, index build, ...; none: every command), and options "
        "as it would be given them (flags win over the file, as in a run).",
    ),
) -> None:
    """Print every option's effective value and where it came from: a flag, a
    variable, the project file (and its table), or the default."""
    root = ctx.find_root().command
    leaves = {w: c for w, c in leaf_commands(root).items() if getattr(c, "reads_config", True)}
    tokens = list(words or [])
    path: tuple[str, ...] = ()
    while tokens and any(w[: len(path) + 1] == (*path, tokens[0]) for w in leaves):
        path = (*path, tokens.pop(0))
    chosen = {w: c for w, c in leaves.items() if w[: len(path)] == path}
    if tokens and (not chosen or list(chosen) != [path]):
        what = f"'ceg {' '.join(path)}' is not one command" if path else "no command named"
        raise UsageError(f"config show {' '.join(words or [])}: {what}; name one command "
                         f"({', '.join(' '.join(w) for w in sorted(leaves))}) before its options")
    results = {" ".join(w): effective(ctx, w, c, tokens if w == path else [])
               for w, c in sorted(chosen.items())}
    loaded = ctx.meta.get(PROJECT)
    file = str(loaded.path) if loaded is not None else None
    if as_json:
        typer.echo(json.dumps({"project_file": file, "commands": results}, indent=2))
        return
    typer.echo(f"project file: {file or 'none'}")
    for name, values in results.items():
        typer.echo(f"ceg {name}")
        rows = [(k, _text(v["value"]), v["source"] + (f" {v['from']}" if v["from"] else ""))
                for k, v in values.items()]
        widths = [max(len(r[i]) for r in rows) for i in range(2)]
        for key, value, source in rows:
            typer.echo(f"  {key.ljust(widths[0])}  {value.ljust(widths[1])}  {source}")
