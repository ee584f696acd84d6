"""The options of ``ceg check`` (and those ``ceg eval`` shares), checked in one place.

One table says each option's type, allowed values or range, default and help. The
CLI's typer options are made from it (``cli/common.py``'s ``spec_option``), and the
values are checked by it wherever they come from: the command line, a ``CEG_*``
variable, a project file (``ceg_cli/config.py``) or a ``Checker`` keyword
(``RunSettings.resolve``). So a value one of them refuses, every one refuses, with
the same message (``tests/test_option_specs.py`` holds them to it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..index.dense.devices import DEVICES
from ..index.lexical.bm25 import DEFAULT_RETRIEVAL, RETRIEVAL_MODES
from ..judges.checkers.precision import DEFAULT_PRECISION as DEFAULT_JUDGE_PRECISION
from ..judges.checkers.precision import PRECISIONS as JUDGE_PRECISIONS
from ..judges.llm_judges.llm import PROMPTS, UNPARSABLE_CHOICES
from .ctxsearch import CONTEXT_RETRIEVAL_MODES, DEFAULT_CONTEXT_RETRIEVAL
from .pipeline import DEFAULT_EVIDENCE, DEFAULT_QUERY, EVIDENCE_MODES, QUERY_MODES
from .retrieve import DEFAULT_THRESHOLD, DEFAULT_TOP_K

#: What a value of each kind is, as a message says it.
_KIND_NAMES = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "path": "a path (a string)",
    "bool": "true or false",
}


class OptionError(UsageError):
    """A bad value for one option: ``str()`` is ``"--flag VALUE: problem"``."""

    def __init__(self, flag: str, shown: str, problem: str) -> None:
        super().__init__(f"{flag} {shown}: {problem}")
        self.flag = flag
        self.shown = shown
        self.problem = problem


@dataclass(frozen=True)
class OptionSpec:
    """One option: its flag, the kind of its value and what is allowed."""

    #: The keyword (``Checker(top_k=...)``) and the project file's key.
    key: str
    flag: str
    #: int, float, str, path, bool or choice.
    kind: str
    default: Any = None
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    envvar: str | None = None
    short: str | None = None
    help: str = ""
    #: What the range means, where a plain "between" says less.
    range_text: str | None = None
    #: A further check of a well-typed value; raises a UsageError with its message.
    extra: Callable[[Any], None] | None = None

    def allowed(self) -> str:
        """What the option takes, in words (for a message or a table)."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        what = _KIND_NAMES[self.kind]
        if self.low is not None and self.high is not None:
            return f"{what} from {_num(self.low)} to {_num(self.high)}"
        if self.low is not None:
            return f"{what}, at least {_num(self.low)}"
        return what

    def fail(self, value: Any, problem: str, *, quoted: bool = False) -> OptionError:
        shown = repr(value) if quoted or not isinstance(value, (int, float, str)) else str(value)
        return OptionError(self.flag, shown, problem)

    def check(self, value: Any) -> Any:
        """``value`` if this option takes it (numbers as floats where the kind is float,
        paths as ``Path``); else an ``OptionError`` saying what is allowed."""
        kind = self.kind
        if kind == "choice":
            if not isinstance(value, str):
                raise self.fail(value, f"expected {self.allowed()}, got {_type(value)}",
                                quoted=True)
            if value not in self.choices:
                raise self.fail(value, f"choose one of {', '.join(self.choices)}")
            return value
        if kind == "bool":
            if not isinstance(value, bool):
                raise self.fail(value, f"expected true or false, got {_type(value)}",
                                quoted=True)
            return value
        if kind in ("int", "float"):
            value = self._number(value)
        elif kind == "str":
            if not isinstance(value, str):
                raise self.fail(value, f"expected a string, got {_type(value)}", quoted=True)
        elif kind == "path":
            if not isinstance(value, (str, os.PathLike)) or isinstance(value, bytes):
                raise self.fail(value, f"expected a path, got {_type(value)}", quoted=True)
            if not str(os.fspath(value)).strip():
                raise self.fail(str(value), "name a path", quoted=True)
            value = Path(value)
        if self.extra is not None:
            self.extra(value)
        return value

    def _number(self, value: Any) -> int | float:
        integer = self.kind == "int"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            integer and not isinstance(value, int)
        ):
            raise self.fail(value, f"expected {_KIND_NAMES[self.kind]}, got {_type(value)}",
                            quoted=isinstance(value, str) or not isinstance(value, float))
        if not integer:
            value = float(value) + 0.0  # -0.0 is 0: stored and shown as 0
            if math.isnan(value):
                raise self.fail(value, f"not a number; give {self.allowed()}")
        low, high = self.low, self.high
        if (low is not None and value < low) or (high is not None and value > high):
            if self.range_text is not None:
                raise self.fail(value, self.range_text)
            if low is not None and high is not None:
                raise self.fail(value, f"must be between {_num(low)} and {_num(high)}")
            if low is not None:
                raise self.fail(value, f"must be at least {_num(low)}")
            raise self.fail(value, f"must be at most {_num(high)}")
        return value

    def parse(self, text: str) -> Any:
        """A value as the command line or an environment variable gives it: text."""
        if self.kind not in ("int", "float"):
            return self.check(text)
        # Python's int() and float() read "0_5" as 5: a digit separator in an option is
        # a typo, not a number.
        kind = "an integer" if self.kind == "int" else "a number"
        try:
            if "_" in text:
                raise ValueError(text)
            value: Any = int(text.strip()) if self.kind == "int" else float(text.strip())
        except ValueError:
            raise self.fail(text, f"not {kind}", quoted=True) from None
        try:
            return self.check(value)
        except OptionError as exc:  # quoted as typed ("1e0", not "1.0")
            raise OptionError(self.flag, text.strip(), exc.problem) from None


def _num(x: float) -> str:
    return f"{x:g}"


def _type(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def _not_blank(flag: str, hint: str, strip: str | None = None) -> Callable[[Any], None]:
    """An empty name matches no field: every line would be a bad line, one warning
    each, where the call itself is wrong."""

    def check(value: str) -> None:
        if not value.strip(strip):
            raise UsageError(f"{flag} {value!r}: {hint}")

    return check


def _judge_name(value: str) -> None:
    from ..judges import check_judge_name

    if not value.strip():
        raise UsageError("--judge '': name a judge (offline, verifier, minicheck:ALIAS, ...)")
    check_judge_name(value)


def _rewriter(value: str) -> None:
    if not value.startswith("llm:") or not value[4:].strip():
        raise UsageError(f"--rewriter {value}: name an LLM, as llm:MODEL")


def _pattern(value: str) -> None:
    from .markers import compile_pattern

    compile_pattern(value)


def _search_width(value: str) -> None:
    from ..index.dense.searchwidth import parse

    parse(value)


def _base_url(value: str) -> None:
    if not value.strip():
        # "$URL" of an unset variable: sending the key to the default endpoint instead
        # would be a silent fallback.
        raise UsageError("--llm-base-url '': name the endpoint, or leave the option out")


def _spec(*args: Any, **kwargs: Any) -> tuple[str, OptionSpec]:
    spec = OptionSpec(*args, **kwargs)
    return spec.key, spec


_SHARE = "a share from 0 to 1"

#: Every option of ``ceg check``'s that is more than a file to write or a switch of
#: the run's own output, by key. ``ceg eval`` declares its shared options from here.
OPTIONS: dict[str, OptionSpec] = dict([
    _spec("index", "--index", "path", Path("index"), envvar="CEG_INDEX",
          help="Index directory."),
    _spec("judge", "--judge", "str", "offline", extra=_judge_name,
          help="offline, verifier, verifier:DIR, nli:MODEL, minicheck:ALIAS|DIR, "
          "hhem:ALIAS|DIR or llm:MODEL (ceg models list shows the aliases)."),
    _spec("judge_precision", "--judge-precision", "choice", DEFAULT_JUDGE_PRECISION,
          choices=JUDGE_PRECISIONS,
          help="The float width of a minicheck:, hhem: or nli: checker: float32 (parity "
          "with the authors), bfloat16, or float16 (CUDA only; not for T5)."),
    _spec("judge_threshold", "--judge-threshold", "float", low=0.0, high=1.0,
          range_text="the judge's score is between 0 and 1, and so is its cut",
          help="The judge's cut on its score, 0 to 1, in every setting: a segment is "
          "supported when its score reaches it (default: the judge's own: for offline and "
          "verifier the leave-one-domain-out protocol's for the index or contexts setting, "
          "for minicheck:, hhem: and nli: 0.5; llm: with the paper's prompt gives a label "
          "and refuses it)."),
    _spec("top_k", "--top-k", "int", DEFAULT_TOP_K, low=1, envvar="CEG_TOP_K", short="-k",
          help="Passages retrieved per segment."),
    _spec("threshold", "--threshold", "float", DEFAULT_THRESHOLD, low=-1.0, high=1.0,
          envvar="CEG_THRESHOLD", range_text="a cosine similarity is between -1 and 1",
          help="Cosine similarity below which passages after the first are dropped "
          "(the CEG rule)."),
    _spec("query", "--query", "choice", DEFAULT_QUERY, choices=QUERY_MODES,
          envvar="CEG_QUERY",
          help="What is searched: the segment alone, or the question and the segment."),
    _spec("retrieval", "--retrieval", "choice", DEFAULT_RETRIEVAL, choices=RETRIEVAL_MODES,
          envvar="CEG_RETRIEVAL",
          help="How passages are found: dense (cosine), lexical (BM25) or hybrid (both, "
          "fused); the threshold applies to the cosine in every case."),
    _spec("lexical_max_terms", "--lexical-max-terms", "int", low=0,
          help="Search a tantivy lexical part with only each query's N rarest terms: "
          "faster, and results that can differ from the exact search; 0: every term "
          "(default: every term up to 2,000,000 passages, the 10 rarest past them; "
          "docs/measurements.md gives both)."),
    _spec("search_width", "--search-width", "str", extra=_search_width,
          help="Search an approximate index with other settings than its build chose, e.g. "
          "nprobe=256,k_factor=16 (ivfpq, ivfpqfs), efSearch=256 (hnsw; ivfpqfs's list "
          "graph): wider for recall, narrower for speed (docs/index-format.md, Index types)."),
    _spec("response_field", "--response-field", "str", "response",
          extra=_not_blank("--response-field", "name the field that holds the response"),
          help="The field holding the text to check."),
    _spec("question_field", "--question-field", "str",
          extra=_not_blank("--question-field", "name the field that holds the question "
                           "(leave the option out for question, then prompt)"),
          help="The field holding the question (default: question, then prompt, then a "
          "string in user_input or input)."),
    _spec("evidence", "--evidence", "choice", DEFAULT_EVIDENCE, choices=EVIDENCE_MODES,
          help="What segments are checked against: the record's own contexts, the index, "
          "or both; auto takes the record's contexts where it has them and the index "
          "otherwise."),
    _spec("contexts_field", "--contexts-field", "str",
          extra=_not_blank("--contexts-field", "name the field that holds the contexts "
                           "(dots for a nested one: retrieval.docs)", strip=". "),
          help="The field holding a record's contexts, dots for a nested one (default: "
          "contexts, then retrieved_contexts, then retrieval_context)."),
    _spec("contexts_retrieval", "--contexts-retrieval", "choice", DEFAULT_CONTEXT_RETRIEVAL,
          choices=CONTEXT_RETRIEVAL_MODES, envvar="CEG_CONTEXTS_RETRIEVAL",
          help="How a record's own passages are ranked: lexical (BM25, nothing embedded, "
          "no threshold: the contexts were retrieved for the record), or dense or hybrid, "
          "as --retrieval ranks an index, with the threshold."),
    _spec("max_nonfactual_rate", "--max-nonfactual-rate", "float", low=0.0, high=1.0,
          range_text=f"must be {_SHARE}",
          help="Fail (exit 1) when the share of nonfactual segments exceeds this "
          "(default: no limit)."),
    _spec("max_nonfactual_responses", "--max-nonfactual-responses", "int", low=0,
          help="Fail (exit 1) when more responses than this are nonfactual (default: no "
          "limit)."),
    _spec("min_citation_recall", "--min-citation-recall", "float", low=0.0, high=1.0,
          range_text=f"must be {_SHARE}",
          help="Fail (exit 1) when fewer than this share of the sentences with a claim, in "
          "answers that cite their contexts ([1]), are supported by the contexts they cite "
          "(default: no limit)."),
    _spec("min_citation_precision", "--min-citation-precision", "float", low=0.0, high=1.0,
          range_text=f"must be {_SHARE}",
          help="Fail (exit 1) when fewer than this share of the citations are relevant "
          "(default: no limit)."),
    _spec("citation_pattern", "--citation-pattern", "str", extra=_pattern,
          # Rich reads the help as markup, where a backslash escapes a bracket: two
          # backslashes show as one.
          help="A regular expression for citation markers, its one group holding the "
          "references (default: [1], [1, 3], [1][3]; e.g. '\\\\[\\^(\\d+)\\]' for [^1])."),
    _spec("regenerate", "--regenerate", "bool", False,
          help="Rewrite nonfactual responses with the LLM from the evidence and check them "
          "again (needs --judge llm:MODEL)."),
    _spec("max_attempts", "--max-attempts", "int", 2, low=1, help="Rewrites per response."),
    _spec("rewriter", "--rewriter", "str", extra=_rewriter,
          help="The LLM that rewrites, as llm:MODEL (default: the judge, when it is an LLM)."),
    _spec("llm_base_url", "--llm-base-url", "str", extra=_base_url,
          help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL, else OpenAI). The "
          "key comes from $OPENAI_API_KEY."),
    _spec("concurrency", "--concurrency", "int", 4, low=1, help="LLM requests at once."),
    _spec("temperature", "--temperature", "float", 0.0, low=0.0, high=2.0,
          help="LLM sampling temperature."),
    _spec("no_cache", "--no-cache", "bool", False, help="Do not use the LLM call cache."),
    _spec("cache_dir", "--cache-dir", "path",
          help="Where the LLM call cache lives (default: $CEG_CACHE_DIR, else ~/.cache/ceg)."),
    _spec("llm_prompt", "--llm-prompt", "choice", "ceg", choices=PROMPTS,
          help="The LLM judge's prompt: ceg (the paper's: Factual or Nonfactual, citing "
          "passages) or minicheck (MiniCheck's yes or no, scored by the probability of yes "
          "where the endpoint gives log-probabilities)."),
    _spec("unparsable_as", "--unparsable-as", "choice", "not_judged",
          choices=UNPARSABLE_CHOICES,
          help="What an LLM reply that cannot be read counts as (not_judged fails the run, "
          "exit 3)."),
    _spec("batch_tokens", "--batch-tokens", "int", low=1,
          help="The padded tokens a batch of a minicheck:, hhem: or nli: checker holds at "
          "most (pairs x its longest pair; default: 2048 on a CPU, no limit on a GPU)."),
    _spec("device", "--device", "choice", "auto", choices=DEVICES,
          help="Where the models compute (the index's embedder for queries, the verifier's "
          "or NLI judge's model): auto is CUDA when torch sees one, else the CPU."),
])


def check_option(key: str, value: Any) -> Any:
    """``value`` checked as option ``key`` takes it (``None`` is "not set")."""
    return None if value is None else OPTIONS[key].check(value)


def check_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """Each value checked as its key's option takes it, in the table's order (so that
    of two bad values the same one is named whoever calls). A key the table does not
    hold (``language``, checked by ``lang.codes.check_language``) passes as it is."""
    order = {key: n for n, key in enumerate(OPTIONS)}
    return {key: check_option(key, values[key]) if key in OPTIONS else values[key]
            for key in sorted(values, key=lambda k: order.get(k, len(order)))}


#: The options an LLM judge's client and prompt read (and --regenerate's rewriter).
LLM_KEYS = ("llm_base_url", "concurrency", "temperature", "no_cache", "cache_dir",
            "unparsable_as", "llm_prompt")
#: The options a checker model reads (minicheck:, hhem:, nli:).
CHECKER_KEYS = ("judge_precision", "batch_tokens")


#: What ``judge_options`` and ``ignored_options`` read of a command's values.
JUDGE_VALUE_KEYS = ("judge", *LLM_KEYS, *CHECKER_KEYS, "device", "evidence",
                    "contexts_retrieval", "regenerate")


def judge_values(params: Mapping[str, Any]) -> dict[str, Any]:
    """The values of ``params`` (a command's parameters by option name, its ``locals()``)
    that say which judge a run uses and what it reads (``JUDGE_VALUE_KEYS``)."""
    return {key: params[key] for key in JUDGE_VALUE_KEYS if key in params}


def judge_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """What ``create_judge`` reads, from the options' values (each checked; a key left
    out or None is its default): the LLM client's and prompt's, a checker model's float
    width and batch budget, and the device. Every judge takes what it needs. The API
    key is not here: the client reads it from the environment, so it never passes
    through options."""
    checked = {key: check_option(key, values.get(key))
               for key in (*LLM_KEYS, *CHECKER_KEYS, "device")}

    def value(key: str) -> Any:
        return OPTIONS[key].default if checked[key] is None else checked[key]

    options: dict[str, Any] = {
        "concurrency": value("concurrency"),
        "temperature": value("temperature"),
        "cache": not value("no_cache"),
        "count_unparsable_as": value("unparsable_as"),
        "prompt": value("llm_prompt"),
        "precision": value("judge_precision"),
        "device": value("device"),
    }
    for key, name in (("llm_base_url", "base_url"), ("cache_dir", "cache_dir"),
                      ("batch_tokens", "batch_tokens")):
        if checked[key] is not None:
            options[name] = str(checked[key]) if key == "cache_dir" else checked[key]
    return options


#: What only an llm: judge reads (a rewriter reads the rest of LLM_KEYS too).
_PROMPT_KEYS = ("llm_prompt", "unparsable_as")
#: Judges that read --judge-precision and --batch-tokens (checker models).
_PRECISION_JUDGES = ("minicheck", "hhem", "nli")


def ignored_options(values: Mapping[str, Any]) -> list[str]:
    """What a run would silently not use: one warning for each option set away from its
    default that nothing in this run reads (docs/cli.md, "Options a run does not read").

    They are warned of, not refused: the setting is harmless, and a project file's
    top-level keys apply to every command and judge a team runs.
    """
    def changed(key: str) -> bool:
        value = values.get(key)
        return value is not None and value != OPTIONS[key].default

    def said(keys: list[str]) -> str:
        return ", ".join(f"{OPTIONS[k].flag} {_shown(values[k])}".rstrip() for k in keys)

    judge = str(values.get("judge") or OPTIONS["judge"].default)
    prefix = judge.partition(":")[0]
    if prefix == "cascade":  # the options are the judge's it hands on to
        prefix = judge.partition(":")[2].partition(":")[0]
    llm_judge = prefix == "llm"
    out = []
    judge_only = [k for k in _PROMPT_KEYS if changed(k)]
    if judge_only and not llm_judge:
        out.append(f"{said(judge_only)}: ignored: only an llm: judge reads "
                   f"{'it' if len(judge_only) == 1 else 'them'} (the judge is {judge})")
    client = [k for k in LLM_KEYS if k not in _PROMPT_KEYS and changed(k)]
    if client and not llm_judge and not values.get("regenerate"):
        out.append(f"{said(client)}: ignored: only an LLM reads "
                   f"{'it' if len(client) == 1 else 'them'} (an llm: judge, or --regenerate's "
                   f"rewriter), and this run uses none (the judge is {judge})")
    checker = [k for k in CHECKER_KEYS if changed(k)]
    if checker and prefix not in _PRECISION_JUDGES:
        out.append(f"{said(checker)}: ignored: only a minicheck:, hhem: or nli: checker "
                   f"reads {'it' if len(checker) == 1 else 'them'} (the judge is {judge})")
    if changed("contexts_retrieval") and values.get("evidence") == "index":
        out.append(f"{said(['contexts_retrieval'])}: ignored: it ranks a record's own "
                   "contexts, which --evidence index does not read")
    # The Ray engine's own options (the command's, not the table's).
    engine = str(values.get("engine") or "local")
    on_ray = [f"--{key.replace('_', '-')} {_shown(values[key])}" for key in
              ("ray_address", "workers", "gpus_per_worker") if values.get(key) is not None]
    if on_ray and engine != "ray":
        out.append(f"{', '.join(on_ray)}: ignored: only --engine ray reads "
                   f"{'it' if len(on_ray) == 1 else 'them'} (the engine is {engine})")
    return out


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "" if value else "false"
    return str(value)
