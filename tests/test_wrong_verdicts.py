"""Issue 60 items 3 to 6, the wrong verdicts, each as the issue found it with the CLI.

3. ``--lexical-max-terms`` chose terms no passage holds (misspellings) as the "rarest"
   and found nothing;
4. an index without vectors kept every top-k passage, so unrelated passages together
   supported an error;
5. a long cited sentence cut into bounded segments failed the citation gate;
6. a static-model index recorded no digest of its weights, so other weights in the
   cache changed verdicts silently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ceg_cli.index import Hit
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.types import Chunk

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data" / "enwiki-sample.xml.bz2"

# The question and answer (item 3).
QUESTION = "yo quickk qestion fam: whr wuz abe linkon borned plz tell asap thx lolz?"
ANSWER = "Abraham Lincoln was born in Hodgenville, Kentucky, in 1809."


@pytest.fixture(scope="module")
def sample_bm25s(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The enwiki sample indexed without vectors, as ``ceg index build SAMPLE --retrieval
    lexical`` does (bm25s at this size); about 5 s, no model."""
    target = tmp_path_factory.mktemp("sample-lexical") / "index"
    build_index([SAMPLE], target, BuildOptions(retrieval="lexical"))
    return target


@pytest.fixture(scope="module")
def sample_tantivy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("sample-tantivy") / "index"
    build_index([SAMPLE], target, BuildOptions(retrieval="lexical", lexical_engine="tantivy"))
    return target


def _records(path: Path, *records: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _segments(stdout: str) -> list[dict[str, Any]]:
    return [s for line in stdout.splitlines() for s in json.loads(line)["segments"]]


# -- item 3 -------------------------------------------------------------------------


def test_max_terms_skips_terms_that_no_passage_holds(
    sample_tantivy: Path, tmp_path: Path, run_cli: Any
) -> None:
    """With 10 terms the misspellings (document frequency 0) took the budget and the
    search found nothing; now they are skipped and the article is found."""
    from ceg_cli.index.lexical.lexical_tantivy import TantivyLexical
    from ceg_cli.index.lexical.lexlang import queries_tokens

    tokenizer = json.loads((sample_tantivy / "meta.json").read_text())["lexical"].get(
        "tokenizer")
    query = f"{QUESTION} {ANSWER}"
    words = queries_tokens([query], tokenizer)[0]
    pruned = TantivyLexical(sample_tantivy / "lexical", None, tokenizer, max_terms=10)
    held = {w for w in words if pruned._searcher.doc_freq("terms", w) > 0}
    assert len(set(words)) > 10 and len(set(words) - held) >= 5  # misspellings in it
    assert set(pruned.terms(words)) == held  # 8 terms some passage holds: every one of them
    fewer = TantivyLexical(sample_tantivy / "lexical", None, tokenizer, max_terms=3)
    assert len(fewer.terms(words)) == 3 and set(fewer.terms(words)) <= held

    found = run_cli("index", "search", query, "--index", sample_tantivy, "--json", "-k", "5",
                    "--lexical-max-terms", "10")
    assert found.exit_code == 0, found.stderr
    rows = [json.loads(line) for line in found.stdout.splitlines()]
    assert len(rows) == 5 and rows[0]["title"] == "Abraham Lincoln"

    records = _records(tmp_path / "r.jsonl", {"question": QUESTION, "response": ANSWER})
    checked = run_cli("check", records, "--index", sample_tantivy, "--lexical-max-terms", "10")
    assert checked.exit_code == 0, checked.stderr
    (segment,) = _segments(checked.stdout)
    assert segment["label"] == "factual", segment["reason"]
    assert segment["citations"][0]["title"] == "Abraham Lincoln"


# -- item 4 -------------------------------------------------------------------------


def _hit(i: int, bm25: float | None, score: float | None = None) -> Hit:
    return Hit(i, score, Chunk(i, f"d{i}", f"T{i}", 0, 0, 1, "text"), bm25)


def test_a_lexical_hit_is_kept_by_its_bm25_against_the_top_one() -> None:
    """The rule that replaces the cosine threshold in an index without vectors: the top-1,
    and the others whose BM25 is at least LEXICAL_KEEP of its. Hits with neither a cosine
    nor a BM25 score (a record's contexts) are all kept, as before."""
    from ceg_cli.check.retrieve import LEXICAL_KEEP, apply_threshold

    best = 10.0
    hits = [_hit(0, best), _hit(1, best * LEXICAL_KEEP), _hit(2, best * LEXICAL_KEEP - 0.01),
            _hit(3, best * 0.9)]
    assert [h.chunk_id for h in apply_threshold(hits, 0.35)] == [0, 1, 3]
    assert [h.chunk_id for h in apply_threshold(hits, 0.35, lexical_keep=0.0)] == [0, 1, 2, 3]
    bare = [_hit(0, None), _hit(1, None)]
    assert apply_threshold(bare, 0.35) == bare
    dense = [_hit(0, 3.0, 0.9), _hit(1, 0.1, 0.5), _hit(2, 9.0, 0.2)]
    assert [h.chunk_id for h in apply_threshold(dense, 0.35)] == [0, 1]  # the cosine decides


def test_unrelated_passages_of_a_lexical_index_do_not_support_an_error(
    sample_bm25s: Path, tmp_path: Path, run_cli: Any
) -> None:
    """The issue's cases: the README's planted error was factual (0.9) citing Amphibian,
    Aardvark and Alabama; with --top-k 100000 "Apollo 11 landed on Mars in 1975." was
    supported. Both are flagged now, as on an index with vectors; the README's true
    sentence about the aardvark is still supported."""
    records = _records(
        tmp_path / "r.jsonl",
        {"id": "aardvark", "response": "Aardvarks are native to the rainforests of South "
                                       "America."},
        {"id": "apollo", "response": "Apollo 11 landed on Mars in 1975."},
        {"id": "true", "response": "The aardvark is a medium-sized, burrowing, nocturnal "
                                   "mammal native to Africa."},
    )
    for flags in ([], ["--top-k", "100000"]):
        checked = run_cli("check", records, "--index", sample_bm25s, *flags)
        assert checked.exit_code in (0, 1), checked.stderr
        aardvark, apollo, true = _segments(checked.stdout)
        assert aardvark["label"] == "nonfactual", (flags, aardvark["reason"])
        assert apollo["label"] == "nonfactual", (flags, apollo["reason"])
        assert true["label"] == "factual", (flags, true["reason"])
        assert {c["title"] for c in true["citations"]} == {"Aardvark"}


# -- item 5 -------------------------------------------------------------------------

CLAUSES = [
    "The Danube rises in the Black Forest near Donaueschingen in Germany",
    "flows east for 2,850 kilometres through ten countries including Austria, Slovakia, "
    "Hungary, Croatia, Serbia, Romania, Bulgaria, Moldova and Ukraine",
    "passes the capital cities of Vienna, Bratislava, Budapest and Belgrade",
    "drains a basin of about 801,000 square kilometres that is home to some 83 million people",
    "carries an average discharge of 6,500 cubic metres per second at its mouth",
    "was the northern frontier of the Roman Empire for centuries",
    "has been an important trade route since ancient times",
    "is linked to the Rhine by the Main-Danube Canal completed in 1992",
    "forms the Iron Gates gorge on the border between Serbia and Romania",
    "and finally empties into the Black Sea through a wide delta in Romania and Ukraine that "
    "is a UNESCO World Heritage Site since 1991",
    "where more than 300 species of birds nest among its reeds and lakes every spring",
    "and its waters feed the farms of the plains of Wallachia and Dobruja every summer",
    "and its ports of Galati and Braila carry grain, timber and steel to the sea in barges",
    "and its fishermen still catch carp, perch and catfishes in the lower reaches near Tulcea",
]


def test_the_pieces_of_a_long_cited_sentence_share_its_markers(
    tmp_path: Path, run_cli: Any
) -> None:
    """A 1,180-character sentence copied from its only context and ending "[1]" is cut in
    two by the segment bound; the first piece was "uncited" (citation recall 0.5) and
    --min-citation-recall 0.8 failed the run."""
    from ceg_cli.check.citecheck import mark

    sentence = ", ".join(CLAUSES)
    assert len(sentence) == 1180
    # The markers of a cut sentence go to its pieces only, not to the next sentence.
    marked = mark(f"{sentence} [1]. The Danube is a river.", None)
    assert marked is not None and len(marked.segments) == 3
    assert [s.split is not None for s in marked.segments] == [True, True, False]
    assert marked.refs == (("1",), ("1",), ())

    records = _records(tmp_path / "r.jsonl", {"response": f"{sentence} [1].",
                                              "contexts": [f"{sentence}."]})
    checked = run_cli("check", records, "--evidence", "contexts", "--min-citation-recall",
                      "0.8")
    assert checked.exit_code == 0, checked.stderr
    pieces = _segments(checked.stdout)
    assert len(pieces) == 2 and all(p["split"] for p in pieces)
    assert [p["citation_check"]["status"] for p in pieces] == ["supported", "supported"]
    assert json.loads(checked.stdout)["citation_check"]["recall"] == 1.0


# -- item 6 -------------------------------------------------------------------------


def test_a_static_index_refuses_other_weights_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Any
) -> None:
    """The weights' digest is recorded at build and checked on open: a cache holding other
    valid weights (half the columns negated) changed 3 of 8 sample verdicts silently; now
    the check and an --append are refused in one line that names CEG_CACHE_DIR."""
    import numpy as np
    from safetensors.numpy import load_file, save_file
    from test_static_embed import _tiny_sentence_transformer

    from ceg_cli.index.dense import static

    source = _tiny_sentence_transformer(tmp_path / "st")
    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(static, "default_source", lambda: source)
    docs = _records(tmp_path / "docs.jsonl",
                    {"id": "a", "title": "Aristotle", "text": "Aristotle was a student of "
                                                              "Plato in Athens."},
                    {"id": "p", "title": "Plato", "text": "Plato was the teacher of "
                                                         "Aristotle."})
    index = tmp_path / "index"
    built = run_cli("index", "build", docs, "--index", index, "--model", "static-minilm")
    assert built.exit_code == 0, built.stderr
    folder = static.static_model_path()
    meta = json.loads((index / "meta.json").read_text())
    assert meta["model"]["weights_digest"] == static.weights_digest(folder)
    records = _records(tmp_path / "r.jsonl", {"response": "Aristotle was a student of Plato."})
    assert run_cli("check", records, "--index", index).exit_code == 0

    weights = load_file(str(folder / "model.safetensors"))["embeddings"]
    weights[:, : weights.shape[1] // 2] *= -1  # other weights, as valid as the first
    save_file({"embeddings": np.ascontiguousarray(weights)}, str(folder / "model.safetensors"))
    more = _records(tmp_path / "more.jsonl",
                    {"id": "s", "title": "Stagira", "text": "Aristotle was born in Stagira."})
    for args in (("check", records, "--index", index),
                 ("index", "build", more, "--index", index, "--append")):
        refused = run_cli(*args)
        assert refused.exit_code == 2, (args, refused.stdout, refused.stderr)
        line = refused.stderr.strip()
        assert "\n" not in line and "Traceback" not in line, line
        assert "CEG_CACHE_DIR" in line and "rebuild the index" in line, line
        assert meta["model"]["weights_digest"][:19] in line, line
