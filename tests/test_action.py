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
    # Issue 56: else the newest index of the same settings, which the build step updates.
    assert restore["with"]["restore-keys"] == "${{ steps.key.outputs.restore }}"
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


@pytest.mark.parametrize("value", ["value", "", "--lexical", "--evidence=both", "-1"])
def test_every_script_call_of_the_action_parses_with_the_script(value: str) -> None:
    """Each step's command line, with its variables filled in, is one the script takes,
    whatever an input holds: a value that starts with a dash is a value (issue 44
    item 10: ``--build-args "--lexical"`` was "expected one argument")."""
    module = _script_module()
    calls = []
    for step in _action()["runs"]["steps"]:
        script = step.get("run", "").replace("\\\n", " ")  # shell line continuations
        for line in re.findall(r'python "\$GITHUB_ACTION_PATH/scripts/ceg_action.py"([^\n]*)',
                               script):
            words = shlex.split(line)
            filled = [re.sub(r"\$\w+", value, w) for w in words]
            args = module.parse_args(filled)
            if "build_args" in vars(args):
                assert args.build_args == value
            if "extra_args" in vars(args):
                assert args.extra_args == value and args.judge == value
            calls.append(filled[0])
    assert sorted(calls) == ["build", "check", "key"]


def _documented_forms(input_name: str) -> list[str]:
    """The values of an input that action.yml's description and docs/ci.md show."""
    text = _action()["inputs"][input_name]["description"]
    ci = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    text += "".join(line for line in ci.splitlines() if line.startswith(f"| `{input_name}`"))
    paragraph = ci.split("`build-args` and `extra-args` are split", 1)[1].split("\n\n", 1)[0]
    text += paragraph.replace("\n", " ")
    forms = [f.removeprefix(f"{input_name}: ") for f in re.findall(r"`([^`]+)`", text)]
    return [f for f in forms if f.startswith("--") and f != "--option=value"]


FORMS = {
    "build-args": ["--lexical", "--chunk-words 80", "--chunk-words=80 --no-lexical"],
    "extra-args": ["--quiet", "--evidence=both", "--top-k 3 --evidence both",
                   "--citation-pattern '\\[(\\d+)\\]'"],
}


@pytest.mark.parametrize("input_name", sorted(FORMS))
def test_every_form_the_docs_show_reaches_ceg_as_written(
    input_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build-args and extra-args in each form docs/ci.md and action.yml show (and the
    forms issue 44 item 10 found refused) end the ceg command the script runs."""
    module = _script_module()
    documented = _documented_forms(input_name)
    assert documented, "the docs show no form of " + input_name
    ran: list[list[str]] = []
    monkeypatch.setattr(module, "ceg_command", lambda: ["ceg"])
    monkeypatch.setattr(module.subprocess, "run",
                        lambda command, **_: ran.append(command) or subprocess.CompletedProcess(
                            command, 0))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("A.", encoding="utf-8")
    (tmp_path / "answers.jsonl").write_text('{"response": "A."}\n', encoding="utf-8")
    for form in dict.fromkeys(documented + FORMS[input_name]):
        ran.clear()
        if input_name == "build-args":
            (tmp_path / ".index.ceg-action").unlink(missing_ok=True)
            code = module.main(["build", "--index", "index", "--sources", "kb", "--key", "k",
                                "--build-args", form])
        else:
            code = module.main(["check", "--responses", "answers.jsonl", "--index", "index",
                                "--extra-args", form])
        assert code == 0
        [command] = ran
        words = shlex.split(form)
        assert command[-len(words):] == words, (form, command)
    # Each option shown is one of ceg's own.
    from typer.testing import CliRunner

    from ceg_cli.cli.main import app

    group = ["index", "build"] if input_name == "build-args" else ["check"]
    help_text = CliRunner().invoke(app, [*group, "--help"], env={"COLUMNS": "200"}).output
    for form in documented + FORMS[input_name]:
        for word in shlex.split(form):
            if word.startswith("--"):
                assert word.split("=")[0] in help_text, word


def test_a_bad_argument_is_one_line(tmp_path: Path) -> None:
    for args in (["key"], ["check", "--index", "i"], ["nope"], ["key", "--index"]):
        done = _run_script(*args, cwd=tmp_path)
        assert done.returncode == 2, args
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ceg-action: "), done.stderr


def _run_script(*args: str | Path, env: dict[str, str] | None = None,
                cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, cwd=cwd, timeout=timeout)


def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _run_script("key", "--index", tmp_path / "none", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"ceg-action: index: no index at {tmp_path / 'none'} (no meta.json), and no sources "
        "to build one from"]
    done = _run_script("check", "--responses", tmp_path / "none.jsonl", "--index", tmp_path,
                       cwd=tmp_path)
    assert done.returncode == 2 and "responses:" in done.stderr
    done = _run_script("build", "--index", tmp_path / "i", cwd=tmp_path)
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

    first = _run_script("key", "--index", index, "--sources", docs, env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    key = _outputs(outputs)["key"]
    assert re.fullmatch(r"ceg-index-v3-[A-Za-z]+-\w+-py3\.\d+-[0-9a-f]{16}-[0-9a-f]{40}", key)
    assert _outputs(outputs)["stamp"] == ".index.ceg-action"
    assert _outputs(outputs)["index"] == str(index)  # the cache and build steps use it
    same = _run_script("key", "--index", index, "--sources", docs, cwd=tmp_path)
    assert same.stdout.splitlines()[:2] == [f"index={index}", f"key={key}"]
    other = _run_script("key", "--index", index, "--sources", docs, "--build-args",
                        "--chunk-words 50", cwd=tmp_path)
    assert f"key={key}\n" not in other.stdout  # another build, another cache entry

    built = _run_script("build", "--index", index, "--sources", docs, env=env, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert (index / "meta.json").is_file() and _outputs(outputs)["built"] == "true"
    assert json.loads((tmp_path / ".index.ceg-action").read_text())["key"] == key
    again = _run_script("build", "--index", index, "--sources", docs, "--key", key, env=env,
                        cwd=tmp_path)
    assert "not rebuilt" in again.stdout and _outputs(outputs)["built"] == "false"
    # Issue 44 item 7: a source is added; the index there (restored under an older key)
    # is not taken for the new sources' index, and the new one is stamped in its place.
    (docs / "seine.md").write_text("# Seine\n\nThe Seine flows through Paris.\n",
                                   encoding="utf-8")
    _run_script("key", "--index", index, "--sources", docs, env=env, cwd=tmp_path)
    new_key = _outputs(outputs)["key"]
    assert new_key != key
    rebuilt = _run_script("build", "--index", index, "--sources", docs, "--key", new_key,
                          env=env, cwd=tmp_path)
    assert rebuilt.returncode == 0, rebuilt.stderr
    # Issue 56: the same settings, so the index is updated per document, not rebuilt.
    assert "is updated: its sources changed since it was built" in rebuilt.stdout
    assert "1 document added, 0 changed, 0 removed, 3 unchanged; 1 passage embedded" \
        in rebuilt.stderr
    assert _outputs(outputs)["built"] == "true"
    meta = json.loads((index / "meta.json").read_text(encoding="utf-8"))
    assert meta["counts"]["documents"] == 4, meta["counts"]
    again = _run_script("build", "--index", index, "--sources", docs, "--key", new_key,
                        env=env, cwd=tmp_path)
    assert "not rebuilt" in again.stdout and _outputs(outputs)["built"] == "false"
    # A committed index is keyed by its own digest.
    ready = _run_script("key", "--index", index, cwd=tmp_path).stdout.splitlines()[1]
    assert ready.startswith("key=ceg-index-v3-") and ready != f"key={new_key}"

    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    report = tmp_path / "ceg-report" / "report.html"
    gate = _run_script(
        "check", "--responses", responses, "--index", index, "--judge", "offline",
        "--max-nonfactual-rate", "", "--max-nonfactual-responses", "0",
        "--report", report, "--out", tmp_path / "ceg-report" / "checked.jsonl",
        "--junit", tmp_path / "ceg-report" / "junit.xml", "--summary", summary,
        "--extra-args", "--top-k 3", env=env, cwd=tmp_path)
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
                      "--max-nonfactual-responses", "0", env=env, cwd=tmp_path)
    assert now.returncode == 1  # outside the action: the step fails by ceg's code
    passed = _run_script("check", "--responses", responses, "--index", index, env=env,
                         cwd=tmp_path)
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
    built = _run_script("build", "--index", index, "--sources", sample, env=env, timeout=1800,
                        cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert _outputs(outputs)["built"] == "true"
    meta = json.loads((index / "meta.json").read_text(encoding="utf-8"))
    assert meta["counts"]["chunks"] > 5000, meta["counts"]

    out = tmp_path / "report" / "checked.jsonl"
    summary = tmp_path / "summary.md"
    gate = _run_script(
        "check", "--responses", repo / "sample_data" / "responses.jsonl", "--index", index,
        "--max-nonfactual-rate", "0.1", "--out", out, "--summary", summary,
        "--report", tmp_path / "report" / "report.html", env=env, timeout=900, cwd=tmp_path)
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


# --- issue 44 items 7 and 25: the cache key, the index it restores, the paths ---------


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The script's module in a workspace at ``tmp_path``, with a stand-in for ceg
    whose ``index build`` writes a meta.json (each build another) and is recorded."""
    module = _script_module()
    builds: list[list[str]] = []

    def run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        if command[1:3] == ["index", "build"]:
            builds.append(command)
            index = Path(command[command.index("--index") + 1])
            index.mkdir(parents=True, exist_ok=True)
            (index / "meta.json").write_text(json.dumps({"build": len(builds)}))
        return subprocess.CompletedProcess(command, 0, "ceg 0.1.0\n", "")

    monkeypatch.setattr(module, "ceg_command", lambda: ["ceg"])
    monkeypatch.setattr(module.subprocess, "run", run)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    module.builds = builds
    return module


def _key(script: Any, *sources: str, build_args: str = "") -> str:
    return script.index_key(Path("index"), [Path(s) for s in sources], build_args)


def test_a_restored_index_of_other_sources_is_rebuilt(
    script: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 44 item 7: an index at the target is trusted only when its stamp says it
    was built under this very key and it is unchanged since."""
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("Alpha.", encoding="utf-8")
    first = _key(script, "kb")

    def build(key: str) -> str:
        capsys.readouterr()
        assert script.main(["build", "--index", "index", "--sources", "kb", "--key", key]) == 0
        return capsys.readouterr().out

    assert "built=true" in build(first) and len(script.builds) == 1
    assert "not rebuilt" in build(first) and len(script.builds) == 1
    # A source added: the new key finds the old index (as a cache entry restored by
    # an older key, a checkout or a self-hosted runner's workspace would leave it).
    (kb / "b.md").write_text("Beta.", encoding="utf-8")
    second = _key(script, "kb")
    assert second != first
    out = build(second)
    # Issue 56: the same settings, other contents: updated per document, not rebuilt.
    assert "is updated: its sources changed since it was built" in out
    assert "built=true" in out and len(script.builds) == 2
    assert script.builds[-1][-2:] == ["--update", "--prune"]
    # Other settings (a build option): never updated into, rebuilt.
    other = _key(script, "kb", build_args="--lexical")
    assert not other.startswith(script.settings_prefix([Path("kb")], ""))
    capsys.readouterr()
    assert script.main(["build", "--index", "index", "--sources", "kb", "--key", other,
                        "--build-args", "--lexical"]) == 0
    assert "is rebuilt: it was built from other sources or options" in capsys.readouterr().out
    assert "--update" not in script.builds[-1]
    script.builds.pop()
    build(second)
    script.builds.pop()
    assert "not rebuilt" in build(second) and len(script.builds) == 2
    # The index changed behind the stamp (built again by hand): rebuilt.
    (tmp_path / "index" / "meta.json").write_text('{"by": "hand"}')
    assert "it changed since it was built from them" in build(second)
    assert len(script.builds) == 3
    # An index with no stamp beside it (committed, or cached by an older action).
    (tmp_path / ".index.ceg-action").unlink()
    assert "says what it was built from" in build(second) and len(script.builds) == 4
    # A failed build leaves no stamp that would vouch for the index.
    (tmp_path / ".index.ceg-action").unlink()
    script.subprocess.run = lambda command, **_: subprocess.CompletedProcess(command, 3)
    capsys.readouterr()
    assert script.main(["build", "--index", "index", "--sources", "kb", "--key", second]) == 3
    assert not (tmp_path / ".index.ceg-action").exists()


def test_cache_keys_frame_names_and_contents(script: Any, tmp_path: Path) -> None:
    """Issue 44 item 25: inputs that fed the old digest the same bytes get other keys."""
    (tmp_path / "one" / "a").mkdir(parents=True)
    (tmp_path / "one" / "a" / "f").write_bytes(b"X")
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "a").write_bytes(b"f\0X")
    (tmp_path / "three").mkdir()
    (tmp_path / "three" / "x").write_bytes(b"1")
    (tmp_path / "three" / "y").write_bytes(b"2")
    (tmp_path / "four").mkdir()
    (tmp_path / "four" / "x").write_bytes(b"1\0y\x002")
    os.chdir(tmp_path / "one")
    folder = _key(script, "a")
    os.chdir(tmp_path / "two")
    assert _key(script, "a") != folder
    os.chdir(tmp_path / "three")
    both = _key(script, "x", "y")
    os.chdir(tmp_path / "four")
    assert _key(script, "x") != both
    # The build's options and a source's name count apart from the contents.
    assert _key(script, "x", build_args="--lexical") != _key(script, "x")


def test_cache_keys_name_the_runners_os_and_python(
    script: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.md").write_text("Alpha.", encoding="utf-8")
    key = _key(script, "a.md")
    import platform

    python = f"py{sys.version_info[0]}.{sys.version_info[1]}"
    assert key.startswith(f"ceg-index-v3-{platform.system()}-{platform.machine()}-{python}-")
    monkeypatch.setattr(script.platform, "system", lambda: "Windows")
    other = _key(script, "a.md")
    assert other.startswith("ceg-index-v3-Windows-") and other[-40:] != key[-40:]


@pytest.mark.parametrize("option", ["--index", "--report", "--out", "--junit"])
@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("ceg-report/report.html\n/home/runner/.ssh", "holds '\\n'"),
        ("ceg-report/*.html", "holds '*'"),
        ("!ceg-report", "a leading '!'"),
        ("../elsewhere", "is outside the workspace"),
        ("/etc/ceg", "is outside the workspace"),
        ("link/x", "is outside the workspace"),
    ],
)
def test_paths_the_cache_and_upload_steps_take_are_confined(
    tmp_path: Path, option: str, value: str, says: str
) -> None:
    """Issue 44 item 25: index, report, out and junit also go into the multi-line
    ``path:`` of actions/cache and actions/upload-artifact: one plain path inside the
    workspace, or one line and exit 2 before anything runs."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "link").symlink_to(tmp_path)
    (work / "answers.jsonl").write_text('{"response": "A."}\n', encoding="utf-8")
    paths = {"--index": "index", "--report": "r.html", "--out": "o.jsonl", "--junit": "j.xml"}
    paths[option] = value
    calls = [["check", "--responses", "answers.jsonl", *(w for o, v in paths.items()
                                                            for w in (o, v))]]
    if option == "--index":
        calls += [["key", "--index", value, "--sources", "answers.jsonl"],
                  ["build", "--index", value, "--sources", "answers.jsonl"]]
    for call in calls:
        done = _run_script(*call, cwd=work, env={"GITHUB_WORKSPACE": str(work)})
        assert done.returncode == 2, (call, done.stdout)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"ceg-action: {option} ")
        assert says in lines[0]
    assert sorted(p.name for p in work.iterdir()) == ["answers.jsonl", "link"]


def test_the_workspace_itself_is_no_index(tmp_path: Path) -> None:
    done = _run_script("key", "--index", ".", "--sources", "x", cwd=tmp_path)
    assert done.returncode == 2 and "is the workspace itself" in done.stderr


def test_the_cache_steps_keep_the_stamp_with_the_index() -> None:
    steps = _action()["runs"]["steps"]
    for step in (s for s in steps if "actions/cache/" in s.get("uses", "")):
        paths = step["with"]["path"].splitlines()
        assert paths[:2] == ["${{ steps.key.outputs.index }}",
                             "${{ steps.key.outputs.stamp }}"]
    build = next(s for s in steps if s["name"] == "Build the index")
    assert build["env"]["CEG_KEY"] == "${{ steps.key.outputs.key }}"
    assert '--key "$CEG_KEY"' in build["run"]


def test_the_action_installs_the_torch_the_readme_pins() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    setup = (REPO / "scripts" / "setup").read_text(encoding="utf-8")
    [pinned] = set(re.findall(r"torch==([\d.]+)", readme))
    assert f'pip install "torch=={pinned}"' in setup
    install = next(s for s in _action()["runs"]["steps"] if s["name"] == "Install ceg")
    [line] = [w for w in install["run"].splitlines() if "torch" in w]
    words = shlex.split(line)
    assert f"torch=={pinned}" in words
    assert words[words.index("--index-url") + 1] == "https://download.pytorch.org/whl/cpu"
    ci = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    assert f"`torch=={pinned}`" in ci
