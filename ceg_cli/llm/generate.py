"""Asking the LLM for a corrected response: the regeneration step of CEG.

The loop that checks the new answer and tries again lives with the pipeline;
this module makes one request with the paper's regeneration prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..types import Evidence
from .client import LLMClient
from .prompts import regeneration_messages

__all__ = ["DEFAULT_MAX_DOCUMENTS", "DEFAULT_REGEN_MAX_TOKENS", "regenerate_response"]

#: Documents put in one regeneration prompt; more would crowd a small
#: context window (2,048 tokens on a default llama.cpp server) for little gain.
DEFAULT_MAX_DOCUMENTS = 8
DEFAULT_REGEN_MAX_TOKENS = 512


def regenerate_response(
    client: LLMClient,
    model: str,
    question: str | None,
    previous_answer: str,
    nonfactual_segments: Sequence[str],
    documents: Sequence[Evidence],
    *,
    temperature: float = 0.0,
    max_tokens: int | None = DEFAULT_REGEN_MAX_TOKENS,
    max_documents: int = DEFAULT_MAX_DOCUMENTS,
    cite: bool = False,
) -> str:
    """A new response written from the evidence; "" if the model returned nothing.

    ``documents`` are the passages retrieved for the nonfactual segments, best
    first; repeats (the same passage found for two segments) are sent once,
    and at most ``max_documents`` are sent. Without a ``question`` the model
    rewrites ``previous_answer`` itself. Raises what ``LLMClient.chat``
    raises; the call is cached and counted like a judge call.
    """
    unique: dict[tuple[str, int, str], Evidence] = {}
    for ev in documents:
        unique.setdefault((ev.doc_id, ev.passage_id, ev.text), ev)
    kept = list(unique.values())[: max(0, max_documents)]
    messages = regeneration_messages(question, previous_answer, nonfactual_segments, kept,
                                     cite=cite)
    reply = client.chat(model, messages, temperature=temperature, max_tokens=max_tokens)
    return reply.text.strip()
