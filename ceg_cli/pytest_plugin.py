"""ceg's pytest plugin (entry point ``pytest11``): ``--ceg-index``, ``--ceg-judge``, a fixture.

Every pytest run of an environment with ceg installed imports this module, so it
imports nothing heavy and adds nothing but its own options, ini keys and fixture:
the ``Checker`` is built only when a test asks for ``ceg_checker``, once per session
(once per xdist worker).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .api import Checker

DEFAULT_JUDGE = "offline"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ceg", "ceg: check that answers are grounded")
    group.addoption(
        "--ceg-index", action="store", default=None, metavar="PATH",
        help="ceg index that ceg_checker checks answers against (ini: ceg_index; "
        "default: none, answers are checked against their own contexts).",
    )
    group.addoption(
        "--ceg-judge", action="store", default=None, metavar="JUDGE",
        help=f"ceg judge of ceg_checker (ini: ceg_judge; default: {DEFAULT_JUDGE}).",
    )
    parser.addini("ceg_index", "ceg index for ceg_checker (relative to the ini file)",
                  type="string", default="")
    parser.addini("ceg_judge", "ceg judge for ceg_checker", type="string", default="")


def _settings(config: pytest.Config) -> tuple[str | None, str | None, dict[str, str]]:
    """The index and judge: the command line's, else the ini file's, else None (the
    project file's, else the defaults: the Checker reads the file as ``ceg check`` does);
    and for each, how the user named it (for messages)."""
    named = {"--index": "--ceg-index", "--judge": "--ceg-judge"}
    index = config.getoption("ceg_index")
    if index is None:
        ini = str(config.getini("ceg_index") or "")
        if ini:
            # An ini path is relative to the ini file, as pytest's own paths are.
            base = config.inipath.parent if config.inipath is not None else config.rootpath
            index = str(base / ini)
            named["--index"] = "ceg_index (ini)"
    judge = config.getoption("ceg_judge")
    if judge is None and config.getini("ceg_judge"):
        judge = str(config.getini("ceg_judge"))
        named["--judge"] = "ceg_judge (ini)"
    return index, judge, named


def _as_named(message: str, named: dict[str, str]) -> str:
    """ceg's message with the CLI's option replaced by the one the user gave."""
    for flag, option in named.items():
        if message.startswith(flag + " "):
            return option + message[len(flag):]
    return message


@pytest.fixture(scope="session")
def ceg_checker(pytestconfig: pytest.Config) -> Iterator[Checker]:
    """A ``ceg_cli.Checker`` built from ``--ceg-index``/``--ceg-judge``, else the ini keys,
    else the project file (``ceg.toml`` or ``[tool.ceg]``), else the defaults."""
    from .api import Checker
    from .errors import CegError

    index, judge, named = _settings(pytestconfig)
    failure = None
    try:
        checker = Checker(index=index, judge=judge)
    except CegError as exc:
        failure = f"ceg_checker: {_as_named(str(exc), named)}"
    if failure is not None:
        # One line naming the option, outside the except block: raised inside it, pytest
        # showed the error twice, "During handling of the above exception".
        pytest.fail(failure, pytrace=False)
    try:
        yield checker
    finally:
        checker.close()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    from . import config as project

    index, judge, _ = _settings(config)
    path = project.find()
    if index is None and judge is None and path is None:
        return None  # a suite that does not use ceg sees no ceg line
    where = ""
    if path is not None:
        from .api import _project_values
        from .errors import CegError

        try:
            values = _project_values(path)
        except CegError as exc:  # the fixture fails with it; the header only says so
            return [f"ceg: project file {path} cannot be used: {exc}"]
        index = index if index is not None else values.get("index")
        judge = judge if judge is not None else values.get("judge")
        where = f" (project file {path})"
    return [f"ceg: index {index or '(none: answers checked against their contexts)'}, "
            f"judge {judge or DEFAULT_JUDGE}{where}"]
