"""The verifier's training and validation data: which pairs, how many, which split.

Every pair is assigned to ``train`` or ``val`` by a hash of its group (its
source document), never by pair. Two whole sources are held out as test-only
(``HELD_OUT``): nothing is fitted or chosen on them, and they are reported
beside the benchmarks as data from other domains and other error types.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..corpus import iter_documents
from ..index.build.chunking import chunk_document
from ..judges.checkers.window import select_window
from .sources import SOURCES, Pair, read_source, split_of
from .synthetic import Passage, make_pairs

__all__ = [
    "HELD_OUT",
    "TRAIN_CAPS",
    "VAL_CAPS",
    "corpus_passages",
    "load_pairs",
    "to_examples",
]

#: Whole sources kept out of training and of every choice: other domains
#: (biomedical citations, dialogue), other error types.
HELD_OUT = ("citation-integrity", "begin")
#: Documents kept out of the synthetic pairs: the FEVER test claims are about them.
EXCLUDED_TITLES = frozenset({"Aristotle"})

#: Pairs per source for training the cross-encoder (train split; the rest is
#: left out to keep one pass near an hour on 2 cores). Long-evidence sets are
#: taken whole: they are closest to what ``ceg check`` sees.
TRAIN_CAPS = {
    "vitaminc": 5000,
    "fever-nli": 2500,
    "mnli": 1500,
    "esnli": 800,
    "scifact": 10**6,
    "summedits": 10**6,
    "factcheck-gpt": 10**6,
    "frank": 10**6,
    "factcg": 10**6,
    "synthetic": 4000,
}
#: Pairs per source for fitting and calibrating the combiner (val split).
VAL_CAPS = {name: 600 for name in TRAIN_CAPS}


def corpus_passages(path: Path, *, max_words: int = 100) -> Iterator[Passage]:
    """The ~100-word passages of a corpus source, as the index builder cuts them."""
    for doc in iter_documents(path):
        if doc.title in EXCLUDED_TITLES:
            continue
        for chunk in chunk_document(doc, max_words):
            yield Passage(doc.id, doc.title, chunk.text)


def load_pairs(
    train_root: Path,
    *,
    corpus: Path | None,
    split: str,
    caps: dict[str, int],
    seed: int = 0,
) -> list[Pair]:
    """Pairs of ``split`` from every source in ``caps`` (held-out sources are refused).

    A source with more pairs than its cap is sampled at random (by ``seed``),
    by pair, within the split; a cap is a number of pairs.
    """
    out: list[Pair] = []
    rng = random.Random(seed)
    for name, cap in caps.items():
        if name in HELD_OUT:
            raise ValueError(f"{name} is held out as a test-only source")
        if name == "synthetic":
            if corpus is None:
                continue
            pairs: Iterable[Pair] = make_pairs(corpus_passages(corpus), seed=seed)
        else:
            pairs = read_source(name, train_root)
        chosen = [p for p in pairs if split_of(p.group) == split]
        if len(chosen) > cap:
            chosen = rng.sample(chosen, cap)
        out.extend(chosen)
    return out


def held_out_pairs(train_root: Path) -> dict[str, list[Pair]]:
    """Every pair of the test-only sources, both splits."""
    return {name: list(read_source(name, train_root)) for name in HELD_OUT}


def to_examples(pairs: Iterable[Pair]) -> list[tuple[str, str, int]]:
    """(claim, evidence window, label) for the cross-encoder."""
    return [(p.claim, select_window(p.claim, [p.evidence]).text, p.label) for p in pairs]


def counts(pairs: Iterable[Pair]) -> dict[str, dict[str, int]]:
    c: dict[str, dict[str, int]] = defaultdict(lambda: {"supported": 0, "not_supported": 0})
    for p in pairs:
        c[p.source]["supported" if p.label else "not_supported"] += 1
    return {k: dict(v) for k, v in sorted(c.items())}


assert set(HELD_OUT) <= set(SOURCES)
