"""Corpus readers: MediaWiki dumps, wikitext cleaning, JSONL, folders."""

from __future__ import annotations

import bz2
import gzip
import json
import time
import tracemalloc
from pathlib import Path

import pytest

from ceg_cli.corpus import iter_documents, source_kind
from ceg_cli.corpus.wikitext import clean_wikitext
from ceg_cli.errors import InputError

DATA = Path(__file__).parent / "data"
WIKI = DATA / "wiki"
HOSTILE = DATA / "hostile"
ENWIKI_SAMPLE = Path(__file__).parent.parent / "sample_data" / "enwiki-sample.xml.bz2"

MARKUP = ("{{", "}}", "[[", "]]", "{|", "|}", "|-", "<ref", "</", "thumb|", "'''", "&nbsp;")


def _dump(pages: str, *, schema: str = "0.10", base: str | None = None) -> str:
    siteinfo = f"<siteinfo><base>{base}</base></siteinfo>" if base else ""
    return (
        f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-{schema}/" version="{schema}">'
        f"{siteinfo}{pages}</mediawiki>"
    )


def _page(title: str, text: str, *, page_id: int = 1, ns: int = 0, extra: str = "") -> str:
    return (
        f"<page><title>{title}</title><ns>{ns}</ns><id>{page_id}</id>{extra}"
        f"<revision><id>{page_id}</id><timestamp>2020-01-01T00:00:00Z</timestamp>"
        f'<text xml:space="preserve">{text}</text></revision></page>'
    )


# --- source_kind --------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [("a.xml", "mediawiki"), ("a.XML.BZ2", "mediawiki"), ("a.xml.gz", "mediawiki"),
     ("a.jsonl", "jsonl"), ("a.json", "jsonl"), ("a.jsonl.gz", "jsonl")],
)  # fmt: skip
def test_source_kind_by_suffix(tmp_path: Path, name: str, kind: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"")
    assert source_kind(path) == kind


def test_source_kind_sniffs_compressed_files_without_telling_names(tmp_path: Path) -> None:
    xml = tmp_path / "pages-articles1.bz2"
    xml.write_bytes(bz2.compress(b'<?xml version="1.0"?>\n<mediawiki/>'))
    docs = tmp_path / "docs.gz"
    docs.write_bytes(gzip.compress(b'{"id": 1, "text": "x"}\n'))
    junk = tmp_path / "junk.gz"
    junk.write_bytes(gzip.compress(b"just words"))
    assert source_kind(xml) == "mediawiki"
    assert source_kind(docs) == "jsonl"
    with pytest.raises(InputError, match="junk.gz: unknown corpus format"):
        source_kind(junk)


def test_source_kind_folder_missing_and_unknown(tmp_path: Path) -> None:
    assert source_kind(tmp_path) == "folder"
    with pytest.raises(InputError, match=r"nope\.xml: no such file or directory"):
        source_kind(tmp_path / "nope.xml")
    (tmp_path / "notes.pdf").write_bytes(b"%PDF")
    with pytest.raises(InputError, match=r"notes\.pdf: unknown corpus format"):
        source_kind(tmp_path / "notes.pdf")


def test_iter_documents_rejects_a_missing_path_before_iteration(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or directory"):
        iter_documents(tmp_path / "missing.xml.bz2")  # no next(): raised at the call


# --- MediaWiki dumps -------------------------------------------------------------


def test_latest_revision_and_default_namespace() -> None:
    path = WIKI / "multi-revision-synthetic.xml"
    docs = list(iter_documents(path))
    assert [(d.id, d.title, d.text) for d in docs] == [("1", "Foo", "Revision 2 text")]
    assert docs[0].url == "http://en.wikipedia.org/wiki/Foo"
    assert docs[0].source == str(path)


def test_namespaces_option_includes_other_namespaces() -> None:
    path = WIKI / "multi-revision-synthetic.xml"
    docs = list(iter_documents(path, namespaces=frozenset({0, 1})))
    assert [(d.title, d.text) for d in docs] == [
        ("Foo", "Revision 2 text"),
        ("Bar", "Revision 3 text"),
    ]
    only_talk = list(iter_documents(path, namespaces=frozenset({1})))
    assert [d.title for d in only_talk] == ["Bar"]


def test_latest_revision_is_chosen_by_timestamp_not_file_order(tmp_path: Path) -> None:
    revisions = "".join(
        f"<revision><id>{i}</id><timestamp>{ts}</timestamp>"
        f'<text xml:space="preserve">{text}</text></revision>'
        for i, ts, text in [
            (1, "2010-01-01T00:00:00Z", "Old text."),
            (3, "2012-01-01T00:00:00Z", "Newest text."),
            (2, "2011-01-01T00:00:00Z", "Middle text."),
        ]
    )
    path = tmp_path / "history.xml"
    path.write_text(_dump(f"<page><title>T</title><ns>0</ns><id>7</id>{revisions}</page>"))
    assert [d.text for d in iter_documents(path)] == ["Newest text."]


@pytest.mark.parametrize("schema", ["0.8", "0.9", "0.10", "0.11"])
def test_every_export_schema_version_reads_the_same(tmp_path: Path, schema: str) -> None:
    path = tmp_path / "dump.xml.gz"  # gzip too
    pages = _page("Alpha", "Alpha is a letter.", page_id=3)
    path.write_bytes(gzip.compress(_dump(pages, schema=schema).encode()))
    assert [(d.id, d.text) for d in iter_documents(path)] == [("3", "Alpha is a letter.")]


def test_redirects_are_skipped(tmp_path: Path) -> None:
    pages = (
        _page("R1", "#REDIRECT [[Target]]", page_id=1, extra='<redirect title="Target" />')
        + _page("R2", "  #redirect [[Target]]", page_id=2)  # no <redirect> element
        + _page("R3", "#Redirect[[Target]]", page_id=3)
        + _page("Target", "Target is a real article.", page_id=4)
    )
    path = tmp_path / "redirects.xml"
    path.write_text(_dump(pages))
    assert [d.title for d in iter_documents(path)] == ["Target"]


def test_url_from_siteinfo_base_is_quoted(tmp_path: Path) -> None:
    pages = _page("AC/DC &amp; friends? 100% #1", "Some text.", page_id=1)
    path = tmp_path / "dump.xml"
    path.write_text(_dump(pages, base="https://en.wikipedia.org/wiki/Main_Page"))
    (doc,) = iter_documents(path)
    assert doc.title == "AC/DC & friends? 100% #1"
    assert doc.url == "https://en.wikipedia.org/wiki/AC/DC_%26_friends%3F_100%25_%231"
    path.write_text(_dump(pages, base="https://wiki.example.org/index.php?title=Main_Page"))
    (doc,) = iter_documents(path)
    assert doc.url == "https://wiki.example.org/index.php?title=AC/DC_%26_friends%3F_100%25_%231"


def test_page_left_empty_by_cleaning_is_skipped_with_a_warning(tmp_path: Path) -> None:
    pages = _page("Stub", "{{Infobox|a=b}}[[Category:Stubs]]") + _page("Real", "Real text.")
    path = tmp_path / "dump.xml"
    path.write_text(_dump(pages))
    warnings: list[str] = []
    assert [d.title for d in iter_documents(path, on_warning=warnings.append)] == ["Real"]
    assert len(warnings) == 1
    assert str(path) in warnings[0] and "'Stub'" in warnings[0] and "\n" not in warnings[0]


def test_table_markup_is_removed() -> None:
    docs = list(iter_documents(WIKI / "enwiki-table-markup.xml.bz2"))
    assert len(docs) == 5
    assert all(d.url is None for d in docs)  # this file has no <siteinfo>
    for doc in docs:
        assert not [m for m in MARKUP if m in doc.text], doc.title
    award = next(d for d in docs if d.title == "Academy Award for Best Production Design")
    assert award.text.startswith(
        "The Academy Award for Best Production Design recognizes achievement for art direction"
    )


def test_utf16_dump_reads_cyrillic_text() -> None:
    docs = list(iter_documents(WIKI / "bgwiki-utf16-sample.xml.bz2"))
    assert len(docs) == 1
    (doc,) = docs
    assert (doc.id, doc.title) == ("558", "Григориански календар")
    assert doc.text.startswith("Григорианският календар (понякога наричан и Грегориански календар")
    assert "\r" not in doc.text
    assert not [m for m in MARKUP if m in doc.text]
    assert "Файл" not in doc.text and "Категория" not in doc.text  # localized namespaces
    assert doc.url == (
        "https://bg.wikipedia.org/wiki/%D0%93%D1%80%D0%B8%D0%B3%D0%BE%D1%80%D0%B8"
        "%D0%B0%D0%BD%D1%81%D0%BA%D0%B8_%D0%BA%D0%B0%D0%BB%D0%B5%D0%BD%D0%B4%D0%B0%D1%80"
    )
    project = list(iter_documents(WIKI / "bgwiki-utf16-sample.xml.bz2", namespaces=frozenset({4})))
    assert len(project) == 2 and all(d.title.startswith("Уикипедия:") for d in project)


@pytest.mark.parametrize("name", ["billion-laughs.xml", "external-entity.xml", "external-dtd.xml"])
def test_hostile_xml_is_refused_quickly_and_in_little_memory(name: str) -> None:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(InputError) as caught:
            list(iter_documents(HOSTILE / name))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(caught.value)
    assert message.startswith(f"{HOSTILE / name}:") and "\n" not in message
    assert "DOCTYPE" in message
    assert "root:" not in message  # /etc/passwd was not read into anything
    assert time.perf_counter() - started < 5
    assert peak < 20_000_000


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("not-mediawiki.xml", r"not a MediaWiki XML dump \(root element <rss>"),
        ("malformed.xml", r"malformed XML: .*line 11"),
        ("truncated.xml.bz2", r"truncated compressed file"),
        ("corrupt.xml.bz2", r"cannot read"),
    ],
)
def test_broken_files_raise_input_error_naming_the_file(name: str, expected: str) -> None:
    with pytest.raises(InputError, match=expected) as caught:
        list(iter_documents(HOSTILE / name))
    assert str(caught.value).startswith(str(HOSTILE / name))


def _peak_memory_while_reading(path: Path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_documents(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, peak


def test_memory_does_not_grow_with_the_number_of_pages(tmp_path: Path) -> None:
    path = tmp_path / "many.xml"
    pages = "".join(_page(f"Page {i}", "Short text.", page_id=i) for i in range(2000))
    path.write_text(_dump(pages, schema="0.11"))
    count, peak = _peak_memory_while_reading(path)
    assert count == 2000
    assert peak < 1_000_000  # keeping the pages read so far costs about 3 MB


def test_memory_does_not_grow_with_the_number_of_revisions(tmp_path: Path) -> None:
    # A full-history dump: one page, 200 revisions of 10 KB each.
    revisions = "".join(
        f"<revision><id>{i}</id><timestamp>2020-01-01T00:{i // 60:02d}:{i % 60:02d}Z</timestamp>"
        f"<text>Revision {i} text. {'Words. ' * 1500}</text></revision>"
        for i in range(200)
    )
    path = tmp_path / "history.xml"
    path.write_text(_dump(f"<page><title>H</title><ns>0</ns><id>1</id>{revisions}</page>"))
    count, peak = _peak_memory_while_reading(path)
    assert count == 1
    assert peak < 1_000_000  # keeping every revision costs about 2.4 MB
    assert next(iter_documents(path)).text.startswith("Revision 199 text.")


@pytest.fixture(scope="module")
def enwiki_docs() -> list:
    # The sample ships in the repository: its absence is a failure, not a skip.
    assert ENWIKI_SAMPLE.exists(), f"{ENWIKI_SAMPLE} is missing from the checkout"
    return list(iter_documents(ENWIKI_SAMPLE))


def test_enwiki_sample_yields_the_106_articles(enwiki_docs: list) -> None:
    assert len(enwiki_docs) == 106  # 206 pages: 99 redirects and 1 in namespace 4 skipped
    assert len({d.id for d in enwiki_docs}) == 106
    assert all(d.id.isdigit() and d.title and d.text for d in enwiki_docs)
    assert all(d.url == "https://en.wikipedia.org/wiki/" + d.title.replace(" ", "_")
               for d in enwiki_docs if d.title.isalpha())  # fmt: skip
    lincoln = next(d for d in enwiki_docs if d.title == "Abraham Lincoln")
    assert lincoln.url == "https://en.wikipedia.org/wiki/Abraham_Lincoln"


def test_enwiki_aristotle_is_clean_prose(enwiki_docs: list) -> None:
    aristotle = next(d for d in enwiki_docs if d.title == "Aristotle")
    assert "Alexander the Great" in aristotle.text
    assert not [m for m in MARKUP if m in aristotle.text]
    assert "\n\nLife\n\n" in aristotle.text  # a heading is a paragraph of its own
    assert "\n\n\n" not in aristotle.text


# --- wikitext cleaning -------------------------------------------------------------


def test_clean_wikitext_removes_markup_and_keeps_prose() -> None:
    wikitext = """{{Infobox person|name=X|born={{birth date|1900|1|1}}}}
'''X''' (born 1900) was a [[painter|Painter]] from [[Paris]].<ref>{{cite web|url=a}}</ref> She
worked in ''oil''.<ref name="b" /><!-- hidden note -->
[[File:X.jpg|thumb|left|X with [[Y]] in [[Paris]], '''1950'']]
[[Image:Other.png|An image]]

== Career ==
She painted {{convert|3|km|mi}} of canvas, see [http://example.org her site].
{| class="wikitable"
|-
! Year !! Work
|-
| 1920 || Untitled
|}
* First item with [[link]]
* Second item
<gallery>
A.jpg|Caption
</gallery>
<math>E = mc^2</math> &nbsp;Done&nbsp;here.

=== Empty section ===
{{reflist}}

== Legacy ==
Remembered.
[[Category:Painters]]
[[de:X (Malerin)]]
[[:Category:Painters|painters category]] link kept.
"""
    assert clean_wikitext(wikitext) == (
        "X (born 1900) was a Painter from Paris. She\nworked in oil.\n\n"
        "Career\n\n"
        "She painted 3 km of canvas, see her site.\n\n"  # the table was a block
        "First item with link\nSecond item\n\nDone here.\n\n"
        "Legacy\n\n"
        "Remembered.\n\npainters category link kept."
    )


def test_clean_wikitext_localized_namespaces() -> None:
    text = "Текст.[[Файл:Gregory XIII.jpg|thumb|[[Папа]] [[Григорий XIII]]]] Още."
    assert clean_wikitext(text, dropped_namespaces={"Файл"}) == "Текст. Още."


# --- JSONL ------------------------------------------------------------------------


def test_jsonl_reads_good_lines_and_warns_about_bad_ones(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    lines = [
        json.dumps({"id": 7, "title": "Seven", "text": "Seven is a number.", "url": "https://x/7"}),
        "{not json",
        json.dumps({"id": "b", "title": "No text"}),
        json.dumps({"id": "c", "text": 42}),
        "",
        json.dumps({"title": "No id", "text": "Uses the line number."}),
        json.dumps({"id": "e", "text": "   "}),
        json.dumps(["not", "an", "object"]),
        json.dumps({"id": "g", "text": "No title."}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    warnings: list[str] = []
    docs = list(iter_documents(path, on_warning=warnings.append))
    assert [(d.id, d.title, d.text, d.url) for d in docs] == [
        ("7", "Seven", "Seven is a number.", "https://x/7"),
        ("6", "No id", "Uses the line number.", None),
        ("g", "g", "No title.", None),
    ]
    assert all(d.source == str(path) for d in docs)
    assert [w.split(": ", 1)[0] for w in warnings] == [f"{path}:{n}" for n in (2, 3, 4, 7, 8)]
    assert "field 'text' is missing" in warnings[1]
    assert "field 'text' is a int, not a string" in warnings[2]
    assert "invalid JSON" in warnings[0]


#: LangChain documents as ``langchain_core.load.dumps`` writes them (langchain-core
#: 1.8.3): no metadata when it is empty, the document's id among the kwargs, a
#: metadata dict holding an ``lc`` key escaped.
LANGCHAIN_LINES = [
    '{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "document", "Document"], '
    '"kwargs": {"page_content": "Paris is the capital of France.", "type": "Document"}}',
    '{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "document", "Document"], '
    '"kwargs": {"id": "doc-1", "metadata": {"source": "https://en.wikipedia.org/wiki/Louvre", '
    '"title": "Louvre"}, "page_content": "The Louvre is a museum.", "type": "Document"}}',
    '{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "document", "Document"], '
    '"kwargs": {"metadata": {"__lc_escaped__": {"lc": 5, "source": "https://x.org/seine", '
    '"id": "s"}}, "page_content": "The Seine flows through Paris.", "type": "Document"}}',
    # Document.model_dump(): the plain form, its id null and the metadata's read instead.
    '{"id": null, "metadata": {"id": "m-4", "source": "notes/eiffel.txt"}, '
    '"page_content": "The Eiffel Tower was finished in 1889.", "type": "Document"}',
    # Not a document: a serialized message, an object LangChain could not serialize.
    '{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"], '
    '"kwargs": {"content": "hi", "type": "ai", "tool_calls": [], "invalid_tool_calls": []}}',
    '{"lc": 1, "type": "not_implemented", "id": ["__main__", "X"], "repr": "<X object>"}',
    '{"page_content": "Bad metadata.", "metadata": "m"}',
]


def test_jsonl_reads_langchain_documents_plain_and_serialized(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(LANGCHAIN_LINES) + "\n", encoding="utf-8")
    warnings: list[str] = []
    docs = list(iter_documents(path, on_warning=warnings.append))
    assert [(d.id, d.title, d.text, d.url) for d in docs] == [
        ("1", "1", "Paris is the capital of France.", None),
        ("doc-1", "Louvre", "The Louvre is a museum.", "https://en.wikipedia.org/wiki/Louvre"),
        ("s", "s", "The Seine flows through Paris.", "https://x.org/seine"),
        ("m-4", "m-4", "The Eiffel Tower was finished in 1889.", None),
    ]
    assert warnings == [
        f"{path}:5: a serialized LangChain langchain.schema.messages.AIMessage, not a "
        "Document; line skipped",
        f"{path}:6: a serialized LangChain __main__.X (not_implemented), not a Document; "
        "line skipped",
        f"{path}:7: 'metadata' must be an object, got string; line skipped",
    ]


def test_jsonl_names_langchains_text_field_when_it_is_bad(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"page_content": "  ", "metadata": {}}) + "\n"
                    + json.dumps({"text": "Kept.", "metadata": "another tool's"}) + "\n",
                    encoding="utf-8")
    warnings: list[str] = []
    docs = list(iter_documents(path, on_warning=warnings.append))
    assert [d.text for d in docs] == ["Kept."]  # ceg's own form: a foreign metadata is no matter
    assert warnings == [f"{path}:1: field 'page_content' is empty; line skipped"]


def test_jsonl_gzip_and_json_array(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"id": 1, "title": "A", "text": "Alpha."}\n'))
    assert [d.text for d in iter_documents(path)] == ["Alpha."]
    array = tmp_path / "docs.json"
    array.write_text('[{"id": 1, "text": "Alpha."}]')
    with pytest.raises(InputError, match=r"docs\.json: looks like a JSON array"):
        list(iter_documents(array))


# --- folders ------------------------------------------------------------------------


def test_folder_reads_txt_and_md_recursively_in_order(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "b.md").write_text(
        "---\nlayout: page\n---\n# The **B** guide #\n\nSee [the docs](http://x) and **bold**.\n"
    )
    (tmp_path / "a.txt").write_text("Plain text.\n\n\n\nSecond paragraph.\n")
    (tmp_path / "sub" / "c.TXT").write_text("In a subfolder.")
    (tmp_path / ".git" / "d.txt").write_text("Hidden.")
    (tmp_path / "e.rst").write_text("Not read.")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "empty.md").write_text("\n\n")
    warnings: list[str] = []
    docs = list(iter_documents(tmp_path, on_warning=warnings.append))
    assert [(d.id, d.title, d.text) for d in docs] == [
        ("a.txt", "a", "Plain text.\n\nSecond paragraph."),
        ("b.md", "The B guide", "The B guide\n\nSee the docs and bold."),
        ("sub/c.TXT", "c", "In a subfolder."),
    ]
    assert len(warnings) == 2
    assert "empty.md" in warnings[0] and "latin1.txt" in warnings[1] and "UTF-8" in warnings[1]


def test_markdown_readme_keeps_its_text_and_loses_its_markup() -> None:
    """A README shaped like a real project's: every Markdown construct rendered to text."""
    (doc,) = iter_documents(DATA / "markdown")
    assert (doc.id, doc.title) == ("README.md", "Quarry")
    lines = doc.text.split("\n")
    # Emphasis, code spans, links and images become their text; a wrapped
    # paragraph one line; setext and ATX headings their text alone.
    assert "Quarry is a fast, offline search tool for plain-text notes. It indexes a folder " \
        "of Markdown files and answers queries from the command line, with no server and " \
        "no network." in lines
    assert "Install from PyPI with pip:" in lines
    assert "or from a checkout, see CONTRIBUTING." in lines
    assert lines.count("Quarry") == 1 and "Installation" in lines and "Usage" in lines
    # Block quotes, nested ones too, without their markers.
    assert "Indexes built by 1.x are refused with a message that says so." in lines
    # List items one a line, without markers or task boxes.
    assert "Build the index: quarry index ~/notes." in lines
    assert "Press Ctrl+C to stop a long search." in lines
    assert ["Works offline", "Syncs between machines"] == lines[
        lines.index("Works offline"):lines.index("Works offline") + 2
    ]
    # A table: one line a row, cells apart, no rule row.
    start = lines.index("Option; Default; Meaning")
    assert lines[start:start + 4] == [
        "Option; Default; Meaning",
        "--top-k N; 5; results per query, best first",
        "--fuzzy; off; match words with one typo (see fuzzy matching)",
        "--format; text; text or json | jsonl",
    ]
    # Code blocks keep their content; escapes and entities become characters.
    assert "$ pip install quarry" in lines and "quarry --version" in lines
    assert "Escaped markup stays literal: *not emphasis*, 2 < 3." in doc.text
    assert "Files over 10\u00a0MB are skipped \u2014 split them first." in doc.text
    # Nothing of the markup is left: reference definitions, HTML, rules, underlines.
    for markup in ("**", "__", "_fast_", "](", "][", "]:", "pypi.org/project", "docs/fuzzy.md",
                   "<!--", "<p", "<div", "<img", "<kbd>", "<br>", "&nbsp;", "&mdash;", "```",
                   "[x]", "[ ]", "* * *", "===", "---", ":---", "##"):
        assert markup not in doc.text, markup
    for line in lines:
        assert not line.startswith(("#", ">", "|", "- ", "* ", "1. ", "    ")), line
    # The only backticks are the two inside a double-backtick code span.
    assert 'Search it: quarry search "the `grep` alternative".' in lines
    assert doc.text.count("`") == 2
