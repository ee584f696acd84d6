"""A folder of ``.txt`` and ``.md`` files, read recursively in a fixed order.

Each file is one document: its id is its path relative to the folder (POSIX
separators, so an index built on Windows and on Linux agree), its title the
first Markdown heading or else the file name without its suffix.

Symbolic links: the folder may come from an untrusted branch, and a link such
as ``docs/passwd.txt -> /etc/passwd`` must not put a file from elsewhere on the
machine into the index. By default a link to a file is read only when its
target lies inside the folder; a link leading out of it is skipped with a
warning naming it. Links to folders are not descended (their files, when they
lie inside, are read under their own paths). ``follow_symlinks`` reads every
link and descends linked folders, each real folder once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ceg_cli.corpus.markdown import markdown_to_text
from ceg_cli.types import Document

SUFFIXES = frozenset({".txt", ".md"})
#: The version of what a file becomes (its text, its title): ``--update`` recognises an
#: unchanged file by its bytes and this, so a change to ``read_text_files`` or
#: ``markdown_to_text`` that changes a document must add one here.
RULES = 1

_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


def read_folder(
    path: Path,
    *,
    follow_symlinks: bool = False,
    on_warning: Callable[[str], None] | None = None,
) -> Iterator[Document]:
    """Yield one ``Document`` per ``.txt``/``.md`` file under ``path``, sorted by id.

    Hidden files and folders (names starting with ``.``) are skipped, so a
    ``.git`` folder is never indexed. Files that are not UTF-8, are empty or
    are not regular files (a FIFO, a device), and symbolic links leading out
    of the folder unless ``follow_symlinks``, are reported through
    ``on_warning`` and skipped.
    """
    warn = on_warning or (lambda _message: None)
    yield from read_text_files(path, text_files(path, follow_symlinks, warn), warn)


def read_text_files(
    path: Path, files: Iterable[tuple[str, Path]], on_warning: Callable[[str], None] | None
) -> Iterator[Document]:
    """The documents of some of ``text_files(path, ...)``'s files (a part of the folder)."""
    warn = on_warning or (lambda _message: None)
    for relative, target in files:
        file = path / relative
        if not target.is_file():
            warn(f"{file}: not a regular file; file skipped")
            continue
        try:
            text = target.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            warn(f"{file}: not UTF-8 ({exc.reason} at byte {exc.start}); file skipped")
            continue
        except OSError as exc:
            warn(f"{file}: cannot read ({exc.strerror or exc}); file skipped")
            continue
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        title = file.stem
        if file.suffix.lower() == ".md":
            text, heading = markdown_to_text(text)
            title = heading or title
        text = _BLANK_LINES.sub("\n\n", text).strip()
        if not text:
            warn(f"{file}: empty; file skipped")
            continue
        yield Document(id=relative, title=title, text=text, url=None, source=str(path))


def text_files(
    root: Path, follow_symlinks: bool, warn: Callable[[str], None]
) -> list[tuple[str, Path]]:
    """(relative POSIX path, path to read) of the text files under ``root``, sorted.

    The path to read is a link's resolved target, the one that was checked, so
    that the link cannot be swapped between the check and the read.
    """
    real_root = root.resolve()
    walked = {real_root}
    found: list[tuple[str, Path]] = []
    for directory, subdirs, files in os.walk(root, followlinks=follow_symlinks):
        here = Path(directory)
        # Sorted, so that which of two ways to one folder is taken does not
        # depend on the file system's order.
        subdirs[:] = [
            d
            for d in sorted(subdirs)
            if not d.startswith(".")
            and _descend(here / d, real_root, follow_symlinks, walked, warn)
        ]
        base = here.relative_to(root)
        for name in files:
            if name.startswith(".") or Path(name).suffix.lower() not in SUFFIXES:
                continue
            file = here / name
            target = file.resolve() if file.is_symlink() else file
            if target is not file and not follow_symlinks and not target.is_relative_to(real_root):
                warn(f"{file}: a symbolic link to {target}, outside the folder; file skipped "
                     "(--follow-symlinks reads it)")
                continue
            found.append(((base / name).as_posix(), target))
    # Sorted here rather than relying on os.walk's order, which is the
    # filesystem's and differs between machines.
    return sorted(found)


def _descend(
    folder: Path,
    real_root: Path,
    follow_symlinks: bool,
    walked: set[Path],
    warn: Callable[[str], None],
) -> bool:
    """Whether the walk enters ``folder``; following links, each real folder once."""
    if follow_symlinks:
        # Reached twice (a link beside its target, a link back up, which would
        # loop forever): read once.
        real = folder.resolve()
        if real in walked:
            return False
        walked.add(real)
        return True
    if not folder.is_symlink():
        return True
    target = folder.resolve()
    if not target.is_relative_to(real_root):
        warn(f"{folder}: a symbolic link to {target}, outside the folder; not read "
             "(--follow-symlinks reads it)")
    return False

