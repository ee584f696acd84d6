"""The offline judge in every script (issue 39.6): names, numbers and content words.

English keeps its own rules, unchanged (``tests/test_judge_offline.py`` pins them; here,
that reading English with the language named changes nothing). The real-data cases
come from ``tests/data/multilingual`` (Wikipedia paragraphs, a slice of the
benchmark's set; attribution in tests/data/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ceg_cli.judges.offline import offline
from ceg_cli.judges.offline.langwords import reader, reading_language
from ceg_cli.types import FACTUAL, NONFACTUAL, Evidence, JudgeItem, Segment

SLICE = Path(__file__).resolve().parent / "data" / "multilingual"

# The fact in other words than the answer's: no "Lehrer", no "Alexanders".
ARISTOTELES = (
    "Aristoteles war ein griechischer Universalgelehrter. Ab 343 v. Chr. unterrichtete er "
    "am makedonischen Hof den jungen Alexander, den späteren Alexander den Großen."
)
# Chinese Wikipedia's lead on Aristotle, in its words.
YALISHIDUODE = (
    "亚里士多德（前384年－前322年），古希腊哲学家，出生于色雷斯的斯塔基拉，"
    "是柏拉图的学生、亚历山大大帝的老师。"
)


def item(segment: str, *passages: str, title: str = "") -> JudgeItem:
    evidence = tuple(Evidence(i, f"d{i}", title, p, 0.9) for i, p in enumerate(passages))
    return JudgeItem(Segment(0, 0, len(segment), segment), evidence, None, segment)


def verdict(segment: str, *passages: str, language: str | None, title: str = "") -> object:
    it = item(segment, *passages, title=title)
    return offline.decide(it, offline.analyse(it, language))


# --------------------------------------------------------------------------- the cases


def test_a_german_sentence_is_not_held_to_its_nouns_verbatim() -> None:
    segment = "Er war der Lehrer Alexanders des Großen."
    # Read as English (capitals mark names; "der", "des" are content words), it was
    # flagged, as issue 39 shows: "'Lehrer Alexanders', 'der' and 'des' not in the evidence".
    old = verdict(segment, ARISTOTELES, language=None)
    assert old.label == NONFACTUAL and old.reason.startswith("'Lehrer Alexanders'")
    new = verdict(segment, ARISTOTELES, language="de")
    assert new.label == FACTUAL, new.reason
    # The name is still a name: another one is missing, and said as written.
    wrong = verdict("Er war der Lehrer Caesars.", ARISTOTELES, language="de")
    assert wrong.label == NONFACTUAL and "'Caesars'" in wrong.reason


def test_chinese_sentences_are_read_in_pairs_of_characters() -> None:
    answer = [
        "亚里士多德出生于斯塔基拉。", "他是亚历山大大帝的老师。", "他在1900年获得了诺贝尔奖。"
    ]
    got = [verdict(s, YALISHIDUODE, language="zh", title="亚里士多德") for s in answer]
    assert [v.label for v in got] == [FACTUAL, FACTUAL, NONFACTUAL]
    # The reason quotes the answer's own words, whole, not pairs or clauses.
    assert got[2].reason.startswith("'1900' and '年获得了诺贝尔奖' not in the evidence")
    # Without a language, Chinese script is read as Chinese all the same.
    assert [verdict(s, YALISHIDUODE, language=None).label for s in answer] == [
        FACTUAL, FACTUAL, NONFACTUAL
    ]
    # Before, each clause was one "word" that no passage could hold.
    assert reading_language(None, answer[0]) == "zh"


# --------------------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("language", "segment", "passage"),
    [
        ("ar", "بدأ عرض المسلسل في عام ٢٠١٥ في الهند.",
         "عرض المسلسل لأول مرة في سبتمبر 2015 في الهند."),
        ("hi", "इसका प्रसारण १९४८ में शुरू हुआ।", "इसका प्रसारण 1948 में शुरू हुआ था।"),
        ("ja", "放送は１９００年に始まった。", "放送は1900年に始まった。"),
        ("de", "Die Brücke ist 1.500 Meter lang.", "Die Brücke hat eine Länge von 1500 Metern."),
        ("de", "Der Wert liegt bei 2,5 Prozent.", "Der Wert lag zuletzt bei 2,50 Prozent."),
    ],
)
def test_numbers_compare_as_values_in_any_digits(language: str, segment: str, passage: str) -> None:
    v = verdict(segment, passage, language=language)
    assert v.label == FACTUAL, v.reason


def test_a_changed_number_is_flagged_and_quoted_as_written() -> None:
    v = verdict("Die Brücke ist 1.600 Meter lang.", "Die Brücke hat eine Länge von 1500 Metern.",
                language="de")
    assert v.label == NONFACTUAL and v.reason.startswith("'1.600' not in the evidence")
    hi = verdict("इसका प्रसारण १९५८ में शुरू हुआ।", "इसका प्रसारण 1948 में शुरू हुआ था।",
                 language="hi")
    assert hi.label == NONFACTUAL and "'१९५८'" in hi.reason


# --------------------------------------------------------------------------- names


def test_german_common_nouns_are_not_names() -> None:
    r = reader("de")
    text = "Der Philosoph Platon gründete die Akademie in Athen und lehrte zwei Jahrzehnte."
    names = [s.text for s in r.specifics(text, r.tokenize(text)) if s.kind == "name"]
    assert names == ["Platon", "Athen"]
    # A noun the evidence uses after an article is a noun here too, even bare.
    bare = "Sokrates war Lehrer."
    toks = r.tokenize(bare)
    assert [s.text for s in r.specifics(bare, toks)] == ["Lehrer"]
    nouns = r.evidence_nouns("Er war der Lehrer von Platon.")
    assert [s.text for s in r.specifics(bare, toks, nouns)] == []


def test_capitals_mark_names_in_other_cased_languages() -> None:
    r = reader("ru")
    text = "Драм — государственная валюта Армении и Нагорного Карабаха."
    assert [s.text for s in r.specifics(text, r.tokenize(text))] == [
        "Армении", "Нагорного Карабаха"
    ]
    fr = reader("fr")
    text = "Il est né à Paris, la capitale de la France."
    assert [s.text for s in fr.specifics(text, fr.tokenize(text))] == ["Paris", "France"]


def test_latin_capitals_are_names_inside_text_without_capitals() -> None:
    r = reader("zh")
    text = "Santo住在纽约，并从事相关的工作。"
    assert [s.text for s in r.specifics(text, r.tokenize(text))] == ["Santo"]


def test_reasons_quote_missing_words_in_the_answers_script() -> None:
    v = verdict("वह एक प्रसिद्ध वैज्ञानिक था।", "वह एक प्रसिद्ध लेखक और कवि था।", language="hi")
    assert v.label == FACTUAL  # 1 of 2 content words is enough coverage
    ar = verdict("يقع المتحف في منطقة بر دبي.", "تقع المدرسة في مدينة القاهرة.", language="ar")
    assert ar.label == NONFACTUAL
    # As written ("المتحف" keeps its article; folding and stems are only for comparing).
    assert ar.reason.startswith("'يقع', 'المتحف', 'منطقة', 'بر' and 1 more word")


# --------------------------------------------------------------------------- English unchanged


def test_english_named_reads_exactly_as_english_unnamed() -> None:
    rows = [json.loads(line) for line in open(SLICE / "en.jsonl", encoding="utf-8")]
    passages = {r["id"]: r for r in rows if r["type"] == "passage"}
    claims = [r for r in rows if r["type"] == "claim"]
    assert claims
    for c in claims:
        p = passages[c["passage"]]
        it = item(c["text"], p["text"], title=p["title"])
        assert offline.analyse(it, "en") == offline.analyse(it) == offline.analyse(it, None)
    assert reading_language("en", "Der Lehrer") is None  # named English: English rules
    assert reading_language(None, "Plain Latin text") is None


# --------------------------------------------------------------------------- real rows


@pytest.mark.parametrize("lang", ["de", "es", "fr", "ru", "zh", "ja", "ar", "hi"])
def test_real_sentences_pass_and_planted_numbers_and_dates_are_caught(lang: str) -> None:
    """Each true sentence of the slice, against its own Wikipedia paragraph, is
    supported; each planted number or date error is flagged, and its reason quotes
    the changed number as the sentence writes it."""
    rows = [json.loads(line) for line in open(SLICE / f"{lang}.jsonl", encoding="utf-8")]
    passages = {r["id"]: r for r in rows if r["type"] == "passage"}
    checked = 0
    for c in (r for r in rows if r["type"] == "claim"):
        p = passages[c["passage"]]
        v = verdict(c["text"], p["text"], language=lang, title=p["title"])
        if c["supported"]:
            assert v.label == FACTUAL, (c["text"], v.reason)
            checked += 1
        elif c["error"] in ("number", "date"):
            # As written; "40 000" (a plain space between groups) reads as 40 and 000.
            new = c["detail"].split(" -> ")[1].split(" ")[0]
            assert v.label == NONFACTUAL and f"'{new}" in v.reason, (c["text"], v.reason)
            checked += 1
    assert checked >= 2


# --------------------------------------------------------------------------- through ceg check


def test_the_chinese_answer_end_to_end_split_and_judged_sentence_by_sentence() -> None:
    """Issue 39's first case through ``Checker``: three sentences, not one segment;
    the first two supported by the record's context, the third flagged, quoting
    what is missing in Chinese."""
    from ceg_cli.api import Checker

    answer = "亚里士多德出生于斯塔基拉。他是亚历山大大帝的老师。他在1900年获得了诺贝尔奖。"
    for language in ("zh", "auto"):
        with Checker(judge="offline", language=language) as checker:
            result = checker.check(answer, contexts=[{"text": YALISHIDUODE, "title": "亚里士多德"}])
        assert [s.text for s in result.segments] == [
            "亚里士多德出生于斯塔基拉。", "他是亚历山大大帝的老师。", "他在1900年获得了诺贝尔奖。"
        ]
        assert [s.label for s in result.segments] == [FACTUAL, FACTUAL, NONFACTUAL]
        assert "'1900'" in result.segments[2].reason


def test_the_german_sentence_end_to_end() -> None:
    from ceg_cli.api import Checker

    with Checker(judge="offline", language="de") as checker:
        good = checker.check("Er war der Lehrer Alexanders des Großen.", contexts=[ARISTOTELES])
        bad = checker.check("Er war der Lehrer Caesars.", contexts=[ARISTOTELES])
    assert good.label == FACTUAL, good.segments[0].reason
    assert bad.label == NONFACTUAL and "'Caesars'" in bad.segments[0].reason


# ---------------------------------------------------------------- what XNLI and the set showed


ARASTU = (
    "अरस्तू एक यूनानी दार्शनिक थे जिनका जन्म स्टेगेयर नगर में हुआ था और वे प्लेटो के शिष्य तथा "
    "सिकंदर महान के गुरु थे।"
)
ARISTU = (
    "أرسطو فيلسوف يوناني ولد في مدينة ستاغيرا وكان تلميذا لأفلاطون ومعلما للإسكندر الأكبر."
)
ARISUTOTERESU = "アリストテレスは古代ギリシアの哲学者で、アレクサンドロス大王の家庭教師であった。"


@pytest.mark.parametrize(
    ("lang", "passage", "swapped", "name"),
    [
        ("zh", YALISHIDUODE,
         "亚里士多德是古希腊哲学家，出生于色雷斯的斯塔基拉，是苏格拉底的学生、亚历山大大帝的老师。",
         "苏格拉底"),
        ("ja", ARISUTOTERESU,
         "アリストテレスは古代ローマの哲学者で、アレクサンドロス大王の家庭教師であった。",
         "ローマ"),
        ("ar", ARISTU,
         "أرسطو فيلسوف يوناني ولد في مدينة القاهرة وكان تلميذا لأفلاطون ومعلما للإسكندر الأكبر.",
         "القاهرة"),
        ("hi", ARASTU,
         "अरस्तू एक यूनानी दार्शनिक थे जिनका जन्म दिल्ली नगर में हुआ था और वे प्लेटो के शिष्य तथा "
         "सिकंदर महान के गुरु थे।", "दिल्ली"),
    ],
    ids=["zh", "ja", "ar", "hi"],
)
def test_a_swapped_name_is_caught_where_no_capitals_show_names(
    lang: str, passage: str, swapped: str, name: str
) -> None:
    """A sentence the evidence holds all of but a name, in a script without capitals,
    is flagged, quoting the name; before, the name was a few pairs or one word among
    many found, and coverage let it pass. The passage's own sentence passes."""
    assert verdict(passage, passage, language=lang).label == FACTUAL
    v = verdict(swapped, passage, language=lang)
    assert v.label == NONFACTUAL and name in v.reason, v.reason


@pytest.mark.parametrize("lang", ["ja", "hi"])
def test_the_slices_swapped_names_are_caught(lang: str) -> None:
    rows = [json.loads(line) for line in open(SLICE / f"{lang}.jsonl", encoding="utf-8")]
    passages = {r["id"]: r for r in rows if r["type"] == "passage"}
    swaps = [r for r in rows if r["type"] == "claim" and r.get("error") == "name"]
    assert swaps
    for c in swaps:
        p = passages[c["passage"]]
        v = verdict(c["text"], p["text"], language=lang, title=p["title"])
        assert v.label == NONFACTUAL, (c["text"], v.reason)


def test_a_paraphrase_in_chinese_is_not_taken_for_a_swap() -> None:
    """Where much of the sentence is not in the evidence (a paraphrase), coverage
    decides as before: one shared word is enough, counted in characters."""
    # XNLI dev's first premise and its entailed hypothesis: only 妈妈 is shared. In
    # pairs of characters that is 1 of 11 (under MIN_COVERAGE); in characters 2 of 13.
    v = verdict("他告诉他的妈妈他已经回到家了。", "他说，妈妈，我回来了。", language="zh")
    assert v.label == FACTUAL, v.reason
    assert verdict("他未被允许参加。", "他说，妈妈，我回来了。", language="zh").label == NONFACTUAL


def test_bulgarian_forms_of_a_word_share_a_stem() -> None:
    """Snowball has no Bulgarian: Savoy's light stemmer takes off the article and the
    plural, so "майката" (the mother) is "майка" and "приятелите" "приятели"."""
    from ceg_cli.lang.stem import light_stemmer

    stem = light_stemmer("bg")
    assert stem is not None and light_stemmer("de") is None
    assert len(set(stem(["майка", "майката", "майки"]))) == 1
    assert len(set(stem(["приятели", "приятелите"]))) == 1
    assert stem(["ден", "деня", "денят"]) == ["ден", "ден", "ден"]
    v = verdict("Майката на приятелите дойде.", "Приятели и майка им дойдоха вчера.",
                language="bg")
    assert v.label == FACTUAL, v.reason


def test_arabic_words_with_and_without_the_article_compare_alike() -> None:
    """Light10, not Snowball, for the judge: Snowball took off the article or the
    ending, not both, so "التابعة" and "تابعة" were two words, and a sentence of
    arwiki's برنشت was flagged for one of them."""
    r = reader("ar")
    keys = {t.key for t in r.tokenize("التابعة تابعة")}
    assert len(keys) == 1
    passage = ("قرية برنشت هي إحدى القرى التابعة لمركز العياط في محافظة الجيزة في جمهورية "
               "مصر العربية.")
    v = verdict("برنشت قرية تابعة لمركز العياط في محافظة الجيزة.", passage, language="ar")
    assert v.label == FACTUAL, v.reason


def test_turkish_case_endings_after_an_apostrophe_are_not_words() -> None:
    r = reader("tr")
    toks = r.tokenize("Kennedy'nin ofisi Ankara'da.")
    content = [t.text for t in toks if t.content]
    assert content == ["Kennedy", "ofisi", "Ankara"]
    v = verdict("Kennedy'nin ofisi Ankara'da.", "Kennedy ofisi Ankara şehrinde açtı.",
                language="tr")
    assert v.label == FACTUAL, v.reason


def test_a_word_opening_a_sentence_is_not_part_of_the_name_after_it() -> None:
    r = reader("ru")
    text = "Это Генерал Мэй и три пилота."
    assert [s.text for s in r.specifics(text, r.tokenize(text))] == ["Генерал Мэй"]
    tr = reader("tr")
    text = "Önceden Teksas'taydım."
    assert [s.text for s in tr.specifics(text, tr.tokenize(text))] == ["Teksas"]
    # A name that opens a sentence is still a name.
    fr = reader("fr")
    text = "Jean Moulin est né à Béziers."
    assert [s.text for s in fr.specifics(text, fr.tokenize(text))] == ["Moulin", "Béziers"]


def test_a_latin_name_in_other_script_is_asked_only_of_evidence_with_latin_words() -> None:
    """XNLI's translators left "Kennedy" in Latin letters in one sentence and wrote
    "Кеннеди" in its premise: no lexical rule matches those. Where the evidence has
    Latin words, the name is a name as before."""
    premise = "Здесь генерал Мэй и три пилота в кабинете президента Кеннеди."
    v = verdict("Генерал Мэй был в кабинете Kennedy.", premise, language="ru")
    assert v.label == FACTUAL, v.reason
    latin = premise + " (John F. Kennedy Library)"
    v = verdict("Генерал Мэй был в кабинете Nixon.", latin, language="ru")
    assert v.label == NONFACTUAL and "'Nixon'" in v.reason


def test_german_articles_do_not_join_nouns_into_a_name() -> None:
    r = reader("de")
    text = "Ich will nicht Teil der Dritten SS sein."
    assert "Teil der Dritten SS" not in [s.text for s in r.specifics(text, r.tokenize(text))]
    text = "Das Büro war Nixons Staatssekretär unterstellt."
    assert [s.text for s in r.specifics(text, r.tokenize(text))] == ["Nixons"]
    # "von" still joins: "Ludwig van Beethoven", "Otto von Bismarck".
    text = "Er traf Otto von Bismarck."
    assert [s.text for s in r.specifics(text, r.tokenize(text))] == ["Otto von Bismarck"]


BANGKOK = ("กรุงเทพมหานครได้รับการสถาปนาเป็นราชธานีในปี 1782 "
           "โดยพระบาทสมเด็จพระพุทธยอดฟ้าจุฬาโลกมหาราช")


@pytest.mark.parametrize(("language", "passage", "segment", "right", "wrong"), [
    ("th", BANGKOK, "กรุงเทพมหานครได้รับการสถาปนาเป็นราชธานีในปี {}", "๑๗๘๒", "๑๗๘๓"),
    ("zh", "埃菲尔铁塔位于巴黎，于1889年建成，是世界博览会的入口。", "埃菲尔铁塔于{}年建成。",
     "１８８９", "１８８８"),
    ("hi", "एफ़िल टॉवर पेरिस में स्थित है और इसका निर्माण 1889 में पूरा हुआ था।",
     "एफ़िल टॉवर का निर्माण {} में पूरा हुआ था।", "१८८९", "१८८८"),
])
def test_a_number_in_the_digits_of_an_unspaced_or_other_script_is_its_value(
    language: str, passage: str, segment: str, right: str, wrong: str,
) -> None:
    """Issue 51 item 3: Thai "๑๗๘๒" against 1782 (Thai digits were read as pairs of
    characters the evidence lacks), fullwidth digits in Chinese, Devanagari in Hindi."""
    ascii_year = str(int(right))
    expected = verdict(segment.format(ascii_year), passage, language=language)
    assert expected.label == FACTUAL, expected.reason
    got = verdict(segment.format(right), passage, language=language)
    assert (got.label, got.cited) == (FACTUAL, expected.cited), got.reason
    assert verdict(segment.format(wrong), passage, language=language).label == NONFACTUAL
