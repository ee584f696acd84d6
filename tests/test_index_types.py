"""Index types: flat, hnsw, ivfpq chosen by size, measured, memory-mapped, appended to."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pytest
from conftest import HashEmbedder

from ceg_cli import judges
from ceg_cli.cli.index_cmd import IndexType
from ceg_cli.index import VECTORS_FILE, open_index
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.dense.vectors import AUTO_THRESHOLD, INDEX_TYPES, read_vectors
from ceg_cli.index.indexdir import sampled_digest
from ceg_cli.types import FACTUAL, SUPPORTED, JudgeItem, Verdict

APPROXIMATE = ("hnsw", "ivfpq", "ivfpqfs")
FAISS_CLASS = {"flat": "IndexFlatIP", "hnsw": "IndexHNSWFlat", "ivfpq": "IndexRefineFlat",
               "ivfpqfs": "IndexRefineFlat"}


class CiteFirst:
    """A judge for plumbing: every segment is supported by its first passage."""

    name = "citefirst"
    method = "cites the first passage (test)"

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        return [Verdict(FACTUAL, SUPPORTED, 0.9, (0,), "first passage") for _ in items]


@pytest.fixture(scope="module")
def typed_indexes(tmp_path_factory: pytest.TempPathFactory, mini_wiki: Path) -> dict[str, Path]:
    """The mini dump indexed once with each type (HashEmbedder); do not modify them."""
    root = tmp_path_factory.mktemp("typed")
    built = {}
    for kind in ("flat", *APPROXIMATE):
        target = root / kind
        build_index([mini_wiki], target, BuildOptions(index_type=kind), embedder=HashEmbedder())
        built[kind] = target
    return built


def _meta(index: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((index / "meta.json").read_text(encoding="utf-8"))


def _vectors(index: Path) -> np.ndarray:
    stored = faiss.read_index(str(index / VECTORS_FILE))
    return stored.reconstruct_n(0, stored.ntotal)


def test_the_cli_offers_the_types_the_builder_knows() -> None:
    assert tuple(t.value for t in IndexType) == INDEX_TYPES


@pytest.mark.parametrize("kind", ["flat", *APPROXIMATE])
def test_each_type_is_built_measured_and_recorded(
    typed_indexes: dict[str, Path], kind: str
) -> None:
    index = typed_indexes[kind]
    entry = _meta(index)["faiss"]
    assert entry["type"] == FAISS_CLASS[kind]
    assert type(faiss.read_index(str(index / VECTORS_FILE))).__name__ == FAISS_CLASS[kind]
    assert (entry["index_type"], entry["chosen"]) == (kind, "user")
    assert entry["metric"] == "inner_product"
    assert 0.9 <= entry["recall_at_10"] <= 1.0
    assert entry["search_ms"] > 0
    assert entry["measured_queries"] == _meta(index)["counts"]["chunks"]  # fewer than 200
    # The digest is of the file as written, in its final type.
    assert entry["file_size"] == (index / VECTORS_FILE).stat().st_size
    assert entry["file_digest"] == sampled_digest(index / VECTORS_FILE)


@pytest.mark.parametrize("kind", APPROXIMATE)
def test_approximate_types_keep_the_exact_vectors(
    typed_indexes: dict[str, Path], kind: str
) -> None:
    # Exact vectors are what --append re-reads and what hybrid retrieval's cosines use.
    assert np.array_equal(_vectors(typed_indexes[kind]), _vectors(typed_indexes["flat"]))


@pytest.mark.parametrize("kind", ["flat", *APPROXIMATE])
def test_each_type_opens_memory_mapped_and_finds_every_passage(
    typed_indexes: dict[str, Path], kind: str, hash_model: None
) -> None:
    with open_index(typed_indexes[kind]) as idx:
        chunks = list(idx.iter_chunks())
        queries = [f"{c.title}. {c.text}" for c in chunks]
        hits = idx.search(queries, k=3)
        cosines = idx.cosines(idx.embedder().embed(queries[:1])[0], [0, 1])
    assert [row[0].chunk_id for row in hits] == list(range(len(chunks)))
    assert all(row[0].score == pytest.approx(1.0, abs=1e-5) for row in hits)
    assert cosines[0] == pytest.approx(1.0, abs=1e-5) and cosines[1] < 0.5


@pytest.mark.parametrize("kind", APPROXIMATE)
def test_check_runs_on_an_approximate_index(
    typed_indexes: dict[str, Path], kind: str, run_cli, hash_model: None,
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.setattr(judges, "_REGISTRY", dict(judges._REGISTRY))
    judges.register("citefirst", lambda arg, options: CiteFirst())
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"id": "a", "response": "Aristotle was a philosopher."}) + "\n")
    result = run_cli(
        "check", responses, "--index", typed_indexes[kind], "--judge", "citefirst", "--quiet"
    )
    assert result.exit_code == 0, result.stderr
    (record,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert record["label"] == "factual"
    assert record["segments"][0]["citations"]


def test_info_says_which_type_and_why(typed_indexes: dict[str, Path], run_cli) -> None:
    result = run_cli("index", "info", "--index", typed_indexes["hnsw"])
    assert result.exit_code == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("index type"))
    recall = _meta(typed_indexes["hnsw"])["faiss"]["recall_at_10"]
    assert f"hnsw (user), recall@10 {recall:.3f}" in line


def test_auto_switches_to_approximate_at_the_threshold(
    tmp_path: Path, mini_wiki: Path, hash_embedder: HashEmbedder
) -> None:
    small = tmp_path / "small"
    build_index([mini_wiki], small, BuildOptions(), embedder=hash_embedder)
    count = _meta(small)["counts"]["chunks"]
    assert _meta(small)["faiss"]["index_type"] == "flat"
    assert _meta(small)["faiss"]["chosen"] == f"auto: {count} passages < {AUTO_THRESHOLD:,}"
    big = tmp_path / "big"
    build_index([mini_wiki], big, BuildOptions(auto_threshold=count), embedder=hash_embedder)
    assert _meta(big)["faiss"]["index_type"] == "ivfpq"
    assert _meta(big)["faiss"]["chosen"] == f"auto: {count} passages >= {count}"


@pytest.mark.parametrize("kind", APPROXIMATE)
def test_append_to_an_approximate_index_keeps_every_passage_searchable(
    typed_indexes: dict[str, Path], kind: str, tmp_path: Path, mini_wiki: Path,
    hash_model: None,
) -> None:
    index = tmp_path / "index"
    shutil.copytree(typed_indexes[kind], index)
    docs = tmp_path / "extra.jsonl"
    docs.write_text(
        "".join(
            json.dumps({"id": f"x{i}", "title": f"Extra {i}", "text": f"Extra passage number {i}."})
            + "\n"
            for i in range(20)
        ),
        encoding="utf-8",
    )
    before = _vectors(index)
    options = BuildOptions(append=True)  # no --index-type: the user's earlier choice stays
    build_index([mini_wiki, docs], index, options, embedder=HashEmbedder())
    after = _vectors(index)
    assert np.array_equal(after[: len(before)], before)
    assert len(after) == len(before) + 20
    assert (_meta(index)["faiss"]["index_type"], _meta(index)["faiss"]["chosen"]) == (kind, "user")
    with open_index(index) as idx:
        chunks = list(idx.iter_chunks())
        hits = idx.search([f"{c.title}. {c.text}" for c in chunks], k=1)
    assert [row[0].chunk_id for row in hits] == list(range(len(chunks)))


def test_an_index_built_before_types_opens_as_flat(
    typed_indexes: dict[str, Path], tmp_path: Path, hash_model: None, run_cli
) -> None:
    index = tmp_path / "old"
    shutil.copytree(typed_indexes["flat"], index)
    meta = _meta(index)
    meta["faiss"] = {k: meta["faiss"][k] for k in ("type", "metric", "file_size", "file_digest")}
    (index / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    with open_index(index) as idx:
        assert idx.search(["Aristotle"], k=2)[0]
    result = run_cli("index", "info", "--index", index)
    assert "flat (built before index types were recorded)" in result.stdout


@pytest.mark.parametrize("kind", ["flat", *APPROXIMATE])
def test_mmap_leaves_the_flat_vectors_in_the_file(
    typed_indexes: dict[str, Path], kind: str
) -> None:
    path = typed_indexes[kind] / VECTORS_FILE
    mapped, read = read_vectors(path, mmap=True), read_vectors(path, mmap=False)
    assert np.array_equal(mapped.reconstruct_n(0, 5), read.reconstruct_n(0, 5))
    maps = Path("/proc/self/maps").read_text()
    assert str(path.resolve()) in maps


def test_latency_sampling_stops_at_its_time_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    import ceg_cli.index.dense.tuning as tuning
    import ceg_cli.index.dense.vectors as vectors

    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 384)).astype(np.float32)
    faiss.normalize_L2(x)
    flat = faiss.IndexFlatIP(384)
    flat.add(x)
    queries = x[:200]
    exact = tuning.exact_neighbours(vectors.ArraySource(x), queries, 10)
    assert tuning.measure(flat, queries, exact)["latency_queries"] == 200
    monkeypatch.setattr(tuning, "LATENCY_BUDGET_S", 0.0)
    measured = tuning.measure(flat, queries, exact)
    # Recall still from all 200 queries; latency from the minimum of 5.
    assert (measured["measured_queries"], measured["latency_queries"]) == (200, 5)
    assert measured["recall_at_10"] == 1.0


def test_search_is_widened_until_the_target_recall(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import ceg_cli.index.dense.tuning as tuning
    import ceg_cli.index.dense.vectors as vectors

    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 384)).astype(np.float32)
    faiss.normalize_L2(x)
    source = vectors.ArraySource(x)
    monkeypatch.setattr(tuning, "TARGET_RECALL", 1.01)  # never reached: every step taken
    entry = vectors.write_vectors(source, tmp_path / "v.faiss", "hnsw")
    assert entry["params"]["efSearch"] == vectors.HNSW_EF_SEARCH * 2**tuning.TUNE_STEPS
    assert read_vectors(tmp_path / "v.faiss").hnsw.efSearch == entry["params"]["efSearch"]
    entry = vectors.write_vectors(source, tmp_path / "i.faiss", "ivfpq")
    nlist = entry["params"]["nlist"]
    assert entry["params"]["nprobe"] == nlist  # widened up to every list
    assert entry["params"]["k_factor"] == vectors.REFINE_K_FACTOR * 2**tuning.TUNE_STEPS
    stored = read_vectors(tmp_path / "i.faiss")
    assert faiss.extract_index_ivf(stored).nprobe == nlist
    assert stored.k_factor == entry["params"]["k_factor"]


def _unit_vectors(n: int, d: int = 384, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    faiss.normalize_L2(x)
    return x


@pytest.mark.parametrize("kind", ["flat", "ivfpq"])
def test_a_streamed_vectors_file_is_the_file_faiss_itself_writes(
    tmp_path: Path, kind: str
) -> None:
    """Written a batch at a time, the file has FAISS's own bytes for the same index."""
    import ceg_cli.index.dense.vectors as vectors

    x = _unit_vectors(3000)
    entry = vectors.write_vectors(vectors.ArraySource(x, batch=700), tmp_path / "s.faiss", kind)
    flat = faiss.IndexFlatIP(384)
    flat.add(x)
    whole, _ = vectors.convert(flat, kind)  # the same index, built in memory
    if kind == "ivfpq":
        faiss.extract_index_ivf(whole).nprobe = entry["params"]["nprobe"]
        whole.k_factor = entry["params"]["k_factor"]
    faiss.write_index(whole, str(tmp_path / "w.faiss"))
    assert (tmp_path / "s.faiss").read_bytes() == (tmp_path / "w.faiss").read_bytes()


def test_writing_the_vectors_holds_a_batch_not_all_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracemalloc

    import ceg_cli.index.dense.tuning as tuning
    import ceg_cli.index.dense.vectors as vectors

    monkeypatch.setattr(tuning, "LATENCY_BUDGET_S", 0.0)
    x = _unit_vectors(100_000)  # 147 MiB
    source = vectors.ArraySource(x, batch=8192)
    tracemalloc.start()
    try:
        vectors.write_vectors(source, tmp_path / "v.faiss", "flat")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20, f"{peak / 2**20:.0f} MiB"
    assert np.array_equal(read_vectors(tmp_path / "v.faiss").reconstruct_n(0, 100_000), x)


class Recorded:
    """A ``Progress`` that keeps every counter's label, total and count."""

    def __init__(self) -> None:
        self.counters: dict[str, list[int | None]] = {}

    def counter(self, label: str, unit: str, total: int | None = None) -> Any:
        entry = self.counters.setdefault(label, [total, 0])
        return type("C", (), {"update": lambda _self, n=1: entry.__setitem__(1, entry[1] + n)})()


@pytest.mark.parametrize("kind", ["flat", *APPROXIMATE])
def test_writing_the_index_file_shows_progress(tmp_path: Path, kind: str) -> None:
    """At Wikipedia's size the index file takes an hour: the build says how far it is."""
    import ceg_cli.index.dense.vectors as vectors

    progress = Recorded()
    source = vectors.ArraySource(_unit_vectors(1000), batch=300)
    vectors.write_vectors(source, tmp_path / "v.faiss", kind, progress=progress)
    if kind == "hnsw":
        assert progress.counters == {"indexed": [1000, 1000]}  # FAISS writes the graph
    else:
        expected = {"written": [1000, 1000]}
        if kind in ("ivfpq", "ivfpqfs"):
            expected["indexed"] = [1000, 1000]
        if kind == "ivfpqfs":  # level-1 cells of the two-level k-means, sqrt(32 lists)
            expected["trained"] = [None, 6]
        assert progress.counters == expected


def test_ivfpq_splits_every_dimension_into_sub_quantizers(tmp_path: Path, mini_wiki: Path) -> None:
    """256 dimensions (``static-minilm``) is not a multiple of 48: it got one 8-bit code
    per vector, and recall@10 0.80 at every search width on 128,230 passages. It now
    gets the most sub-quantizers up to 48 that divide it."""
    from ceg_cli.index.dense.vectors import PQ_M, pq_subquantizers

    assert [pq_subquantizers(d) for d in (384, 768, 256, 1024, 512, 97)] == \
        [PQ_M, PQ_M, 32, 32, 32, 1]
    build_index([mini_wiki], tmp_path / "i", BuildOptions(index_type="ivfpq"),
                embedder=HashEmbedder(dimension=256))
    assert _meta(tmp_path / "i")["faiss"]["params"]["pq_m"] == 32
