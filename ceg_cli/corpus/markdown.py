"""Markdown to the plain text that passages are cut from, with markdown-it-py.

Markdown is parsed as CommonMark (plus GitHub's tables) and only its text is
kept: emphasis, code spans, links (inline, reference and automatic; reference
definitions vanish), images (their alt text stays), HTML tags and comments,
block-quote markers, list markers, rules and setext underlines all go. Each
heading, paragraph, list item, code block and table row becomes a line of its
own, and a table row reads as its cells separated by ``; ``. A paragraph
wrapped over several source lines becomes one line, so that sentence splitting
(where a line break always ends a sentence) sees its sentences whole.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

__all__ = ["markdown_to_text"]

_FRONT_MATTER = re.compile(r"\A---\n.*?\n(?:---|\.\.\.)\n", re.DOTALL)
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_HTML_TAG = re.compile(r"<[^>]*>")
_TASK_BOX = re.compile(r"\A\[[ xX]\] ")
CELL_SEPARATOR = "; "


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    # html=True parses HTML as HTML, so that it can be dropped; otherwise
    # tags would stay in the text as literal characters.
    return MarkdownIt("commonmark", {"html": True}).enable("table")


def markdown_to_text(source: str) -> tuple[str, str | None]:
    """The text of the Markdown ``source``, and its first heading (None if it has none).

    YAML front matter (``---`` at the very top) is dropped. Blocks are separated
    by a blank line; the items of a tight list and the rows of a table by a
    line break.
    """
    source = _FRONT_MATTER.sub("", source)
    tokens = _parser().parse(source)
    blocks: list[str] = []
    title: str | None = None
    row: list[str] = []
    for i, token in enumerate(tokens):
        kind = token.type
        if kind == "inline":
            text = _inline_text(token.children or [])
            opener = tokens[i - 1]
            if opener.type in ("th_open", "td_open"):
                row.append(text.strip())
                continue
            if opener.type == "heading_open" and title is None and text.strip():
                title = text.strip()
            if opener.hidden:  # a tight list item: drop a GitHub task box
                text = _TASK_BOX.sub("", text)
            _add(blocks, text, tight=opener.hidden)
        elif kind == "tr_open":
            row = []
        elif kind == "tr_close":
            _add(blocks, CELL_SEPARATOR.join(cell for cell in row if cell), tight=True)
        elif kind in ("fence", "code_block"):
            _add(blocks, token.content, tight=False)
        elif kind == "html_block":
            _add(blocks, _html_text(token.content), tight=False)
        elif kind == "table_open" or (kind.endswith("_list_open") and token.level == 0):
            blocks.append("\n\n")  # its first row or item starts a paragraph of its own
    return "".join(blocks).strip(), title


def _add(blocks: list[str], text: str, *, tight: bool) -> None:
    """Append a block: after a line break if ``tight``, else after a blank line."""
    text = text.strip("\n")
    if not text.strip():
        return
    if blocks and not blocks[-1].endswith("\n\n"):
        blocks.append("\n" if tight else "\n\n")
    blocks.append(text)


def _inline_text(children: list[Token]) -> str:
    parts: list[str] = []
    for child in children:
        kind = child.type
        if kind in ("text", "code_inline", "image"):
            # An image's content is its alt text, already free of markup.
            parts.append(child.content)
        elif kind == "softbreak":
            parts.append(" ")
        elif kind == "hardbreak":
            parts.append("\n")
        # Tags (link, emphasis, strikethrough, inline HTML) carry no text.
    return "".join(parts)


def _html_text(block: str) -> str:
    """The text between the tags of an HTML block (``<details>``, a centred ``<p>``)."""
    text = _HTML_TAG.sub("", _HTML_COMMENT.sub("", block))
    return html.unescape(text)
