"""Every ``ceg`` command's class: ``--config FILE`` and ``--no-config`` on each, which
install the project file's values as the command's ``default_map`` (Click consults it
after the command line and the environment, before the option's default: flag, then
variable, then file, then default), and a usage line that names the arguments.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from .. import config as project
from ..errors import CegError, ExitStatus, UsageError
from .common import INVOKED, print_error
from .optkeys import command_words, option_keys, schema

#: ctx.meta keys: the file in use (or None) and, per context, the two options' values.
PROJECT = "ceg.project"
_STATE = "ceg.config-state"


class CegCommand(typer.core.TyperCommand):
    """Every ``ceg`` command: Typer's, with ``--config FILE`` and ``--no-config`` (the
    project file, read as below), and a usage line that names its arguments as
    ``--help`` does (``RESPONSES``, not ``{responses}``)."""

    #: Whether the command reads the project file (``ceg config show`` reads it itself).
    reads_config = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = plain_help(self.help)
        self.short_help = plain_help(self.short_help)
        for param in self.params:
            if getattr(param, "help", None):
                param.help = plain_help(param.help)

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        if not self.reads_config:
            return params
        # Before --help, which stays last in the help.
        own = [p for p in params if p.name != "help"]
        return [*own, *config_params(), *[p for p in params if p.name == "help"]]

    def invoke(self, ctx: Any) -> Any:
        token = INVOKED.set(ctx)  # an error's line names the variable a value came from
        try:
            return super().invoke(ctx)
        finally:
            INVOKED.reset(token)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [re.sub(r"^\{(.*)\}((?:\.\.\.)?)$", r"\1\2", piece)
                for piece in super().collect_usage_pieces(ctx)]


class ConfigReadingCommand(CegCommand):
    """A command that reads the project file itself, and takes no --config of its own."""

    reads_config = False


def plain_help(text: str | None) -> str | None:
    """A help text as written: typer renders help as rich markup, which would read
    ``[tool.ceg]`` as a style and drop it; escaped, every bracket is printed."""
    return escape(text) if text else text


class CegTyper(typer.Typer):
    """A command group whose commands are ``CegCommand``s (help texts printed as written)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["help"] = plain_help(kwargs.get("help"))
        super().__init__(*args, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", CegCommand)
        return super().command(*args, **kwargs)


# -- --config and --no-config -------------------------------------------------------


def _state(ctx: typer.Context) -> dict[str, Any]:
    states = ctx.meta.setdefault(_STATE, {})
    return states.setdefault(id(ctx), {})  # type: ignore[no-any-return]


def _on_config(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    _state(ctx)["config"] = (value, ctx.get_parameter_source(param.name or ""))
    _install_when_both(ctx)
    return value


def _on_no_config(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    _state(ctx)["no_config"] = (bool(value), ctx.get_parameter_source(param.name or ""))
    _install_when_both(ctx)
    return value


def _install_when_both(ctx: typer.Context) -> None:
    """Both options are eager, so they are read before any other; the second to be
    read installs the file's values as the command's defaults."""
    state = _state(ctx)
    if "config" not in state or "no_config" not in state:
        return
    try:
        path = _chosen(state["config"], state["no_config"])
        install(ctx, path)
    except CegError as exc:
        print_error(str(exc))
        raise typer.Exit(int(ExitStatus.USAGE)) from None


def _from_command_line(source: Any) -> bool:
    return source is not None and source.name == "COMMANDLINE"


def _chosen(config: tuple[Any, Any], no_config: tuple[bool, Any]) -> Path | None:
    """The file this run reads: ``--config``, else none with ``--no-config``, else the
    search; the command line wins over the variables."""
    value, source = config
    off, off_source = no_config
    if value is not None and not str(value).strip():
        raise UsageError(f"--config {value!r}: name the project file")
    if value is not None and off:
        if _from_command_line(source) and _from_command_line(off_source):
            raise UsageError("--config and --no-config: give one of them")
        if _from_command_line(off_source):
            return None
        if not _from_command_line(source):
            raise UsageError(f"${project.CONFIG_VAR} and ${project.NO_CONFIG_VAR} are both "
                             "set: unset one")
        return Path(value)
    if off:
        return None
    if value is not None:
        return Path(value)
    return project.search(Path.cwd())


def install(ctx: typer.Context, path: Path | None) -> None:
    """Read ``path`` and make its values for this command the command's defaults."""
    root = ctx.find_root().command
    ctx.meta[PROJECT] = None
    if path is None:
        return
    loaded = project.load(path, schema(root))
    ctx.meta[PROJECT] = loaded
    words = command_words(root, ctx.command)
    if words is None:
        return
    keys = option_keys(ctx.command)
    ctx.default_map = {keys[key].name: setting.value
                       for key, setting in loaded.values_for(words).items() if key in keys}


@lru_cache(maxsize=1)
def config_params() -> tuple[Any, ...]:
    """``--config FILE`` and ``--no-config``, as typer makes them, for every command."""
    holder = typer.Typer(add_completion=False)

    @holder.command()
    def options(
        config: Path = typer.Option(
            None, "--config", envvar=project.CONFIG_VAR, is_eager=True, expose_value=False,
            callback=_on_config, show_default=False,
            help="The project file to read (a ceg.toml, or a pyproject.toml's tool.ceg "
            "table), instead of the nearest one from here up to the repository's root.",
        ),
        no_config: bool = typer.Option(
            False, "--no-config", envvar=project.NO_CONFIG_VAR, is_eager=True,
            expose_value=False, callback=_on_no_config,
            help="Read no project file.",
        ),
    ) -> None:
        """Never run: it only holds the two options."""

    return tuple(p for p in typer.main.get_command(holder).params
                 if p.name in ("config", "no_config"))


def given_or_none(ctx: typer.Context, name: str, value: Any) -> Any:
    """``value`` where the user gave it (the command line, the environment, the project
    file), None where it is the option's default: the library then decides, as it does
    for an API caller who leaves it out (``--retrieval`` on an index without vectors)."""
    source = ctx.get_parameter_source(name)
    return None if source is None or source.name == "DEFAULT" else value


def judge_threshold_source(ctx: typer.Context) -> str | None:
    """Where ``--judge-threshold``'s value came from when not the command line: the
    project file (``judge_threshold in PATH``); None for the flag, or for no value."""
    source = ctx.get_parameter_source("judge_threshold")
    project = ctx.meta.get(PROJECT)
    if source is None or source.name != "DEFAULT_MAP" or project is None:
        return None
    return f"judge_threshold in {project.path}"
