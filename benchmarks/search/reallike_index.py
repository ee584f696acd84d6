"""A ceg index of a million passages or more, without embedding them: real-like vectors.

``ceg check`` against a Wikipedia-sized index cannot be timed here by
building one: the model embeds 35 to 65 passages a second on this machine
(days for millions). This writes index directories that ``ceg check`` opens
like any other, from the enwiki sample index (``--base-index``, built with
the real model):

- the vectors: ``_reallike.py`` (each a real passage vector mixed with its
  real neighbours and perturbed), written as each ``--types`` type by
  ``write_vectors``, as a build writes them from its shards;
- the passages: vector i's passage is its anchor's (the real passage it was
  drawn from: text, title, URL), under document id ``ANCHOR_DOC~i``, so a
  segment's evidence reads like the passage its vector came from;
- ``meta.json``: the sample index's model and chunker, these counts, one
  source named ``reallike:N`` (no lexical part: ``--retrieval dense``).

The types share one chunk store (hard links) and one set of vectors, so their
``ceg check`` results differ only by what their search finds.

    .venv/bin/python benchmarks/search/reallike_index.py --passages 1000000 \
        --types flat ivfpq ivfpqfs --out benchmarks/.cache/reallike-1m
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import REPO, check_workdir, log, work_dir  # noqa: E402
from _reallike import RealLike, base_vectors  # noqa: E402

SHARD = 250_000
#: search_scale.py's: with ``--reuse`` its files of these vectors are taken as they are.
SEED = 0


def write(base_index: Path, n: int, types: list[str], out: Path,
          sigma: float | None = None, reuse: Path | None = None) -> dict[str, Any]:
    """Write ``out/TYPE`` for each type; what was made. With ``reuse`` (a ``search_scale.py
    --keep`` work folder), a type's file written there from the same vectors is linked
    instead of written again."""
    from ceg_cli.index.dense.vectors import write_vectors
    from ceg_cli.index.dense.vectorsource import ShardFiles
    from ceg_cli.index.indexdir import sampled_digest

    generator = RealLike(base_vectors(base_index), sigma)
    meta0 = json.loads((base_index / "meta.json").read_text(encoding="utf-8"))
    shards = out / "shards"
    shutil.rmtree(shards, ignore_errors=True)
    shards.mkdir(parents=True)
    store = out / "chunks.sqlite"
    store.unlink(missing_ok=True)
    base = sqlite3.connect(f"file:{base_index / 'chunks.sqlite'}?mode=ro", uri=True)
    (schema,) = base.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks'").fetchone()
    rows = base.execute("SELECT doc_id, title, ordinal, start, end, text, url, source "
                        "FROM chunks ORDER BY id").fetchall()
    db = sqlite3.connect(store)
    db.execute(schema)
    t0 = time.perf_counter()
    files, held, at = [], [], 0
    for block, anchors in generator.blocks(n, SEED):
        db.executemany(
            "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ((at + j, f"{rows[a][0]}~{at + j}", *rows[a][1:]) for j, a in
             enumerate(anchors.tolist())),
        )
        held.append(block)
        at += len(block)
        if sum(len(h) for h in held) >= SHARD or at == n:
            path = shards / f"{len(files):05d}.npy"
            np.save(path, np.concatenate(held))
            files.append(path)
            held = []
    db.commit()
    db.close()
    log(f"{n:,} passages and vectors in {time.perf_counter() - t0:.0f} s")
    source = ShardFiles(files, generator.base.shape[1])
    made: dict[str, Any] = {"passages": n, "sigma": generator.sigma, "types": {}}
    for kind in types:
        target = out / kind
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        os.link(store, target / "chunks.sqlite")
        t0 = time.perf_counter()
        kept = None if reuse is None else reuse / f"{kind}-{n}.faiss"
        if kept is not None and kept.exists():
            os.link(kept, target / "vectors.faiss")
            built = json.loads((reuse / f"{kind}-{n}.build.json").read_text())
            entry, seconds = built["entry"], built["build_s"]
            _same_vectors(target / "vectors.faiss", source)
        else:
            entry = write_vectors(source, target / "vectors.faiss", kind)
            seconds = time.perf_counter() - t0
        entry["file_size"] = (target / "vectors.faiss").stat().st_size
        entry["file_digest"] = sampled_digest(target / "vectors.faiss")
        meta = {key: value for key, value in meta0.items() if key != "lexical"}
        meta["faiss"] = entry
        meta["counts"] = {"documents": n, "chunks": n}
        meta["lexical_skipped"] = "user: --no-lexical"
        digest = hashlib.sha256(f"reallike:{n}:{generator.sigma}:{SEED}".encode()).hexdigest()
        meta["sources"] = [{"path": f"reallike:{n}", "kind": "jsonl",
                            "digest": f"sha256:{digest}", "documents": n, "chunks": n}]
        (target / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
        made["types"][kind] = {"write_s": round(seconds, 1), "params": entry["params"],
                               "recall_at_10": entry.get("recall_at_10")}
        log(f"{kind}: written in {seconds:.0f} s, recall@10 {entry.get('recall_at_10')}")
    shutil.rmtree(shards)
    store.unlink()  # each type's folder keeps its link
    (out / "made.json").write_text(json.dumps(made, indent=2), encoding="utf-8")
    return made


def _same_vectors(path: Path, source: Any) -> None:
    """A reused file must hold these vectors (a sample of rows compared)."""
    from ceg_cli.index.dense.vectors import read_vectors

    index = read_vectors(path)
    ids = np.unique(np.random.default_rng(3).integers(0, source.count, 64))
    if int(index.ntotal) != source.count or not np.array_equal(
            np.vstack([index.reconstruct(int(i)) for i in ids]), source.take(ids)):
        raise SystemExit(f"{path}: not these vectors (another size, sigma or seed)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--types", nargs="*", default=["flat", "ivfpq", "ivfpqfs"],
                        choices=["flat", "hnsw", "ivfpq", "ivfpqfs"])
    parser.add_argument("--base-index", type=Path, default=REPO / "index")
    parser.add_argument("--sigma", type=float, default=None)
    parser.add_argument("--reuse", type=Path, default=None,
                        help="a search_scale.py --keep work folder whose files to link")
    parser.add_argument("--out", type=Path, required=True,
                        help="a new or empty folder (kept: check_speed.py --indexes reads it)")
    args = parser.parse_args()
    check_workdir(args.out, "--out")
    with work_dir(args.out, prefix="", option="--out") as out:
        print(json.dumps(write(args.base_index, args.passages, args.types, out, args.sigma,
                               args.reuse),
                         indent=2))


if __name__ == "__main__":
    main()
