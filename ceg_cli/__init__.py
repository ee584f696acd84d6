"""ceg: Citation-Enhanced Generation as a batch fact-checker for LLM output.

The Python API (docs/api.md): ``from ceg_cli import Checker``. Importing the package
stays light: ``Checker`` and its companions are imported on first use, so ``ceg --help``
and every pytest run (the pytest plugin imports this package) load no model library.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: The public API; it changes only with the output's ``schema_version``.
__all__ = ["Checker", "CheckResult", "CheckedSegment", "SCHEMA_VERSION", "__version__"]

_LAZY = {"Checker", "CheckResult", "CheckedSegment", "SCHEMA_VERSION"}


def __getattr__(name: str) -> Any:
    # importlib, not "from .api import": the import is deferred to first use, and the
    # package root (floor 0 of tests/test_imports.py) only re-exports the API's names;
    # type checkers read them from __init__.pyi.
    if name in _LAZY:
        return getattr(importlib.import_module(".api", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
