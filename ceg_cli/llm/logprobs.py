"""Reading token log-probabilities from a chat completion, and back from the cache.

OpenAI and vLLM send them for ``logprobs: true, top_logprobs: N`` as
``choices[0].logprobs.content[i].top_logprobs``, a list of ``{token, logprob}``
per generated token; llama-cpp-python's server does the same. Servers that do
not support them send none, or ``null``: the caller then has only the text.
"""

from __future__ import annotations

from typing import Any

__all__ = ["first_token_top", "logprob_pairs"]


def first_token_top(choice: Any) -> tuple[tuple[str, float], ...] | None:
    """The first generated token's (token, logprob) alternatives, or None when there are none.

    Anything but a non-empty list of tokens and numbers (no ``logprobs``, an
    empty ``content``, a value that is not a number) is None: the caller falls
    back to the text rather than score from a part of the answer.
    """
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not isinstance(content, list) or not content:
        return None
    top = getattr(content[0], "top_logprobs", None)
    if not isinstance(top, list):
        return None
    return logprob_pairs([[getattr(t, "token", None), getattr(t, "logprob", None)] for t in top])


def logprob_pairs(raw: Any) -> tuple[tuple[str, float], ...] | None:
    """``[[token, logprob], ...]`` checked, or None: tokens are strings, logprobs numbers.

    -inf is a logprob (probability 0); NaN is not. A logprob a rounding error
    above 0 is read as 0 (probability 1).
    """
    if not isinstance(raw, list) or not raw:
        return None
    out = []
    for pair in raw:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            return None
        token, logprob = pair
        if not isinstance(token, str) or isinstance(logprob, bool):
            return None
        if not isinstance(logprob, (int, float)) or logprob != logprob:
            return None
        out.append((token, min(float(logprob), 0.0)))
    return tuple(out)
