"""Talking to LLMs over any OpenAI-compatible endpoint: client, cache, prompts.

``LLMClient`` (``client.py``, set up by ``ClientSettings`` in ``settings.py``)
makes the calls: retries, concurrency, usage counters; ``LLMCache``
(``cache.py``) keeps the replies; ``prompts.py`` holds the paper's judge and
regeneration prompts and the reply parser;
``regenerate_response`` (``generate.py``) asks for a corrected response.
The ``openai`` package is imported only when a client is created.
"""

from __future__ import annotations

from .cache import LLMCache, cache_key, default_cache_path
from .client import (
    ClientSettings,
    Completion,
    LLMClient,
    MalformedReply,
    RequestRejected,
    Usage,
)
from .generate import regenerate_response

__all__ = [
    "ClientSettings",
    "Completion",
    "LLMCache",
    "LLMClient",
    "MalformedReply",
    "RequestRejected",
    "Usage",
    "cache_key",
    "default_cache_path",
    "regenerate_response",
]
