"""What the two LLM judges (``llm.LlmJudge``, ``llm_minicheck.LlmMiniCheckJudge``) share.

The model and its client, the sampling temperature and token limit every request
carries, the usage counts, what an unreadable reply becomes (``unreadable``) and
closing the client (its cache with it).
"""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

from ...llm.client import LLMClient
from ...types import NOT_JUDGED, Verdict
from .unreadable import unparsable_verdict

__all__ = ["LlmJudgeBase"]


class LlmJudgeBase:
    """An LLM judge's model, client and request settings; ``name`` is ``llm:MODEL``."""

    def __init__(
        self,
        model: str,
        client: LLMClient,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        count_unparsable_as: str = NOT_JUDGED,
    ) -> None:
        unparsable_verdict("", count_unparsable_as)  # checks the choice now
        self.model = model
        self.client = client
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.count_unparsable_as = count_unparsable_as
        self.name = f"llm:{model}"
        #: The endpoint's host, for the method line and messages.
        self.host = urlsplit(client.base_url).netloc or client.base_url
        self._lock = threading.Lock()

    @property
    def usage(self) -> dict[str, int]:
        """Calls made, cache hits, retries and tokens so far (shared with regeneration)."""
        return self.client.usage.snapshot()

    def _unparsable(self, why: str) -> Verdict:
        """The verdict on a reply that cannot be read (``count_unparsable_as``)."""
        return unparsable_verdict(why, self.count_unparsable_as)

    def close(self) -> None:
        self.client.close()
