"""``ceg index build DUMP --update`` with a newer dump of the same wiki (issue 56, item 5).

    .venv/bin/python benchmarks/build/dump_update_speed.py [--copies 10] [--edited 0.01]
        [--repeats 3] [--range-pages 500] [--results dump_update_speed]

The dump is the sample dump's pages, ``--copies`` times (each copy's page ids
and titles its own), written as a Wikimedia multistream dump (100 pages a
stream) with its index beside it, under one name. A "newer" dump at the same
path has ``--edited`` of its articles edited (a new revision, so a new sha1) and
one deleted.

The reading an update does, timed in this process (``--repeats`` times, medians):

- before revision digests: every page of the newer dump read and cleaned in one
  process (``iter_documents``), which is what an update of a changed dump did
  before comparing each document;
- now: ``dumpread.DumpReading`` given the older dump's revision digests (the
  record an update keeps), in one process, and with reader processes on every
  core over ranges of ``--range-pages`` pages (a real dump's ranges are
  ``corpus.ranges.RANGE_PAGES``, 2,000 pages; this dump is too small for more
  than one of those).

End to end, the real CLI with ``--retrieval lexical`` (no model), each in a
subprocess whose peak memory is sampled: a full build of the old dump; the
first update after it (a full build records no revision digests: that update
cleans every page once and compares its passages); the update to the newer dump
from copies of that index (``--repeats`` times), which also starts Python, writes
the generation and rebuilds the lexical part.
"""

from __future__ import annotations

import argparse
import bz2
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    ENWIKI_SAMPLE,
    command_line,
    environment,
    log,
    markdown_table,
    median,
    run_update,
    work_dir,
    write_results,
)

PAGES_PER_STREAM = 100
_PAGE = re.compile(rb"[ \t]*<page>.*?</page>\n?", re.S)
_ID = re.compile(rb"<id>(\d+)</id>")
_TITLE = re.compile(rb"<title>(.*?)</title>", re.S)
_TEXT_END = re.compile(rb"</text>")
NAME = "testwiki-latest-pages-articles-multistream"


def pages_of(copies: int) -> tuple[bytes, list[bytes], bytes]:
    """The sample dump's header, its pages ``copies`` times (ids and titles made unique), footer."""
    xml = bz2.decompress(ENWIKI_SAMPLE.read_bytes())
    found = list(_PAGE.finditer(xml))
    header, footer = xml[: found[0].start()], xml[found[-1].end():]
    pages = []
    for copy in range(copies):
        for match in found:
            page = match.group()
            if copy:
                page_id = int(_ID.search(page).group(1))  # type: ignore[union-attr]
                title = _TITLE.search(page).group(1)  # type: ignore[union-attr]
                page = _ID.sub(b"<id>%d</id>" % (page_id + copy * 10**8), page, count=1)
                page = _TITLE.sub(b"<title>" + title.replace(b"\\", b"\\\\")
                                  + b" (%d)</title>" % copy, page, count=1)
            pages.append(page)
    return header, pages, footer


def write_multistream(folder: Path, header: bytes, pages: list[bytes], footer: bytes) -> Path:
    """The dump and its index in ``folder``, as Wikimedia writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    dump = folder / f"{NAME}.xml.bz2"
    lines: list[bytes] = []
    with open(dump, "wb") as out:
        out.write(bz2.compress(header))
        for at in range(0, len(pages), PAGES_PER_STREAM):
            offset = out.tell()
            group = pages[at: at + PAGES_PER_STREAM]
            for page in group:
                page_id = _ID.search(page).group(1)  # type: ignore[union-attr]
                title = _TITLE.search(page).group(1)  # type: ignore[union-attr]
                lines.append(b"%d:%s:%s\n" % (offset, page_id, title))
            out.write(bz2.compress(b"".join(group)))
        out.write(bz2.compress(footer))
    (folder / f"{NAME}-index.txt.bz2").write_bytes(bz2.compress(b"".join(lines)))
    return dump


def edit(page: bytes, n: int) -> bytes:
    """A new revision: a sentence added at the end of its text."""
    end = _TEXT_END.search(page)
    assert end is not None
    return page[: end.start()] + b"\n\nAn edit of revision %d, by the benchmark." % n + \
        page[end.start():]


def is_article(page: bytes) -> bool:
    return b"<ns>0</ns>" in page and b"<redirect" not in page


def place(source: Path, folder: Path) -> None:
    """Put a version's dump and index at the one path the index knows."""
    for file in source.iterdir():
        shutil.copyfile(file, folder / file.name)


def reading(dump: Path, older: Path, args: Any, cores: int) -> dict[str, Any]:
    """The reading an update does of ``dump``, before and now, in this process."""
    from dataclasses import replace

    import ceg_cli.corpus.ranges
    from ceg_cli.corpus import iter_documents
    from ceg_cli.corpus.mediawiki import read_revisions
    from ceg_cli.index.build.buildopts import BuildOptions
    from ceg_cli.index.build.dumpread import DumpReading

    known = {r.page_id: r.digest() for _, r in read_revisions(older)}
    sum(1 for _ in iter_documents(ENWIKI_SAMPLE))  # not timed: imports, first-use tables
    out: dict[str, Any] = {}

    def timed(name: str, count: Any, **extra: Any) -> None:
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            n = count()
            times.append(time.perf_counter() - t0)
        out[name] = {"seconds_median": round(median(times), 2),
                     "seconds": [round(t, 2) for t in times], **n, **extra}
        log(f"{name}: {median(times):.2f} s {n}")

    timed("full_clean_read", lambda: {"documents": sum(1 for _ in iter_documents(dump))})
    base = BuildOptions(retrieval="lexical", chunk_words=100)

    def skipping(workers: int) -> Any:
        def count() -> dict[str, int]:
            pages = list(DumpReading(dump, known, replace(base, workers=workers),
                                     lambda _m: None).pages())
            return {"pages": len(pages),
                    "cleaned": sum(1 for _, _, chunks in pages if chunks is not None)}
        return count

    timed("skip_one_process", skipping(1))
    ceg_cli.corpus.ranges.RANGE_PAGES = args.range_pages
    timed("skip_readers", skipping(cores), readers=cores)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--range-pages", type=int, default=500)
    ap.add_argument("--edited", type=float, default=0.01, help="share of articles edited")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--results", default="dump_update_speed")
    ap.add_argument("--seed", type=int, default=56)
    args = ap.parse_args()
    from ceg_cli.index.build.processes import available_cores

    ceg = [str(Path(sys.executable).with_name("ceg"))]
    rng = random.Random(args.seed)
    data: dict[str, Any] = {"command": command_line(), "environment": environment(),
                            "copies": args.copies, "repeats": args.repeats,
                            "cores": available_cores()}
    with work_dir(None, prefix="ceg-dump-update-") as work:
        header, pages, footer = pages_of(args.copies)
        articles = [i for i, p in enumerate(pages) if is_article(p)]
        old = write_multistream(work / "v1", header, pages, footer)
        first = list(pages)
        first[articles[0]] = edit(first[articles[0]], 0)
        write_multistream(work / "v1b", header, first, footer)
        newer = list(first)
        picked = rng.sample(articles[1:], max(1, round(len(articles) * args.edited)))
        for n, i in enumerate(picked[1:], 1):
            newer[i] = edit(newer[i], n)
        del newer[picked[0]]  # one page deleted
        write_multistream(work / "v2", header, newer, footer)
        data.update({"pages": len(pages), "articles": len(articles),
                     "edited": len(picked) - 1, "deleted": 1,
                     "dump_mib": round(old.stat().st_size / 2**20, 2)})
        log(f"dump: {len(pages)} pages, {len(articles)} articles; {len(picked) - 1} edited")
        live = work / "wiki"
        live.mkdir()
        dump = live / old.name
        place(work / "v1", live)
        index = work / "index"
        flags = ["--retrieval", "lexical", "-q"]
        build = [*ceg, "index", "build", str(dump), "--index"]
        data["full_build"] = run_update([*build, str(index), *flags])
        log(f"full build: {data['full_build']['seconds']} s")
        place(work / "v1b", live)
        data["first_update"] = run_update([*build, str(index), "--update", *flags])
        log(f"first update (every page cleaned once): {data['first_update']['seconds']} s")
        place(work / "v2", live)
        data["reading"] = reading(dump, work / "v1b" / old.name, args, available_cores())
        data["reading"]["range_pages"] = args.range_pages
        r = data["reading"]
        rows = [["full build of the old dump (CLI)", data["full_build"]["seconds"], ""],
                ["first update after it: every page cleaned once (CLI)",
                 data["first_update"]["seconds"], ""]]
        for name, label in (("full_clean_read", "read: every page cleaned, one process "
                             "(before)"),
                            ("skip_one_process", "read: unchanged revisions skipped, one "
                             "process"),
                            ("skip_readers", f"read: unchanged revisions skipped, "
                             f"{r['skip_readers']['readers']} reader processes")):
            share = r[name]["seconds_median"] / r["full_clean_read"]["seconds_median"]
            rows.append([label, r[name]["seconds_median"], f"{share:.0%}"])
        runs = []
        for n in range(args.repeats):
            target = work / f"u-{n}"
            shutil.copytree(index, target)
            runs.append(run_update([*build, str(target), "--update", *flags]))
            shutil.rmtree(target)
        seconds = median([x["seconds"] for x in runs])
        data["update_cli"] = {"seconds_median": seconds, "runs": runs}
        log(f"update to the newer dump (CLI): {seconds} s")
        rows.append(["update to the newer dump, end to end (CLI)", seconds,
                     f"{seconds / r['full_clean_read']['seconds_median']:.0%}"])
    write_results(args.results, data)
    print(markdown_table(["step", "seconds (median)", "of the full-clean read"], rows))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
