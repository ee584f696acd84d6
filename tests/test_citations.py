"""The citations an answer carries, verified: ALCE's citation recall and precision.

The parity test runs ALCE's own procedure (princeton-nlp/ALCE, ``eval.py``,
``compute_autoais``, read at commit 1d2b3a7 of the main branch) written out
below with the same entailment function that ceg's judge uses, and compares
the figures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ceg_cli.check.citecheck import check_citations, mark
from ceg_cli.check.ctxsearch import ContextSearch
from ceg_cli.llm.prompts import regeneration_messages
from ceg_cli.report.records import citation_summary, from_record, to_record
from ceg_cli.types import (
    FACTUAL,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    SUPPORTED,
    Context,
    Evidence,
    JudgeItem,
    Verdict,
)
from tests.conftest import HashEmbedder

EIFFEL = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. It is "
    "named after the engineer Gustave Eiffel, whose company designed and built the tower "
    "from 1887 to 1889."
)
SEINE = "The Seine is a river in northern France. It flows through Paris into the English Channel."
PARIS = "Paris is the capital and largest city of France."
CITING = (
    "The Eiffel Tower is in Paris [1]. "
    "It was designed by the company of Gustave Eiffel [1][2]. "
    "It was finished in 1923 [1]. "
    "Paris is the capital of France [3]. "
    "The Seine flows into the English Channel [7]."
)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- through ceg check -------------------------------------------------------------


@pytest.fixture
def citing_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "citing.jsonl", [
        {"id": "a", "user_input": "Tell me about the Eiffel Tower.", "response": CITING,
         "retrieved_contexts": [EIFFEL, SEINE, PARIS]},
        {"id": "plain", "user_input": "Where does the Seine flow?",
         "response": "The Seine flows through Paris.", "retrieved_contexts": [SEINE]},
    ])


def test_each_sentence_gets_its_citation_verdict(
    run_cli: Any, citing_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "o.jsonl"
    result = run_cli("check", citing_file, "--index", tmp_path / "none", "--out", out, "-q")
    assert result.exit_code == 0, result.stderr
    cited, plain = read_jsonl(out)
    segments = cited["segments"]
    # The judge reads the sentences without their markers; offsets stay in the response.
    assert [s["text"] for s in segments] == [
        "The Eiffel Tower is in Paris.",
        "It was designed by the company of Gustave Eiffel.",
        "It was finished in 1923.",
        "Paris is the capital of France.",
        "The Seine flows into the English Channel.",
    ]
    assert CITING[segments[1]["start"]:segments[1]["end"]] == (
        "It was designed by the company of Gustave Eiffel [1][2]."
    )
    checks = [s["citation_check"] for s in segments]
    assert [c["status"] for c in checks] == [
        "supported", "supported", "unsupported", "supported", "unsupported"]
    assert checks[1] == {
        "refs": ["1", "2"], "contexts": [1, 2], "unresolved": [], "status": "supported",
        "irrelevant": [2], "reason": "supported by contexts 1 and 2; context 2 adds nothing to it",
    }
    assert checks[2]["irrelevant"] == [1]  # a citation that does not support is imprecise
    # [7] of three: reported on its sentence, never a crash.
    assert checks[4]["unresolved"] == ["7"] and checks[4]["contexts"] == []
    assert checks[4]["reason"] == "cites [7], naming no context (the record has 3 contexts)"
    assert cited["citation_check"] == {
        "sentences": 5, "supported": 3, "uncited": 0, "citations": 6, "relevant": 3,
        "unresolved": 1, "recall": 0.6, "precision": 0.5,
    }
    # An answer without markers is not a citing answer: nothing to verify.
    assert plain["citation_check"] is None
    assert all(s["citation_check"] is None for s in plain["segments"])


def test_the_gate_reads_citation_recall_and_precision(
    run_cli: Any, citing_file: Path, tmp_path: Path
) -> None:
    base = ("check", citing_file, "--index", tmp_path / "none", "--out", tmp_path / "o.jsonl")
    passing = run_cli(*base, "--min-citation-recall", "0.6", "--min-citation-precision", "0.5")
    assert passing.exit_code == 0, passing.stderr
    failing = run_cli(*base, "--min-citation-recall", "0.61", "--summary", tmp_path / "s.md",
                      "--junit", tmp_path / "j.xml")
    assert failing.exit_code == 1
    said = " ".join(failing.stderr.split())
    assert ("citation recall 0.6 (3 of 5 sentences with a claim supported by their citations) "
            "is below --min-citation-recall 0.61") in said
    summary = (tmp_path / "s.md").read_text()
    assert "| Citation recall | 60.0% (3 of 5 sentences with a claim) |" in summary
    assert "| Citation precision | 50.0% (3 of 6 citations) |" in summary
    assert "sentence 4 (unsupported): cites \\[7\\], naming no context" in summary
    junit = (tmp_path / "j.xml").read_text()
    assert 'name="citation_recall" value="0.600000"' in junit
    assert "sentence 2 (unsupported): context 1 does not support it" in junit


def test_a_citation_gate_with_nothing_to_measure_fails(run_cli: Any, tmp_path: Path) -> None:
    plain = write_jsonl(tmp_path / "p.jsonl", [{"response": "Paris is the capital of France.",
                                                "contexts": [PARIS]}])
    result = run_cli("check", plain, "--index", tmp_path / "none", "--min-citation-precision",
                     "0.5")
    assert result.exit_code == 1
    assert ("--min-citation-precision 0.5: no citation was checked (no record both carried "
            "citation markers and had contexts for them to name), so there was nothing to "
            "measure") in " ".join(result.stderr.split())


@pytest.mark.parametrize("option", ["--min-citation-recall", "--min-citation-precision"])
def test_a_citation_gate_with_evidence_index_is_a_usage_error(
    run_cli: Any, tmp_path: Path, hash_index: Path, hash_model: None, option: str
) -> None:
    # Issue 44, item 8: the answer's markers were found, the gate said "no response cited
    # its contexts" at the end of the run. --evidence index never reads the contexts
    # citations name: refused before anything runs.
    rows = [{"response": "Paris is the capital of France [1].", "contexts": [PARIS]}]
    out = tmp_path / "o.jsonl"
    result = run_cli("check", write_jsonl(tmp_path / "r.jsonl", rows), "--index", hash_index,
                     "--evidence", "index", option, "0.5", "--out", out)
    assert result.exit_code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0] == (
        f"error: {option}: citations are checked against each record's own contexts, which "
        "--evidence index does not read; use --evidence auto, contexts or both")
    assert not out.exists()


def test_a_claim_without_citation_is_reported_as_uncited(run_cli: Any, tmp_path: Path) -> None:
    rows = [{"response": "Paris is the capital of France [1]. The Seine flows through Paris.",
             "contexts": [PARIS, SEINE]}]
    out = tmp_path / "o.jsonl"
    result = run_cli("check", write_jsonl(tmp_path / "r.jsonl", rows), "--index",
                     tmp_path / "none", "--out", out, "-q")
    assert result.exit_code == 0, result.stderr
    (record,) = read_jsonl(out)
    second = record["segments"][1]
    assert second["label"] == "factual"  # true, from context 2, but not cited
    assert second["citation_check"]["status"] == "uncited"
    assert record["citation_check"]["recall"] == 0.5


def test_markers_by_id_and_another_marker_style(run_cli: Any, tmp_path: Path) -> None:
    rows = [{"response": "Paris is the capital of France.[^p] The Seine is a river in "
             "northern France.[^s]",
             "contexts": [{"id": "s", "text": SEINE}, {"id": "p", "text": PARIS}]}]
    out = tmp_path / "o.jsonl"
    result = run_cli("check", write_jsonl(tmp_path / "r.jsonl", rows), "--index",
                     tmp_path / "none", "--out", out, "-q",
                     "--citation-pattern", r"\[\^([a-z]+)\]")
    assert result.exit_code == 0, result.stderr
    (record,) = read_jsonl(out)
    assert [s["citation_check"]["contexts"] for s in record["segments"]] == [[2], [1]]
    assert record["citation_check"]["recall"] == 1.0


def test_a_bad_citation_pattern_is_one_line(run_cli: Any, tmp_path: Path) -> None:
    rows = write_jsonl(tmp_path / "r.jsonl", [{"response": "x.", "contexts": [PARIS]}])
    out = tmp_path / "o.jsonl"
    result = run_cli("check", rows, "--index", tmp_path / "none", "--out", out,
                     "--citation-pattern", "[(")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --citation-pattern '[(' is not a valid regular ")
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_a_citation_pattern_that_backtracks_without_end_is_one_line(
    run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44, item 9: it ran past 60 s; now the answer's matching stops at the timeout
    (shortened here) and the run ends with exit 2 and one line naming the answer's line."""
    import ceg_cli.check.markers

    monkeypatch.setattr(ceg_cli.check.markers, "MATCH_TIMEOUT_S", 0.25)
    rows = write_jsonl(tmp_path / "r.jsonl", [
        {"response": "Paris is the capital of France [1].", "contexts": [PARIS]},
        {"response": "Paris is the capital of France [1]. " + "a" * 20_000 + "b",
         "contexts": [PARIS]},
    ])
    out = tmp_path / "o.jsonl"
    result = run_cli("check", rows, "--index", tmp_path / "none", "--out", out,
                     "--citation-pattern", "(a+)+$", "-q")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: line 2: --citation-pattern '(a+)+$' did not finish within "
                           "0.25 s on an answer of 20,037 characters: it backtracks too much")


def test_markers_with_no_contexts_are_removed_and_not_checked(
    run_cli: Any, hash_model: None, hash_index: Path, tmp_path: Path
) -> None:
    """The documented fallback: an answer citing [1] against an index has its markers
    removed from what the judge reads, and no citation check."""
    rows = write_jsonl(tmp_path / "r.jsonl", [{"response": "Aristotle was a philosopher [1]."}])
    out = tmp_path / "o.jsonl"
    result = run_cli("check", rows, "--index", hash_index, "--out", out, "-q")
    assert result.exit_code in (0, 1), result.stderr
    (record,) = read_jsonl(out)
    assert record["segments"][0]["text"] == "Aristotle was a philosopher."
    assert record["segments"][0]["citation_check"] is None
    assert record["citation_check"] is None


def test_citation_checks_survive_resume_and_report(
    run_cli: Any, citing_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "o.jsonl"
    assert run_cli("check", citing_file, "--index", tmp_path / "none", "--out", out,
                   "-q").exit_code == 0
    for record in read_jsonl(out):
        again = to_record(from_record(record), record["judge"])
        assert again == record


# -- ALCE parity ---------------------------------------------------------------------


_WORD = re.compile(r"[A-Z][a-z]+|\d+")


def entails(passage: str, claim: str) -> bool:
    """The stand-in NLI model of both procedures: every name and number of the claim is in
    the passage (what ALCE's TRUE model is asked, reduced to something exact)."""
    return set(_WORD.findall(claim)) <= set(_WORD.findall(passage))


class EntailmentJudge:
    """A ceg judge that decides with ``entails`` over the passages it is given."""

    name = "test/entails"
    method = "entails"

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        out = []
        for item in items:
            if not _WORD.search(item.segment.text):
                out.append(Verdict(FACTUAL, NO_CLAIM, 1.0))
            elif entails("\n".join(e.text for e in item.evidence), item.segment.text):
                out.append(Verdict(FACTUAL, SUPPORTED, 1.0))
            else:
                out.append(Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.0))
        return out


def alce_autoais(sentences: list[str], docs: list[str]) -> tuple[float, float]:
    """ALCE's compute_autoais for one answer, with ``entails`` as its NLI model: each
    sentence's refs by ``re.findall(r"\\[\\d+", sent)``, its text with them removed."""
    entail = entail_prec = total_citations = 0
    for sent in sentences:
        target = re.sub(r" ?\[\d+\]", "", sent)
        ref = [int(r[1:]) - 1 for r in re.findall(r"\[\d+", sent)]
        if not ref or any(r >= len(docs) for r in ref):
            joint = 0
        else:
            joint = int(entails("\n".join(docs[r] for r in ref), target))
        entail += joint
        if joint and len(ref) > 1:
            for r in ref:
                if not entails(docs[r], target):
                    rest = [d for d in ref if d != r]
                    if not entails("\n".join(docs[d] for d in rest), target):
                        entail_prec += 1
                else:
                    entail_prec += 1
        else:
            entail_prec += joint
        total_citations += len(ref)
    return entail / len(sentences), entail_prec / total_citations if total_citations else 0.0


ALCE_CASES = [
    # (sentences as ALCE writes them, contexts): every sentence makes a claim and cites
    # each context at most once, where both procedures count alike.
    (["Eiffel built the tower in Paris [1].", "Paris is in France [2][3].",
      "The Seine ends in the English Channel [3]."],
     ["Gustave Eiffel built the tower in Paris.", "Paris is big.",
      "Paris is the capital of France. The Seine ends in the English Channel."]),
    (["Lyon is in France [1][2].", "Marseille has a port [2].", "Nice is sunny [1][2][3]."],
     ["Lyon and Nice are cities.", "France has Lyon, Marseille and a port.",
      "Nice is sunny."]),
    (["Rome is old [4].", "Rome has the Colosseum [1].", "Rome and Milan are in Italy [1][2].",
      "Turin is in Italy."],
     ["Rome has the Colosseum and is in Italy.", "Milan is in Italy.", "Turin."]),
]


@pytest.mark.parametrize(("sentences", "docs"), ALCE_CASES)
def test_recall_and_precision_equal_alce_on_sentences_with_claims(
    sentences: list[str], docs: list[str]
) -> None:
    from ceg_cli.types import SegmentResult

    contexts = tuple(Context(n, text) for n, text in enumerate(docs, 1))
    marked = mark(" ".join(sentences), contexts)
    assert marked is not None and len(marked.segments) == len(sentences)
    search = ContextSearch(lambda: HashEmbedder())  # BM25 ranks the cited passages
    (passages,) = search.prepare([contexts])
    judge = EntailmentJudge()
    items = [JudgeItem(s, (), None, marked.clean) for s in marked.segments]
    verdicts = judge.judge(items)
    work = [(item, verdict, refs, contexts, passages, (item.segment.text, None))
            for item, verdict, refs in zip(items, verdicts, marked.refs)]
    checks = check_citations(judge, work)
    results = [SegmentResult(s, v, (), c) for s, v, c in zip(marked.segments, verdicts, checks)]
    summary = citation_summary(results)
    assert summary is not None
    recall, precision = alce_autoais(sentences, docs)
    assert summary["recall"] == pytest.approx(recall, abs=1e-4)
    assert summary["precision"] == pytest.approx(precision, abs=1e-4)


def test_alce_reference_is_not_trivially_equal() -> None:
    """The reference tells these answers apart: the parity test could fail."""
    figures = {alce_autoais([a], d) for a, d in [
        ("Paris is in France [1].", ["Paris is in France."]),
        ("Paris is in France [1][2].", ["Paris is in France.", "Lyon."]),
        ("Paris is in France [2].", ["Paris is in France."]),
    ]}
    assert figures == {(1.0, 1.0), (1.0, 0.5), (0.0, 0.0)}


# -- regeneration keeps citations -------------------------------------------------------


def test_the_rewrite_of_a_citing_answer_is_asked_to_cite_its_contexts() -> None:
    docs = [Evidence(0, "2", "", SEINE, 0.8, context=2, start=0, end=len(SEINE)),
            Evidence(1, "3", "", PARIS, 0.7, context=3, start=0, end=len(PARIS))]
    cite = regeneration_messages("Q?", "A [2].", ["A [2]."], docs, cite=True)[-1]["content"]
    plain = regeneration_messages("Q?", "A.", ["A."], docs)[-1]["content"]
    assert "cite the documents it relies on by their numbers in square brackets" in cite
    assert 'number="2"' in cite and 'number="3"' in cite  # the contexts' own numbers
    assert "without tags, citations or comments" in plain and 'number="1"' in plain


# -- issue 44, items 6 and 21: groups that name no context, shared ids, one numbering -------


def test_reference_shaped_groups_are_never_claims(run_cli: Any, tmp_path: Path) -> None:
    # "[0]" stayed in the judged text: "'0' not in the evidence", and the gate said no
    # response cited its contexts.
    rows = [{"id": f"r{n}", "response": f"Paris is the capital of France {group}.",
             "contexts": [PARIS, SEINE, EIFFEL]}
            for n, group in enumerate(["[0]", "[-1]", "[1-25]", "[1000]", "[^1]"])]
    responses = write_jsonl(tmp_path / "r.jsonl", rows)
    out = tmp_path / "o.jsonl"
    result = run_cli("check", responses, "--out", out, "--index", tmp_path / "none",
                     "--max-nonfactual-rate", "0", "--min-citation-recall", "0")
    assert result.exit_code == 0, result.stderr
    assert "no response cited its contexts" not in result.stderr
    for row, record in zip(rows, read_jsonl(out)):
        [segment] = record["segments"]
        assert segment["text"] == "Paris is the capital of France.", record["id"]
        assert segment["verdict"] == "supported", segment["reason"]
        group = row["response"].split()[-1].rstrip(".")
        check = segment["citation_check"]
        assert check["status"] == "unsupported"
        assert check["unresolved"] == [group[1:-1]]
        hint = (r"; to read [^n] as context n, pass --citation-pattern '\[\^(\d+)\]'"
                if group == "[^1]" else "")
        assert check["reason"] == (
            f"cites {group}, naming no context (the record has 3 contexts){hint}")
        assert record["citation_check"]["unresolved"] == 1


def test_an_id_two_contexts_share_names_both(run_cli: Any, tmp_path: Path) -> None:
    rows = [{"id": "dup", "response": "Paris is the capital of France [a].",
             "contexts": [{"id": "a", "text": PARIS}, {"id": "a", "text": SEINE}]}]
    out = tmp_path / "o.jsonl"
    result = run_cli("check", write_jsonl(tmp_path / "r.jsonl", rows), "--out", out,
                     "--index", tmp_path / "none")
    assert result.exit_code == 0, result.stderr
    check = read_jsonl(out)[0]["segments"][0]["citation_check"]
    assert (check["refs"], check["contexts"], check["unresolved"]) == (["a"], [1, 2], [])
    assert check["status"] == "supported"
    assert check["reason"].startswith("supported by contexts 1 and 2")


def test_annotated_text_numbers_citations_as_the_answer_does(
    run_cli: Any, tmp_path: Path
) -> None:
    mona = "The Mona Lisa hangs in the Louvre, a museum in Paris."
    response = "Paris is the capital of France [2]. The Mona Lisa is in the Louvre [1]."
    rows = [{"id": "mix", "response": response, "contexts": [mona, PARIS]}]
    out = tmp_path / "o.jsonl"
    result = run_cli("check", write_jsonl(tmp_path / "r.jsonl", rows), "--out", out,
                     "--index", tmp_path / "none")
    assert result.exit_code == 0, result.stderr
    record = read_jsonl(out)[0]
    # Was "...France [2]. [1] The Mona Lisa is in the Louvre [1]. [2]".
    assert record["annotated"] == (
        "Paris is the capital of France [2]. [2] The Mona Lisa is in the Louvre [1]. [1]")
    assert [[c["marker"] for c in s["citations"]] for s in record["segments"]] == [[2], [1]]
    assert [[c["context"] for c in s["citations"]] for s in record["segments"]] == [[2], [1]]


def test_reasons_read_as_english() -> None:
    from ceg_cli.check.citecheck import _contexts, _naming_none

    assert _contexts([2]) == "context 2"
    assert _contexts([1, 2]) == "contexts 1 and 2"
    assert _contexts([1, 2, 3]) == "contexts 1, 2 and 3"
    assert _naming_none(["7"]) == "; [7] names no context"
    assert _naming_none(["7", "8"]) == "; [7][8] name no context"
    assert _naming_none([]) == ""
