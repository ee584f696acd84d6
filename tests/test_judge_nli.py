"""The nli:MODEL judge, on a tiny BERT built and saved by the tests.

No NLI weights can be downloaded here, so the model's outputs are made
deterministic instead: its classifier weights are zeroed and its bias picks the
class, and where a verdict must depend on the text, the model's forward is
wrapped so that rows holding a marker token get the class the test wants. The
windowing, batching, label mapping and aggregation are the real ones.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ceg_cli.errors import UsageError
from ceg_cli.judges import create_judge
from ceg_cli.judges.checkers.nli import (
    LabelMap,
    NliJudge,
    PassageScore,
    decide,
    label_map,
    model_window,
    window_spans,
)
from ceg_cli.types import (
    CONTRADICTED,
    FACTUAL,
    NO_CLAIM,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    SUPPORTED,
    Evidence,
    JudgeItem,
    Segment,
)

NLI_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}
WORDS = (
    "the a is was of in and to it by on at as paris france capital city berlin germany "
    "river seine flows through born lived wrote novel year many people visit museum "
    "zebra quokka"
).split()
LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789"
VOCAB = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "?"]
    + WORDS
    + list(LETTERS)
    + ["##" + c for c in LETTERS]
)
MAX_POSITIONS = 64
FILLER = "many people visit the museum in the city"  # 8 tokens, all in the vocabulary


def save_model(
    target: Path,
    bias: Sequence[float],
    id2label: dict[int, str] | None = None,
    model_max_length: int | None = None,
) -> Path:
    """A one-layer BERT whose classifier ignores its input and outputs ``bias``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    id2label = id2label or NLI_LABELS
    target.mkdir(parents=True)
    (target / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer.from_pretrained(str(target), local_files_only=True)
    if model_max_length is not None:
        tokenizer.model_max_length = model_max_length
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=MAX_POSITIONS,
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor(bias, dtype=torch.float32))
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    return target


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("nli")
    return {
        "entail": save_model(root / "entail", [10.0, 0.0, 0.0]),
        "neutral": save_model(root / "neutral", [0.0, 10.0, 0.0]),
        "contra": save_model(root / "contra", [0.0, 0.0, 10.0]),
    }


def load(path: Path | str, options: dict[str, Any] | None = None) -> NliJudge:
    """The judge as the CLI creates it, by name through the registry."""
    judge = create_judge(f"nli:{path}", options)
    assert isinstance(judge, NliJudge)
    return judge


def ev(text: str, n: int = 0) -> Evidence:
    return Evidence(passage_id=n, doc_id=f"d{n}", title=f"T{n}", text=text, similarity=0.8)


def item(segment: str, *passages: str) -> JudgeItem:
    return JudgeItem(
        Segment(0, 0, len(segment), segment),
        tuple(ev(p, n) for n, p in enumerate(passages)),
        question=None,
        response=segment,
    )


class Spy:
    """Wraps a model's forward: records each batch's input ids, optionally rewrites logits."""

    def __init__(
        self, judge: NliJudge, rewrite: Callable[[list[int]], list[float] | None] | None = None
    ) -> None:
        self.calls: list[list[list[int]]] = []
        self.texts: list[str] = []
        self._judge = judge
        self._real = judge.model.forward
        self._rewrite = rewrite
        judge.model.forward = self  # an instance attribute wins over the class's forward

    def __call__(self, **kwargs: Any) -> Any:
        import torch

        ids = kwargs["input_ids"]
        mask = kwargs["attention_mask"]
        rows = [[t for t, m in zip(r, mr) if m] for r, mr in zip(ids.tolist(), mask.tolist())]
        self.calls.append(rows)
        self.texts.extend(self._judge.tokenizer.decode(r) for r in rows)
        out = self._real(**kwargs)
        if self._rewrite is not None:
            for n, row in enumerate(rows):
                logits = self._rewrite(row)
                if logits is not None:
                    out.logits[n] = torch.tensor(logits)
        return out

    def restore(self) -> None:
        del self._judge.model.forward


@pytest.fixture
def spy_on() -> Any:
    spies: list[Spy] = []

    def make(
        judge: NliJudge, rewrite: Callable[[list[int]], list[float] | None] | None = None
    ) -> Spy:
        spies.append(Spy(judge, rewrite))
        return spies[-1]

    yield make
    for s in spies:
        s.restore()


# --- verdicts through a real model -------------------------------------------


def test_entailing_model_supports_and_cites_every_passage(models: dict[str, Path]) -> None:
    judge = load(models["entail"])
    one, two = judge.judge(
        [
            item("Paris is the capital of France.", "Paris is the capital city of France."),
            item("The Seine flows through Paris.", "The river Seine.", "Paris, France."),
        ]
    )
    assert (one.label, one.verdict, one.cited) == (FACTUAL, SUPPORTED, (0,))
    assert one.score > 0.99
    assert one.reason == "passage [1] entails (1.00)"
    assert (two.label, two.verdict, two.cited) == (FACTUAL, SUPPORTED, (0, 1))
    assert two.reason == "passages [1] (1.00), [2] (1.00) entail"


def test_contradicting_model_flags_the_segment(models: dict[str, Path]) -> None:
    judge = load(models["contra"])
    [v] = judge.judge([item("Berlin is the capital of France.", "x.", "Paris is the capital.")])
    assert (v.label, v.verdict, v.cited) == (NONFACTUAL, CONTRADICTED, ())
    assert v.score < 0.01
    assert v.reason == "passage [1] contradicts (1.00)"


def test_neutral_model_gives_not_enough_evidence(models: dict[str, Path]) -> None:
    judge = load(models["neutral"])
    [v] = judge.judge([item("Berlin is the capital of France.", "The zebra was born.")])
    assert (v.label, v.verdict, v.cited) == (NONFACTUAL, NOT_ENOUGH_EVIDENCE, ())
    assert v.reason == "no passage entails it (best 0.00)"


def test_claim_free_segments_and_missing_evidence_skip_the_model(
    models: dict[str, Path], spy_on: Any
) -> None:
    judge = load(models["entail"])
    spy = spy_on(judge)
    hello, empty = judge.judge([item("Hello!", "Paris is a city."), item("Paris is big.")])
    assert (hello.label, hello.verdict) == (FACTUAL, NO_CLAIM)
    assert (empty.label, empty.verdict, empty.score) == (NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.0)
    assert spy.calls == []


def test_name_and_method(models: dict[str, Path]) -> None:
    judge = load(models["entail"])
    assert judge.name == f"nli:{models['entail']}"
    assert "NLI cross-encoder" in judge.method and "max entailment over windows" in judge.method
    assert "\n" not in judge.method


def test_pairs_are_batched_across_items_and_sorted_by_length(
    models: dict[str, Path], spy_on: Any
) -> None:
    judge = load(models["entail"], {"batch_size": 2})
    spy = spy_on(judge)
    items = [
        item("Paris is the capital of France.", "a b c d e f g h i j.", "Paris."),
        item("The Seine flows through Paris.", "The river.", "a b c d e f g h."),
        item("Hello!", "Paris."),  # no claim: no pairs
    ]
    verdicts = judge.judge(items)
    assert [v.verdict for v in verdicts] == [SUPPORTED, SUPPORTED, NO_CLAIM]
    assert [len(c) for c in spy.calls] == [2, 2]
    lengths = [len(row) for call in spy.calls for row in call]
    assert lengths == sorted(lengths)
    # Premise first, hypothesis second, as in MNLI.
    assert any(t.startswith("[CLS] paris. [SEP] paris is the capital") for t in spy.texts)


def test_identical_pairs_run_once(models: dict[str, Path], spy_on: Any) -> None:
    judge = load(models["entail"])
    spy = spy_on(judge)
    same = item("Paris is the capital of France.", "Paris is a city.")
    assert len(judge.judge([same, same])) == 2
    assert sum(len(c) for c in spy.calls) == 1


# --- long evidence -------------------------------------------------------------


def long_passage(n_fillers: int, head: str = "", tail: str = "") -> str:
    return " ".join(
        ([head] if head else []) + [FILLER + "."] * n_fillers + ([tail] if tail else [])
    )


def test_long_evidence_is_split_into_overlapping_windows_that_fit(
    models: dict[str, Path], spy_on: Any
) -> None:
    judge = load(models["neutral"])
    assert judge.max_length == MAX_POSITIONS  # the tokenizer records no limit of its own
    spy = spy_on(judge)
    passage = " ".join(f"{FILLER} {n}." for n in range(12))  # about 120 tokens
    segment = "Paris is the capital of France."
    windows = judge.windows(passage, len(judge._token_ids(segment)))
    assert len(windows) >= 3
    # Every window is a piece of the passage; together they cover it, with overlap.
    positions = [passage.index(w) for w in windows]
    assert positions[0] == 0 and positions == sorted(positions)
    assert positions[-1] + len(windows[-1]) == len(passage)
    for (p, w), q in zip(zip(positions, windows), positions[1:]):
        assert q < p + len(w)
    judge.judge([item(segment, passage)])
    rows = [row for call in spy.calls for row in call]
    assert len(rows) == len(windows)
    assert max(len(r) for r in rows) <= MAX_POSITIONS
    assert all(t.endswith("[SEP] paris is the capital of france. [SEP]") for t in spy.texts)


def test_a_contradiction_in_the_last_window_is_found(models: dict[str, Path], spy_on: Any) -> None:
    judge = load(models["neutral"])
    quokka = VOCAB.index("quokka")
    spy = spy_on(judge, lambda row: [0.0, 0.0, 10.0] if quokka in row else None)
    segment = "The zebra wrote a novel."
    passage = long_passage(20, tail="The quokka wrote a novel.")
    windows = judge.windows(passage, len(judge._token_ids(segment)))
    assert len(windows) >= 3 and [w for w in windows if "quokka" in w] == [windows[-1]]
    [v] = judge.judge([item(segment, "Paris.", passage)])
    assert (v.verdict, v.label) == (CONTRADICTED, NONFACTUAL)
    assert v.reason == "passage [2] contradicts (1.00)"
    assert len(spy.texts) == 1 + len(windows)


def test_entailment_in_one_window_supports(models: dict[str, Path], spy_on: Any) -> None:
    judge = load(models["neutral"])
    zebra = VOCAB.index("zebra")
    spy_on(judge, lambda row: [10.0, 0.0, 0.0] if row.count(zebra) == 2 else None)
    passage = long_passage(10, head="The zebra wrote a novel.")
    [v] = judge.judge([item("The zebra wrote a novel.", "Paris.", passage)])
    assert (v.verdict, v.cited, v.reason) == (SUPPORTED, (1,), "passage [2] entails (1.00)")


def test_a_long_segment_still_fits_the_window(models: dict[str, Path], spy_on: Any) -> None:
    judge = load(models["entail"])
    spy = spy_on(judge)
    segment = long_passage(12)  # longer than the whole window
    [v] = judge.judge([item(segment, long_passage(12))])
    assert v.verdict == SUPPORTED
    rows = [row for call in spy.calls for row in call]
    assert len(rows) > 1 and max(len(r) for r in rows) == MAX_POSITIONS


def test_word_counting_fallback_for_tokenizers_without_offsets(models: dict[str, Path]) -> None:
    judge = load(models["neutral"])
    fast = judge.tokenizer

    class NoOffsets:
        is_fast = False

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return fast(*args, **kwargs)

    judge.tokenizer = NoOffsets()
    try:
        passage = long_passage(12)
        windows = judge.windows(passage, 8)
    finally:
        judge.tokenizer = fast
    budget = judge.max_length - judge.special_tokens - 8
    assert len(windows) > 2
    assert all(len(judge._token_ids(w)) <= budget for w in windows)
    assert windows[0].startswith(FILLER) and passage.endswith(windows[-1])


def test_tokenizer_limit_below_the_positions_wins(tmp_path: Path) -> None:
    path = save_model(tmp_path / "m", [0.0, 10.0, 0.0], model_max_length=32)
    judge = load(path)
    assert judge.max_length == 32


# --- label mapping, loading errors, options ----------------------------------


def test_label_names_are_matched_case_insensitively() -> None:
    labels = label_map({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"})
    assert labels == LabelMap(entailment=2, contradiction=0, neutral=1)
    assert label_map({"0": "entailment", "1": "not_entailment"}) == LabelMap(0, None, 1)


@pytest.mark.parametrize(
    "id2label",
    [
        {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"},
        {0: "positive", 1: "negative"},
        {0: "entailment", 1: "entailment", 2: "contradiction"},
        {0: "entailment", 1: "LABEL_1"},
    ],
)
def test_configs_without_nli_labels_are_refused(id2label: dict[int, str]) -> None:
    with pytest.raises(UsageError, match="no NLI label names") as info:
        label_map(id2label, "m")
    assert "id2label" in str(info.value) and "config.json" in str(info.value)
    assert "\n" not in str(info.value)


def test_unnamed_labels_are_a_usage_error_at_creation(tmp_path: Path) -> None:
    path = save_model(tmp_path / "m", [0.0, 0.0, 10.0], {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    with pytest.raises(UsageError, match=r"LABEL_0, LABEL_1, LABEL_2"):
        create_judge(f"nli:{path}")


def test_a_model_without_a_trained_head_is_refused(tmp_path: Path) -> None:
    from transformers import BertModel

    path = save_model(tmp_path / "m", [10.0, 0.0, 0.0])
    BertModel.from_pretrained(str(path)).save_pretrained(str(path))  # drops the classifier
    with pytest.raises(UsageError, match=r"no trained classification head .*classifier\.bias"):
        create_judge(f"nli:{path}")


def test_two_label_models_never_contradict(tmp_path: Path) -> None:
    path = save_model(tmp_path / "m", [0.0, 10.0], {0: "Entailment", 1: "Not_Entailment"})
    judge = load(path)
    [v] = judge.judge([item("Berlin is the capital of France.", "Paris is the capital.")])
    assert (v.verdict, v.label) == (NOT_ENOUGH_EVIDENCE, NONFACTUAL)


def test_a_model_that_is_not_there_is_a_usage_error(tmp_path: Path) -> None:
    # The user names the model: one not on disk is theirs to fix (exit 2, as verifier:).
    for name in (str(tmp_path / "missing"), "no-such-org/no-such-nli-model"):
        with pytest.raises(UsageError, match="cannot load NLI model") as info:
            create_judge(f"nli:{name}")
        assert "local" in str(info.value) and "\n" not in str(info.value)


def test_a_directory_without_a_model_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"nothing": 1}), encoding="utf-8")
    with pytest.raises(UsageError, match="cannot load NLI model"):
        create_judge(f"nli:{tmp_path}")


def test_a_missing_nli_directory_exits_2_as_verifier_does(
    tmp_path: Path, hash_index: Path, hash_model: None, run_cli: Any
) -> None:
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"response": "Aristotle was a philosopher."}) + "\n")
    missing = tmp_path / "missing_dir"
    for judge in (f"nli:{missing}", f"verifier:{missing}"):
        r = run_cli("check", responses, "--index", hash_index, "--judge", judge, "--quiet")
        assert r.exit_code == 2, r.stderr
        assert str(missing) in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_file_is_not_a_model(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"x")
    with pytest.raises(UsageError, match="must be a directory"):
        create_judge(f"nli:{path}")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"threshold": 1.5}, "threshold must be in"),
        ({"threshold": "high"}, "threshold must be a number"),
        ({"batch_size": 0}, "batch_size must be at least 1"),
    ],
)
def test_bad_options_are_usage_errors(
    models: dict[str, Path], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        create_judge(f"nli:{models['entail']}", options)


def test_threshold_option_is_used(models: dict[str, Path]) -> None:
    # The entailing model gives 1 / (1 + 2 e^-10) = 0.99991 on every pair.
    segment = item("Paris is the capital of France.", "Paris.")
    path = f"nli:{models['entail']}"
    assert create_judge(path, {"threshold": 0.9999}).judge([segment])[0].verdict == SUPPORTED
    strict = create_judge(path, {"threshold": 0.99995}).judge([segment])[0]
    assert strict.verdict == NOT_ENOUGH_EVIDENCE


def test_importing_the_judge_loads_no_model_library() -> None:
    code = (
        "import sys, ceg_cli.judges.checkers.nli; "
        "print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- pure functions -----------------------------------------------------------


def test_decide_supports_only_where_entailment_beats_contradiction() -> None:
    v = decide([PassageScore(0.7, 0.8), PassageScore(0.6, 0.1), PassageScore(0.2, 0.0)], 0.5)
    assert (v.verdict, v.cited, v.score) == (SUPPORTED, (1,), 0.7)
    assert v.reason == "passage [2] entails (0.60)"


def test_decide_contradiction_and_neither() -> None:
    v = decide([PassageScore(0.3, 0.2), PassageScore(0.4, 0.87)], 0.5)
    assert (v.label, v.verdict, v.cited, v.score) == (NONFACTUAL, CONTRADICTED, (), 0.4)
    assert v.reason == "passage [2] contradicts (0.87)"
    v = decide([PassageScore(0.31, 0.2), PassageScore(0.1, 0.49)], 0.5)
    assert (v.verdict, v.reason) == (NOT_ENOUGH_EVIDENCE, "no passage entails it (best 0.31)")
    assert decide([PassageScore(0.31, 0.2)], 0.3).verdict == SUPPORTED
    assert decide([], 0.5).verdict == NOT_ENOUGH_EVIDENCE


def test_window_spans_cover_everything_within_budget() -> None:
    tokens = [1] * 50
    starts = [i % 5 == 0 for i in range(50)]
    spans = window_spans(tokens, starts, 16, 4)
    assert spans[0][0] == 0 and spans[-1][1] == 50
    for (a, b), (c, d) in zip(spans, spans[1:]):
        assert a < c < b <= d  # progress, and overlap
    assert all(b - a <= 16 for a, b in spans)
    assert all(starts[a] for a, _ in spans)  # windows start at word starts


def test_window_spans_edge_cases() -> None:
    assert window_spans([], [], 10, 2) == []
    assert window_spans([3, 3], [True, True], 10, 2) == [(0, 2)]
    # A piece over the budget is a window of its own; nothing loops forever.
    assert window_spans([1, 20, 1], [True, True, True], 5, 2) == [(0, 1), (1, 2), (2, 3)]
    # No word start anywhere: plain token windows.
    assert window_spans([1] * 10, [False] * 10, 4, 1) == [(0, 4), (3, 7), (6, 10)]


def test_model_window_counts_offset_positions() -> None:
    tokenizer = SimpleNamespace(model_max_length=int(1e30))
    roberta = SimpleNamespace(model_type="roberta", max_position_embeddings=514, pad_token_id=1)
    assert model_window(tokenizer, roberta) == 512
    bert = SimpleNamespace(model_type="bert", max_position_embeddings=512, pad_token_id=0)
    assert model_window(SimpleNamespace(model_max_length=128), bert) == 128
    assert model_window(SimpleNamespace(), SimpleNamespace()) == 512
