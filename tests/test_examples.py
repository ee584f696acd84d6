"""What a user copies (issue 33 item 4): each file of examples/ runs here, offline, and
the Python blocks of docs/api.md run as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml  # PyYAML, installed with transformers (huggingface_hub)

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
CHECK_JSONSCHEMA = Path(sys.executable).with_name("check-jsonschema")


def _python_blocks(markdown: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown.read_text(encoding="utf-8"),
                      flags=re.S | re.M)


def _workflow_schema_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True, text=True, timeout=120,
    )


def _ceg_step(workflow: dict[str, Any]) -> dict[str, Any]:
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    return next(s for s in steps if s.get("id") == "ceg")


def test_the_workflow_example_is_a_valid_workflow_using_the_actions_inputs() -> None:
    example = EXAMPLES / "workflows" / "ceg.yml"
    done = _workflow_schema_check(example)
    assert done.returncode == 0, done.stdout + done.stderr
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    step = _ceg_step(yaml.safe_load(example.read_text(encoding="utf-8")))
    given = set(step["with"])
    assert given <= set(action["inputs"]), given - set(action["inputs"])
    required = {name for name, spec in action["inputs"].items() if spec.get("required")}
    assert required <= given
    assert set(action["outputs"]) >= {"exit-code"}


def test_docs_ci_shows_the_example_workflow_whole() -> None:
    ci = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    [block] = re.findall(r"^```yaml\n(.*?)^```", ci, flags=re.S | re.M)
    example = (EXAMPLES / "workflows" / "ceg.yml").read_text(encoding="utf-8")
    # The example's body, without its two lines of header comment.
    assert block == example.split("\n", 2)[2]


def test_a_broken_workflow_fails_the_schema(tmp_path: Path) -> None:
    """The check itself: a step with both run and uses is refused."""
    workflow = yaml.safe_load((EXAMPLES / "workflows" / "ceg.yml").read_text(encoding="utf-8"))
    _ceg_step(workflow)["run"] = "echo both"
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump(workflow), encoding="utf-8")
    assert _workflow_schema_check(path).returncode == 1


@pytest.mark.slow
def test_the_pytest_example_passes_as_a_user_runs_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_rag_answer=(EXAMPLES / "test_rag_answer.py").read_text(encoding="utf-8"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=3)


def _export_script(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / "check_ragas_export.py"), *map(str, args)],
        capture_output=True, text=True, timeout=300, cwd=EXAMPLES,
        env={k: v for k, v in os.environ.items() if not k.startswith("CEG_")},
    )


@pytest.mark.slow
def test_the_export_script_checks_ragas_and_deepeval_exports() -> None:
    ragas = _export_script("data/ragas_export.jsonl")
    assert ragas.returncode == 1, ragas.stderr
    lines = ragas.stdout.splitlines()
    assert lines[0] == "sample 1: factual"
    assert lines[1] == "sample 2: nonfactual"
    assert lines[2].startswith("  - 'It hangs in the Prado in Madrid.': ")
    assert lines[-1] == "1 nonfactual, 0 could not be checked"
    assert _export_script("data/ragas_export.jsonl", "--max-nonfactual", "1").returncode == 0
    deepeval = _export_script("data/deepeval_export.json")
    assert deepeval.returncode == 0, deepeval.stdout + deepeval.stderr
    assert deepeval.stdout.splitlines() == ["sample 1: factual",
                                            "0 nonfactual, 0 could not be checked"]
    bad = _export_script("data/ragas_export.jsonl", "--judge", "nosuch")
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "nosuch" in bad.stderr


@pytest.mark.slow
def test_the_python_examples_of_docs_api_run_as_written(
    mini_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """In a folder holding an index named ``index`` (the mini dump's), as the page says."""
    shutil.copytree(mini_index, tmp_path / "index")
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks(REPO / "docs" / "api.md")
    assert len(blocks) >= 6
    for n, block in enumerate(blocks, 1):
        exec(compile(block, f"docs/api.md block {n}", "exec"), {"__name__": f"api_md_{n}"})
    out = capsys.readouterr().out
    assert "nonfactual not_enough_evidence" in out
    assert "['factual', 'factual', 'error']" in out
    assert "--evidence everywhere: choose one of auto, contexts, index, both" in out
    assert "1 1 1\n" in out  # the update block: one changed, one unchanged, one embedded
