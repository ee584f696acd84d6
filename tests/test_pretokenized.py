"""Reader processes tokenize for the model (issue 25): the same ids, the same vectors.

With ``--workers N`` the readers tokenize with the model's own fast tokenizer
and this process runs only the model. It must give the ids the model's own
``preprocess`` gives, vectors within 1e-5 of ``encode``'s, and an index equal
to the one-process build's; a tokenizer that would differ is not used.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import MINI_WIKI
from ranged_builds import rows_of, vectors_of

import ceg_cli.corpus.ranges
import ceg_cli.index.build.builder
from ceg_cli.corpus import iter_positioned
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.build.chunking import chunk_or_skip
from ceg_cli.index.dense.embedding import Embedder
from ceg_cli.index.dense.pretokenized import tokenize, tokenizer_state
from ceg_cli.index.layout import embed_text


def passages(limit: int) -> list[str]:
    """Real passages of the mini dump, as a build embeds them (title and text)."""
    texts: list[str] = []
    for _offset, doc in iter_positioned(MINI_WIKI):
        for chunk in chunk_or_skip(doc, 100, None) or []:
            texts.append(embed_text(chunk, "title+text"))
    return texts[:limit]


def test_readers_tokenize_as_the_model_does(embedder: Any) -> None:
    texts = passages(120) + ["  spaces around  ", "ÉCOLE normale supérieure", "x " * 400]
    state = embedder.tokenizer_state()
    assert state is not None
    expected = embedder._model.preprocess(texts)
    for row, ids in enumerate(tokenize(state, texts)):
        length = int(expected["attention_mask"][row].sum())
        assert ids.tolist() == expected["input_ids"][row][:length].tolist()
    assert max(len(ids) for ids in tokenize(state, texts)) == state.max_length


def test_the_model_on_token_ids_gives_its_vectors(embedder: Any) -> None:
    texts = passages(150)
    state = embedder.tokenizer_state()
    vectors = embedder.embed_tokens(tokenize(state, texts))
    reference = embedder.embed(texts)
    assert vectors.shape == reference.shape == (len(texts), embedder.dimension)
    assert np.abs(vectors - reference).max() < 1e-5
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


class OtherIds:
    """The real model's modules, with a ``preprocess`` that gives other ids."""

    def __init__(self, model: Any, change: str) -> None:
        self.model, self.change = model, change
        self.max_seq_length = model.max_seq_length

    def __len__(self) -> int:
        return len(self.model)

    def __getitem__(self, i: int) -> Any:
        return self.model[i]

    def preprocess(self, texts: list[str]) -> dict[str, Any]:
        features = dict(self.model.preprocess(texts))
        if self.change == "ids":
            features["input_ids"] = features["input_ids"].clone()
            features["input_ids"][1, 3] += 1
        else:
            features["pixel_values"] = features["input_ids"]
        return features


@pytest.mark.parametrize("change", ["ids", "inputs"])
def test_a_tokenizer_that_differs_is_not_used(embedder: Any, change: str) -> None:
    assert tokenizer_state(OtherIds(embedder._model, change)) is None


def test_a_model_without_a_fast_tokenizer_is_not_pretokenized() -> None:
    slow = SimpleNamespace(tokenizer=SimpleNamespace(), max_seq_length=128)
    assert tokenizer_state([slow]) is None


def test_a_reader_build_that_tokenized_equals_the_one_process_index(
    embedder: Embedder, mini_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_BYTES", 4000)
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_PAGES", 3)
    monkeypatch.setattr(ceg_cli.index.build.builder, "EMBED_CALL_SIZE", 16)
    report = build_index([MINI_WIKI], tmp_path / "two", BuildOptions(workers=2),
                         embedder=embedder)
    # A single-stream .bz2 is one range: one reader process reads it (readers past the
    # ranges are not started), and it is still the reader path, tokenizing in the reader.
    assert report.pretokenized and report.workers == 1
    rows = rows_of(tmp_path / "two")
    assert rows == rows_of(mini_index) and len(rows) > 50
    assert np.abs(vectors_of(tmp_path / "two") - vectors_of(mini_index)).max() < 1e-5


def test_the_one_thread_build_gives_encodes_vectors(embedder: Embedder, tmp_path: Path) -> None:
    report = build_index([MINI_WIKI], tmp_path / "idx", embedder=embedder)
    assert report.pretokenized and report.workers == 1
    texts = [f"{row[2]}. {row[6]}" if row[2] else str(row[6]) for row in rows_of(tmp_path / "idx")]
    reference = embedder.embed(texts)
    assert np.abs(vectors_of(tmp_path / "idx") - reference).max() < 1e-5
