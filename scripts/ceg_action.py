#!/usr/bin/env python3
"""The steps of ceg's GitHub Action (action.yml), one subcommand each.

    ceg_action.py key   [--index DIR] [--sources "A B"]   the cache key of the index
    ceg_action.py build [--index DIR] --sources "A B"     build it, unless the cache restored it
    ceg_action.py check --responses FILE [--index DIR] …  run ceg check; record its exit code

An empty --index is the project file's (ceg.toml or [tool.ceg], as `ceg check` finds
it), else ./index; an empty --judge or threshold is left out, so the project file's
applies: the action judges as the team's CLI and tests do.

Kept in one script, not in the YAML, so that a test runs what the action runs.
Standard library only: it runs before and beside the installed ceg, which it calls
as a command (the one next to this Python, else the one on PATH). Outputs go to
$GITHUB_OUTPUT as ``name=value`` lines when it is set; a bad argument is one line
and exit 2, as ceg's own.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

#: Part of every key: a cache written by another layout of this script is not read.
KEY_PREFIX = "ceg-index-v1"


def fail(message: str) -> None:
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


def project_index() -> str:
    """The index `ceg check` would read here: the project file's, else $CEG_INDEX, else
    ./index (`ceg config show --json check` says it, with the CLI's own rules)."""
    import json

    done = subprocess.run([*ceg_command(), "config", "show", "--json", "check"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        # A bad project file: ceg's own one line, as the check step would print it.
        fail(done.stderr.strip().removeprefix("error: ") or "ceg config show failed")
    return str(json.loads(done.stdout)["commands"]["check"]["index"]["value"])


def resolve_index(index: str) -> Path:
    return Path(index) if index.strip() else Path(project_index())


def split_sources(sources: str) -> list[Path]:
    return [Path(s) for s in shlex.split(sources)]


def _digest_path(path: Path, digest: hashlib._Hash) -> None:
    """A file's bytes, or a folder's files in sorted order with their relative names."""
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(str(file.relative_to(path)).encode("utf-8", "surrogateescape") + b"\0")
            _digest_path(file, digest)
        return
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    digest.update(b"\0")


def index_key(index: Path, sources: Sequence[Path], build_args: str) -> str:
    """What the cache is keyed by: the sources an index is built from (with ceg's
    version and the build's options), or a ready index's own digest (its meta.json,
    which records each source's digest, the model and the chunker)."""
    digest = hashlib.sha256()
    if sources:
        missing = [str(s) for s in sources if not s.exists()]
        if missing:
            fail(f"sources: {missing[0]} does not exist")
        digest.update(f"{ceg_version()}\n{build_args}\n".encode())
        for source in sources:
            digest.update(str(source).encode("utf-8", "surrogateescape") + b"\0")
            _digest_path(source, digest)
    else:
        meta = index / "meta.json"
        if not meta.is_file():
            fail(f"index: no index at {index} (no meta.json), and no sources to build one from")
        digest.update(meta.read_bytes())
    return f"{KEY_PREFIX}-{digest.hexdigest()[:40]}"


def cmd_key(args: argparse.Namespace) -> int:
    sources = split_sources(args.sources)
    index = resolve_index(args.index)
    write_output("index", str(index))
    if args.if_any and not sources and not (index / "meta.json").is_file():
        write_output("key", "")  # no index: the records check against their contexts
        return 0
    write_output("key", index_key(index, sources, args.build_args))
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    sources = split_sources(args.sources)
    if not sources:
        fail("build: name the sources to build the index from")
    index = resolve_index(args.index)
    if (index / "meta.json").is_file():
        # Restored from the cache, whose key is the digest of these very sources.
        print(f"index {index} is there (restored from the cache); not rebuilt")
        write_output("built", "false")
        return 0
    command = [*ceg_command(), "index", "build", *map(str, sources), "--index", str(index),
               *shlex.split(args.build_args)]
    print("running: " + shlex.join(command), flush=True)
    code = subprocess.run(command).returncode
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


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="ceg_action.py", description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    index_help = "Empty: the project file's index, else ./index."
    for name in ("key", "build"):
        p = sub.add_parser(name)
        p.add_argument("--index", default="", help=index_help)
        p.add_argument("--sources", default="", help="Space-separated (shell quoting).")
        p.add_argument("--build-args", default="", help="More options of ceg index build.")
        if name == "key":
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


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return {"key": cmd_key, "build": cmd_build, "check": cmd_check}[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
