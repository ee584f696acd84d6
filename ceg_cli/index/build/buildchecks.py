"""What a build checks of its options before it touches anything, and of an index
it appends to: each refusal one line, exit 2 (``builder.build_index`` calls them).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...lang.codes import check_language
from ..indexdir import BuildTarget
from ..layout import ENGINES, META_FILE
from ..lexical.lexonly import BUILD_RETRIEVALS, LEXICAL_ONLY, is_lexical_only
from ..store import check_model, check_vectors_file, read_meta
from .buildopts import BuildOptions


def check_options(options: BuildOptions, kinds: dict[Path, str]) -> BuildOptions:
    """The build's options checked, before it touches anything: the language code,
    the passage size, the multistream index, the lexical engine, the retrieval and
    ``--prune``; the options as the build uses them."""
    if check_language(options.language) != options.language:
        options = replace(options, language=check_language(options.language))
    if options.chunk_words < 10:
        raise UsageError(f"--chunk-words {options.chunk_words}: use at least 10 words")
    if options.prune and not options.update:
        raise UsageError("--prune goes with --update: it removes the sources an update "
                         "does not name")
    check_multistream_index(kinds, options.multistream_index)
    check_engine(options)
    return check_retrieval(options)


def check_retrieval(options: BuildOptions) -> BuildOptions:
    """The options with ``--retrieval`` applied: ``dense`` is ``--no-lexical``; ``lexical``
    embeds nothing, so an option that only says how to embed is refused in one line."""
    if options.retrieval not in BUILD_RETRIEVALS:
        raise UsageError(f"--retrieval {options.retrieval}: expected one of "
                         f"{', '.join(BUILD_RETRIEVALS)}")
    if options.retrieval == "dense":
        if options.lexical:
            raise UsageError("--retrieval dense builds no lexical part: leave out --lexical")
        return replace(options, lexical=False)
    if options.retrieval != LEXICAL_ONLY:
        return options
    if options.lexical is False:
        raise UsageError("--retrieval lexical builds only the lexical part: leave out "
                         "--no-lexical")
    embedding = [
        flag for flag, given in (
            (f"--model {options.model}", options.model is not None),
            (f"--backend {options.backend}", options.backend is not None),
            (f"--index-type {options.index_type}", options.index_type != "auto"),
            (f"--precision {options.precision}", options.precision != "auto"),
            # As --backend: a device or batch for a model that never runs says nothing.
            (f"--device {options.device}", options.device != "auto"),
            (f"--batch-size {options.batch_size}",
             options.batch_size != BuildOptions.batch_size),
        ) if given
    ]
    if embedding:
        raise UsageError(f"{', '.join(embedding)}: --retrieval lexical embeds nothing, so "
                         f"{'this option says' if len(embedding) == 1 else 'these say'} "
                         "nothing; leave it out, or build without --retrieval lexical")
    return replace(options, lexical=True)


def check_not_updated(meta: dict[str, Any], target: Path) -> None:
    """``--append`` extends a whole index, not one updated in place: its store is a base
    and a generation (``update``), which only ``--update`` brings in step."""
    if "generation" in meta:
        raise UsageError(f"--append: index at {target} has been updated in place; "
                         "bring it in step with --update (per document), or rebuild it "
                         "without --append")


def check_same_retrieval(meta: dict[str, Any], options: BuildOptions, target: Path) -> None:
    """--append keeps an index's kind: vectors for every passage, or for none."""
    if is_lexical_only(meta) and options.retrieval != LEXICAL_ONLY:
        raise UsageError(
            f"index at {target} was built with --retrieval lexical (no vectors); append to it "
            "with --retrieval lexical, or rebuild it without"
        )
    if not is_lexical_only(meta) and options.retrieval == LEXICAL_ONLY:
        raise UsageError(
            f"index at {target} has vectors; --append --retrieval lexical would leave the new "
            "passages without them: append without --retrieval lexical, or rebuild the index "
            "with it"
        )


def check_same_settings(meta: dict[str, Any], options: BuildOptions, target: Path) -> None:
    recorded = meta["chunker"]["max_words"]
    if recorded != options.chunk_words:
        raise UsageError(
            f"index at {target} was built with --chunk-words {recorded}; appending with "
            f"{options.chunk_words} would mix passage sizes: use {recorded} or rebuild"
        )
    if meta["embed_text"] != options.embed_text:
        raise UsageError(
            f"index at {target} embeds '{meta['embed_text']}'; this run asked for "
            f"'{options.embed_text}': rebuild the index to change it"
        )


def check_multistream_index(kinds: dict[Path, str], index: Path | None) -> None:
    if index is None:
        return
    dumps = [p for p, kind in kinds.items() if kind == "mediawiki"]
    if len(dumps) != 1:
        raise UsageError(
            f"--multistream-index {index}: it belongs to one dump, and the sources hold "
            f"{len(dumps)} MediaWiki dumps; build that dump on its own"
        )
    if not index.is_file():
        raise UsageError(f"--multistream-index {index}: no such file")


def check_engine(options: BuildOptions) -> None:
    if options.engine not in ENGINES:
        raise UsageError(f"--engine {options.engine}: expected one of {', '.join(ENGINES)}")
    if options.workers is not None and options.workers < 1:
        raise UsageError(f"--workers {options.workers}: use at least 1")
    if options.engine == "ray" and options.precision == "float16":
        raise UsageError("--precision float16 goes with --engine local: Ray workers compute "
                         "in float32")
    if options.engine == "ray":
        from .ray_engine import require_ray
        from .ray_session import check_reachable

        # Before the model loads: say at once how to install Ray, or that no cluster answers.
        require_ray()
        if options.ray_address:
            check_reachable(options.ray_address)
    elif options.ray_address:
        raise UsageError("--ray-address goes with --engine ray")


def appended_meta(site: BuildTarget, options: BuildOptions) -> dict[str, Any] | None:
    """The meta.json of the index an ``--append`` extends, checked against this run."""
    if not options.append or not (site.path / META_FILE).exists():
        return None
    old_meta = read_meta(site.path)
    check_not_updated(old_meta, site.given)
    check_same_retrieval(old_meta, options, site.given)
    if not is_lexical_only(old_meta):
        check_model(old_meta, options.model, site.given)
        check_vectors_file(site.path, old_meta)
    check_same_settings(old_meta, options, site.given)
    return old_meta
