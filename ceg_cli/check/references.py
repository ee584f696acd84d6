"""An answer's references list ("Sources:", footnotes): where it is, so it is not judged.

Chatbots end answers with the sources they used::

    Paris is the capital of France [1].

    Sources:
    [1] Paris - Wikipedia https://en.wikipedia.org/wiki/Paris
    [2] Louvre https://www.louvre.fr

Those lines say where the claims come from; they make none. ``find_references`` gives
the spans of such blocks, whole lines, so that the check leaves their segments out of the
verdicts and of citation recall and precision (they stay in the text and the output, with
their offsets). What counts, line by line:

- a **heading**: ``Sources``, ``References``, ``Citations``, ``Bibliography``, ``Works
  cited``, ``Further reading``, ``Footnotes``, ``Learn more`` (singular too, any case), alone
  on its line, optionally as a Markdown ``#`` heading, in ``**bold**``, with a colon;
- an **entry**: a line (after an optional bullet or ``1.``) that opens with a label
  (``[1]``, ``[^1]``, ``[doc-7]``) and holds a web address (``[1] Paris https://...``,
  ``[1]: https://...``); a footnote or link definition (``[1]: anything``, ``[^1]: anything``);
  or a line that is only a web address or a Markdown link (``- [Paris](https://...)``);
- under a heading, **any line** up to the first blank line that is followed by a line
  that is not an entry or a list item: "Sources:" / "- Wikipedia, Paris" / "- Britannica"
  are all references, and so is a plain title line right under the heading.

A block is a heading with the lines under it, or a run of entries (blank lines between
entries are part of it); a heading with nothing under it is no block. A list item that
makes a claim and cites a web address without a label (``- Paris is big, see
https://x.org``) is no entry: outside a heading's block it is judged as any claim.
Fenced code is never a references list.
"""

from __future__ import annotations

import re

__all__ = ["REFERENCE_REASON", "find_references"]

#: The reason a segment of a references list gets (verdict ``no_claim``): the output's
#: way of saying that the segment was recognised as a reference, not judged.
REFERENCE_REASON = "a line of the answer's references list: not a claim"

_HEADING_RE = re.compile(
    r"[^\S\r\n]*(?:#{1,6}[^\S\r\n]*)?(?:[*_]{1,2})?"
    r"(?:sources?|references?|citations?|bibliography|works[^\S\r\n]+cited|further[^\S\r\n]+"
    r"reading|footnotes?|learn[^\S\r\n]+more)"
    r"[^\S\r\n]*(?:[*_]{1,2})?[^\S\r\n]*:?[^\S\r\n]*(?:[*_]{1,2})?[^\S\r\n]*",
    re.IGNORECASE,
)
_BULLET_RE = re.compile(r"[^\S\r\n]*(?:(?:[-*+•]|\(?[0-9]{1,3}[.)])[^\S\r\n]+)?")
_LIST_ITEM_RE = re.compile(r"[^\S\r\n]*(?:[-*+•]|\(?[0-9]{1,3}[.)]|\[[^\[\]\r\n]{1,100}\])")
_LABEL_RE = re.compile(r"\[\^?[^\[\]\s][^\[\]\r\n]{0,99}\]")
_DEFINITION_RE = re.compile(r"\[\^?[^\[\]\r\n]{1,100}\]:")
_URL_RE = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]{0,20}://|www\.)[^\s<>\"'`]+")
_LINK_ONLY_RE = re.compile(
    r"(?:<?(?:[A-Za-z][A-Za-z0-9+.-]{0,20}://|www\.)[^\s<>\"'`]+>?"
    r"|\[[^\[\]\r\n]*\]\([^()\s]+\))[^\S\r\n]*"
)
_FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})")
_LINE_RE = re.compile(r"[^\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]*")


def find_references(text: str) -> list[tuple[int, int]]:
    """The spans of ``text`` that are references lists, whole lines, in order."""
    lines = _lines(text)
    kinds = [_kind(text, s, e) for s, e in lines]
    _hide_code(text, lines, kinds)
    blocks: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        if kinds[i] == "heading":
            last = _under_heading(text, lines, kinds, i)
            if last > i:
                blocks.append((lines[i][0], lines[last][1]))
                i = last + 1
                continue
        elif kinds[i] == "entry":
            last = i
            j = i + 1
            while j < len(lines) and kinds[j] in ("entry", "blank"):
                if kinds[j] == "entry":
                    last = j
                j += 1
            blocks.append((lines[i][0], lines[last][1]))
            i = last + 1
            continue
        i += 1
    return blocks


def _under_heading(
    text: str, lines: list[tuple[int, int]], kinds: list[str], heading: int
) -> int:
    """The last line of the block the heading at ``heading`` opens (``heading``: none)."""
    last = heading
    blank = False
    for j in range(heading + 1, len(lines)):
        kind = kinds[j]
        if kind == "code":
            break
        if kind == "blank":
            blank = True
            continue
        s, e = lines[j]
        listed = kind in ("entry", "heading") or _LIST_ITEM_RE.match(text, s, e) is not None
        if blank and not listed and last > heading:
            break  # "Let me know if ..." after the list
        if kind == "heading" and last > heading:
            break  # the next heading opens a block of its own
        last = j
        blank = False
    return last


def _kind(text: str, start: int, end: int) -> str:
    line = text[start:end]
    if not line.strip():
        return "blank"
    heading = _HEADING_RE.match(text, start, end)
    if heading is not None and heading.end() == end:
        return "heading"
    bullet = _BULLET_RE.match(text, start, end)
    body = bullet.end() if bullet is not None else start
    if _DEFINITION_RE.match(text, body, end):
        return "entry"
    if _LINK_ONLY_RE.fullmatch(text, body, end):
        return "entry"
    label = _LABEL_RE.match(text, body, end)
    if label is not None and _URL_RE.search(text, label.end(), end) is not None:
        return "entry"
    return "text"


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line, without its line break (``str.splitlines``' breaks)."""
    spans = []
    pos = 0
    n = len(text)
    while pos <= n:
        m = _LINE_RE.match(text, pos)
        end = m.end() if m is not None else pos
        spans.append((pos, end))
        if end >= n:
            break
        pos = end + (2 if text.startswith("\r\n", end) else 1)
    return spans


def _hide_code(text: str, lines: list[tuple[int, int]], kinds: list[str]) -> None:
    """Mark the lines of fenced code blocks (an unclosed fence runs to the end) as code."""
    fence: tuple[str, int] | None = None
    for n, (s, e) in enumerate(lines):
        m = _FENCE_RE.match(text, s, e)
        if fence is None:
            if m is not None:
                fence = (m[1][0], len(m[1]))
                kinds[n] = "code"
            continue
        kinds[n] = "code"
        if m is not None and m[1][0] == fence[0] and len(m[1]) >= fence[1] \
                and not text[m.end():e].strip():
            fence = None
