"""Lexical (BM25) and hybrid retrieval: the index part, the fusion rule, old indexes, the CLI.

The vectors come from ``HashEmbedder``, meaningless by design: a passage that
dense retrieval ranks first here does so by chance, so whatever lexical and
hybrid retrieval find, they find by the words alone.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import HashEmbedder
from reliability_harness import leftovers

import ceg_cli.index.lexical.bm25 as lexical
from ceg_cli.errors import IndexLoadError, UsageError
from ceg_cli.index import CHUNKS_FILE, META_FILE, VECTORS_FILE, open_index
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.lexical.bm25 import LEXICAL_DIR, fuse, min_max, resolve_method

#: Filler documents that share no word with the query below.
FILLER = [
    {"id": f"f{i}", "title": f"Filler {i}", "text": f"Ordinary passage number {i} about "
     "rivers, mountains, weather and the general history of farming in valleys."}
    for i in range(40)
]
RARE = {
    "id": "rare",
    "title": "Quuxlandia",
    "text": "Zbigniew Brzeczyszczykiewicz founded Quuxlandia in 1874 with 3,141 settlers.",
}
QUERY = "When was Quuxlandia founded by Brzeczyszczykiewicz?"


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def rare_index(tmp_path: Path) -> Path:
    source = write_jsonl(tmp_path / "docs.jsonl", [*FILLER[:20], RARE, *FILLER[20:]])
    target = tmp_path / "index"
    build_index([source], target, BuildOptions(), embedder=HashEmbedder())
    return target


def search(index_dir: Path, method: str, k: int = 5) -> list[Any]:
    with open_index(index_dir) as idx:
        idx.use_embedder(HashEmbedder())
        return idx.search([QUERY], k, method)[0]


def make_old(index_dir: Path) -> None:
    """Turn an index into one built before the lexical part existed."""
    meta = json.loads((index_dir / META_FILE).read_text(encoding="utf-8"))
    del meta["lexical"]
    (index_dir / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    shutil.rmtree(index_dir / LEXICAL_DIR)


# -- the fusion rule ---------------------------------------------------------------------


def test_fuse_normalises_both_scores_over_the_union_and_weighs_them_equally() -> None:
    dense = {1: 0.9, 2: 0.5, 3: 0.1}  # normalised: 1.0, 0.5, 0.0
    bm25 = {1: 0.0, 2: 10.0, 3: 5.0}  # normalised: 0.0, 1.0, 0.5
    assert fuse(dense, bm25) == [(2, 0.75), (1, 0.5), (3, 0.25)]


def test_fuse_breaks_ties_by_cosine_then_id() -> None:
    # 1 and 2 both fuse to 0.5; 2 has the higher cosine. 3 and 4 tie on both (0.45).
    dense = {1: 0.0, 2: 1.0, 3: 0.4, 4: 0.4}
    bm25 = {1: 4.0, 2: 0.0, 3: 2.0, 4: 2.0}
    assert [i for i, _ in fuse(dense, bm25)] == [2, 1, 3, 4]


def test_fuse_needs_every_candidate_scored_by_both() -> None:
    with pytest.raises(ValueError):
        fuse({1: 0.5, 2: 0.4}, {1: 3.0})
    assert fuse({}, {}) == []
    assert min_max([2.0, 2.0]) == [0.0, 0.0]


# -- lexical and hybrid search -----------------------------------------------------------


def test_a_rare_name_that_dense_misses_is_found_lexically_and_hybrid(rare_index: Path) -> None:
    dense = search(rare_index, "dense")
    assert "rare" not in [h.chunk.doc_id for h in dense]  # the fake vectors miss it
    lexical = search(rare_index, "lexical")
    assert [h.chunk.doc_id for h in lexical] == ["rare"]  # no other passage shares a word
    hybrid = search(rare_index, "hybrid")
    assert hybrid[0].chunk.doc_id == "rare"
    assert len(hybrid) == 5
    # The score stays the cosine with the stored vector, whatever found the passage.
    fake = HashEmbedder()
    stored = fake.embed([f"{RARE['title']}. {RARE['text']}"])[0]
    cosine = float(stored @ fake.embed([QUERY])[0])
    assert hybrid[0].score == pytest.approx(cosine, abs=1e-5)
    assert lexical[0].score == pytest.approx(cosine, abs=1e-5)
    # The other hybrid hits are dense's best (BM25 gives them 0), in dense order.
    assert [h.chunk_id for h in hybrid[1:]] == [h.chunk_id for h in dense[:4]]


def test_hybrid_scores_lexical_candidates_missing_from_the_dense_list(rare_index: Path) -> None:
    with open_index(rare_index) as idx:
        vector = HashEmbedder().embed([QUERY])[0]
        cosines = idx.cosines(vector, [0, 5])
        assert cosines[5] == pytest.approx(float(idx._vectors.reconstruct(5) @ vector))
        assert idx.cosines(vector, []) == {}


def test_the_lexical_part_is_recorded_in_meta(rare_index: Path) -> None:
    meta = json.loads((rare_index / META_FILE).read_text(encoding="utf-8"))
    lexical = meta["lexical"]
    assert lexical["library"] == "bm25s"
    assert lexical["version"] == "0.3.16"
    assert lexical["parameters"] == {"method": "lucene", "k1": 1.5, "b": 0.75}
    assert lexical["text"] == "title+text"
    assert lexical["passages"] == meta["counts"]["chunks"] == 41
    assert (rare_index / LEXICAL_DIR / "params.index.json").is_file()
    assert leftovers(rare_index) == []  # no temp dir left beside it


def test_a_lexical_part_out_of_step_fails_when_used_and_dense_still_works(
    rare_index: Path,
) -> None:
    meta = json.loads((rare_index / META_FILE).read_text(encoding="utf-8"))
    meta["lexical"]["passages"] = 40
    (rare_index / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    with open_index(rare_index) as index, pytest.raises(IndexLoadError,
                                                        match="lexical/ holds 40 passages"):
        index.lexical()
    shutil.rmtree(rare_index / LEXICAL_DIR)
    with open_index(rare_index) as index:
        index.use_embedder(HashEmbedder())
        assert len(index.search(["Aristotle"], 2, "dense")[0]) == 2
        with pytest.raises(IndexLoadError, match="lexical/ is missing.*--append --lexical"):
            index.search(["Aristotle"], 2, "lexical")


# -- --append ----------------------------------------------------------------------------


def _lexical_passages(index_dir: Path) -> int:
    with open_index(index_dir) as idx:
        assert idx.meta["lexical"]["passages"] == idx.size
        return int(idx.lexical().scores("anything").shape[0])


def test_append_rebuilds_the_lexical_part_from_all_passages(tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", FILLER[:10])
    second = write_jsonl(tmp_path / "b.jsonl", [RARE])
    target = tmp_path / "index"
    build_index([first], target, BuildOptions(), embedder=HashEmbedder())
    assert _lexical_passages(target) == 10
    build_index([second], target, BuildOptions(append=True), embedder=HashEmbedder())
    assert _lexical_passages(target) == 11
    assert [h.chunk.doc_id for h in search(target, "lexical")] == ["rare"]
    # A changed source is replaced: still one BM25 document per passage.
    write_jsonl(first, FILLER[:3])
    build_index([first], target, BuildOptions(append=True), embedder=HashEmbedder())
    assert _lexical_passages(target) == 4
    assert [h.chunk.doc_id for h in search(target, "lexical")] == ["rare"]


class NoEmbedding(HashEmbedder):
    def embed(self, texts: Any) -> np.ndarray:
        raise AssertionError("re-embedded")


def test_old_index_loads_dense_only_and_append_adds_the_lexical_part(rare_index: Path) -> None:
    make_old(rare_index)
    dense = search(rare_index, "dense")
    with open_index(rare_index) as idx:
        assert not idx.has_lexical
        assert resolve_method(idx, "dense") == ("dense", None)
        method, warning = resolve_method(idx, "hybrid")
        assert method == "dense"
        assert "no lexical part" in warning and "--append" in warning  # type: ignore[operator]
        with pytest.raises(UsageError, match="--retrieval lexical: .* has no lexical part"):
            resolve_method(idx, "lexical")
    # hybrid on an old index is dense, not an error
    assert [h.chunk_id for h in search(rare_index, "hybrid")] == [h.chunk_id for h in dense]

    vectors_inode = os.stat(rare_index / VECTORS_FILE).st_ino
    source = Path(json.loads((rare_index / META_FILE).read_text())["sources"][0]["path"])
    report = build_index([source], rare_index, BuildOptions(append=True), embedder=NoEmbedding())
    assert report.chunks == 0 and report.lexical_seconds > 0
    assert os.stat(rare_index / VECTORS_FILE).st_ino == vectors_inode  # linked, not rewritten
    assert (rare_index / CHUNKS_FILE).is_file()
    assert _lexical_passages(rare_index) == 41
    assert search(rare_index, "hybrid")[0].chunk.doc_id == "rare"
    # A second --append has nothing left to do.
    again = build_index([source], rare_index, BuildOptions(append=True), embedder=NoEmbedding())
    assert again.lexical_seconds == 0


# -- the CLI -----------------------------------------------------------------------------


def test_index_search_retrieval_option_and_variable(
    run_cli: Any, rare_index: Path, hash_model: None
) -> None:
    def first(*args: str, env: dict[str, str] | None = None) -> str:
        result = run_cli("index", "search", QUERY, "--index", rare_index, "--json", *args, env=env)
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout.splitlines()[0])["doc_id"]

    assert first() != "rare"  # dense by default
    assert first("--retrieval", "hybrid") == "rare"
    assert first("--retrieval", "lexical") == "rare"
    assert first("--retrieval", "dense") != "rare"
    assert first(env={"CEG_RETRIEVAL": "dense"}) != "rare"
    assert first(env={"CEG_RETRIEVAL": "lexical"}) == "rare"
    assert first("--retrieval", "hybrid", env={"CEG_RETRIEVAL": "dense"}) == "rare"
    bad = run_cli("index", "search", QUERY, "--index", rare_index, "--retrieval", "bm25")
    assert bad.exit_code == 2


def test_cli_on_an_old_index(run_cli: Any, rare_index: Path, hash_model: None) -> None:
    make_old(rare_index)
    info = run_cli("index", "info", "--index", rare_index)
    assert "dense only" in info.stdout and "--append" in info.stdout
    dense = run_cli("index", "search", QUERY, "--index", rare_index, "--json")
    assert dense.exit_code == 0 and not dense.stderr  # the default asks for nothing missing
    hybrid = run_cli(
        "index", "search", QUERY, "--index", rare_index, "--json", "--retrieval", "hybrid"
    )
    assert hybrid.exit_code == 0
    assert hybrid.stdout == dense.stdout
    assert hybrid.stderr.count("warning:") == 1
    assert "no lexical part: retrieval is dense only" in hybrid.stderr
    lexical = run_cli("index", "search", QUERY, "--index", rare_index, "--retrieval", "lexical")
    assert lexical.exit_code == 2
    assert "ceg index build" in lexical.stderr and "--append" in lexical.stderr


def test_check_uses_the_retrieval_option(
    run_cli: Any, rare_index: Path, tmp_path: Path, hash_model: None
) -> None:
    responses = write_jsonl(
        tmp_path / "r.jsonl", [{"id": "1", "response": "Brzeczyszczykiewicz founded Quuxlandia."}]
    )

    def evidence(*args: str, env: dict[str, str] | None = None) -> list[str]:
        result = run_cli(
            "check", responses, "--index", rare_index, "--quiet", "--threshold", "-1", *args,
            env=env,
        )
        assert result.exit_code in (0, 1), result.stderr
        record = json.loads(result.stdout.splitlines()[0])
        return [e["doc_id"] for e in record["segments"][0]["evidence"]]

    assert "rare" not in evidence()  # dense by default
    assert evidence("--retrieval", "hybrid")[0] == "rare"
    assert evidence(env={"CEG_RETRIEVAL": "lexical"}) == ["rare"]
    assert evidence(env={"CEG_RETRIEVAL": "hybrid"})[0] == "rare"
    make_old(rare_index)
    result = run_cli("check", responses, "--index", rare_index, "--quiet", "--retrieval", "hybrid")
    assert result.stderr.count("no lexical part") == 1
    refused = run_cli("check", responses, "--index", rare_index, "--retrieval", "lexical")
    assert refused.exit_code == 2 and not refused.stdout


def test_a_cached_eval_corpus_index_gets_its_lexical_part(tmp_path: Path) -> None:
    from ceg_cli.eval.corpus import ensure_corpus_index
    from ceg_cli.eval.datasets import Dataset

    data = Dataset(tmp_path / "qa.jsonl", "halueval", [], documents=[*FILLER[:5], RARE])
    target = tmp_path / "corpus" / "index"
    index_dir, built = ensure_corpus_index(data, target, embedder=HashEmbedder())
    assert built and _lexical_passages(index_dir) == 6
    make_old(index_dir)  # cached by a ceg from before the lexical part
    again, built = ensure_corpus_index(data, target, embedder=NoEmbedding())
    assert again == index_dir and not built
    assert _lexical_passages(index_dir) == 6


# -- selecting the best BM25 scores ------------------------------------------------------


def _top_by_sorting(scores: np.ndarray, depth: int) -> np.ndarray:
    """The reference: every position sorted by (score descending, position)."""
    return np.lexsort((np.arange(len(scores)), -scores))[:depth]


def test_no_lexical_builds_dense_only_and_says_so(
    run_cli: Any, tmp_path: Path, hash_model: None
) -> None:
    source = write_jsonl(tmp_path / "docs.jsonl", [*FILLER, RARE])
    target = tmp_path / "index"
    build_index([source], target, BuildOptions(lexical=False), embedder=HashEmbedder())
    meta = json.loads((target / META_FILE).read_text(encoding="utf-8"))
    assert "lexical" not in meta and meta["lexical_skipped"] == "user: --no-lexical"
    assert not (target / LEXICAL_DIR).exists()
    with pytest.raises(UsageError, match="has no lexical part"):
        search(target, "lexical")
    info = run_cli("index", "info", "--index", target)
    assert "none: retrieval is dense only (built with --no-lexical)" in info.stdout
    assert "--append --lexical --index" in info.stdout
    # The choice stays on --append of a new source without the option.
    more = write_jsonl(tmp_path / "more.jsonl", FILLER[:3])
    build_index([source, more], target, BuildOptions(append=True), embedder=HashEmbedder())
    assert not (target / LEXICAL_DIR).exists()


def test_a_build_beyond_bm25s_s_limit_builds_the_lexical_part_on_tantivy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bm25s builds in memory: past LEXICAL_AUTO_MAX passages tantivy builds the lexical
    part, streamed (it used to be left out, and lexical and hybrid retrieval with it)."""
    monkeypatch.setattr(lexical, "LEXICAL_AUTO_MAX", 30)
    source = write_jsonl(tmp_path / "docs.jsonl", [*FILLER, RARE])
    target = tmp_path / "index"
    build_index([source], target, BuildOptions(), embedder=HashEmbedder())
    meta = json.loads((target / META_FILE).read_text(encoding="utf-8"))
    assert "lexical_skipped" not in meta
    assert meta["lexical"]["library"] == "tantivy" and meta["lexical"]["passages"] == 41
    assert search(target, "lexical")[0].chunk.doc_id == "rare"
    # An index an older ceg left without it ("auto: ... passages > ...") gets it on --append.
    meta["lexical_skipped"] = "auto: 41 passages > 30"
    del meta["lexical"]
    (target / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    shutil.rmtree(target / LEXICAL_DIR)
    report = build_index([source], target, BuildOptions(append=True), embedder=HashEmbedder())
    assert report.lexical_seconds > 0 and report.chunks == 0
    meta = json.loads((target / META_FILE).read_text(encoding="utf-8"))
    assert meta["lexical"]["library"] == "tantivy" and "lexical_skipped" not in meta


def test_top_selects_only_among_scores_at_or_above_a_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    # Most passages hold no query word (score 0); choosing among all N of them
    # was the slow part of a query at 1 M passages (benchmarks/search/lexical_scale.py).
    rng = np.random.default_rng(16)
    scores = np.zeros(100_000, dtype=np.float32)
    scores[rng.choice(len(scores), 300, replace=False)] = rng.random(300).astype(np.float32)
    want = _top_by_sorting(scores, 50)
    sizes: list[int] = []
    partition, lexsort = np.argpartition, np.lexsort

    def sized_partition(a: np.ndarray, kth: int) -> np.ndarray:
        sizes.append(len(a))
        return partition(a, kth)

    def sized_lexsort(keys: tuple[np.ndarray, ...]) -> np.ndarray:
        sizes.append(len(keys[0]))
        return lexsort(keys)

    monkeypatch.setattr(np, "argpartition", sized_partition)
    monkeypatch.setattr(np, "lexsort", sized_lexsort)
    got = lexical._top(scores, 50)
    assert sizes and max(sizes) <= 300  # never the 100,000
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("positives", [0, 3, 49, 50, 51, 400])
def test_top_keeps_the_order_and_ties_of_a_full_sort(positives: int) -> None:
    rng = np.random.default_rng(positives)
    scores = np.zeros(5_000, dtype=np.float32)
    where = rng.choice(len(scores), positives, replace=False)
    scores[where] = rng.integers(1, 6, positives).astype(np.float32) / 4  # many equal scores
    got = lexical._top(scores, 50)
    want = _top_by_sorting(scores, 50)
    assert got.tolist() == want.tolist()  # ties, at the cut and among zeros: lower id first


def test_the_fused_order_is_that_of_a_full_sort(
    rare_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A query sharing words with every filler passage: 41 BM25 candidates, many tied.
    query = "Quuxlandia rivers weather farming valleys passage number 7"
    with open_index(rare_index) as idx:
        idx.use_embedder(HashEmbedder())
        fast = {m: idx.search([query], 20, m)[0] for m in ("lexical", "hybrid")}
        monkeypatch.setattr(lexical, "_top", _top_by_sorting)
        slow = {m: idx.search([query], 20, m)[0] for m in ("lexical", "hybrid")}
    for method in ("lexical", "hybrid"):
        assert [h.chunk_id for h in fast[method]] == [h.chunk_id for h in slow[method]]
        assert len(fast[method]) == 20
