"""Wikitext prose straight from mwparserfromhell's tokens, without its node tree.

``wikitext.clean_wikitext`` used to parse a page into mwparserfromhell's node
tree and walk it once. Building the tree (``Builder.build``: a ``Wikicode``, a
``SmartList`` and a node object per token run, each setter re-parsing its
argument) cost about four times the C tokenizer. ``render_tokens`` reads the
tokenizer's flat list instead, making the same structural decisions
``mwparserfromhell.parser.builder.Builder`` makes (which tokens are a tag's
name, its contents, a template's name and its parameters, a link's title and
its text) and writing exactly the pieces ``wikitext.render_tree`` writes, in the
same order.

Where the renderer needs a sub-tree's source text (a link's title, a
template's name, ``<nowiki>`` contents, a bare URL), it is rebuilt from the
tokens when they are text and HTML entities; anything else there (a template
in a link's title, say), and any token sequence other than those the Builder
builds from the tokenizer's output, gives up: ``render_tokens`` returns None
and the caller takes the tree path for the page. ``FALLBACKS`` counts why.

Written against mwparserfromhell 0.7's token classes (``parser.tokens``),
the version range ``pyproject.toml`` pins.
"""

from __future__ import annotations

import html
from collections import Counter
from html.entities import name2codepoint

from mwparserfromhell.parser import Parser
from mwparserfromhell.parser import tokens as T

from ceg_cli.corpus.wikirules import (
    _BLOCK_TAGS,
    _HEADING_MARK,
    _link_dropped,
    _link_label,
    _renders_words,
    _tag_start,
    _template_words,
)

#: Why pages took the tree path, since the process started (reason -> pages).
FALLBACKS: Counter[str] = Counter()

_Text = T.Text
_PARAM_STOPS = frozenset({T.TemplateParamSeparator, T.TemplateParamEquals, T.TemplateClose})
_NAME_STOPS = frozenset({T.TemplateParamSeparator, T.TemplateClose})
_ARG_STOPS = frozenset({T.ArgumentSeparator, T.ArgumentClose})
_LINK_STOPS = frozenset({T.WikilinkSeparator, T.WikilinkClose})
_EXT_STOPS = frozenset({T.ExternalLinkSeparator, T.ExternalLinkClose})
_HEADING_STOPS = frozenset({T.HeadingEnd})
_COMMENT_STOPS = frozenset({T.CommentEnd})
_TAG_NAME_STOPS = frozenset({T.TagAttrStart, T.TagCloseOpen, T.TagCloseSelfclose})
_ATTR_STOPS = _TAG_NAME_STOPS | {T.TagAttrEquals, T.TagAttrQuote}
_CONTENT_STOPS = frozenset({T.TagOpenClose})
_CLOSE_STOPS = frozenset({T.TagCloseClose})


class _GiveUp(Exception):
    """A token shape the walk does not read: the page takes the tree path."""


def render_tokens(wikitext: str, dropped: frozenset[str]) -> list[str] | None:
    """The pieces ``wikitext.render_tree(wikitext, dropped)`` gives, or None where
    the walk gives up (``FALLBACKS`` says why)."""
    # Parser() picks the C tokenizer when it is built, the pure-Python one otherwise:
    # the same tokens either way. It is cheap (well under a microsecond) and not
    # shareable between threads, so one a page.
    tokens = Parser()._tokenizer.tokenize(wikitext, 0, False)
    walk = _Walk(tokens, dropped)
    out: list[str] = []
    try:
        walk.seq(0, out, frozenset())
    except _GiveUp as exc:
        FALLBACKS[str(exc)] += 1
        return None
    except RecursionError:
        FALLBACKS["nesting too deep"] += 1
        return None
    except (KeyError, IndexError, ValueError) as exc:
        # A token without a field the walk reads, an entity normalize() rejects: the
        # tree path does whatever mwparserfromhell does with it (raising included).
        FALLBACKS[f"{type(exc).__name__} in the walk"] += 1
        return None
    return out


class _Walk:
    """One page's tokens. Each method takes the index of a token and returns the index
    after what it read; ``seq`` and ``skip`` stop at (and return the index of) a token
    of a type in ``stops``."""

    def __init__(self, tokens: list[T.Token], dropped: frozenset[str]) -> None:
        self.tokens = tokens
        self.dropped = dropped
        self.render = {
            T.TemplateOpen: self._template,
            T.ArgumentOpen: self._skip_argument,
            T.WikilinkOpen: self._wikilink,
            T.ExternalLinkOpen: self._external_link,
            T.HTMLEntityStart: self._entity,
            T.HeadingStart: self._heading,
            T.CommentStart: self._skip_comment,
            T.TagOpenOpen: self._tag,
        }
        self.skips = {
            T.TemplateOpen: self._skip_template,
            T.ArgumentOpen: self._skip_argument,
            T.WikilinkOpen: self._skip_link,
            T.ExternalLinkOpen: self._skip_external_link,
            T.HTMLEntityStart: self._skip_entity,
            T.HeadingStart: self._skip_heading,
            T.CommentStart: self._skip_comment,
            T.TagOpenOpen: self._skip_tag,
        }

    # -- sequences: the Builder's node lists --------------------------------------

    def seq(self, i: int, out: list[str], stops: frozenset[type]) -> int:
        """Render nodes into ``out`` up to a token in ``stops`` (the end of the page
        when ``stops`` is empty)."""
        tokens, render = self.tokens, self.render
        n = len(tokens)
        while i < n:
            token = tokens[i]
            kind = type(token)
            if kind is _Text:
                out.append(token["text"])
                i += 1
            elif kind in stops:
                return i
            else:
                handler = render.get(kind)
                if handler is None:  # the Builder raises ParserError here
                    raise _GiveUp(f"unexpected {kind.__name__}")
                i = handler(i, out)
        if stops:
            raise _GiveUp("missing close token")
        return i

    def skip(self, i: int, stops: frozenset[type]) -> int:
        """``seq`` without rendering."""
        tokens, skips = self.tokens, self.skips
        n = len(tokens)
        while i < n:
            kind = type(tokens[i])
            if kind is _Text:
                i += 1
            elif kind in stops:
                return i
            else:
                handler = skips.get(kind)
                if handler is None:
                    raise _GiveUp(f"unexpected {kind.__name__}")
                i = handler(i)
        raise _GiveUp("missing close token")

    def source(self, start: int, end: int) -> str:
        """The source text of tokens[start:end], already read by ``skip``: text and
        HTML entities only (``str()`` of the nodes the Builder would make)."""
        tokens = self.tokens
        parts = []
        i = start
        while i < end:
            token = tokens[i]
            kind = type(token)
            if kind is _Text:
                parts.append(token["text"])
                i += 1
            elif kind is T.HTMLEntityStart:
                value, entity, hex_char, i = self._entity_parts(i)
                if entity == "named":  # str(HTMLEntity)
                    parts.append(f"&{value};")
                elif entity == "hex":
                    parts.append(f"&#{hex_char}{value};")
                else:
                    parts.append(f"&#{value};")
            else:
                raise _GiveUp(f"{kind.__name__} in a source text")
        return "".join(parts)

    # -- templates and arguments --------------------------------------------------

    def _template(self, i: int, out: list[str]) -> int:
        tokens = self.tokens
        j = self.skip(i + 1, _NAME_STOPS)
        raw_name = self.source(i + 1, j).strip()
        if not _renders_words(raw_name):
            out.append("")
            return self._skip_params(j)
        positional = []
        while type(tokens[j]) is T.TemplateParamSeparator:
            # A parameter: [key =] value; the Builder keeps what follows the last "=".
            pieces: list[str] = []
            j = self.seq(j + 1, pieces, _PARAM_STOPS)
            showkey = False
            while type(tokens[j]) is T.TemplateParamEquals:
                showkey = True
                pieces = []
                j = self.seq(j + 1, pieces, _PARAM_STOPS)
            if not showkey:
                positional.append("".join(pieces).strip())
        out.append(_template_words(raw_name, positional))
        return j + 1

    def _skip_template(self, i: int) -> int:
        return self._skip_params(self.skip(i + 1, _NAME_STOPS))

    def _skip_params(self, j: int) -> int:
        """From a template's first separator or its close, past its close."""
        tokens = self.tokens
        while type(tokens[j]) is not T.TemplateClose:
            j = self.skip(j + 1, _PARAM_STOPS)
        return j + 1

    def _skip_argument(self, i: int, out: list[str] | None = None) -> int:
        return self._skip_parts(i, _ARG_STOPS, T.ArgumentSeparator)

    def _skip_parts(self, i: int, stops: frozenset[type], separator: type) -> int:
        """Past the construct opened at i, its parts ending at ``stops``: at a
        ``separator`` another part follows, at the other stop the construct ends."""
        j = self.skip(i + 1, stops)
        while type(self.tokens[j]) is separator:
            j = self.skip(j + 1, stops)
        return j + 1

    # -- links ---------------------------------------------------------------------

    def _wikilink(self, i: int, out: list[str]) -> int:
        tokens = self.tokens
        j = self.skip(i + 1, _LINK_STOPS)
        has_text = type(tokens[j]) is T.WikilinkSeparator
        shown = not _link_dropped(self.source(i + 1, j), has_text, self.dropped)
        if not has_text:
            if shown:
                title: list[str] = []
                self.seq(i + 1, title, _LINK_STOPS)
                out.append(_link_label("".join(title)))
            return j + 1
        k = self.seq(j + 1, out, _LINK_STOPS) if shown else self.skip(j + 1, _LINK_STOPS)
        if type(tokens[k]) is not T.WikilinkClose:
            raise _GiveUp("a second WikilinkSeparator")
        return k + 1

    def _skip_link(self, i: int) -> int:
        return self._skip_parts(i, _LINK_STOPS, T.WikilinkSeparator)

    def _external_link(self, i: int, out: list[str]) -> int:
        # [http://x text] shows "text"; [http://x] nothing; a bare URL itself.
        tokens = self.tokens
        j = self.skip(i + 1, _EXT_STOPS)
        if type(tokens[j]) is T.ExternalLinkClose:
            if not tokens[i].get("brackets"):
                out.append(self.source(i + 1, j))
            return j + 1
        k = self.seq(j + 1, out, _EXT_STOPS)
        if type(tokens[k]) is not T.ExternalLinkClose:
            raise _GiveUp("a second ExternalLinkSeparator")
        return k + 1

    def _skip_external_link(self, i: int) -> int:
        return self._skip_parts(i, _EXT_STOPS, T.ExternalLinkSeparator)

    # -- entities, headings, comments ---------------------------------------------

    def _entity_parts(self, i: int) -> tuple[str, str, str | None, int]:
        """(value, "named", "dec" or "hex", hex char, index after the end) of the
        entity at i, as ``Builder._handle_entity`` reads them."""
        tokens = self.tokens
        kinds = [type(t) for t in tokens[i + 1 : i + 5]]
        if kinds[:1] == [T.HTMLEntityNumeric]:
            if kinds[1:4] == [T.HTMLEntityHex, _Text, T.HTMLEntityEnd]:
                return str(tokens[i + 3]["text"]), "hex", tokens[i + 2].get("char"), i + 5
            if kinds[1:3] == [_Text, T.HTMLEntityEnd]:
                return str(tokens[i + 2]["text"]), "dec", None, i + 4
        elif kinds[:2] == [_Text, T.HTMLEntityEnd]:
            return str(tokens[i + 1]["text"]), "named", None, i + 3
        raise _GiveUp("an HTML entity of another shape")

    def _entity(self, i: int, out: list[str]) -> int:
        value, kind, _, end = self._entity_parts(i)
        # HTMLEntity.normalize()
        if kind == "named":
            out.append(chr(name2codepoint[value]))
        elif kind == "hex":
            out.append(chr(int(value, 16)))
        else:
            out.append(chr(int(value)))
        return end

    def _skip_entity(self, i: int) -> int:
        return self._entity_parts(i)[3]

    def _heading(self, i: int, out: list[str]) -> int:
        level = self.tokens[i].get("level")
        if type(level) is not int or not 1 <= level <= 6:
            raise _GiveUp("a heading level out of range")
        out.append(f"\n\n{_HEADING_MARK}{level}{_HEADING_MARK}")
        j = self.seq(i + 1, out, _HEADING_STOPS)
        out.append("\n\n")
        return j + 1

    def _skip_heading(self, i: int) -> int:
        return self.skip(i + 1, _HEADING_STOPS) + 1

    def _skip_comment(self, i: int, out: list[str] | None = None) -> int:
        return self.skip(i + 1, _COMMENT_STOPS) + 1

    # -- tags ------------------------------------------------------------------------

    def _tag_head(self, i: int) -> tuple[int, int]:
        """(end of the tag's name, index of its TagCloseOpen or TagCloseSelfclose)."""
        tokens = self.tokens
        name_end = j = self.skip(i + 1, _TAG_NAME_STOPS)
        while type(tokens[j]) is T.TagAttrStart:
            # An attribute: name [= value], quotes anywhere (Builder._handle_attribute).
            j = self.skip(j + 1, _ATTR_STOPS)
            while type(tokens[j]) in (T.TagAttrEquals, T.TagAttrQuote):
                j = self.skip(j + 1, _ATTR_STOPS)
        return name_end, j

    def _tag(self, i: int, out: list[str]) -> int:
        tokens = self.tokens
        name_end, j = self._tag_head(i)
        name = self.source(i + 1, name_end).strip().lower()
        if not _tag_start(name, bool(tokens[i].get("wiki_markup")), out):
            return self._skip_tag_body(j)
        if type(tokens[j]) is T.TagCloseSelfclose:
            return j + 1
        if name == "nowiki":
            k = self.skip(j + 1, _CONTENT_STOPS)
            out.append(html.unescape(self.source(j + 1, k)))
        else:
            k = self.seq(j + 1, out, _CONTENT_STOPS)
        if name in _BLOCK_TAGS:
            out.append("\n\n")
        return self.skip(k + 1, _CLOSE_STOPS) + 1

    def _skip_tag(self, i: int) -> int:
        return self._skip_tag_body(self._tag_head(i)[1])

    def _skip_tag_body(self, j: int) -> int:
        """From a tag's TagCloseOpen or TagCloseSelfclose, past the tag."""
        if type(self.tokens[j]) is T.TagCloseSelfclose:
            return j + 1
        k = self.skip(j + 1, _CONTENT_STOPS)
        return self.skip(k + 1, _CLOSE_STOPS) + 1
