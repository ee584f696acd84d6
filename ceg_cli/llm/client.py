"""A client for any OpenAI-compatible chat endpoint: retries, cache, usage, concurrency.

OpenAI, vLLM, Ollama and llama.cpp's server all speak the chat-completions
protocol; the official ``openai`` package talks to each of them. This wrapper
adds what a batch run needs:

- a preflight that fails with a one-line ``BackendError`` (exit 3) when the
  endpoint is unreachable, rejects the key or does not serve the model,
  before any work is done;
- retries with exponential backoff (and the server's ``Retry-After``, in seconds
  or as an HTTP date) on rate limits, timeouts, dropped connections and server
  errors; the ``openai`` package's own retries are off, so the policy and its
  counters live here;
- the persistent reply cache (``LLMCache``);
- usage counters (calls made, cache hits, retries, tokens) readable after a run;
- ``map``: run a function over items on a thread pool of ``concurrency``.

The API key is passed to the ``openai`` client and nowhere else: it is not part
of any message, cache key or ``repr``.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timezone
from typing import Any, TypeVar

from ..errors import BackendError
from .cache import LLMCache, cache_key
from .logprobs import first_token_top, logprob_pairs
from .settings import DEFAULT_BASE_URL, ClientSettings

__all__ = [
    "DEFAULT_BASE_URL",
    "ClientSettings",
    "Completion",
    "LLMClient",
    "MalformedReply",
    "RequestRejected",
    "Usage",
]

T = TypeVar("T")
R = TypeVar("R")

# Statuses worth another try: request timeout, conflict/lock, rate limit, server errors.
_RETRY_STATUSES = frozenset({408, 409, 429})
# Statuses that reject one request for what it contains (too long, bad parameter).
_REJECT_STATUSES = frozenset({400, 413, 422})


class RequestRejected(BackendError):
    """The endpoint refused one request as invalid (HTTP 400/413/422, or a 500 saying so)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class MalformedReply(BackendError):
    """The endpoint answered with something that is not a chat completion."""


@dataclass(frozen=True)
class Completion:
    """One chat reply: text, why it stopped, token usage, and whether it came from the cache."""

    text: str
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    #: The first generated token's alternatives, (token, logprob) best first, when
    #: they were asked for and the endpoint sent them; None otherwise.
    top_logprobs: tuple[tuple[str, float], ...] | None = None


class Usage:
    """Counters for one client, safe to update from many threads.

    ``calls`` are chat requests the endpoint answered; ``cache_hits`` replies
    read from the cache instead; ``retries`` repeated attempts; tokens come
    from the server's ``usage`` field (0 where it sends none).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.cache_hits = 0
        self.retries = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def snapshot(self) -> dict[str, int]:
        """The counters as a plain dict, for a summary or a JSON report."""
        with self._lock:
            return {
                "calls": self.calls,
                "cache_hits": self.cache_hits,
                "retries": self.retries,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
            }


class LLMClient:
    """Chat completions against one endpoint, with retries, a cache and counters."""

    def __init__(
        self,
        settings: ClientSettings,
        *,
        cache: LLMCache | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import openai

        self.settings = settings
        self.cache = cache
        self.usage = Usage()
        self._sleep = sleep
        # A local server needs no key, but the openai package insists on one;
        # servers that ignore Authorization ignore this placeholder too.
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key or "no-key",
            timeout=settings.timeout,
            max_retries=0,
        )

    @property
    def base_url(self) -> str:
        return self.settings.base_url

    # --- preflight -------------------------------------------------------

    def preflight(self, model: str) -> None:
        """Fail now with a clear ``BackendError`` unless the endpoint answers and serves ``model``.

        Asks ``GET /models``; an endpoint without that route is probed with a
        one-token chat request instead. Connection failures are not retried:
        a server that is down should be reported at once.
        """
        import openai

        try:
            served = [m.id for m in self._client.models.list()]
        except openai.APIConnectionError as exc:
            raise BackendError(self._unreachable(exc)) from exc
        except openai.APIStatusError as exc:
            if exc.status_code not in (404, 405):
                raise self._status_error(exc, model) from exc
            served = []
        if not served:
            # No model list: one tiny request shows whether the model is served.
            self._request(model, [{"role": "user", "content": "ping"}], {"max_tokens": 1}, 0)
            return
        if model in served or f"{model}:latest" in served:
            return
        listed = ", ".join(served[:10]) + (", ..." if len(served) > 10 else "")
        raise BackendError(
            f"model {model!r} is not served by the LLM endpoint {self.base_url} "
            f"(it serves: {listed}); pick one with --judge llm:MODEL"
        )

    # --- chat ------------------------------------------------------------

    def chat(
        self,
        model: str,
        messages: Sequence[Mapping[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        response_format: Mapping[str, Any] | None = None,
        top_logprobs: int | None = None,
    ) -> Completion:
        """One chat completion, from the cache when the same request was answered before.

        ``top_logprobs`` asks for the log-probabilities of that many alternatives
        to each generated token (``logprobs: true``); the first token's come back
        in ``Completion.top_logprobs``, None where the endpoint sent none.

        Retries retryable failures; raises ``RequestRejected`` when the endpoint
        refuses this request as invalid, ``MalformedReply`` when its answer is
        not a completion, and ``BackendError`` for everything that ends a run
        (unreachable after the retries, bad key, unknown model).
        """
        params = _params(temperature, max_tokens, response_format, top_logprobs)
        key = cache_key(self.base_url, model, messages, params) if self.cache is not None else None
        hit = self._lookup(key, claim=True)
        if hit is not None:
            return hit
        try:
            response = self._request(model, messages, params, self.settings.max_retries)
            completion = _completion(response)
        except BaseException:
            if self.cache is not None and key is not None:
                self.cache.release(key)
            raise
        self.usage.add(
            calls=1,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
        )
        if self.cache is not None and key is not None:
            reply: dict[str, Any] = {
                "text": completion.text, "finish_reason": completion.finish_reason
            }
            if top_logprobs is not None:
                # Stored even when None: a re-run then knows the endpoint sent none.
                reply["top_logprobs"] = (
                    None if completion.top_logprobs is None
                    else [list(pair) for pair in completion.top_logprobs]
                )
            self.cache.put(key, model, reply)
        return completion

    def cached(
        self,
        model: str,
        messages: Sequence[Mapping[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        response_format: Mapping[str, Any] | None = None,
        top_logprobs: int | None = None,
    ) -> Completion | None:
        """The cached reply to this exact request, or None; never calls the endpoint."""
        if self.cache is None:
            return None
        params = _params(temperature, max_tokens, response_format, top_logprobs)
        return self._lookup(cache_key(self.base_url, model, messages, params))

    def _lookup(self, key: str | None, *, claim: bool = False) -> Completion | None:
        """The cached reply under ``key``; with ``claim``, a miss is this caller's to ask
        for (``LLMCache.claim``)."""
        if self.cache is None or key is None:
            return None
        hit = self.cache.claim(key) if claim else self.cache.get(key)
        if hit is None or not isinstance(hit.get("text"), str):
            return None
        top = None
        if hit.get("top_logprobs") is not None:
            top = logprob_pairs(hit["top_logprobs"])
            if top is None:
                return None  # a damaged entry is a miss: asked again, overwritten
        self.usage.add(cache_hits=1)
        return Completion(hit["text"], hit.get("finish_reason"), cached=True, top_logprobs=top)

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(x) for x in items]`` with up to ``concurrency`` calls at once, in order.

        The first exception is raised and the items not yet started are dropped.
        """
        workers = min(self.settings.concurrency, len(items))
        if workers <= 1:
            return [fn(x) for x in items]
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ceg-llm")
        try:
            futures = [pool.submit(fn, x) for x in items]
            results = [f.result() for f in futures]
        except KeyboardInterrupt:
            # The process is ending: do not wait for requests in flight.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        except BaseException:
            # Do not start the remaining requests, but let those in flight end
            # (bounded by the request timeout): returning while they still run
            # would let the caller close the cache under them (a segfault in
            # SQLite was seen that way).
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return results

    def close(self) -> None:
        self._client.close()
        if self.cache is not None:
            self.cache.close()

    # --- internals -------------------------------------------------------

    def _request(
        self,
        model: str,
        messages: Sequence[Mapping[str, str]],
        params: Mapping[str, Any],
        retries: int,
    ) -> Any:
        import openai

        attempt = 0
        while True:
            try:
                return self._client.chat.completions.create(
                    model=model,
                    messages=list(messages),  # type: ignore[arg-type]
                    **params,
                )
            except openai.APIStatusError as exc:
                status = exc.status_code
                if status in _REJECT_STATUSES or _is_validation_error(exc):
                    raise RequestRejected(
                        f"the LLM endpoint rejected the request (HTTP {status}): "
                        f"{_error_text(exc)}",
                        status,
                    ) from exc
                if not (status in _RETRY_STATUSES or status >= 500):
                    raise self._status_error(exc, model) from exc
                if attempt >= retries:
                    raise BackendError(
                        f"the LLM endpoint {self.base_url} failed (HTTP {status}: "
                        f"{_error_text(exc)}) after {attempt + 1} attempts"
                    ) from exc
                delay = _retry_after(exc.response.headers)
            except openai.APITimeoutError as exc:
                if attempt >= retries:
                    raise BackendError(
                        f"the LLM endpoint {self.base_url} timed out "
                        f"({self.settings.timeout:g}s) after {attempt + 1} attempts"
                    ) from exc
                delay = None
            except openai.APIConnectionError as exc:
                if attempt >= retries:
                    raise BackendError(
                        f"{self._unreachable(exc)} (after {attempt + 1} attempts)"
                    ) from exc
                delay = None
            except (openai.APIResponseValidationError, json.JSONDecodeError) as exc:
                raise MalformedReply(
                    "the LLM endpoint sent a reply that is not a chat completion: "
                    + _brief(str(exc))
                ) from exc
            if delay is None or delay > self.settings.max_backoff:
                # Full-size exponential steps with up to 25% jitter, so that
                # concurrent requests that failed together do not retry together.
                delay = min(self.settings.backoff * 2**attempt, self.settings.max_backoff)
                delay *= 1 - 0.25 * random.random()
            attempt += 1
            self.usage.add(retries=1)
            self._sleep(delay)

    def _unreachable(self, exc: BaseException) -> str:
        cause = exc.__cause__ or exc
        return (
            f"cannot reach the LLM endpoint {self.base_url} ({_brief(str(cause))}); "
            "is the server running? Set --llm-base-url or OPENAI_BASE_URL"
        )

    def _status_error(self, exc: Any, model: str) -> BackendError:
        status = exc.status_code
        if status in (401, 403):
            return BackendError(
                f"the LLM endpoint {self.base_url} refused the credentials (HTTP {status}); "
                "set OPENAI_API_KEY"
            )
        if status == 404:
            return BackendError(
                f"the LLM endpoint {self.base_url} does not serve model {model!r} "
                f"or has no chat-completions route (HTTP 404): {_error_text(exc)}"
            )
        return BackendError(
            f"the LLM endpoint {self.base_url} failed (HTTP {status}): {_error_text(exc)}"
        )


def _params(
    temperature: float,
    max_tokens: int | None,
    response_format: Mapping[str, Any] | None,
    top_logprobs: int | None = None,
) -> dict[str, Any]:
    # Everything here is part of the cache key: a reply asked for without
    # log-probabilities is never found for a request that asks for them.
    params: dict[str, Any] = {"temperature": temperature}
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    if response_format is not None:
        params["response_format"] = dict(response_format)
    if top_logprobs is not None:
        params["logprobs"] = True
        params["top_logprobs"] = top_logprobs
    return params


def _completion(response: Any) -> Completion:
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise MalformedReply("the LLM endpoint sent a completion without choices")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise MalformedReply("the LLM endpoint sent a completion without a message")
    content = getattr(message, "content", None)
    if content is not None and not isinstance(content, str):
        raise MalformedReply("the LLM endpoint sent a completion whose content is not text")
    usage = getattr(response, "usage", None)
    return Completion(
        text=content or "",
        finish_reason=getattr(choices[0], "finish_reason", None),
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        top_logprobs=first_token_top(choices[0]),
    )


def _retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The server's requested delay in seconds (``retry-after-ms`` or ``retry-after``).

    ``Retry-After`` may be delta-seconds or an HTTP date (RFC 9110 section 10.2.3);
    a date is turned into the seconds from ``now`` (default: the clock), 0 when past.
    """
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        value: float | None
        try:
            value = float(raw) * scale
        except ValueError:
            value = _seconds_until(raw, now) if name == "retry-after" else None
        if value is not None and value >= 0:
            return value
    return None


def _seconds_until(http_date: str, now: float | None) -> float | None:
    """Seconds from ``now`` to an HTTP date (at least 0), or None when it is not one."""
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(http_date)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        # An HTTP date is always GMT; a zone-less one is read as UTC, not local time.
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _is_validation_error(exc: Any) -> bool:
    """A server error that is really a rejected request, not worth retrying.

    llama-cpp-python's server answers HTTP 500 when it cannot validate a
    request (an unsupported ``response_format``, say): retrying that
    identical request can only fail again.
    """
    return exc.status_code == 500 and "validation error" in _error_text(exc).lower()


def _error_text(exc: Any) -> str:
    """The server's own error message, without the ``openai`` package's wrapping."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return _brief(body["message"])
    return _brief(getattr(exc, "message", "") or str(exc))


def _brief(text: str, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
