"""Passages in every language (issue 39.2): sentence ends by language, sizes in characters
where words have no spaces."""

from __future__ import annotations

import unicodedata

from ceg_cli.index.build.chunking import CHARS_PER_WORD, chunk_document
from ceg_cli.types import Document

SENTENCES_ZH = [
    "亚里士多德出生于斯塔基拉。", "他是亚历山大大帝的老师。",
    "他写了许多关于物理学和形而上学的著作。", "他的学说影响了西方哲学两千多年。",
    "他在雅典建立了吕克昂学园。",
]


def _nonspace(text: str) -> int:
    return sum(1 for ch in text if not ch.isspace())


def test_chinese_passages_are_sized_in_characters_and_cut_at_sentence_ends() -> None:
    text = "".join(SENTENCES_ZH * 20)
    doc = Document("d", "亚里士多德", text)
    chunks = chunk_document(doc, 20, "zh")
    limit = 20 * CHARS_PER_WORD["zh"]
    assert len(chunks) > 5
    for c in chunks:
        assert text[c.start:c.end] == c.text
        assert _nonspace(c.text) <= limit
        assert c.text.endswith("。")
    assert "".join(c.text for c in chunks) == text
    # Read as English, the whole text is one "word" per sentence: far fewer passages.
    assert len(chunk_document(doc, 20)) < len(chunks)


def test_an_over_long_sentence_without_spaces_is_cut_between_characters() -> None:
    text = "很" * 1000
    chunks = chunk_document(Document("d", "t", text), 100, "zh")
    assert len(chunks) == 6  # 1000 characters / 1.8 per word / 100 words per passage
    assert "".join(c.text for c in chunks) == text
    assert max(len(c.text) for c in chunks) - min(len(c.text) for c in chunks) <= 1


def test_a_thai_cut_never_separates_a_vowel_sign_from_its_consonant() -> None:
    text = "สวัสดีครับ" * 200
    chunks = chunk_document(Document("d", "t", text), 10, "th")
    assert len(chunks) > 1
    assert "".join(c.text for c in chunks) == text
    for c in chunks:
        assert not unicodedata.category(c.text[0]).startswith("M")


def test_german_sentences_end_where_german_punkt_says() -> None:
    text = "Er wohnt in Haus Nr. 5 in Berlin. Dort ist es schön. " * 3
    chunks = chunk_document(Document("d", "t", text.strip()), 10, "de")
    assert all("Nr." not in c.text or "Nr. 5" in c.text for c in chunks)


def test_english_passages_do_not_change_with_the_language_named() -> None:
    text = ("Dr. Smith went to Washington. He arrived at 5 p.m. on Monday. " * 30).strip()
    doc = Document("d", "t", text)
    assert chunk_document(doc, 25) == chunk_document(doc, 25, "en")
