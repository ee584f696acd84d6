"""Negation words and months per language, compared across languages by the cross-language
rule before its cosine (issue 58 item 3; ``ceg_cli/judges/crosschecks.py``)."""

from __future__ import annotations

import pytest

from ceg_cli.judges.offline.crosschecks import (
    is_month,
    is_month_number,
    missing_months,
    months,
    negated,
)


@pytest.mark.parametrize("text, language, said", [
    ("The tower was not completed in 1889.", "en", True),
    ("The tower wasn't completed in 1889.", "en", True),
    ("The tower was completed in 1889.", "en", False),
    ("It is not only a tower but a radio mast.", "en", False),
    ("The song reached No. 1 in 1964.", "en", False),
    ("Der Turm wurde 1889 nicht fertiggestellt.", "de", True),
    ("Es gab keine Aufzüge im Turm.", "de", True),
    ("Der Turm ist nicht nur hoch, sondern auch alt.", "de", False),
    ("La tour n'a pas été achevée en 1889.", "fr", True),
    ("La tour a été achevée en 1889.", "fr", False),
    ("La torre no fue terminada en 1889.", "es", True),
    ("Башня не была достроена в 1889 году.", "ru", True),
    ("Башня была достроена в 1889 году.", "ru", False),
    ("Башня известна не только в Париже.", "ru", False),
    ("Kule 1889 yılında tamamlanmış değildi.", "tr", True),
    ("Kule 1889 yılında tamamlandı.", "tr", False),
    ("لم يكتمل البرج في عام 1889.", "ar", True),
    ("ولم يكتمل البرج في عام 1889.", "ar", True),
    ("اكتمل البرج في عام 1889.", "ar", False),
    ("铁塔不是在1889年建成的。", "zh", True),
    ("铁塔于1889年建成。", "zh", False),
    ("Tháp không được hoàn thành vào năm 1889.", "vi", True),
    ("Không khí ở Paris trong lành.", "vi", False),
    ("टावर 1889 में पूरा नहीं हुआ था।", "hi", True),
    ("यह न केवल एक टावर है।", "hi", False),
])  # fmt: skip
def test_negation_words_of_each_language(text: str, language: str, said: bool) -> None:
    assert negated(text, language) is said


def test_a_language_without_a_list_is_not_read() -> None:
    assert negated("Mnara haukukamilika mwaka 1889.", "sw") is None
    assert negated("Torni valmistui 1889.", "fi") is None


@pytest.mark.parametrize("text, language, found", [
    ("Der Turm wurde am 31. März 1889 eröffnet.", "de", {3}),
    ("It was completed on 31 March 1889.", "en", {3}),
    ("Kule 31 Mart 1889'da açıldı.", "tr", {3}),
    ("Башня открыта 31 марта 1889 года.", "ru", {3}),
    ("افتتح البرج في 31 مارس 1889.", "ar", {3}),
    ("铁塔于1889年3月31日开放。", "zh", {3}),
    ("La tour a ouvert le 15 mai 1889.", "fr", {5}),
    # "May" the verb, or a month with no number beside it, is no date.
    ("It may be the tallest tower.", "en", set()),
])  # fmt: skip
def test_months_beside_a_number(text: str, language: str, found: set[int]) -> None:
    assert months(text, language, beside_number=True) == found


def test_a_segments_month_must_be_one_the_evidence_names() -> None:
    evidence = ["The tower was completed on 31 March 1889."]
    assert missing_months("Der Turm wurde im Mai 1889 fertiggestellt.", "de", evidence,
                          "en") == [5]
    assert missing_months("Der Turm wurde im März 1889 fertiggestellt.", "de", evidence,
                          "en") == []
    # Evidence in a language without a table: not asked.
    assert missing_months("Der Turm wurde im Mai 1889 fertiggestellt.", "de",
                          ["Mnara ulikamilika Machi 1889."], "sw") is None


def test_a_month_is_compared_as_a_month_not_looked_for_as_a_name_or_number() -> None:
    assert is_month("Mart", "tr") and is_month("März", "de") and is_month("марта", "ru")
    assert not is_month("Paris", "tr") and not is_month("Mart", "sw")
    assert is_month_number("3", "铁塔于1889年3月31日开放。", "zh")
    assert not is_month_number("31", "铁塔于1889年3月31日开放。", "zh")
    assert not is_month_number("3", "3 March", "en")
