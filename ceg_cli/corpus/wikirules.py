"""The rules both wikitext renderers follow: which tags, templates and links show what.

``wikitext.render_tree`` (mwparserfromhell's node tree) and ``wikitokens``
(its token list, the fast path) make every decision about what a reader of
the rendered page sees through these tables and functions, so that the two
give the same text (``tests/test_wikitext_tokens.py``).
"""

from __future__ import annotations

import re

# Tags whose content is not prose (or is rendered out of the text flow).
_DROPPED_TAGS = frozenset(
    """ref references gallery math chem ce timeline score graph hiero imagemap
    templatedata templatestyles mapframe maplink syntaxhighlight source includeonly
    inputbox categorytree indicator section table style script""".split()
)
# Tags rendered as a block: their content becomes its own paragraph.
_BLOCK_TAGS = frozenset({"blockquote", "div", "p", "center", "poem", "pre"})
# Inline templates whose output is part of the sentence; every other template
# (infoboxes, navboxes, citation needed, ...) is dropped.
_WRAPPER_TEMPLATES = frozenset(
    {"nowrap", "nobr", "nowrap begin", "sc", "smallcaps", "small caps", "small", "smaller", "big"}
)
#: Every other template whose name ``_inline_template`` reads.
_WORD_TEMPLATES = frozenset(
    {"convert", "cvt", "lang", "sic", "as written", "'", "'s", '"', "ndash", "snd", "mdash"}
)
_RANGE_WORDS = frozenset({"-", "–", "to", "and", "or", "by", "x", "×", "+", "and(-)", "to(-)"})
_LANG_CODE = re.compile(r"^[a-z]{2,3}(?:-[a-z0-9]+)*$|^simple$")
# A heading is marked during the walk so the final pass can see it as one
# paragraph (and drop headings left with no text under them).
_HEADING_MARK = "\x00"


def _renders_words(raw_name: str) -> bool:
    """Whether ``_inline_template`` gives text for a template of this name."""
    name = raw_name.strip().casefold().replace("_", " ")
    return (name.startswith(("formatnum:", "lang-")) or name in _WORD_TEMPLATES
            or name in _WRAPPER_TEMPLATES)


def _prefix(name: str) -> str:
    """A link's namespace prefix as ``dropped`` holds it: "Category_talk " -> "category talk"."""
    return " ".join(name.replace("_", " ").split()).casefold()


def _link_dropped(source: str, has_text: bool, dropped: frozenset[str]) -> bool:
    """Whether a link of this title (its source text) shows nothing."""
    title = source.strip()
    # A leading colon makes a category/file/language link an ordinary inline one.
    inline = title.startswith(":")
    prefix, sep, _ = title.lstrip(":").partition(":")
    prefix = _prefix(prefix)
    if sep and not inline:
        if prefix in dropped:
            return True
        if not has_text and _LANG_CODE.match(prefix):
            return True  # interlanguage link: [[de:Foo]]
    return False


def _link_label(rendered_title: str) -> str:
    """What a link without text shows: its title, less a leading colon and the #section."""
    shown = rendered_title.strip().lstrip(":")
    return shown.partition("#")[0] or shown


def _tag_start(name: str, wiki_markup: bool, out: list[str]) -> bool:
    """Write what a tag named ``name`` puts before its contents; False if it shows
    nothing more (a dropped tag, ``<hr>``)."""
    if name in _DROPPED_TAGS:
        return False
    if name == "hr":
        out.append("\n\n")
        return False
    if name == "br":
        out.append("\n")
    elif name in ("li", "dt"):
        # A wiki list marker is already at the start of a line; an HTML <li>
        # may not be.
        if out and not out[-1].endswith("\n"):
            out.append("\n")
    elif name == "dd":
        out.append(" " if wiki_markup else "\n")
    elif name in _BLOCK_TAGS:
        out.append("\n\n")
    return True


def _template_words(raw_name: str, positional: list[str]) -> str:
    """What the template ``raw_name`` (stripped) renders, given its positional
    parameters' rendered text (stripped)."""
    name = raw_name.casefold().replace("_", " ")
    if name.startswith("formatnum:"):  # a parser function: {{formatnum:3003}}
        return raw_name.partition(":")[2].strip()
    if name in ("convert", "cvt") and len(positional) >= 2:
        if positional[1] in _RANGE_WORDS and len(positional) >= 4:
            return " ".join(positional[:4])
        return f"{positional[0]} {positional[1]}"
    if name in _WRAPPER_TEMPLATES and positional:
        return positional[0]
    if name == "lang" and len(positional) >= 2:
        return positional[1]
    if name.startswith("lang-") and positional:
        return positional[0]
    if name in ("sic", "as written") and positional:
        return positional[-1]
    if name in ("'", "'s", '"'):
        return name
    if name in ("ndash", "snd"):
        return " – "
    if name == "mdash":
        return " — "
    return ""
