"""The verifier judge and its training: a tiny real model made here, the real code paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ceg_cli.errors import UsageError
from ceg_cli.judges import create_judge
from ceg_cli.judges.checkers.features import FEATURES
from ceg_cli.judges.checkers.verifier import COMBINER_FILE, Combiner, load_combiner
from ceg_cli.training.crossenc import ID2LABEL, train_cross_encoder
from ceg_cli.types import (
    CONTRADICTED,
    FACTUAL,
    NO_CLAIM,
    NONFACTUAL,
    SUPPORTED,
    Evidence,
    JudgeItem,
    Segment,
)

WORDS = (
    "the louvre opened in paris city museum was built by king river flows through france "
    "population of rome founded year is not a an and it has many people visit"
).split()
VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    *WORDS,
    *[str(d) for d in range(10)],
    ".",
    ",",
    ":",
]


def tiny_model(target: Path, bias: tuple[float, float] | None = None) -> Path:
    """A one-layer BERT with two labels; with ``bias`` its output ignores the input."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    target.mkdir(parents=True)
    (target / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tok = BertTokenizer.from_pretrained(str(target), local_files_only=True)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        id2label=ID2LABEL,
        label2id={v: k for k, v in ID2LABEL.items()},
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    if bias is not None:
        with torch.no_grad():
            model.classifier.weight.zero_()
            model.classifier.bias.copy_(torch.tensor(bias))
    model.save_pretrained(str(target))
    tok.save_pretrained(str(target))
    return target


def combiner_on(feature: str, weight: float, intercept: float = 0.0) -> Combiner:
    n = len(FEATURES)
    coef = [0.0] * n
    coef[FEATURES.index(feature)] = weight
    return Combiner(
        FEATURES, (0.0,) * n, (1.0,) * n, tuple(coef), intercept, 0.5, max_length=64, quantize=False
    )


def write_combiner(directory: Path, c: Combiner) -> None:
    (directory / COMBINER_FILE).write_text(json.dumps(c.to_json()), encoding="utf-8")


def item(text: str, *passages: str, sims: tuple[float, ...] = ()) -> JudgeItem:
    ev = tuple(
        Evidence(i, f"d{i}", f"Doc {i}", p, sims[i] if sims else 0.6)
        for i, p in enumerate(passages)
    )
    return JudgeItem(Segment(0, 0, len(text), text), ev)


@pytest.fixture(scope="module")
def lexical_verifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verifier whose decision rests on the share of specifics found alone."""
    d = tiny_model(tmp_path_factory.mktemp("v") / "lexical", bias=(0.0, 0.0))
    write_combiner(d, combiner_on("specifics_found", 10.0, intercept=-7.0))
    return d


def test_verdicts_follow_the_combiner_and_keep_reasons(lexical_verifier: Path) -> None:
    judge = create_judge(f"verifier:{lexical_verifier}")
    assert judge.name == f"verifier:{lexical_verifier}"
    evidence = "The Louvre museum opened in 1793 in Paris."
    good, bad, none, empty = judge.judge(
        [
            item("The Louvre opened in 1793.", evidence),
            item("The Louvre opened in 1812.", evidence),
            item("Do you want to know more?", evidence),
            item("The Louvre opened in 1793."),
        ]
    )
    assert (good.label, good.verdict, good.cited) == (FACTUAL, SUPPORTED, (0,))
    assert "entailment 0.50" in good.reason and "P(supported) 0.95" in good.reason, good.reason
    assert bad.label == NONFACTUAL and bad.cited == ()
    assert bad.reason == (
        "'1812' not in the evidence; the evidence has '1793' near 'opened' where the segment "
        "has '1812'; entailment 0.50 over passage [1]; P(supported) 0.119, under the cut 0.5"
    )
    assert bad.score < 0.5 < good.score
    assert (none.label, none.verdict) == (FACTUAL, NO_CLAIM)
    assert empty.label == NONFACTUAL and "no evidence" in empty.reason


def test_entailment_decides_when_the_combiner_says_so(tmp_path: Path) -> None:
    d = tiny_model(tmp_path / "contra", bias=(6.0, -6.0))  # P(entailment) ~ 0
    write_combiner(d, combiner_on("entailment_logit", 1.0))
    v = create_judge(f"verifier:{d}").judge(
        [item("The Louvre opened in 1793.", "The Louvre opened in 1793.")]
    )[0]
    assert v.label == NONFACTUAL
    # Every word is in the evidence and the model reads it as not entailed.
    assert v.verdict == CONTRADICTED and v.reason.startswith(
        "every word found, but entailment 0.00"
    )


def test_combiner_matches_sklearn() -> None:
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from ceg_cli.training.combiner import fit

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, len(FEATURES)))
    y = (X[:, 0] + 0.5 * X[:, 1] + rng.normal(scale=0.5, size=200) > 0).astype(int)
    c = fit(X, y, ["a"] * 100 + ["b"] * 100)
    mean, scale = X.mean(0), X.std(0)
    lr = LogisticRegression(max_iter=2000)
    cells = {(g, t): 0 for g in "ab" for t in (0, 1)}
    groups = ["a"] * 100 + ["b"] * 100
    for g, t in zip(groups, y):
        cells[(g, t)] += 1
    w = np.array([1 / cells[(g, t)] for g, t in zip(groups, y)])
    lr.fit((X - mean) / scale, y, sample_weight=w * len(w) / w.sum())
    expected = lr.predict_proba((X - mean) / scale)[:, 1]
    got = np.array([c.probability(row) for row in X])
    assert np.allclose(got, expected, atol=1e-6)
    assert c.coef[0] > c.coef[1] > 0


def test_bad_model_directories_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such directory"):
        create_judge(f"verifier:{tmp_path / 'missing'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="not a verifier model directory"):
        create_judge(f"verifier:{tmp_path / 'empty'}")
    d = tmp_path / "other"
    d.mkdir()
    raw = combiner_on("coverage", 1.0).to_json()
    raw["features"] = ["coverage"]
    (d / COMBINER_FILE).write_text(json.dumps(raw))
    with pytest.raises(UsageError, match="made for features"):
        load_combiner(d)


def test_training_resumes_to_the_same_model(tmp_path: Path) -> None:
    import functools

    import torch
    from safetensors.torch import load_file

    base = tiny_model(tmp_path / "base")
    examples = [(f"the louvre opened in {1700 + i}", f"the louvre opened in {1700 + i % 7}",
                 int(i % 7 == i)) for i in range(48)]
    train = functools.partial(train_cross_encoder, base=str(base), batch_size=4, max_length=32,
                              checkpoint_every_s=0)
    whole = train(examples, tmp_path / "whole")
    assert whole["finished"] and whole["steps"] == 12

    class Killed(Exception):
        pass

    def kill_at_5(step: int, total: int, loss: float) -> None:
        if step == 5:
            raise Killed

    with pytest.raises(Killed):
        train(examples, tmp_path / "split", progress=kill_at_5)
    assert (tmp_path / "split" / "checkpoint.pt").exists()
    resumed = train(examples, tmp_path / "split")
    assert resumed["finished"] and resumed["steps"] == 12
    a = load_file(str(tmp_path / "whole" / "model.safetensors"))
    b = load_file(str(tmp_path / "split" / "model.safetensors"))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not (tmp_path / "split" / "checkpoint.pt").exists()
    # Another data set is refused rather than mixed into the checkpoint's run.
    with pytest.raises(Killed):
        train(examples, tmp_path / "third", progress=kill_at_5)
    with pytest.raises(UsageError, match="other training data"):
        train(examples[:20], tmp_path / "third")


def test_judge_train_adapts_to_an_index(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli, lexical_verifier: Path
) -> None:
    out = tmp_path / "adapted"
    r = run_cli(
        "judge",
        "train",
        "--index",
        hash_index,
        "--out",
        out,
        "--base",
        lexical_verifier,
        "--pairs",
        "40",
        "--held-out",
        "20",
        "--minutes",
        "5",
    )
    assert r.exit_code == 0, r.stderr
    assert "before: balanced accuracy" in r.stderr and "after: balanced accuracy" in r.stderr
    card = (out / "MODEL_CARD.md").read_text()
    assert "40 for training" in card and "20 held out from other passages" in card
    assert json.loads((out / "adapt.json").read_text())["training"]["finished"] is True
    judge = create_judge(f"verifier:{out}")
    assert judge.judge([item("The Louvre opened in 1793.", "The Louvre opened in 1793.")])[0].label
    again = run_cli(
        "judge", "train", "--index", hash_index, "--out", out, "--base", lexical_verifier
    )
    assert again.exit_code == 2 and "already holds files" in again.stderr


# -- malformed model directories and careless calls (issue 23) ---------------------------


def check_with(run_cli, hash_index: Path, tmp_path: Path, judge: str):  # type: ignore[no-untyped-def]
    responses = tmp_path / "responses.jsonl"
    responses.write_text(
        json.dumps({"id": "a", "response": "Aristotle was a Greek philosopher."}) + "\n",
        encoding="utf-8",
    )
    return run_cli("check", responses, "--index", hash_index, "--judge", judge, "--quiet")


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(("error:", "internal error"))]


def refused(result, *names: str) -> str:  # type: ignore[no-untyped-def]
    """The one error line of a run refused with exit 2, which names each of ``names``."""
    lines = error_lines(result.stderr)
    assert result.exit_code == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    said = " ".join(result.stderr.split())
    assert all(name in said for name in names), result.stderr
    return said


def test_a_model_without_a_trained_head_is_refused(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli
) -> None:
    from transformers import BertModel

    d = tiny_model(tmp_path / "embedding")
    BertModel.from_pretrained(str(d)).save_pretrained(str(d))  # a sentence-embedding model
    write_combiner(d, combiner_on("coverage", 1.0))
    said = refused(check_with(run_cli, hash_index, tmp_path, f"verifier:{d}"),
                   str(d / "model.safetensors"), "classifier")
    assert "random" in said


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [("mean", [0.0, 0.0, 0.0], "'mean' has 3 values"), ("threshold", "high", "'threshold'"),
     ("scale", [0.0] * len(FEATURES), "'scale'"), ("coef", None, "'coef'")],
)
def test_a_combiner_of_the_wrong_shape_is_refused(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli, lexical_verifier: Path,
    field: str, value: object, says: str,
) -> None:
    import shutil

    d = tmp_path / "model"
    shutil.copytree(lexical_verifier, d)
    raw = json.loads((d / COMBINER_FILE).read_text())
    raw[field] = value
    (d / COMBINER_FILE).write_text(json.dumps(raw))
    refused(check_with(run_cli, hash_index, tmp_path, f"verifier:{d}"), str(d / COMBINER_FILE),
            says)
    # judge train refuses it as a base rather than copying it into a new model.
    out = tmp_path / "adapted"
    r = run_cli("judge", "train", "--index", hash_index, "--out", out, "--base", d,
                "--pairs", "8", "--held-out", "4")
    refused(r, str(d / COMBINER_FILE), says)
    assert not (out / COMBINER_FILE).exists()


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_truncated_weights_file_is_refused_naming_it(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli, lexical_verifier: Path
) -> None:
    import shutil

    d = tmp_path / "model"
    shutil.copytree(lexical_verifier, d)
    truncate(d / "model.safetensors")
    weights = str(d / "model.safetensors")
    for judge in (f"verifier:{d}", f"nli:{d}"):
        refused(check_with(run_cli, hash_index, tmp_path, judge), weights)
    r = run_cli("judge", "train", "--index", hash_index, "--out", tmp_path / "adapted",
                "--base", d, "--pairs", "8", "--held-out", "4")
    refused(r, weights)


def test_judge_train_out_naming_a_file_is_refused(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli, lexical_verifier: Path
) -> None:
    out = tmp_path / "notes.txt"
    out.write_text("mine")
    r = run_cli("judge", "train", "--index", hash_index, "--out", out, "--base",
                lexical_verifier)
    refused(r, str(out))
    assert out.read_text() == "mine"


def test_judge_train_minutes_nan_is_refused(
    tmp_path: Path, hash_index: Path, run_cli, lexical_verifier: Path
) -> None:
    r = run_cli("judge", "train", "--index", hash_index, "--out", tmp_path / "o", "--base",
                lexical_verifier, "--minutes", "nan")
    refused(r, "--minutes nan")


def test_a_judge_with_nothing_after_the_colon_is_refused(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli
) -> None:
    for judge in ("verifier:", "nli:"):
        said = refused(check_with(run_cli, hash_index, tmp_path, judge), f"--judge {judge}")
        assert "say which model" in said


# -- judge train interrupted, or pointed at the wrong folder (issue 23) -------------------


def train(run_cli, index: Path, out: Path, base: Path, *args: str | Path):  # type: ignore[no-untyped-def]
    return run_cli("judge", "train", "--index", index, "--out", out, "--base", base,
                   "--pairs", "8", "--held-out", "4", "--quiet", *args)


def test_a_train_killed_before_its_card_is_finished_by_the_next_run(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli, lexical_verifier: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ceg_cli.training import adapt

    out = tmp_path / "adapted"
    # Stopped at the time limit before the first step: the card says "run it again".
    first = train(run_cli, hash_index, out, lexical_verifier, "--minutes", "1e-9")
    assert first.exit_code == 0, first.stderr
    assert "run the same command again" in (out / "MODEL_CARD.md").read_text()
    real = adapt._write_card

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(adapt, "_write_card", killed)
    second = train(run_cli, hash_index, out, lexical_verifier)
    assert second.exit_code == 130
    assert json.loads((out / "training.json").read_text())["finished"] is True
    # Nothing in the folder says a stale "stopped after 0 of N" any more.
    for name in ("MODEL_CARD.md", "adapt.json"):
        assert not (out / name).exists() or "stopped" not in (out / name).read_text()
    monkeypatch.setattr(adapt, "_write_card", real)
    third = train(run_cli, hash_index, out, lexical_verifier)
    assert third.exit_code == 0, third.stderr
    assert "one full pass" in (out / "MODEL_CARD.md").read_text()
    assert json.loads((out / "adapt.json").read_text())["training"]["finished"] is True
    assert not (out / "checkpoint.pt").exists()
    again = train(run_cli, hash_index, out, lexical_verifier)
    assert again.exit_code == 2 and "already holds files" in again.stderr


def test_a_train_killed_while_writing_its_first_checkpoint_starts_again(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli, lexical_verifier: Path
) -> None:
    out = tmp_path / "adapted"
    out.mkdir()
    (out / "checkpoint.tmp").write_bytes(b"\x80\x02half a checkpoint")
    r = train(run_cli, hash_index, out, lexical_verifier)
    assert r.exit_code == 0, r.stderr
    assert json.loads((out / "adapt.json").read_text())["training"]["finished"] is True
    assert not (out / "checkpoint.tmp").exists()


def test_judge_train_refuses_its_base_as_out(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli, lexical_verifier: Path
) -> None:
    import shutil

    base = tmp_path / "base"
    shutil.copytree(lexical_verifier, base)
    before = sorted(p.name for p in base.iterdir())
    (tmp_path / "link").symlink_to(base)
    for out in (base, tmp_path / "link", tmp_path / "base" / ".." / "base"):
        refused(train(run_cli, hash_index, out, base), f"--out {out}", "--base")
    assert sorted(p.name for p in base.iterdir()) == before


def test_judge_train_refuses_an_out_inside_an_index(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli, lexical_verifier: Path
) -> None:
    import shutil

    index = tmp_path / "idx"
    shutil.copytree(hash_index, index)
    before = sorted(p.name for p in index.iterdir())
    for out in (index / "adapted", index, index / "a" / "b"):
        refused(train(run_cli, index, out, lexical_verifier), f"--out {out}", "index")
    # Another index's folder is no place either.
    refused(train(run_cli, hash_index, index / "adapted", lexical_verifier), "inside the index")
    assert sorted(p.name for p in index.iterdir()) == before


def test_judge_train_refuses_an_out_holding_an_index_file_under_its_own_name(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli, lexical_verifier: Path
) -> None:
    """A file ``judge train`` writes in place (``save_pretrained``'s ``config.json``,
    ``model.safetensors``, the tokenizer's) that is a hard link to, or a copy of, an
    index's file is refused by its content, as every other output is: writing it would
    leave that index unreadable."""
    import os
    import shutil

    index = tmp_path / "idx"
    shutil.copytree(hash_index, index)
    before = {p.name: p.read_bytes() for p in index.iterdir() if p.is_file()}
    for name, target in (("config.json", "meta.json"), ("model.safetensors", "chunks.sqlite"),
                         ("vocab.txt", "vectors.faiss")):
        out = tmp_path / f"out-{name}"
        out.mkdir()
        (out / "checkpoint.tmp").write_bytes(b"\x80\x02half a checkpoint")  # a run begun
        os.link(index / target, out / name)
        for against in (index, hash_index):  # the index in use, or another one
            said = refused(train(run_cli, against, out, lexical_verifier), f"--out {out / name}",
                           "index")
            assert target in said, said
    assert {p.name: p.read_bytes() for p in index.iterdir() if p.is_file()} == before


def test_a_resume_with_other_pairs_or_a_garbage_checkpoint_names_it(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli, lexical_verifier: Path
) -> None:
    out = tmp_path / "adapted"
    first = train(run_cli, hash_index, out, lexical_verifier, "--minutes", "1e-9")
    assert first.exit_code == 0 and (out / "checkpoint.pt").exists(), first.stderr
    changed = run_cli("judge", "train", "--index", hash_index, "--out", out, "--base",
                      lexical_verifier, "--pairs", "6", "--held-out", "4", "--quiet")
    refused(changed, str(out / "checkpoint.pt"), "other training data")
    # Refused, it leaves the folder as it was: the card still says how to go on.
    assert "run the same command again" in (out / "MODEL_CARD.md").read_text()
    (out / "checkpoint.pt").write_bytes(b"not a checkpoint at all")
    refused(train(run_cli, hash_index, out, lexical_verifier), str(out / "checkpoint.pt"))
