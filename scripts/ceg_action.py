#!/usr/bin/env python3
"""The steps of ceg's GitHub Action (action.yml), one subcommand each.

    ceg_action.py key   [--index DIR] [--sources "A B"]   the cache key of the index
    ceg_action.py build [--index DIR] --sources "A B"     build it, unless it matches them
    ceg_action.py check --responses FILE [--index DIR] …  run ceg check; record its exit code

An empty --index is the project file's (ceg.toml or [tool.ceg], as `ceg check` finds
it), else ./index; an empty --judge or threshold is left out, so the project file's
applies: the action judges as the team's CLI and tests do.

Kept in one script, not in the YAML, so that a test runs what the action runs.
Standard library only: it runs before and beside the installed ceg, which it calls
as a command (the one next to this Python, else the one on PATH). Outputs go to
$GITHUB_OUTPUT as ``name=value`` lines when it is set; a bad argument is one line
and exit 2, as ceg's own.

An option's value is the word after it, whatever it looks like: ``--build-args
--lexical`` and ``--extra-args "--evidence=both"`` give ``--lexical`` and
``--evidence=both`` to ceg (argparse alone would take them for options of this
script).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

#: Part of every key: a cache written by another layout of this script is not read.
#: v2: fields framed by length, the runner's OS and Python in the key. v3: the build's
#: settings (``settings_prefix``) before the contents' digest, for ``restore-keys``.
KEY_PREFIX = "ceg-index-v3"
#: Beside the index (``.NAME.ceg-action``), cached with it: the key it was built
#: under and a digest of its meta.json, so that an index left by anything else (an
#: older cache entry, a checkout, a self-hosted runner's last job) is not taken
#: for one built from these sources.
STAMP_SUFFIX = ".ceg-action"
#: What actions/cache and actions/upload-artifact read as more than a path in their
#: ``path:`` lists: a newline starts another path, ``!`` excludes, the rest are globs.
PATH_SPECIALS = ("\n", "\r", "\0", "*", "?", "[", "]")


def fail(message: str) -> NoReturn:
    print(f"ceg-action: {message}", file=sys.stderr)
    raise SystemExit(2)


def ceg_command() -> list[str]:
    """The installed ceg: beside this interpreter (a virtualenv), else on PATH."""
    beside = Path(sys.executable).with_name("ceg")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("ceg")
    if found is None:
        fail("ceg is not installed (pip install ceg-cli)")
    return [str(found)]


def ceg_version() -> str:
    out = subprocess.run([*ceg_command(), "--version"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def write_output(name: str, value: str) -> None:
    """A step output (``steps.ID.outputs.NAME``), and the same line on stdout."""
    print(f"{name}={value}")
    target = os.environ.get("GITHUB_OUTPUT")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(f"{name}={value}\n")


def workspace() -> Path:
    """The job's workspace (``GITHUB_WORKSPACE``), else the current folder."""
    return Path(os.environ.get("GITHUB_WORKSPACE") or os.getcwd()).resolve()


def checked_path(option: str, value: str) -> Path:
    """An input that the action also hands to actions/cache or actions/upload-artifact,
    refused unless it is one plain path inside the workspace."""
    bad = next((c for c in PATH_SPECIALS if c in value), None)
    if bad is not None or value.startswith("!"):
        what = repr(bad) if bad is not None else "a leading '!'"
        fail(f"{option} {value!r}: holds {what}, which the action's cache and upload "
             "steps read as more than one path; name one file or folder")
    root = workspace()
    resolved = (root / value).resolve()
    if resolved != root and root not in resolved.parents:
        fail(f"{option} {value}: is outside the workspace ({root}); the action caches and "
             "uploads only what is inside it")
    return Path(value)


def check_index_path(value: str) -> Path:
    index = checked_path("--index", value)
    if (workspace() / index).resolve() == workspace():
        fail(f"--index {value}: is the workspace itself; name a folder inside it")
    return index


def project_index() -> str:
    """The index `ceg check` would read here: the project file's, else $CEG_INDEX, else
    ./index (`ceg config show --json check` says it, with the CLI's own rules)."""
    done = subprocess.run([*ceg_command(), "config", "show", "--json", "check"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        # A bad project file: ceg's own one line, as the check step would print it.
        fail(done.stderr.strip().removeprefix("error: ") or "ceg config show failed")
    return str(json.loads(done.stdout)["commands"]["check"]["index"]["value"])


def resolve_index(value: str) -> Path:
    """The --index input, else the project file's (relative to the workspace where it
    is inside it, as the cache's paths are), checked as the action's paths are."""
    if value.strip():
        return check_index_path(value)
    found = Path(project_index())
    root = workspace()
    resolved = (root / found).resolve()
    if root in resolved.parents:
        found = Path(os.path.relpath(resolved, root))
    return check_index_path(str(found))


def split_sources(sources: str) -> list[Path]:
    try:
        return [Path(s) for s in shlex.split(sources)]
    except ValueError as exc:
        fail(f"--sources {sources!r}: {exc} (shell quoting: a name with a space in quotes)")


def _frame(digest: hashlib._Hash, tag: bytes, data: bytes) -> None:
    """One field: a tag, its length and its bytes, so that no two different lists
    of fields feed the hash the same bytes (a name cannot run into a content)."""
    digest.update(tag + len(data).to_bytes(8, "big") + data)


def _file_sha256(path: Path) -> bytes:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.digest()


def _name(path: Path | str) -> bytes:
    return str(path).encode("utf-8", "surrogateescape")


def _digest_source(path: Path, digest: hashlib._Hash) -> None:
    """A file's bytes, or a folder's files (sorted relative names, each with its bytes)."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        _frame(digest, b"D", str(len(files)).encode())
        for file in files:
            _frame(digest, b"N", _name(file.relative_to(path).as_posix()))
            _frame(digest, b"F", _file_sha256(file))
        return
    _frame(digest, b"F", _file_sha256(path))


def runner() -> str:
    """What an index's cache entry is good for: OS, machine and Python (``Linux-x86_64-py3.11``)."""
    return f"{platform.system()}-{platform.machine()}-py{sys.version_info[0]}.{sys.version_info[1]}"


def settings_prefix(sources: Sequence[Path], build_args: str) -> str:
    """The start of the keys of every index built with these settings (the runner, ceg's
    version, the build's options, the sources' names) whatever the sources hold: the
    cache restores the newest of them (``restore-keys``) and ``build`` updates it
    (``ceg index build --update``). An index of other settings is never restored."""
    digest = hashlib.sha256()
    _frame(digest, b"R", runner().encode())
    _frame(digest, b"V", ceg_version().encode())
    _frame(digest, b"A", build_args.encode("utf-8", "surrogateescape"))
    _frame(digest, b"n", str(len(sources)).encode())
    for source in sources:
        _frame(digest, b"S", _name(source))
    return f"{KEY_PREFIX}-{runner()}-{digest.hexdigest()[:16]}-"


def index_key(index: Path, sources: Sequence[Path], build_args: str) -> str:
    """What the cache is keyed by: the runner, and the sources an index is built from
    (names and bytes, with ceg's version and the build's options), or a ready index's
    own digest (its meta.json, which records each source's digest, the model and the
    chunker)."""
    digest = hashlib.sha256()
    _frame(digest, b"R", runner().encode())
    if sources:
        missing = [str(s) for s in sources if not s.exists()]
        if missing:
            fail(f"sources: {missing[0]} does not exist")
        _frame(digest, b"V", ceg_version().encode())
        _frame(digest, b"A", build_args.encode("utf-8", "surrogateescape"))
        _frame(digest, b"n", str(len(sources)).encode())
        for source in sources:
            _frame(digest, b"S", _name(source))
            _digest_source(source, digest)
        return f"{settings_prefix(sources, build_args)}{digest.hexdigest()[:40]}"
    else:
        meta = index / "meta.json"
        if not meta.is_file():
            fail(f"index: no index at {index} (no meta.json), and no sources to build one from")
        _frame(digest, b"M", meta.read_bytes())
    return f"{KEY_PREFIX}-{runner()}-{digest.hexdigest()[:40]}"


def stamp_path(index: Path) -> Path:
    """``.NAME.ceg-action`` beside the index ``NAME``."""
    resolved = (workspace() / index).resolve()
    return resolved.parent / f".{resolved.name}{STAMP_SUFFIX}"


def _meta_sha256(index: Path) -> str | None:
    meta = index / "meta.json"
    return hashlib.sha256(meta.read_bytes()).hexdigest() if meta.is_file() else None


def stale_reason(index: Path, key: str) -> str | None:
    """Why the index at ``index`` is not the one built under ``key`` (None: it is)."""
    meta = _meta_sha256(index)
    if meta is None:
        return "no index there"
    try:
        stamp = json.loads(stamp_path(index).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"no readable {stamp_path(index).name} says what it was built from"
    if not isinstance(stamp, dict) or stamp.get("key") != key:
        return "it was built from other sources or options"
    if stamp.get("meta_sha256") != meta:
        return "it changed since it was built from them"
    return None


def _stamp(index: Path) -> dict[str, Any]:
    """The stamp beside ``index`` (empty without a readable one)."""
    try:
        stamp = json.loads(stamp_path(index).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) else {}


def write_stamp(index: Path, key: str) -> None:
    stamp = stamp_path(index)
    part = stamp.with_name(stamp.name + ".part")
    part.write_text(json.dumps({"key": key, "meta_sha256": _meta_sha256(index)}) + "\n",
                    encoding="utf-8")
    os.replace(part, stamp)


def cmd_key(args: argparse.Namespace) -> int:
    index = resolve_index(args.index)
    sources = split_sources(args.sources)
    write_output("index", str(index))
    if args.if_any and not sources and not (index / "meta.json").is_file():
        write_output("key", "")  # no index: the records check against their contexts
        return 0
    write_output("key", index_key(index, sources, args.build_args))
    # The newest cache of the same settings, when none has this key: updated, not rebuilt.
    write_output("restore", settings_prefix(sources, args.build_args) if sources else "")
    # Cached with the index (a path relative to the workspace, as the index's is).
    write_output("stamp", Path(os.path.relpath(stamp_path(index), workspace())).as_posix())
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    index = resolve_index(args.index)
    sources = split_sources(args.sources)
    if not sources:
        fail("build: name the sources to build the index from")
    key = args.key or index_key(index, sources, args.build_args)
    why = stale_reason(index, key)
    if why is None:
        print(f"index {index} was built from these sources and options; not rebuilt")
        write_output("built", "false")
        return 0
    stamp = _stamp(index)
    update = why == "it was built from other sources or options" and \
        str(stamp.get("key", "")).startswith(settings_prefix(sources, args.build_args)) and \
        stamp.get("meta_sha256") == _meta_sha256(index)
    if update:
        # Restored by the settings' prefix: the same options, older contents.
        print(f"index {index} is updated: its sources changed since it was built")
    elif why != "no index there":
        print(f"index {index} is rebuilt: {why}")
    command = [*ceg_command(), "index", "build", *map(str, sources), "--index", str(index),
               *(["--update", "--prune"] if update else []), *shlex.split(args.build_args)]
    print("running: " + shlex.join(command), flush=True)
    code = subprocess.run(command).returncode
    if code == 0:
        write_stamp(index, key)
    write_output("built", "true" if code == 0 else "false")
    return code


#: The gate's thresholds: action input (and option of this script) -> ceg check's option.
THRESHOLDS = {
    "max_nonfactual_rate": "--max-nonfactual-rate",
    "max_nonfactual_responses": "--max-nonfactual-responses",
    "min_citation_recall": "--min-citation-recall",
    "min_citation_precision": "--min-citation-precision",
}


def check_command(args: argparse.Namespace) -> list[str]:
    """``ceg check`` with the action's inputs; an empty input is an option left out."""
    command = [*ceg_command(), "check", args.responses]
    for option, value in (("--index", args.index), ("--judge", args.judge)):
        if value.strip():
            command += [option, value]
    for name, option in THRESHOLDS.items():
        value = getattr(args, name)
        if value:
            command += [option, value]
    for option, value in (("--out", args.out), ("--report", args.report),
                          ("--junit", args.junit), ("--summary", args.summary)):
        if value:
            command += [option, value]
    return command + shlex.split(args.extra_args)


def cmd_check(args: argparse.Namespace) -> int:
    if args.index.strip():
        checked_path("--index", args.index)
    for option in ("report", "out", "junit"):
        value = getattr(args, option)
        if value:
            checked_path(f"--{option}", value)
    try:
        shlex.split(args.extra_args)
    except ValueError as exc:
        fail(f"--extra-args {args.extra_args!r}: {exc}")
    if not Path(args.responses).is_file():
        fail(f"responses: {args.responses} is not a file")
    for value in (args.report, args.junit, args.out):
        if value:
            Path(value).parent.mkdir(parents=True, exist_ok=True)
    command = check_command(args)
    print("running: " + shlex.join(command), flush=True)
    code = subprocess.run(command).returncode
    # The job fails by ceg's exit code in the action's last step, after the report
    # is uploaded; --exit-now fails this step instead (a run outside the action).
    write_output("exit-code", str(code))
    return code if args.exit_now else 0


class _Parser(argparse.ArgumentParser):
    """A bad argument is one line and exit 2, as ceg's own."""

    def error(self, message: str) -> NoReturn:
        fail(f"{self.prog.split()[-1]}: {message}")


def parser() -> argparse.ArgumentParser:
    top = _Parser(prog="ceg_action.py", description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True, parser_class=_Parser)
    index_help = "Empty: the project file's index, else ./index."
    for name in ("key", "build"):
        p = sub.add_parser(name)
        p.add_argument("--index", default="", help=index_help)
        p.add_argument("--sources", default="", help="Space-separated (shell quoting).")
        p.add_argument("--build-args", default="", help="More options of ceg index build.")
        if name == "build":
            p.add_argument("--key", default="",
                           help="The key step's key (default: computed again).")
        else:
            p.add_argument("--if-any", action="store_true",
                           help="An empty key where there is no index and no sources.")
    p = sub.add_parser("check")
    p.add_argument("--responses", required=True)
    p.add_argument("--index", default="", help=index_help)
    p.add_argument("--judge", default="", help="Empty: the project file's, else offline.")
    for name in THRESHOLDS:
        p.add_argument("--" + name.replace("_", "-"), default="")
    p.add_argument("--out", default="")
    p.add_argument("--report", default="")
    p.add_argument("--junit", default="")
    p.add_argument("--summary", default="", help="e.g. $GITHUB_STEP_SUMMARY")
    p.add_argument("--extra-args", default="", help="More options of ceg check.")
    p.add_argument("--exit-now", action="store_true",
                   help="Exit with ceg's code (default: 0, the code in the exit-code output).")
    return top


#: The options of this script that take no value.
FLAGS = frozenset({"--exit-now", "--if-any", "-h", "--help"})


def attach_values(argv: Sequence[str]) -> list[str]:
    """``--option VALUE`` as ``--option=VALUE``: the word after an option is its value,
    even one that starts with a dash (``--build-args --lexical``), which argparse
    would take for an option."""
    out: list[str] = []
    words = list(argv)
    i = 0
    while i < len(words):
        word = words[i]
        if (word.startswith("--") and word != "--" and "=" not in word and word not in FLAGS
                and i + 1 < len(words)):
            out.append(f"{word}={words[i + 1]}")
            i += 2
        else:
            out.append(word)
            i += 1
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    return parser().parse_args(attach_values(sys.argv[1:] if argv is None else argv))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return {"key": cmd_key, "build": cmd_build, "check": cmd_check}[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
