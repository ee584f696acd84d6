"""``--judge llm:MODEL --llm-prompt minicheck``: MiniCheck's prompt, scored by probability.

The LLM reads MiniCheck's prompt (``ceg_cli.llm.minicheck``: a document, a
claim, answer yes or no), as Bespoke-MiniCheck-7B was trained on it and as its
authors serve it (Liyan06/MiniCheck, ``minicheck/inference.py``, class
``LLMCheck``, commit e9fd26ef8e542ac4021fa9d4493bf915b2bd68dc):

- the document is the segment's evidence, passages in rank order one per
  line, cut into the authors' sentence-packed chunks (``doc_chunks``, shared
  with the ``minicheck:`` judge) of 32,468 units: the authors count tokens of
  the model's tokenizer, which an endpoint does not expose, so words are
  counted here; top-k evidence is a few hundred words, one chunk;
- the segment is split into sentences (Punkt, as their ``nltk.sent_tokenize``);
  one request per (chunk, sentence), one token at temperature 0, asking for
  the first token's top-5 log-probabilities;
- a pair's support is P("yes"): the summed probability of the alternatives
  that read "yes" in any case, exactly as the authors sum them; a sentence
  scores its best chunk, the segment its weakest sentence, supported above
  0.5, citing the passages of the chunks that support it.

Where the endpoint sends no log-probabilities, or rejects the request for
them, the text answer is read instead (yes 1.0, no 0.0), and the run is
warned once. A reply whose alternatives hold neither yes nor no (a chat
model that answered in a sentence) is read from its text too, not scored 0
as the authors' sum would: a verdict the model did not give is never made up.
What cannot be read is handled as the ``ceg`` prompt's unreadable replies are.

The prompt is the authors' word for word: the checked text is not fenced in
tags as in the ``ceg`` prompt, because the checker model was trained on this
exact form.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from ...llm.client import Completion, LLMClient, MalformedReply, RequestRejected
from ...llm.minicheck import (
    TOP_LOGPROBS,
    minicheck_messages,
    says_yes_or_no,
    support_from_logprobs,
    support_from_text,
)
from ...types import (
    FACTUAL,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    NOT_JUDGED,
    SUPPORTED,
    JudgeItem,
    Verdict,
)
from ..checkers.minicheck import AUTHORS_CUT, DocChunk, claims_and_chunks, doc_chunks
from ..cuts import Cuts
from ..once import SayOnce
from .llm_base import LlmJudgeBase

__all__ = ["CHUNK_WORDS", "THRESHOLD", "LlmMiniCheckJudge"]

#: The authors' chunk for the LLM: ``max_model_len`` 32,768 less 300 for the claim.
CHUNK_WORDS = 32_768 - 300
THRESHOLD = 0.5
#: The reference's one generated token: its log-probabilities are the answer.
MAX_TOKENS = 1

#: One pair's support and how it was read ("logprobs", "text"), or None and why not.
Scored = tuple[float | None, str]


class LlmMiniCheckJudge(LlmJudgeBase):
    """MiniCheck's prompt through any chat endpoint, scored from log-probabilities."""

    def __init__(
        self,
        model: str,
        client: LLMClient,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = MAX_TOKENS,
        count_unparsable_as: str = NOT_JUDGED,
        chunk_words: int = CHUNK_WORDS,
        on_warning: Callable[[str], None] | None = None,
        cuts: Cuts | None = None,
    ) -> None:
        super().__init__(model, client, temperature=temperature, max_tokens=max_tokens,
                         count_unparsable_as=count_unparsable_as)
        self.chunk_words = chunk_words
        #: The same cut in every setting (the authors' 0.5, or --judge-threshold).
        self.cuts = cuts if cuts is not None else Cuts.same(THRESHOLD, AUTHORS_CUT)
        self.threshold = self.cuts.index.value
        self.on_warning = on_warning
        self.method = (
            f"LLM judge {model} at {self.host}: MiniCheck's prompt (document chunk, claim; "
            f"yes or no), support = P(yes) from the first token's top-{TOP_LOGPROBS} "
            f"log-probabilities (the text answer where the endpoint sends none), best chunk, "
            f"weakest sentence, supported above {self.threshold:g}; temperature {temperature:g}"
        )
        # Log-probabilities are asked for until the endpoint rejects them before
        # ever sending any; after one reply had them, a rejection is about that
        # request (too long, say), not about log-probabilities.
        self._logprobs = True
        self._logprobs_seen = False
        self._once = SayOnce(self.on_warning)

    @property
    def scoring(self) -> str:
        """``logprobs`` while log-probabilities are asked for, ``text`` once refused."""
        return "logprobs" if self._logprobs else "text"

    # --- the reference's pieces ---------------------------------------------

    def chunks(self, passages: Sequence[str]) -> list[DocChunk]:
        return doc_chunks(passages, self.chunk_words, lambda ss: [len(s.split()) for s in ss])

    @staticmethod
    def sentences(claim: str) -> list[str]:
        from ...sentences import punkt_tokenizer

        return punkt_tokenizer().tokenize(claim) or [claim]

    # --- judging -------------------------------------------------------------

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        """One verdict per item; identical (chunk, sentence) prompts are sent once."""
        verdicts: list[Verdict | None] = [None] * len(items)
        rows: dict[str, tuple[int, list[dict[str, str]]]] = {}
        plan: list[tuple[int, list[DocChunk], list[list[int]]]] = []
        for n, claim, chunks in claims_and_chunks(items, self.chunks, verdicts):
            sentences = self.sentences(claim)
            grid = []
            for chunk in chunks:
                row = []
                for sentence in sentences:
                    messages = minicheck_messages(chunk.text, sentence)
                    key = json.dumps(messages, sort_keys=True)
                    row.append(rows.setdefault(key, (len(rows), messages))[0])
                grid.append(row)
            plan.append((n, chunks, grid))
        answers = self.client.map(self._ask, [messages for _, messages in rows.values()])
        scored = [self._score(a) for a in answers]
        for n, chunks, grid in plan:
            verdicts[n] = self._decide(chunks, [[scored[r] for r in row] for row in grid])
        return [v for v in verdicts if v is not None]

    def _chat(self, messages: list[dict[str, str]], logprobs: bool) -> Completion:
        return self.client.chat(
            self.model,
            messages,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            top_logprobs=TOP_LOGPROBS if logprobs else None,
        )

    def _ask(self, messages: list[dict[str, str]]) -> Completion | str:
        """The completion, or a sentence saying why this one request failed."""
        try:
            if not self._logprobs:
                return self._chat(messages, False)
            try:
                completion = self._chat(messages, True)
            except RequestRejected as exc:
                if self._logprobs_seen:
                    return str(exc)
                # Perhaps the endpoint takes no logprobs parameter: the same
                # request without it tells (if it fails too, the request is at fault).
                completion = self._chat(messages, False)
                with self._lock:
                    self._logprobs = False
                self._warn(f"{exc}; without log-probabilities it answered, so the answers' "
                           "text is read (yes 1, no 0)")
                return completion
        except (RequestRejected, MalformedReply) as exc:
            return str(exc)
        if completion.top_logprobs is not None:
            with self._lock:
                self._logprobs_seen = True
        else:
            self._warn("it sent no log-probabilities, so the answers' text is read (yes 1, no 0)")
        return completion

    def _warn(self, why: str) -> None:
        self._once.say(f"--judge {self.name} at {self.host}: {why}", stacklevel=3)

    @staticmethod
    def _score(answer: Completion | str) -> Scored:
        if isinstance(answer, str):
            return None, answer
        top = answer.top_logprobs
        if top is not None and says_yes_or_no(top):
            return support_from_logprobs(top), "logprobs"
        support = support_from_text(answer.text)
        if support is not None:
            return support, "text"
        snippet = " ".join(answer.text.split())[:120]
        said = f"the LLM's reply {snippet!r} answers neither yes nor no" if snippet \
            else "the LLM's reply was empty"
        if top is not None:
            said += " (nor do the first token's likeliest alternatives: " + ", ".join(
                repr(t) for t, _ in top) + ")"
        return None, said

    def _decide(self, chunks: Sequence[DocChunk], grid: Sequence[Sequence[Scored]]) -> Verdict:
        for row in grid:
            for support, why in row:
                if support is None:
                    return self._unparsable(why)
        values = [[float(support or 0.0) for support, _ in row] for row in grid]
        sentences = len(values[0])
        # SentenceFusion: each sentence its best chunk, the segment its weakest sentence.
        best = [max(values[c][s] for c in range(len(chunks))) for s in range(sentences)]
        score = min(best)
        how = {why for row in grid for _, why in row}
        if how == {"text"}:
            reason = (f"the LLM answered {'yes' if score > self.threshold else 'no'} "
                      f"(no log-probabilities from the endpoint: scored {score:g})")
        else:
            source = ("the first token's log-probabilities" if how == {"logprobs"}
                      else "log-probabilities, or the text where none came")
            reason = f"P(yes) {score:.3f} from {source}"
        if len(chunks) > 1:
            reason += f", best of {len(chunks)} chunks"
        if sentences > 1:
            reason += f", weakest of {sentences} sentences"
        if score > self.threshold:
            cited = sorted({p for c, row in enumerate(values) if max(row) > self.threshold
                            for p in chunks[c].passages})
            return Verdict(FACTUAL, SUPPORTED, score, tuple(cited), reason)
        return Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, score, (),
                       f"{reason}; needs > {self.threshold:g}")
