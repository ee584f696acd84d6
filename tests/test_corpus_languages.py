"""MediaWiki dumps in other languages: localized namespaces, their aliases, redirects,
variant markup, magic words (issue 39.3).

The fixtures are described in tests/data/wiki/README.md: real German and Japanese
dump excerpts with their <siteinfo>; real zhwiki and arwiki <siteinfo> with real
article text and pages written in those wikis' shapes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ceg_cli.corpus import iter_documents
from ceg_cli.corpus.wikilocal import (
    convert_variants,
    language_of,
    local_names,
    pages_language,
    redirect_pattern,
)
from ceg_cli.corpus.wikitext import clean_wikitext
from ceg_cli.index.build import chunking
from ceg_cli.index.build.chunking import chunk_or_skip

WIKI = Path(__file__).parent / "data" / "wiki"
MARKUP = ("{{", "}}", "[[", "]]", "{|", "|}", "<ref", "</", "thumb|", "'''", "-{", "}-", "__")


def _docs(name: str, namespaces: frozenset[int] = frozenset({0})) -> dict[str, str]:
    return {d.title: d.text for d in iter_documents(WIKI / name, namespaces=namespaces)}


def test_german_dump_indexes_its_articles_and_skips_its_redirects() -> None:
    docs = _docs("dewiki-excerpt.xml.bz2")
    # Turbojet, Vallquist (#WEITERLEITUNG) and Erythromma are redirects.
    assert sorted(docs) == [
        "Bundesstelle für Flugunfalluntersuchung", "Flagge der Lord-Howe-Insel",
        "Franz Ferdinand Richter", "Wilhelm Ruhkopf",
    ]  # fmt: skip
    for title, text in docs.items():
        assert not [m for m in MARKUP if m in text], title
        assert "Datei:" not in text and "Kategorie:" not in text, title
    assert docs["Franz Ferdinand Richter"].startswith("Franz Ferdinand Richter")


def test_german_talk_page_drops_its_file_links() -> None:
    talk = _docs("dewiki-excerpt.xml.bz2", frozenset({3}))["Benutzer Diskussion:Mxna.ri"]
    assert "Datei:" not in talk and "px|" not in talk


def test_japanese_file_alias_is_dropped_like_its_siteinfo_name() -> None:
    """jawiki's siteinfo names namespace 6 ファイル; 画像 is its alias, which no dump lists.

    Before, the コケ植物 article kept "thumb|556px|center|陸上植物の系統関係" from a
    [[画像:...]] link."""
    docs = _docs("jawiki-excerpt.xml.bz2")
    moss = docs["コケ植物"]
    assert "556px" not in moss and "thumb|" not in moss
    assert "陸上植物の系統関係" not in moss  # the caption of the dropped image
    assert moss.startswith("コケ植物（コケしょくぶつ、Bryophyte）とは")
    assert "画像" in docs  # an article titled with the alias is still an article
    assert "黒人霊歌" not in docs  # #転送, with its <redirect>
    for title, text in docs.items():
        assert "画像:" not in text and "ファイル:" not in text, title


def test_chinese_aliases_variants_magic_words_and_redirects() -> None:
    docs = _docs("zhwiki-siteinfo-sample.xml")
    assert sorted(docs) == ["北京市", "首都"]  # 北平 is "#重定向" with no <redirect>
    beijing = docs["北京市"]
    assert beijing == (
        "北京市（Beijing），简称京，是中华人民共和国的首都，也是直辖市之一。\n\n"
        "北京是全国的政治中心和文化中心。"
    )
    capital = docs["首都"]
    assert capital.startswith("首都，又稱國都，以現代政治角度而言，通常指一個國家的中央政府")
    assert not [m for m in MARKUP if m in capital]


def test_arabic_aliases_punctuation_and_redirects() -> None:
    docs = _docs("arwiki-siteinfo-sample.xml")
    assert sorted(docs) == ["الجيزة", "برنشت"]  # قرية برنشت is "#تحويل"
    assert docs["الجيزة"] == (
        "الجيزة مدينة مصرية تقع على الضفة الغربية لنهر النيل، وهي عاصمة محافظة الجيزة."
        "\n\nتضم الجيزة أهرامات الجيزة وأبو الهول."
    )
    village = docs["برنشت"]
    assert village.startswith("قرية برنشت هي إحدى القرى التابعة لمركز العياط في محافظة الجيزة")
    assert "18296" in village and not [m for m in MARKUP if m in village]


@pytest.mark.parametrize(
    ("name", "url"),
    [("zhwiki-siteinfo-sample.xml", "https://zh.wikipedia.org/wiki/%E5%8C%97%E4%BA%AC%E5%B8%82"),
     ("arwiki-siteinfo-sample.xml",
      "https://ar.wikipedia.org/wiki/%D8%A7%D9%84%D8%AC%D9%8A%D8%B2%D8%A9")],
)  # fmt: skip
def test_urls_of_non_latin_titles_are_the_wikis_own(name: str, url: str) -> None:
    urls = [d.url for d in iter_documents(WIKI / name)]
    assert url in urls


def test_a_dump_without_siteinfo_keeps_the_english_rules(tmp_path: Path) -> None:
    """No <siteinfo>: no language, so "Bild:" and "#WEITERLEITUNG" stay as they were."""
    path = tmp_path / "bare.xml"
    path.write_text(
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" xml:lang="de">'
        "<page><title>A</title><ns>0</ns><id>1</id><revision><id>1</id>"
        '<text xml:space="preserve">Text [[Bild:x.jpg|thumb|Bildtext]] hier.</text>'
        "</revision></page>"
        "<page><title>B</title><ns>0</ns><id>2</id><revision><id>2</id>"
        '<text xml:space="preserve">#WEITERLEITUNG [[A]]</text></revision></page>'
        "</mediawiki>",
        encoding="utf-8",
    )
    docs = {d.title: d.text for d in iter_documents(path)}
    assert docs == {"A": "Text thumb|Bildtext hier.", "B": "WEITERLEITUNG A"}


def test_the_language_comes_from_xml_lang_else_dbname() -> None:
    assert language_of("de", "enwiki") == "de"
    assert language_of(None, "zh_yuewiki") == "zh-yue"
    assert language_of("", "arwiki") == "ar"
    assert language_of("not a code!", None) is None


def _site_dump(tmp_path: Path, xml_lang: str, dbname: str, text: str) -> Path:
    path = tmp_path / f"{dbname}.xml"
    path.write_text(
        f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" xml:lang="{xml_lang}">'
        f"<siteinfo><sitename>Wiki</sitename><dbname>{dbname}</dbname>"
        "<base>https://x.org/wiki/Main</base><namespaces>"
        '<namespace key="0" case="first-letter" /></namespaces></siteinfo>'
        "<page><title>A</title><ns>0</ns><id>1</id><revision><id>1</id>"
        f'<text xml:space="preserve">{text}</text></revision></page></mediawiki>',
        encoding="utf-8",
    )
    return path


GERMAN = ("Die Stadt liegt am Ufer des Flusses und wurde im Mittelalter gegründet. Sie ist "
          "heute für ihre Brücken und die alte Kirche bekannt, die jedes Jahr besucht wird.")
ENGLISH = ("The town lies on the bank of the river and was founded in the Middle Ages. It is "
           "known today for its bridges and the old church, which is visited every year.")


@pytest.mark.parametrize(("name", "language"), [
    ("dewiki-excerpt.xml.bz2", "de"), ("jawiki-excerpt.xml.bz2", "ja"),
    ("enwiki-mini.xml.bz2", "en"), ("bgwiki-utf16-sample.xml.bz2", "bg"),
])  # fmt: skip
def test_a_wikis_pages_are_in_its_language(name: str, language: str) -> None:
    docs = list(iter_documents(WIKI / name))
    assert docs and {d.language for d in docs} == {language}


def test_a_declared_language_is_taken_without_detecting(tmp_path: Path, monkeypatch) -> None:
    """English words quoted on a German wiki's page are its German passages: the
    wiki says which language its pages are in, and the detector is not asked."""
    (doc,) = iter_documents(_site_dump(tmp_path, "de", "dewiki", ENGLISH))

    def no_detector(text: str) -> None:
        raise AssertionError("detected a page whose wiki names its language")

    monkeypatch.setattr(chunking, "detect", no_detector)
    chunks = chunk_or_skip(doc, 100, language="auto")
    assert chunks and {c.language for c in chunks} == {"de"}
    # A --language CODE still names it for every document.
    assert {c.language for c in chunk_or_skip(doc, 100, language="fr") or []} == {"fr"}


def test_a_multilingual_wikis_pages_are_detected_one_by_one(tmp_path: Path) -> None:
    (doc,) = iter_documents(_site_dump(tmp_path, "en", "metawiki", GERMAN))
    assert doc.language is None
    assert {c.language for c in chunk_or_skip(doc, 100, language="auto") or []} == {"de"}


def test_pages_language_only_names_codes_ceg_knows() -> None:
    assert pages_language("de", "dewiki") == "de"
    assert pages_language("zh-classical", "zh_classicalwiki") == "zh"
    assert pages_language("en", "commonswiki") is None
    assert pages_language("simple", "simplewiki") is None  # not a language code
    assert pages_language("gsw", "alswiki") is None  # Alemannic: ceg has no code for it
    assert pages_language(None, "enwiki") is None


def test_local_names_hold_the_aliases_no_dump_lists() -> None:
    assert "Bild" in local_names("de")["file"]
    assert {"分类", "分類"} <= set(local_names("zh")["category"])
    assert {"文件", "圖像"} <= set(local_names("zh")["file"])
    assert "صورة" in local_names("ar")["file"]
    assert local_names("en") == {"media": (), "file": (), "category": (), "redirect": ()}
    assert local_names(None)["file"] == ()


def test_every_table_entry_is_well_formed() -> None:
    table = json.loads((Path(__file__).parents[1] / "ceg_cli/corpus/wikinames.json").read_text())
    assert "MediaWiki siteinfo" in table["source"]
    languages = table["languages"]
    assert len(languages) > 250 and {"de", "zh", "ar", "ja", "ru", "hi"} <= set(languages)
    for code, entry in languages.items():
        assert set(entry) <= {"media", "file", "category", "redirect"}, code
        for kind, names in entry.items():
            assert names and all(isinstance(n, str) and n.strip() and "#" not in n for n in names)
            if kind == "redirect":  # stray quotes in the source are cleaned
                assert not [n for n in names if "'" in n], code


@pytest.mark.parametrize(
    ("language", "text", "redirect"),
    [("de", "#WEITERLEITUNG [[Ziel]]", True), ("de", "#weiterleitung: [[Ziel]]", True),
     ("zh", "#重定向 [[目标]]", True), ("zh", "#重新導向[[目標]]", True),
     ("ar", "#تحويل [[هدف]]", True), ("ja", "＃転送 [[先]]", True),
     ("fa", "#تغییر مسیر [[x]]", True), ("de", "#REDIRECT [[Ziel]]", True),
     ("en", "#Redirect[[Target]]", True), ("en", "#WEITERLEITUNG [[Ziel]]", False),
     ("de", "#WEITERLEITUNGEN sind ...", False), ("de", "Ein #WEITERLEITUNG [[x]]", False)],
)  # fmt: skip
def test_redirect_words_of_the_wikis_language(language: str, text: str, redirect: bool) -> None:
    pattern = redirect_pattern(local_names(language)["redirect"])
    assert bool(pattern.match(text)) is redirect


@pytest.mark.parametrize(
    ("wikitext", "shown"),
    [("-{zh-hans:信息;zh-hant:資訊;}-", "信息"), ("-{zh-hant:資訊;zh-hans:信息}-", "信息"),
     ("-{zh-tw:資訊;zh-hk:資訊}-", "資訊"), ("-{不转换}-", "不转换"),
     ("-{R|raw}-", "raw"), ("-{H|zh-hans:信息;zh-hant:資訊;}-", ""),
     ("-{T|zh-hans:标题;zh-hant:標題}-", ""), ("-{A|zh-hans:软件;zh-hant:軟體}-", "软件"),
     ("-{zh-hans;zh-hant|两种}-", "两种"), ("-{}-", ""), ("a -{b}- c -{d}-", "a b c d"),
     ("no markup", "no markup")],
)  # fmt: skip
def test_variant_markup_shows_one_variant(wikitext: str, shown: str) -> None:
    assert convert_variants(wikitext, "zh") == shown


def test_variant_markup_is_left_alone_on_wikis_without_variants() -> None:
    assert "-{" in clean_wikitext("Text -{x}- here.", language="ja")
    assert clean_wikitext("Text -{x}- here.", language="zh") == "Text x here."


@pytest.mark.parametrize(
    ("wikitext", "text"),
    [("__NOTOC__Text.", "Text."), ("__KEIN_INHALTSVERZEICHNIS__\nText.", "Text."),
     ("__目录__文字。", "文字。"), ("__لافهرس__\nنص.", "نص."),
     ("Call <code>__init__</code> first.", "Call __init__ first.")],
)  # fmt: skip
def test_magic_words_of_every_language_go_and_prose_stays(wikitext: str, text: str) -> None:
    assert clean_wikitext(wikitext) == text


def test_aliases_match_with_underscores_and_any_case() -> None:
    text = "Vor [[bild:X.jpg|thumb|Unterschrift]] nach [[Datei_Diskussion:Y]]."
    assert clean_wikitext(text, dropped_namespaces={"Bild", "Datei Diskussion"}) == "Vor nach."
