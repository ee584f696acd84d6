"""What the index writers read vectors from: a ``VectorSource``, a batch at a time.

A protocol of its own, so that the byte format (``faissfile``) and the index
types (``vectors``) both depend on it and not on each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np

__all__ = ["VectorSource"]


class VectorSource(Protocol):
    """Vectors to index, read a batch at a time: a build's shards, or an array."""

    dimension: int

    @property
    def count(self) -> int: ...

    def batches(self) -> Iterator[np.ndarray]:
        """Every vector in order, as C-contiguous float32 arrays of bounded size."""
        ...

    def take(self, ids: np.ndarray) -> np.ndarray:
        """The vectors at the sorted positions ``ids``."""
        ...
