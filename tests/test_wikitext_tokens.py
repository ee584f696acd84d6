"""The token walk (wikitokens.render_tokens) against the node tree (wikitext.render_tree).

clean_wikitext renders a page from mwparserfromhell's tokens and takes the
node tree only where the walk gives up. Both must give the very same pieces:
every page of every wiki fixture, and hand-written pages with the odd cases.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path

import mwparserfromhell.parser
import pytest

from ceg_cli.corpus import mediawiki, wikitokens
from ceg_cli.corpus.wikitext import (
    DEFAULT_DROPPED_NAMESPACES,
    _dropped_prefixes,
    _prepare,
    _tidy,
    clean_wikitext,
    render_tree,
)

WIKI = Path(__file__).parent / "data" / "wiki"
ENWIKI_SAMPLE = Path(__file__).parent.parent / "sample_data" / "enwiki-sample.xml.bz2"
DUMPS = sorted(WIKI.glob("*.xml*")) + [ENWIKI_SAMPLE]
GIVE_UP = {"enwiki-table-markup.xml.bz2": 1, "enwiki-sample.xml.bz2": 1}


def _both(
    wikitext: str,
    dropped_namespaces: Iterable[str] = DEFAULT_DROPPED_NAMESPACES,
    language: str | None = None,
) -> tuple[list[str] | None, list[str]]:
    """(the walk's pieces or None, the tree's pieces) of a page, as clean_wikitext
    prepares it."""
    dropped = _dropped_prefixes(dropped_namespaces)
    prepared = _prepare(wikitext, dropped, language)
    return wikitokens.render_tokens(prepared, dropped), render_tree(prepared, dropped)


def _dump_pages(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Every clean_wikitext call reading ``path`` makes (every namespace), with its
    arguments: the dump's own dropped namespaces and language."""
    calls: list[tuple] = []

    def record(text: str, *, dropped_namespaces: Iterable[str] = DEFAULT_DROPPED_NAMESPACES,
               language: str | None = None) -> str:
        calls.append((text, tuple(dropped_namespaces), language))
        return "recorded"

    with monkeypatch.context() as patch:
        patch.setattr(mediawiki, "clean_wikitext", record)
        for _ in mediawiki.read_mediawiki(path, namespaces=frozenset(range(-2, 3000))):
            pass
    return calls


@pytest.mark.parametrize("dump", DUMPS, ids=lambda p: p.name)
def test_every_page_of_the_fixtures_walks_to_the_trees_pieces(
    dump: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _dump_pages(dump, monkeypatch)
    assert calls
    gave_up = []
    for text, dropped, language in calls:
        walked, tree = _both(text, dropped, language)
        if walked is None:
            gave_up.append(text[:60])
            continue
        assert walked == tree, text[:200]
        assert clean_wikitext(text, dropped_namespaces=dropped, language=language) == _tidy(
            "".join(tree)
        )
    # Two pages give up, where the parser sees templates (pages with <math>, <code>...):
    # {{DISPLAYTITLE:List of ''Prison Break'' characters}}, a style tag in a template's
    # name, and {{formatnum:{{Inflation|...}}}}. The walk must read all the others.
    assert len(gave_up) <= GIVE_UP.get(dump.name, 0), gave_up


ODD_PAGES = {
    "unclosed tags": "Text <b>bold never closed\n\nMore <i>x</b> y </div> z <span>open",
    "nowiki": "A <nowiki>{{not a template}} &amp; [[not a link]] ''x''</nowiki> b <nowiki/> c",
    "entities in link titles": "[[Foo&amp;Bar]] and [[AT&amp;T|the firm]] &#x41;&#66;&nbsp;&X;",
    "entities numeric in titles": "[[Caf&#xe9;]] [[Caf&#233;|cafe]] [[A&#X42;]]",
    "templates in link text": "[[Paris|{{lang|fr|Paris}} city {{cite web|url=x}}]] end.",
    "file links with nested links": (
        "Before [[File:X.jpg|thumb|A [[caption]] with [[link|text]] and ''it'']] after. "
        "[[:File:Y.png]] [[:Category:Foo|cats]] [[Category:Bar]] [[de:Foo]] [[Image:Z|x]]"
    ),
    "links": "[[Foo#Sec]] [[#Sec]] [[:Foo]] [[Foo|]] [[ foo ]] [[Talk:X]] [[w:en:Y|y]]",
    "headings with templates": (
        "== History {{anchor|h}} ==\ntext\n=== Sub {{lang|de|Wort}} ===\nmore\n"
        "=One=\nx\n======Six======\ny\n=======Seven=======\nz\n== ''Styled'' [[link]] ==\nw"
    ),
    "style tags": "'''Bold''' ''italic'' '''''both''''' ''unclosed\nnext '''x'' y''' z",
    "lists": "* one\n** two\n# three\n#: cont\n: indented\n; term : def\n;term2\n:def2\n*",
    "br": "a<br/>b<br>c</br>d<br />e<BR>f",
    "li": "x<ul><li>one</li><li>two</ul>y<ol>\n<li>three\n</ol>",
    "dd dt": "<dl><dt>T</dt><dd>D</dd></dl>after; x\n; a : b",
    "tables": (
        '{| class="wikitable"\n|+ Caption\n|-\n! H1 !! H2\n|-\n| a || b {{x}}\n'
        "|-\n| colspan=2 | [[c]]\n|}\nafter\n{|\n| unclosed table"
    ),
    "external links": (
        "[http://example.com Example site] [http://example.com] "
        "http://bare.example.com/x?a=1&amp;b=2 [//proto.rel rel] "
        "[http://x.org ''styled'' [[not a link]]] mailto:a@b.c [ftp://f.org]"
    ),
    "word templates": (
        "{{convert|5|km|mi}} {{convert|5|-|7|km}} {{convert|5|km|abbr=on}} {{cvt|3|m}} "
        "{{lang|fr|bonjour}} {{lang-de|Wort}} {{formatnum:1234567}} {{nowrap|a b}} "
        "{{sic|teh}} {{'}} {{ndash}} {{mdash}} {{small|{{lang|la|lex}}}} {{convert|1}} "
        "{{Formatnum: 12 }} {{sic|hide=y|teh}} {{lang|1=x|2=y}}"
    ),
    "magic words": "__NOTOC__ Text __TOC__ more __init__ and __KEIN_INHALTSVERZEICHNIS__.",
    "blocks": (
        "a<blockquote>quoted ''x''</blockquote>b<div>d</div><center>c</center>"
        "<poem>p\nq</poem><pre>pre</pre><hr/>----\ne<p>para</p>"
    ),
    "arguments and comments": "{{{arg|default}}} x <!-- never closed",
    "refs and dropped tags": (
        "A<ref name=x/> b<ref>{{cite|x}}</ref> c<references/> <gallery>File:x.jpg|cap</gallery>"
        " <math>x^{2}</math> {{infobox|a={{b}}}} <ref>unclosed"
    ),
    "literal braces keep templates": (
        "<code>x</code> {{Infobox|name={{lang|fr|x}}|b=[[c|d]]}} {{nowrap|kept}} "
        "{{Citation needed|date=May}} {{x|{{nested}}}} {{#if:x|y|z}} {{lang|de|{{x}}}}"
    ),
    "stray markup": "{{unclosed template [[link]] ]] stray }} |} {| x [[unclosed link",
    "attributes": (
        '<span style="color:red" title={{foo}} data-x=\'y\' z>in span</span> '
        '<div class="a {{b}}">div</div> <br clear=all/>'
    ),
    "entity bits": "&amp;amp; &#0; &#x110000; &notanentity; & ; &#65",
}


@pytest.mark.parametrize("name", sorted(ODD_PAGES))
def test_odd_pages_walk_to_the_trees_pieces(name: str) -> None:
    walked, tree = _both(ODD_PAGES[name])
    assert walked is not None, wikitokens.FALLBACKS
    assert walked == tree


def test_variant_markup_on_a_chinese_page() -> None:
    page = "北京是-{zh-hans:首都;zh-hant:首都;}-。-{A}- [[北京|-{北京}-]] {{lang|zh|中文}}"
    for language in ("zh", "zh-hant", "zh-cn"):
        walked, tree = _both(page, language=language)
        assert walked is not None and walked == tree
    assert clean_wikitext(page, language="zh") == _tidy("".join(_both(page, language="zh")[1]))


def test_the_walk_gives_up_where_a_source_text_holds_markup() -> None:
    # A template in a link's title, a template in a template's name: the source text
    # the renderer needs is not plain text, so the page takes the tree path.
    for page, reason in [
        ("See [[{{PAGENAME}}|x]] here.", "TemplateOpen in a source text"),
        ("<math>x</math> {{formatnum:{{x|1}}}} y", "TemplateOpen in a source text"),
        ("<code>c</code> {{ {{nested}} }} y", "TemplateOpen in a source text"),
        ("<code>c</code> {{DISPLAYTITLE:''A''}} y", "TagOpenOpen in a source text"),
    ]:
        before = wikitokens.FALLBACKS[reason]
        walked, tree = _both(page)
        assert walked is None
        assert wikitokens.FALLBACKS[reason] == before + 1
        assert clean_wikitext(page) == _tidy("".join(tree))


def test_the_walk_reads_the_pure_python_tokenizers_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without the C extension Parser() tokenizes in Python: the same tokens, the same walk.
    monkeypatch.setattr(mwparserfromhell.parser, "use_c", False)
    assert type(mwparserfromhell.parser.Parser()._tokenizer).__name__ == "Tokenizer"
    for page in ODD_PAGES.values():
        walked, tree = _both(page)
        assert walked is not None and walked == tree


def test_the_walk_renders_what_a_reader_sees() -> None:
    # Not only equal to the tree: a few outputs spelled out.
    assert clean_wikitext("'''Bold''' and ''it'' [[a|b]] [[c]] {{convert|5|km|mi}}.") == (
        "Bold and it b c 5 km."
    )
    assert clean_wikitext("x [http://e.com E] [http://f.com] http://g.com/a&amp;b") == (
        "x E http://g.com/a&amp;b"
    )
    assert clean_wikitext("a <nowiki>[[b]] &amp;</nowiki>") == "a [[b]] &"


MARKUP_BITS = (
    "<span", "<div", "<ref", "<br", "<li>", "<dd>", "<dt>", "<nowiki>", "</nowiki>", "<nowiki/>",
    "<pre>", "<hr>", "<blockquote>", "<table>", "<p>", " ", "\n", "\n*", "\n#", "\n:", "\n;",
    "\n{|", "\n|-", "\n|", "\n!", "\n|}", "\n==", "==", "\n----", "a", "b=", "=", '"', "'",
    "{{", "}}", "{{x}}", "{{lang|fr|x}}", "{{convert|1|km}}", "{{formatnum:", "{{nowrap|", "[[",
    "]]", "[[l]]", "[[File:", "[[de:", "[[:Category:", "|", "&amp;", "&#x41;", "&#65;", "&", ";",
    "#", ">", "/>", "</span>", "</div>", "<!--", "-->", "c d", "{{{a}}}", "{{{", "}}}", "''",
    "'''", "<", "title", "x=y z", "[http://a b]", "[http://a]", "http://x.org/a", "[", "]", "-{",
    "}-", "__NOTOC__", "\t", ":",
)


def test_random_markup_walks_to_the_trees_pieces() -> None:
    # Strings of markup bits, balanced or not: whatever the tokenizer makes of them, the
    # walk reads them as the Builder does, or gives up (markup in a link's title...).
    rng = random.Random(20261128)
    dropped = _dropped_prefixes(DEFAULT_DROPPED_NAMESPACES)
    walked_pages = 0
    for _ in range(3000):
        page = "".join(rng.choice(MARKUP_BITS) for _ in range(rng.randint(1, 25)))
        walked = wikitokens.render_tokens(page, dropped)
        if walked is not None:
            walked_pages += 1
            assert walked == render_tree(page, dropped), page
    assert walked_pages > 2900
