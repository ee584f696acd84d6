"""What the Ray tests share: the fake model shipped to Ray workers, a loopback cluster.

Ray workers import classes by module name, and a worker has no ``tests/`` on
its path: ``by_value`` registers test modules (``conftest`` with its
``HashEmbedder``, a test module's own subclasses) with Ray's cloudpickle, so
their classes travel pickled by value with the objects, as a notebook's own
embedder class would.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

TESTS_DIR = Path(__file__).resolve().parent


def by_value(*modules: ModuleType | str) -> None:
    """Pickle these modules' classes and functions by value for Ray (``conftest`` always)."""
    import conftest
    from ray import cloudpickle

    for module in (conftest, *modules):
        cloudpickle.register_pickle_by_value(
            sys.modules[module] if isinstance(module, str) else module
        )
