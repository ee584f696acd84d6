"""The offline judge's cuts per language and per script (issue 50 item 2, issue 58 item 2).

Chosen by ``benchmarks/languages/language_cuts.py`` by the protocol across two domains, XNLI dev
paraphrases and answers written from an article (``benchmarks/data/articles``), and
shipped in ``ceg_cli/models/offline/thresholds.json`` beside the English cuts: a record
in a language with a cut is decided at it and says so (``protocol, de``); one in a
language without one takes its script's and says that; English keeps its cuts;
``--judge-threshold`` overrides them all; a bad value in the file is one line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ceg_cli import Checker
from ceg_cli.errors import UsageError
from ceg_cli.judges.cuts import load_cuts
from ceg_cli.judges.offline.offline import SHIPPED, OfflineJudge, shipped_cuts
from ceg_cli.types import FACTUAL, NONFACTUAL, Evidence, JudgeItem, Segment

REPO = Path(__file__).resolve().parent.parent
SCORES = REPO / "benchmarks" / "results" / "language_cuts_scores.json"
ARTICLE_SCORES = REPO / "benchmarks" / "results" / "language_cuts_articles_scores.json"

#: A German paraphrase of its evidence: the judge scores it 0.75 ('Hamburg' checked, 2 of
#: its 4 words found), under the English cut (0.8333) and over German's (0.7).
DE_EVIDENCE = ("Die Elbphilharmonie ist ein Konzerthaus in Hamburg, das im Jahr 2017 nach "
               "langer Bauzeit eröffnet wurde.")
DE_SEGMENT = "Die Elbphilharmonie ist ein neues und teures Konzerthaus in Hamburg."
#: A Chinese paraphrase of its evidence: the judge scores it 0.6842, under the English
#: cut (0.8333), Chinese's since issue 58.
ZH_EVIDENCE = "长城是中国古代的军事防御工程，修建于春秋战国时期。"
ZH_SEGMENT = "长城是古代人民建造的一项巨大的防御设施。"
#: Italian (no XNLI data: the Latin script's cut) scores 0.8: its names are checked (found),
#: 3 of its 5 words found.
IT_EVIDENCE = "Il Colosseo è il più grande anfiteatro del mondo, situato nel centro di Roma."
IT_SEGMENT = "Il Colosseo è un anfiteatro enorme e antico, situato nel centro di Roma."
#: Japanese (no XNLI data: kana and kanji take Han's cut) scores 0.6579.
JA_EVIDENCE = "万里の長城は中国の古代に建設された巨大な防御施設である。"
JA_SEGMENT = "万里の長城は昔の人々が作った大きな壁です。"


def shipped_file() -> dict[str, Any]:
    return json.loads((SHIPPED / "thresholds.json").read_text(encoding="utf-8"))


def item(segment: str, evidence: str, language: str | None) -> JudgeItem:
    return JudgeItem(Segment(0, 0, len(segment), segment),
                     (Evidence(0, "d", "", evidence, None),), None, segment, language,
                     "contexts")


def bench() -> Any:
    # its stage's folder, and judges/ for transfer.py's fit
    stages = [str(REPO / "benchmarks" / "languages"), str(REPO / "benchmarks" / "judges")]
    sys.path[:0] = stages
    try:
        import language_cuts
    finally:
        for stage in stages:
            sys.path.remove(stage)
    return language_cuts


def test_a_refit_on_the_committed_scores_gives_the_shipped_cuts() -> None:
    """The protocol across both domains, re-run on the committed scores, chooses what is
    shipped: each language's cut, each script's, and each language's chance band."""
    language_cuts = bench()
    record = json.loads(SCORES.read_text(encoding="utf-8"))["scores"]
    articles = json.loads(ARTICLE_SCORES.read_text(encoding="utf-8"))["scores"]
    data = shipped_file()
    english = data["thresholds"]["contexts"]
    two = language_cuts.fit_two_domains(record, articles, english)
    assert data["languages"] == two["languages"]
    assert data["scripts"] == two["scripts"]
    assert data["bands"] == {k: list(v) for k, v in two["bands"].items() if v is not None}
    # Each language with article pairs was chosen on both domains; the others take their
    # script's cut.
    assert set(data["languages"]) == set(articles) - {"en"}
    for lang, choice in two["choices"].items():
        assert data["languages"][lang] == (choice["fitted_on_both"] if choice["separates"]
                                           else english)
    # English keeps the cuts of its own five domains.
    assert "en" not in data["languages"]
    assert data["thresholds"] == {"index": 0.8333, "contexts": 0.8333}
    # The committed scores are the judge's own: a few re-scored here agree.
    assert language_cuts.judge_scores([(ZH_EVIDENCE, ZH_SEGMENT, "e")], "zh") == [0.6842]
    assert language_cuts.article_scores([(DE_EVIDENCE, "", DE_SEGMENT, "e")], "de") == [0.75]
    rows = language_cuts.read_articles(language_cuts.ARTICLES, "tr")
    assert articles["tr"]["dev"]["score"][:5] == language_cuts.article_scores(
        rows["dev"][:5], "tr")


def test_the_protocol_keeps_the_english_cut_where_the_domains_cannot_separate() -> None:
    """A cut fitted on one domain that carries to the other no better than the English cut
    (by the margin) is not shipped: the English cut is."""
    language_cuts = bench()
    rng = np.random.default_rng(0)

    def part(n: int, lift: float) -> dict[str, Any]:
        y = rng.integers(0, 2, n)
        return {"score": [round(float(v), 4) for v in 0.5 + 0.5 * rng.random(n) + lift * y],
                "label": "".join("e" if v else "c" for v in y)}

    noise = {"xx": {"tune": part(400, 0.0), "held": part(400, 0.0)}}
    arts = {"xx": {"dev": part(200, 0.0), "test": part(200, 0.0)}}
    language_cuts.SCRIPTS["xx"] = "Latn"
    try:
        choice = language_cuts.two_domains(noise, arts, "xx", 0.8333)
        assert not choice["separates"] and choice["chosen"] == 0.8333
        clear = {"xx": {"tune": part(400, 0.3), "held": part(400, 0.3)}}
        arts = {"xx": {"dev": part(200, 0.3), "test": part(200, 0.3)}}
        choice = language_cuts.two_domains(clear, arts, "xx", 0.99)
        assert choice["separates"] and choice["chosen"] == choice["fitted_on_both"]
    finally:
        del language_cuts.SCRIPTS["xx"]


def test_each_language_is_decided_at_its_own_cut_and_says_which() -> None:
    cuts = shipped_cuts()
    judge = OfflineJudge()
    english = cuts.contexts.value
    de, latin, han = cuts.languages["de"], cuts.scripts["Latn"], cuts.scripts["Hani"]
    assert de.value < 0.75 < english
    cases = [(DE_SEGMENT, DE_EVIDENCE, "de", "protocol, de", FACTUAL),
             (IT_SEGMENT, IT_EVIDENCE, "it", "protocol, Latn script: no cut for it",
              FACTUAL if latin.value <= 0.8 else NONFACTUAL),
             (JA_SEGMENT, JA_EVIDENCE, "ja", "protocol, Hani script: no cut for ja",
              FACTUAL if han.value <= 0.6579 else NONFACTUAL)]
    for segment, evidence, language, source, label in cases:
        it = item(segment, evidence, language)
        assert judge.judge([it])[0].label == label, language
        assert cuts.for_language("contexts", language, segment).source == source
        # At the English cut, as before: flagged.
        assert OfflineJudge(type(cuts).same(english, "x")).judge([it])[0].label == NONFACTUAL
    # Chinese told by its script alone (no language given) is read, and cut, as Chinese.
    assert cuts.for_language("contexts", None, ZH_SEGMENT) == cuts.contexts
    zh = item(ZH_SEGMENT, ZH_EVIDENCE, None)
    assert judge.judge([zh])[0].label == (
        FACTUAL if cuts.languages["zh"].value <= 0.6842 else NONFACTUAL)
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
    de = shipped_cuts().languages["de"]
    responses = tmp_path / "r.jsonl"
    responses.write_text(
        json.dumps({"response": DE_SEGMENT, "contexts": [DE_EVIDENCE]}, ensure_ascii=False)
        + "\n", encoding="utf-8")
    result = run_cli("check", responses, "--evidence", "contexts", "--language", "de")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == f"judge offline, threshold {de.value:g} (protocol, de)"
    record = json.loads(result.stdout)
    assert record["label"] == FACTUAL
    assert (record["judge"]["threshold"], record["judge"]["threshold_source"]) == (
        de.value, "protocol, de")
    # The language detected (the default, --language auto) gets the same cut.
    auto = json.loads(run_cli("check", responses, "--evidence", "contexts", "--quiet").stdout)
    assert auto["language"] == "de" and auto["judge"]["threshold_source"] == "protocol, de"
    # --judge-threshold overrides every language's cut.
    over = run_cli("check", responses, "--evidence", "contexts", "--judge-threshold", "0.8333")
    record = json.loads(over.stdout)
    assert record["label"] == NONFACTUAL
    assert record["judge"]["threshold_source"] == "--judge-threshold"
    with Checker(evidence="contexts", judge_threshold=0.8333) as checker:
        assert checker.check(DE_SEGMENT, contexts=[DE_EVIDENCE]).label == NONFACTUAL


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
        for r, c in ((DE_SEGMENT, DE_EVIDENCE), (english, english))), encoding="utf-8")
    result = run_cli("check", responses, "--evidence", "contexts", "--quiet")
    assert result.exit_code == 0, result.stderr
    # The table's cells, their wrapped lines joined.
    table = " ".join(result.stderr.split("ceg check", 1)[1].replace("│", " ").split())
    de, en = shipped_cuts().languages["de"], shipped_cuts().contexts
    assert f"{de.value:g} (protocol, de); {en.value:g} (protocol, contexts setting)" in table, \
        table
