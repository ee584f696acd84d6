"""Sentences in every script (issue 39.2): Punkt per language, rules elsewhere, exact offsets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ceg_cli.check.segment import segment_response
from ceg_cli.sentences import punkt_tokenizer, rule_spans, sentence_spans, splitter_name


def texts(text: str, language: str | None) -> list[str]:
    return [text[s:e] for s, e in sentence_spans(text, language)]


def test_the_issue_s_chinese_answer_is_three_sentences() -> None:
    text = "亚里士多德出生于斯塔基拉。他是亚历山大大帝的老师。他在1900年获得了诺贝尔奖。"
    assert texts(text, "zh") == ["亚里士多德出生于斯塔基拉。", "他是亚历山大大帝的老师。",
                                 "他在1900年获得了诺贝尔奖。"]
    # Before languages: one segment, as the issue reports.
    assert len(texts(text, None)) == 1


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [
        ("ja", "東京は日本の首都です。人口は約1400万人です！本当？",
         ["東京は日本の首都です。", "人口は約1400万人です！", "本当？"]),
        ("zh", "他说：“我回来了。”然后走了。价格是3.5元。",
         ["他说：“我回来了。”", "然后走了。", "价格是3.5元。"]),
        ("zh", "和他一起回家?我们的父亲说。", ["和他一起回家?", "我们的父亲说。"]),
        ("ko", "서울은 한국의 수도이다. 인구는 약 천만 명이다.",
         ["서울은 한국의 수도이다.", "인구는 약 천만 명이다."]),
        ("ar", "ولد أرسطو في ستاغيرا. هل كان معلم الإسكندر؟ نعم، كان كذلك.",
         ["ولد أرسطو في ستاغيرا.", "هل كان معلم الإسكندر؟", "نعم، كان كذلك."]),
        ("ur", "یہ پاکستان ہے۔ یہ ایک ملک ہے۔", ["یہ پاکستان ہے۔", "یہ ایک ملک ہے۔"]),
        ("hi", "अरस्तू का जन्म स्टैगिरा में हुआ था। वह सिकंदर के शिक्षक थे।",
         ["अरस्तू का जन्म स्टैगिरा में हुआ था।", "वह सिकंदर के शिक्षक थे।"]),
        ("hy", "Արիստոտելը ծնվել է Ստագիրայում։ Նա ուսուցիչ էր։",
         ["Արիստոտելը ծնվել է Ստագիրայում։", "Նա ուսուցիչ էր։"]),
        ("vi", "Aristotle sinh ra ở Stagira. Ông là thầy của Alexander.",
         ["Aristotle sinh ra ở Stagira.", "Ông là thầy của Alexander."]),
        ("bg", "Аристотел е роден в Стагира. Той е учител на Александър.",
         ["Аристотел е роден в Стагира.", "Той е учител на Александър."]),
    ],
)
def test_rule_based_languages(language: str, text: str, expected: list[str]) -> None:
    assert splitter_name(language) == "rules"
    assert texts(text, language) == expected


def test_decimal_points_and_versions_do_not_end_sentences_in_rule_languages() -> None:
    assert texts("القيمة 3.14 تقريبا. والإصدار v1.2 جديد.", "ar") == [
        "القيمة 3.14 تقريبا.", "والإصدار v1.2 جديد."]


def test_thai_long_runs_between_spaces_end_sentences() -> None:
    first = "อริสโตเติลเกิดที่เมืองสตาเกียรา"
    second = "เขาเป็นครูของอเล็กซานเดอร์มหาราช"
    assert texts(f"{first} {second}", "th") == [first, second]
    # A short run set apart by spaces (a name, a number) stays inside its sentence.
    short = "เขาเกิดในปี 384 ก่อนคริสตกาล"
    assert texts(short, "th") == [short]


def test_punkt_is_used_with_each_language_s_own_parameters() -> None:
    assert splitter_name("de") == "punkt:german"
    assert splitter_name(None) == splitter_name("en") == "punkt:english"
    # German Punkt knows "Nr." and "bzw." as abbreviations; English Punkt does not.
    text = "Er wohnt in Haus Nr. 5 in Berlin. Dort ist es schön."
    assert texts(text, "de") == ["Er wohnt in Haus Nr. 5 in Berlin.", "Dort ist es schön."]
    assert punkt_tokenizer("german") is punkt_tokenizer("german")
    assert punkt_tokenizer("german") is not punkt_tokenizer()


def test_english_is_split_as_before_whatever_the_spelling_of_the_code() -> None:
    text = "Dr. Smith went to Washington. He arrived at 5 p.m. on Monday."
    assert sentence_spans(text, "en") == sentence_spans(text, "EN") == sentence_spans(text)


def test_undetermined_text_is_split_by_its_script_s_rules() -> None:
    # The Ethiopic full stop and question mark.
    assert texts("ሰላም ለዓለም። እንዴት ነህ፧ ደህና ነኝ።", "und-Ethi") == [
        "ሰላም ለዓለም።", "እንዴት ነህ፧", "ደህና ነኝ።"]


def test_segments_of_a_chinese_answer_have_exact_offsets() -> None:
    text = "1. 亚里士多德出生于斯塔基拉。他是老师。\n2. 他在1900年获得了诺贝尔奖。"
    segments = segment_response(text, "zh")
    assert [s.text for s in segments] == ["亚里士多德出生于斯塔基拉。", "他是老师。",
                                          "他在1900年获得了诺贝尔奖。"]
    for s in segments:
        assert text[s.start:s.end] == s.text


def test_rtl_emoji_and_zero_width_joiners_keep_offsets_and_lines() -> None:
    text = "عدد السكان 2020 هو ١٬٠٠٠ نسمة 👨‍👩‍👧. هل هذا صحيح؟\u200f نعم!"
    assert texts(text, "ar") == ["عدد السكان 2020 هو ١٬٠٠٠ نسمة 👨‍👩‍👧.",
                                 "هل هذا صحيح؟\u200f", "نعم!"]


_ALPHABET = st.sampled_from(
    list("ab .!?。！？।؟۔」”\n\t \u200d\u200f🙂1") + ["亚", "ل", "ก", "अ", "ा", "ัง", "한"]
)


@settings(max_examples=300, deadline=None)
@given(text=st.lists(_ALPHABET, max_size=80).map("".join),
       language=st.sampled_from(["zh", "ja", "ar", "hi", "th", "ko", "und-Latn", "vi"]))
def test_rule_spans_are_exact_ordered_stripped_and_lose_nothing(text: str, language: str) -> None:
    spans = sentence_spans(text, language)
    previous = 0
    for start, end in spans:
        assert previous <= start < end <= len(text)
        piece = text[start:end]
        assert piece == piece.strip()
        # Nothing but whitespace is ever left out between sentences.
        assert text[previous:start].strip() == ""
        previous = end
    assert text[previous:].strip() == ""


def test_rule_spans_on_a_slice_stay_in_the_slice() -> None:
    text = "前文。中间的一句。后文。"
    assert rule_spans(text, 3, 9, "zh") == [(3, 9)]
