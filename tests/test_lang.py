"""ceg_cli.lang: codes, scripts, detection, normalization, stop words, stems, words, numbers."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from decimal import Decimal

import pytest

from ceg_cli.errors import ExitStatus, UsageError
from ceg_cli.lang import (
    AUTO,
    analyzer,
    char_script,
    check_language,
    detect,
    dominant_script,
    fold,
    language_name,
    numbers,
    stemmer,
    stopwords,
    support,
    supported_languages,
    terms,
    words,
)
from ceg_cli.lang.script import UNSPACED_SCRIPTS
from ceg_cli.lang.tokenize import ENGLISH_TOKENIZER

# --- codes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "code"),
    [("auto", AUTO), ("AUTO", AUTO), ("de", "de"), ("DE", "de"), ("de-AT", "de"),
     ("zh_Hant", "zh"), ("pt-BR", "pt"), (" en ", "en"), ("yue", "yue")],
)
def test_check_language_reads_codes_and_tags(given: str, code: str) -> None:
    assert check_language(given) == code


@pytest.mark.parametrize("given", ["xx", "german", "", "e"])
def test_an_unknown_code_is_a_one_line_usage_error_that_says_where_to_look(given: str) -> None:
    with pytest.raises(UsageError) as err:
        check_language(given)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"--language {given}:")
    assert "ceg languages" in message
    assert err.value.exit_status == ExitStatus.USAGE


def test_language_names() -> None:
    assert language_name("de") == "German"
    assert language_name("und-Latn") == "undetermined (Latn)"
    assert language_name("und") == "undetermined"


def test_support_table_covers_every_code() -> None:
    table = supported_languages()
    assert len(table) > 180
    de = support("de")
    assert de["sentences"] == "punkt" and de["stemmer"] == "snowball"
    assert de["stopwords"].startswith("bm25s")
    assert support("zh")["words"] == "character bigrams"
    assert support("hi")["sentences"] == "rules"


# --- scripts ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "script"),
    [("Hello", "Latn"), ("亚里士多德", "Hani"), ("東京は日本の首都です", "Jpan"),
     ("서울에서", "Hang"), ("हिन्दी", "Deva"), ("مرحبا", "Arab"), ("สวัสดี", "Thai"),
     ("Привет", "Cyrl"), ("123 !?", "Zyyy"), ("🙂👍🏽", "Zyyy"), ("", "Zyyy"),
     # Latin names inside another script do not make it Latin.
     ("Alan Greenspan有有关失业率经济理论。", "Hani"),
     ("Hawthorne อาศัยอยู่ที่ถนน Main Street", "Thai"),
     ("Perfume Factory работает с 1954 года.", "Cyrl"),
     # A few foreign characters inside English do not make it foreign.
     ("Tokyo (東京) is the capital of Japan and its largest city by far.", "Latn")],
)
def test_dominant_script(text: str, script: str) -> None:
    assert dominant_script(text) == script


def test_combining_marks_take_their_letters_script() -> None:
    assert char_script("\u0301") == "Zinh"
    assert dominant_script("e\u0301e\u0301") == "Latn"
    assert char_script("١") == "Zyyy"  # an Arabic-Indic digit is common to all
    assert char_script("।") == "Zyyy"  # so is the danda


def test_unspaced_scripts_agree_with_the_unicode_script_property() -> None:
    """The block table says "unspaced" exactly where Unicode's Script property does,
    for every letter of the Basic Multilingual Plane (``regex`` reads the UCD)."""
    import regex

    names = {"Hani": "Han", "Hira": "Hiragana", "Kana": "Katakana", "Bopo": "Bopomofo",
             "Thai": "Thai", "Laoo": "Lao", "Khmr": "Khmer", "Mymr": "Myanmar",
             "Tibt": "Tibetan", "Yiii": "Yi"}
    unicode_unspaced = regex.compile("|".join(rf"\p{{Script={n}}}" for n in names.values()))
    # Japanese's long-vowel and sound marks are Common to Unicode, kana to ceg on purpose.
    kana_marks = {0x30FC, 0xFF70, 0xFF9E, 0xFF9F}
    wrong = []
    for cp in range(0x10000):
        ch = chr(cp)
        if not unicodedata.category(ch).startswith("L") or cp in kana_marks:
            continue
        ours = char_script(ch) in UNSPACED_SCRIPTS
        theirs = unicode_unspaced.match(ch) is not None
        if ours != theirs:
            wrong.append(f"U+{cp:04X}")
    assert wrong == []


# --- detection -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "language", "method"),
    [
        ("Aristotle was born in Stagira and taught Alexander the Great.", "en", "detector"),
        ("Er war der Lehrer Alexanders des Großen und wurde in Stagira geboren.", "de",
         "detector"),
        ("Aristote est né à Stagire et fut le précepteur d'Alexandre le Grand.", "fr",
         "detector"),
        ("Aristóteles nació en Estagira y fue el maestro de Alejandro Magno.", "es",
         "detector"),
        ("Аристотель родился в Стагире и был учителем Александра Македонского.", "ru",
         "detector"),
        ("ولد أرسطو في ستاغيرا وكان معلم الإسكندر الأكبر.", "ar", "detector"),
        ("अरस्तू का जन्म स्टैगिरा में हुआ था और वह सिकंदर महान के शिक्षक थे।", "hi", "detector"),
        ("亚里士多德出生于斯塔基拉。他是亚历山大大帝的老师。", "zh", "script"),
        ("アリストテレスはスタゲイラで生まれた。", "ja", "script"),
        ("아리스토텔레스는 스타게이라에서 태어났다.", "ko", "script"),
        ("อริสโตเติลเกิดที่เมืองสตาเกียรา", "th", "script"),
        ("Ο Αριστοτέλης γεννήθηκε στα Στάγειρα.", "el", "script"),
    ],
)
def test_detect_names_the_language(text: str, language: str, method: str) -> None:
    found = detect(text)
    assert (found.language, found.method) == (language, method)


def test_short_english_answers_are_english() -> None:
    for text in ("Yes, in 1921.", "Paris is in France.", "The Eiffel Tower is 330 metres tall."):
        assert detect(text).language == "en"


@pytest.mark.parametrize(
    ("text", "language", "script"),
    [("Yes.", "en", "Latn"), ("OK", "en", "Latn"), ("42", "und", "Zyyy"),
     ("🙂👨‍👩‍👧", "und", "Zyyy"), ("", "und", "Zyyy"),
     ("ሰላም ለዓለም ይሁን ብዬ እጽፋለሁ", "und-Ethi", "Ethi")],
)
def test_what_the_detector_cannot_name_falls_back_by_script(
    text: str, language: str, script: str
) -> None:
    found = detect(text)
    assert (found.language, found.script, found.method) == (language, script, "fallback")


# --- normalization ---------------------------------------------------------------


def test_fold() -> None:
    assert fold("Ｔｏｋｙｏ１２３") == "tokyo123"
    assert fold("Straße") == fold("STRASSE") == "strasse"
    assert fold("ΟΔΟΣ") == fold("οδος")  # final and medial sigma
    assert fold("ﬁsh") == "fish"
    assert fold("in\u00adter\u200bna\u200dtional") == "international"
    assert fold("IŞIK İZMİR", "tr") == "ışık izmir"
    assert fold("IŞIK", "en") == "işik"


def test_fold_arabic_variants_and_diacritics() -> None:
    # alef with hamza / madda / wasla, alef maksura, teh marbuta, tatweel, harakat.
    assert fold("أحمد") == fold("احمد") == fold("إحمد") == fold("آحمد")
    assert fold("مستشفى") == fold("مستشفي")
    assert fold("مدرسة") == fold("مدرسه")
    assert fold("عـــربي") == fold("عربي")
    assert fold("وُلِدَ") == fold("ولد")
    # Presentation forms (as PDF extraction leaves them) are letters again.
    assert fold("\ufedf\ufe8e") == fold("لا")


# --- stop words and stems ----------------------------------------------------------


def test_stopwords() -> None:
    import bm25s.stopwords

    assert stopwords("en") == frozenset(bm25s.stopwords.STOPWORDS_EN)
    assert {"der", "und", "des"} <= stopwords("de")
    assert "في" in stopwords("ar")
    assert {"और", "के"} <= stopwords("hi")
    assert stopwords("nb") == stopwords("no")
    assert stopwords("xh") == frozenset()
    assert stopwords("und-Latn") == frozenset()


def test_stemmer() -> None:
    stem = stemmer("de")
    assert stem is not None
    assert stem(["lehrer", "lehrers"]) == ["lehr", "lehr"]
    assert stemmer("ru") is not None and stemmer("ar") is not None
    assert stemmer("zh") is None and stemmer("und-Latn") is None


def test_stemmers_are_per_thread() -> None:
    import threading

    seen = []

    def run() -> None:
        stem = stemmer("fr")
        seen.append(stem.__self__)  # type: ignore[union-attr]

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen[0] is not seen[1]


# --- words and terms ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["Er war der Lehrer Alexanders des Großen.", "亚里士多德出生于斯塔基拉。",
     "हिन्दी भाषा में", "ولد أرسطو عام ٣٨٤ ق.م", "สวัสดีครับ คุณ", "👨‍👩‍👧 family",
     "می\u200cخواهم", "iPhone手机 1900年"],
)
def test_word_offsets_point_into_the_text(text: str) -> None:
    found = words(text)
    assert found
    for w in found:
        assert text[w.start:w.end] == w.text
    assert all(a.end <= b.start for a, b in zip(found, found[1:]))


def test_words_keep_indic_vowel_signs_and_split_scripts() -> None:
    assert [w.text for w in words("हिन्दी भाषा")] == ["हिन्दी", "भाषा"]
    assert [(w.text, w.kind) for w in words("iPhone手机 1900年")] == [
        ("iPhone", "word"), ("手机", "cjk"), ("1900", "word"), ("年", "cjk")]
    assert [w.text for w in words("👨‍👩‍👧 family 🙂")] == ["family"]
    assert [w.text for w in words("می\u200cخواهم")] == ["می\u200cخواهم"]


def test_english_terms_are_bm25s_tokens_exactly() -> None:
    import bm25s

    texts = [
        "The Eiffel Tower is 330 metres tall, and it was built in 1889.",
        "Aristotle's pupil: Alexander (356–323 BC) — a 'king' of Macedon!",
        "naïve café Ｔｏｋｙｏ straße İstanbul x y z 7 77",
    ]
    expected = bm25s.tokenize(texts, **ENGLISH_TOKENIZER, return_ids=False,
                              show_progress=False)
    assert [terms(t, "en") for t in texts] == expected
    assert analyzer("en").describe() == ENGLISH_TOKENIZER


def test_terms_per_language() -> None:
    assert terms("Er war der Lehrer Alexanders des Großen.", "de") == ["lehr", "alexand",
                                                                     "gross"]
    assert terms("亚里士多德出生", "zh") == ["亚里", "里士", "士多", "多德", "德出", "出生"]
    assert terms("東京は日本", "ja") == ["東京", "京は", "は日", "日本"]
    assert terms("서울에서 2020년", "ko") == ["서울", "울에", "에서", "2020", "년"]
    # A Thai vowel sign stays with its consonant.
    assert terms("คุณ", "th") == ["คุณ"]
    assert terms("สวัสดี", "th") == ["สวั", "วัส", "สดี"]
    # Arabic: alef variants and diacritics folded before the stemmer.
    assert terms("أحمد", "ar") == terms("احمد", "ar")
    # Numbers are kept whatever their length; emoji and joiners are not words.
    assert terms("👨‍👩‍👧 7 Kinder", "de") == ["7", "kind"]
    # Undetermined text: folded words, no stop words, no stems.
    assert terms("Ｔｏｋｙｏ the runners", "und-Latn") == ["tokyo", "the", "runners"]


def test_rtl_text_with_numbers() -> None:
    text = "بلغ عدد السكان ١٬٠٠٠٫٥ ألف نسمة عام 2020"
    assert [n.key for n in numbers(text, "ar")] == ["1000.5", "2020"]
    assert "2020" in terms(text, "ar")


# --- numbers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "language", "values"),
    [
        ("1,000.5 and 1.000,5", "en", ["1000.5", "1000.5"]),
        ("1.000 Leute, 1,5 Liter, 3.14", "de", ["1000", "1.5", "3.14"]),
        ("1,000 people", "en", ["1000"]),
        ("1,000 Leute", "de", ["1"]),
        ("1,5 litres", "en", ["1.5"]),
        ("١٬٠٠٠٫٥", "ar", ["1000.5"]),
        ("۱۹۰۰", "fa", ["1900"]),
        ("१९०० में", "hi", ["1900"]),
        ("在１９００年", "ja", ["1900"]),
        ("12,34,567", "hi", ["1234567"]),
        ("1\u00a0000,5", "fr", ["1000.5"]),
        ("1'000.50", "de", ["1000.5"]),
        ("1,2,3", "en", ["1", "2", "3"]),
        ("1939-1945", "en", ["1939", "1945"]),
        ("-5 °C and −3", "en", ["-5", "-3"]),
        ("in 1900.", "en", ["1900"]),
        ("2.50", None, ["2.5"]),
        ("0.0", "en", ["0"]),
    ],
)
def test_numbers(text: str, language: str | None, values: list[str]) -> None:
    found = numbers(text, language)
    assert [n.key for n in found] == values
    for n in found:
        assert text[n.start:n.end] == n.text


def test_number_values_are_decimals() -> None:
    (n,) = numbers("3,14", "fr")
    assert n.value == Decimal("3.14")


# --- import cost ---------------------------------------------------------------------


def test_importing_lang_loads_no_model_or_regex_engine() -> None:
    code = (
        "import sys, ceg_cli.lang\n"
        "heavy = ('numpy', 'py3langid', 'regex', 'Stemmer', 'stop_words', 'bm25s')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_a_detection_is_sure_of_a_sentence_not_of_a_name() -> None:
    from ceg_cli.lang.detect import detect_within

    assert detect("Aristoteles wurde in Stagira geboren und war der Lehrer Alexanders.").sure
    assert detect("東京は日本の首都です").sure
    assert not detect("Bobby Darin.").sure
    assert detect_within("Bobby Darin.", "de") == "de"
    assert detect_within("亚里士多德", "ja") == "ja"  # kanji alone inside Japanese
    assert detect_within("亚里士多德", "en") == "zh"
