"""The llm:MODEL judge against a fake OpenAI-compatible server: prompts, parsing, verdicts.

The fake answers as a scripted model would; what is tested is the judge's
side: what it sends, how it reads replies (structured or free text), how
passage numbers become citations, what an unreadable reply becomes, the
concurrency, the cache, and the registry entry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_fakes import Action, FakeOpenAI, free_port

from ceg_cli.errors import BackendError, ExitStatus, UsageError
from ceg_cli.judges import create_judge, judge_names
from ceg_cli.judges.llm_judges.llm import LlmJudge
from ceg_cli.llm.prompts import JUDGE_SCHEMA, parse_judge_reply
from ceg_cli.types import (
    CONTRADICTED,
    FACTUAL,
    JUDGE_ERROR,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    NOT_JUDGED,
    SUPPORTED,
    Evidence,
    JudgeItem,
    Segment,
)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    yield server
    server.close()


def make_judge(fake: FakeOpenAI, tmp_path: Path, **options: Any) -> LlmJudge:
    opts = {
        "base_url": fake.base_url,
        "cache_path": str(tmp_path / "llm.sqlite"),
        "backoff": 0.01,
        **options,
    }
    judge = create_judge("llm:fake-model", opts)
    assert isinstance(judge, LlmJudge)
    return judge


def passages(*texts: str) -> tuple[Evidence, ...]:
    return tuple(
        Evidence(passage_id=i, doc_id=f"d{i}", title=f"Doc {i}", text=t, similarity=0.8)
        for i, t in enumerate(texts, 1)
    )


def item(text: str, evidence: tuple[Evidence, ...] | None = None,
         question: str | None = "Who did Aristotle teach?") -> JudgeItem:
    if evidence is None:
        evidence = passages("Aristotle tutored Alexander the Great.", "Plato taught Aristotle.",
                            "Caesar was born in 100 BC.")
    return JudgeItem(Segment(0, 0, len(text), text), evidence, question, text)


def reply(label: str, supporting: list[int] = (), contradicting: list[int] = (),  # type: ignore[assignment]
          reason: str = "because") -> str:
    return json.dumps({"label": label, "supporting_passages": list(supporting),
                       "contradicting_passages": list(contradicting), "reason": reason})


def segment_of(body: dict[str, Any]) -> str:
    user = body["messages"][-1]["content"]
    return user.split("<segment>\n", 1)[1].split("\n</segment>", 1)[0]


# --- registry, creation ------------------------------------------------------------


def test_the_judge_is_registered_with_its_usage() -> None:
    assert any(name.startswith("llm:MODEL") for name in judge_names())
    with pytest.raises(UsageError, match="llm:MODEL"):
        create_judge("llm", {})


def test_creating_the_judge_checks_the_endpoint_and_the_model(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    judge = make_judge(fake, tmp_path)
    assert judge.name == "llm:fake-model"
    assert "FELM prompt" in judge.method
    assert f"at 127.0.0.1:{fake.server.server_address[1]}:" in judge.method
    assert fake.model_requests == 1 and fake.chat_calls == 0
    with pytest.raises(BackendError, match="'gpt-x' is not served") as err:
        create_judge("llm:gpt-x", {"base_url": fake.base_url, "cache": False})
    assert err.value.exit_status == ExitStatus.RUNTIME


def test_an_unreachable_endpoint_fails_before_any_work() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(BackendError, match="cannot reach the LLM endpoint") as err:
        create_judge("llm:m", {"base_url": url, "cache": False})
    assert err.value.exit_status == ExitStatus.RUNTIME


@pytest.mark.parametrize(
    "options",
    [{"temperature": 3}, {"temperature": "hot"}, {"count_unparsable_as": "maybe"},
     {"structured": "sometimes"}],
)
def test_bad_options_are_usage_errors(
    fake: FakeOpenAI, tmp_path: Path, options: dict[str, Any]
) -> None:
    with pytest.raises(UsageError):
        make_judge(fake, tmp_path, **options)


# --- requests and verdicts ---------------------------------------------------------


def test_requests_carry_the_prompt_schema_and_temperature(fake: FakeOpenAI, tmp_path: Path) -> None:
    judge = make_judge(fake, tmp_path)
    judge.judge([item("Aristotle tutored Alexander the Great.")])
    body = fake.requests[0]
    assert body["model"] == "fake-model"
    assert body["temperature"] == 0
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == JUDGE_SCHEMA
    user = body["messages"][-1]["content"]
    assert "<question>\nWho did Aristotle teach?\n</question>" in user
    assert segment_of(body) == "Aristotle tutored Alexander the Great."
    assert '<document number="3" title="Doc 3">\nCaesar was born in 100 BC.\n</document>' in user


def test_verdicts_follow_the_reply_and_cite_the_named_passages(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    replies = {
        "Aristotle tutored Alexander the Great.": reply("Factual", [1, 9, 0, 1], reason="doc 1"),
        "Aristotle tutored Caesar.": reply("Nonfactual", contradicting=[3], reason="wrong era"),
        "Aristotle wrote 400 books.": reply("Nonfactual", reason="nothing about books"),
        "Aristotle was Greek.": reply("Factual"),
    }
    fake.respond = lambda body: replies[segment_of(body)]
    judge = make_judge(fake, tmp_path)
    out = judge.judge([item(text) for text in replies])
    supported, contradicted, unsupported, no_passage = out
    # 9 and 0 are not passage numbers (1..3): ignored; the repeat is cited once.
    assert (supported.label, supported.verdict, supported.cited) == (FACTUAL, SUPPORTED, (0,))
    assert supported.reason == "doc 1" and supported.score == 1.0
    assert (contradicted.label, contradicted.verdict, contradicted.cited) == (
        NONFACTUAL, CONTRADICTED, (),
    )
    assert contradicted.reason == "passage [3] contradicts it: wrong era"
    assert (unsupported.label, unsupported.verdict) == (NONFACTUAL, NOT_ENOUGH_EVIDENCE)
    assert unsupported.reason == "nothing about books"
    assert (no_passage.label, no_passage.verdict, no_passage.cited) == (FACTUAL, SUPPORTED, ())
    assert "without naming a supporting passage" in no_passage.reason


def test_no_claim_and_no_evidence_need_no_call(fake: FakeOpenAI, tmp_path: Path) -> None:
    judge = make_judge(fake, tmp_path)
    greeting, bare = judge.judge([item("I hope this helps!"), item("Aristotle was 90.", ())])
    assert (greeting.label, greeting.verdict) == (FACTUAL, NO_CLAIM)
    assert (bare.label, bare.verdict) == (NONFACTUAL, NOT_ENOUGH_EVIDENCE)
    assert fake.chat_calls == 0


def test_identical_prompts_in_a_batch_are_sent_once(fake: FakeOpenAI, tmp_path: Path) -> None:
    judge = make_judge(fake, tmp_path, cache=False)
    out = judge.judge([item("Aristotle was Greek.")] * 3 + [item("Plato was Greek.")])
    assert len(out) == 4 and out[0] == out[1] == out[2]
    assert fake.chat_calls == 2


def test_requests_run_concurrently_and_verdicts_stay_in_order(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    def respond(body: dict[str, Any]) -> Action:
        number = int(segment_of(body).split()[-1].rstrip("."))
        return Action(content=reply("Factual" if number % 2 else "Nonfactual", [1]), delay=0.15)

    fake.respond = respond
    judge = make_judge(fake, tmp_path, concurrency=4)
    out = judge.judge([item(f"Aristotle counted to {n}.") for n in range(10)])
    assert [v.label for v in out] == [FACTUAL if n % 2 else NONFACTUAL for n in range(10)]
    assert fake.max_in_flight == 4


# --- structured output and free text -----------------------------------------------------


def test_a_server_without_structured_output_gets_free_text_requests(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    def respond(body: dict[str, Any]) -> Action:
        if "response_format" in body:
            return Action(status=400, error="response_format is not supported")
        return Action(content="Label: Nonfactual\nContradicting passages: [2]\nReason: no.")

    fake.respond = respond
    judge = make_judge(fake, tmp_path)
    first, second = judge.judge([item("Aristotle tutored Caesar.")]), judge.judge(
        [item("Aristotle tutored Nero.")]
    )
    assert first[0].verdict == second[0].verdict == CONTRADICTED
    assert second[0].reason == "passage [2] contradicts it: no."
    # Each dialect is tried once, then free text for everything after.
    formats = [b.get("response_format", {}).get("type") for b in fake.requests]
    assert formats == ["json_schema", "json_object", None, None]
    assert judge.response_format == "text"


def test_a_llama_cpp_python_server_gets_json_mode_with_the_schema(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    # llama-cpp-python's server answers an unknown response_format type with
    # HTTP 500 "validation error" and takes {"type": "json_object", "schema": ...}.
    def respond(body: dict[str, Any]) -> Action | str:
        if body.get("response_format", {}).get("type") == "json_schema":
            return Action(status=500, error="1 validation error: Input should be 'text' or "
                          "'json_object'")
        assert body["response_format"]["schema"] == JUDGE_SCHEMA
        return reply("Factual", [1])

    fake.respond = respond
    judge = make_judge(fake, tmp_path, max_retries=3)
    out = judge.judge([item(f"Aristotle counted to {n}.") for n in range(3)])
    assert [v.verdict for v in out] == [SUPPORTED] * 3
    assert judge.response_format == "json_object"
    formats = [b["response_format"]["type"] for b in fake.requests]
    assert formats.count("json_schema") >= 1 and formats[-1] == "json_object"
    assert judge.usage["retries"] == 0  # a validation error is not worth retrying


def test_a_rerun_makes_no_request_even_where_the_first_dialect_was_rejected(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    def respond(body: dict[str, Any]) -> Action | str:
        if body.get("response_format", {}).get("type") == "json_schema":
            return Action(status=400, error="json_schema is not supported")
        return reply("Factual", [1])

    fake.respond = respond
    items = [item(f"Aristotle counted to {n}.") for n in range(3)]
    first = make_judge(fake, tmp_path).judge(items)
    sent = fake.chat_calls
    rerun = make_judge(fake, tmp_path)
    assert rerun.judge(items) == first
    assert fake.chat_calls == sent  # not even the rejected json_schema request again
    assert rerun.response_format == "json_object"
    # A new segment in the re-run goes straight to the dialect that works.
    rerun.judge([item("Aristotle counted to 99.")])
    assert fake.requests[-1]["response_format"]["type"] == "json_object"
    assert fake.chat_calls == sent + 1


def test_structured_text_never_sends_a_schema(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.respond = lambda body: "Factual. Supporting passages: 1, 2"
    judge = make_judge(fake, tmp_path, structured="text")
    (verdict,) = judge.judge([item("Aristotle was a student of Plato.")])
    assert (verdict.label, verdict.cited) == (FACTUAL, (0, 1))
    assert "response_format" not in fake.requests[0]


def test_a_rejected_request_is_not_judged_once_the_schema_is_known_to_work(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    judge = make_judge(fake, tmp_path)
    judge.judge([item("Aristotle was Greek.")])
    fake.script = [Action(status=400, error="prompt too long")]
    (verdict,) = judge.judge([item("Aristotle was Macedonian.")])
    assert (verdict.label, verdict.verdict) == (NOT_JUDGED, JUDGE_ERROR)
    assert "prompt too long" in verdict.reason
    assert fake.chat_calls == 2


# --- unreadable replies ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "action, why",
    [
        (Action(content="I cannot decide."), "says neither Factual nor Nonfactual"),
        (Action(content="It is Factual, or maybe Nonfactual."), "says neither"),
        (Action(content='{"label": "True"}'), "says neither"),
        (Action(content=""), "reply was empty"),
        (Action(raw=b"<html>proxy error</html>"), "not a chat completion"),
    ],
    ids=["no-label", "both-labels", "other-label", "empty", "not-json"],
)
def test_an_unreadable_reply_is_not_judged_never_factual(
    fake: FakeOpenAI, tmp_path: Path, action: Action, why: str
) -> None:
    fake.script = [action]
    judge = make_judge(fake, tmp_path)
    (verdict,) = judge.judge([item("Aristotle tutored Caesar.")])
    assert (verdict.label, verdict.verdict, verdict.score) == (NOT_JUDGED, JUDGE_ERROR, 0.0)
    assert why in verdict.reason


def test_unreadable_replies_can_be_counted_as_nonfactual(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.respond = lambda body: "no idea"
    judge = make_judge(fake, tmp_path, count_unparsable_as=NONFACTUAL)
    (verdict,) = judge.judge([item("Aristotle tutored Caesar.")])
    assert (verdict.label, verdict.verdict) == (NONFACTUAL, JUDGE_ERROR)
    assert "counted as nonfactual" in verdict.reason


def test_a_server_failure_stops_the_run(fake: FakeOpenAI, tmp_path: Path) -> None:
    judge = make_judge(fake, tmp_path, max_retries=1)
    fake.respond = lambda body: Action(status=500, error="boom")
    with pytest.raises(BackendError, match="HTTP 500: boom"):
        judge.judge([item("Aristotle tutored Caesar.")])


# --- cache -------------------------------------------------------------------------------


def test_a_rerun_is_answered_from_the_cache_with_zero_calls(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    items = [item(f"Aristotle counted to {n}.") for n in range(6)]
    first = make_judge(fake, tmp_path).judge(items)
    calls = fake.chat_calls
    assert calls == 6
    rerun = make_judge(fake, tmp_path)
    assert rerun.judge(items) == first
    assert fake.chat_calls == calls
    assert rerun.usage == {"calls": 0, "cache_hits": 6, "retries": 0, "prompt_tokens": 0,
                           "completion_tokens": 0}
    uncached = make_judge(fake, tmp_path, cache=False)
    uncached.judge(items)
    assert fake.chat_calls == 2 * calls and uncached.usage["calls"] == 6


def test_the_cache_dir_option(fake: FakeOpenAI, tmp_path: Path) -> None:
    judge = create_judge("llm:fake-model", {"base_url": fake.base_url,
                                            "cache_dir": str(tmp_path / "dir")})
    judge.judge([item("Aristotle was Greek.")])
    assert (tmp_path / "dir" / "llm.sqlite").is_file()


# --- the whole run ----------------------------------------------------------------------


def test_a_check_run_with_the_llm_judge(
    fake: FakeOpenAI, tmp_path: Path, hash_index: Path, hash_model: None
) -> None:
    from ceg_cli.check.run import CheckRun, RunSettings

    responses = tmp_path / "r.jsonl"
    responses.write_text(
        '{"id": "a", "question": "Who?", "response": "Aristotle was a philosopher. Thanks!"}\n'
    )
    fake.respond = lambda body: reply("Factual", [1, 2])
    out = tmp_path / "out.jsonl"
    settings = RunSettings.resolve(
        responses=str(responses), index=hash_index, out=out, judge="llm:fake-model",
        top_k=3, threshold=-1.0,
        judge_options={"base_url": fake.base_url, "cache_path": str(tmp_path / "c.sqlite")},
    )
    run = CheckRun(settings)
    try:
        run.execute()
    finally:
        run.close()
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["judge"]["name"] == "llm:fake-model"
    first, thanks = record["segments"]
    assert first["verdict"] == SUPPORTED and len(first["citations"]) == 2
    assert thanks["verdict"] == NO_CLAIM
    assert fake.chat_calls == 1


# --- the parser -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, factual, supporting, contradicting",
    [
        (reply("Factual", [1, 2]), True, (1, 2), ()),
        (reply("Nonfactual", [], [3]), False, (), (3,)),
        ('```json\n{"label": "Nonfactual", "supporting_passages": []}\n```', False, (), ()),
        ('Sure! {"label": "factual", "supporting_passages": ["1", 2]} Done.', True, (1, 2), ()),
        ('{"Verdict": "Non-factual"}', False, (), ()),
        ('{"label": "Factual", "supporting_passages": [1], "reason": "cut sh', True, (1,), ()),
        ("Nonfactual", False, (), ()),
        ("NON-FACTUAL.", False, (), ()),
        ("The answer: Factual\nSupporting passages: 1, 3", True, (1, 3), ()),
        ("Label = not factual. The segment mentions Factual things.", False, (), ()),
        ("Factual", True, (), ()),
    ],
)
def test_parse_judge_reply_reads_json_and_free_text(
    text: str, factual: bool, supporting: tuple[int, ...], contradicting: tuple[int, ...]
) -> None:
    parsed = parse_judge_reply(text)
    assert parsed is not None
    assert (parsed.factual, parsed.supporting, parsed.contradicting) == (
        factual, supporting, contradicting,
    )


@pytest.mark.parametrize(
    "text",
    ["", "   ", "I don't know.", "Factual or Nonfactual?", '{"label": "Maybe"}', "factuality"],
)
def test_parse_judge_reply_refuses_to_guess(text: str) -> None:
    assert parse_judge_reply(text) is None


def test_importing_the_judge_does_not_import_openai() -> None:
    import subprocess
    import sys

    code = "import sys, ceg_cli.judges.llm_judges.llm, ceg_cli.llm; print('openai' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


# --- spans: the words the model names as unsupported ---------------------------------


def test_the_words_the_model_names_become_spans_and_words_not_in_the_segment_are_dropped(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    import unicodedata

    from ceg_cli.check.pipeline import CheckOptions, check_batch
    from ceg_cli.types import Context, ResponseInput

    segment = unicodedata.normalize("NFD", "Aristotle tutored Cäsar in 1812.")
    fake.respond = lambda body: json.dumps({
        "label": "Nonfactual", "supporting_passages": [], "contradicting_passages": [1],
        "unsupported_words": ["cäsar", "1812", "Napoleon"], "reason": "wrong pupil"})
    judge = make_judge(fake, tmp_path)
    verdict, = judge.judge([item(segment)])
    assert verdict.label == NONFACTUAL and verdict.verdict == CONTRADICTED
    # Found as written or case-folded, in NFD text too; "Napoleon" is not in it: dropped.
    assert [(s.kind, unicodedata.normalize("NFC", s.text)) for s in verdict.spans] == [
        ("word", "Cäsar"), ("word", "1812")]
    for s in verdict.spans:
        assert segment[s.start:s.end] == s.text
    assert judge.spans_dropped == 1
    assert "1 word the LLM named as unsupported not in the segment: dropped" in verdict.reason
    # The schema asks for them; a Factual reply gives none.
    assert "unsupported_words" in JUDGE_SCHEMA["required"]
    assert parse_judge_reply(reply("Factual", [1])).unsupported == ()

    # Through the check: the spans point into the response, and a reply that names no
    # word in the segment leaves the spans every judge gets (here the whole segment).
    fake.respond = lambda body: json.dumps({
        "label": "Nonfactual", "supporting_passages": [], "contradicting_passages": [],
        "unsupported_words": ["Caesar"], "reason": "no"})
    response = "Aristotle was a student of Plato. Aristotle tutored Napoleon's tutor."
    line = ResponseInput("r", 1, response, None,
                         contexts=(Context(1, "Aristotle was a student of Plato."),))
    from ceg_cli.check.ctxsearch import ContextSearch

    search = ContextSearch(lambda: None)  # type: ignore[arg-type,return-value]
    out, = check_batch([line], None, judge, CheckOptions(evidence="contexts"), search)
    flagged = [r for r in out.segments if r.verdict.label == NONFACTUAL]
    assert len(flagged) == 2
    # The offline judge finds the first supported (whole segment), the second not.
    assert [(s.kind, s.text) for s in flagged[0].spans] == [
        ("segment", "Aristotle was a student of Plato.")]
    # The second: the offline judge's spans (the LLM's "Caesar" is not in it).
    assert [(s.kind, s.text) for s in flagged[1].spans] == [
        ("word", "tutored"), ("name", "Napoleon's")]
    for r in out.segments:
        for s in r.spans:
            assert response[s.start:s.end] == s.text
    judge.close()
