"""A batch of queries is searched in one call, and finds what each query finds alone.

``ceg check`` embeds and searches a batch's segments together (and each round
of regenerated answers together): one model call, one FAISS search, one
tokenizing call and one read of stored vectors for the lexical side. Whatever
the batch, a query's passages and their cosines are the ones it gets alone,
for every index type and retrieval method.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import HashEmbedder

from ceg_cli.check.pipeline import CheckOptions, check_batch
from ceg_cli.check.regenerate import regenerate_batch
from ceg_cli.check.retrieve import RetrievalOptions
from ceg_cli.index import open_index
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.types import (
    FACTUAL,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    SUPPORTED,
    Evidence,
    JudgeItem,
    ResponseInput,
    Verdict,
)

TYPES = ("flat", "hnsw", "ivfpq", "ivfpqfs")
METHODS = ("dense", "lexical", "hybrid")
WORDS = ("river mountain harbour castle valley forest bridge market temple island "
         "wheat copper silver winter summer museum railway canal poet general").split()


def _corpus(path: Path, count: int = 400) -> Path:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(count):
        words = " ".join(rng.choice(WORDS, 12))
        rows.append({"id": f"d{i}", "title": f"Place {i % 37}",
                     "text": f"Document {i} tells of the {words}."})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """400 passages indexed once with each type, with the lexical part."""
    root = tmp_path_factory.mktemp("batched")
    source = _corpus(root / "docs.jsonl")
    built = {}
    for kind in TYPES:
        built[kind] = root / kind
        build_index([source], built[kind], BuildOptions(index_type=kind, lexical=True),
                    embedder=HashEmbedder())
    return built


def _queries(count: int = 48) -> list[str]:
    rng = np.random.default_rng(1)
    # Passages' own texts (found with cosine 1), and new texts sharing their words.
    own = [f"Place {i % 37}. Document {i} tells of the" for i in range(0, 400, 50)]
    return own + [" ".join(rng.choice(WORDS, 5)) for _ in range(count - len(own))]


def _hits(rows: Sequence[Sequence[Any]]) -> list[list[tuple[int, float]]]:
    return [[(h.chunk_id, h.score) for h in row] for row in rows]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", TYPES)
def test_a_batch_finds_what_each_query_finds_alone(
    typed: dict[str, Path], kind: str, method: str
) -> None:
    queries = _queries()  # more than 20: FAISS's flat search takes its matrix-product path
    with open_index(typed[kind]) as idx:
        idx.use_embedder(HashEmbedder())
        together = _hits(idx.search(queries, 5, method))
        alone = [_hits(idx.search([q], 5, method))[0] for q in queries]
    assert together == alone
    assert all(row for row in together)


class Counting:
    """Counts the calls made to one method of ``target``."""

    def __init__(self, target: Any, name: str) -> None:
        self.calls: list[int] = []
        inner = getattr(target, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(len(args[0]) if args and hasattr(args[0], "__len__") else 1)
            return inner(*args, **kwargs)

        setattr(target, name, counted)


class FaissCalls:
    """The opened index's FAISS object, with its searches and reads counted."""

    def __init__(self, vectors: Any) -> None:
        self._vectors = vectors
        self.searches: list[int] = []
        self.reads: list[int] = []

    def search(self, x: np.ndarray, k: int) -> Any:
        self.searches.append(len(x))
        return self._vectors.search(x, k)

    def reconstruct_batch(self, ids: np.ndarray) -> Any:
        self.reads.append(len(ids))
        return self._vectors.reconstruct_batch(ids)

    def reconstruct(self, i: int) -> Any:
        raise AssertionError("a stored vector was read on its own")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._vectors, name)


@pytest.mark.parametrize("method", METHODS)
def test_a_check_batch_embeds_and_searches_once(typed: dict[str, Path], method: str) -> None:
    responses = [
        ResponseInput(f"r{i}", i + 1, f"The river and the castle {i}. A winter market {i}. "
                      f"The copper bridge {i}.")
        for i in range(16)
    ]
    with open_index(typed["ivfpqfs"]) as idx:
        embedder = HashEmbedder()
        idx.use_embedder(embedder)
        embeds = Counting(embedder, "embed")
        calls = FaissCalls(idx._vectors)
        idx._vectors = calls
        lexical = Counting(idx.lexical(), "scores_many")
        out = check_batch(responses, idx, CiteFirst(), CheckOptions(
            retrieval=RetrievalOptions(method=method), evidence="index"))
    segments = sum(len(r.segments) for r in out)
    assert segments == 48
    assert embeds.calls == [48]
    assert calls.searches == ([] if method == "lexical" else [48])
    assert lexical.calls == ([] if method == "dense" else [48])
    # The cosines of lexical candidates (in hybrid: those missing from the dense
    # list) from the stored vectors, read for all the queries at once.
    assert len(calls.reads) == (0 if method == "dense" else 1)


class CiteFirst:
    name = "citefirst"
    method = "cites the first passage (test)"

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        return [Verdict(FACTUAL, SUPPORTED, 0.9, (0,), "") for _ in items]


class FlagAll:
    name = "flagall"
    method = "flags every segment (test)"

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        return [Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.1, (), "") for _ in items]


class Rewrites:
    def rewrite(self, question: str | None, previous: str, nonfactual: Sequence[str],
                documents: Sequence[Evidence], *, cite: bool = False) -> str:
        return f"{previous} Also a canal."


def test_each_round_of_regenerated_answers_is_searched_in_one_call(
    typed: dict[str, Path],
) -> None:
    batch = [ResponseInput(f"r{i}", i + 1, f"The river {i}. The castle {i}.")
             for i in range(8)]
    options = CheckOptions(evidence="index")
    with open_index(typed["hnsw"]) as idx:
        embedder = HashEmbedder()
        idx.use_embedder(embedder)
        checked = check_batch(batch, idx, FlagAll(), options)
        embeds = Counting(embedder, "embed")
        calls = FaissCalls(idx._vectors)
        idx._vectors = calls
        regen = regenerate_batch(checked, idx, FlagAll(), Rewrites(), options, max_attempts=2)
    assert all(r is not None and len(r.attempts) == 2 for r in regen)
    # Two rounds of 8 answers: 3 segments each, then 4.
    assert embeds.calls == [24, 32]
    assert calls.searches == [24, 32]
