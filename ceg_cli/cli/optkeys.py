"""The keys of the project file, read off the commands: a command's long option
``--judge-threshold`` is its key ``judge_threshold``, and what the key takes is what
the option takes (``check/options.py``'s table, else the option's own type). So an
option added to a command is a key with no edit here.
"""

from __future__ import annotations

import enum
import typing
from pathlib import Path
from typing import Any

from .. import config as project
from ..check.options import OPTIONS
from ..eval.datasets import FORMATS
from ..lang.codes import check_language

#: Parameters of every command that are not keys of the file.
NOT_KEYS = {"help", "config", "no_config"}


def command_words(root: Any, command: Any) -> tuple[str, ...] | None:
    """The words that name ``command`` in the tree under ``root`` (``("index", "build")``)."""
    for name, sub in (getattr(root, "commands", None) or {}).items():
        if sub is command:
            return (name,)
        below = command_words(sub, command)
        if below is not None:
            return (name, *below)
    return None


def leaf_commands(root: Any, words: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every command under ``root`` that runs (not a group), by its words."""
    subs = getattr(root, "commands", None)
    if not subs:
        return {words: root}
    found: dict[tuple[str, ...], Any] = {}
    for name, sub in subs.items():
        found.update(leaf_commands(sub, (*words, name)))
    return found


def option_keys(command: Any) -> dict[str, Any]:
    """The keys a command takes, each with its option: the long name, ``-`` as ``_``."""
    keys = {}
    for param in command.params:
        if getattr(param, "param_type_name", "") != "option" or param.name in NOT_KEYS:
            continue
        long = next((o for o in param.opts if o.startswith("--")), None)
        if long is not None:
            keys[long[2:].replace("-", "_")] = param
    return keys


def _hints(command: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(command.callback)
    except Exception:  # noqa: BLE001 - an unresolvable hint: the key takes what typer takes
        return {}


def key_spec(key: str, param: Any, hint: Any) -> project.KeySpec:
    """What ``key`` takes: the option table's entry, else what the option's type says."""
    spec = OPTIONS.get(key)
    # Keys the run checks outside the option table, checked here the same way, so that
    # `ceg config show` refuses what the run refuses.
    if key == "language":
        return project.KeySpec("str", check=lambda value: check_language(value, "language"))
    if key == "format":  # ceg eval's dataset format (datasets.read refuses the rest)
        return project.KeySpec("choice", FORMATS)
    if spec is not None:
        return project.KeySpec(spec.kind, spec.choices, spec.low, spec.high, check=spec.check)
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint) or (str,)
        return project.KeySpec("list", item=key_spec("", param, item))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return project.KeySpec("choice", tuple(str(e.value) for e in hint))
    kind = {bool: "bool", int: "int", float: "float", Path: "path"}.get(hint, "str")
    if getattr(param, "is_flag", False):
        kind = "bool"
    return project.KeySpec(kind, low=low, high=high)


def schema(root: Any) -> dict[tuple[str, ...], dict[str, project.KeySpec]]:
    """Every command's keys and what each takes, read off the command tree."""
    out = {}
    for words, command in leaf_commands(root).items():
        if not getattr(command, "reads_config", True):
            continue
        hints = _hints(command)
        out[words] = {key: key_spec(key, param, hints.get(param.name))
                      for key, param in option_keys(command).items()}
    return out
