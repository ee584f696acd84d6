"""The ``llm:MODEL`` judge: an LLM behind any OpenAI-compatible endpoint decides.

This is the paper's preferred NLI method. Each segment that states a fact is
sent with its question and its numbered top-k passages in the FELM-style
prompt (``ceg_cli.llm.prompts``); the model answers Factual or Nonfactual,
names the passages that support (or contradict) the segment, and gives a
short reason. The answer is constrained by a JSON schema where the server
takes one: OpenAI's ``json_schema`` response format first, then JSON mode with
a ``schema`` (llama-cpp-python's server), found by trying them in that order
until one request succeeds; where neither is taken, the same prompt asks for
the JSON object and the free-text reply is parsed.

Verdicts:

- Factual: ``supported``; the passages the model named are cited (numbers
  out of range are ignored), and the reason says so when it named none;
- Nonfactual: ``contradicted`` when it named a contradicting passage,
  otherwise ``not_enough_evidence``; its spans are the words the model named as
  unsupported (``unsupported_words``) found in the segment; a named word the
  segment does not contain is dropped, counted (``spans_dropped``, the run's
  summary) and said in the reason; a reply naming none gets the spans every
  judge without its own gets (``spanfill``);
- a reply that cannot be read: ``not_judged``/``judge_error`` with a reason
  saying so (it fails the gate), unless ``count_unparsable_as`` says
  ``nonfactual`` or ``factual``; never silently factual;
- segments with no factual claim are factual without a call (as the FELM
  prompt counts them), segments without evidence nonfactual without a call.

Requests run concurrently on the client's thread pool and are cached.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...claims import has_claim
from ...errors import UsageError
from ...llm.cache import CACHE_FILE, LLMCache, default_cache_path
from ...llm.client import ClientSettings, Completion, LLMClient, MalformedReply, RequestRejected
from ...llm.prompts import (
    RESPONSE_FORMATS,
    JudgeReply,
    judge_messages,
    judge_response_format,
    parse_judge_reply,
)
from ...types import (
    CONTRADICTED,
    FACTUAL,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    NOT_JUDGED,
    SUPPORTED,
    JudgeItem,
    Verdict,
)
from .llm_base import LlmJudgeBase
from .unreadable import UNPARSABLE_CHOICES, unparsable_verdict

if TYPE_CHECKING:
    from .llm_minicheck import LlmMiniCheckJudge

__all__ = ["DEFAULT_MAX_TOKENS", "PROMPTS", "UNPARSABLE_CHOICES", "LlmJudge", "cache_path",
           "create", "make_client"]

#: Room for the JSON object with a one-sentence reason.
DEFAULT_MAX_TOKENS = 256
STRUCTURED_CHOICES = ("auto", *RESPONSE_FORMATS)
#: The judge's prompts: the CEG paper's (FELM: Factual or Nonfactual, with
#: citations) and MiniCheck's (yes or no, scored by probability; llm_minicheck.py).
PROMPTS = ("ceg", "minicheck")
_REASON_CHARS = 300


class LlmJudge(LlmJudgeBase):
    """Judges segments with one chat request each, concurrently, through ``LLMClient``."""

    def __init__(
        self,
        model: str,
        client: LLMClient,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        count_unparsable_as: str = NOT_JUDGED,
        structured: str = "auto",
    ) -> None:
        super().__init__(model, client, temperature=temperature, max_tokens=max_tokens,
                         count_unparsable_as=count_unparsable_as)
        if structured not in STRUCTURED_CHOICES:
            raise UsageError(
                f"structured {structured!r}: choose one of {', '.join(STRUCTURED_CHOICES)}"
            )
        self.structured = structured
        #: Words the model named as unsupported that their segment does not contain
        #: (dropped, never shown as a span), this judge's lifetime.
        self.spans_dropped = 0
        # "auto" starts with the best dialect and steps down the list when the
        # server rejects it, until one request succeeds ("confirmed").
        self._format = RESPONSE_FORMATS[0] if structured == "auto" else structured
        self._confirmed = structured != "auto"
        output = {
            "auto": "structured output (JSON schema, else JSON mode, else free text)",
            "json_schema": "JSON-schema output",
            "json_object": "JSON mode with a schema",
            "text": "free-text JSON output",
        }[structured]
        self.method = (
            f"LLM judge {model} at {self.host}: the CEG paper's FELM prompt (question, segment, "
            f"numbered top-k passages; Factual/Nonfactual, no-claim segments factual), "
            f"{output}, temperature {temperature:g}"
        )

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        """One verdict per item; identical prompts in a batch are sent once."""
        verdicts: list[Verdict | None] = [None] * len(items)
        prompts: dict[str, tuple[list[dict[str, str]], list[int]]] = {}
        for n, item in enumerate(items):
            if not has_claim(item.segment.text):
                verdicts[n] = Verdict(FACTUAL, NO_CLAIM, 1.0, (), "no factual claim to check")
            elif not item.evidence:
                verdicts[n] = Verdict(
                    NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.0, (), "no evidence was retrieved"
                )
            else:
                messages = judge_messages(item.segment.text, item.evidence, item.question)
                key = json.dumps(messages, sort_keys=True)
                prompts.setdefault(key, (messages, []))[1].append(n)
        groups = list(prompts.values())
        answers = self.client.map(self._ask, [messages for messages, _ in groups])
        for (_, members), answer in zip(groups, answers):
            for n in members:
                verdicts[n] = self._verdict(answer, len(items[n].evidence),
                                            items[n].segment.text)
        return [v for v in verdicts if v is not None]

    @property
    def response_format(self) -> str:
        """The structured-output dialect in use: json_schema, json_object or text."""
        return self._format

    def _ask(self, messages: list[dict[str, str]]) -> Completion | str:
        """The completion, or a sentence saying why this one request failed."""
        if not self._confirmed:
            # A re-run finds its replies in the cache under the dialect that
            # worked last time: use it, rather than asking the server again
            # with the dialects it rejected.
            for kind in RESPONSE_FORMATS[RESPONSE_FORMATS.index(self._format):]:
                hit = self.client.cached(
                    self.model,
                    messages,
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                    response_format=judge_response_format(kind),
                )
                if hit is not None:
                    with self._lock:
                        if not self._confirmed:
                            self._format, self._confirmed = kind, True
                    return hit
        rejected: list[str] = []
        while True:
            kind = self._format
            try:
                completion = self.client.chat(
                    self.model,
                    messages,
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                    response_format=judge_response_format(kind),
                )
            except RequestRejected as exc:
                rejected.append(f"{exc} (asking for {kind})")
                with self._lock:
                    if self._format != kind:
                        continue  # another request has moved on to another dialect
                    if self._confirmed or kind == RESPONSE_FORMATS[-1]:
                        return "; ".join(rejected)
                    # No request has succeeded yet: the server may not take
                    # this response_format; step down to the next dialect.
                    self._format = RESPONSE_FORMATS[RESPONSE_FORMATS.index(kind) + 1]
                continue
            except MalformedReply as exc:
                return str(exc)
            if not self._confirmed:
                with self._lock:
                    if self._format == kind:
                        self._confirmed = True
            return completion

    def _verdict(self, answer: Completion | str, passages: int, segment: str = "") -> Verdict:
        if isinstance(answer, str):
            return self._unparsable(answer)
        reply = parse_judge_reply(answer.text)
        if reply is None:
            snippet = " ".join(answer.text.split())[:120]
            cut = " (cut off by the token limit)" if answer.finish_reason == "length" else ""
            return self._unparsable(
                f"the LLM's reply{cut} says neither Factual nor Nonfactual: {snippet!r}"
                if snippet
                else "the LLM's reply was empty"
            )
        verdict = _from_reply(reply, passages)
        if verdict.label != NONFACTUAL or not reply.unsupported:
            return verdict
        return self._with_spans(verdict, reply.unsupported, segment)

    def _with_spans(self, verdict: Verdict, words: Sequence[str], segment: str) -> Verdict:
        """``verdict`` with the spans of the words the model named that ``segment``
        contains; those it does not contain are dropped, counted in ``spans_dropped``
        and named in the reason (a model that names words the segment lacks is
        quoting something else; no span is guessed at)."""
        from ..offline.spans import named_spans

        spans, dropped = named_spans(segment, words)
        if not dropped:
            return replace(verdict, spans=spans)
        with self._lock:
            self.spans_dropped += dropped
        word = "word" if dropped == 1 else "words"
        return replace(verdict, spans=spans, reason=(
            f"{verdict.reason} ({dropped} {word} the LLM named as unsupported not in the "
            "segment: dropped)"))


def _from_reply(reply: JudgeReply, passages: int) -> Verdict:
    def indices(numbers: Sequence[int]) -> tuple[int, ...]:
        # The prompt numbers passages from 1; numbers the model invented are dropped.
        return tuple(dict.fromkeys(n - 1 for n in numbers if 1 <= n <= passages))

    said = " ".join(reply.reason.split())[:_REASON_CHARS]
    if reply.factual:
        cited = indices(reply.supporting)
        if cited:
            reason = said or "the LLM judged it factual"
        else:
            reason = "the LLM judged it factual without naming a supporting passage" + (
                f": {said}" if said else ""
            )
        return Verdict(FACTUAL, SUPPORTED, 1.0, cited, reason)
    against = indices(reply.contradicting)
    if against:
        named = ", ".join(f"[{i + 1}]" for i in against)
        word = "passage" if len(against) == 1 else "passages"
        verb = "contradicts" if len(against) == 1 else "contradict"
        reason = f"{word} {named} {verb} it" + (f": {said}" if said else "")
        return Verdict(NONFACTUAL, CONTRADICTED, 0.0, (), reason)
    return Verdict(
        NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.0, (), said or "the LLM judged it nonfactual"
    )


def make_client(options: Mapping[str, Any]) -> LLMClient:
    """An ``LLMClient`` from judge options, with the cache unless ``cache`` is false.

    The cache is ``cache_store`` (an object with ``LLMCache``'s methods: the cache a
    run's Ray workers share), else the file ``cache_path(options)``.
    """
    settings = ClientSettings.resolve(options)
    path = cache_path(options)
    cache = None
    if path is not None:
        cache = options.get("cache_store") or LLMCache(path)
    return LLMClient(settings, cache=cache)


def cache_path(options: Mapping[str, Any]) -> Path | None:
    """The reply cache's file: ``cache_path``, else ``cache_dir``/llm.sqlite, else
    ``default_cache_path()`` (``$CEG_CACHE_DIR`` or ``~/.cache/ceg``); None where
    ``cache`` is false."""
    if not _flag(options, "cache", True):
        return None
    if options.get("cache_path"):
        return Path(options["cache_path"])
    if options.get("cache_dir"):
        return Path(f"{options['cache_dir']}/{CACHE_FILE}")
    return default_cache_path()


def create(arg: str, options: Mapping[str, Any]) -> LlmJudge | LlmMiniCheckJudge:
    """Create the judge for ``--judge llm:MODEL``.

    Options (all optional): ``prompt`` (``ceg``, the paper's, or ``minicheck``:
    MiniCheck's, scored from log-probabilities), ``base_url`` (else
    ``$OPENAI_BASE_URL``, else OpenAI), ``api_key`` (else ``$OPENAI_API_KEY``; a
    local server needs none), ``temperature`` (0), ``max_tokens`` (256 for
    ``ceg``, 1 for ``minicheck``), ``concurrency`` (4), ``timeout`` (120 s),
    ``max_retries`` (5), ``backoff`` (1 s, doubling), ``cache`` (true),
    ``cache_path``/``cache_dir``, ``count_unparsable_as`` (``not_judged``,
    ``nonfactual`` or ``factual``), ``structured`` (``ceg`` only: ``auto``,
    ``json_schema``, ``json_object``, ``text``), ``chunk_words`` (``minicheck``
    only: the document chunk, 32,468 words), ``on_warning`` (a callable for
    the run's warnings) and ``preflight`` (true: check the endpoint and the model
    now, raising ``BackendError`` if either is missing).
    """
    from ..checkers.minicheck import AUTHORS_CUT
    from ..cuts import OPTION, Cuts, one_cut
    from .llm_minicheck import CHUNK_WORDS, MAX_TOKENS, THRESHOLD, LlmMiniCheckJudge

    model = arg.strip()
    if not model:
        raise UsageError("--judge llm: say which model, as llm:MODEL")
    prompt = str(options.get("prompt") or PROMPTS[0])
    if prompt not in PROMPTS:
        raise UsageError(f"--llm-prompt {prompt}: choose one of {', '.join(PROMPTS)}")
    temperature = _float(options, "temperature", 0.0)
    if not 0.0 <= temperature <= 2.0:
        raise UsageError(f"--temperature {temperature}: must be between 0 and 2")
    max_tokens = options.get("max_tokens", DEFAULT_MAX_TOKENS if prompt == "ceg" else MAX_TOKENS)
    chunk_words = int(_float(options, "chunk_words", CHUNK_WORDS))
    if chunk_words < 1:
        raise UsageError(f"LLM option chunk_words {chunk_words}: must be at least 1")
    unparsable = str(options.get("count_unparsable_as") or NOT_JUDGED)
    unparsable_verdict("", unparsable)  # a bad choice fails before a client is opened
    # MiniCheck's prompt gives P(yes), which a cut can move; the paper's gives a label.
    cut = one_cut(THRESHOLD, AUTHORS_CUT, options)
    if prompt != "minicheck" and options.get(OPTION) is not None:
        raise UsageError(
            f"--judge-threshold: the LLM judge's prompt '{prompt}' answers Factual or "
            "Nonfactual, a label with no score to cut; use --llm-prompt minicheck "
            "(P(yes), supported above 0.5) or leave the option out"
        )
    # What every LLM judge takes (``LlmJudgeBase``); each prompt adds its own.
    shared: dict[str, Any] = {
        "temperature": temperature,
        "max_tokens": int(max_tokens) if max_tokens else None,
        "count_unparsable_as": unparsable,
    }
    client = make_client(options)
    judge: LlmJudge | LlmMiniCheckJudge
    try:
        if prompt == "minicheck":
            judge = LlmMiniCheckJudge(model, client, **shared, chunk_words=chunk_words,
                                      on_warning=options.get("on_warning"),
                                      cuts=Cuts.same(cut.value, cut.source))
        else:
            judge = LlmJudge(model, client, **shared,
                             structured=str(options.get("structured") or "auto"))
        if _flag(options, "preflight", True):
            client.preflight(model)
    except BaseException:
        client.close()
        raise
    return judge


def _flag(options: Mapping[str, Any], key: str, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    if isinstance(value, str):
        return value.strip().lower() not in ("0", "false", "no", "off", "")
    return bool(value)


def _float(options: Mapping[str, Any], key: str, default: float) -> float:
    value = options.get(key)
    if value is None:
        return default
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"LLM option {key} must be a number, not {value!r}") from exc
