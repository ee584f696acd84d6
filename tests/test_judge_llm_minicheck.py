"""``--llm-prompt minicheck``: MiniCheck's prompt, scored from log-probabilities.

The reference is Liyan06/MiniCheck at commit e9fd26ef8e542ac4021fa9d4493bf915b2bd68dc
(the newest commit touching its code): ``minicheck/utils.py`` holds ``SYSTEM_PROMPT``
and ``USER_PROMPT``; ``minicheck/inference.py``, class ``LLMCheck``, fills them
(``apply_chat_template``), generates one token at temperature 0 with ``logprobs=5``
and sums ``exp(logprob)`` over the alternatives whose ``decoded_token.lower()`` is
``"yes"`` (``get_support_prob``); ``score`` cuts the document into chunks of
``max_model_len - 300`` tokens, splits the claim into sentences, and takes the
minimum over sentences of the maximum over chunks, supported above 0.5.

These tests talk to a fake endpoint on loopback (``llm_fakes``): what is tested
is the judge's side. The same path against the real llama.cpp server is in
tests/test_llm_server.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_fakes import Action, FakeOpenAI

from ceg_cli.judges import create_judge
from ceg_cli.judges.llm_judges.llm_minicheck import LlmMiniCheckJudge
from ceg_cli.llm.cache import LLMCache
from ceg_cli.llm.client import ClientSettings, LLMClient
from ceg_cli.llm.minicheck import minicheck_messages, support_from_logprobs
from ceg_cli.types import (
    FACTUAL,
    JUDGE_ERROR,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    NOT_JUDGED,
    SUPPORTED,
    Evidence,
    JudgeItem,
    Segment,
)

#: The authors' strings, copied from minicheck/utils.py at e9fd26e.
AUTHORS_SYSTEM = (
    'Determine whether the provided claim is consistent with the corresponding document. '
    'Consistency in this context implies that all information presented in the claim is '
    'substantiated by the document. If not, it should be considered inconsistent. Please '
    'assess the claim\'s consistency with the document by responding with either "Yes" or "No".'
)
AUTHORS_USER = "Document: [DOCUMENT]\nClaim: [CLAIM]"

#: The first token's alternatives as llama-cpp-python 0.3.36's server sent them for
#: SmolLM2-135M-Instruct (Q4_1), MiniCheck's prompt, document and claim
#: "Paris is the capital of France.", temperature 0, top_logprobs 5.
RECORDED_LLAMA_CPP = {"content": [{
    "token": "The", "logprob": -1.7380651235580444, "bytes": None, "top_logprobs": [
        {"token": "The", "logprob": -1.7380651235580444, "bytes": None},
        {"token": "No", "logprob": -2.3761000633239746, "bytes": None},
        {"token": "Yes", "logprob": -2.747588634490967, "bytes": None},
        {"token": "This", "logprob": -2.771409511566162, "bytes": None},
        {"token": "To", "logprob": -2.872401714324951, "bytes": None},
    ]}], "refusal": None}
#: A reply shaped as vLLM's with case and space variants of the answer.
VARIANTS = [("Yes", -0.2), ("No", -2.1), ("yes", -3.3), (" Yes", -4.0), ("YES", -6.5)]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    yield server
    server.close()


def completion_body(text: str, top: list[tuple[str, float]] | None,
                    model: str = "fake-model") -> bytes:
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                              "finish_reason": "length"}
    if top is not None:
        choice["logprobs"] = {"content": [{
            "token": top[0][0], "logprob": top[0][1], "bytes": None,
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in top],
        }]}
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": model,
            "choices": [choice], "usage": {"prompt_tokens": 9, "completion_tokens": 1,
                                           "total_tokens": 10}}
    return json.dumps(body).encode()


def answer(text: str, top: list[tuple[str, float]] | None) -> Action:
    return Action(raw=completion_body(text, top))


def make_judge(fake: FakeOpenAI, tmp_path: Path, **options: Any) -> LlmMiniCheckJudge:
    opts = {"base_url": fake.base_url, "cache_path": str(tmp_path / "llm.sqlite"),
            "backoff": 0.01, "prompt": "minicheck", **options}
    judge = create_judge("llm:fake-model", opts)
    assert isinstance(judge, LlmMiniCheckJudge)
    return judge


def evidence(*texts: str) -> tuple[Evidence, ...]:
    return tuple(Evidence(i, f"d{i}", f"Doc {i}", t, 0.8) for i, t in enumerate(texts, 1))


def item(text: str, ev: tuple[Evidence, ...] | None = None) -> JudgeItem:
    ev = evidence("Paris is the capital of France.") if ev is None else ev
    return JudgeItem(Segment(0, 0, len(text), text), ev, None, text)


def user_of(body: dict[str, Any]) -> str:
    return body["messages"][-1]["content"]


# --- the authors' prompt and scoring -----------------------------------------------


def test_the_prompt_is_the_authors_template() -> None:
    doc = "Paris is the capital of France.\nIt has 2.1 million inhabitants."
    claim = "Paris is the capital of France."
    expected_user = AUTHORS_USER.replace("[DOCUMENT]", doc).replace("[CLAIM]", claim)
    assert minicheck_messages(doc, claim) == [
        {"role": "system", "content": AUTHORS_SYSTEM},
        {"role": "user", "content": expected_user},
    ]
    assert expected_user == ("Document: Paris is the capital of France.\nIt has 2.1 million "
                             "inhabitants.\nClaim: Paris is the capital of France.")


def test_a_document_holding_the_claim_placeholder_is_left_as_it_is() -> None:
    # The authors' str.replace would paste the claim into such a document; here it stays.
    user = minicheck_messages("See [CLAIM] below.", "X is Y.")[1]["content"]
    assert user == "Document: See [CLAIM] below.\nClaim: X is Y."


def test_support_from_a_recorded_llama_cpp_payload_equals_the_authors_sum() -> None:
    top = [(t["token"], t["logprob"]) for t in RECORDED_LLAMA_CPP["content"][0]["top_logprobs"]]
    # get_support_prob by hand: only "Yes" reads "yes" in lower case.
    assert abs(support_from_logprobs(top) - math.exp(-2.747588634490967)) < 1e-9


def test_support_sums_every_yes_variant_as_the_authors_do() -> None:
    # "Yes", "yes" and "YES" lower to "yes"; " Yes" does not; "No" is not normalised against.
    hand = math.exp(-0.2) + math.exp(-3.3) + math.exp(-6.5)
    assert abs(support_from_logprobs(VARIANTS) - hand) < 1e-9


# --- requests, verdicts ------------------------------------------------------------


def test_requests_ask_for_the_first_tokens_top_5_logprobs(fake: FakeOpenAI,
                                                          tmp_path: Path) -> None:
    fake.respond = lambda body: answer("Yes", VARIANTS)
    judge = make_judge(fake, tmp_path)
    (verdict,) = judge.judge([item("Paris is the capital of France.")])
    (body,) = fake.requests
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["max_tokens"] == 1 and body["temperature"] == 0
    assert "response_format" not in body
    assert body["messages"] == minicheck_messages(
        "Paris is the capital of France.", "Paris is the capital of France.")
    hand = math.exp(-0.2) + math.exp(-3.3) + math.exp(-6.5)
    assert verdict.label == FACTUAL and verdict.verdict == SUPPORTED
    assert abs(verdict.score - hand) < 1e-9
    assert verdict.cited == (0,)
    assert verdict.reason == f"P(yes) {hand:.3f} from the first token's log-probabilities"
    assert "MiniCheck's prompt" in judge.method


def test_the_recorded_payload_through_the_judge(fake: FakeOpenAI, tmp_path: Path) -> None:
    top = [(t["token"], t["logprob"]) for t in RECORDED_LLAMA_CPP["content"][0]["top_logprobs"]]
    fake.respond = lambda body: answer("The", top)
    (verdict,) = make_judge(fake, tmp_path).judge([item("Paris is the capital of France.")])
    # The text ("The") is not read: the alternatives hold an answer.
    assert abs(verdict.score - math.exp(-2.747588634490967)) < 1e-9
    assert verdict.label == NONFACTUAL and verdict.verdict == NOT_ENOUGH_EVIDENCE
    assert verdict.cited == () and verdict.reason.endswith("; needs > 0.5")


def test_chunks_and_sentences_take_the_weakest_sentences_best_chunk(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    support = {  # (chunk's first words, sentence) -> P(yes)
        ("Paris", "Paris is in France."): 0.9, ("Lyon", "Paris is in France."): 0.2,
        ("Paris", "Lyon is in France."): 0.3, ("Lyon", "Lyon is in France."): 0.7,
    }

    def respond(body: dict[str, Any]) -> Action:
        doc, claim = user_of(body).removeprefix("Document: ").split("\nClaim: ")
        return answer("Yes", [("Yes", math.log(support[(doc.split()[0], claim)])),
                              ("No", -5.0)])

    fake.respond = respond
    judge = make_judge(fake, tmp_path, chunk_words=6)
    ev = evidence("Paris is a city in France.", "Lyon is a city in France.")
    (verdict,) = judge.judge([item("Paris is in France. Lyon is in France.", ev)])
    assert len(fake.requests) == 4  # 2 chunks x 2 sentences
    assert abs(verdict.score - min(max(0.9, 0.2), max(0.3, 0.7))) < 1e-9
    assert verdict.label == FACTUAL and verdict.cited == (0, 1)
    assert verdict.reason.endswith("best of 2 chunks, weakest of 2 sentences")


def test_no_claim_and_no_evidence_need_no_call(fake: FakeOpenAI, tmp_path: Path) -> None:
    verdicts = make_judge(fake, tmp_path).judge(
        [item("Thanks!"), item("Paris is big.", evidence())])
    assert [v.label for v in verdicts] == [FACTUAL, NONFACTUAL]
    assert fake.chat_calls == 0


# --- without log-probabilities -----------------------------------------------------


def test_an_endpoint_without_logprobs_is_read_from_the_text_with_one_warning(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    fake.respond = lambda body: answer("No" if "Lyon" in user_of(body) else "Yes.", None)
    warnings: list[str] = []
    judge = make_judge(fake, tmp_path, on_warning=warnings.append, concurrency=2)
    verdicts = judge.judge([item("Paris is the capital of France."),
                            item("Lyon is the capital of France."),
                            item("Paris is in France.")])
    assert [(v.label, v.score) for v in verdicts] == [
        (FACTUAL, 1.0), (NONFACTUAL, 0.0), (FACTUAL, 1.0)]
    assert verdicts[0].reason == "the LLM answered yes (no log-probabilities from the " \
        "endpoint: scored 1)"
    assert len(warnings) == 1 and "sent no log-probabilities" in warnings[0]
    assert "llm:fake-model" in warnings[0]


def test_an_endpoint_that_rejects_logprobs_is_asked_again_without(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    def respond(body: dict[str, Any]) -> Action:
        if "logprobs" in body:
            return Action(status=400, error="logprobs is not supported")
        return answer("Yes", None)

    fake.respond = respond
    warnings: list[str] = []
    judge = make_judge(fake, tmp_path, on_warning=warnings.append, concurrency=1)
    verdicts = judge.judge([item("Paris is the capital of France."), item("Paris is big.")])
    assert [(v.label, v.score) for v in verdicts] == [(FACTUAL, 1.0), (FACTUAL, 1.0)]
    # One refusal, then no request asks for them again.
    assert ["logprobs" in body for body in fake.requests] == [True, False, False]
    assert judge.scoring == "text"
    assert len(warnings) == 1 and "logprobs is not supported" in warnings[0]


def test_a_rejection_after_logprobs_worked_is_that_requests_failure(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    fake.script = [answer("Yes", VARIANTS), Action(status=400, error="prompt too long")]
    judge = make_judge(fake, tmp_path, concurrency=1)
    ok, = judge.judge([item("Paris is the capital of France.")])
    failed, = judge.judge([item("Paris is big.")])
    assert ok.label == FACTUAL
    assert failed.label == NOT_JUDGED and failed.verdict == JUDGE_ERROR
    assert "prompt too long" in failed.reason
    assert judge.scoring == "logprobs" and len(fake.requests) == 2


def test_a_reply_that_is_no_answer_is_not_judged_never_scored_zero(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    fake.respond = lambda body: answer("The", [("The", -0.5), ("This", -1.5), ("A", -2.0)])
    (verdict,) = make_judge(fake, tmp_path).judge([item("Paris is the capital of France.")])
    assert verdict.label == NOT_JUDGED and verdict.verdict == JUDGE_ERROR
    assert "neither yes nor no" in verdict.reason and "'This'" in verdict.reason
    (counted,) = make_judge(fake, tmp_path, count_unparsable_as="nonfactual", cache=False).judge(
        [item("Paris is the capital of France.")])
    assert counted.label == NONFACTUAL and counted.reason.endswith("counted as nonfactual as "
                                                                   "configured")


# --- the cache ----------------------------------------------------------------------


def test_a_rerun_reads_the_logprobs_from_the_cache(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.respond = lambda body: answer("Yes", VARIANTS)
    first = make_judge(fake, tmp_path).judge([item("Paris is the capital of France.")])
    again = make_judge(fake, tmp_path)
    assert again.judge([item("Paris is the capital of France.")]) == first
    assert again.usage["calls"] == 0 and again.usage["cache_hits"] == 1
    assert len(fake.requests) == 1


def test_a_cached_text_only_reply_never_answers_a_request_for_logprobs(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    fake.script = [answer("Yes", None), answer("Yes", VARIANTS)]
    messages = minicheck_messages("Paris is the capital of France.", "Paris is in France.")
    client = LLMClient(ClientSettings(base_url=fake.base_url),
                       cache=LLMCache(tmp_path / "llm.sqlite"))
    try:
        plain = client.chat("fake-model", messages, max_tokens=1)
        asked = client.chat("fake-model", messages, max_tokens=1, top_logprobs=5)
        again = client.chat("fake-model", messages, max_tokens=1, top_logprobs=5)
    finally:
        client.close()
    assert plain.top_logprobs is None and not plain.cached
    assert not asked.cached and asked.top_logprobs == tuple(VARIANTS)
    assert again.cached and again.top_logprobs == tuple(VARIANTS)
    assert len(fake.requests) == 2


def test_a_reply_without_logprobs_is_cached_as_such(fake: FakeOpenAI, tmp_path: Path) -> None:
    # The re-run finds that the endpoint sent none, and warns again.
    fake.respond = lambda body: answer("Yes", None)
    warnings: list[str] = []
    make_judge(fake, tmp_path, on_warning=warnings.append).judge(
        [item("Paris is the capital of France.")])
    assert len(warnings) == 1
    warnings.clear()
    again = make_judge(fake, tmp_path, on_warning=warnings.append)
    (verdict,) = again.judge([item("Paris is the capital of France.")])
    assert verdict.score == 1.0 and again.usage["cache_hits"] == 1 and len(fake.requests) == 1
    assert len(warnings) == 1


# --- the CLI -------------------------------------------------------------------------


def test_ceg_check_with_the_minicheck_prompt(
    fake: FakeOpenAI, tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import HashEmbedder

    import ceg_cli.index.dense.embedding

    # The record's one context is its evidence whatever the vectors: no model needed.
    monkeypatch.setattr(ceg_cli.index.dense.embedding, "load_embedder",
                        lambda *_a, **_k: HashEmbedder())
    monkeypatch.delenv("CEG_INDEX", raising=False)
    fake.respond = lambda body: answer("No", None)
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({
        "id": "a", "response": "Lyon is the capital of France.",
        "contexts": ["Paris is the capital of France."]}) + "\n")
    out = tmp_path / "out.jsonl"
    result = run_cli("check", responses, "--judge", "llm:fake-model", "--llm-prompt",
                     "minicheck", "--llm-base-url", fake.base_url, "--evidence", "contexts",
                     "--cache-dir", tmp_path / "cache", "--out", out, "--quiet")
    assert result.exit_code == 0, result.stderr
    (segment,) = json.loads(out.read_text())["segments"]
    assert segment["label"] == NONFACTUAL and segment["score"] == 0.0
    assert result.stderr.count("sent no log-probabilities") == 1
    assert fake.requests[0]["top_logprobs"] == 5
    bad = run_cli("check", responses, "--judge", "llm:fake-model", "--llm-prompt", "felm")
    assert bad.exit_code == 2 and "felm" in bad.stderr


def test_ceg_eval_takes_the_llm_options_check_takes(
    fake: FakeOpenAI, tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ceg eval --judge llm:...`` could use only $OPENAI_BASE_URL and the paper's prompt:
    now the endpoint, prompt, temperature, cache and what an unreadable reply counts as
    are check's options."""
    monkeypatch.delenv("CEG_INDEX", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    fake.respond = lambda body: answer("Yes", [("Yes", -0.1), ("No", -2.4)])
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in (
        {"id": "a", "response": "Paris is the capital of France.", "label": True,
         "contexts": ["Paris is the capital of France."]},
        {"id": "b", "response": "Lyon is the capital of France.", "label": False,
         "contexts": ["Paris is the capital of France."]})))
    metrics = tmp_path / "metrics.json"
    result = run_cli("eval", data, "--judge", "llm:fake-model", "--llm-base-url", fake.base_url,
                     "--llm-prompt", "minicheck", "--temperature", "0.5", "--concurrency", "1",
                     "--cache-dir", tmp_path / "cache", "--evidence", "contexts",
                     "--json", metrics, "--quiet")
    assert result.exit_code == 0, result.stderr
    assert "warning" not in result.stderr
    run = json.loads(metrics.read_text())["run"]
    assert run["judge"] == "llm:fake-model" and "MiniCheck's prompt" in run["judge_method"]
    assert len(fake.requests) == 2 and fake.max_in_flight == 1
    assert all(r["top_logprobs"] == 5 and r["temperature"] == 0.5 for r in fake.requests)
    assert (tmp_path / "cache" / "llm.sqlite").is_file()
    # The same run again is answered from that cache: no call.
    again = run_cli("eval", data, "--judge", "llm:fake-model", "--llm-base-url", fake.base_url,
                    "--llm-prompt", "minicheck", "--temperature", "0.5",
                    "--cache-dir", tmp_path / "cache", "--evidence", "contexts", "--quiet")
    assert again.exit_code == 0 and len(fake.requests) == 2
    # An unreadable reply counts as --unparsable-as says (the paper's prompt, no cache).
    fake.respond = lambda body: "I cannot tell."
    result = run_cli("eval", data, "--judge", "llm:fake-model", "--llm-base-url", fake.base_url,
                     "--no-cache", "--unparsable-as", "nonfactual", "--evidence", "contexts",
                     "--json", metrics, "--quiet")
    assert result.exit_code == 0, result.stderr
    figures = json.loads(metrics.read_text())
    assert figures["responses"]["predicted_nonfactual"] == 2


# --- reading log-probabilities ------------------------------------------------------


def test_logprob_pairs_take_only_tokens_and_numbers() -> None:
    from ceg_cli.llm.logprobs import logprob_pairs

    assert logprob_pairs([["Yes", -0.5], ["No", float("-inf")]]) == (
        ("Yes", -0.5), ("No", float("-inf")))
    assert logprob_pairs([["Yes", 1e-7]]) == (("Yes", 0.0),)  # a rounding error above 0
    for bad in ([], None, [["Yes", float("nan")]], [["Yes", "-0.5"]], [[1, -0.5]],
                [["Yes", True]], [["Yes"]], "Yes"):
        assert logprob_pairs(bad) is None, bad


def test_a_malformed_logprobs_payload_falls_back_to_the_text(fake: FakeOpenAI,
                                                             tmp_path: Path) -> None:
    body = json.loads(completion_body("Yes", [("Yes", -0.1)]))
    body["choices"][0]["logprobs"]["content"][0]["top_logprobs"] = [{"token": "Yes",
                                                                     "logprob": "high"}]
    fake.respond = lambda _: Action(raw=json.dumps(body).encode())
    warnings: list[str] = []
    judge = make_judge(fake, tmp_path, on_warning=warnings.append)
    (verdict,) = judge.judge([item("Paris is the capital of France.")])
    assert (verdict.label, verdict.score) == (FACTUAL, 1.0) and len(warnings) == 1


def test_a_damaged_cache_entry_is_asked_again(fake: FakeOpenAI, tmp_path: Path) -> None:
    from ceg_cli.llm.cache import cache_key

    fake.respond = lambda body: answer("Yes", VARIANTS)
    messages = minicheck_messages("Paris is the capital of France.", "Paris is in France.")
    cache = LLMCache(tmp_path / "llm.sqlite")
    client = LLMClient(ClientSettings(base_url=fake.base_url), cache=cache)
    try:
        key = cache_key(client.base_url, "fake-model", messages,
                        {"temperature": 0.0, "max_tokens": 1, "logprobs": True,
                         "top_logprobs": 5})
        cache.put(key, "fake-model", {"text": "No", "finish_reason": "length",
                                      "top_logprobs": [["No", -0.1]]})
        stored = client.chat("fake-model", messages, max_tokens=1, top_logprobs=5)
        assert stored.cached and stored.top_logprobs == (("No", -0.1),)  # the key is right
        cache.put(key, "fake-model", {"text": "Yes", "finish_reason": "length",
                                      "top_logprobs": [["Yes", "nan"]]})
        got = client.chat("fake-model", messages, max_tokens=1, top_logprobs=5)
    finally:
        client.close()
    assert not got.cached and got.top_logprobs == tuple(VARIANTS) and len(fake.requests) == 1
