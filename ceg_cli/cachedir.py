"""Where ceg keeps what it caches: the root of the cache folder, and its entries' marker.

Every stage that caches (the LLM judge's replies, ``ceg eval``'s corpus
indexes, the ONNX exports of the embedding model) puts its entries under this
one folder; ``cacheprune`` says what the folder holds and prunes it. A folder
entry ceg makes holds a small marker file (``ENTRY_MARKER``) saying so, and
``ceg cache prune`` removes only folders it can tell are ceg's, and in them only
what ceg writes there: a file someone put in such a folder stays, and the folder
with it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "ENTRY_MARKER",
    "cache_root",
    "read_entry_marker",
    "remove_own",
    "split_entry",
    "write_entry_marker",
]

#: The file in a cache entry's folder that says ceg made the folder, and for what.
ENTRY_MARKER = ".ceg-cache-entry"


def cache_root() -> Path:
    """Where ceg caches (eval corpora, LLM replies): ``$CEG_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/ceg``, else ``~/.cache/ceg``."""
    if os.environ.get("CEG_CACHE_DIR"):
        return Path(os.environ["CEG_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ceg"


def write_entry_marker(folder: Path, kind: str) -> None:
    """Mark ``folder`` as a cache entry of ``kind`` made by ceg (once; atomically)."""
    path = folder / ENTRY_MARKER
    if read_entry_marker(folder) == kind:
        return
    tmp = folder / f"{ENTRY_MARKER}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps({"kind": kind, "made_by": "ceg"}) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_entry_marker(folder: Path) -> str | None:
    """The kind a valid marker in ``folder`` names; None when there is none or it is not ceg's."""
    try:
        raw = json.loads((folder / ENTRY_MARKER).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("made_by") != "ceg":
        return None
    kind = raw.get("kind")
    return kind if isinstance(kind, str) else None


def split_entry(
    folder: Path, is_own: Callable[[tuple[str, ...]], bool]
) -> tuple[list[Path], list[Path]]:
    """What under ``folder`` ceg wrote, and what it did not: (own files, foreign paths).

    ``is_own`` gets a path's parts relative to ``folder``; a folder it does not call
    ceg's is foreign as a whole (not looked into), and links are never followed.
    """
    files, _folders, foreign = _walk(folder, is_own)
    return files, foreign


def remove_own(folder: Path, is_own: Callable[[tuple[str, ...]], bool]) -> list[Path]:
    """Remove what ``is_own`` says ceg wrote under ``folder``, then the folders that this
    leaves empty (``folder`` too); returns what was left because ceg did not write it."""
    files, folders, foreign = _walk(folder, is_own)
    for file in files:
        file.unlink(missing_ok=True)
    # Deepest first (the walk lists a folder before what is in it), so a folder is empty
    # when its turn comes; one that is not (it holds something foreign, or something
    # that appeared meanwhile) stays.
    for here in reversed([folder, *folders]):
        try:
            here.rmdir()
        except OSError:
            continue
    return foreign


def _walk(
    folder: Path, is_own: Callable[[tuple[str, ...]], bool]
) -> tuple[list[Path], list[Path], list[Path]]:
    files: list[Path] = []
    folders: list[Path] = []
    foreign: list[Path] = []

    def walk(here: Path, parts: tuple[str, ...]) -> None:
        try:
            children = sorted(here.iterdir())
        except (FileNotFoundError, NotADirectoryError):  # removed meanwhile (a build's)
            return
        for child in children:
            rel = (*parts, child.name)
            if not is_own(rel):
                foreign.append(child)
            elif child.is_dir() and not child.is_symlink():
                folders.append(child)
                walk(child, rel)
            else:
                files.append(child)

    walk(folder, ())
    return files, folders, foreign
