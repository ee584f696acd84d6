"""Shared fixtures: the real embedding model, a small real index, the CLI runner.

The model is loaded once per session and the mini index is built once per
session; tests that change an index work on a copy (``index_copy``).
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
from ray_harness import cluster  # noqa: F401 - the two-node Ray cluster, for any module
from typer.testing import CliRunner, Result

from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.dense.embedding import Embedder, load_embedder

DATA = Path(__file__).parent / "data"
WIKI = DATA / "wiki"
#: 4 articles (Aristotle, Actrius, Animalia (book), Alain Connes), 2 redirects
#: and a namespace-4 redirect, cut byte for byte from the enwiki sample.
MINI_WIKI = WIKI / "enwiki-mini.xml.bz2"


def need_extra(module: str, extra: str) -> object:
    """``module``, or the test skipped with a reason naming the optional extra it comes
    with: ``pip install -e '.[dev]'`` alone runs the fast suite (``scripts/setup``
    installs every extra, so nothing is skipped there)."""
    return pytest.importorskip(
        module, reason=f"needs {module}, from the '{extra}' extra: pip install -e '.[{extra}]'"
    )


class HashEmbedder:
    """A fake model for plumbing tests: a fixed pseudo-random unit vector per text.

    Distinct texts get (almost surely) distinct vectors and equal texts equal
    ones, which is all the builder and the stores care about; it costs nothing,
    so tests can push thousands of passages through the builder.
    """

    def __init__(self, dimension: int = 384, name: str = "test/hash-embedder") -> None:
        self.name = name
        self.dimension = dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            # sha256, not hash(): str hashes are salted per process.
            seed = hashlib.sha256(text.encode("utf-8")).digest()
            rng = np.random.default_rng(int.from_bytes(seed[:8], "little"))
            vec = rng.standard_normal(self.dimension).astype(np.float32)
            out[row] = vec / np.linalg.norm(vec)
        return out


@pytest.fixture(autouse=True)
def _no_project_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads a project file of the machine by accident: ceg (the CLI in-process
    or in a subprocess, a Checker, the pytest plugin) looks for ceg.toml or [tool.ceg]
    from the working directory up to the repository's root, and a developer may keep
    one in the checkout or above it. ``CEG_NO_CONFIG`` turns the search off in this
    process and every process it starts; a test of the project file itself takes it
    away (tests/test_config.py), in a folder of its own marked as a repository root."""
    monkeypatch.setenv("CEG_NO_CONFIG", "1")
    monkeypatch.delenv("CEG_CONFIG", raising=False)


@pytest.fixture(scope="session")
def mini_wiki() -> Path:
    """The real mini dump (see tests/data/wiki/README.md)."""
    return MINI_WIKI


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real default model (all-MiniLM-L6-v2), loaded once per session."""
    return load_embedder()


@pytest.fixture(scope="session")
def mini_index(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    """An index of the mini dump with default settings, built once; do not modify it."""
    target = tmp_path_factory.mktemp("mini-index") / "index"
    build_index([MINI_WIKI], target, BuildOptions(), embedder=embedder)
    return target


@pytest.fixture
def index_copy(mini_index: Path, tmp_path: Path) -> Path:
    """A private copy of the mini index that a test may change or break."""
    target = tmp_path / "index"
    shutil.copytree(mini_index, target)
    return target


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    """A free fake model of dimension 384."""
    return HashEmbedder()


@pytest.fixture
def make_hash_embedder() -> Callable[..., HashEmbedder]:
    """``make_hash_embedder(dimension=8, name=...)``: a fake model of another shape."""
    return HashEmbedder


CliRun = Callable[..., Result]


@pytest.fixture
def fake_models(
    monkeypatch: pytest.MonkeyPatch, make_hash_embedder: Callable[..., HashEmbedder]
) -> None:
    """Every model name loads ``HashEmbedder``, for building, searching and checking."""
    import ceg_cli.index.build.builder
    import ceg_cli.index.store

    def load(name: str | None = None, **kwargs: object) -> Embedder:
        return make_hash_embedder()

    monkeypatch.setattr(ceg_cli.index.store, "load_embedder", load)
    monkeypatch.setattr(ceg_cli.index.build.builder, "load_embedder", load)


@pytest.fixture
def run_cli() -> CliRun:
    """Run ``ceg ARGS...`` in-process; the Result has ``stdout`` and ``stderr`` apart.

    Exceptions that escape the CLI's own error handling are re-raised, so a bug
    fails the test with its traceback instead of hiding in ``result.exception``.
    """
    from ceg_cli.cli.main import app

    def run(*args: str | Path, env: Mapping[str, str] | None = None) -> Result:
        runner = CliRunner()
        return runner.invoke(app, [str(a) for a in args], env=env, catch_exceptions=False)

    return run


@pytest.fixture(scope="session")
def hash_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mini dump indexed with ``HashEmbedder``: real passages, free vectors.

    Costs about two seconds and no model, for plumbing tests that search an
    index; searching it needs ``hash_model``. Do not modify it.
    """
    target = tmp_path_factory.mktemp("hash-index") / "index"
    build_index([MINI_WIKI], target, BuildOptions(), embedder=HashEmbedder())
    return target


@pytest.fixture
def hash_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let an opened index load ``HashEmbedder`` when its meta.json names it.

    An index loads the model it was built with by name; this maps the fake
    model's name to the fake, and leaves every other name to the real loader.
    """
    import ceg_cli.index.store

    real = ceg_cli.index.store.load_embedder
    fake_name = HashEmbedder().name

    def load(name: str | None = None, **kwargs: object) -> Embedder:
        return HashEmbedder() if name == fake_name else real(name, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ceg_cli.index.store, "load_embedder", load)
