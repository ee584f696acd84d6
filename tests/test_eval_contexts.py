"""``ceg eval --evidence``: labelled items judged against their own documents, no index.

The model is the free ``HashEmbedder`` and the judge a substring fake: what is
pinned is which evidence each item is judged against, not how well.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import HashEmbedder
from test_cli_eval import SubstringJudge, run, write_jsonl

from ceg_cli import judges
from ceg_cli.eval.datasets import load_dataset
from ceg_cli.types import Context


@pytest.fixture
def offline_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No index anywhere, a private cache, the fake judge and the free model."""
    import ceg_cli.index.dense.embedding

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CEG_INDEX", raising=False)
    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(judges, "_REGISTRY", dict(judges._REGISTRY))
    judges.register("fake", lambda _arg, _opts: SubstringJudge())
    monkeypatch.setattr(ceg_cli.index.dense.embedding, "load_embedder",
                        lambda *_a, **_k: HashEmbedder())
    return tmp_path


OSLO = "Oslo is the capital of Norway"
MOON = "The Moon orbits the Earth"
#: Each item's own documents, in the three shapes ceg check reads without options.
ROWS: list[dict[str, Any]] = [
    {"id": "a", "response": f"{OSLO}.", "label": True, "contexts": [f"{OSLO} and its city."]},
    # Supported by another item's context only: a pooled index would find it.
    {"id": "b", "response": f"{MOON}.", "label": False,
     "retrieved_contexts": ["Mars has two moons."]},
    {"id": "c", "response": f"{MOON}.", "label": True,
     "retrieval_context": [{"text": f"{MOON}, as all know.", "id": "moon-doc"}]},
]


def metrics_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["contexts", "auto"])
def test_jsonl_with_contexts_is_judged_on_them_with_no_index(
    offline_setup: Path, mode: str
) -> None:
    data = write_jsonl(offline_setup / "rag.jsonl", ROWS)
    metrics_file, preds = offline_setup / "m.json", offline_setup / "p.jsonl"
    result = run(data, "--evidence", mode, "--judge", "fake", "--json", metrics_file,
                 "--out", preds)
    assert result.exit_code == 0, result.stderr
    assert "each item's own contexts" in result.stderr
    assert f"evidence {mode} (contexts 3)" in " ".join(result.stdout.split())
    metrics = metrics_of(metrics_file)
    assert metrics["run"]["evidence"] == mode and metrics["run"]["index"] is None
    assert metrics["run"]["evidence_sources"] == {"contexts": 3}
    # b's context does not hold it (c's would): judged against its own, it is nonfactual.
    assert metrics["responses"]["balanced_accuracy"] == 1.0
    assert "retrieval" not in metrics  # recall is the pooled index's; not measured here
    records = [json.loads(line) for line in preds.read_text(encoding="utf-8").splitlines()]
    assert [r["label"] for r in records] == ["factual", "nonfactual", "factual"]
    assert {r["evidence_source"] for r in records} == {"contexts"}
    assert records[2]["segments"][0]["evidence"][0]["doc_id"] == "moon-doc"
    assert not (offline_setup / "cache").exists()  # no corpus index was built


def test_contexts_field_names_a_nested_field(offline_setup: Path) -> None:
    rows = [{"response": f"{OSLO}.", "label": True, "rag": {"docs": [f"{OSLO}."]}}]
    data = write_jsonl(offline_setup / "nested.jsonl", rows)
    metrics_file = offline_setup / "m.json"
    result = run(data, "--evidence", "contexts", "--contexts-field", "rag.docs",
                 "--judge", "fake", "--json", metrics_file, "--quiet")
    assert result.exit_code == 0, result.stderr
    metrics = metrics_of(metrics_file)
    assert metrics["run"]["evidence_sources"] == {"contexts": 1}
    assert metrics["responses"]["accuracy"] == 1.0


FELM_ROWS = [
    {
        "index": 0, "prompt": "Tell me about Oslo.", "response": f"{OSLO}. {MOON}.",
        "segmented_response": [f"{OSLO}.", f"{MOON}."], "labels": [True, False],
        "ref": ["https://en.wikipedia.org/wiki/Oslo"], "ref_contents": [f"{OSLO} and its city."],
    },
    {
        # Its reference would support row 0's second segment in the pooled corpus.
        "index": 1, "prompt": "And the Moon?", "response": f"{MOON}.",
        "segmented_response": [f"{MOON}."], "labels": [True],
        "ref": ["https://en.wikipedia.org/wiki/Moon"], "ref_contents": [f"{MOON}, as all know."],
    },
    {
        "index": 2, "prompt": "And Mars?", "response": "Mars is red.",
        "segmented_response": ["Mars is red."], "labels": [False], "ref": [], "ref_contents": [],
    },
]


def test_felm_ref_contents_become_each_rows_contexts(offline_setup: Path) -> None:
    data = write_jsonl(offline_setup / "felm.jsonl", FELM_ROWS)
    metrics_file, preds = offline_setup / "m.json", offline_setup / "p.jsonl"
    result = run(data, "--evidence", "contexts", "--judge", "fake", "--json", metrics_file,
                 "--out", preds)
    assert result.exit_code == 0, result.stderr
    assert "corpus" not in result.stderr  # nothing is built
    assert not (offline_setup / "cache").exists()
    metrics = metrics_of(metrics_file)
    # Row 2 has no references: judged on no evidence, and the run says so.
    assert metrics["run"]["evidence_sources"] == {"contexts": 2, "none": 1}
    assert metrics["segments"]["count"] == 4 and metrics["segments"]["balanced_accuracy"] == 1.0
    assert "CEG GPT-4" not in result.stdout  # the paper's figure is of the pooled setting
    records = [json.loads(line) for line in preds.read_text(encoding="utf-8").splitlines()]
    evidence = records[0]["segments"][0]["evidence"][0]
    assert evidence["doc_id"] == "https://en.wikipedia.org/wiki/Oslo"
    assert evidence["title"] == "Oslo"
    assert [s["label"] for s in records[0]["segments"]] == ["factual", "nonfactual"]
    assert records[2]["segments"][0]["evidence"] == []


HALUEVAL_ROWS = [
    {
        "knowledge": "Mount Kenya is the highest mountain in Kenya.",
        "question": "Which is the highest mountain in Kenya?",
        "right_answer": "Mount Kenya is the highest mountain in Kenya.",
        "hallucinated_answer": "The Danube flows into the Black Sea.",
    },
    {
        "knowledge": "The Danube flows into the Black Sea.",
        "question": "Where does the Danube end?",
        "right_answer": "The Danube flows into the Black Sea.",
        "hallucinated_answer": "Mount Kenya is the highest mountain in Kenya.",
    },
]


def test_halueval_knowledge_becomes_each_items_contexts(offline_setup: Path) -> None:
    # Each hallucinated answer is the other item's knowledge: found in a pooled
    # index, absent from its own item's.
    data = write_jsonl(offline_setup / "qa.jsonl", HALUEVAL_ROWS)
    metrics_file = offline_setup / "m.json"
    result = run(data, "--evidence", "contexts", "--judge", "fake", "--json", metrics_file)
    assert result.exit_code == 0, result.stderr
    assert "built corpus index" not in result.stderr
    assert not (offline_setup / "cache").exists()
    metrics = metrics_of(metrics_file)
    assert metrics["run"]["evidence_sources"] == {"contexts": 4}
    assert metrics["pairwise"]["accuracy"] == 1.0
    assert metrics["responses"]["balanced_accuracy"] == 1.0
    assert "retrieval" not in metrics


def test_own_contexts_are_read_only_when_asked(tmp_path: Path) -> None:
    felm = write_jsonl(tmp_path / "felm.jsonl", FELM_ROWS)
    assert all(e.input.contexts is None for e in load_dataset(felm).examples)
    own = load_dataset(felm, own_contexts=True).examples
    url = "https://en.wikipedia.org/wiki/Oslo"
    assert own[0].input.contexts == (Context(1, f"{OSLO} and its city.", url, "Oslo", url),)
    assert own[2].input.contexts == ()
    qa = write_jsonl(tmp_path / "qa.jsonl", HALUEVAL_ROWS)
    items = load_dataset(qa, own_contexts=True).examples
    assert [e.input.contexts[0].text for e in items if e.input.contexts] == [
        HALUEVAL_ROWS[0]["knowledge"]] * 2 + [HALUEVAL_ROWS[1]["knowledge"]] * 2
    rag = write_jsonl(tmp_path / "rag.jsonl", ROWS)
    assert [e.input.read for e in load_dataset(rag).examples] == [
        {"contexts": "contexts"}, {"contexts": "retrieved_contexts"},
        {"contexts": "retrieval_context"}]
    assert all(e.input.contexts is None
               for e in load_dataset(rag, contexts_fields=None).examples)


@pytest.mark.parametrize(
    ("rows", "args", "message"),
    [
        (ROWS, ["--evidence", "contexts", "--index", "idx"],
         "--index is not read with --evidence contexts"),
        (ROWS, ["--evidence", "contexts", "--build-corpus"],
         "--build-corpus is not read with --evidence contexts"),
        (ROWS, ["--evidence", "index", "--contexts-field", "docs"],
         "--contexts-field is read only with --evidence auto, contexts or both"),
        (ROWS, ["--contexts-field", " . "], "--contexts-field ' . ': name the field"),
        (ROWS, ["--evidence", "everything"], "--evidence everything: choose one of"),
        ([*ROWS, {"response": "x.", "label": True}], ["--evidence", "contexts"],
         "data.jsonl:4: --evidence contexts: the item has no contexts"),
        ([{"response": "x.", "label": True, "contexts": 7}], ["--evidence", "contexts"],
         "data.jsonl:1: field 'contexts' must be a list of texts"),
        ([{"response": "x.", "label": True, "contexts": [{"title": "t"}]}], [],
         "data.jsonl:1: field 'contexts' item 1 has no 'text'"),
        ([{"id": 1, "label": "SUPPORTS", "claim": "A b.", "evidence": [[[1, 1, "A", 0]]]}],
         ["--evidence", "contexts"], "the fever format carries no evidence text"),
        ([{"response": "x.", "label": True}], ["--evidence", "both"],
         "needs an index of the documents to check against"),
    ],
)
def test_bad_evidence_options_are_one_line_and_exit_2(
    offline_setup: Path, rows: list[dict[str, Any]], args: list[str], message: str
) -> None:
    data = write_jsonl(offline_setup / "data.jsonl", rows)
    metrics_file = offline_setup / "m.json"
    result = run(data, *args, "--judge", "fake", "--json", metrics_file)
    assert result.exit_code == 2
    stderr = " ".join(result.stderr.split())
    assert message in stderr, stderr
    assert stderr.count("error:") <= 1  # one message (the console may wrap it)
    assert not metrics_file.exists()  # refused before anything is written
