"""``ceg eval`` through the command line: usage errors, and a small real run."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from ceg_cli import judges
from ceg_cli.cli.eval_cmd import eval_command
from ceg_cli.index.build.builder import BuildOptions, build_index
from ceg_cli.index.dense.embedding import Embedder
from ceg_cli.types import FACTUAL, NONFACTUAL, NOT_ENOUGH_EVIDENCE, SUPPORTED, JudgeItem, Verdict

# The command wired the way main.py wires it, so the test does not depend on
# the rest of the app.
app = typer.Typer()
app.command("eval")(eval_command)


@app.callback()
def _root() -> None:
    """ceg"""


def run(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, ["eval", *map(str, args)], env=env, catch_exceptions=False)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


class SubstringJudge:
    """Factual when the segment (without its final period) occurs in a passage.

    A fake for plumbing: the judge is not what this test is about.
    """

    name = "fake"
    method = "segment is a substring of a passage (test fake)"

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        out = []
        for it in items:
            needle = it.segment.text.lower().rstrip(".")
            hits = tuple(i for i, e in enumerate(it.evidence) if needle in e.text.lower())
            if hits:
                out.append(Verdict(FACTUAL, SUPPORTED, 0.9, hits))
            else:
                out.append(Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.2))
        return out


@pytest.fixture
def fake_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judges, "_REGISTRY", dict(judges._REGISTRY))
    judges.register("fake", lambda _arg, _opts: SubstringJudge())


@pytest.fixture
def no_default_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CEG_INDEX", raising=False)
    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))


def test_fever_without_an_index_says_how_to_fix(tmp_path: Path, no_default_index: None) -> None:
    data = write_jsonl(
        tmp_path / "fever.jsonl",
        [{"id": 1, "label": "SUPPORTS", "claim": "A b.", "evidence": [[[1, 1, "A", 0]]]}],
    )
    result = run(data)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "fever format needs an index of the Wikipedia pages" in result.stderr
    assert "--index DIR" in result.stderr and "ceg index build" in result.stderr


def test_build_corpus_needs_a_corpus(tmp_path: Path, no_default_index: None) -> None:
    data = write_jsonl(tmp_path / "g.jsonl", [{"response": "x", "label": True}])
    result = run(data, "--build-corpus")
    assert result.exit_code == 2
    assert "jsonl format carries no corpus; pass --index DIR" in result.stderr


def test_bad_field_names_file_and_line(tmp_path: Path, no_default_index: None) -> None:
    data = write_jsonl(
        tmp_path / "g.jsonl", [{"response": "x", "label": True}, {"response": "y", "label": 7}]
    )
    result = run(data, "--index", tmp_path)
    assert result.exit_code == 2
    assert "g.jsonl:2: field 'label' is 7" in result.stderr
    result = run(data, "--format", "wiki", "--index", tmp_path)
    assert result.exit_code == 2 and "--format wiki: unknown" in result.stderr
    result = run(data, "--query", "everything", "--index", tmp_path)
    assert result.exit_code == 2 and "--query everything: choose one of" in result.stderr
    result = run(data, "--index", tmp_path, "--out", tmp_path / "nowhere" / "p.jsonl")
    assert result.exit_code == 2 and "the folder" in result.stderr
    assert "does not exist" in result.stderr


def test_unknown_judge_lists_the_valid_ones(tmp_path: Path, no_default_index: None) -> None:
    data = write_jsonl(tmp_path / "g.jsonl", [{"response": "x", "label": True}])
    result = run(data, "--index", tmp_path, "--judge", "oracle")
    assert result.exit_code == 2
    assert "unknown judge; choose one of: offline" in result.stderr


def test_importing_the_command_loads_no_model_code() -> None:
    code = (
        "import sys, ceg_cli.cli.eval_cmd; "
        "print([m for m in ('torch', 'faiss', 'sentence_transformers', 'numpy') "
        "if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


CORPUS = [
    {"id": "oslo", "title": "Oslo", "text": "Oslo is the capital of Norway. It lies on a fjord."},
    {"id": "nile", "title": "Nile", "text": "The Nile flows north into the Mediterranean Sea."},
    {"id": "moon", "title": "Moon", "text": "The Moon orbits the Earth about once a month."},
]
RESPONSES = [
    {
        "id": "r1",
        "question": "Tell me about Oslo.",
        "response": "Oslo is the capital of Norway. It lies on a glacier.",
        "segments": [
            {"text": "Oslo is the capital of Norway.", "label": True},
            {"text": "It lies on a glacier.", "label": "nonfactual"},
        ],
        "evidence_ids": ["oslo"],
    },
    {
        "id": "r2",
        "response": "The Nile flows north into the Mediterranean Sea.",
        "label": "factual",
        "evidence_titles": ["Nile"],
    },
    {"id": "r3", "response": "The Moon orbits Mars.", "label": False, "evidence_ids": ["moon"]},
]


@pytest.mark.slow
def test_eval_generic_jsonl_end_to_end(
    tmp_path: Path, embedder: Embedder, fake_judge: None, no_default_index: None
) -> None:
    index = tmp_path / "index"
    build_index(
        [write_jsonl(tmp_path / "corpus.jsonl", CORPUS)], index, BuildOptions(), embedder=embedder
    )
    data = write_jsonl(tmp_path / "labelled.jsonl", RESPONSES)
    preds, metrics_file = tmp_path / "pred.jsonl", tmp_path / "metrics.json"
    result = run(
        data,
        "--index",
        index,
        "--judge",
        "fake",
        "-k",
        "3",
        "--out",
        preds,
        "--json",
        metrics_file,
        "--quiet",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""  # --quiet: no progress, and the table is on stdout
    assert "segment balanced accuracy" in result.stdout
    assert "judge fake" in result.stdout

    metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
    seg = metrics["segments"]
    # r1's two segments carry gold labels; r2 and r3 are segmented by Punkt.
    assert seg["count"] == 2 and seg["balanced_accuracy"] == 1.0
    resp = metrics["responses"]
    assert resp["count"] == 3 and resp["gold_nonfactual"] == 2
    assert resp["balanced_accuracy"] == 1.0
    assert metrics["retrieval"]["segments"] == 4
    assert metrics["retrieval"]["recall_at_1"] == 1.0
    assert metrics["run"]["judge"] == "fake" and metrics["run"]["top_k"] == 3
    assert metrics["run"]["format"] == "jsonl"

    records = [json.loads(line) for line in preds.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["gold"], r["label"]) for r in records] == [
        ("r1", "nonfactual", "nonfactual"),
        ("r2", "factual", "factual"),
        ("r3", "nonfactual", "nonfactual"),
    ]
    assert records[0]["segments"][0]["evidence"][0]["doc_id"] == "oslo"
    assert [s["gold"] for s in records[0]["segments"]] == ["factual", "nonfactual"]


@pytest.mark.slow
def test_eval_halueval_builds_its_corpus_once(
    tmp_path: Path, embedder: Embedder, fake_judge: None, no_default_index: None
) -> None:
    rows = [
        {
            "knowledge": "Mount Kenya is the highest mountain in Kenya.",
            "question": "Which is the highest mountain in Kenya?",
            "right_answer": "Mount Kenya is the highest mountain in Kenya.",
            "hallucinated_answer": "Mount Elgon is the highest mountain in Kenya.",
        },
        {
            "knowledge": "The Danube flows into the Black Sea.",
            "question": "Where does the Danube end?",
            "right_answer": "The Danube flows into the Black Sea.",
            "hallucinated_answer": "The Danube flows into the North Sea near the city of Hamburg.",
        },
    ]
    data = write_jsonl(tmp_path / "qa.jsonl", rows)
    metrics_file = tmp_path / "m.json"
    first = run(data, "--judge", "fake", "--json", metrics_file)
    assert first.exit_code == 0, first.stderr
    assert "built corpus index" in first.stderr
    assert "CEG 69.45" in first.stdout  # the paper's figure beside ours
    metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
    assert metrics["pairwise"]["pairs"] == 2 and metrics["pairwise"]["accuracy"] == 1.0
    assert metrics["pairwise"]["length_matched_pairs"] == 1
    assert metrics["retrieval"]["recall_at_1"] == 1.0
    assert "segments" not in metrics  # HaluEval labels answers, not segments
    again = run(data, "--judge", "fake", "--quiet")
    assert again.exit_code == 0 and again.stderr == ""
    assert list((tmp_path / "cache" / "eval").iterdir())  # the cache was used


def test_fever_rows_without_text_are_named_and_the_rest_run(
    tmp_path: Path, hash_index: Path, hash_model: None, fake_judge: None, no_default_index: None
) -> None:
    data = Path(__file__).parent / "data" / "benchmarks" / "fever-odd-rows.jsonl"
    metrics_file = tmp_path / "metrics.json"
    result = run(data, "--index", hash_index, "--judge", "fake", "--json", metrics_file, "--quiet")
    assert result.exit_code == 0, result.stderr
    stderr = " ".join(result.stderr.split())  # the console may wrap long lines
    for line, field in ((4, "claim"), (5, "id"), (6, "label")):
        assert f"fever-odd-rows.jsonl:{line}: field '{field}'" in stderr, stderr
    assert stderr.count("row left out") == 3
    metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
    assert metrics["responses"]["count"] == 3
    assert metrics["run"]["rows_left_out"] == 3 and metrics["run"]["skipped"] == 1
