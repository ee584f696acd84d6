"""``ceg models list|pull``: aliases, the cache read from its layout, clean failures.

No test reaches the network: the cache is a folder laid out as huggingface_hub
lays it out (``models--OWNER--NAME/{blobs,refs,snapshots}``), and pull's failures
are produced with ``HF_HUB_OFFLINE=1`` and an endpoint on a closed loopback port.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ceg_cli import hub
from ceg_cli.errors import BackendError, UsageError

REV = "0123456789abcdef0123456789abcdef01234567"


def fake_repo(root: Path, repo: str, files: dict[str, bytes], rev: str = REV) -> Path:
    """A cached snapshot: blobs by name, snapshot links to them, refs/main naming it."""
    folder = root / ("models--" + repo.replace("/", "--"))
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(rev)
    snap = folder / "snapshots" / rev
    snap.mkdir(parents=True, exist_ok=True)
    for i, (name, data) in enumerate(files.items()):
        blob = folder / "blobs" / f"blob{i}{name.replace('.', '')}"
        blob.write_bytes(data)
        os.symlink(os.path.relpath(blob, snap), snap / name)
    return snap


def clean_env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_HUB_CACHE=str(cache), **extra)
    return env


def run_ceg(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from ceg_cli.cli.main import run; run()", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_aliases_resolve_and_name_the_cards_licences() -> None:
    assert hub.resolve("minicheck-roberta-large") == "lytang/MiniCheck-RoBERTa-Large"
    assert hub.resolve("MiniCheck-Flan-T5-Large") == "lytang/MiniCheck-Flan-T5-Large"
    assert hub.resolve("hhem-2.1-open") == "vectara/hallucination_evaluation_model"
    assert hub.resolve("someone/else") == "someone/else"
    licences = {m.alias: m.licence for m in hub.ALIASES}
    assert licences["minicheck-deberta-v3-large"] == "MIT"
    assert licences["hhem-2.1-open"] == "Apache-2.0"
    assert licences["all-MiniLM-L6-v2"] == "Apache-2.0"


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub.cache_dir() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert hub.cache_dir() == tmp_path / "hub"


def test_list_reads_the_cache_layout(tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    fake_repo(
        cache,
        "lytang/MiniCheck-RoBERTa-Large",
        {"config.json": b"{}", "model.safetensors": b"x" * 5000},
    )
    # A snapshot a failed download left: a config and no weights is not "cached".
    fake_repo(cache, "lytang/MiniCheck-Flan-T5-Large", {"config.json": b"{}"})
    fake_repo(cache, "someone/other-model", {"config.json": b"{}", "pytorch_model.bin": b"y"})
    result = run_ceg(["models", "list", "--json"], clean_env(cache, HF_HUB_OFFLINE="1"))
    assert result.returncode == 0, result.stderr
    rows = {r["repo"]: r for r in json.loads(result.stdout)["models"]}
    assert json.loads(result.stdout)["cache"] == str(cache)
    roberta = rows["lytang/MiniCheck-RoBERTa-Large"]
    assert roberta["cached"] and roberta["alias"] == "minicheck-roberta-large"
    assert roberta["size_bytes"] == 5002 and roberta["licence"] == "MIT"
    assert not rows["lytang/MiniCheck-Flan-T5-Large"]["cached"]
    assert not rows["vectara/hallucination_evaluation_model"]["cached"]
    assert rows["someone/other-model"]["cached"] and rows["someone/other-model"]["alias"] is None
    table = run_ceg(["models", "list"], clean_env(cache))
    assert table.returncode == 0
    line = next(x for x in table.stdout.splitlines() if x.startswith("minicheck-roberta-large"))
    assert "lytang/MiniCheck-RoBERTa-Large" in line and " cached " in line and "5.0 KB" in line


@pytest.mark.parametrize(
    "extra",
    [{"HF_HUB_OFFLINE": "1"}, {"HF_ENDPOINT": "http://127.0.0.1:9"}],
    ids=["offline", "unreachable"],
)
def test_pull_without_the_hub_fails_in_one_line(tmp_path: Path, extra: dict[str, str]) -> None:
    cache = tmp_path / "hub"
    result = run_ceg(
        ["models", "pull", "--quiet", "minicheck-roberta-large"], clean_env(cache, **extra)
    )
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "lytang/MiniCheck-RoBERTa-Large" in lines[0] and str(cache) in lines[0]
    assert not (
        cache / "models--lytang--MiniCheck-RoBERTa-Large" / "snapshots"
    ).exists() or not any(
        (cache / "models--lytang--MiniCheck-RoBERTa-Large" / "snapshots").iterdir()
    )


def test_pull_of_a_bad_name_is_a_usage_error(tmp_path: Path) -> None:
    result = run_ceg(["models", "pull", "not a/model/name"], clean_env(tmp_path / "hub"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: ceg models pull not a/model/name: not a model name (use an alias or OWNER/NAME)"
    ]


def test_pull_offline_of_a_cached_model_gives_its_snapshot(tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    snap = fake_repo(
        cache, "lytang/MiniCheck-RoBERTa-Large", {"config.json": b"{}", "model.safetensors": b"w"}
    )
    result = run_ceg(
        ["models", "pull", "-q", "minicheck-roberta-large"], clean_env(cache, HF_HUB_OFFLINE="1")
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == snap


def test_a_failed_pull_leaves_no_snapshot_a_judge_would_load(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # A revision that was there before the pull is not ceg's to remove.
    old = fake_repo(cache, "a/model", {"config.json": b"{}"}, rev="1" * 40)

    def half_download(repo_id: str, cache_dir: str, **_: object) -> str:
        # What a download cut off after the config leaves: a whole blob, a linked
        # config, and the weights still ``.incomplete``.
        snap = fake_repo(Path(cache_dir), repo_id, {"config.json": b"{}"}, rev="2" * 40)
        (snap.parent.parent / "blobs" / "weights.incomplete").write_bytes(b"partial")
        raise ConnectionError("connection reset")

    with pytest.raises(BackendError, match=r"a/model.*cannot be reached.*connection reset"):
        hub.pull("a/model", progress=False, downloader=half_download)
    assert old.is_dir()
    assert not (cache / "models--a--model" / "snapshots" / ("2" * 40)).exists()
    assert hub.cached_snapshot("a/model") is None


def test_pull_maps_a_missing_repository_to_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from huggingface_hub.errors import RepositoryNotFoundError

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def missing(**_: object) -> str:
        from unittest import mock

        response = mock.Mock(headers={}, status_code=404)
        raise RepositoryNotFoundError("404 Repository Not Found", response=response)

    with pytest.raises(UsageError, match=r"no/such.*no such model on the hub") as info:
        hub.pull("no/such", progress=False, downloader=missing)
    assert info.value.exit_status == 2


def test_pulling_hhem_also_pulls_its_foundations_tokenizer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls: list[dict[str, object]] = []

    def download(**kwargs: object) -> str:
        calls.append(kwargs)
        repo = str(kwargs["repo_id"])
        files = {"config.json": b"{}"}
        if "allow_patterns" not in kwargs:
            files["model.safetensors"] = b"w"
        return str(fake_repo(Path(str(kwargs["cache_dir"])), repo, files))

    hub.pull("hhem-2.1-open", progress=False, downloader=download)
    assert [c["repo_id"] for c in calls] == [
        "vectara/hallucination_evaluation_model",
        "google/flan-t5-base",
    ]
    assert "tokenizer*" in calls[1]["allow_patterns"]  # type: ignore[operator]
    assert hub.cached_snapshot("google/flan-t5-base", weights=False) is not None
    assert hub.cached_snapshot("google/flan-t5-base") is None  # no weights were pulled
