"""The shape of the package, drawn from its own imports.

Read with the standard library's ``ast`` (nothing is imported), every import
counts: at module level, inside functions, under ``if TYPE_CHECKING``. Two
rules hold:

- **no circle**: no module reaches itself through the modules it imports, and no
  part (a subpackage or a top-level module) through the parts it imports;
- **imports point down** the floors of ``shared/DESIGN.md``: the ground
  (plain types, errors, progress, the cache root, languages, sentence splitting) →
  ``corpus`` → ``index`` → ``judges`` and ``llm`` → ``check``, ``eval``,
  ``report``, ``training`` (which retrieves as a check does) and the cache
  pruning → ``cli``. A module may import
  its own floor or any floor below, never one above.

Inside the parts that are divided into rooms (``index``, ``judges``: ``ROOMS``), the
same holds a storey down: each room (a subpackage, or a module of the part's own
folder) has a floor of its own, an import points to the same floor or one below,
two subpackages on one floor do not import each other, and no room imports another
room's private (``_name``) names.

And ``ceg --help`` loads no model, vector or HTTP library.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ceg_cli"

#: The floor of each top-level part of ``ceg_cli`` (a subpackage or a module).
FLOORS = {
    "__init__": 0,
    "types": 0,
    "spans": 0,
    "errors": 0,
    "progress": 0,
    "cachedir": 0,
    "sentences": 0,
    "lang": 0,
    "claims": 0,
    "claimsplit": 0,
    "textio": 0,
    "hub": 0,
    "config": 0,
    "corpus": 1,
    "index": 2,
    "judges": 3,
    "llm": 3,
    "training": 4,
    "check": 4,
    "eval": 4,
    "report": 4,
    "cacheprune": 4,
    "cli": 5,
    # The Python API and the pytest plugin call what the CLI calls (and its option
    # checks); ceg_cli/__init__ re-exports the API lazily, by importlib.
    "api": 5,
    "testing": 5,
    "pytest_plugin": 5,
}


#: The rooms of the parts divided into subpackages, and their floors inside the part.
#: A room is a subpackage (``build``) or a module of the part's own folder
#: (``store``); ``""`` is the part's ``__init__``.
ROOMS = {
    "index": {
        # The directory: its file names, its life on disk, the disk-full message,
        # meta.json's checks.
        "layout": 0,
        "indexdir": 0,
        "diskfull": 0,
        "metacheck": 0,
        # Its two halves, each reading and writing its own files.
        "dense": 1,
        "lexical": 1,
        # Opening an index for search reads both halves (``Index``), and an updated
        # index's base and generation through their views (``generation``).
        "store": 2,
        "generation": 2,
        "": 2,
        # Building writes everything, and reads what is already there.
        "build": 3,
    },
    "judges": {
        # The registry, a judge's cuts, what a judge says once.
        "": 0,
        "cuts": 0,
        "once": 0,
        "english_only": 0,
        # The offline judge and its rules, and the cascade that starts with it.
        "offline": 1,
        # Model checkers (the verifier reads the offline judge's analysis).
        "checkers": 2,
        # The LLM judges (MiniCheck's prompt and chunks come from its checker).
        "llm_judges": 3,
    },
}


def module_names(root: Path = PACKAGE) -> dict[str, Path]:
    """``ceg_cli.x.y`` -> file, for every module and package of the tree."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's own modules that ``name`` imports, wherever in the file."""

    def known(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # "from . import offline" imports a module; "from .x import name" a name of x.
            targets = [
                f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin
                for a in node.names
            ]
        else:
            continue
        for target in targets:
            if target.split(".")[0] == PACKAGE.name and (hit := known(target)) and hit != name:
                found.add(hit)
    return found


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    modules = module_names(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def floor_of(module: str) -> int:
    top = part_of(module)
    if top not in FLOORS:
        raise AssertionError(f"{module}: give ceg_cli.{top} a floor in FLOORS")
    return FLOORS[top]


def test_the_package_has_no_import_circle() -> None:
    assert cycles(import_graph()) == []


def part_of(module: str) -> str:
    """The top-level part of ``ceg_cli`` a module belongs to (``check``, ``types``...)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def part_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Which part imports which other part, from the module graph."""
    out: dict[str, set[str]] = {}
    for name, deps in graph.items():
        out.setdefault(part_of(name), set()).update(
            part_of(d) for d in deps if part_of(d) != part_of(name))
    return out


def test_no_two_parts_import_each_other() -> None:
    """Parts on one floor may import each other one way only: ``check`` writes its
    records with ``report``, so ``report`` reads a record's contexts from ``corpus``,
    a floor below both, not from ``check``."""
    assert cycles(part_graph(import_graph())) == []


def test_imports_point_down_the_floors() -> None:
    upward = [
        f"{name} (floor {floor_of(name)}) imports {dep} (floor {floor_of(dep)})"
        for name, deps in sorted(import_graph().items())
        for dep in sorted(deps)
        if floor_of(dep) > floor_of(name)
    ]
    assert upward == []


def room_of(module: str, rooms: dict[str, dict[str, int]] = ROOMS) -> tuple[str, str] | None:
    """``(part, room)`` for a module of a part divided into rooms, else None."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in rooms:
        return None
    room = parts[2] if len(parts) > 2 else ""
    if room not in rooms[parts[1]]:
        raise AssertionError(f"{module}: give it a room in ROOMS[{parts[1]!r}]")
    return parts[1], room


def test_every_module_of_a_divided_part_has_a_room() -> None:
    rooms = {room_of(name) for name in module_names()} - {None}
    for part, floors in ROOMS.items():
        assert {room for p, room in rooms if p == part} == set(floors), part


def wrong_inside_parts(root: Path = PACKAGE,
                       rooms: dict[str, dict[str, int]] = ROOMS) -> list[str]:
    """Imports inside a divided part that point up its floors, or across one floor from
    a subpackage to another."""
    def is_subpackage(module: str) -> bool:
        part, room = room_of(module, rooms) or ("", "")
        return bool(room) and (root / part / room).is_dir()

    wrong = []
    for name, deps in sorted(import_graph(root).items()):
        here = room_of(name, rooms)
        for dep in sorted(deps):
            there = room_of(dep, rooms)
            if here is None or there is None or here[0] != there[0] or here == there:
                continue
            floors = rooms[here[0]]
            if floors[there[1]] > floors[here[1]]:
                wrong.append(f"{name} (floor {floors[here[1]]}) imports {dep} "
                             f"(floor {floors[there[1]]})")
            elif floors[there[1]] == floors[here[1]] and is_subpackage(name) and is_subpackage(dep):
                wrong.append(f"{name} imports {dep}: two rooms on one floor")
    return wrong


def test_imports_point_down_the_floors_inside_a_part() -> None:
    assert wrong_inside_parts() == []


def private_imports(root: Path = PACKAGE) -> list[tuple[str, str, str]]:
    """``(importer, module, name)`` for every ``_name`` imported from another module."""
    modules = module_names(root)
    out = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            out += [(name, origin, a.name) for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def private_across_rooms(root: Path = PACKAGE,
                         rooms: dict[str, dict[str, int]] = ROOMS) -> list[str]:
    return [f"{importer} imports {module}.{private}"
            for importer, module, private in private_imports(root)
            if (here := room_of(importer, rooms)) and (there := room_of(module, rooms))
            and here[0] == there[0] and here != there]


def test_no_room_imports_another_rooms_private_names() -> None:
    assert private_across_rooms() == []


def test_the_room_rules_see_an_import_up_across_a_floor_or_of_a_private_name(
    tmp_path: Path,
) -> None:
    """The room checks themselves, on a made-up part: ``low`` (floor 0), the
    subpackages ``a`` and ``b`` (floor 1), ``top`` (floor 2)."""
    pkg = tmp_path / "ceg_cli"
    for folder in (pkg / "part" / "a", pkg / "part" / "b"):
        folder.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "part" / "__init__.py").write_text("")
    (pkg / "part" / "a" / "__init__.py").write_text("")
    (pkg / "part" / "b" / "__init__.py").write_text("")
    (pkg / "part" / "low.py").write_text("def f():\n    from .top import g\n")
    (pkg / "part" / "top.py").write_text("from .a.x import thing\n")
    (pkg / "part" / "a" / "x.py").write_text("from ..b.y import _hidden\n")
    (pkg / "part" / "b" / "y.py").write_text("from ..low import f\n")
    rooms = {"part": {"": 0, "low": 0, "a": 1, "b": 1, "top": 2}}
    assert wrong_inside_parts(pkg, rooms) == [
        "ceg_cli.part.a.x imports ceg_cli.part.b.y: two rooms on one floor",
        "ceg_cli.part.low (floor 0) imports ceg_cli.part.top (floor 2)",
    ]
    assert private_across_rooms(pkg, rooms) == ["ceg_cli.part.a.x imports ceg_cli.part.b.y._hidden"]


def test_the_walk_sees_circles_through_function_level_and_type_checking_imports(
    tmp_path: Path,
) -> None:
    """The checker itself: a circle closed only inside a function or under
    TYPE_CHECKING is found, and the module named is the one imported."""
    pkg = tmp_path / "ceg_cli"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub.b import thing\n")
    (pkg / "sub" / "b.py").write_text("def thing():\n    from ..c import other\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n"
    )
    (pkg / "d.py").write_text("from .sub import b\n")
    graph = import_graph(pkg)
    assert graph["ceg_cli.d"] == {"ceg_cli.sub.b"}
    assert cycles(graph) == [["ceg_cli.a", "ceg_cli.c", "ceg_cli.sub.b"]]


@pytest.mark.parametrize("args", [["--help"], ["index", "build", "--help"], ["check", "--help"]])
def test_help_loads_no_model_vector_or_http_library(args: list[str]) -> None:
    code = (
        "import sys\n"
        "from ceg_cli.cli.main import app\n"
        "try:\n"
        f"    app({args!r}, prog_name='ceg')\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('torch', 'transformers', 'sentence_transformers', 'faiss', 'numpy',\n"
        "         'sklearn', 'scipy', 'bm25s', 'openai', 'onnxruntime', 'ray',\n"
        "         'py3langid', 'Stemmer', 'stop_words', 'regex')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Usage" in out.stdout
    assert out.stderr.strip().splitlines()[-1] == "[]"
