"""A fast stand-in for the embedding model, and ``ceg`` run with it.

At the 35 to 65 passages/s the real model gives on this machine's 2 cores, a
million passages take 4 to 8 hours to embed; the million-passage build
(``million_build.py``) measures everything around the model (reading,
chunking, shards, kills and ``--resume``, the approximate index, memory,
opening and searching) and needs vectors that come fast and still mean
something. ``HashedWords`` gives each passage the signed feature-hashed bag
of its lower-cased words (384 dimensions, L2-normalised): texts that share
words get close vectors, so recall against exact search measures a real
neighbourhood structure, not noise. It is deterministic across processes.

Run as a script, it is the ``ceg`` command with this model known by
``NAME`` (every other model name loads as usual)::

    .venv/bin/python benchmarks/_standin.py index build DOCS --model bench/hashed-words-384
"""

from __future__ import annotations

import re
import sys
import zlib
from collections.abc import Sequence

import numpy as np

NAME = "bench/hashed-words-384"
_WORD = re.compile(r"\w+")


class HashedWords:
    """Signed feature hashing of words into ``dimension`` buckets; unit vectors."""

    def __init__(self, dimension: int = 384) -> None:
        self.name = NAME
        self.dimension = dimension
        self.backend = "torch"  # recorded in meta.json; queries need no other backend
        self._slots: dict[str, int] = {}

    def _slot(self, word: str) -> int:
        slot = self._slots.get(word)
        if slot is None:
            h = zlib.crc32(word.encode("utf-8"))
            # Bucket b with a sign from the hash's top bit: b+1 (plus) or -(b+1) (minus).
            slot = (h % self.dimension) + 1
            if h >> 31:
                slot = -slot
            self._slots[word] = slot
        return slot

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            slots = np.fromiter((self._slot(w) for w in _WORD.findall(text.lower())), np.int64)
            if len(slots):
                np.add.at(out[row], np.abs(slots) - 1, np.sign(slots).astype(np.float32))
            else:
                out[row, 0] = 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


def install() -> None:
    """Make ``NAME`` load ``HashedWords`` wherever ceg loads a model by name: in
    ``ceg_cli.index.dense.embedding`` and in the modules that import ``load_embedder`` from it."""
    import ceg_cli.index.build.builder
    import ceg_cli.index.dense.embedding
    import ceg_cli.index.store

    for module in (ceg_cli.index.dense.embedding, ceg_cli.index.store, ceg_cli.index.build.builder):
        real = module.load_embedder

        def load(name: str | None = None, *args: object, _real: object = real,
                 **kwargs: object) -> object:
            return HashedWords() if name == NAME else _real(name, *args, **kwargs)  # type: ignore[operator]

        module.load_embedder = load  # type: ignore[assignment]


if __name__ == "__main__":
    install()
    from ceg_cli.cli.main import run

    sys.argv[0] = "ceg"
    run()
