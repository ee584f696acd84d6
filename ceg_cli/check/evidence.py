"""What a ``ceg check`` run checks against: the index, each record's own contexts, or both.

One piece decides it for the whole run (``RunEvidence``): whether the index is
opened (``wants_index``), its model loaded and its retrieval method resolved
before any output is touched, what searches the records' contexts, and, per
record, which of the two its segments are checked against and the language it
is read in (``RunEvidence.prepare``), with the warnings that go with them. A run
on Ray keeps that last part in its driver (``RecordEvidence``); its workers open
the index and search the contexts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import CegError, UsageError
from ..index.lexical.bm25 import resolve_method
from ..lang.codes import UNDETERMINED
from ..types import ResponseInput
from .pipeline import CheckOptions, evidence_source, response_language


class RecordEvidence:
    """Per record of a run with options ``check`` whose contexts are read from
    ``context_fields``: which evidence its segments are checked against (the index
    only where the run ``reads_index``) and the language it is read in, with the
    warnings that go with them (``prepare``). A run on Ray decides this in its
    driver, which opens no index: its workers check what it prepared.
    """

    def __init__(
        self,
        check: CheckOptions,
        *,
        context_fields: Sequence[str],
        reads_index: bool,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.check = check
        self.context_fields = context_fields
        self.reads_index = reads_index
        self.on_warning = on_warning
        self._said_language = False  # the language fallback is said once a run

    def prepare(self, item: ResponseInput, source: str) -> ResponseInput:
        """``item`` with its language, or an error record if it has nothing to be
        checked against (``source``: the responses file's name, for the messages)."""
        if item.error is not None:
            return item
        where = f"{source}:{item.line}"
        found, problem = evidence_source(item, self.check.evidence, self.reads_index,
                                         self.context_fields)
        if problem is not None:
            return replace(item, error=f"{where}: {problem}")
        found_language = response_language(item, self.check.language)
        item = replace(item, language=found_language.language)
        # Text with letters in a script no language is known for; none at all ("42",
        # emoji) has no words to read either way.
        if (found_language.language.startswith(f"{UNDETERMINED}-")
                and not self._said_language and self.on_warning is not None):
            self._said_language = True
            self.on_warning(
                f"{where}: cannot tell the response's language; it is read by the rules of "
                f"its script ({found_language.language}); name the language with --language "
                "CODE (said once: later such records are read the same way)"
            )
        if found == "none" and self.on_warning is not None:
            holds = "is an empty list" if not item.contexts else "holds only blank text"
            self.on_warning(
                f"{where}: field '{item.read.get('contexts', 'contexts')}' {holds}: "
                "its segments are judged on no evidence"
            )
        return item

    def close(self) -> None:
        """Nothing to close: it opened nothing."""


class RunEvidence(RecordEvidence):
    """The index at ``index`` (opened when ``use_index``, else ``None``) and the
    contexts' search, for a run with options ``check`` whose contexts are read from
    ``context_fields``; the index's model computes on ``device``, and its search takes
    ``search_width`` (``--search-width``) where given.

    ``check`` becomes the run's options with the retrieval method the index
    supports (``hybrid`` on an index built before its lexical part: ``dense``,
    said once through ``on_warning``).
    """

    def __init__(
        self,
        index: Path,
        check: CheckOptions,
        *,
        device: str,
        context_fields: Sequence[str],
        search_width: Mapping[str, int] | None = None,
        judge: Any,
        use_index: bool,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        from ..index import open_index

        self.device = device
        self.index: Any = open_index(index) if use_index else None
        try:
            if self.index is not None:
                if self.index.lexical_only:
                    refuse_on_lexical_only(self.index, judge)
                else:
                    # The index's model too: one that cannot be loaded, or gives another
                    # dimension, fails the run here, before --out is touched.
                    self.index.embedder(device)
                if search_width:
                    self.index.set_search_width(search_width)
                ignored = self.index.set_lexical_max_terms(check.retrieval.max_terms)
                if ignored is not None and on_warning is not None:
                    on_warning(ignored)
                # hybrid on an index built before the lexical part: dense, with a warning;
                # on one without vectors: lexical (dense or hybrid asked for: refused).
                method, warning = resolve_method(self.index, check.retrieval.method,
                                                 check.retrieval.method_given)
            else:
                method, warning = check.retrieval.method, None
        except CegError:
            self.close()
            raise
        if warning is not None and on_warning is not None:
            on_warning(warning)
        super().__init__(replace(check, retrieval=replace(check.retrieval, method=method)),
                         context_fields=context_fields, reads_index=self.index is not None,
                         on_warning=on_warning)
        self.contexts = self._context_search(judge)

    def _context_search(self, judge: Any) -> Any:
        """What searches the records' contexts: with the index's model where there is one."""
        if self.check.evidence == "index":
            return None
        from .ctxsearch import context_search, reads_similarity

        return context_search(self.index, self.device,
                              method=self.check.contexts_retrieval,
                              language=self.check.language,
                              similarity=reads_similarity(judge))

    def close(self) -> None:
        if self.index is not None:
            self.index.close()


def refuse_on_lexical_only(index: Any, judge: Any) -> None:
    """What a run cannot do on an index without vectors, refused in one line."""
    if getattr(judge, "reads_similarity", False):
        raise UsageError(
            f"--judge {getattr(judge, 'name', 'verifier')}: it reads each passage's cosine "
            f"similarity, and index at {index.path} was built with --retrieval lexical (no "
            "vectors); use another judge, or an index built without --retrieval lexical"
        )


def wants_index(mode: str, index: Path, first: ResponseInput | None) -> bool:
    """Whether a run with ``--evidence mode`` opens the index at ``index``
    (``open_index`` says why when it cannot); ``first``: its first readable record.

    ``--evidence index`` and ``both`` need it; ``contexts`` never reads it; by
    default (``auto``) an index that is there is used for the records without
    contexts, and one that is not is needed only when the first record has none:
    a file of records without contexts and no index fails at once, as before. A
    file with no readable record needs no index that is not there: its lines are
    error records, and the gate says what was wrong with them.
    """
    if first is None and not index.exists():
        # No record can be read (an empty file, every line bad): nothing would be checked
        # against an index, and what to report is the input's problem, not a missing index.
        return False
    if mode in ("index", "both"):
        return True
    if mode == "contexts":
        return False
    if index.exists():
        return True
    return first is None or first.contexts is None
