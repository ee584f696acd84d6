"""LLMClient and LLMCache against a fake OpenAI-compatible server on loopback.

The fake scripts what a real server does only now and then: rate limits,
timeouts, server errors, malformed replies, an unknown model, no server.
Backoff sleeps are recorded instead of slept, so the tests are fast.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path

import pytest
from llm_fakes import Action, FakeOpenAI, free_port

from ceg_cli.errors import BackendError, ExitStatus, UsageError
from ceg_cli.llm import (
    ClientSettings,
    LLMCache,
    LLMClient,
    MalformedReply,
    RequestRejected,
    cache_key,
    default_cache_path,
    regenerate_response,
)
from ceg_cli.llm.client import _retry_after
from ceg_cli.types import Evidence

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    yield server
    server.close()


class Sleeps(list):
    """Records the backoff delays instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_client(
    base_url: str,
    *,
    cache: LLMCache | None = None,
    sleeps: Sleeps | None = None,
    **settings: object,
) -> LLMClient:
    options = {"max_retries": 3, "backoff": 0.5, "timeout": 5.0, **settings}
    return LLMClient(
        ClientSettings(base_url=base_url, **options),  # type: ignore[arg-type]
        cache=cache,
        sleep=sleeps if sleeps is not None else Sleeps(),
    )


# --- requests, usage -------------------------------------------------------------


def test_chat_returns_the_reply_and_counts_calls_and_tokens(fake: FakeOpenAI) -> None:
    fake.respond = lambda body: "hi there"
    client = make_client(fake.base_url)
    reply = client.chat("fake-model", HELLO, temperature=0.3, max_tokens=20)
    assert reply.text == "hi there"
    assert not reply.cached
    sent = fake.requests[0]
    assert sent["model"] == "fake-model"
    assert sent["messages"] == HELLO
    assert sent["temperature"] == 0.3 and sent["max_tokens"] == 20
    assert client.usage.snapshot() == {
        "calls": 1, "cache_hits": 0, "retries": 0, "prompt_tokens": 11, "completion_tokens": 7,
    }


def test_the_api_key_is_sent_but_never_shown(fake: FakeOpenAI) -> None:
    settings = ClientSettings(base_url=fake.base_url, api_key="sk-secret-123")
    client = LLMClient(settings)
    client.chat("fake-model", HELLO)
    assert fake.headers[0]["authorization"] == "Bearer sk-secret-123"
    assert "sk-secret-123" not in repr(settings)
    assert "sk-secret-123" not in repr(client.settings)


def test_settings_take_the_option_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env-host:1/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    from_env = ClientSettings.resolve({})
    assert from_env.base_url == "http://env-host:1/v1"
    assert from_env.api_key == "env-key"
    explicit = ClientSettings.resolve(
        {"base_url": "http://127.0.0.1:9/v1", "api_key": "k", "concurrency": "3"}
    )
    assert (explicit.base_url, explicit.api_key, explicit.concurrency) == (
        "http://127.0.0.1:9/v1", "k", 3,
    )
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert ClientSettings.resolve({}).base_url == "https://api.openai.com/v1"


@pytest.mark.parametrize(
    "options",
    [{"base_url": "localhost:8080"}, {"concurrency": 0}, {"timeout": -1}, {"max_retries": "x"}],
)
def test_bad_settings_are_usage_errors(options: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        ClientSettings.resolve(options)


# --- retries ------------------------------------------------------------------------


def test_a_rate_limit_is_retried_after_the_servers_delay(fake: FakeOpenAI) -> None:
    fake.script = [Action(status=429, headers={"Retry-After": "0.25"})]
    sleeps = Sleeps()
    client = make_client(fake.base_url, sleeps=sleeps)
    assert client.chat("fake-model", HELLO).text.startswith('{"label"')
    assert fake.chat_calls == 2
    assert sleeps == [0.25]
    assert client.usage.retries == 1 and client.usage.calls == 1


def test_retry_after_as_an_http_date_is_waited_for(fake: FakeOpenAI) -> None:
    # RFC 9110 allows Retry-After: <HTTP-date>; some gateways send only that form.
    due = int(time.time()) + 20  # an HTTP date has whole seconds
    fake.script = [Action(status=429, headers={"Retry-After": formatdate(due, usegmt=True)})]
    sleeps = Sleeps()
    client = make_client(fake.base_url, sleeps=sleeps, backoff=0.5)
    started = time.time()
    client.chat("fake-model", HELLO)
    ended = time.time()
    assert fake.chat_calls == 2
    # The wait is the time left until that date (not the 0.5 s backoff).
    assert len(sleeps) == 1 and due - ended <= sleeps[0] <= due - started


def test_retry_after_forms() -> None:
    now = 1_700_000_000.0  # 2023-11-14 22:13:20 GMT
    assert _retry_after({"retry-after": "Tue, 14 Nov 2023 22:13:50 GMT"}, now) == 30.0
    assert _retry_after({"retry-after": "Tue, 14 Nov 2023 22:13:50"}, now) == 30.0
    assert _retry_after({"retry-after": "Tue, 14 Nov 2023 22:00:00 GMT"}, now) == 0.0
    assert _retry_after({"retry-after": "7"}, now) == 7.0
    assert _retry_after({"retry-after-ms": "250", "retry-after": "9"}, now) == 0.25
    assert _retry_after({"retry-after": "soon"}, now) is None
    assert _retry_after({"retry-after": "-3"}, now) is None
    assert _retry_after({}, now) is None


def test_server_errors_back_off_exponentially(fake: FakeOpenAI) -> None:
    fake.script = [Action(status=500), Action(status=502), Action(status=503)]
    sleeps = Sleeps()
    client = make_client(fake.base_url, sleeps=sleeps, backoff=0.5)
    client.chat("fake-model", HELLO)
    assert fake.chat_calls == 4
    assert len(sleeps) == 3
    # 0.5, 1, 2 seconds, each shortened by up to 25% of jitter.
    for delay, full in zip(sleeps, (0.5, 1.0, 2.0)):
        assert 0.75 * full <= delay <= full


def test_persistent_server_errors_end_the_run_after_the_retries(fake: FakeOpenAI) -> None:
    fake.script = [Action(status=503, error="overloaded") for _ in range(10)]
    client = make_client(fake.base_url, max_retries=2)
    with pytest.raises(BackendError, match=r"HTTP 503: overloaded\) after 3 attempts") as err:
        client.chat("fake-model", HELLO)
    assert err.value.exit_status == ExitStatus.RUNTIME
    assert fake.chat_calls == 3


def test_a_timeout_is_retried(fake: FakeOpenAI) -> None:
    fake.script = [Action(delay=1.5)]
    client = make_client(fake.base_url, timeout=0.3)
    assert client.chat("fake-model", HELLO).text
    assert client.usage.retries == 1
    assert fake.chat_calls == 2


def test_repeated_timeouts_are_a_backend_error(fake: FakeOpenAI) -> None:
    fake.script = [Action(delay=1.5), Action(delay=1.5)]
    client = make_client(fake.base_url, timeout=0.3, max_retries=1)
    with pytest.raises(BackendError, match=r"timed out \(0.3s\) after 2 attempts"):
        client.chat("fake-model", HELLO)


def test_an_unreachable_endpoint_is_retried_then_reported() -> None:
    sleeps = Sleeps()
    client = make_client(f"http://127.0.0.1:{free_port()}/v1", sleeps=sleeps, max_retries=2)
    with pytest.raises(BackendError, match="cannot reach the LLM endpoint") as err:
        client.chat("fake-model", HELLO)
    assert "after 3 attempts" in str(err.value)
    assert len(sleeps) == 2


def test_a_rejected_request_is_not_retried(fake: FakeOpenAI) -> None:
    fake.script = [Action(status=400, error="context length exceeded")]
    client = make_client(fake.base_url)
    with pytest.raises(RequestRejected, match="context length exceeded") as err:
        client.chat("fake-model", HELLO)
    assert err.value.status == 400
    assert fake.chat_calls == 1


def test_a_server_error_that_is_a_validation_error_is_not_retried(fake: FakeOpenAI) -> None:
    # llama-cpp-python's server reports request validation errors as HTTP 500.
    fake.script = [Action(status=500, error="1 validation error: response_format.type")]
    client = make_client(fake.base_url)
    with pytest.raises(RequestRejected, match="validation error"):
        client.chat("fake-model", HELLO)
    assert fake.chat_calls == 1 and client.usage.retries == 0


def test_bad_credentials_end_the_run_without_retries(fake: FakeOpenAI) -> None:
    fake.script = [Action(status=401, error="invalid key")]
    client = LLMClient(ClientSettings(base_url=fake.base_url, api_key="sk-wrong-key"))
    with pytest.raises(BackendError, match="OPENAI_API_KEY") as err:
        client.chat("fake-model", HELLO)
    assert "sk-wrong-key" not in str(err.value)
    assert fake.chat_calls == 1


@pytest.mark.parametrize(
    "action",
    [
        Action(raw=b"this is not json"),
        Action(raw=b'{"object": "chat.completion"}'),
        Action(raw=b'{"choices": "none"}'),
        Action(raw=b'{"choices": [{"index": 0, "finish_reason": "stop"}]}'),
    ],
    ids=["not-json", "no-choices", "choices-not-a-list", "no-message"],
)
def test_malformed_replies_raise_malformed_reply(fake: FakeOpenAI, action: Action) -> None:
    fake.script = [action]
    client = make_client(fake.base_url)
    with pytest.raises(MalformedReply):
        client.chat("fake-model", HELLO)


# --- preflight -----------------------------------------------------------------------


def test_preflight_passes_for_a_served_model(fake: FakeOpenAI) -> None:
    fake.models = ["other", "llama3:latest", "fake-model"]
    client = make_client(fake.base_url)
    client.preflight("fake-model")
    client.preflight("llama3")  # Ollama lists "name:latest" and answers to "name"
    assert fake.chat_calls == 0


def test_preflight_names_the_served_models_when_the_model_is_unknown(fake: FakeOpenAI) -> None:
    fake.models = ["served-a", "served-b"]
    with pytest.raises(BackendError, match="not served .* served-a, served-b") as err:
        make_client(fake.base_url).preflight("gpt-nonexistent")
    assert err.value.exit_status == ExitStatus.RUNTIME


def test_preflight_fails_at_once_when_nothing_listens() -> None:
    sleeps = Sleeps()
    client = make_client(f"http://127.0.0.1:{free_port()}/v1", sleeps=sleeps)
    with pytest.raises(BackendError, match="cannot reach .* is the server running"):
        client.preflight("fake-model")
    assert sleeps == []


def test_preflight_probes_with_a_chat_request_when_there_is_no_model_list(
    fake: FakeOpenAI,
) -> None:
    fake.models = None  # GET /models answers 404
    client = make_client(fake.base_url)
    client.preflight("fake-model")
    assert fake.chat_calls == 1 and fake.requests[0]["max_tokens"] == 1
    fake.script = [Action(status=404, error="model 'nope' not found")]
    with pytest.raises(BackendError, match="does not serve model 'nope'"):
        client.preflight("nope")


# --- concurrency -------------------------------------------------------------------------


@pytest.mark.parametrize("concurrency", [1, 4])
def test_map_keeps_order_and_runs_concurrency_requests_at_once(
    fake: FakeOpenAI, concurrency: int
) -> None:
    fake.respond = lambda body: Action(content=body["messages"][0]["content"].upper(), delay=0.15)
    client = make_client(fake.base_url, concurrency=concurrency)
    words = [f"w{i}" for i in range(8)]
    out = client.map(lambda w: client.chat("fake-model", [{"role": "user", "content": w}]).text,
                     words)
    assert out == [w.upper() for w in words]
    assert fake.max_in_flight == concurrency


def test_map_raises_the_first_error_and_starts_no_more_requests(fake: FakeOpenAI) -> None:
    fake.respond = lambda body: Action(status=401, delay=0.1)
    client = make_client(fake.base_url, concurrency=2)
    with pytest.raises(BackendError):
        client.map(lambda i: client.chat("fake-model", HELLO), list(range(20)))
    assert fake.chat_calls < 20


# --- cache ----------------------------------------------------------------------------------


def test_a_repeated_request_is_answered_from_the_cache(fake: FakeOpenAI, tmp_path: Path) -> None:
    cache = LLMCache(tmp_path / "llm.sqlite")
    client = make_client(fake.base_url, cache=cache)
    first = client.chat("fake-model", HELLO, max_tokens=10)
    again = client.chat("fake-model", HELLO, max_tokens=10)
    assert again.text == first.text and again.cached and not first.cached
    assert fake.chat_calls == 1
    assert client.usage.snapshot()["cache_hits"] == 1
    # Any change to what decides the reply is a different request.
    client.chat("fake-model", HELLO, max_tokens=11)
    client.chat("fake-model", HELLO, max_tokens=10, temperature=0.5)
    client.chat("fake-model", [{"role": "user", "content": "hello!"}], max_tokens=10)
    assert fake.chat_calls == 4


def test_the_cache_persists_across_runs_and_separates_endpoints_and_models(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    path = tmp_path / "cache" / "llm.sqlite"
    make_client(fake.base_url, cache=LLMCache(path)).chat("fake-model", HELLO)
    rerun = make_client(fake.base_url, cache=LLMCache(path))
    assert rerun.chat("fake-model", HELLO).cached
    assert fake.chat_calls == 1 and rerun.usage.calls == 0
    assert not rerun.chat("other-model", HELLO).cached
    other = FakeOpenAI()
    try:
        elsewhere = make_client(other.base_url, cache=LLMCache(path))
        assert not elsewhere.chat("fake-model", HELLO).cached
    finally:
        other.close()


def test_failures_are_not_cached(fake: FakeOpenAI, tmp_path: Path) -> None:
    cache = LLMCache(tmp_path / "llm.sqlite")
    fake.script = [Action(status=400)]
    client = make_client(fake.base_url, cache=cache)
    with pytest.raises(RequestRejected):
        client.chat("fake-model", HELLO)
    assert cache.count() == 0
    assert not client.chat("fake-model", HELLO).cached


def test_the_api_key_is_not_written_to_the_cache(fake: FakeOpenAI, tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    cache = LLMCache(path)
    settings = ClientSettings(base_url=fake.base_url, api_key="sk-do-not-store")
    LLMClient(settings, cache=cache).chat("fake-model", HELLO)
    cache.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"fake-model" in stored  # the file holds the entry...
    assert b"sk-do-not-store" not in stored  # ...but not the key


def test_the_cache_key_ignores_dict_order_and_a_trailing_slash() -> None:
    a = cache_key("http://h/v1/", "m", HELLO, {"temperature": 0, "max_tokens": 5})
    b = cache_key("http://h/v1", "m", HELLO, {"max_tokens": 5, "temperature": 0})
    assert a == b
    assert a != cache_key("http://h/v1", "m", HELLO, {"max_tokens": 6, "temperature": 0})


def test_a_broken_cache_file_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(UsageError, match="--no-cache"):
        LLMCache(path).get("k")


def test_the_default_cache_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_path() == tmp_path / "c" / "llm.sqlite"
    monkeypatch.delenv("CEG_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_path() == tmp_path / "x" / "ceg" / "llm.sqlite"


def test_the_cache_takes_many_threads_at_once(tmp_path: Path) -> None:
    cache = LLMCache(tmp_path / "llm.sqlite")

    def work(t: int) -> None:
        for i in range(50):
            cache.put(f"{t}-{i}", "m", {"text": f"{t}:{i}"})
            assert cache.get(f"{t}-{i}") == {"text": f"{t}:{i}"}

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert cache.count() == 400


def test_two_processes_share_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    code = (
        "import sys; from ceg_cli.llm.cache import LLMCache\n"
        "c = LLMCache(sys.argv[1])\n"
        "for i in range(200): c.put(f'child-{i}', 'm', {'text': str(i)})\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(path)])
    cache = LLMCache(path)
    for i in range(200):
        cache.put(f"parent-{i}", "m", {"text": str(i)})
    assert child.wait(timeout=60) == 0
    assert cache.count() == 400
    assert cache.get("child-199") == {"text": "199"}


# --- regeneration -------------------------------------------------------------------------


def ev(n: int, text: str) -> Evidence:
    return Evidence(passage_id=n, doc_id=f"d{n}", title=f"Doc {n}", text=text, similarity=0.9)


def test_regenerate_response_sends_the_papers_prompt(fake: FakeOpenAI) -> None:
    fake.respond = lambda body: "  Aristotle tutored Alexander the Great.  "
    client = make_client(fake.base_url)
    docs = [ev(1, "Aristotle tutored Alexander."), ev(2, "Caesar was born in 100 BC."),
            ev(1, "Aristotle tutored Alexander.")]
    new = regenerate_response(
        client, "fake-model", "Who did Aristotle teach?",
        "Aristotle tutored Alexander. He also tutored Julius Caesar.",
        ["He also tutored Julius Caesar."], docs,
    )
    assert new == "Aristotle tutored Alexander the Great."
    prompt = fake.requests[0]["messages"][-1]["content"]
    assert "There were some factual errors in your output:" in prompt
    assert "Please generate a new response based on relevant docs:" in prompt
    assert "He also tutored Julius Caesar." in prompt
    assert "Who did Aristotle teach?" in prompt
    assert prompt.count("<document ") == 2  # the repeated passage is sent once
    assert "response_format" not in fake.requests[0]


def test_regenerate_response_without_a_question_rewrites_the_text(fake: FakeOpenAI) -> None:
    fake.respond = lambda body: "Fixed."
    client = make_client(fake.base_url)
    assert regenerate_response(client, "fake-model", None, "Old text.", ["Old text."],
                               [ev(1, "Doc.")]) == "Fixed."
    prompt = fake.requests[0]["messages"][-1]["content"]
    assert "<question>" not in prompt and "Your previous text:" in prompt
