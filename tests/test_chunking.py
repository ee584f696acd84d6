from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ceg_cli.index.build.chunking import chunk_document, iter_chunks
from ceg_cli.sentences import sentence_spans
from ceg_cli.types import Chunk, Document


def sentence(n_words: int, tag: str = "w") -> str:
    """A sentence of exactly n_words words, ending with a period."""
    return " ".join(f"{tag}{i}" for i in range(n_words)) + "."


def doc(text: str) -> Document:
    return Document(id="d1", title="Title", text=text, url="https://x/1", source="c.jsonl")


def n_words(chunk: Chunk) -> int:
    return len(chunk.text.split())


def assert_invariants(document: Document, chunks: list[Chunk], max_words: int) -> None:
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    prev_end = 0
    for c in chunks:
        assert document.text[c.start : c.end] == c.text
        assert c.text and c.text == c.text.strip()
        assert prev_end <= c.start < c.end
        assert n_words(c) <= max_words
        prev_end = c.end
    # Nothing but whitespace is lost or repeated.
    assert " ".join(c.text for c in chunks).split() == document.text.split()
    # A chunk is whole sentences, or a piece of one sentence longer than max_words.
    spans = sentence_spans(document.text)
    starts, ends = {s for s, _ in spans}, {e for _, e in spans}
    for c in chunks:
        if c.start in starts and c.end in ends:
            continue
        (s, e) = next((s, e) for s, e in spans if s <= c.start < e)
        assert c.end <= e and len(document.text[s:e].split()) > max_words


def test_chunks_are_whole_sentences_up_to_max_words() -> None:
    text = " ".join(sentence(n, tag) for n, tag in [(40, "a"), (40, "b"), (40, "c"), (10, "d")])
    document = doc(text)
    chunks = chunk_document(document, max_words=100)
    assert_invariants(document, chunks, 100)
    assert [n_words(c) for c in chunks] == [80, 50]
    ends = {e for _, e in sentence_spans(text)}
    starts = {s for s, _ in sentence_spans(text)}
    assert all(c.end in ends and c.start in starts for c in chunks)
    assert chunks[1].text.startswith("c0 ")


def test_metadata_is_copied_from_the_document() -> None:
    document = doc("One short sentence.")
    (chunk,) = chunk_document(document)
    assert chunk == Chunk(
        doc_id="d1",
        title="Title",
        ordinal=0,
        start=0,
        end=19,
        text="One short sentence.",
        url="https://x/1",
        source="c.jsonl",
    )


def test_a_long_sentence_is_split_at_word_boundaries_into_even_pieces() -> None:
    long = sentence(250, "L")
    text = f"Intro here. {long} After it."
    document = doc(text)
    chunks = chunk_document(document, max_words=100)
    assert_invariants(document, chunks, 100)
    assert [c.text for c in chunks][0] == "Intro here."
    assert [n_words(c) for c in chunks[1:4]] == [84, 83, 83]
    assert " ".join(c.text for c in chunks[1:4]) == long
    assert chunks[4].text == "After it."


def test_a_sentence_of_exactly_max_words_is_not_split() -> None:
    document = doc(sentence(100))
    chunks = chunk_document(document, max_words=100)
    assert len(chunks) == 1 and n_words(chunks[0]) == 100


def test_a_full_enough_chunk_ends_at_a_paragraph_break() -> None:
    text = f"{sentence(30, 'a')} {sentence(30, 'b')}\n\n{sentence(30, 'c')}"
    chunks = chunk_document(doc(text), max_words=100)
    assert [n_words(c) for c in chunks] == [60, 30]
    assert chunks[1].text.startswith("c0 ")


def test_a_small_chunk_continues_across_a_paragraph_break() -> None:
    text = f"History\n\n{sentence(30, 'a')}\r\n\r\n{sentence(30, 'b')}"
    chunks = chunk_document(doc(text), max_words=100)
    assert len(chunks) == 1
    assert chunks[0].text == text


def test_line_breaks_end_sentences_so_chunks_can_end_at_them() -> None:
    lines = [" ".join(f"x{i}{j}" for j in range(30)) for i in range(5)]  # no periods
    text = "\n".join(lines)
    chunks = chunk_document(doc(text), max_words=100)
    assert [c.text for c in chunks] == ["\n".join(lines[:3]), "\n".join(lines[3:])]


@pytest.mark.parametrize("text", ["", "   \n\t\r\n  "])
def test_blank_documents_give_no_chunks(text: str) -> None:
    assert chunk_document(doc(text)) == []


def test_offsets_are_stripped_and_exact_with_crlf_and_unicode() -> None:
    text = "\r\n  Zürich is in Switzerland. 🚀 Rockets fly.  \r\n\r\n  Ünïcödé line\r\n"
    document = doc(text)
    chunks = chunk_document(document, max_words=5)
    assert_invariants(document, chunks, 5)
    # "🚀 Rockets fly." holds half of max_words, so the blank line closes it.
    assert [c.text for c in chunks] == [
        "Zürich is in Switzerland.",
        "🚀 Rockets fly.",
        "Ünïcödé line",
    ]
    assert chunks[2].start == text.index("Ü")


def test_max_words_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_words"):
        chunk_document(doc("Text."), max_words=0)


def test_iter_chunks_streams_documents_lazily() -> None:
    def documents() -> Iterator[Document]:
        yield Document(id="a", title="A", text="First doc. It has two sentences.")
        raise AssertionError("the second document was read before it was needed")

    first = next(iter_chunks(documents(), max_words=100))
    assert (first.doc_id, first.ordinal) == ("a", 0)


def test_iter_chunks_restarts_ordinals_per_document() -> None:
    docs = [Document(id=str(i), title="", text=f"{sentence(8)} {sentence(8)}") for i in range(3)]
    chunks = list(iter_chunks(docs, max_words=10))
    assert [(c.doc_id, c.ordinal) for c in chunks] == [
        ("0", 0),
        ("0", 1),
        ("1", 0),
        ("1", 1),
        ("2", 0),
        ("2", 1),
    ]


_WORDS = st.sampled_from(
    ["the", "Dr.", "Smith", "went", "home.", "Is", "it?", "yes!", "e.g.", "U.S.", "42", "café"]
)
_SEPARATORS = st.sampled_from([" ", " ", " ", "  ", "\n", "\r\n", "\n\n", "\t"])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(_WORDS, _SEPARATORS), max_size=120),
    st.integers(min_value=1, max_value=25),
)
def test_invariants_hold_on_arbitrary_text(pieces: list[tuple[str, str]], max_words: int) -> None:
    text = "".join(w + sep for w, sep in pieces)
    document = doc(text)
    chunks = chunk_document(document, max_words=max_words)
    assert_invariants(document, chunks, max_words)
