"""The judges' cuts: the protocol's per setting, shipped; --judge-threshold; shown; re-fitted.

A segment's verdict follows ``score >= cut`` for the cut of the setting it is
checked in (``index``: an index's passages; ``contexts``: the record's own).
The shipped cuts live in ``ceg_cli/models/{offline,verifier}/thresholds.json``
and are read from there here too, never written twice.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

from ceg_cli import judges
from ceg_cli.errors import UsageError
from ceg_cli.judges import create_judge
from ceg_cli.judges.checkers.verifier import SHIPPED as VERIFIER_DIR
from ceg_cli.judges.cuts import OVERRIDE, Cut, Cuts, check_threshold, load_cuts, setting_of
from ceg_cli.judges.offline.offline import RULE_CUT, OfflineJudge
from ceg_cli.judges.offline.offline import SHIPPED as OFFLINE_DIR
from ceg_cli.types import FACTUAL, NONFACTUAL, Evidence, JudgeItem, Segment

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"

#: Every name and number found, 3 of its 5 content words (Aristotle, Greek,
#: philosopher; not 'loved', 'cats'): the offline judge scores it 0.5 + 0.5 x 0.6.
SEGMENT = "Aristotle was a Greek philosopher who loved cats."
EVIDENCE = "Aristotle was a Greek philosopher born in Stagira."
SCORE = 0.8


def shipped(directory: Path) -> dict[str, float]:
    """The cut per setting, as the judge's thresholds.json gives it."""
    data = json.loads((directory / "thresholds.json").read_text(encoding="utf-8"))
    return {k: float(v) for k, v in data["thresholds"].items()}


def one_passage_index(tmp_path: Path) -> Path:
    """An index (fake vectors: ``hash_model``) whose one passage is ``EVIDENCE``."""
    from conftest import HashEmbedder

    from ceg_cli.index.build.builder import BuildOptions, build_index

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text(json.dumps({"id": "d1", "title": "Stagira", "text": EVIDENCE}) + "\n",
                      encoding="utf-8")
    target = tmp_path / "index"
    build_index([corpus], target, BuildOptions(), embedder=HashEmbedder())
    return target


def item(setting: str, text: str = SEGMENT) -> JudgeItem:
    ev = (Evidence(0, "d1", "Stagira", EVIDENCE, 0.7),)
    return JudgeItem(Segment(0, 0, len(text), text), ev, None, text, setting=setting)


# -- the shipped cut reaches the verdicts, in both settings ----------------------------


def test_a_segment_between_the_old_cut_and_the_shipped_one_is_flagged_in_both_settings(
    tmp_path: Path, hash_model: None
) -> None:
    from ceg_cli import Checker

    cuts = shipped(OFFLINE_DIR)
    assert RULE_CUT <= SCORE < min(cuts.values()), "the segment must fall between the cuts"
    index = one_passage_index(tmp_path)
    for setting in ("index", "contexts"):
        contexts = [EVIDENCE] if setting == "contexts" else None
        evidence = "contexts" if setting == "contexts" else "index"
        with Checker(index if setting == "index" else None, evidence=evidence) as now, \
                Checker(index if setting == "index" else None, evidence=evidence,
                        judge_threshold=RULE_CUT) as before:
            after = now.check(SEGMENT, contexts=contexts)
            old = before.check(SEGMENT, contexts=contexts)
        (seg,), (old_seg,) = after.segments, old.segments
        assert seg.score == old_seg.score == SCORE
        assert (old.label, old_seg.verdict) == (FACTUAL, "supported"), setting
        assert old_seg.citations and old_seg.reason.endswith("found in the cited passage")
        assert (after.label, seg.verdict) == (NONFACTUAL, "not_enough_evidence"), setting
        assert seg.citations == ()
        # Every name found: the reason says only words are missing, and the cut.
        assert seg.reason == (
            "every number and name found, but 'loved' and 'cats' not in the evidence (only 3 "
            f"of 5 content words found); score 0.800, under the cut {cuts[setting]:g}"
        )
        block = after.to_dict()["judge"]
        assert (block["threshold"], block["threshold_source"]) == (
            cuts[setting], f"protocol, {setting} setting")
        assert old.to_dict()["judge"]["threshold_source"] == OVERRIDE
        assert after.to_dict()["annotated"].endswith("[NONFACTUAL]")


def test_each_setting_takes_its_own_cut(tmp_path: Path, hash_model: None,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from ceg_cli import Checker

    split = Cuts(Cut(0.9, "index cut"), Cut(0.7, "contexts cut"))
    judge = OfflineJudge(split)
    index_v, contexts_v = judge.judge([item("index"), item("contexts")])
    assert (index_v.label, contexts_v.label) == (NONFACTUAL, FACTUAL)
    # A record's evidence_source decides its setting; "both" is the index setting.
    assert [setting_of(s) for s in ("index", "both", "contexts", "none")] == [
        "index", "index", "contexts", "contexts"]
    monkeypatch.setattr(judges, "_REGISTRY", dict(judges._REGISTRY))
    judges.register("split", lambda arg, options: OfflineJudge(split))
    index = one_passage_index(tmp_path)
    got = {}
    for evidence, contexts in (("index", None), ("both", [EVIDENCE]), ("contexts", [EVIDENCE]),
                               ("auto", [EVIDENCE]), ("auto", None), ("contexts", [])):
        with Checker(index, judge="split", evidence=evidence) as checker:
            record = checker.check(SEGMENT, contexts=contexts).to_dict()
        got[(evidence, contexts is None, bool(contexts))] = (
            record["evidence_source"], record["label"], record["judge"]["threshold_source"])
    assert got == {
        ("index", True, False): ("index", NONFACTUAL, "index cut"),
        ("both", False, True): ("both", NONFACTUAL, "index cut"),
        ("contexts", False, True): ("contexts", FACTUAL, "contexts cut"),
        ("auto", False, True): ("contexts", FACTUAL, "contexts cut"),
        ("auto", True, False): ("index", NONFACTUAL, "index cut"),
        # An empty list of contexts: the contexts setting, judged on no evidence.
        ("contexts", False, False): ("none", NONFACTUAL, "contexts cut"),
    }


def test_no_claim_and_no_evidence_are_decided_before_any_cut() -> None:
    for cut in (0.0, 1.0):
        judge = OfflineJudge(Cuts.same(cut, "test"))
        no_claim, no_evidence = judge.judge([
            item("index", "I hope this helps!"),
            JudgeItem(Segment(0, 0, len(SEGMENT), SEGMENT), (), None, SEGMENT,
                      setting="contexts"),
        ])
        assert (no_claim.label, no_claim.verdict, no_claim.score) == (FACTUAL, "no_claim", 1.0)
        assert (no_evidence.label, no_evidence.score) == (NONFACTUAL, 0.0)


def test_a_cut_under_the_rules_own_supports_what_the_rule_would_not_and_says_so() -> None:
    text = "Aristotle was a Greek philosopher born in 1812 in Stagira."  # '1812' missing
    (low,) = OfflineJudge(Cuts.same(0.3, OVERRIDE)).judge([item("index", text)])
    (rule,) = OfflineJudge(Cuts.same(RULE_CUT, OVERRIDE)).judge([item("index", text)])
    assert rule.label == NONFACTUAL and 0.3 <= rule.score < RULE_CUT
    assert low.label == FACTUAL and low.score == rule.score and low.cited == (0,)
    assert low.reason.startswith(f"score {low.score:.3f} reaches the cut 0.3, though '1812'")


# -- the verifier's cut is P(supported)'s, per setting --------------------------------


@pytest.fixture(scope="module")
def verifier_053(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verifier whose P(supported) is 0.53 wherever every specific is found."""
    from test_judge_verifier import combiner_on, tiny_model, write_combiner

    d = tiny_model(tmp_path_factory.mktemp("v") / "v053", bias=(0.0, 0.0))
    # sigmoid(10 x 1 - 9.88) = 0.53
    write_combiner(d, combiner_on("specifics_found", 10.0, intercept=-9.88))
    return d


def test_the_verifier_takes_its_thresholds_file_else_its_combiners_cut(
    verifier_053: Path, tmp_path: Path
) -> None:
    import shutil

    own = create_judge(f"verifier:{verifier_053}")
    assert own.cuts == Cuts.same(0.5, f"combiner.json of {verifier_053.name}")
    (v,) = own.judge([item("index")])
    assert (v.label, v.score) == (FACTUAL, 0.53)
    # The shipped file beside it: the protocol's cuts (0.5939 and 0.5569 today).
    copy = tmp_path / "v"
    shutil.copytree(verifier_053, copy)
    shutil.copy(VERIFIER_DIR / "thresholds.json", copy / "thresholds.json")
    protocol = create_judge(f"verifier:{copy}")
    cuts = shipped(VERIFIER_DIR)
    assert protocol.cuts == Cuts(Cut(cuts["index"], "protocol, index setting"),
                                 Cut(cuts["contexts"], "protocol, contexts setting"))
    assert min(cuts.values()) > 0.53, "the fixture's score must fall under the shipped cuts"
    for setting in ("index", "contexts"):
        (v,) = protocol.judge([item(setting)])
        assert (v.label, v.score, v.cited) == (NONFACTUAL, 0.53, ())
        assert v.reason.endswith(f"P(supported) 0.530, under the cut {cuts[setting]:g}")
    # Cuts that differ by setting decide differently on the same item.
    (copy / "thresholds.json").write_text(json.dumps(
        {"format": 1, "source": "mine", "thresholds": {"index": 0.52, "contexts": 0.6}}))
    mine = create_judge(f"verifier:{copy}")
    assert [v.label for v in mine.judge([item("index"), item("contexts")])] == [
        FACTUAL, NONFACTUAL]
    over = create_judge(f"verifier:{copy}", {"judge_threshold": 0.4})
    assert over.cuts == Cuts.same(0.4, OVERRIDE)


def test_the_shipped_verifier_reads_its_thresholds_file() -> None:
    cuts = shipped(VERIFIER_DIR)
    judge = create_judge("verifier")  # the combiner only; the model loads when it judges
    assert judge.cuts.index == Cut(cuts["index"], "protocol, index setting")
    assert judge.cuts.contexts == Cut(cuts["contexts"], "protocol, contexts setting")
    offline = create_judge("offline")
    assert offline.cuts == load_cuts(OFFLINE_DIR)


@pytest.mark.parametrize("raw, message", [
    ("[]", "not a thresholds file"),
    ('{"format": 2, "source": "x", "thresholds": {"index": 0.5, "contexts": 0.5}}', "format 2"),
    ('{"format": 1, "thresholds": {"index": 0.5, "contexts": 0.5}}', "field 'source'"),
    ('{"format": 1, "source": "x", "thresholds": {"index": 0.5}}', "field 'thresholds'"),
    ('{"format": 1, "source": "x", "thresholds": {"index": 1.5, "contexts": 0.5}}',
     "field 'thresholds.index' 1.5"),
    ('{"format": 1, "source": "x", "thresholds": {"index": NaN, "contexts": 0.5}}',
     "field 'thresholds.index' nan"),
    ('{"format": 1, "source": "x", "thresholds": {"index": "0.5", "contexts": 0.5}}',
     "field 'thresholds.index' '0.5'"),
    ("{", "cannot read"),
])
def test_a_bad_thresholds_file_is_refused_in_one_line(tmp_path: Path, raw: str,
                                                      message: str) -> None:
    (tmp_path / "thresholds.json").write_text(raw, encoding="utf-8")
    with pytest.raises(UsageError, match=None) as caught:
        load_cuts(tmp_path)
    text = str(caught.value)
    assert text.startswith(str(tmp_path / "thresholds.json")) and message in text, text
    assert "\n" not in text


# -- --judge-threshold: every judge that cuts a score takes it; bad values refused -----


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan", "inf", "-inf"])
def test_a_judge_threshold_outside_0_to_1_is_refused(run_cli: Any, tmp_path: Path,
                                                     value: str) -> None:
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"response": SEGMENT, "contexts": [EVIDENCE]}) + "\n")
    out = tmp_path / "out.jsonl"
    for command in (["check", responses, "--out", out], ["eval", tmp_path / "missing.jsonl"]):
        result = run_cli(*command, "--judge-threshold", value)
        assert result.exit_code == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: --judge-threshold {value}"), lines
        assert "between 0 and 1" in lines[0] or "from 0 to 1" in lines[0], lines
    assert not out.exists()


def test_checker_and_create_judge_refuse_bad_cuts() -> None:
    from ceg_cli import Checker

    for bad in (float("nan"), 1.01, -1, "0.8", True):
        with pytest.raises(UsageError, match="--judge-threshold"):
            Checker(judge_threshold=bad)
        with pytest.raises(UsageError, match="--judge-threshold"):
            create_judge("offline", {"judge_threshold": bad})
    assert check_threshold(0) == 0.0 and check_threshold(1) == 1.0
    assert Checker(judge_threshold=1).check(SEGMENT, contexts=[EVIDENCE]).label == NONFACTUAL


def test_a_judge_that_gives_labels_refuses_a_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    llm = {"base_url": "http://127.0.0.1:9/v1", "preflight": False, "cache": False}
    with pytest.raises(UsageError, match="prompt 'ceg' answers Factual or Nonfactual"):
        create_judge("llm:some-model", {**llm, "judge_threshold": 0.7})
    assert getattr(create_judge("llm:some-model", llm), "cuts", None) is None
    # MiniCheck's prompt scores P(yes): the cut moves.
    mc = create_judge("llm:some-model", {**llm, "prompt": "minicheck", "judge_threshold": 0.7})
    assert mc.cuts == Cuts.same(0.7, OVERRIDE) and mc.threshold == 0.7
    assert "supported above 0.7" in mc.method
    assert create_judge("llm:m", {**llm, "prompt": "minicheck"}).cuts == Cuts.same(
        0.5, "MiniCheck's authors")

    # Any judge without cuts (a plugin's) is refused alike, and closed.
    closed = []

    class Labeller:
        name, method = "labeller", "labels"

        def judge(self, items: Any) -> list[Any]:
            return []

        def close(self) -> None:
            closed.append(True)

    monkeypatch.setattr(judges, "_REGISTRY", dict(judges._REGISTRY))
    judges.register("labeller", lambda arg, options: Labeller())
    with pytest.raises(UsageError, match="labeller decides without a cut on a score"):
        create_judge("labeller", {"judge_threshold": 0.5})
    assert closed == [True]


def test_the_rewriter_is_not_given_the_judges_cut(tmp_path: Path) -> None:
    from ceg_cli.check.run import CheckRun, RunSettings

    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"response": SEGMENT, "contexts": [EVIDENCE]}) + "\n")
    settings = RunSettings.resolve(
        responses=str(responses), index=tmp_path / "none", judge_threshold=0.6,
        regenerate=True, rewriter="llm:writer",
        judge_options={"base_url": "http://127.0.0.1:9/v1", "preflight": False,
                       "cache": False})
    run = CheckRun(settings)
    try:
        assert run.cuts == Cuts.same(0.6, OVERRIDE)
        assert run.rewriter is not None  # the llm: rewriter took no --judge-threshold
    finally:
        run.close()


def test_a_checker_model_decides_at_the_cut_given(tmp_path: Path) -> None:
    from tiny_checkers import build

    folder = build("roberta", tmp_path / "mc")
    authors = create_judge(f"minicheck:{folder}")
    assert authors.cuts == Cuts.same(0.5, "MiniCheck's authors")
    (v,) = authors.judge([item("index")])
    below = max(0.0, v.score - 0.01)
    above = min(1.0, v.score + 0.01)
    for cut, label in ((below, FACTUAL), (above, NONFACTUAL)):
        judge = create_judge(f"minicheck:{folder}", {"judge_threshold": cut})
        assert judge.cuts == Cuts.same(cut, OVERRIDE) and f"above {cut:g}" in judge.method
        (got,) = judge.judge([item("contexts")])
        assert (got.label, got.score) == (label, v.score)


# -- shown: the run's first line, its summary, eval's table and JSON ------------------


def test_the_run_says_which_cut_it_uses_and_where_it_came_from(run_cli: Any,
                                                               tmp_path: Path) -> None:
    cuts = shipped(OFFLINE_DIR)
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"response": SEGMENT, "contexts": [EVIDENCE]}) + "\n")
    result = run_cli("check", responses, "--index", tmp_path / "none", "--evidence",
                     "contexts")
    assert result.exit_code == 0, result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(
        f"judge offline, threshold {cuts['contexts']:g} (protocol, contexts setting); ")
    assert first.endswith(" other languages and 7 scripts their own (protocol)"), first
    assert "threshold" in result.stderr.split("ceg check", 1)[1]  # the summary's row
    assert json.loads(result.stdout)["label"] == NONFACTUAL
    again = run_cli("check", responses, "--index", tmp_path / "none", "--judge-threshold", "0.5")
    assert again.stderr.splitlines()[0] == "judge offline, threshold 0.5 (--judge-threshold)"
    assert json.loads(again.stdout)["label"] == FACTUAL
    # --evidence auto may judge in either setting: both cuts are named (once when equal).
    auto = run_cli("check", responses, "--index", tmp_path / "none", "--quiet")
    assert "judge offline" not in auto.stderr  # --quiet: no first line
    table = auto.stderr.split("ceg check", 1)[1]
    assert f"{cuts['contexts']:g} (protocol, contexts setting)" in table
    assert "(protocol, index setting)" not in table  # no record was judged on an index


def test_a_cut_the_project_file_sets_says_so(
    run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ceg_cli import Checker

    # No --index: the default ./index must not be there (the repository's holds a README).
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CEG_INDEX", raising=False)
    config = tmp_path / "ceg.toml"
    config.write_text("judge_threshold = 0.5\n", encoding="utf-8")
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"response": SEGMENT, "contexts": [EVIDENCE]}) + "\n")
    from_file = run_cli("check", responses, "--config", config)
    assert from_file.exit_code == 0, from_file.stderr
    source = f"judge_threshold in {config}"
    assert from_file.stderr.splitlines()[0] == f"judge offline, threshold 0.5 ({source})"
    record = json.loads(from_file.stdout)
    assert (record["label"], record["judge"]["threshold_source"]) == (FACTUAL, source)
    # The flag wins over the file, and says so.
    flag = run_cli("check", responses, "--config", config, "--judge-threshold", "0.9")
    assert flag.stderr.splitlines()[0] == "judge offline, threshold 0.9 (--judge-threshold)"
    with Checker(config=config) as checker:
        block = checker.check(SEGMENT, contexts=[EVIDENCE]).to_dict()["judge"]
    assert (block["threshold"], block["threshold_source"]) == (0.5, source)
    with Checker(config=config, judge_threshold=0.9) as checker:
        block = checker.check(SEGMENT, contexts=[EVIDENCE]).to_dict()["judge"]
    assert (block["threshold"], block["threshold_source"]) == (0.9, OVERRIDE)
    config.write_text('judge_threshold = "0.8"\n', encoding="utf-8")
    bad = run_cli("check", responses, "--config", config)
    assert bad.exit_code == 2 and "judge_threshold" in bad.stderr, bad.stderr


def test_eval_reports_the_cut_of_each_setting_it_judged_in(run_cli: Any, tmp_path: Path) -> None:
    cuts = shipped(OFFLINE_DIR)
    data = tmp_path / "labelled.jsonl"
    rows = [{"id": "a", "response": SEGMENT, "label": False, "contexts": [EVIDENCE]},
            {"id": "b", "response": "Aristotle was a Greek philosopher.", "label": True,
             "contexts": [EVIDENCE]}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    got = {}
    for flags in ((), ("--judge-threshold", "0.5")):
        metrics = tmp_path / f"m{len(flags)}.json"
        result = run_cli("eval", data, "--evidence", "contexts", "--json", metrics, *flags)
        assert result.exit_code == 0, result.stderr
        got[flags] = (result.stdout, json.loads(metrics.read_text())["run"]["judge_threshold"],
                      json.loads(metrics.read_text())["responses"]["balanced_accuracy"])
    stdout, run, accuracy = got[()]
    assert f"judge offline at judge threshold {cuts['contexts']:g} (protocol, contexts " \
           "setting)" in " ".join(stdout.split())
    assert run == {"contexts": {"value": cuts["contexts"], "source": "protocol, contexts setting"}}
    assert accuracy == 1.0
    stdout, run, accuracy = got[("--judge-threshold", "0.5")]
    assert "at judge threshold 0.5 (--judge-threshold)" in " ".join(stdout.split())
    assert run == {"contexts": {"value": 0.5, "source": OVERRIDE}}
    assert accuracy == 0.5  # at the old cut the wrong answer passes


# -- the shipped cuts are the protocol's fit of the committed scores ------------------


def _contexts_eval(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.syspath_prepend(str(BENCH / "judges"))  # transfer.py, beside it
    spec = importlib.util.spec_from_file_location("contexts_eval",
                                                  BENCH / "judges" / "contexts_eval.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_cuts_are_the_protocols_fit_of_the_committed_scores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Re-runs ``fit_threshold`` (benchmarks/judges/transfer.py) on the per-item scores
    contexts_eval.py committed. A change to a judge's scores means running
    ``benchmarks/judges/contexts_eval.py --per-source 100 --seed 1 --ship`` again."""
    bench = _contexts_eval(monkeypatch)
    scores = json.loads((BENCH / "results" / "contexts_eval_scores.json").read_text())
    assert (scores["per_source"], scores["seed"]) == (100, 1)
    for name, folder in (("offline", OFFLINE_DIR), ("verifier", VERIFIER_DIR)):
        ship = shipped(folder)
        for setting in ("index", "contexts"):
            record = scores["judges"][name][setting]
            # Fitted on the five training domains, every set of each.
            assert {s["domain"] for s in record.values()} == {
                "encyclopedic", "summaries", "llm-answers", "dialogue", "science"}
            assert not {"felm-dev", "halueval-dev"} & set(record), "test sets are never fitted"
            assert all(len(s["gold"]) == len(s["score"]) > 0 for s in record.values())
            fitted = bench.fit_scores(record)
            assert math.isclose(ship[setting], fitted), (name, setting, ship[setting], fitted)
    # The verifier whose scores these are is the one that ships.
    assert scores["verifier_model"] == bench.verifier_digest(), (
        "the shipped verifier changed since its scores were committed: run "
        "benchmarks/judges/contexts_eval.py --per-source 100 --seed 1 --ship")


def test_the_fit_is_the_protocols_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """``fit_scores`` is ``lodo``'s all-domain cut: the number the results JSON records."""
    bench = _contexts_eval(monkeypatch)
    runs = {
        "a": {"gold": [1, 1, 0, 0], "score": [0.9, 0.8, 0.7, 0.2]},
        "b": {"gold": [1, 0, 0], "score": [0.95, 0.85, 0.1]},
        "c": {"gold": [1, 0], "score": [0.6, 0.3]},
    }
    domain_of = {"a": "x", "b": "y", "c": "y"}
    record = bench.scores_record({"j": {"index": runs}}, domain_of)["j"]["index"]
    assert record["a"] == {"domain": "x", "gold": "1100", "score": [0.9, 0.8, 0.7, 0.2]}
    assert bench.fit_scores(record) == bench.lodo(runs, domain_of)["threshold_all_domains"]
