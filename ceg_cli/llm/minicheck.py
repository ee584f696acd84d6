"""MiniCheck's LLM prompt and scoring, as its authors serve Bespoke-MiniCheck-7B.

Read from Liyan06/MiniCheck, ``minicheck/utils.py`` (``SYSTEM_PROMPT``,
``USER_PROMPT``) and ``minicheck/inference.py`` (class ``LLMCheck``), commit
e9fd26ef8e542ac4021fa9d4493bf915b2bd68dc (the newest commit touching the code;
b58b9fa after it changes only a notebook):

- the chat is a system message (the task, ending in: respond with "Yes" or
  "No") and a user message ``"Document: " + chunk + "\\nClaim: " + claim``,
  through the model's chat template with the generation prompt (what an
  OpenAI-compatible server does with the two messages);
- one token is generated at temperature 0 with ``logprobs=5``; the support
  probability is the sum of ``exp(logprob)`` over the returned alternatives
  whose decoded text, lowercased, is exactly ``"yes"`` (``get_support_prob``):
  not normalised against "no", 0 when no "yes" is among them;
- the document is cut into sentence-packed chunks of ``max_model_len - 300`` =
  32,468 tokens; the claim is split into sentences (NLTK); each (chunk,
  sentence) pair is one prompt; a sentence scores the maximum over chunks, the
  claim the minimum over its sentences ("SentenceFusion"); supported above 0.5.

Two things differ, both said where they matter: the authors fill the template
with ``str.replace``, so a document holding the text ``[CLAIM]`` would get the
claim pasted into it (here the two are put in place without that); and the
chunks are counted in words (``judges.llm_judges.llm_minicheck``), as a served model's
tokenizer cannot be read through the endpoint.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

__all__ = [
    "SYSTEM_PROMPT",
    "TOP_LOGPROBS",
    "USER_PROMPT",
    "minicheck_messages",
    "says_yes_or_no",
    "support_from_logprobs",
    "support_from_text",
]

SYSTEM_PROMPT = (
    "Determine whether the provided claim is consistent with the corresponding document. "
    "Consistency in this context implies that all information presented in the claim is "
    "substantiated by the document. If not, it should be considered inconsistent. Please "
    "assess the claim's consistency with the document by responding with either \"Yes\" "
    "or \"No\"."
)
#: The authors' template; ``[DOCUMENT]`` and ``[CLAIM]`` are the places filled.
USER_PROMPT = "Document: [DOCUMENT]\nClaim: [CLAIM]"
#: The alternatives the authors read for the first token (vLLM's ``logprobs=5``).
TOP_LOGPROBS = 5

_ANSWER = re.compile(r"\W*(yes|no)\b", re.IGNORECASE)


def minicheck_messages(document: str, claim: str) -> list[dict[str, str]]:
    """The chat the authors send for one document chunk and one claim sentence."""
    head, rest = USER_PROMPT.split("[DOCUMENT]")
    middle, tail = rest.split("[CLAIM]")
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": head + document + middle + claim + tail},
    ]


def support_from_logprobs(top: Sequence[tuple[str, float]]) -> float:
    """P(supported) from the first token's alternatives, as ``get_support_prob`` computes it."""
    total = 0.0
    for token, logprob in top:
        if token.lower() == "yes":
            total += math.exp(logprob)
    return min(total, 1.0)


def says_yes_or_no(top: Sequence[tuple[str, float]]) -> bool:
    """Whether any alternative is an answer at all ("Yes", " no", "YES"...).

    A chat model that is not MiniCheck may start its reply with something else
    ("The claim..."); the authors' sum is then 0, which would read as a verdict
    the model never gave.
    """
    return any(token.strip().lower() in ("yes", "no") for token, _ in top)


def support_from_text(text: str) -> float | None:
    """1.0 for a reply that answers yes, 0.0 for no, None for anything else."""
    found = _ANSWER.match(text or "")
    if found is None:
        return None
    return 1.0 if found.group(1).lower() == "yes" else 0.0
