"""The languages of an index's documents, and the model they call for.

One rule names a document's language at build time: ``chunking.document_language``
(the language its source declares, as a Wikipedia dump does for its wiki's
pages, else ``lang.detect`` on the document's start). It gives each passage its language
(``chunks.language``, read back by BM25 and the judges), meta.json its
``languages`` (``document_languages``), and, on the first ``LANGUAGE_SAMPLE``
documents of each source, the model a build with no ``--model`` uses
(``default_model``); at the end of the build, the languages of all the documents
are held against that choice (``check_model_choice``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from ...lang.codes import ENGLISH, UNDETERMINED, base_language
from .buildopts import BuildOptions
from .chunking import document_language

__all__ = ["LANGUAGE_SAMPLE", "check_model_choice", "default_model", "document_languages"]


#: Documents read from the start of each source to choose the default model.
LANGUAGE_SAMPLE = 50


def default_model(
    kinds: dict[Path, str], options: BuildOptions, on_warning: Callable[[str], None] | None
) -> str | None:
    """The model of a build with no ``--model``: the English default, unless
    ``--language`` names another language or, with ``auto``, the first documents of
    the sources are in other languages (``packaged.default_model_for``); said once.

    The documents' languages come from ``chunking.document_language``, the one rule
    that also gives each passage its language (``chunks.language``) and meta.json its
    ``languages``: the build checks its choice against those at the end
    (``check_model_choice``).
    """
    from itertools import islice

    from ...corpus.sources import iter_documents
    from ..dense.packaged import default_model_for

    languages: set[str] = set()
    if options.language != "auto":  # --language CODE names them all
        languages.add(options.language)
        kinds = {}
    for path in kinds:
        documents = iter_documents(path, namespaces=options.namespaces,
                                   follow_symlinks=options.follow_symlinks)
        for document in islice(documents, LANGUAGE_SAMPLE):
            languages.add(document_language(document))
    languages.discard(UNDETERMINED)  # no letters ("42", a table of numbers): no language
    model = default_model_for(languages)
    if model is not None and on_warning is not None:
        named = ", ".join(sorted(languages))
        on_warning(f"documents in {named}: building with the multilingual model {model} "
                   "(--model NAME to choose another)")
    return model


def check_model_choice(
    chosen: str | None, languages: dict[str, int], warn: Callable[[str], None]
) -> None:
    """Say so where the model chosen from the first documents (``default_model``) is
    not the one the index's documents, all of them read, call for: English documents
    first and others after them were embedded with the English model."""
    from ..dense.packaged import default_model_for

    read = {code: n for code, n in languages.items() if code != UNDETERMINED}
    wanted = default_model_for(read)
    if wanted is None or wanted == chosen:
        return
    others = {code: n for code, n in read.items() if base_language(code) != ENGLISH}
    listed = ", ".join(f"{n:,} in {code}" for code, n in sorted(others.items(),
                                                               key=lambda x: -x[1]))
    warn(f"documents past the first {LANGUAGE_SAMPLE} of each source are not all English "
         f"({listed}): this index was built with the English model, which finds them "
         f"poorly; rebuild with --model multilingual")


def document_languages(db: sqlite3.Connection) -> dict[str, int]:
    """Documents per language (``meta.json``'s ``languages``), most first: a document
    counts by its first passage; one kept from an index built before languages was
    read as English and counts as English."""
    rows = db.execute(
        "SELECT coalesce(language, 'en'), count(*) FROM chunks WHERE ordinal = 0 GROUP BY 1"
    ).fetchall()
    return {str(code): int(n) for code, n in sorted(rows, key=lambda r: (-r[1], r[0]))}
