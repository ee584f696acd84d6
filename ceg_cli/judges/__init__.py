"""Judges decide whether evidence supports a segment.

A ``Judge`` has one required method, ``judge(items) -> list[Verdict]``, taking
a batch so that a backend can batch model calls or run requests concurrently
(the LLM judge) without the pipeline knowing. Judges are created by name from
a registry: ``offline``, ``verifier`` (or ``verifier:DIR``), ``nli:MODEL``,
``llm:MODEL``, ``minicheck:ALIAS|DIR``, ``hhem:ALIAS|DIR``. Built-in judges register
the same way a third party does, and their modules are imported only when
chosen, so heavy dependencies load only for the judge in use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..errors import UsageError
from ..types import JudgeItem, Verdict


class Judge(Protocol):
    #: The name the judge was created with, as written in the output.
    name: str
    #: One line saying what the method is, as written in the output.
    method: str
    #: Optional: ``cuts`` (``judges.cuts.Cuts``), the judge's cut on its score in each
    #: setting, for a judge that supports a segment when its score reaches a cut; such a
    #: judge takes ``--judge-threshold`` (the option ``judge_threshold``) and reads each
    #: item's ``setting``. A judge without it refuses the option.
    #: Optional: True when the judge reads its passages' cosine similarities, which
    #: are then computed even where nothing else needs them (``--contexts-retrieval
    #: lexical``); a judge without it gets ``similarity`` None on such passages.

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        """One verdict per item, in order."""
        ...


#: A factory gets the part of the name after the colon ("" if none) and the
#: options the CLI collected (base URL, concurrency, ...); it uses what it needs.
JudgeFactory = Callable[[str, Mapping[str, Any]], Judge]

# name prefix -> "module:function", imported on first use.
_REGISTRY: dict[str, str | JudgeFactory] = {
    "offline": "ceg_cli.judges.offline.offline:create",
    "verifier": "ceg_cli.judges.checkers.verifier:create",
    "nli": "ceg_cli.judges.checkers.nli:create",
    "llm": "ceg_cli.judges.llm_judges.llm:create",
    "minicheck": "ceg_cli.judges.checkers.minicheck:create",
    "hhem": "ceg_cli.judges.checkers.hhem:create",
    "cascade": "ceg_cli.judges.offline.cascade:create",
}
_NEEDS_ARGUMENT = {
    "nli": "nli:MODEL (a Hugging Face name or a local path)",
    "llm": "llm:MODEL (a model served by an OpenAI-compatible endpoint)",
    "minicheck": "minicheck:ALIAS|DIR (ceg models list shows the aliases)",
    "hhem": "hhem:ALIAS|DIR (e.g. hhem:hhem-2.1-open after ceg models pull hhem-2.1-open)",
    "cascade": "cascade:JUDGE (the offline judge, then JUDGE where it cannot tell)",
}


def register(prefix: str, factory: str | JudgeFactory, *, usage: str | None = None) -> None:
    """Make ``--judge PREFIX`` or ``--judge PREFIX:ARG`` create a judge with ``factory``."""
    _REGISTRY[prefix] = factory
    if usage:
        _NEEDS_ARGUMENT[prefix] = usage


def judge_names() -> list[str]:
    return [_NEEDS_ARGUMENT.get(p, p) for p in _REGISTRY]


def check_judge_name(name: str) -> None:
    """Refuse a name no registered judge answers to, or one that lacks its model,
    without creating anything (a project file's judge is checked so, at once)."""
    prefix, colon, arg = name.partition(":")
    if prefix not in _REGISTRY:
        raise UsageError(
            f"--judge {name}: unknown judge; choose one of: {', '.join(judge_names())}"
        )
    if not arg.strip() and (colon or prefix in _NEEDS_ARGUMENT):
        # "verifier:" and "nli:" alike: a colon promises a model, and none is named.
        usage = _NEEDS_ARGUMENT.get(prefix, f"{prefix}:DIR (or {prefix} alone)")
        raise UsageError(f"--judge {name}: say which model, as {usage}")
    if prefix == "cascade":
        check_judge_name(arg.strip())  # the judge it hands on to


def create_judge(name: str, options: Mapping[str, Any] | None = None) -> Judge:
    """Create the judge called ``name``; an unknown name lists the valid ones."""
    from .cuts import OPTION, check_threshold

    check_judge_name(name)
    prefix, _, arg = name.partition(":")
    factory = _REGISTRY[prefix]
    options = options or {}
    # A bad --judge-threshold is refused before a model is loaded.
    override = check_threshold(options.get(OPTION))
    if isinstance(factory, str):
        module_name, _, func = factory.partition(":")
        factory = getattr(importlib.import_module(module_name), func)
    judge = factory(arg, options)
    if override is not None and getattr(judge, "cuts", None) is None:
        # A judge that does not cut a score would run without the cut it was given.
        close = getattr(judge, "close", None)
        if close is not None:
            close()
        raise UsageError(
            f"--judge-threshold: the judge {judge.name} decides without a cut on a score; "
            "leave the option out"
        )
    return judge


def registered_here() -> dict[str, tuple[JudgeFactory, str | None]]:
    """The judges registered in this process with a factory object (a notebook's own,
    a test's), with their usage line: what another process (a Ray worker) must register
    to create them too. Judges registered by module name are found there by name."""
    return {prefix: (factory, _NEEDS_ARGUMENT.get(prefix)) for prefix, factory in _REGISTRY.items()
            if not isinstance(factory, str)}


#: Judges whose model runs its matrix products on the CPU; the others (``offline``,
#: ``llm:``) are a thread of Python or wait on an endpoint.
_MODEL_JUDGES = frozenset({"verifier", "nli", "minicheck", "hhem"})


def cpus_needed(name: str) -> int:
    """The CPUs one copy of the judge ``name`` is given where it runs beside others (a Ray
    worker): two for a checker model (torch's threads; a copy's memory is the model's
    size, so more copies of one thread each would fill a node's memory first), one for
    the rest."""
    prefix, _, arg = name.partition(":")
    if prefix == "cascade":
        return cpus_needed(arg)
    return 2 if prefix in _MODEL_JUDGES else 1

