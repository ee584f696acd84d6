"""What a build does with what is already at its target.

Before it starts: it builds only into a new or empty directory or over an
index ceg wrote and nothing else (``check_target``). Before it embeds: a
complete build left in the work folder by a kill during the swap is put in
place (``finish_swap``), and an ``--append`` with no changed source only adds,
repairs or drops the lexical part (``unchanged``, ``relink``).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from ...errors import CegError, UsageError
from ..dense.vectors import describe
from ..indexdir import FOREIGN_OK, BuildTarget, made_by_ceg, write_json
from ..layout import CHUNKS_FILE, LEXICAL_DIR, MANIFEST, META_FILE, VECTORS_FILE
from ..lexical.bm25 import build_lexical, lexical_problem, want_lexical
from ..lexical.lexonly import is_lexical_only
from ..metacheck import file_problem
from ..store import check_vectors_file, connect_readonly, read_meta
from .buildopts import BuildOptions, BuildReport

#: What an index directory may hold for a build to replace it: the index's own
#: files and the few a checkout keeps there (``FOREIGN_OK``, carried over).
INDEX_ENTRIES = frozenset({META_FILE, VECTORS_FILE, CHUNKS_FILE, LEXICAL_DIR, *FOREIGN_OK})


def check_target(target: Path) -> None:
    """Build only into a new or empty directory, or over an index ceg wrote and nothing else.

    A build replaces the whole directory: anything in it that is not the
    index's would be lost, so the build refuses before it touches anything.
    """
    if target.exists() and not target.is_dir():
        raise UsageError(f"--index {target}: exists and is not a directory")
    if not target.is_dir():
        return
    meta_path = target / META_FILE
    problem = file_problem(meta_path) if meta_path.exists() else None
    if problem is not None:
        raise UsageError(
            f"--index {target}: its {META_FILE} is not a ceg index's ({problem}); ceg builds "
            "only into a new or empty directory or over its own index: choose another "
            "directory (a damaged ceg index: remove it yourself and build again)"
        )
    from ..layout import is_generation_name

    foreign = sorted(p.name for p in target.iterdir()
                     if p.name not in INDEX_ENTRIES and not is_generation_name(p.name))
    if foreign:
        what = "a ceg index that also holds" if meta_path.exists() else "not a ceg index: it holds"
        raise UsageError(
            f"--index {target}: the directory is {what} other files "
            f"({', '.join(foreign[:3])}), which a build would replace with the index; "
            "move them out, or choose another directory"
        )


def finish_swap(
    site: BuildTarget,
    digests: set[str],
    options: BuildOptions,
    report: BuildReport,
    on_warning: Callable[[str], None] | None,
) -> bool:
    """Put a complete build of these sources in place, if one waits in the work directory.

    A build killed between writing its last file and the swap leaves a whole
    index in ``.NAME.building`` (meta.json written, the manifest gone):
    ``--resume`` puts it in place instead of embedding everything again.
    """
    work = site.work
    if not made_by_ceg(work) or not (work / META_FILE).is_file() or (work / MANIFEST).exists():
        return False
    try:
        meta = read_meta(work)
        check_vectors_file(work, meta)
    except CegError:
        return False  # not whole: the build starts over, as it would have
    if not digests <= {s["digest"] for s in meta["sources"]} or (
        meta["chunker"]["max_words"] != options.chunk_words
        or meta["embed_text"] != options.embed_text
        or is_lexical_only(meta) != (options.retrieval == "lexical")
    ):
        return False
    if on_warning is not None:
        on_warning(f"--resume: {work} holds the whole index this build makes (the build was "
                   "stopped as it put it in place); putting it in place, nothing re-embedded")
    site.swap_in(work)
    report.total_chunks = meta["counts"]["chunks"]
    report.total_documents = meta["counts"]["documents"]
    return True


def unchanged(
    site: BuildTarget,
    meta: dict[str, Any],
    options: BuildOptions,
    report: BuildReport,
    warn: Callable[[str], None],
) -> None:
    """Every source is already indexed as it is: nothing to embed.

    The lexical part is still added, repaired (missing, damaged or another
    index's) or, with ``--no-lexical``, dropped, from the chunk store; an index
    type cannot change without rebuilding the vectors, and the run says so.
    """
    target = site.given
    report.total_chunks = meta["counts"]["chunks"]
    report.total_documents = meta["counts"]["documents"]
    wanted, skipped = want_lexical(options.lexical, report.total_chunks, meta)
    if wanted and ("lexical" not in meta or lexical_problem(meta, site.path) is not None):
        # Built before the lexical part existed, without it, or it was lost: add it.
        report.lexical_seconds = relink(site, meta, lexical=True,
                                        engine=options.lexical_engine)
    elif options.lexical is False and "lexical" in meta:
        relink(site, meta, lexical=False, skipped=skipped)
        warn(f"--no-lexical: removed the lexical (BM25) part of {target}; retrieval is dense")
    elif "lexical" in meta and options.lexical_engine not in ("auto",
                                                             meta["lexical"]["library"]):
        # Asked for explicitly: applied, from the chunk store, nothing re-embedded.
        was = meta["lexical"]["library"]
        relink(site, meta, lexical=True, engine=options.lexical_engine)
        warn(f"--lexical-engine {options.lexical_engine}: no source changed; rebuilt the "
             f"lexical part of {target} with {options.lexical_engine} (it was {was}), "
             "nothing re-embedded")
    current = None if is_lexical_only(meta) else describe(meta)["index_type"]
    if current is not None and options.index_type != "auto" and options.index_type != current:
        warn(
            f"--index-type {options.index_type}: no source changed, so nothing was rebuilt and "
            f"the index stays {current}; the type applies when a source changes, or rebuild "
            "without --append to change it now"
        )


def relink(site: BuildTarget, meta: dict[str, Any], *, lexical: bool, skipped: str = "",
           engine: str = "auto") -> float:
    """Give the index at ``site`` a new lexical part, or none, as a new index swapped in.

    The vectors and passages are hard links (copies where links fail): indexes
    are never changed in place, so sharing the files is safe. Returns seconds.
    """
    started = time.perf_counter()
    target = site.path
    tmp = site.new_work()
    try:
        for name in (VECTORS_FILE, CHUNKS_FILE):
            if name == VECTORS_FILE and is_lexical_only(meta):
                continue  # an index without vectors (lexonly)
            try:
                os.link(target / name, tmp / name)
            except OSError:
                shutil.copy2(target / name, tmp / name)
        meta = {k: v for k, v in meta.items() if k not in ("lexical", "lexical_skipped")}
        if lexical:
            with closing(connect_readonly(tmp / CHUNKS_FILE)) as db:
                meta["lexical"] = build_lexical(db, tmp, meta["embed_text"], engine)
        else:
            meta["lexical_skipped"] = skipped
        write_json(tmp / META_FILE, meta)
        site.swap_in(tmp)
    finally:
        site.discard(tmp)
    return time.perf_counter() - started
