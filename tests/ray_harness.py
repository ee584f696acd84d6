"""What the Ray tests share: the fake model shipped to Ray workers, a loopback cluster.

Ray workers import classes by module name, and a worker has no ``tests/`` on
its path: ``by_value`` registers test modules (``conftest`` with its
``HashEmbedder``, a test module's own subclasses) with Ray's cloudpickle, so
their classes travel pickled by value with the objects, as a notebook's own
embedder class would.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def no_ray_auth() -> Iterator[None]:
    """Ray without token authentication (on by default in Ray 2.60), for the test clusters.

    A loopback cluster's second node would need the head's token; and one
    process's Ray sessions must agree on the mode: a driver that ran a local
    Ray with tokens loses its actors on a cluster without them.
    """
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved


def session_folders_of(pid: int) -> list[Path]:
    """The folders ceg made for the Ray that process ``pid`` started (``ray_session.connect``):
    ``/tmp/ceg-ray-*`` holding Ray's ``session_<date>_<pid>``. A process killed with SIGKILL
    cannot remove its own; its test does, knowing the pid."""
    return sorted({p.parent for p in Path("/tmp").glob(f"ceg-ray-*/session_*_{pid}")})


@contextmanager
def short_ray_temp() -> Iterator[Path]:
    """A folder for a test's Ray sessions, with the short path ceg's own Ray start uses
    (``ray_session.short_temp_dir``): under pytest's temporary folder, or any ``TMPDIR``
    of some 40 characters, Ray's socket paths pass the 107 bytes a Unix socket may have.
    Removed with what Ray wrote in it."""
    from ceg_cli.index.ray_session import short_temp_dir

    temp = short_temp_dir()
    try:
        yield temp
    finally:
        shutil.rmtree(temp, ignore_errors=True)
