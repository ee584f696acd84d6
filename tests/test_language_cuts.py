"""The offline judge's cuts per language and per script (issue 50 item 2).

Fitted on XNLI dev paraphrases by ``benchmarks/languages/language_cuts.py`` and shipped in
``ceg_cli/models/offline/thresholds.json`` beside the English cuts: a record in a
language with a cut is decided at it and says so (``protocol, zh``); one in a
language without one takes its script's and says that; English keeps its cuts;
``--judge-threshold`` overrides them all; a bad value in the file is one line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ceg_cli import Checker
from ceg_cli.errors import UsageError
from ceg_cli.judges.cuts import load_cuts
from ceg_cli.judges.offline.offline import SHIPPED, OfflineJudge, shipped_cuts
from ceg_cli.types import FACTUAL, NONFACTUAL, Evidence, JudgeItem, Segment

REPO = Path(__file__).resolve().parent.parent
SCORES = REPO / "benchmarks" / "results" / "language_cuts_scores.json"

#: A Chinese paraphrase of its evidence: the judge scores it 0.6842, under the English
#: cut (0.8333) and over Chinese's.
ZH_EVIDENCE = "长城是中国古代的军事防御工程，修建于春秋战国时期。"
ZH_SEGMENT = "长城是古代人民建造的一项巨大的防御设施。"
#: Italian (no XNLI data: the Latin script's cut) scores 0.75.
IT_EVIDENCE = "Il Colosseo è il più grande anfiteatro del mondo, situato nel centro di Roma."
IT_SEGMENT = "Il Colosseo è un enorme anfiteatro antico che si trova a Roma."
#: Japanese (no XNLI data: kana and kanji take Han's cut) scores 0.6579.
JA_EVIDENCE = "万里の長城は中国の古代に建設された巨大な防御施設である。"
JA_SEGMENT = "万里の長城は昔の人々が作った大きな壁です。"


def shipped_file() -> dict[str, Any]:
    return json.loads((SHIPPED / "thresholds.json").read_text(encoding="utf-8"))


def item(segment: str, evidence: str, language: str | None) -> JudgeItem:
    return JudgeItem(Segment(0, 0, len(segment), segment),
                     (Evidence(0, "d", "", evidence, None),), None, segment, language,
                     "contexts")


def test_a_refit_on_the_committed_scores_gives_the_shipped_cuts() -> None:
    # its stage's folder, and judges/ for transfer.py's fit
    stages = [str(REPO / "benchmarks" / "languages"), str(REPO / "benchmarks" / "judges")]
    sys.path[:0] = stages
    try:
        import language_cuts
    finally:
        for stage in stages:
            sys.path.remove(stage)
    record = json.loads(SCORES.read_text(encoding="utf-8"))["scores"]
    fitted = language_cuts.fit_all(record)
    data = shipped_file()
    assert data["languages"] == {k: v for k, v in fitted["languages"].items() if k != "en"}
    assert data["scripts"] == fitted["scripts"]
    # English keeps the cuts of its own five domains, not XNLI's.
    assert "en" not in data["languages"]
    assert data["thresholds"] == {"index": 0.8333, "contexts": 0.8333}
    # The committed scores are the judge's own: a few re-scored here agree.
    pairs = [(ZH_EVIDENCE, ZH_SEGMENT, "e")]
    assert language_cuts.judge_scores(pairs, "zh") == [0.6842]


def test_each_language_is_decided_at_its_own_cut_and_says_which() -> None:
    cuts = shipped_cuts()
    judge = OfflineJudge()
    english = cuts.contexts.value
    zh, latin, han = cuts.languages["zh"], cuts.scripts["Latn"], cuts.scripts["Hani"]
    assert zh.value < 0.6842 < english and latin.value < 0.75 < english
    assert han.value < 0.6579 < english
    cases = [(ZH_SEGMENT, ZH_EVIDENCE, "zh", "protocol, zh"),
             (IT_SEGMENT, IT_EVIDENCE, "it", "protocol, Latn script: no cut for it"),
             (JA_SEGMENT, JA_EVIDENCE, "ja", "protocol, Hani script: no cut for ja")]
    for segment, evidence, language, source in cases:
        it = item(segment, evidence, language)
        assert judge.judge([it])[0].label == FACTUAL, language
        assert cuts.for_language("contexts", language, segment).source == source
        # At the English cut, as before: flagged.
        assert OfflineJudge(type(cuts).same(english, "x")).judge([it])[0].label == NONFACTUAL
    # Chinese told by its script alone (no language given) is read, and cut, as Chinese.
    assert judge.judge([item(ZH_SEGMENT, ZH_EVIDENCE, None)])[0].label == FACTUAL
    # English, named or not, keeps the setting's cut.
    for language in ("en", "en-GB", None):
        assert cuts.for_language("contexts", language, "Some text.") == cuts.contexts
    # A script with no cut: the setting's, and it says so.
    ko = cuts.for_language("index", "ko", "서울은 한국의 수도이다.")
    assert ko.value == cuts.index.value
    assert ko.source == "protocol, index setting: no cut for ko or its script"
    assert cuts.for_language("index", "und-Cyrl").source == \
        "protocol, Cyrl script: no cut for und-Cyrl"


def test_the_record_names_the_cut_of_its_language_and_the_override_wins(
    run_cli: Any, tmp_path: Path
) -> None:
    zh = shipped_cuts().languages["zh"]
    responses = tmp_path / "r.jsonl"
    responses.write_text(
        json.dumps({"response": ZH_SEGMENT, "contexts": [ZH_EVIDENCE]}, ensure_ascii=False)
        + "\n", encoding="utf-8")
    result = run_cli("check", responses, "--evidence", "contexts", "--language", "zh")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == f"judge offline, threshold {zh.value:g} (protocol, zh)"
    record = json.loads(result.stdout)
    assert record["label"] == FACTUAL
    assert (record["judge"]["threshold"], record["judge"]["threshold_source"]) == (
        zh.value, "protocol, zh")
    # The language detected (the default, --language auto) gets the same cut.
    auto = json.loads(run_cli("check", responses, "--evidence", "contexts", "--quiet").stdout)
    assert auto["language"] == "zh" and auto["judge"]["threshold_source"] == "protocol, zh"
    # --judge-threshold overrides every language's cut.
    over = run_cli("check", responses, "--evidence", "contexts", "--judge-threshold", "0.8333")
    record = json.loads(over.stdout)
    assert record["label"] == NONFACTUAL
    assert record["judge"]["threshold_source"] == "--judge-threshold"
    with Checker(evidence="contexts", judge_threshold=0.8333) as checker:
        assert checker.check(ZH_SEGMENT, contexts=[ZH_EVIDENCE]).label == NONFACTUAL


@pytest.mark.parametrize(("field", "message"), [
    ('"languages": {"zh": "high"}', "field 'languages.zh' 'high': a number from 0 to 1"),
    ('"languages": {"zh": 1.5}', "field 'languages.zh' 1.5"),
    ('"languages": {"Chinese": 0.6}', "field 'languages' has key 'Chinese'"),
    ('"scripts": {"latin": 0.6}', "field 'scripts' has key 'latin'"),
    ('"scripts": [0.6]', "field 'scripts' is [0.6]"),
])
def test_a_hand_edited_language_cut_is_refused_in_one_line(tmp_path: Path, field: str,
                                                           message: str) -> None:
    raw = ('{"format": 1, "source": "protocol", "thresholds": {"index": 0.8, "contexts": 0.8}, '
           + field + "}")
    (tmp_path / "thresholds.json").write_text(raw, encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        load_cuts(tmp_path)
    text = str(caught.value)
    assert text.startswith(str(tmp_path / "thresholds.json")) and message in text, text
    assert "\n" not in text


def test_mixed_and_romanized_answers_and_a_script_without_a_cut_get_sensible_verdicts() -> None:
    """A Chinese answer quoting an English name is Chinese (its cut); romanized Hindi
    against Devanagari evidence shares no word and is flagged, at a cut the record
    names; Korean (no cut for it or its script) is decided at the setting's and says so."""
    cases = [
        ("阿尔伯特·爱因斯坦（Albert Einstein）于1879年出生在德国乌尔姆。",
         "阿尔伯特·爱因斯坦（Albert Einstein），1879年3月14日出生于德国乌尔姆市，"
         "是一位理论物理学家。",
         FACTUAL, "protocol, zh"),
        ("Uski maa ne bataya ki woh ghar aa gaya.", "उसकी माँ ने बताया कि वह घर आ गया।",
         NONFACTUAL, "protocol, "),
        ("서울은 대한민국의 수도이며 가장 큰 도시이다.",
         "서울특별시는 대한민국의 수도이자 최대 도시이다.",
         FACTUAL, "protocol, contexts setting: no cut for ko or its script"),
    ]
    with Checker(evidence="contexts") as checker:
        for response, context, label, source in cases:
            record = checker.check(response, contexts=[context]).to_dict()
            assert record["label"] == label, record
            assert record["judge"]["threshold_source"].startswith(source), record["judge"]
            assert 0 < record["judge"]["threshold"] <= 1


def test_the_summary_names_the_cuts_the_records_were_decided_at(run_cli: Any,
                                                                tmp_path: Path) -> None:
    english = "Aristotle was a Greek philosopher born in Stagira."
    responses = tmp_path / "r.jsonl"
    responses.write_text("".join(
        json.dumps({"response": r, "contexts": [c]}, ensure_ascii=False) + "\n"
        for r, c in ((ZH_SEGMENT, ZH_EVIDENCE), (english, english))), encoding="utf-8")
    result = run_cli("check", responses, "--evidence", "contexts", "--quiet")
    assert result.exit_code == 0, result.stderr
    # The table's cells, their wrapped lines joined.
    table = " ".join(result.stderr.split("ceg check", 1)[1].replace("│", " ").split())
    zh, en = shipped_cuts().languages["zh"], shipped_cuts().contexts
    assert f"{zh.value:g} (protocol, zh); {en.value:g} (protocol, contexts setting)" in table, \
        table
