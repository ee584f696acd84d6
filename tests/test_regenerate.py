"""The regeneration loop: attempts, the final answer, the record, the CLI flags.

A scripted judge flags segments holding a planted error and a fake
OpenAI-compatible server on loopback plays the rewriting LLM, so every path of
the loop is exercised on demand. ``test_llm_server.py`` runs it against a real
model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from llm_fakes import FakeOpenAI

from ceg_cli import judges
from ceg_cli.check.run import CheckRun, RunSettings
from ceg_cli.errors import UsageError
from ceg_cli.types import FACTUAL, NONFACTUAL, NOT_ENOUGH_EVIDENCE, SUPPORTED, JudgeItem, Verdict

WRONG = "Aristotle was born in 1812."
RIGHT = "Aristotle was born in Stagira."


class PlantedErrorJudge:
    """Flags any segment with '1812' in it; cites the first passage otherwise."""

    name = "planted"
    method = "flags '1812'"

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        return [
            Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.1, (), "'1812' not in the evidence")
            if "1812" in it.segment.text
            else Verdict(FACTUAL, SUPPORTED, 0.9, (0,), "")
            for it in items
        ]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    yield server
    server.close()


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judges, "_REGISTRY", dict(judges._REGISTRY))
    judges.register("planted", lambda arg, options: PlantedErrorJudge())


def run_check(
    tmp_path: Path, index: Path, fake: FakeOpenAI, responses: list[dict[str, Any]], **kw: Any
) -> tuple[list[dict[str, Any]], CheckRun]:
    src = tmp_path / "responses.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in responses))
    out = tmp_path / "out.jsonl"
    settings = RunSettings.resolve(
        responses=str(src), index=index, out=out, judge=kw.pop("judge", "planted"),
        regenerate=True, rewriter=kw.pop("rewriter", "llm:fake-model"),
        judge_options={"base_url": fake.base_url, "cache_path": str(tmp_path / "c.sqlite")},
        **kw,
    )
    run = CheckRun(settings)
    try:
        run.execute()
    finally:
        run.close()
    return [json.loads(line) for line in out.read_text().splitlines()], run


def rewrite_prompts(fake: FakeOpenAI) -> list[str]:
    return [
        body["messages"][-1]["content"]
        for body in fake.requests
        if "factual errors" in body["messages"][-1]["content"]
    ]


def test_a_nonfactual_response_is_rewritten_and_repaired(
    tmp_path: Path, hash_index: Path, hash_model: None, fake: FakeOpenAI, planted: None
) -> None:
    fake.respond = lambda body: RIGHT
    records, run = run_check(tmp_path, hash_index, fake, [
        {"id": "bad", "question": "Where was Aristotle born?", "response": WRONG},
        {"id": "good", "response": RIGHT},
    ])
    bad, good = records
    assert bad["label"] == NONFACTUAL  # the gate judges the response as given
    regen = bad["regeneration"]
    assert [a["attempt"] for a in regen["attempts"]] == [1]
    assert regen["attempts"][0]["response"] == RIGHT
    assert regen["attempts"][0]["label"] == FACTUAL
    assert regen["final"] == {"response": RIGHT, "label": FACTUAL,
                              "annotated": regen["attempts"][0]["annotated"]}
    assert regen["repaired"] is True
    assert good["regeneration"] is None
    assert (run.regenerated, run.repaired) == (1, 1)
    # The paper's prompt: the question, the old answer, the flagged segment, the docs.
    (prompt,) = rewrite_prompts(fake)
    assert "Where was Aristotle born?" in prompt and WRONG in prompt
    assert "Please generate a new response based on relevant docs" in prompt


def test_attempts_stop_at_max_attempts_and_each_is_kept(
    tmp_path: Path, hash_index: Path, hash_model: None, fake: FakeOpenAI, planted: None
) -> None:
    answers = iter(["Born in 1812, truly.", "Still 1812.", "Never reached."])
    fake.respond = lambda body: next(answers)
    records, run = run_check(
        tmp_path, hash_index, fake, [{"id": "bad", "response": WRONG}], max_attempts=2
    )
    regen = records[0]["regeneration"]
    assert [a["response"] for a in regen["attempts"]] == ["Born in 1812, truly.", "Still 1812."]
    assert [a["label"] for a in regen["attempts"]] == [NONFACTUAL, NONFACTUAL]
    assert regen["repaired"] is False and regen["final"]["label"] == NONFACTUAL
    # The second attempt rewrote the first attempt's answer, not the original.
    assert "Born in 1812, truly." in rewrite_prompts(fake)[1]
    assert (run.regenerated, run.repaired) == (1, 0)


def test_an_empty_rewrite_is_a_failed_attempt_not_a_repair(
    tmp_path: Path, hash_index: Path, hash_model: None, fake: FakeOpenAI, planted: None
) -> None:
    fake.respond = lambda body: "   "
    records, run = run_check(
        tmp_path, hash_index, fake, [{"id": "bad", "response": WRONG}], max_attempts=3
    )
    regen = records[0]["regeneration"]
    assert len(regen["attempts"]) == 1  # nothing to rewrite from after an empty answer
    assert regen["attempts"][0]["label"] == "error"
    assert "empty" in regen["attempts"][0]["error"]
    assert regen["repaired"] is False and run.repaired == 0


def test_a_rerun_is_answered_from_the_cache(
    tmp_path: Path, hash_index: Path, hash_model: None, fake: FakeOpenAI, planted: None
) -> None:
    fake.respond = lambda body: RIGHT
    first, _ = run_check(tmp_path, hash_index, fake, [{"id": "bad", "response": WRONG}])
    calls = fake.chat_calls
    second, run = run_check(tmp_path, hash_index, fake, [{"id": "bad", "response": WRONG}])
    assert fake.chat_calls == calls and calls >= 1
    assert second == first
    usage = run.llm_usage()
    assert usage is not None and usage["calls"] == 0 and usage["cache_hits"] >= 1


def test_regenerate_needs_an_llm(tmp_path: Path, hash_index: Path, hash_model: None) -> None:
    settings = RunSettings.resolve(
        responses=str(tmp_path / "r.jsonl"), index=hash_index, judge="offline", regenerate=True
    )
    with pytest.raises(UsageError, match="--rewriter llm:MODEL"):
        CheckRun(settings)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"rewriter": "llm:x"}, "only with --regenerate"),
        ({"regenerate": True, "rewriter": "offline"}, "name an LLM"),
        ({"regenerate": True, "max_attempts": 0}, "at least 1"),
    ],
)
def test_regeneration_flags_are_checked(tmp_path: Path, kw: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        RunSettings.resolve(responses="r.jsonl", index=tmp_path, **kw)


def test_without_regenerate_records_have_no_regeneration_key(
    tmp_path: Path, hash_index: Path, hash_model: None, planted: None
) -> None:
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps({"response": WRONG}) + "\n")
    out = tmp_path / "out.jsonl"
    run = CheckRun(RunSettings.resolve(responses=str(src), index=hash_index, out=out,
                                       judge="planted"))
    try:
        run.execute()
    finally:
        run.close()
    assert "regeneration" not in json.loads(out.read_text())


def test_a_citing_answer_is_rewritten_citing_its_contexts(
    tmp_path: Path, fake: FakeOpenAI, planted: None
) -> None:
    """Against its own contexts (no index), the rewrite sees the documents numbered as the
    record's contexts, is asked to cite them, and its citations are checked in turn."""
    contexts = ["Aristotle was born in Stagira, in Chalcidice.", "Plato taught Aristotle."]
    fake.respond = lambda body: "Aristotle was born in Stagira [1]."
    records, _ = run_check(tmp_path, tmp_path / "no-index", fake, [
        {"id": "cited", "question": "Where was Aristotle born?",
         "response": "Aristotle was born in 1812 [1].", "contexts": contexts},
    ])
    (record,) = records
    assert record["evidence_source"] == "contexts"
    (prompt,) = rewrite_prompts(fake)
    assert "cite the documents it relies on by their numbers in square brackets" in prompt
    assert 'number="1"' in prompt and "Stagira" in prompt
    (attempt,) = record["regeneration"]["attempts"]
    assert attempt["response"] == "Aristotle was born in Stagira [1]."
    (segment,) = attempt["segments"]
    assert segment["text"] == "Aristotle was born in Stagira."  # the marker is not judged
    assert segment["citation_check"]["contexts"] == [1]
    assert segment["citation_check"]["status"] == "supported"
