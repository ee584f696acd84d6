"""The Python API (issue 33 item 1): ``Checker`` gives ``ceg check``'s records, with the
CLI's options and messages, against an index or an answer's own contexts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ceg_cli.errors import CegError, UsageError

EIFFEL = ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, "
          "France. It was completed in 1889 for the World's Fair.")
RECORDS: list[dict[str, Any]] = [
    {"id": "ok", "question": "Where is the Eiffel Tower?",
     "response": "The Eiffel Tower is in Paris. It was completed in 1889.",
     "contexts": [EIFFEL]},
    {"id": "wrong", "question": "When was the Eiffel Tower completed?",
     "response": "The Eiffel Tower is in Paris. It was completed in 1925.",
     "retrieved_contexts": [{"text": EIFFEL, "title": "Eiffel Tower"}], "team": "qa"},
    {"id": "bad", "response": "Anything.", "contexts": [5]},
]


@pytest.fixture(autouse=True)
def _no_ceg_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI reads CEG_* variables; the API does not: compare them on the defaults."""
    for name in ("CEG_INDEX", "CEG_TOP_K", "CEG_THRESHOLD", "CEG_QUERY", "CEG_RETRIEVAL"):
        monkeypatch.delenv(name, raising=False)


def _cli_records(run_cli: Any, tmp_path: Path, records: list[dict[str, Any]],
                 *args: str | Path) -> list[dict[str, Any]]:
    src = tmp_path / "responses.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = run_cli("check", src, "--out", out, "-q", *args)
    # 2 when a line could not be read (the gate fails on bad input), after writing all.
    assert result.exit_code in (0, 2), result.stderr
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_import_ceg_cli_is_light_and_lists_its_api() -> None:
    code = (
        "import sys, ceg_cli, ceg_cli.testing, ceg_cli.pytest_plugin\n"
        "heavy = ('torch', 'transformers', 'sentence_transformers', 'faiss', 'numpy',\n"
        "         'sklearn', 'bm25s', 'openai', 'ceg_cli.api')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "print(sorted(ceg_cli.__all__))\n"
        "import ceg_cli.api\n"
        "print(ceg_cli.Checker is ceg_cli.api.Checker)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.splitlines() == [
        "[]",
        "['CheckResult', 'CheckedSegment', 'Checker', 'SCHEMA_VERSION', '__version__']",
        "True",
    ]
    import ceg_cli

    with pytest.raises(AttributeError, match="no attribute 'Chekcer'"):
        ceg_cli.Chekcer  # noqa: B018
    package = Path(ceg_cli.__file__).parent
    assert (package / "py.typed").is_file() and (package / "__init__.pyi").is_file()


@pytest.mark.parametrize(
    ("options", "cli_args"),
    [
        ({"top_k": 0}, None),  # the CLI's own parser refuses it first
        ({"threshold": 2.0}, None),
        ({"evidence": "nowhere"}, None),
        ({"response_field": " "}, ["--response-field", " "]),
        ({"rewriter": "llm:x"}, ["--rewriter", "llm:x"]),
        ({"citation_pattern": "("}, ["--citation-pattern", "("]),
        ({"llm_base_url": ""}, ["--llm-base-url", ""]),
        ({"device": "tpu"}, None),
    ],
)
def test_a_bad_option_is_the_clis_usage_error(
    options: dict[str, Any], cli_args: list[str] | None, run_cli: Any, tmp_path: Path
) -> None:
    from ceg_cli import Checker

    with pytest.raises(UsageError) as caught:
        Checker(**options)
    message = str(caught.value)
    assert message.startswith("--")
    if cli_args is not None:
        src = tmp_path / "r.jsonl"
        src.write_text('{"response": "x"}\n', encoding="utf-8")
        result = run_cli("check", src, *cli_args)
        assert result.exit_code == 2
        assert message in " ".join(result.stderr.split())


def test_options_the_cli_does_not_have_and_misused_ones_are_usage_errors(tmp_path: Path) -> None:
    from ceg_cli import Checker

    with pytest.raises(UsageError, match="unknown option 'topk'; the options are top_k"):
        Checker(topk=3)
    with pytest.raises(UsageError, match="--evidence both: needs an index"):
        Checker(evidence="both")
    with pytest.raises(UsageError, match="--concurrency 0: must be at least 1"):
        Checker(concurrency=0)
    with pytest.raises(UsageError, match="--unparsable-as maybe: choose one of"):
        Checker(unparsable_as="maybe")
    with pytest.raises(CegError, match="no index at"):
        Checker(index=tmp_path / "missing")
    with pytest.raises(CegError, match="nosuch"):
        Checker(judge="nosuch")


def test_a_bad_argument_of_check_is_a_usage_error_naming_it() -> None:
    from ceg_cli import Checker

    checker = Checker()
    with pytest.raises(UsageError, match="field 'contexts'"):
        checker.check("Anything.", contexts=[5])
    with pytest.raises(UsageError, match="no contexts .* no index"):
        checker.check("Anything.")
    with pytest.raises(UsageError, match="expected a string"):
        checker.check(None)  # type: ignore[arg-type]


def test_index_checks_give_the_clis_records(
    hash_index: Path, hash_model: None, run_cli: Any, tmp_path: Path
) -> None:
    from ceg_cli import Checker

    records = [{"response": "Aristotle was a Greek philosopher. He taught Alexander."},
               {"id": 7, "prompt": "Who wrote Actrius?", "response": "Actrius is a film."}]
    cli = _cli_records(run_cli, tmp_path, records, "--index", hash_index, "--top-k", "3")
    with Checker(hash_index, top_k=3) as checker:
        assert checker.index == hash_index and checker.judge == "offline"
        got = [r.to_dict() for r in checker.check_many(records)]
        one = checker.check(records[0]["response"])
    assert got == cli
    assert one.to_dict() == cli[0]
    assert [s.text for s in one.segments] == [s["text"] for s in cli[0]["segments"]]
    assert all(s.evidence for s in one.segments)


def test_check_many_streams_in_the_clis_batches(hash_index: Path, hash_model: None) -> None:
    from ceg_cli import Checker

    pulled = 0

    def answers() -> Iterator[str]:
        nonlocal pulled
        for n in range(40):
            pulled += 1
            yield f"Aristotle wrote book {n}."

    results = Checker(hash_index).check_many(answers())
    first = next(results)
    assert first.label in ("factual", "nonfactual")
    assert pulled == 16  # the CLI's batch: one batch read, not the whole input
    assert len([first, *results]) == 40


@pytest.mark.slow
def test_contexts_checks_need_no_index_and_give_the_clis_records(
    run_cli: Any, tmp_path: Path
) -> None:
    from ceg_cli import Checker

    cli = _cli_records(run_cli, tmp_path, RECORDS, "--index", tmp_path / "no-index")
    src = tmp_path / "responses.jsonl"
    checker = Checker()
    assert checker.index is None
    got = [r.to_dict() for r in checker.check_many(RECORDS)]
    assert got[:2] == cli[:2]
    # An error names where the line came from: the file there, <python> here.
    error = got[2].pop("error")
    assert error == cli[2].pop("error").replace(str(src), "<python>")
    assert got[2] == cli[2]
    ok = checker.check(RECORDS[0]["response"], question=RECORDS[0]["question"],
                       contexts=RECORDS[0]["contexts"])
    # The same line as check() makes it: the CLI's record for it.
    line = {k: RECORDS[0][k] for k in ("response", "question", "contexts")}
    assert ok.to_dict() == _cli_records(run_cli, tmp_path, [line],
                                        "--index", tmp_path / "no-index")[0]
    assert ok.label == "factual" and not ok.flagged
    assert ok.segments[0].citations[0].context == 1
    wrong = checker.check(RECORDS[1]["response"], contexts=[EIFFEL])
    assert wrong.label == "nonfactual"
    [flagged] = wrong.flagged
    assert flagged.text == "It was completed in 1925."
    assert (flagged.label, flagged.verdict) == ("nonfactual", "not_enough_evidence")
    assert "1925" in flagged.reason and flagged.citations == ()
    assert flagged.evidence[0].text.startswith("The Eiffel Tower")
    assert got[2]["label"] == "error" and error.startswith("<python>:3: field 'contexts'")


def _record(*labels: str, label: str = "nonfactual") -> dict[str, Any]:
    return {"label": label, "error": None, "segments": [
        {"index": n, "text": f"Sentence {n}.", "label": lab, "verdict": "contradicted",
         "reason": f"why {n}", "evidence": [
             {"source": "index", "title": "Low", "doc_id": "a", "similarity": 0.2, "text": "x"},
             {"source": "index", "title": "High", "doc_id": "b", "similarity": 0.9,
              "text": "best " * 100}]}
        for n, lab in enumerate(labels)]}


def test_assert_grounded_counts_nonfactual_sentences_and_never_passes_unjudged_ones() -> None:
    from ceg_cli.testing import assert_grounded

    assert_grounded(_record("factual", "factual", label="factual"))
    assert_grounded(_record("factual", "nonfactual"), max_nonfactual=1)
    with pytest.raises(AssertionError) as caught:
        assert_grounded(_record("factual", "nonfactual", "nonfactual"), max_nonfactual=1)
    message = str(caught.value)
    assert message.splitlines()[0] == (
        "2 of 3 sentences are not supported by the evidence (allowed: 1):")
    assert "- sentence 2 [nonfactual, contradicted]: 'Sentence 1.'" in message
    assert "    reason: why 1" in message
    # The best evidence is the most similar passage, quoted short.
    assert "best evidence: High, similarity 0.90: 'best best" in message
    assert "…" in message and len(message.splitlines()[3]) < 300
    with pytest.raises(AssertionError, match="1 could not be judged"):
        assert_grounded(_record("factual", "not_judged"), max_nonfactual=5)
    with pytest.raises(AssertionError, match="could not be checked: line 3: bad"):
        assert_grounded({"label": "error", "error": "line 3: bad", "segments": []})
    with pytest.raises(ValueError, match="max_nonfactual -1"):
        assert_grounded(_record("factual"), max_nonfactual=-1)
    with pytest.raises(TypeError, match="expected what Checker.check returns"):
        assert_grounded("The answer.")


def test_assert_grounded_says_no_similarity_where_none_was_computed() -> None:
    """Contexts ranked by BM25 for a judge that reads no similarity have none (null):
    the message said "similarity 0.00", as if the passage matched nothing."""
    from ceg_cli.testing import grounding_failures

    record = _record("nonfactual")
    record["segments"][0]["evidence"] = [
        {"source": "context", "context": 2, "title": None, "similarity": None,
         "text": "Ranked first."},
        {"source": "context", "context": 1, "title": None, "similarity": None,
         "text": "Ranked second."},
    ]
    message = grounding_failures(record) or ""
    assert "best evidence: context 2, ranked first by BM25 (no similarity computed): " \
        "'Ranked first.'" in message
    assert "similarity 0.00" not in message


def test_the_public_shape_is_pinned_with_the_output_schema() -> None:
    """What docs/api.md promises; a change here is a change of SCHEMA_VERSION's contract."""
    import dataclasses

    import ceg_cli
    from ceg_cli import SCHEMA_VERSION, CheckedSegment, Checker, CheckResult

    assert SCHEMA_VERSION == 7
    assert [f.name for f in dataclasses.fields(CheckedSegment)] == [
        "text", "label", "verdict", "score", "reason", "citations", "evidence", "start",
        "end", "citation_check", "split", "spans"]
    public = {n for n in dir(CheckResult) if not n.startswith("_")}
    assert public == {"label", "error", "response", "question", "flagged", "annotated",
                      "language", "to_dict"}
    assert {n for n in dir(Checker) if not n.startswith("_")} == {
        "check", "check_many", "close", "judge", "index"}
    api_md = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text()
    for name in ceg_cli.__all__:
        assert f"`{name}`" in api_md or name == "__version__"


def test_langchain_documents_reach_the_parser_as_a_line_holds_them() -> None:
    from ceg_cli.api import _plain_contexts
    from ceg_cli.corpus.contexts import parse_contexts

    class Document:  # what langchain_core.documents.Document carries
        def __init__(self, page_content: str, metadata: dict[str, Any]) -> None:
            self.page_content = page_content
            self.metadata = metadata

    docs = [Document("Paris is in France.", {"title": "Paris", "source": "https://x.org/p"}),
            "A plain string."]
    [first, second] = parse_contexts(_plain_contexts(docs), "contexts")
    assert (first.position, first.text, first.title) == (1, "Paris is in France.", "Paris")
    assert (second.position, second.text) == (2, "A plain string.")


def test_a_langchain_documents_own_id_is_kept() -> None:
    """langchain_core's ``Document`` has an ``id`` of its own (None unless set), apart
    from its metadata: a record's contexts read from JSON keep it (``model_dump()``
    writes it), and so must the same documents given from Python."""
    from ceg_cli import Checker
    from ceg_cli.api import _plain_contexts
    from ceg_cli.corpus.contexts import parse_contexts

    class Document:  # langchain_core.documents.Document's fields
        def __init__(self, page_content: str, metadata: dict[str, Any],
                     id: str | None = None) -> None:  # noqa: A002 - LangChain's name
            self.page_content = page_content
            self.metadata = metadata
            self.id = id

    docs = [Document("Paris is in France.", {"title": "Paris"}, id="doc-7"),
            Document("Lyon is in France.", {"id": "meta-2"}),
            Document("Nice is in France.", {"id": "meta-3"}, id="own-3")]
    ids = [c.id for c in parse_contexts(_plain_contexts(docs), "contexts")]
    # The document's own id, else its metadata's (as a JSON line with both reads them).
    assert ids == ["doc-7", "meta-2", "own-3"]
    with Checker(evidence="contexts") as checker:
        result = checker.check("Paris is in France.", contexts=docs[:1])
    [cited] = result.segments[0].citations
    assert cited.doc_id == "doc-7"


@pytest.mark.parametrize("with_index", [True, False], ids=["index", "contexts"])
def test_a_closed_checker_says_so_instead_of_failing_in_sqlite(
    with_index: bool, hash_index: Path, hash_model: None
) -> None:
    from ceg_cli import Checker

    checker = Checker(hash_index if with_index else None)
    answer = {"response": "Aristotle was a philosopher.",
              "contexts": ["Aristotle was a Greek philosopher."]}
    stream = checker.check_many([answer] * 40)
    assert next(stream).label == "factual"
    with checker:  # the end of a `with` block closes it, as close() does
        pass
    checker.close()  # twice is fine
    for call in (lambda: checker.check(answer["response"], contexts=answer["contexts"]),
                 lambda: checker.check_many([answer]),
                 lambda: list(stream)):  # a stream begun before close() stops too
        with pytest.raises(UsageError, match="this Checker is closed"):
            call()


def test_a_checker_that_loads_a_model_prints_nothing(tmp_path: Path) -> None:
    """A library prints nothing unless asked: no "Loading weights" bar from transformers
    when a Checker loads its judge's model (the CLI turned it off only for itself)."""
    from tiny_checkers import build

    model = build("roberta", tmp_path / "tiny-minicheck")
    code = (
        "import os, sys\n"
        "from ceg_cli import Checker\n"
        f"checker = Checker(judge='minicheck:{model}')\n"
        "result = checker.check('Paris is in France.', contexts=['Paris is in France.'])\n"
        "assert result.segments, result\n"
        "from transformers.utils import logging\n"
        "assert logging.is_progress_bar_enabled()  # as the user had it\n"
    )
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_DISABLE_PROGRESS_BARS", "TQDM_DISABLE")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")
