"""The project file (issue 43 item 2): ``ceg.toml`` or ``[tool.ceg]`` pins a team's
checker for the CLI, the Python API, the pytest plugin and the Action alike.

Each test works in a folder of its own marked as a repository's root (a ``.git``
folder), where the search for the file stops, and takes away the ``CEG_NO_CONFIG``
that every other test runs with (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import typer

from ceg_cli import config as project
from ceg_cli.errors import CegError, UsageError

RECORD = {"id": "r1", "question": "When was the Eiffel Tower completed?",
          "response": "The Eiffel Tower was completed in 1925.",
          "contexts": ["The Eiffel Tower was completed in 1889 for the World's Fair."]}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository's root, the working directory, with no project file yet."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    monkeypatch.chdir(root)
    monkeypatch.delenv("CEG_NO_CONFIG", raising=False)
    for name in ("CEG_TOP_K", "CEG_THRESHOLD", "CEG_QUERY", "CEG_RETRIEVAL", "CEG_INDEX",
                 "CEG_CONTEXTS_RETRIEVAL"):
        monkeypatch.delenv(name, raising=False)
    return root


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _show(run_cli: Any, *words: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = run_cli("config", "show", "--json", *words, env=env)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _error(result: Any) -> str:
    lines = result.stderr.splitlines()
    assert result.exit_code == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0][len("error: "):]


# -- where it is found --------------------------------------------------------------


def test_the_nearest_file_wins_and_the_search_stops_at_the_repository(repo: Path) -> None:
    deep = repo / "a" / "b"
    deep.mkdir(parents=True)
    assert project.search(deep) is None
    # Above the repository's root: never read from inside it.
    _write(repo.parent / "ceg.toml", "top_k = 9\n")
    assert project.search(deep) is None
    top = _write(repo / "ceg.toml", "top_k = 2\n")
    assert project.search(deep) == top
    # A pyproject.toml without [tool.ceg] is passed over; one with it is a project file.
    _write(repo / "a" / "pyproject.toml", "[project]\nname = 'x'\n[tool.ruff]\nline-length = 99\n")
    assert project.search(deep) == top
    nearer = _write(repo / "a" / "b" / "pyproject.toml", "[tool.ceg]\ntop_k = 3\n")
    assert project.search(deep) == nearer  # the nearer folder wins, whatever the kind
    # In one folder, ceg.toml wins over pyproject.toml.
    same = _write(deep / "ceg.toml", "top_k = 4\n")
    assert project.search(deep) == same


def test_without_a_repository_the_search_goes_to_the_filesystem_root(tmp_path: Path) -> None:
    folder = tmp_path / "no-repo" / "x"
    folder.mkdir(parents=True)
    found = _write(tmp_path / "no-repo" / "ceg.toml", "")
    assert project.search(folder) == found


def test_variables_name_the_file_or_turn_it_off(
    repo: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Any
) -> None:
    _write(repo / "ceg.toml", "top_k = 2\n")
    other = _write(repo / "other.toml", "top_k = 3\n")
    assert project.find() == repo / "ceg.toml"
    assert _show(run_cli, "check")["commands"]["check"]["top_k"]["value"] == 2
    monkeypatch.setenv("CEG_CONFIG", str(other))
    assert project.find() == other
    assert _show(run_cli, "check")["commands"]["check"]["top_k"]["value"] == 3
    # The command line wins over the variables.
    values = _show(run_cli, "check", "--config", str(repo / "ceg.toml"))["commands"]["check"]
    assert values["top_k"]["value"] == 2
    values = _show(run_cli, "check", "--no-config")["commands"]["check"]
    assert values["top_k"] == {"value": 5, "source": "default", "from": None}
    monkeypatch.setenv("CEG_NO_CONFIG", "1")
    assert project.find() is None
    result = run_cli("config", "show", "check")
    assert _error(result) == "$CEG_CONFIG and $CEG_NO_CONFIG are both set: unset one"
    monkeypatch.delenv("CEG_CONFIG")
    assert _show(run_cli, "check")["commands"]["check"]["top_k"]["source"] == "default"
    assert _show(run_cli, "check", "--config", str(other))["commands"]["check"]["top_k"][
        "value"] == 3
    src = _write(repo / "r.jsonl", json.dumps(RECORD) + "\n")
    assert _error(run_cli("check", src, "--config", str(other), "--no-config")) == (
        "--config and --no-config: give one of them")


# -- precedence and tables -----------------------------------------------------------


def test_flag_then_variable_then_file_then_default(repo: Path, run_cli: Any) -> None:
    _write(repo / "ceg.toml", 'top_k = 2\nthreshold = 0.5\nquery = "segment"\n'
                              '[check]\nmax_nonfactual_rate = 0.25\n')
    check = _show(run_cli, "check", "--top-k", "7",
                  env={"CEG_TOP_K": "6", "CEG_THRESHOLD": "0.4"})["commands"]["check"]
    where = f"{repo / 'ceg.toml'}"
    assert check["top_k"] == {"value": 7, "source": "flag", "from": "--top-k"}
    assert check["threshold"] == {"value": 0.4, "source": "env", "from": "CEG_THRESHOLD"}
    assert check["query"] == {"value": "segment", "source": "file", "from": where}
    assert check["max_nonfactual_rate"] == {"value": 0.25, "source": "file",
                                            "from": f"{where} [check]"}
    assert check["retrieval"] == {"value": "dense", "source": "default", "from": None}
    text = run_cli("config", "show", "check", "--top-k", "7").stdout.splitlines()
    assert text[0] == f"project file: {where}"
    assert text[1] == "ceg check"
    assert any(line.split() == ["top_k", "7", "flag", "--top-k"] for line in text)
    assert any(line.split() == ["query", "segment", "file", where] for line in text)


def test_a_table_applies_to_its_commands_and_the_nearer_table_wins(
    repo: Path, run_cli: Any
) -> None:
    _write(repo / "ceg.toml", 'top_k = 2\njudge = "verifier"\n[check]\ntop_k = 3\n'
                              '[index]\nindex = "kb/index"\n[index.build]\nchunk_words = 80\n'
                              'index = "kb/build-here"\n')
    shown = _show(run_cli)["commands"]
    assert shown["check"]["top_k"]["value"] == 3  # [check] over the top
    assert shown["eval"]["top_k"]["value"] == 2  # the top, for every command with --top-k
    assert shown["index search"]["top_k"]["value"] == 2
    assert shown["eval"]["judge"]["value"] == "verifier"
    # [index] for every index command, [index.build] over it; paths from the file's folder.
    assert shown["index info"]["index"]["value"] == str(repo / "kb" / "index")
    assert shown["index search"]["index"]["value"] == str(repo / "kb" / "index")
    assert shown["index build"]["index"]["value"] == str(repo / "kb" / "build-here")
    assert shown["index build"]["chunk_words"]["value"] == 80
    assert shown["check"]["index"]["source"] == "default"


def test_a_run_takes_the_files_values_and_a_flag_wins(repo: Path, run_cli: Any) -> None:
    """The gate of a real run comes from the file; a flag overrides it."""
    _write(repo / "ceg.toml", '[check]\nevidence = "contexts"\nmax_nonfactual_responses = 0\n')
    src = _write(repo / "r.jsonl", json.dumps(RECORD) + "\n")
    failed = run_cli("check", src, "--out", repo / "out.jsonl", "-q")
    assert failed.exit_code == 1, failed.stderr  # the file's gate: no nonfactual answer
    assert "more than --max-nonfactual-responses 0" in failed.stderr
    passed = run_cli("check", src, "--out", repo / "out.jsonl", "-q",
                     "--max-nonfactual-responses", "1")
    assert passed.exit_code == 0, passed.stderr
    # Found from a folder below the file's too.
    below = repo / "sub"
    below.mkdir()
    os.chdir(below)
    assert run_cli("check", src, "--out", repo / "out.jsonl", "-q").exit_code == 1


def test_the_keys_are_the_commands_declared_options() -> None:
    """Every long option of every command is a key of its table (read off the command
    tree, not a list kept here): an option added to a command is a key at once."""
    from ceg_cli.cli.main import app
    from ceg_cli.cli.optkeys import leaf_commands, option_keys, schema

    root = typer.main.get_command(app)
    keys = schema(root)
    for words, command in leaf_commands(root).items():
        if words == ("config", "show"):
            assert words not in keys
            continue
        declared = {o[2:].replace("-", "_") for p in command.params
                    if getattr(p, "param_type_name", "") == "option"
                    for o in p.opts[:1] + [x for x in p.opts if x.startswith("--")][:1]
                    if o.startswith("--")}
        assert set(keys[words]) == declared == set(option_keys(command)), words
    assert {"judge", "top_k", "max_nonfactual_rate", "contexts_retrieval"} <= set(keys[("check",)])

    tomorrow = typer.Typer(add_completion=False)

    @tomorrow.command()
    def check(language: str = typer.Option("en", "--language"),
              judge_threshold: float = typer.Option(None, "--judge-threshold", min=0, max=1)
              ) -> None:
        """An option added tomorrow."""

    new = schema(typer.main.get_command(tomorrow))[()]
    assert set(new) == {"language", "judge_threshold"}
    assert (new["judge_threshold"].kind, new["judge_threshold"].low,
            new["judge_threshold"].high) == ("float", 0, 1)


def test_every_command_takes_config_and_no_config_and_nothing_else_new(run_cli: Any) -> None:
    from ceg_cli.cli.commands import CegCommand
    from ceg_cli.cli.main import app
    from ceg_cli.cli.optkeys import leaf_commands

    root = typer.main.get_command(app)
    for words, command in leaf_commands(root).items():
        assert isinstance(command, CegCommand), words  # made by CegTyper
        names = [p.name for p in command.get_params(typer.Context(command))]
        declared = [p.name for p in command.params]
        expected = [] if words == ("config", "show") else ["config", "no_config"]
        assert names == [*declared, *expected, "help"], words
    help_text = run_cli("check", "--help", env={"COLUMNS": "200"}).stdout
    assert "--config" in help_text and "--no-config" in help_text
    assert "completion" not in help_text


# -- bad files -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('top_k = "3"', 'top_k = "3": expected an integer, at least 1, got a string '
                        "(write 3 without quotes)"),
        ('threshold = "0.8"', 'threshold = "0.8": expected a number from -1 to 1, got a '
                              "string (write 0.8 without quotes)"),
        ("top_k = 0", "top_k = 0: must be at least 1"),
        ("threshold = nan", "threshold = nan: not a number; give a number from -1 to 1"),
        ('evidence = "nowhere"', 'evidence = "nowhere": choose one of auto, contexts, index, '
                                 "both"),
        ('topk = 3', "unknown key 'topk' (did you mean 'top_k'?): no option --topk of any ceg "
                     "command; keys are the long options with - as _ ('ceg config show "
                     "COMMAND' lists them)"),
        ("[eval]\nmax_nonfactual_rate = 0.1",
         "[eval] key 'max_nonfactual_rate': ceg eval has no --max-nonfactual-rate (it is an "
         "option of ceg check, ceg report: put it in their tables, or at the top)"),
        ("[index.build]\nchunk_words = 0", "[index.build] chunk_words = 0: must be at least 1"),
        ("[index.build]\nnamespace = [0, \"x\"]",
         '[index.build] namespace = [0, "x"]: item "x": expected an integer, got a string'),
        ("[chek]\ntop_k = 3", "[chek]: no command 'ceg chek'; the tables are the commands"),
        ('judge = "bogus"', 'judge = "bogus": unknown judge; choose one of: offline'),
        ("x = [1,", "not valid TOML: "),
        ('index = "a"\n[index.build]\nchunk_words = 3',
         "not valid TOML: Cannot overwrite a value (at line 2, column 13); a key and a table "
         "cannot share a name"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_key_and_exit_2(
    repo: Path, run_cli: Any, text: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ceg_cli.index.store

    def no_model(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a model loaded before the file was checked")

    monkeypatch.setattr(ceg_cli.index.store, "load_embedder", no_model)
    path = _write(repo / "ceg.toml", text + "\n")
    src = _write(repo / "r.jsonl", json.dumps(RECORD) + "\n")
    out = repo / "out.jsonl"
    for command in (["check", src, "--out", out], ["config", "show", "check"]):
        line = _error(run_cli(*command))
        assert line.startswith(f"{path}: {said}"), line
    assert not out.exists()
    with pytest.raises(UsageError) as caught:
        from ceg_cli import Checker

        Checker()
    assert str(caught.value).startswith(f"{path}: {said}")


def test_a_string_where_a_number_is_wanted_is_refused_for_every_key(repo: Path) -> None:
    """Every number key of every command (judge_threshold and whatever comes) refuses
    "0.8" naming the type: the check is read off the options, not listed."""
    from ceg_cli.cli.projectfile import cli_schema

    numbers = {key for keys in cli_schema().values() for key, spec in keys.items()
               if spec.kind in ("int", "float")}
    assert {"top_k", "threshold", "chunk_words", "max_nonfactual_rate"} <= numbers
    for key in sorted(numbers):
        path = _write(repo / "ceg.toml", f'{key} = "1"\n')
        with pytest.raises(UsageError, match=rf'^{path}: {key} = "1": expected (an integer|a '
                                             r"number).*, got a string \(write 1 without"):
            project.load(path, cli_schema())


def test_odd_files(repo: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = repo / "ceg.toml"
    path.mkdir()
    assert _error(run_cli("config", "show", "check")) == (
        f"{path}: is a directory; the project file is a TOML file")
    path.rmdir()
    # Empty: a valid file with no keys.
    _write(path, "")
    shown = _show(run_cli, "check")
    assert shown["project_file"] == str(path)
    assert {v["source"] for v in shown["commands"]["check"].values()} == {"default"}
    # A byte-order mark (some Windows editors write one) is read past.
    path.write_bytes(b"\xef\xbb\xbftop_k = 2\n")
    assert _show(run_cli, "check")["commands"]["check"]["top_k"]["value"] == 2
    path.write_bytes(b"top_k = 2 # \xff\n")
    assert _error(run_cli("config", "show", "check")) == (
        f"{path}: not UTF-8 (byte 12); a TOML file is UTF-8 text")
    # Unreadable (the tests run as root, who reads anything: the read is made to fail).
    path.write_text("top_k = 2\n", encoding="utf-8")
    real = Path.read_bytes

    def denied(self: Path) -> bytes:
        if self.name == "ceg.toml":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    assert _error(run_cli("config", "show", "check")) == (
        f"{path}: cannot read the project file (Permission denied)")


def test_pyproject_tool_ceg_beside_other_tools_tables(repo: Path, run_cli: Any) -> None:
    path = _write(repo / "pyproject.toml", """\
[project]
name = "team-rag"

[tool.ruff]
line-length = 100

[tool.ceg]
top_k = 3

[tool.ceg.check]
max_nonfactual_rate = 0.1

[tool.pytest.ini_options]
addopts = "-q"
""")
    shown = _show(run_cli, "check")
    assert shown["project_file"] == str(path)
    check = shown["commands"]["check"]
    assert check["top_k"]["value"] == 3 and check["top_k"]["from"] == f"{path} [tool.ceg]"
    assert check["max_nonfactual_rate"]["from"] == f"{path} [tool.ceg.check]"
    _write(path, "[tool.ceg.check]\nmax_nonfactual_rate = 2\n[tool.black]\nx = 1\n")
    assert _error(run_cli("config", "show", "check")) == (
        f"{path}: [tool.ceg.check] max_nonfactual_rate = 2: must be a share from 0 to 1")
    # Named with --config, a pyproject.toml without [tool.ceg] is refused.
    other = _write(repo / "sub" / "pyproject.toml", "[tool.ruff]\nx = 1\n")
    assert _error(run_cli("config", "show", "check", "--config", str(other))) == (
        f"{other}: has no [tool.ceg] table")


def test_config_show_names_one_command_before_its_options(repo: Path, run_cli: Any) -> None:
    assert set(_show(run_cli, "index")["commands"]) == {"index build", "index info",
                                                        "index search"}
    assert "config show" not in _show(run_cli)["commands"]
    assert _error(run_cli("config", "show", "index", "--top-k", "3")).startswith(
        "config show index --top-k 3: 'ceg index' is not one command")
    result = run_cli("config", "show", "check", "--top-k", "0")
    assert _error(result) == "--top-k 0: must be at least 1"


# -- the API, the plugin, the Action --------------------------------------------------


def test_a_checker_reads_the_file_and_its_keywords_win(repo: Path) -> None:
    from ceg_cli import Checker

    index = repo / "kb" / "index"
    _write(repo / "ceg.toml", 'top_k = 3\n[check]\ncontexts_retrieval = "dense"\n'
                              'max_nonfactual_rate = 0.1\n[eval]\nlimit = 4\n')
    checker = Checker()
    assert checker.settings.check.retrieval.top_k == 3
    assert checker.settings.check.contexts_retrieval == "dense"
    assert Checker(top_k=4).settings.check.retrieval.top_k == 4
    assert Checker(config=False).settings.check.retrieval.top_k == 5
    other = _write(repo / "elsewhere.toml", "top_k = 6\n")
    assert Checker(config=other).settings.check.retrieval.top_k == 6
    assert Checker(config=str(other)).settings.check.retrieval.top_k == 6
    # The index of the file, relative to the file, is the Checker's index.
    _write(repo / "ceg.toml", '[check]\nindex = "kb/index"\n')
    with pytest.raises(CegError, match=f"no index at {index}"):
        Checker()
    assert Checker(evidence="contexts").index is None
    with pytest.raises(UsageError, match="config=3: a path, False"):
        Checker(config=3)  # type: ignore[arg-type]


@pytest.fixture
def plugin_repo(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    (pytester.path / ".git").mkdir()
    monkeypatch.delenv("CEG_NO_CONFIG", raising=False)
    return pytester


pytest_plugins = ["pytester"]


def test_the_pytest_plugin_reads_the_file(plugin_repo: pytest.Pytester) -> None:
    plugin_repo.makefile(".toml", ceg='top_k = 2\n[check]\ncontexts_retrieval = "hybrid"\n')
    plugin_repo.makepyfile(test_pinned='''
def test_pinned(ceg_checker):
    assert ceg_checker.settings.check.retrieval.top_k == 2
    assert ceg_checker.settings.check.contexts_retrieval == "hybrid"
''')
    result = plugin_repo.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "ceg: index (none: answers checked against their contexts), judge offline "
        f"(project file {plugin_repo.path / 'ceg.toml'})"])
    plugin_repo.makefile(".toml", ceg="top_k = 0\n")
    result = plugin_repo.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*ceg_checker: {plugin_repo.path / 'ceg.toml'}: top_k = 0: "
                                 "must be at least 1*"])


def test_the_action_reads_the_file(repo: Path) -> None:
    """The Action's script leaves out the inputs left empty, so the file's judge, index
    and gate apply; its index is the file's (the cache and the build use it)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "scripts" / "ceg_action.py"
    _write(repo / "ceg.toml", '[check]\nindex = "kb/index"\nevidence = "contexts"\n'
                              "max_nonfactual_responses = 0\n")
    src = _write(repo / "r.jsonl", json.dumps(RECORD) + "\n")
    outputs = repo / "github_output"
    env = {**os.environ, "GITHUB_OUTPUT": str(outputs)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(script), *args], capture_output=True,
                              text=True, env=env, timeout=300, cwd=repo)

    key = run("key", "--if-any", "--index", "", "--sources", "")
    assert key.returncode == 0, key.stderr
    # The file's index, relative to the workspace (here the working directory), as the
    # cache step's paths are.
    assert key.stdout.splitlines() == ["index=kb/index", "key="]
    checked = run("check", "--responses", str(src), "--index", "", "--judge", "",
                  "--max-nonfactual-rate", "")
    assert checked.returncode == 0, checked.stderr
    command = next(line for line in checked.stdout.splitlines() if line.startswith("running:"))
    assert "--judge" not in command and "--index" not in command
    assert outputs.read_text().splitlines()[-1] == "exit-code=1"  # the file's gate failed


def test_the_example_in_the_cli_reference_is_a_valid_file(tmp_path: Path) -> None:
    import re

    from ceg_cli.cli.projectfile import cli_schema

    reference = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text(
        encoding="utf-8")
    [example] = re.findall(r"```toml\n(# ceg.toml\n.*?)```", reference, re.S)
    path = _write(tmp_path / "ceg.toml", example)
    loaded = project.load(path, cli_schema())
    check = loaded.values_for(("check",))
    assert check["judge"].value == "minicheck:minicheck-flan-t5-large"
    assert check["index"].value == tmp_path / "eval" / "index"
    assert loaded.values_for(("index", "build"))["chunk_words"].value == 80


# -- what a probe found (issue 51 items 5-8) ------------------------------------------


def test_a_fifo_named_ceg_toml_is_refused_without_being_opened(repo: Path) -> None:
    # Opening a FIFO blocks until a writer comes: every command hung. Run in a child
    # with a timeout, so that a regression fails instead of hanging the suite.
    import subprocess
    import sys

    os.mkfifo(repo / "ceg.toml")
    env = {k: v for k, v in os.environ.items() if k != "CEG_NO_CONFIG"}
    ceg = Path(sys.executable).with_name("ceg")
    done = subprocess.run([str(ceg), "config", "show", "check"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"error: {repo / 'ceg.toml'}: is a FIFO (named pipe), not a regular file; "
        "the project file is a TOML file"]


def test_a_broken_or_looping_link_is_refused_not_skipped(repo: Path, run_cli: Any) -> None:
    path = repo / "ceg.toml"
    path.symlink_to(repo / "gone.toml")
    assert _error(run_cli("config", "show", "check")) == (
        f"{path}: cannot read the project file (a symbolic link to {repo / 'gone.toml'}, "
        "which does not exist)")
    assert _error(run_cli("check", "-", "--index", str(repo / "idx")))
    path.unlink()
    path.symlink_to("ceg.toml")
    assert _error(run_cli("config", "show", "check")) == (
        f"{path}: cannot read the project file (a symbolic link loop)")
    path.unlink()
    # A link to a good file is a good file.
    _write(repo / "team.toml", "top_k = 2\n")
    path.symlink_to("team.toml")
    assert _show(run_cli, "check")["commands"]["check"]["top_k"]["value"] == 2


def test_config_show_refuses_what_a_run_refuses(repo: Path, run_cli: Any) -> None:
    path = _write(repo / "ceg.toml", '[check]\nlanguage = "xx"\n')
    shown = _error(run_cli("config", "show", "check"))
    assert shown.startswith(f'{path}: [check] language = "xx": ')
    assert "not a language code ceg knows" in shown
    ran = _error(run_cli("check", "-", "--index", str(repo / "idx")))
    assert "not a language code ceg knows" in ran
    _write(path, '[check]\nlanguage = "DE"\n')
    assert _show(run_cli, "check")["commands"]["check"]["language"]["source"] == "file"
    _write(path, '[eval]\nformat = "csv"\n')
    assert _error(run_cli("config", "show", "eval")) == (
        f'{path}: [eval] format = "csv": choose one of "felm", "halueval", "fever", "jsonl"')


def test_a_key_set_twice_is_named_with_both_lines(repo: Path, run_cli: Any) -> None:
    path = _write(repo / "ceg.toml", "top_k = 3\ntop_k = 4\n")
    assert _error(run_cli("config", "show", "check")) == (
        f"{path}: not valid TOML: key 'top_k' is set twice (lines 1 and 2)")
    _write(path, "top_k = 3\n\n[check]\ntop_k = 2\n# note\n  top_k = 5\n")
    assert _error(run_cli("config", "show", "check")) == (
        f"{path}: not valid TOML: key 'check.top_k' is set twice (lines 4 and 6)")
    # A key and a table sharing a name keeps its own hint.
    _write(path, 'index = "x"\n[index.build]\nmodel = "m"\n')
    assert "a key and a table cannot share a name" in _error(run_cli("config", "show", "check"))
