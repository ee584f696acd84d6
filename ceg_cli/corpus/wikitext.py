"""Wikitext to plain prose, for retrieval and citation.

The output keeps what a reader of the rendered article sees as running text:
paragraphs, headings (each on its own line, as its own paragraph) and list
items (one a line). Everything that is layout or metadata rather than prose
goes: templates, references, tables, files and images with their captions,
categories, interlanguage links, comments, galleries, maths.

mwparserfromhell's tokenizer does the parsing and ``wikitokens`` renders its
tokens; mwparserfromhell's node tree (``render_tree``) is the reference, and the
fallback for the rare page the walk does not read. A few regexes run first to
drop the bulk that never reaches the output (comments, ``<ref>`` bodies with
their citation templates), which makes parsing several times faster.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterable

import mwparserfromhell
from mwparserfromhell.nodes import (
    Argument,
    Comment,
    ExternalLink,
    Heading,
    HTMLEntity,
    Node,
    Tag,
    Template,
    Text,
    Wikilink,
)
from mwparserfromhell.wikicode import Wikicode

from ceg_cli.corpus.wikilocal import VARIANT_LANGUAGES, convert_variants
from ceg_cli.corpus.wikirules import (
    _BLOCK_TAGS,
    _HEADING_MARK,
    _link_dropped,
    _link_label,
    _prefix,
    _renders_words,
    _tag_start,
    _template_words,
)
from ceg_cli.corpus.wikitokens import render_tokens

# English canonical names; a dump's <siteinfo> adds its localized ones
# (e.g. "Файл", "Категория" on bgwiki) through `dropped_namespaces`.
DEFAULT_DROPPED_NAMESPACES: frozenset[str] = frozenset({"file", "image", "media", "category"})

#: The cleaning rules' version: raise it when a change of them would change what some
#: page cleans to. ``cleaning_rules`` adds a digest of the modules that clean, so an
#: edit that forgets to raise it still counts (an index update then cleans each page of
#: a dump once again, and re-embeds only those whose passages came out otherwise).
CLEANING_VERSION = 1
#: What decides a page's text: these modules (and the data the wiki's names come from).
_CLEANING_FILES = ("wikitext.py", "wikitokens.py", "wikirules.py", "wikilocal.py",
                   "wikinames.json", "mediawiki.py")


@functools.cache
def cleaning_rules() -> str:
    """``CLEANING_VERSION``, mwparserfromhell's version, and a digest of the cleaning code.

    Part of the digest ``--update`` records for a dump's page (``mediawiki.Revision``):
    a page whose revision is unchanged is not cleaned again only while this is too.
    """
    import hashlib
    from importlib import resources

    h = hashlib.sha256()
    folder = resources.files("ceg_cli.corpus")
    for name in _CLEANING_FILES:
        try:
            h.update(name.encode() + b"\0" + folder.joinpath(name).read_bytes() + b"\0")
        except OSError:  # not shipped as source: the package's version stands in
            from ceg_cli import __version__

            h.update(f"{name}: ceg {__version__}".encode())
    return f"{CLEANING_VERSION}:{mwparserfromhell.__version__}:{h.hexdigest()[:16]}"


_BRACES = re.compile(r"\{\{|\}\}")
#: What a dropped template becomes before parsing: a template that renders nothing.
_STAND_IN = "{{_}}"
# A template's name: text up to its first parameter or its end, no markup in it.
_TEMPLATE_NAME = re.compile(r"([^{}|<>\[\]]*)(?=\||\}\})")
# Where braces may be text rather than templates: left to the parser.
_LITERAL_BRACES = re.compile(
    r"\{\{\{|<\s*(?:nowiki|pre|math|chem|ce|source|syntaxhighlight|code|score|"
    r"templatedata|includeonly|noinclude|onlyinclude)\b",
    re.IGNORECASE,
)

_PRE_STRIP = [
    re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL),
    re.compile(r"<ref\b[^>]*?/>", re.IGNORECASE),
    re.compile(r"<ref\b[^>]*>.*?</ref\s*>", re.IGNORECASE | re.DOTALL),
]
_PREFIXED_LINK = re.compile(r"\[\[\s*([^\[\]|:\n]+):")
_LINK_BRACKET = re.compile(r"\[\[|\]\]")
# Behaviour switches in any language: __NOTOC__, __KEIN_INHALTSVERZEICHNIS__,
# __目录__, __لافهرس__. Only words without lower-case letters: "__init__" is prose.
_MAGIC_WORD = re.compile(r"__([^\W_]+(?:_[^\W_]+)*)__")
_LEFTOVER_QUOTES = re.compile(r"'{2,}")
# Full-width parentheses and CJK/Arabic punctuation too: "（）" is what a
# removed template leaves in a Chinese sentence, " ،" in an Arabic one.
_EMPTY_PARENS = re.compile(r"[(（]\s*[,;，；、،؛]?\s*[)）]")
_PAREN_LEADING_PUNCT = re.compile(r"\(\s*[,;]?\s+|\(\s*[,;]\s*|（\s*[,;，；、]\s*")
_SPACE_BEFORE_PUNCT = re.compile(r"[ \t]+([,.;:!?)،؛؟。，、；：！？）])")
_SPACES = re.compile(r"[ \t\u00a0\u2009\u200b]+")
# "!" only as a table header cell ("! Year", "!!", "!scope=..."): "!Kung" is prose.
_DEBRIS_LINE = re.compile(r"^(?:\{\||\||!(?:\s|!|[a-z]+=)|\}\}|\{\{)")

_HEADING = re.compile("^\x00(\\d)\x00(.*)$", re.DOTALL)


def clean_wikitext(
    wikitext: str,
    *,
    dropped_namespaces: Iterable[str] = DEFAULT_DROPPED_NAMESPACES,
    language: str | None = None,
) -> str:
    """Return the plain prose of a page's wikitext.

    ``dropped_namespaces`` are link prefixes (case-insensitive; ``_`` and a
    space alike) whose links are removed with everything in them, e.g.
    ``File`` and ``Category``. ``language`` is the wiki's: on a wiki with
    language variants (Chinese) ``-{...}-`` markup is resolved to one
    variant's text (``wikilocal.convert_variants``).
    """
    dropped = _dropped_prefixes(dropped_namespaces)
    wikitext = _prepare(wikitext, dropped, language)
    pieces = render_tokens(wikitext, dropped)
    if pieces is None:  # token shapes the walk does not read (rare): the node tree
        pieces = render_tree(wikitext, dropped)
    return _tidy("".join(pieces))


def _dropped_prefixes(dropped_namespaces: Iterable[str]) -> frozenset[str]:
    return (
        frozenset(n.casefold().replace("_", " ") for n in dropped_namespaces)
        | DEFAULT_DROPPED_NAMESPACES
    )


def _prepare(wikitext: str, dropped: frozenset[str], language: str | None) -> str:
    """The text the parser sees: comments, refs, variants, dropped links and templates gone."""
    for pattern in _PRE_STRIP:
        wikitext = pattern.sub("", wikitext)
    if (language or "").split("-")[0] in VARIANT_LANGUAGES:
        wikitext = convert_variants(wikitext, language)
    wikitext = _strip_prefixed_links(wikitext, dropped)
    return _strip_dropped_templates(wikitext)


def render_tree(wikitext: str, dropped: frozenset[str]) -> list[str]:
    """The pieces of prose from the node tree: ``render_tokens``'s reference and fallback."""
    pieces: list[str] = []
    _render(mwparserfromhell.parse(wikitext), pieces, dropped)
    return pieces


def _strip_dropped_templates(wikitext: str) -> str:
    """Remove the templates ``_inline_template`` renders as nothing, before parsing.

    The same text as parsing them and dropping them, at a fraction of the cost:
    mwparserfromhell builds every parameter of every infobox and navbox as nodes in
    Python, most of a page's parsing time. Only whole, balanced ``{{...}}`` whose
    name is plain text are removed; a page with markup whose braces are not
    templates (``<nowiki>``, ``<math>``, code, triple braces) is left to the parser.
    """
    if "{{" not in wikitext or _LITERAL_BRACES.search(wikitext):
        return wikitext
    pieces: list[str] = []
    pos = 0
    depth = 0
    start = 0
    for brace in _BRACES.finditer(wikitext):
        if brace.group() == "{{":
            if depth == 0:
                start = brace.start()
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                name = _TEMPLATE_NAME.match(wikitext, start + 2)
                if name is not None and not _renders_words(name.group(1)):
                    # A template with no parameters stands in for it: the parser sees a
                    # template where one was (quotes and tables pair up as before).
                    pieces.append(wikitext[pos:start])
                    pieces.append(_STAND_IN)
                    pos = brace.end()
    pieces.append(wikitext[pos:])
    return "".join(pieces)


def _strip_prefixed_links(wikitext: str, dropped: frozenset[str]) -> str:
    """Remove ``[[File:...]]``-style links, nested links in captions included.

    Done before parsing because one unbalanced ``''`` in a caption makes
    mwparserfromhell give up on the whole link and leave it as text.
    """
    pieces: list[str] = []
    pos = 0
    for match in _PREFIXED_LINK.finditer(wikitext):
        if match.start() < pos or _prefix(match.group(1)) not in dropped:
            continue
        depth, end = 1, None
        for bracket in _LINK_BRACKET.finditer(wikitext, match.end()):
            depth += 1 if bracket.group() == "[[" else -1
            if depth == 0:
                end = bracket.end()
                break
        if end is None:  # never closed: drop the rest of the line
            newline = wikitext.find("\n", match.end())
            end = len(wikitext) if newline < 0 else newline
        pieces.append(wikitext[pos : match.start()])
        pos = end
    pieces.append(wikitext[pos:])
    return "".join(pieces)


def _render(code: Wikicode, out: list[str], dropped: frozenset[str]) -> None:
    for node in code.nodes:
        _render_node(node, out, dropped)


def _render_node(node: Node, out: list[str], dropped: frozenset[str]) -> None:
    if isinstance(node, Text):
        out.append(node.value)
    elif isinstance(node, Wikilink):
        _render_wikilink(node, out, dropped)
    elif isinstance(node, Tag):
        _render_tag(node, out, dropped)
    elif isinstance(node, Heading):
        out.append(f"\n\n{_HEADING_MARK}{node.level}{_HEADING_MARK}")
        _render(node.title, out, dropped)
        out.append("\n\n")
    elif isinstance(node, ExternalLink):
        # [http://x text] shows "text"; [http://x] shows a number; a bare URL
        # shows itself.
        if node.title is not None:
            _render(node.title, out, dropped)
        elif not node.brackets:
            out.append(str(node.url))
    elif isinstance(node, HTMLEntity):
        out.append(node.normalize())
    elif isinstance(node, Template):
        out.append(_inline_template(node, dropped))
    elif isinstance(node, (Comment, Argument)):
        pass
    else:  # any node type a future mwparserfromhell adds: keep its text
        out.append(html.unescape(str(node)))


def _render_wikilink(link: Wikilink, out: list[str], dropped: frozenset[str]) -> None:
    if _link_dropped(str(link.title), link.text is not None, dropped):
        return
    if link.text is not None:
        _render(link.text, out, dropped)
    else:
        out.append(_link_label(_render_to_str(link.title, dropped)))


def _render_tag(tag: Tag, out: list[str], dropped: frozenset[str]) -> None:
    name = str(tag.tag).strip().lower()
    if not _tag_start(name, bool(tag.wiki_markup), out):
        return
    if tag.self_closing or tag.contents is None:
        return
    if name == "nowiki":
        out.append(html.unescape(str(tag.contents)))
    else:
        _render(tag.contents, out, dropped)
    if name in _BLOCK_TAGS:
        out.append("\n\n")


def _inline_template(template: Template, dropped: frozenset[str]) -> str:
    """The text of the few templates that render words inside a sentence."""
    raw_name = str(template.name).strip()
    if not _renders_words(raw_name):
        return ""
    positional = [
        _render_to_str(p.value, dropped).strip() for p in template.params if not p.showkey
    ]
    return _template_words(raw_name, positional)


def _render_to_str(code: Wikicode, dropped: frozenset[str]) -> str:
    pieces: list[str] = []
    _render(code, pieces, dropped)
    return "".join(pieces)


def _magic_word(match: re.Match[str]) -> str:
    word = match.group(1)
    return "" if word == word.upper() else match.group(0)


def _tidy(text: str) -> str:
    """Collapse whitespace into lines and paragraphs; drop markup debris."""
    text = _MAGIC_WORD.sub(_magic_word, text)
    text = _LEFTOVER_QUOTES.sub("", text)
    paragraphs: list[list[str]] = [[]]
    for raw in text.split("\n"):
        line = _SPACES.sub(" ", raw).strip()
        heading = _HEADING.match(line)
        if heading is not None:
            title = heading.group(2).strip()
            marked = f"{_HEADING_MARK}{heading.group(1)}{_HEADING_MARK}{title}"
            paragraphs.append([marked] if title else [])
            paragraphs.append([])
            continue
        if not line:
            if paragraphs[-1]:
                paragraphs.append([])
            continue
        # Debris of a table or template the parser could not pair up, and
        # punctuation left behind when every word of a line was markup.
        if _DEBRIS_LINE.match(line) or not any(ch.isalnum() for ch in line):
            continue
        line = _EMPTY_PARENS.sub("", line)
        line = _PAREN_LEADING_PUNCT.sub("(", line)
        line = _SPACE_BEFORE_PUNCT.sub(r"\1", line)
        line = _SPACES.sub(" ", line).strip()
        if line:
            paragraphs[-1].append(line)
    blocks = ["\n".join(p) for p in paragraphs if p]
    # A heading with nothing under it before the next heading of the same or a
    # higher level (its section was all tables or refs) is noise for retrieval.
    kept: list[str] = []
    for i, block in enumerate(blocks):
        match = _HEADING.match(block)
        if match is None:
            kept.append(block)
            continue
        level = int(match.group(1))
        for following in blocks[i + 1 :]:
            sub = _HEADING.match(following)
            if sub is None:
                kept.append(match.group(2))
                break
            if int(sub.group(1)) <= level:
                break
    return "\n\n".join(kept)
