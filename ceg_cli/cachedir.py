"""Where ceg keeps what it caches: the root of the cache folder.

Every stage that caches (the LLM judge's replies, ``ceg eval``'s corpus
indexes, the ONNX exports of the embedding model) puts its entries under this
one folder; ``cacheprune`` says what the folder holds and prunes it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """Where ceg caches (eval corpora, LLM replies): ``$CEG_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/ceg``, else ``~/.cache/ceg``."""
    if os.environ.get("CEG_CACHE_DIR"):
        return Path(os.environ["CEG_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ceg"
