"""The project file that pins a team's checker: ``ceg.toml``, or ``[tool.ceg]`` in
``pyproject.toml``.

Where it is found (``find``): from the working directory up, in each folder
``ceg.toml`` first, then a ``pyproject.toml`` that has a ``[tool.ceg]`` table (one
without is passed over, as ruff passes it over); the nearest folder wins, whichever
kind it holds. The walk stops at the first folder holding ``.git`` or ``.hg`` (a
repository's root: a checkout never reads a file above itself), else at the
filesystem root. ``CEG_CONFIG=FILE`` names the file instead, ``CEG_NO_CONFIG=1``
turns it off (the CLI's ``--config FILE`` and ``--no-config`` win over both).

What it holds: keys are the commands' long option names with ``-`` as ``_``. A key
at the top applies to every command that has the option; a table per command
(``[check]``, ``[eval]``, ``[index.build]``; ``[index]`` for every ``index``
command) applies to it, and the nearer table wins. The keys a command takes are not
listed here: the caller derives them from the commands' declared options (the CLI's
``cli/config_cmd.py``), so an option added to a command is a key at once.

A bad file is one line naming the file, the key and what is allowed
(``UsageError``, exit 2), before any model loads.
"""

from __future__ import annotations

import difflib
import errno
import math
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 (tomli is a dependency there)
    import tomli as tomllib  # type: ignore[no-redef]

CONFIG_FILE = "ceg.toml"
PYPROJECT = "pyproject.toml"
#: The variables that name the file (like --config) or turn it off (like --no-config).
CONFIG_VAR = "CEG_CONFIG"
NO_CONFIG_VAR = "CEG_NO_CONFIG"
#: A folder holding one of these is a repository's root: the search stops there.
REPOSITORY_MARKERS = (".git", ".hg")
_TRUE = {"1", "true", "yes", "on"}

#: TOML's names of the values a file can hold, for messages.
_TOML_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
               list: "an array", dict: "a table"}


@dataclass(frozen=True)
class KeySpec:
    """What one key takes: its kind (int, float, str, path, bool, choice or list), and
    for a list the kind of its items; ``check`` checks a well-typed value further (a
    range, a pattern) and returns it, raising ``UsageError`` or ``ValueError``."""

    kind: str
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    item: KeySpec | None = None
    check: Callable[[Any], Any] | None = None

    def allowed(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(f'"{c}"' for c in self.choices)
        if self.kind == "list":
            return f"an array of {self.item.allowed() if self.item else 'values'}"
        what = {"int": "an integer", "float": "a number", "str": "a string",
                "path": "a path (a string)", "bool": "true or false"}[self.kind]
        if self.low is not None and self.high is not None:
            return f"{what} from {self.low:g} to {self.high:g}"
        if self.low is not None:
            return f"{what}, at least {self.low:g}"
        return what


#: command words (("check",), ("index", "build")) -> key -> what it takes.
Schema = Mapping[tuple[str, ...], Mapping[str, KeySpec]]


@dataclass(frozen=True)
class Setting:
    """One value of the file, and where in it: ``(path, "[check]")``."""

    value: Any
    table: str

    def where(self, path: Path) -> str:
        return f"{path}" + (f" {self.table}" if self.table else "")


@dataclass(frozen=True)
class ProjectFile:
    """A read and checked project file."""

    path: Path
    #: The table's name in the file: "" for ceg.toml, "tool.ceg" for pyproject.toml.
    root: str
    #: (command words of a table, key) -> setting, e.g. (("index",), "index").
    settings: dict[tuple[tuple[str, ...], str], Setting] = field(default_factory=dict)

    def values_for(self, command: tuple[str, ...]) -> dict[str, Setting]:
        """Every key that applies to ``command``: the top's, then each table down its
        path (``[index]``, then ``[index.build]``), the nearer one winning."""
        out: dict[str, Setting] = {}
        for depth in range(len(command) + 1):
            for (table, key), setting in self.settings.items():
                if table == command[:depth]:
                    out[key] = setting
        return out


def find(start: Path | None = None) -> Path | None:
    """The project file that applies in ``start`` (default: the working directory), or None.

    ``CEG_NO_CONFIG`` turns the search off, ``CEG_CONFIG`` names the file; otherwise
    the walk described in the module docstring.
    """
    if os.environ.get(NO_CONFIG_VAR, "").strip().lower() in _TRUE:
        return None
    named = os.environ.get(CONFIG_VAR, "").strip()
    if named:
        return Path(named)
    return search(start or Path.cwd())


def search(start: Path) -> Path | None:
    """The nearest ``ceg.toml``, or ``pyproject.toml`` with ``[tool.ceg]``, from ``start`` up."""
    for folder in _upwards(start.resolve()):
        candidate = folder / CONFIG_FILE
        # lexists: a broken symlink or a symlink loop is a project file that cannot be
        # read, not a missing one (a team's gate must not vanish without a word);
        # a directory, a FIFO or an unreadable file too: load() says why.
        if os.path.lexists(candidate):
            return candidate
        pyproject = folder / PYPROJECT
        if pyproject.is_file() and _has_tool_ceg(pyproject):
            return pyproject
        if any((folder / marker).exists() for marker in REPOSITORY_MARKERS):
            return None
    return None


def _upwards(start: Path) -> Iterator[Path]:
    yield start
    yield from start.parents


def _has_tool_ceg(pyproject: Path) -> bool:
    """Whether a pyproject.toml has ``[tool.ceg]`` (one that cannot be read has none:
    it is pip's and other tools' to complain about, not ceg's)."""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    tool = data.get("tool")
    return isinstance(tool, dict) and "ceg" in tool


def load(path: Path, schema: Schema) -> ProjectFile:
    """Read ``path`` (a ceg.toml, or a pyproject.toml's ``[tool.ceg]``) and check every
    key and value against ``schema``; the first problem is a ``UsageError``."""
    try:
        # Looked at before it is opened: opening a FIFO blocks until a writer comes.
        mode = path.stat().st_mode
    except OSError as exc:
        reason = _os_reason(path, exc)
        raise UsageError(f"{path}: cannot read the project file ({reason})") from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{path}: is a directory; the project file is a TOML file")
    if not stat.S_ISREG(mode):
        raise UsageError(
            f"{path}: is {_file_kind(mode)}, not a regular file; the project file is a TOML file"
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the project file ({exc.strerror or exc})") from None
    try:
        # A byte-order mark (some Windows editors write one) is read past: TOML's
        # parser refuses it, and the file is otherwise fine.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path}: not UTF-8 (byte {exc.start}); a TOML file is UTF-8 text"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        twice = _duplicate_key(text) if message.startswith("Cannot overwrite a value") else None
        if twice is not None:
            key, first, second = twice
            raise UsageError(
                f"{path}: not valid TOML: key {key!r} is set twice (lines {first} and {second})"
            ) from None
        if message.startswith("Cannot overwrite a value"):
            message += ("; a key and a table cannot share a name (a top-level `index` "
                        "and an `[index.build]` table): set `index` in the tables instead")
        raise UsageError(f"{path}: not valid TOML: {message}") from None
    root = ""
    if path.name == PYPROJECT:
        tool = data.get("tool")
        if not isinstance(tool, dict) or "ceg" not in tool:
            raise UsageError(f"{path}: has no [tool.ceg] table")
        data, root = tool["ceg"], "tool.ceg"
        if not isinstance(data, dict):
            raise UsageError(f"{path}: tool.ceg is {_toml_name(data)}; it must be a table")
    project = ProjectFile(path, root)
    _check_table(project, data, (), schema)
    return project


def _os_reason(path: Path, exc: OSError) -> str:
    if path.is_symlink():
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop"
        if exc.errno == errno.ENOENT:
            return f"a symbolic link to {os.readlink(path)}, which does not exist"
    return exc.strerror or str(exc)


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a file"


_KEY_LINE = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=""")
_TABLE_LINE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _duplicate_key(text: str) -> tuple[str, int, int] | None:
    """The first plain ``key = value`` set twice in one table, with both lines (TOML's
    parser says only "Cannot overwrite a value"). Keys inside multi-line strings or
    arrays are not followed: then None, and the parser's own message stands."""
    seen: dict[tuple[str, str], int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), 1):
        header = _TABLE_LINE.match(line)
        if header:
            if line.lstrip().startswith("[["):
                return None  # arrays of tables repeat names by design
            table = header.group(1).replace(" ", "")
            continue
        key = _KEY_LINE.match(line)
        if key:
            name = key.group(1).strip("\"'")
            where = (table, name)
            if where in seen:
                return (f"{table}.{name}" if table else name), seen[where], number
            seen[where] = number
    return None


def _label(project: ProjectFile, table: tuple[str, ...]) -> str:
    name = ".".join(([project.root] if project.root else []) + list(table))
    return f"[{name}]" if name else ""


def _commands_under(schema: Schema, table: tuple[str, ...]) -> list[tuple[str, ...]]:
    return [words for words in schema if words[: len(table)] == table]


def _check_table(
    project: ProjectFile, data: dict[str, Any], table: tuple[str, ...], schema: Schema
) -> None:
    below = _commands_under(schema, table)
    label = _label(project, table)
    where = f"{project.path}: {label + ' ' if label else ''}"
    subcommands = {words[len(table)] for words in below if len(words) > len(table)}
    for key, value in data.items():
        if isinstance(value, dict) and key in subcommands:
            _check_table(project, value, (*table, key), schema)
            continue
        if isinstance(value, dict):
            group = " ".join(("ceg", *table, key))
            raise UsageError(
                f"{project.path}: {_label(project, (*table, key))}: no command '{group}'; the "
                f"tables are the commands ({', '.join(_table_names(schema))}), the rest are keys"
            )
        specs = [schema[words][key] for words in below if key in schema[words]]
        if not specs:
            raise UsageError(where + _unknown_key(key, table, schema))
        for spec in specs:  # the same key of two commands may take different values
            _check_value(f"{where}{key} = {_toml_repr(value)}", key, value, spec)
        project.settings[(table, key)] = Setting(_resolved(value, specs[0], project.path),
                                                 label)


def _table_names(schema: Schema) -> list[str]:
    return sorted({"[" + ".".join(words) + "]" for words in schema})


def _unknown_key(key: str, table: tuple[str, ...], schema: Schema) -> str:
    """Why ``key`` is refused there, and what is allowed instead."""
    flag = "--" + key.replace("_", "-")
    below = _commands_under(schema, table)
    elsewhere = sorted(" ".join(("ceg", *w)) for w in schema if key in schema[w])
    if table and elsewhere:
        return (f"key {key!r}: {' '.join(('ceg', *table))} has no {flag} (it is an option of "
                f"{', '.join(elsewhere)}: put it in their tables, or at the top)")
    keys = sorted({k for words in below for k in schema[words]})
    close = difflib.get_close_matches(key, keys, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    scope = " ".join(("ceg", *table)) if table else "any ceg command"
    return (f"unknown key {key!r}{hint}: no option {flag} of {scope}; keys are the long "
            "options with - as _ ('ceg config show COMMAND' lists them)")


def _check_value(where: str, key: str, value: Any, spec: KeySpec) -> Any:
    """``value`` if ``spec`` takes it, else a UsageError naming the key and what is allowed."""
    problem = _type_problem(value, spec)
    if problem is None and spec.check is not None:
        try:
            spec.check(_resolved(value, spec, None))
        except (UsageError, ValueError) as exc:
            problem = getattr(exc, "problem", None) or _without_flag(str(exc), key, value)
    elif problem is None:
        problem = _range_problem(value, spec)
    if problem is not None:
        raise UsageError(f"{where}: {problem}")
    return value


def _without_flag(message: str, key: str, value: Any) -> str:
    """A command-line message ("--judge bogus: unknown judge") without the flag and
    value the file's line already names."""
    flag = "--" + key.replace("_", "-")
    for shown in (str(value), repr(value), f"'{value}'"):
        prefix = f"{flag} {shown}"
        if message.startswith(prefix + ": "):
            return message[len(prefix) + 2:]
        if message.startswith(prefix + " "):
            return message[len(prefix) + 1:]
    return message


def _type_problem(value: Any, spec: KeySpec) -> str | None:
    """What is wrong with the kind of ``value`` (TOML's types: "0.8" is a string)."""
    kind = spec.kind
    if kind == "list":
        if not isinstance(value, list):
            return f"expected {spec.allowed()}, got {_toml_name(value)}"
        for item in value:
            if spec.item is not None and (
                problem := _type_problem(item, spec.item) or _range_problem(item, spec.item)
            ):
                return f"item {_toml_repr(item)}: {problem}"
        return None
    fits = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "str": isinstance(value, str),
        "path": isinstance(value, str),
        "bool": isinstance(value, bool),
        "choice": isinstance(value, str),
    }[kind]
    if not fits:
        hint = ""
        if isinstance(value, str) and kind in ("int", "float"):
            hint = f" (write {value.strip()} without quotes)" if _is_number(value) else ""
        return f"expected {spec.allowed()}, got {_toml_name(value)}{hint}"
    return None


def _range_problem(value: Any, spec: KeySpec) -> str | None:
    """What is wrong with a well-typed value of an option outside the option table."""
    if spec.kind == "choice" and value not in spec.choices:
        return f"choose {spec.allowed()}"
    if spec.kind not in ("int", "float"):
        return None
    if spec.kind == "float" and math.isnan(value):
        return f"not a number; give {spec.allowed()}"
    low, high = spec.low, spec.high
    if (low is not None and value < low) or (high is not None and value > high):
        if low is not None and high is not None:
            return f"must be between {low:g} and {high:g}"
        return f"must be at least {low:g}" if low is not None else f"must be at most {high:g}"
    return None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _resolved(value: Any, spec: KeySpec, path: Path | None) -> Any:
    """A path relative to the file's folder (``index = "eval/index"`` means the same
    folder from anywhere below it); a float where one is wanted."""
    if spec.kind == "path" and isinstance(value, str):
        resolved = Path(value).expanduser()
        if path is not None and not resolved.is_absolute():
            resolved = path.parent / resolved
        return resolved
    if spec.kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if spec.kind == "list" and spec.item is not None and isinstance(value, list):
        return [_resolved(v, spec.item, path) for v in value]
    return value


def _toml_name(value: Any) -> str:
    for kind, name in _TOML_NAMES.items():
        if isinstance(value, kind):
            return name
    return "a date or time" if value is not None else "nothing"


def _toml_repr(value: Any) -> str:
    """A value as the file wrote it (near enough: strings in double quotes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_repr(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{...}"
    return str(value)
