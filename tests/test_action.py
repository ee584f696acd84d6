"""ceg's GitHub Action (issue 33 item 3): action.yml against the action metadata schema,
and scripts/ceg_action.py, which its steps call, run as the steps run it."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml  # PyYAML, installed with transformers (huggingface_hub)

REPO = Path(__file__).resolve().parent.parent
ACTION = REPO / "action.yml"
SCRIPT = REPO / "scripts" / "ceg_action.py"
CHECK_JSONSCHEMA = Path(sys.executable).with_name("check-jsonschema")


def _action() -> dict[str, Any]:
    return yaml.safe_load(ACTION.read_text(encoding="utf-8"))


def _script_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("ceg_action", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_action_yml_is_valid_action_metadata() -> None:
    # The schema check-jsonschema vendors (SchemaStore's github-action.json): offline.
    done = subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.github-actions", str(ACTION)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok -- validation done" in done.stdout


def test_a_broken_action_yml_fails_the_schema(tmp_path: Path) -> None:
    """The check itself: a composite step without a shell is refused."""
    broken = _action()
    del broken["runs"]["steps"][1]["shell"]
    path = tmp_path / "action.yml"
    path.write_text(yaml.safe_dump(broken), encoding="utf-8")
    done = subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.github-actions", str(path)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1


def test_the_action_is_composite_and_its_steps_use_its_inputs_safely() -> None:
    action = _action()
    assert action["runs"]["using"] == "composite"
    inputs = set(action["inputs"])
    assert {"responses", "index", "sources", "judge", "max-nonfactual-rate",
            "max-nonfactual-responses", "report"} <= inputs
    text = ACTION.read_text(encoding="utf-8")
    used = set(re.findall(r"inputs\.([A-Za-z0-9_-]+)", text))
    assert used <= inputs, used - inputs
    assert inputs - used == set(), "declared but never used"
    steps = action["runs"]["steps"]
    uses = [s["uses"].split("@")[0] for s in steps if "uses" in s]
    assert uses == ["actions/setup-python", "actions/cache/restore", "actions/cache/save",
                    "actions/upload-artifact"]
    for step in steps:
        # Inputs reach a shell only through env: never ${{ }} inside a script.
        assert "${{" not in step.get("run", ""), step["name"]
    # The index and models are restored and saved under the key the script computes.
    restore, save = (s for s in steps if "actions/cache/" in s.get("uses", ""))
    assert restore["with"]["key"] == save["with"]["key"] == "${{ steps.key.outputs.key }}"
    # The index is the input, else the project file's, as the key step resolves it.
    assert "${{ steps.key.outputs.index }}" in restore["with"]["path"]
    assert "${{ steps.key.outputs.index }}" in save["with"]["path"]
    # The report is uploaded even when the gate failed; the job fails last, by ceg's code.
    upload = next(s for s in steps if "upload-artifact" in s.get("uses", ""))
    assert upload["if"].startswith("always()")
    assert "${{ inputs.report }}" in upload["with"]["path"]
    last = steps[-1]
    assert last["if"].startswith("always()")
    assert last["env"]["CEG_EXIT"] == "${{ steps.check.outputs.exit-code }}"
    assert 'exit "$CEG_EXIT"' in last["run"]


def test_every_script_call_of_the_action_parses_with_the_script() -> None:
    """Each step's command line, with its variables filled in, is one the script takes."""
    parser = _script_module().parser()
    calls = []
    for step in _action()["runs"]["steps"]:
        script = step.get("run", "").replace("\\\n", " ")  # shell line continuations
        for line in re.findall(r'python "\$GITHUB_ACTION_PATH/scripts/ceg_action.py"([^\n]*)',
                               script):
            words = shlex.split(line)
            filled = [re.sub(r"\$\w+", "value", w) for w in words]
            parser.parse_args(filled)
            calls.append(filled[0])
    assert sorted(calls) == ["build", "check", "key"]


def _run_script(*args: str | Path, env: dict[str, str] | None = None,
                cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, cwd=cwd, timeout=timeout)


def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _run_script("key", "--index", tmp_path / "none")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"ceg-action: index: no index at {tmp_path / 'none'} (no meta.json), and no sources "
        "to build one from"]
    done = _run_script("check", "--responses", tmp_path / "none.jsonl", "--index", tmp_path)
    assert done.returncode == 2 and "responses:" in done.stderr
    done = _run_script("build", "--index", tmp_path / "i")
    assert done.returncode == 2 and "name the sources" in done.stderr


def _outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


@pytest.mark.slow
def test_the_action_script_builds_caches_and_checks_as_the_steps_do(tmp_path: Path) -> None:
    """The action's steps on a small index built here from three documents (the sample
    index takes minutes to build): key, build, build again from the cache, check with
    and without a gate threshold."""
    docs = tmp_path / "kb"
    docs.mkdir()
    (docs / "eiffel.md").write_text(
        "# Eiffel Tower\n\nThe Eiffel Tower is a wrought-iron lattice tower on the Champ de "
        "Mars in Paris. It was completed in 1889 for the World's Fair.\n", encoding="utf-8")
    (docs / "louvre.md").write_text(
        "# Louvre\n\nThe Louvre in Paris is the world's most-visited museum. It houses the "
        "Mona Lisa, painted by Leonardo da Vinci.\n", encoding="utf-8")
    (docs / "danube.txt").write_text(
        "The Danube is the second-longest river in Europe. It flows through Vienna and "
        "Budapest into the Black Sea.\n", encoding="utf-8")
    responses = tmp_path / "answers.jsonl"
    responses.write_text(
        json.dumps({"id": "ok", "question": "When was the Eiffel Tower completed?",
                    "response": "The Eiffel Tower was completed in 1889."}) + "\n"
        + json.dumps({"id": "bad", "question": "Where does the Danube flow?",
                      "response": "The Danube flows through Vienna. It ends in the "
                      "North Sea."}) + "\n", encoding="utf-8")
    outputs = tmp_path / "github_output"
    env = {"GITHUB_OUTPUT": str(outputs)}
    index = tmp_path / "index"

    first = _run_script("key", "--index", index, "--sources", docs, env=env)
    assert first.returncode == 0, first.stderr
    key = _outputs(outputs)["key"]
    assert re.fullmatch(r"ceg-index-v1-[0-9a-f]{40}", key)
    assert _outputs(outputs)["index"] == str(index)  # the cache and build steps use it
    assert _run_script("key", "--index", index, "--sources", docs).stdout == (
        f"index={index}\nkey={key}\n")
    other = _run_script("key", "--index", index, "--sources", docs, "--build-args",
                        "--chunk-words 50")
    assert f"key={key}\n" not in other.stdout  # another build, another cache entry

    built = _run_script("build", "--index", index, "--sources", docs, env=env)
    assert built.returncode == 0, built.stderr
    assert (index / "meta.json").is_file() and _outputs(outputs)["built"] == "true"
    again = _run_script("build", "--index", index, "--sources", docs, env=env)
    assert "not rebuilt" in again.stdout and _outputs(outputs)["built"] == "false"
    # A committed index is keyed by its own digest.
    ready = _run_script("key", "--index", index).stdout.splitlines()[-1]
    assert ready.startswith("key=ceg-index-v1-") and ready != f"key={key}"

    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    report = tmp_path / "ceg-report" / "report.html"
    gate = _run_script(
        "check", "--responses", responses, "--index", index, "--judge", "offline",
        "--max-nonfactual-rate", "", "--max-nonfactual-responses", "0",
        "--report", report, "--out", tmp_path / "ceg-report" / "checked.jsonl",
        "--junit", tmp_path / "ceg-report" / "junit.xml", "--summary", summary,
        "--extra-args", "--top-k 3", env=env,
    )
    # The step itself succeeds; the exit code is its output, for the action's last step.
    assert gate.returncode == 0, gate.stderr
    assert _outputs(outputs)["exit-code"] == "1"
    assert "--max-nonfactual-responses 0" in gate.stdout and "--top-k 3" in gate.stdout
    assert "--max-nonfactual-rate" not in gate.stdout  # an empty input is left out
    records = [json.loads(line) for line in
               (tmp_path / "ceg-report" / "checked.jsonl").read_text().splitlines()]
    assert [r["label"] for r in records] == ["factual", "nonfactual"]
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n") and "ceg" in text.lower()
    assert "North Sea" in text or "nonfactual" in text.lower()
    assert report.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert (tmp_path / "ceg-report" / "junit.xml").is_file()

    now = _run_script("check", "--responses", responses, "--index", index, "--exit-now",
                      "--max-nonfactual-responses", "0", env=env)
    assert now.returncode == 1  # outside the action: the step fails by ceg's code
    passed = _run_script("check", "--responses", responses, "--index", index, env=env)
    assert passed.returncode == 0 and _outputs(outputs)["exit-code"] == "0"


@pytest.mark.slow
def test_the_action_script_on_the_sample_index(tmp_path: Path) -> None:
    """The action's build and check steps on the sample: the sample dump indexed as
    `scripts/sample` indexes it (about four minutes on 2 cores), the sample responses
    checked with the gate, the planted errors flagged in the records and the summary."""
    repo = Path(__file__).resolve().parents[1]
    outputs = tmp_path / "github_output"
    env = {"GITHUB_OUTPUT": str(outputs)}
    index = tmp_path / "index"
    sample = repo / "sample_data" / "enwiki-sample.xml.bz2"
    # About four minutes alone on 2 cores; bounded generously for a busy machine.
    built = _run_script("build", "--index", index, "--sources", sample, env=env, timeout=1800)
    assert built.returncode == 0, built.stderr
    assert _outputs(outputs)["built"] == "true"
    meta = json.loads((index / "meta.json").read_text(encoding="utf-8"))
    assert meta["counts"]["chunks"] > 5000, meta["counts"]

    out = tmp_path / "report" / "checked.jsonl"
    summary = tmp_path / "summary.md"
    gate = _run_script(
        "check", "--responses", repo / "sample_data" / "responses.jsonl", "--index", index,
        "--max-nonfactual-rate", "0.1", "--out", out, "--summary", summary,
        "--report", tmp_path / "report" / "report.html", env=env, timeout=900)
    assert gate.returncode == 0, gate.stderr
    assert _outputs(outputs)["exit-code"] == "1"  # the planted errors fail a 10 % gate
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert len(records) == 8
    flagged = {r["id"]: [s["text"] for s in r["segments"] if s["label"] == "nonfactual"]
               for r in records.values()}
    assert any("1812" in t for t in flagged["lincoln"]), flagged["lincoln"]
    assert any("Julius Caesar" in t for t in flagged["aristotle"]), flagged["aristotle"]
    text = summary.read_text(encoding="utf-8")
    assert "nonfactual rate" in text.lower() and "lincoln" in text
