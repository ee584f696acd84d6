"""Where and how the LLM client calls: option, then environment, then default."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError

__all__ = ["DEFAULT_BASE_URL", "ClientSettings"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class ClientSettings:
    """Where and how to call; ``resolve`` applies option > environment > default."""

    base_url: str = DEFAULT_BASE_URL
    #: Never printed: ``repr=False`` keeps it out of reprs and tracebacks' locals dumps.
    api_key: str | None = field(default=None, repr=False)
    #: Seconds for one request.
    timeout: float = 120.0
    #: Further attempts after the first, on retryable failures.
    max_retries: int = 5
    #: The first retry waits about this many seconds; each next one twice as long.
    backoff: float = 1.0
    max_backoff: float = 60.0
    #: Requests in flight at once.
    concurrency: int = 4

    @classmethod
    def resolve(cls, options: Mapping[str, Any]) -> ClientSettings:
        """Settings from judge options: ``base_url`` (else ``$OPENAI_BASE_URL``), ``api_key``
        (else ``$OPENAI_API_KEY``), ``timeout``, ``max_retries``, ``backoff``, ``concurrency``."""
        base_url = options.get("base_url") or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        if not str(base_url).startswith(("http://", "https://")):
            raise UsageError(f"--llm-base-url {base_url}: must start with http:// or https://")
        api_key = options.get("api_key") or os.environ.get("OPENAI_API_KEY") or None
        settings = cls(
            base_url=str(base_url).rstrip("/"),
            api_key=api_key,
            timeout=_number(options, "timeout", cls.timeout, float),
            max_retries=_number(options, "max_retries", cls.max_retries, int),
            backoff=_number(options, "backoff", cls.backoff, float),
            max_backoff=_number(options, "max_backoff", cls.max_backoff, float),
            concurrency=_number(options, "concurrency", cls.concurrency, int),
        )
        if settings.concurrency < 1:
            raise UsageError(f"--concurrency {settings.concurrency}: must be at least 1")
        if settings.timeout <= 0:
            raise UsageError(f"LLM timeout {settings.timeout}: must be positive")
        if settings.max_retries < 0 or settings.backoff < 0:
            raise UsageError("LLM max_retries and backoff must not be negative")
        return settings


def _number(options: Mapping[str, Any], key: str, default: Any, kind: type) -> Any:
    value = options.get(key)
    if value is None:
        return default
    try:
        return kind(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"LLM option {key} must be a number, not {value!r}") from exc
