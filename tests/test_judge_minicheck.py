"""The ``minicheck:`` judge gives what the authors' procedure gives, on the same weights.

The reference below is the procedure of Liyan06/MiniCheck, read in
``minicheck/inference.py`` (``Inferencer.inference_per_example``, ``inference``,
``batch_tokenize``) and ``minicheck/minicheck.py`` (``MiniCheck._score_inferencer``)
at commit e9fd26ef8e542ac4021fa9d4493bf915b2bd68dc, written out here (their
package is not imported): one document and claim at a time, sentences per line,
greedy packing into 400-token (500-word for Flan-T5) chunks, ``doc + eos + claim``
(``"predict: "`` in front for Flan-T5) truncated at 512 / 2048 tokens, mini-batches
of 16 chunks, softmax class 1 (Flan-T5: softmax over the logits of ids 3 and
209 after one decoder step from id 0), max over chunks, label = prob > 0.5.
The one stand-in: NLTK's ``sent_tokenize`` needs its downloaded ``punkt_tab``
data, so the reference uses the same English Punkt parameters through
``ceg_cli.sentences.punkt_tokenizer`` (tests/test_sentences.py pins that these
equal NLTK's).

The models are tiny random RoBERTa, DeBERTa-v2 and T5 checkers built in the
test (tests/tiny_checkers.py); parity does not depend on the weights. The
reference loads its own copy of the model as the authors do
(``AutoModelForSequenceClassification`` / ``AutoModelForSeq2SeqLM``), so it
computes with PyTorch's own linear layers while the judge computes with oneDNN's
(ceg_cli/judges/checkers/kernels.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tiny_checkers import build, sentences

from ceg_cli.judges import create_judge
from ceg_cli.types import Evidence, JudgeItem, Segment

FAMILIES = ("roberta", "deberta-v2", "t5")
MAX_LEN = {"roberta": 512, "deberta-v2": 2048, "t5": 2048}


# --- the authors' procedure, one pair at a time ------------------------------


def authors_model(family: str, folder: Path) -> Any:
    """The model as the authors load it (``Inferencer.__init__``), in eval mode."""
    from transformers import AutoModelForSeq2SeqLM, AutoModelForSequenceClassification

    auto = AutoModelForSeq2SeqLM if family == "t5" else AutoModelForSequenceClassification
    return auto.from_pretrained(str(folder)).eval()


class Reference:
    def __init__(self, family: str, tokenizer: Any, model: Any) -> None:
        self.t5 = family == "t5"
        self.tokenizer, self.model = tokenizer, model
        self.max_model_len = MAX_LEN[family]
        self.chunk_size = 500 if self.t5 else 400
        self.batch_size = 16

    @staticmethod
    def sent_tokenize_with_newlines(text: str) -> list[str]:
        from ceg_cli.sentences import punkt_tokenizer

        out: list[str] = []
        for block in text.split("\n"):
            out.extend(punkt_tokenizer().tokenize(block))
            out.append("\n")
        return out[:-1]

    def chunks(self, lst: list[str], n: int):  # type: ignore[no-untyped-def]
        current, count = [], 0
        for sentence in lst:
            if self.t5:
                size = len(sentence.split())
            else:
                size = len(
                    self.tokenizer(
                        sentence,
                        padding=False,
                        add_special_tokens=False,
                        max_length=self.max_model_len,
                        truncation=True,
                    )["input_ids"]
                )
            if count + size > n:
                yield " ".join(current)
                current, count = [sentence], size
            else:
                current.append(sentence)
                count += size
        if current:
            yield " ".join(current)

    def batch_tokenize(self, doc: list[str], claim: list[str]) -> list[Any]:
        texts = [self.tokenizer.eos_token.join([d, c]) for d, c in zip(doc, claim)]
        out = []
        for i in range(0, len(texts), self.batch_size):
            mini = texts[i : i + self.batch_size]
            if self.t5:
                mini = ["predict: " + t for t in mini]
            out.append(
                self.tokenizer(
                    mini,
                    max_length=self.max_model_len,
                    truncation=True,
                    padding=True,
                    return_tensors="pt",
                )
            )
        return out

    def inference_per_example(self, doc: str, claim: str) -> dict[str, Any]:
        import torch

        sents = self.sent_tokenize_with_newlines(doc) or [""]
        doc_chunks = [c.replace(" \n ", "\n").strip() for c in self.chunks(sents, self.chunk_size)]
        doc_chunks = [c for c in doc_chunks if c != ""]
        probs, ids = [], []
        for batch in self.batch_tokenize(doc_chunks, [claim] * len(doc_chunks)):
            with torch.no_grad():
                if self.t5:
                    start = torch.zeros((batch["input_ids"].size(0), 1), dtype=torch.long)
                    logits = self.model(
                        input_ids=batch["input_ids"],
                        attention_mask=batch["attention_mask"],
                        decoder_input_ids=start,
                    ).logits.squeeze(1)
                    p = torch.softmax(logits[:, torch.tensor([3, 209])], dim=-1)
                else:
                    p = torch.softmax(self.model(**batch).logits, dim=1)
            probs.append(p)
            for row, mask in zip(batch["input_ids"].tolist(), batch["attention_mask"].tolist()):
                ids.append([t for t, m in zip(row, mask) if m])
        label_probs = torch.cat(probs)
        return {
            "max_support_prob": label_probs[:, 1].max().item(),
            "chunks": doc_chunks,
            "support_prob_per_chunk": label_probs[:, 1].tolist(),
            "input_ids": ids,
        }


# --- fixtures ----------------------------------------------------------------


@pytest.fixture(scope="module")
def checkers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("checkers")
    return {f: build(f, root / f, seed=i) for i, f in enumerate(FAMILIES)}


def documents() -> list[tuple[str, str]]:
    """(document, claim) pairs: short, multi-line, several chunks, a sentence past a chunk."""
    s = sentences(160, seed=7)
    long_sentence = " ".join(sentences(45, seed=9)).replace(".", "")
    return [
        (s[0], "The river was born in paris."),
        ("\n".join(s[1:5]) + "\n\n" + " ".join(s[5:9]), "A composer wrote a famous poem."),
        (" ".join(s[10:50]) + "\n" + " ".join(s[50:100]), "The king signed the treaty in 1815."),
        (s[130] + " " + long_sentence + ". " + s[131], "An island city."),
        ("\n".join(s[132:140]), " ".join(s[:14])),  # a claim long enough to be truncated
    ]


def item(passages: list[str], claim: str) -> JudgeItem:
    return JudgeItem(
        Segment(0, 0, len(claim), claim),
        tuple(Evidence(i, f"d{i}", "", p, 0.5) for i, p in enumerate(passages)),
    )


# --- parity ------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_chunks_ids_and_scores_equal_the_authors_loop(
    checkers: dict[str, Path], family: str
) -> None:
    judge: Any = create_judge(f"minicheck:{checkers[family]}")
    ref = Reference(family, judge.tokenizer, authors_model(family, checkers[family]))
    pairs = documents()
    expected = [ref.inference_per_example(d, c) for d, c in pairs]
    verdicts = judge.judge([item([d], c) for d, c in pairs])  # one batched call for all
    assert any(len(e["chunks"]) > 1 for e in expected)
    for (doc, claim), exp, verdict in zip(pairs, expected, verdicts):
        chunks = judge.chunks([doc])
        assert [c.text for c in chunks] == exp["chunks"]
        assert judge.encode([(c.text, claim) for c in chunks]) == exp["input_ids"]
        support = judge.support([(c.text, claim) for c in chunks])
        assert support == pytest.approx(exp["support_prob_per_chunk"], abs=1e-5)
        assert verdict.score == pytest.approx(exp["max_support_prob"], abs=1e-4)  # rounded to 4
        assert (verdict.verdict == "supported") == (exp["max_support_prob"] > 0.5)
    scores = [v for e in expected for v in e["support_prob_per_chunk"]]
    assert max(scores) - min(scores) > 1e-3, "random heads too flat to show parity"


@pytest.mark.parametrize("family", FAMILIES)
def test_passages_in_rank_order_read_as_the_joined_document(
    checkers: dict[str, Path], family: str
) -> None:
    judge: Any = create_judge(f"minicheck:{checkers[family]}")
    ref = Reference(family, judge.tokenizer, authors_model(family, checkers[family]))
    s = sentences(150, seed=3)
    passages = [" ".join(s[:40]), "\n".join(s[40:45]), " ".join(s[45:150])]
    claim = "The oldest bridge was built in 1850."
    exp = ref.inference_per_example("\n".join(passages), claim)
    chunks = judge.chunks(passages)
    assert [c.text for c in chunks] == exp["chunks"]
    assert all(c.passages for c in chunks)
    assert chunks[0].passages[0] == 0 and chunks[-1].passages[-1] == 2
    verdict = judge.judge([item(passages, claim)])[0]
    assert verdict.score == pytest.approx(exp["max_support_prob"], abs=1e-4)
    if verdict.verdict == "supported":
        supporting = [c for c, p in zip(chunks, exp["support_prob_per_chunk"]) if p > 0.5]
        assert set(verdict.cited) == {p for c in supporting for p in c.passages}
        assert f"{exp['max_support_prob']:.3f}" in verdict.reason


def test_one_short_context_is_read_exactly(checkers: dict[str, Path]) -> None:
    judge: Any = create_judge(f"minicheck:{checkers['roberta']}")
    context = "Paris is the capital of France. It lies on the Seine."
    chunks = judge.chunks([context])
    assert [c.text for c in chunks] == [context]
    assert judge.input_text(context, "Paris is a capital.") == (
        context + "</s>" + "Paris is a capital."
    )


def test_t5_reads_predict_and_the_eos(checkers: dict[str, Path]) -> None:
    judge: Any = create_judge(f"minicheck:{checkers['t5']}")
    assert judge.input_text("Doc.", "Claim.") == "predict: Doc.</s>Claim."
    assert judge.chunk_size == 500 and judge.max_length == 2048


def test_batching_does_not_change_scores(checkers: dict[str, Path]) -> None:
    path = checkers["roberta"]
    one: Any = create_judge(f"minicheck:{path}", {"batch_size": 1})
    many: Any = create_judge(f"minicheck:{path}", {"batch_size": 16})
    items = [item([d], c) for d, c in documents()[:3]]
    assert [v.score for v in one.judge(items)] == pytest.approx(
        [v.score for v in many.judge(items)], abs=1e-4
    )


def test_no_claim_and_no_evidence_skip_the_model(checkers: dict[str, Path]) -> None:
    judge: Any = create_judge(f"minicheck:{checkers['roberta']}")
    no_claim, no_evidence = judge.judge(
        [item(["Some text."], "Thanks!"), item([], "Paris is big.")]
    )
    assert no_claim.verdict == "no_claim" and no_evidence.verdict == "not_enough_evidence"


def test_an_alias_not_in_the_cache_says_to_pull(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ceg_cli.errors import UsageError

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(UsageError, match=r"lytang/MiniCheck-Flan-T5-Large.*ceg models pull"):
        create_judge("minicheck:minicheck-flan-t5-large")


def test_an_alias_in_the_cache_loads_from_its_snapshot(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, checkers: dict[str, Path]
) -> None:
    import shutil

    cache = tmp_path / "hub"
    rev = "a" * 40
    snap = cache / "models--lytang--MiniCheck-RoBERTa-Large" / "snapshots" / rev
    shutil.copytree(checkers["roberta"], snap)
    (snap.parent.parent / "refs").mkdir()
    (snap.parent.parent / "refs" / "main").write_text(rev)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    judge: Any = create_judge("minicheck:minicheck-roberta-large")
    assert judge.name == "minicheck:minicheck-roberta-large" and judge.family == "roberta"


def test_a_model_of_another_family_is_refused(tmp_path: Path) -> None:
    # A BERT classifier: not one of MiniCheck's architectures.
    import torch
    from tiny_checkers import build as build_model
    from transformers import BertConfig, BertForSequenceClassification

    from ceg_cli.errors import UsageError

    torch.manual_seed(0)
    folder = build_model("deberta-v2", tmp_path / "m")
    config = BertConfig(
        vocab_size=300,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    with pytest.raises(UsageError, match="not a MiniCheck family"):
        create_judge(f"minicheck:{folder}")


def test_check_resume_and_eval_run_end_to_end(
    checkers: dict[str, Path], tmp_path: Path, run_cli: Any
) -> None:
    import json

    records = tmp_path / "answers.jsonl"
    rows = [
        {
            "id": 1,
            "response": "Paris is the capital of France. It lies on the Seine [1].",
            "contexts": ["Paris is the capital of France. It lies on the river Seine.", "Rome."],
        },
        {
            "id": 2,
            "response": "The tower was built in 1889.",
            "contexts": ["The Eiffel Tower was built in 1889 for the World's Fair."],
        },
    ]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    judge = f"minicheck:{checkers['roberta']}"
    out, report = tmp_path / "out.jsonl", tmp_path / "report.html"
    args = ["check", records, "--index", tmp_path / "none", "--judge", judge, "-q"]
    first = run_cli(*args, "--out", out, "--report", report)
    assert first.exit_code == 0, first.stderr
    written = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["judge"]["name"] for r in written] == [judge, judge]
    segment = written[1]["segments"][0]
    assert "support" in segment["reason"] and segment["evidence"]
    assert report.read_text().count("minicheck:") >= 1
    again = run_cli(*args, "--out", out, "--resume")
    assert again.exit_code == 0, again.stderr
    assert [json.loads(x) for x in out.read_text().splitlines()] == written
