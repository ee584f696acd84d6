"""benchmarks/languages/multilingual.py and multilingual_set.py: the metrics, and how the set
is made.

The figures in docs/measurements.md are only as good as these: a balanced accuracy
that swaps its classes, a boundary counted twice, a planted error that leaves the
sentence true, or a reference split that cuts after "Dr." would each pass unseen in
a table. The fixtures are real rows of the set (``tests/data/multilingual``, a
slice of ``benchmarks/data/multilingual``; attribution in tests/data/README.md).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
SLICE = Path(__file__).resolve().parent / "data" / "multilingual"


def load(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.syspath_prepend(str(BENCH / "languages"))  # multilingual_set, beside them
    spec = importlib.util.spec_from_file_location(name, BENCH / "languages" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load("multilingual", monkeypatch)


@pytest.fixture
def mset(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load("multilingual_set", monkeypatch)


# --------------------------------------------------------------------------- metrics


def test_balanced_accuracy_is_the_mean_of_the_two_rates(bench: ModuleType) -> None:
    # 3 of 4 true sentences pass, 1 of 2 planted errors is flagged: (0.75 + 0.5) / 2.
    assert bench.balanced_accuracy([True, True, True, False], [True, False]) == 0.625
    assert bench.balanced_accuracy([True], [False]) == 0.5
    assert bench.balanced_accuracy([], [True]) is None


def test_judged_counts_flags_on_true_sentences_and_catches_by_kind(bench: ModuleType) -> None:
    claims = [
        {"supported": True, "error": None},
        {"supported": True, "error": None},
        {"supported": False, "error": "number"},
        {"supported": False, "error": "number"},
        {"supported": False, "error": "negation"},
    ]
    passed = [True, False, False, True, True]  # one true flagged; one number caught
    out = bench.judged(claims, passed)
    assert out["flag_rate_true"] == 0.5
    assert out["caught"] == {"negation": 0.0, "number": 0.5}
    assert out["caught_n"] == {"negation": 1, "number": 2}
    assert out["balanced_accuracy"] == round((0.5 + 1 / 3) / 2, 4)
    assert (out["true"], out["planted"]) == (2, 3)


def test_boundary_scores(bench: ModuleType) -> None:
    reference = [[0, 10, 20], [0, 7]]
    predicted = [[0, 10], [0, 4, 7]]  # one boundary missed, one extra
    out = bench.boundary_scores(reference, predicted)
    assert (out["boundaries"], out["precision"], out["recall"]) == (3, 0.6667, 0.6667)
    assert out["f1"] == 0.6667 and out["exact"] == 0.0
    assert bench.boundary_scores([[0, 5]], [[0, 5]])["exact"] == 1.0
    # An answer that is one segment: no boundary found, none right.
    assert bench.boundary_scores([[0, 5, 9]], [[0]])["f1"] == 0.0


def test_recall_at_five(bench: ModuleType) -> None:
    ranked = [["a", "b"], ["c", "d", "e", "f", "g", "h"], []]
    assert bench.recall_at(ranked, ["b", "h", "x"]) == pytest.approx(1 / 3)
    assert bench.recall_at([], []) is None


def test_read_xnli_takes_the_same_rows_per_label_and_names_a_bad_line(
    bench: ModuleType, tmp_path: Path
) -> None:
    rows = [
        ("Er sagte kein Wort.", "Er schwieg.", "entailment"),
        ("Er sagte kein Wort.", "Er redete.", "contradiction"),
        ("Er sagte kein Wort.", "Er war müde.", "neutral"),
        ("Sie kam spät.", "Sie kam.", "entailment"),
        ("Sie kam spät.", "Sie kam früh.", "contradiction"),
    ]
    (tmp_path / "dev-de.tsv").write_text(
        "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8"
    )
    got = bench.read_xnli(tmp_path, "de", 1)
    assert got == [("Er sagte kein Wort.", "Er schwieg.", True),
                   ("Er sagte kein Wort.", "Er redete.", False)]
    # Parts alternate by premise: tune holds the first and third premise, held the second.
    assert [h for _, h, _ in bench.read_xnli(tmp_path, "de", 5, "held")] == ["Sie kam.",
                                                                           "Sie kam früh."]
    assert len(bench.read_xnli(tmp_path, "de", 5, "tune")) == 2
    (tmp_path / "dev-fr.tsv").write_text("a\tb\tentailment\nonly two\tfields\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"dev-fr.tsv:2: expected 3 tab-separated"):
        bench.read_xnli(tmp_path, "fr", 5)


def test_segmentation_is_scored_against_the_reference_split(bench: ModuleType) -> None:
    from ceg_cli.check.segment import segment_response

    de = [json.loads(line) for line in open(SLICE / "de.jsonl", encoding="utf-8")]
    responses = [r for r in de if r["type"] == "response"]
    out = bench.segmentation(responses, None)
    predicted = [[s.start for s in segment_response(r["text"])] for r in responses]
    assert out == bench.boundary_scores([r["starts"] for r in responses], predicted)
    assert out["boundaries"] == sum(len(r["starts"]) - 1 for r in responses) > 0


def test_the_pipeline_runs_on_a_slice_of_the_set(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every language of the slice through index, search and check, with the fast
    stand-in embedder; each figure lies in its range and the counts are the slice's."""
    import _standin

    _standin.install()
    args = bench.argparse.Namespace(
        set=SLICE, split="all", languages=["de", "zh"], judge="offline",
        model=_standin.NAME, cross_model=_standin.NAME, query="question+segment",
        retrieval="dense", language="off",
    )
    out = bench.end_to_end(args, tmp_path, {"check": False, "build": False, "segment": False})
    assert set(out) == {"de", "zh"}
    for result in out.values():
        assert result["judge"]["true"] == result["judge"]["planted"] == 2
        assert 0 <= result["judge"]["balanced_accuracy"] <= 1
        assert result["recall@5_mono"] == 1.0  # two passages: each is in the top 5
        assert "recall@5_cross" in result and "judge_cross" in result
    # Chinese has no spaces: English's Punkt leaves a two-sentence answer whole.
    assert out["zh"]["segmentation"]["recall"] == 0.0
    text = bench.render({"split": "all", "command": "x", "judge": "offline", "model": None,
                         "language": "off", "language_support": {}, "end_to_end": out})
    assert "| de |" in text and "| zh |" in text


def test_segmentation_only_splits_each_answer_in_its_language_and_builds_nothing(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--segmentation-only --language code``: the set's answers split as ceg splits them
    told their language (the final table's segmentation column), with no index."""
    written: dict[str, Any] = {}
    monkeypatch.setattr(bench, "write_results", lambda name, data: written.update(data) or name)
    monkeypatch.setattr(bench, "end_to_end", lambda *a: pytest.fail("built an index"))
    assert bench.main(["--segmentation-only", "--set", str(SLICE), "--split", "all",
                       "--languages", "de,zh", "--language", "code"]) == 0
    seg = written["segmentation"]
    assert set(seg) == {"de", "zh"}
    # Told it is Chinese, ceg splits at 。; English Punkt (language off) did not.
    assert seg["zh"]["recall"] == 1.0 and seg["zh"]["boundaries"] > 0
    assert "| zh | 1.00 |" in capsys.readouterr().out


def test_the_offline_judge_alone_is_told_each_sets_language(
    bench: ModuleType, tmp_path: Path
) -> None:
    """Against their own passages, the slice's true sentences pass in every language,
    and the judge is told the language (issue 39.6)."""
    rows = [("Er sagte kein Wort.", "Er schwieg.", "entailment"),
            ("Er sagte kein Wort.", "Er redete laut.", "contradiction")]
    for lang in bench.XNLI_LANGUAGES:
        (tmp_path / f"dev-{lang}.tsv").write_text(
            "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    args = bench.argparse.Namespace(set=SLICE, split="all", languages=["de", "zh", "hi"],
                                    xnli=tmp_path, xnli_pairs=5, xnli_part="all")
    out = bench.offline_alone(args, with_xnli=True)
    assert out["told_the_language"] is True
    for lang in ("de", "zh", "hi"):
        assert out["set"][lang]["flag_rate_true"] == 0.0
        assert out["set"][lang]["true"] == 2
    assert set(out["xnli"]) == set(bench.XNLI_LANGUAGES)
    assert out["xnli"]["de"]["true"] == out["xnli"]["de"]["planted"] == 1


# --------------------------------------------------------------------------- the set


def test_reference_sentences_leave_ambiguous_stops_inside(mset: ModuleType) -> None:
    text = "Am 3. Mai kam er an. Dr. Weber war da. Er blieb."
    got = mset.reference_sentences(text)
    assert [text[s.start : s.end] for s in got] == [
        "Am 3. Mai kam er an.", "Dr. Weber war da.", "Er blieb."
    ]
    # The stops after "3" and "Dr" are ambiguous: those sentences are never used.
    assert [s.ambiguous for s in got] == [True, True, False]
    zh = "亚里士多德出生于斯塔基拉。他是亚历山大大帝的老师。"
    assert [zh[s.start : s.end] for s in mset.reference_sentences(zh)] == [
        "亚里士多德出生于斯塔基拉。", "他是亚历山大大帝的老师。"
    ]
    hi = "यह एक शहर है। यह बड़ा है।"
    assert len(mset.reference_sentences(hi)) == 2
    # No space after a full stop: unclear, so not a boundary a reference may hold.
    ar = "المغلقة.كانت هناك عدة أنواع."
    assert [s.ambiguous for s in mset.reference_sentences(ar)] == [True]


def test_numbers_change_in_their_own_digits_to_a_value_the_passage_lacks(
    mset: ModuleType,
) -> None:
    hi = "आज से लगभग १५०,००० वर्ष पहले।"
    new, detail = mset.number_error(hi, hi, "k")
    assert new != hi and "१५०,०००" not in new
    assert all(not c.isdigit() or "०" <= c <= "९" for c in new)  # still Devanagari digits
    ar = "عدد السكان ٤٥ ألف نسمة."
    new, _ = mset.number_error(ar, ar, "k")
    assert new != ar and all(not c.isdigit() or "٠" <= c <= "٩" for c in new)
    # A year is a date, not a number: shifted within 1 to 9 years.
    de = "Die Firma wurde 1998 gegründet."
    assert mset.number_error(de, de, "k") is None
    new, detail = mset.date_error(de, de, "k")
    year = int(new.split()[3])
    assert 1 <= abs(year - 1998) <= 9 and str(year) not in de


def test_negations_per_language(mset: ModuleType) -> None:
    cases = {
        "de": ("Er ist der Lehrer.", "Er ist nicht der Lehrer."),
        "fr": ("Il est arrivé hier.", "Il n'est pas arrivé hier."),
        "zh": ("他是老师。", "他不是老师。"),
        "hi": ("वह शिक्षक था।", "वह शिक्षक नहीं था।"),
        "ar": ("كان الجو باردا في ذلك اليوم.", "لم يكن الجو باردا في ذلك اليوم."),
    }
    for lang, (before, after) in cases.items():
        got = mset.negation_error(" " + before if lang == "ar" else before, lang, "k")
        assert got is not None and got[0].strip() == after, lang
    # Already negated: left alone rather than doubled.
    assert mset.negation_error("Il ne sont pas là.", "fr", "k") is None
    assert mset.negation_error("وقد قتل ولكن لا توجد معلومات.", "ar", "k") is None
    # "是" inside 但是/就是 is not the verb.
    assert mset.negation_error("但是他就是这样。", "zh", "k") is None


def test_a_name_is_swapped_whole_and_for_one_the_passage_lacks(mset: ModuleType) -> None:
    sentence = "Sie studierte an der Universität Wien."
    span = (sentence.index("Wien"), sentence.index("Wien") + 4)
    pool = ["Wie", "Graz", "Paris", "Wien"]
    new, detail = mset.name_error(sentence, span, pool, sentence + " Paris", "k", "de")
    assert new == "Sie studierte an der Universität Graz." and detail == "Wien -> Graz"
    # Part of a word ("Bulgarian Airline" of "Airlines") is not swapped.
    s2 = "Balkan Bulgarian Airlines flog."
    assert mset.name_error(s2, (0, 24), ["Air France"], s2, "k", "en") is None
    # After an elided article, a name that starts with a vowel.
    fr = "L'Albanie fait partie de l'OTAN."
    new, _ = mset.name_error(fr, (2, 9), ["Rogue", "Autriche"], fr, "k", "fr")
    assert new == "L'Autriche fait partie de l'OTAN."


def test_names_by_capitals_or_by_the_english_twin(mset: ModuleType) -> None:
    assert mset.named_in_context("Er traf Wilhelm Launhardt.", 8, "Wilhelm Launhardt")
    # A single capitalised word opening a sentence may be any word.
    assert not mset.named_in_context("Football is popular.", 0, "Football")
    assert not mset.title_case("The Clinton, Bush, and Obama")
    # German capitalises nouns: only the English twin says "Plantagen" is no name.
    assert not mset.name_like("Plantagen", "de", True, False)
    assert mset.name_like("Wilhelm Launhardts", "de", True, True)
    assert mset.name_like("小笠原諸島", "ja", False, None)
    assert not mset.name_like("東アジアの広範囲", "ja", False, None)  # hiragana: a phrase


def test_the_slice_is_the_sets_own_rows(mset: ModuleType) -> None:
    """The test fixtures are copied from the committed set, not edited."""
    for lang in mset.LANGUAGES:
        full = {json.dumps(r, sort_keys=True) for r in mset.read_set(mset.DEFAULT_OUT, lang)}
        part = [json.loads(line) for line in open(SLICE / f"{lang}.jsonl", encoding="utf-8")]
        assert part and all(json.dumps(r, sort_keys=True) in full for r in part if
                            r["type"] != "passage" or r["id"].startswith(lang))


def test_the_set_is_sound(mset: ModuleType) -> None:
    """Every claim's passage is in its corpus and holds a true claim word for word;
    a planted claim differs from its twin and is never in the passage; the
    responses' starts are sentence starts in the passage; splits follow articles."""
    for lang in mset.LANGUAGES:
        rows = mset.read_set(mset.DEFAULT_OUT, lang)
        passages = {r["id"]: r for r in rows if r["type"] == "passage"}
        claims = {r["id"]: r for r in rows if r["type"] == "claim"}
        assert len(claims) >= 200, lang
        by_title: dict[str, set[str]] = {}
        for c in claims.values():
            text = passages[c["passage"]]["text"]
            if c["supported"]:
                assert c["text"] in text
            else:
                twin = claims[c["pair"]]
                assert c["text"] != twin["text"] and c["text"] not in text
                assert c["error"] in mset.ERROR_KINDS and c["split"] == twin["split"]
            title = passages[c["passage"]]["title"] or c["passage"]
            by_title.setdefault(title, set()).add(c["split"])
        assert all(len(s) == 1 for s in by_title.values()), lang
        for r in rows:
            if r["type"] == "response":
                assert r["text"] in passages[r["passage"]]["text"]
                assert r["starts"][0] == 0 and r["starts"] == sorted(r["starts"])
                assert len(r["starts"]) >= 2


def test_the_builder_is_deterministic_and_reads_the_sources_shape(
    mset: ModuleType, tmp_path: Path
) -> None:
    """A tiny MLQA-shaped source (real rows of the slice) gives the same lines twice,
    with true sentences from the passages and a planted twin for each."""
    de = [json.loads(line) for line in open(SLICE / "de.jsonl", encoding="utf-8")]
    en = [json.loads(line) for line in open(SLICE / "en.jsonl", encoding="utf-8")]
    root = tmp_path / "src"

    def mlqa(lang: str, rows: list[dict[str, Any]], qid: dict[str, str]) -> None:
        articles = []
        for p in (r for r in rows if r["type"] == "passage"):
            qas = [{"id": qid.get(p["id"], p["id"]), "question": "?", "answers": []}]
            articles.append({"title": p["title"], "paragraphs": [{"context": p["text"],
                                                                  "qas": qas}]})
        path = root / mset.SOURCES[lang][1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"data": articles}), encoding="utf-8")

    mlqa("de", de, {})
    mlqa("en", en, {})
    first = mset.build(root, 5, languages=("en", "de"))
    second = mset.build(root, 5, languages=("en", "de"))
    assert first == second
    claims = [r for r in first["de"] if r["type"] == "claim"]
    texts = {r["id"]: r["text"] for r in first["de"] if r["type"] == "passage"}
    assert claims and all(c["text"] in texts[c["passage"]] for c in claims if c["supported"])
    assert sum(1 for c in claims if not c["supported"]) == sum(1 for c in claims if c["supported"])


def test_speed_variants_name_the_model_its_batch_and_its_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """benchmarks/languages/multilingual_speed.py: ``MODEL[:batch=N][:threads=T]``; anything else
    is a usage error (exit 2), not a silently ignored part."""
    speed = load("multilingual_speed", monkeypatch)
    assert speed.parse_variant("multilingual-e5-small-q4:batch=256:threads=1") == {
        "name": "multilingual-e5-small-q4:batch=256:threads=1",
        "model": "multilingual-e5-small-q4", "batch": 256, "threads": 1}
    assert speed.parse_variant("all-MiniLM-L6-v2")["batch"] is None
    for bad in ("e5:batch=0", "e5:thread=2", "e5:batch=x", ":batch=8"):
        with pytest.raises(SystemExit) as exit_info:
            speed.parse_variant(bad)
        assert exit_info.value.code == 2
