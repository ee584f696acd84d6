"""One validation for every caller (issue 44 items 13, 14, 22): the CLI, the API and
``RunSettings.resolve`` refuse the same bad values with the same message, from the
one table in ``ceg_cli/check/options.py``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from ceg_cli.api import JUDGE_OPTIONS, LLM_OPTIONS, RUN_OPTIONS
from ceg_cli.check.options import OPTIONS, OptionError, check_option
from ceg_cli.errors import UsageError

#: For each option, values both the command line and Python can give that are refused.
#: Every option of the table must be here: a new one comes with its bad values.
BAD: dict[str, list[Any]] = {
    "index": [""],
    "judge": ["bogus", "nli:", "minicheck"],
    "judge_precision": ["int4"],
    "judge_threshold": [1.5, -0.1, math.nan, math.inf],
    "top_k": [0, -3],
    "threshold": [1.5, -2.0, math.nan],
    "query": ["everything"],
    "retrieval": ["bm26"],
    "search_width": ["nprobe", "nprobe=0", "k_factor=2,k_factor=4", "depth=3"],
    "lexical_max_terms": [-1, -2],
    "response_field": [" "],
    "question_field": [""],
    "evidence": ["nowhere"],
    "contexts_field": [".", " "],
    "contexts_retrieval": ["sparse"],
    "max_nonfactual_rate": [1.5, -0.1, math.nan],
    "max_nonfactual_responses": [-1],
    "min_citation_recall": [2.0, math.nan],
    "min_citation_precision": [-1.0],
    "citation_pattern": ["(", "(a)(b)", "x*"],
    "regenerate": [],  # a switch: the command line cannot give it a bad value
    "max_attempts": [0],
    "rewriter": ["gpt-4o", "llm:"],
    "llm_base_url": [""],
    "concurrency": [0],
    "temperature": [2.5, -0.5, math.nan],
    "no_cache": [],
    "cache_dir": [""],
    "llm_prompt": ["bogus"],
    "unparsable_as": ["maybe"],
    "batch_tokens": [0, -512],
    "device": ["tpu"],
}
#: What only Python can give: a value of the wrong type.
WRONG_TYPE: dict[str, Any] = {
    "index": 5, "judge": 5, "judge_precision": 16, "judge_threshold": "0.8", "top_k": "3",
    "threshold": "0.3",
    "query": 1, "retrieval": 2, "search_width": 5, "lexical_max_terms": "10",
    "response_field": 5, "question_field": 5,
    "evidence": ["index"], "contexts_field": 5, "contexts_retrieval": 1,
    "max_nonfactual_rate": "0.1", "max_nonfactual_responses": 2.5,
    "min_citation_recall": True, "min_citation_precision": "x", "citation_pattern": 5,
    "regenerate": "yes", "max_attempts": 2.0, "rewriter": 5, "llm_base_url": 5,
    "concurrency": "4", "temperature": "0", "no_cache": 1, "cache_dir": 5,
    "llm_prompt": 1.0, "unparsable_as": 0, "batch_tokens": "2048", "device": b"cpu",
}
#: RunSettings.resolve's keyword for an option of the gate.
RESOLVE_NAMES = {"max_nonfactual_rate": "max_rate", "max_nonfactual_responses": "max_responses"}
#: Options `ceg eval` shares with `ceg check` (its own flags, the same table): all but
#: what is about a run's files, its gate, its fields and its rewrites.
EVAL_SHARES = {"judge", "judge_precision", "judge_threshold", "batch_tokens", "top_k",
               "threshold", "query", "retrieval", "search_width", "lexical_max_terms",
               "evidence", "contexts_field",
               "contexts_retrieval", "device", "llm_base_url", "concurrency", "temperature",
               "no_cache", "cache_dir", "llm_prompt", "unparsable_as"}
CASES = [(key, value) for key, values in BAD.items() for value in values]


def test_every_option_of_the_table_has_bad_values_here() -> None:
    assert set(BAD) == set(OPTIONS) == set(WRONG_TYPE)


def test_eval_takes_every_option_of_check_that_a_judge_reads() -> None:
    """``ceg eval --judge llm:...`` had no --llm-base-url, --llm-prompt, ... (only
    $OPENAI_BASE_URL and the paper's prompt): the judge's options are check's, from the
    table, whoever runs the judge."""
    import typer

    from ceg_cli.check.options import CHECKER_KEYS, LLM_KEYS
    from ceg_cli.cli.main import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    flags = {name: {o for p in commands[name].params for o in getattr(p, "opts", ())}
             for name in ("check", "eval")}
    judge_keys = {"judge", *LLM_KEYS, *CHECKER_KEYS, "device"}
    assert judge_keys <= EVAL_SHARES
    for key in EVAL_SHARES:
        assert OPTIONS[key].flag in flags["eval"] and OPTIONS[key].flag in flags["check"], key


def _cli_text(value: Any) -> str:
    return "nan" if isinstance(value, float) and math.isnan(value) else str(value)


def _api_error(key: str, value: Any) -> str:
    """The message the Python API refuses ``value`` with."""
    from ceg_cli import Checker
    from ceg_cli.check.run import RunSettings

    with pytest.raises(UsageError) as caught:
        if key in RUN_OPTIONS + LLM_OPTIONS + JUDGE_OPTIONS or key in ("index", "judge"):
            Checker(**{key: value})
        else:
            RunSettings.resolve(responses="r.jsonl", index=Path("index"),
                                **{RESOLVE_NAMES.get(key, key): value})
    return str(caught.value)


@pytest.mark.parametrize(("key", "value"), CASES, ids=[f"{k}={v!r}" for k, v in CASES])
def test_the_cli_and_the_api_refuse_a_bad_value_with_the_same_line(
    key: str, value: Any, run_cli: Any, tmp_path: Path
) -> None:
    message = _api_error(key, value)
    with pytest.raises(UsageError) as caught:
        check_option(key, value)
    assert str(caught.value) == message
    src = tmp_path / "r.jsonl"
    src.write_text('{"response": "x", "contexts": ["x"], "label": true}\n', encoding="utf-8")
    commands = [["check", src]] + ([["eval", src]] if key in EVAL_SHARES else [])
    for command in commands:
        result = run_cli(*command, OPTIONS[key].flag, _cli_text(value))
        assert result.exit_code == 2, (command, result.stderr)
        assert result.stderr.splitlines() == [f"error: {message}"], command


@pytest.mark.parametrize("key", sorted(WRONG_TYPE))
def test_a_value_of_the_wrong_type_is_a_usage_error_naming_the_type(key: str) -> None:
    value = WRONG_TYPE[key]
    message = _api_error(key, value)
    assert message.startswith(f"{OPTIONS[key].flag} ")
    assert f"got {'None' if value is None else type(value).__name__}" in message


def test_the_messages_say_what_is_allowed() -> None:
    assert _api_error("top_k", 2.5) == "--top-k 2.5: expected an integer, got float"
    assert _api_error("concurrency", "4") == "--concurrency '4': expected an integer, got str"
    assert _api_error("max_nonfactual_rate", math.nan) == (
        "--max-nonfactual-rate nan: not a number; give a number from 0 to 1")
    assert _api_error("temperature", 2.5) == "--temperature 2.5: must be between 0 and 2"
    assert _api_error("unparsable_as", "maybe") == (
        "--unparsable-as maybe: choose one of not_judged, nonfactual, factual")
    # The documented --unparsable-as factual is taken by the API too.
    from ceg_cli import Checker

    with pytest.warns(UserWarning) as warned:  # the offline judge reads neither
        checker = Checker(unparsable_as="factual", temperature=1, top_k=3)
    assert [str(w.message).split(":")[0] for w in warned] == ["--unparsable-as factual",
                                                              "--temperature 1.0"]
    assert checker.settings.judge_options["count_unparsable_as"] == "factual"
    assert checker.settings.judge_options["temperature"] == 1.0
    assert isinstance(OptionError("--x", "1", "why"), UsageError)


def test_a_variable_names_itself_and_text_that_is_no_number_is_refused(
    run_cli: Any, tmp_path: Path
) -> None:
    src = tmp_path / "r.jsonl"
    src.write_text('{"response": "x", "contexts": ["x"]}\n', encoding="utf-8")
    result = run_cli("check", src, env={"CEG_TOP_K": "0"})
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["error: --top-k 0: must be at least 1 (from $CEG_TOP_K)"]
    result = run_cli("check", src, "--top-k", "three")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["error: --top-k 'three': not an integer"]
    result = run_cli("check", src, "--threshold", "high", env={"CEG_THRESHOLD": "0.2"})
    assert result.stderr.splitlines() == ["error: --threshold 'high': not a number"]


def test_a_message_with_backslashes_keeps_them(run_cli: Any, tmp_path: Path) -> None:
    """Rich reads ``\\[`` as an escaped bracket: messages are printed as they are."""
    src = tmp_path / "r.jsonl"
    src.write_text('{"response": "x", "contexts": ["x"]}\n', encoding="utf-8")
    result = run_cli("check", src, "--citation-pattern", r"\[(\d+)\](x)")
    assert result.exit_code == 2
    assert r"'\[(\d+)\](x)' has 2 capture groups" in result.stderr
    assert r"(e.g. '\[\^(\d+)\]' for [^1])" in result.stderr


def test_usage_lines_name_the_arguments_in_capitals(run_cli: Any) -> None:
    for words, usage in ((["check"], "ceg check [OPTIONS] RESPONSES"),
                         (["eval"], "ceg eval [OPTIONS] DATASET"),
                         (["index", "build"], "ceg index build [OPTIONS] SOURCE..."),
                         (["index", "search"], "ceg index search [OPTIONS] QUERY"),
                         (["report"], "ceg report [OPTIONS] RECORDS"),
                         (["models", "pull"], "ceg models pull [OPTIONS] NAME")):
        result = run_cli(*words, "--help", env={"COLUMNS": "200"})
        assert usage in result.stdout, result.stdout[:300]
        assert "{" not in result.stdout.split("\n\n")[0]
    result = run_cli("check", "--help", env={"COLUMNS": "300"})
    assert r"'\[\^(\d+)\]'" in result.stdout


def test_an_option_this_run_does_not_read_is_warned_of_once(
    run_cli: Any, tmp_path: Path
) -> None:
    """Issue 44 item 24: options silently ignored with exit 0 now say so."""
    src = tmp_path / "r.jsonl"
    src.write_text('{"response": "Paris is in France.", "contexts": ["Paris is in France."]}\n',
                   encoding="utf-8")
    result = run_cli("check", src, "-q", "--evidence", "contexts", "--llm-prompt", "minicheck",
                     "--judge-precision", "bfloat16", "--temperature", "0.5", "--no-cache",
                     "--batch-tokens", "512")
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: --llm-prompt minicheck: ignored: only an llm: judge reads it (the judge is "
        "offline)",
        "warning: --temperature 0.5, --no-cache: ignored: only an LLM reads them (an llm: "
        "judge, or --regenerate's rewriter), and this run uses none (the judge is offline)",
        "warning: --judge-precision bfloat16, --batch-tokens 512: ignored: only a minicheck:, "
        "hhem: or nli: checker reads them (the judge is offline)",
    ]
    for command in (["check", src, "--index", tmp_path / "none"], ["eval", src]):
        result = run_cli(*command, "--evidence", "index", "--contexts-retrieval", "dense", "-q")
        assert ("warning: --contexts-retrieval dense: ignored: it ranks a record's own "
                "contexts, which --evidence index does not read") in result.stderr.splitlines()
    # Options at their defaults, or read by this run, say nothing.
    result = run_cli("check", src, "-q", "--judge-precision", "float32", "--evidence", "contexts",
                     "--contexts-retrieval", "lexical")
    assert result.exit_code == 0 and "warning" not in result.stderr


def test_the_api_warns_of_the_same_options(recwarn: pytest.WarningsRecorder) -> None:
    from ceg_cli import Checker
    from ceg_cli.check.options import ignored_options

    with pytest.warns(UserWarning, match=r"^--llm-prompt minicheck: ignored: only an llm: "):
        Checker(llm_prompt="minicheck")
    Checker(top_k=3, evidence="contexts")
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]
    # What the run reads is not warned of: an LLM judge's prompt, a rewriter's client.
    assert ignored_options({"judge": "llm:gpt-4o-mini", "llm_prompt": "minicheck",
                            "temperature": 0.7}) == []
    assert ignored_options({"judge": "offline", "regenerate": True, "temperature": 0.7}) == []
    assert ignored_options({"judge": "minicheck:x", "judge_precision": "bfloat16",
                            "batch_tokens": 512}) == []
    assert ignored_options({"evidence": "both", "contexts_retrieval": "dense"}) == []


def test_a_number_is_quoted_as_typed_and_negative_zero_is_zero(
    run_cli: Any, tmp_path: Path
) -> None:
    # Issue 51 item 12: "0_5" was read as 5 and refused quoting "5.0", a value never
    # typed; "-0.0" was shown as "-0" and stored as -0.0.
    src = tmp_path / "r.jsonl"
    src.write_text('{"id": "a", "response": "Paris is in France.", '
                   '"contexts": ["Paris is in France."]}\n', encoding="utf-8")
    result = run_cli("check", src, "--judge-threshold", "0_5")
    assert result.stderr.splitlines() == ["error: --judge-threshold '0_5': not a number"]
    result = run_cli("check", src, "--judge-threshold", "1e1")
    assert result.stderr.splitlines() == [
        "error: --judge-threshold 1e1: the judge's score is between 0 and 1, and so is its cut"]
    result = run_cli("check", src, "--top-k", "1_0")
    assert result.stderr.splitlines() == ["error: --top-k '1_0': not an integer"]
    out = tmp_path / "out.jsonl"
    result = run_cli("check", src, "--judge-threshold", "-0.0", "--evidence", "contexts",
                     "--out", out)
    assert result.exit_code == 0, result.stderr
    assert "threshold 0 (--judge-threshold)" in result.stderr
    assert "-0" not in result.stderr.replace("--", "")
    record = out.read_text(encoding="utf-8")
    assert '"threshold": 0.0' in record and "-0.0" not in record
    assert math.copysign(1.0, check_option("judge_threshold", -0.0)) == 1.0
