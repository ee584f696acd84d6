"""``--search-width``: search an approximate index wider (or narrower) than its build chose.

A build measures its index and writes the search settings that reach the
target recall into ``vectors.faiss`` (``tuning``, ``fastscan``); checking
uses them. ``--search-width nprobe=256,k_factor=16`` overrides them for one
run, without touching the index: for more recall than the build's target, or
for speed where less recall will do. The settings, by type:

- ``hnsw``: ``efSearch`` (candidates the graph search keeps);
- ``ivfpq``: ``nprobe`` (lists scanned), ``k_factor`` (candidates re-ranked by
  exact cosine, per result);
- ``ivfpqfs``: ``nprobe``, ``efSearch`` (of the coarse quantizer's graph; with
  ``nprobe`` alone, widened to twice it, as a build sets it), ``k_factor``;
- ``flat``: none (it compares every passage).
"""

from __future__ import annotations

from typing import Any

from ...errors import UsageError

SETTINGS = {
    "flat": (),
    "hnsw": ("efSearch",),
    "ivfpq": ("nprobe", "k_factor"),
    "ivfpqfs": ("nprobe", "efSearch", "k_factor"),
}
_ALL = ("nprobe", "efSearch", "k_factor")


def parse(text: str | None) -> dict[str, int]:
    """``nprobe=256,k_factor=16`` as a dict; a usage error says what is wrong."""
    if text is None or not text.strip():
        return {}
    width: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in _ALL:
            raise UsageError(
                f"--search-width {text!r}: give NAME=NUMBER pairs separated by commas, "
                f"NAME one of {', '.join(_ALL)} (e.g. nprobe=256,k_factor=16)"
            )
        try:
            number = int(value.strip())
        except ValueError:
            number = 0
        if number < 1:
            raise UsageError(f"--search-width {text!r}: {name} must be a whole number >= 1")
        if name in width:
            raise UsageError(f"--search-width {text!r}: {name} is given twice")
        width[name] = number
    return width


def apply(index: Any, kind: str, width: dict[str, int], where: object) -> dict[str, int]:
    """Set ``width`` on the FAISS ``index`` of type ``kind``; the settings now in force.

    A setting the type does not have is a usage error naming the ones it has.
    """
    import faiss

    have = SETTINGS.get(kind, ())
    wrong = [name for name in width if name not in have]
    if wrong:
        offered = f"its settings: {', '.join(have)}" if have else "it has no search settings"
        raise UsageError(
            f"--search-width {wrong[0]}: the index at {where} is {kind}, which has no "
            f"{wrong[0]} ({offered})"
        )
    if kind == "hnsw":
        if "efSearch" in width:
            index.hnsw.efSearch = width["efSearch"]
        return {"efSearch": int(index.hnsw.efSearch)}
    if kind not in ("ivfpq", "ivfpqfs"):
        return {}
    ivf = faiss.extract_index_ivf(index)
    if width.get("nprobe", 0) > ivf.nlist:
        raise UsageError(
            f"--search-width nprobe={width['nprobe']}: the index at {where} has "
            f"{ivf.nlist:,} lists"
        )
    if "nprobe" in width:
        ivf.nprobe = width["nprobe"]
    if "k_factor" in width:
        index.k_factor = float(width["k_factor"])
    now = {"nprobe": int(ivf.nprobe), "k_factor": int(index.k_factor)}
    if kind == "ivfpqfs":
        quantizer = faiss.downcast_index(ivf.quantizer).hnsw
        if "efSearch" in width:
            quantizer.efSearch = width["efSearch"]
        elif "nprobe" in width:  # searched twice as wide as the lists it yields, as built
            quantizer.efSearch = max(quantizer.efSearch, 2 * ivf.nprobe)
        now["efSearch"] = int(quantizer.efSearch)
    return now
