"""A folder of ``.txt`` and ``.md`` files, read recursively in a fixed order.

Each file is one document: its id is its path relative to the folder (POSIX
separators, so an index built on Windows and on Linux agree), its title the
first Markdown heading or else the file name without its suffix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from ceg_cli.types import Document

SUFFIXES = frozenset({".txt", ".md"})

_FRONT_MATTER = re.compile(r"\A---\n.*?\n(?:---|\.\.\.)\n", re.DOTALL)
# The closing #s of "## Title ##" need a space before them ("# C#" keeps its #).
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_FENCE = re.compile(r"^ {0,3}(```|~~~).*$\n?", re.MULTILINE)
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


def read_folder(
    path: Path, *, on_warning: Callable[[str], None] | None = None
) -> Iterator[Document]:
    """Yield one ``Document`` per ``.txt``/``.md`` file under ``path``, sorted by id.

    Hidden files and folders (names starting with ``.``) are skipped, so a
    ``.git`` folder is never indexed. Files that are not UTF-8 or are empty
    are reported through ``on_warning`` and skipped.
    """
    warn = on_warning or (lambda _message: None)
    for relative in _text_files(path):
        file = path / relative
        try:
            text = file.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            warn(f"{file}: not UTF-8 ({exc.reason} at byte {exc.start}); file skipped")
            continue
        except OSError as exc:
            warn(f"{file}: cannot read ({exc.strerror or exc}); file skipped")
            continue
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        title = file.stem
        if file.suffix.lower() == ".md":
            text = _FRONT_MATTER.sub("", text)
            heading = _HEADING.search(text)
            if heading is not None:
                title = _strip_markdown(heading.group(1)).strip() or title
            text = _strip_markdown(text)
        text = _BLANK_LINES.sub("\n\n", text).strip()
        if not text:
            warn(f"{file}: empty; file skipped")
            continue
        yield Document(id=relative, title=title, text=text, url=None, source=str(path))


def _text_files(root: Path) -> list[str]:
    """Relative POSIX paths of the text files under ``root``, sorted."""
    found: list[str] = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if not d.startswith(".")]
        base = Path(directory).relative_to(root)
        for name in files:
            if not name.startswith(".") and Path(name).suffix.lower() in SUFFIXES:
                found.append((base / name).as_posix())
    # Sorted here rather than relying on os.walk's order, which is the
    # filesystem's and differs between machines.
    return sorted(found)


def _strip_markdown(text: str) -> str:
    """Remove the trivial Markdown markup that would otherwise pollute passages."""
    text = _COMMENT.sub("", text)
    text = _FENCE.sub("", text)
    text = _HEADING.sub(r"\1", text)
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    return _EMPHASIS.sub(r"\2", text)
