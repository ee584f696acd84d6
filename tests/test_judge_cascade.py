"""``--judge cascade:JUDGE``: the offline judge where its score can tell, JUDGE for the rest
(issue 50 item 4). JUDGE here is ``nli:`` on tiny one-layer models whose classifier
ignores its input (``test_judge_nli.save_model``): always entailment, or always
contradiction, so what reaches it shows in the verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_judge_nli import save_model

from ceg_cli.errors import UsageError
from ceg_cli.judges import cpus_needed, create_judge
from ceg_cli.judges.offline.offline import shipped_cuts
from ceg_cli.types import (
    CONTRADICTED,
    FACTUAL,
    NONFACTUAL,
    NOT_ENOUGH_EVIDENCE,
    SUPPORTED,
    Evidence,
    JudgeItem,
    Segment,
)

EVIDENCE = "Aristotle was a Greek philosopher born in Stagira."
#: Every name found, 3 of 5 words: score 0.8, under the English cut 0.8333: cannot tell.
UNSURE = "Aristotle was a Greek philosopher who loved cats."
#: A number the evidence lacks: flagged by the offline judge, whatever JUDGE would say.
MISSING = "Aristotle was born in 384 in Stagira."
#: The evidence's own words: supported by the offline judge.
COPY = "Aristotle was a Greek philosopher born in Stagira."


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cascade")
    return {"entail": save_model(root / "entail", [10.0, 0.0, 0.0]),
            "contra": save_model(root / "contra", [0.0, 0.0, 10.0])}


def item(text: str) -> JudgeItem:
    return JudgeItem(Segment(0, 0, len(text), text), (Evidence(0, "d", "", EVIDENCE, 0.7),),
                     None, text, "en", "contexts")


def test_only_what_the_offline_judge_cannot_tell_goes_on(models: dict[str, Path]) -> None:
    offline = create_judge("offline")
    before = offline.judge([item(UNSURE), item(MISSING), item(COPY)])
    assert [v.label for v in before] == [NONFACTUAL, NONFACTUAL, FACTUAL]
    judge = create_judge(f"cascade:nli:{models['entail']}")
    assert judge.name == f"cascade:nli:{models['entail']}"
    assert judge.cuts == shipped_cuts()  # the band's top: the offline judge's cut
    got = judge.judge([item(UNSURE), item(MISSING), item(COPY)])
    assert [(v.label, v.verdict) for v in got] == [
        (FACTUAL, SUPPORTED), (NONFACTUAL, NOT_ENOUGH_EVIDENCE), (FACTUAL, SUPPORTED)]
    assert got[0].reason.startswith(f"nli:{models['entail']}, as the offline judge could not "
                                    "tell (every number and name found, score 0.800 under")
    assert got[1:] == before[1:]  # decided by the offline judge, as it was
    assert judge.counts == {"offline": 2, "inner": 1}
    contra = create_judge(f"cascade:nli:{models['contra']}").judge([item(UNSURE)])[0]
    assert (contra.label, contra.verdict) == (NONFACTUAL, CONTRADICTED)
    # --judge-threshold is the offline judge's: at 0.8 it tells, and nothing goes on.
    low = create_judge(f"cascade:nli:{models['contra']}", {"judge_threshold": 0.8})
    assert low.judge([item(UNSURE)])[0].label == FACTUAL and low.counts["inner"] == 0
    assert cpus_needed(f"cascade:nli:{models['entail']}") == 2


@pytest.mark.parametrize(("name", "message"), [
    ("cascade", "say which model, as cascade:JUDGE"),
    ("cascade:", "say which model, as cascade:JUDGE"),
    ("cascade:offline", "name a judge that reads meaning after the offline one"),
    ("cascade:bogus", "--judge bogus: unknown judge"),
    ("cascade:nli:", "--judge nli:: say which model"),
])
def test_a_cascade_without_a_judge_to_hand_on_to_is_refused(name: str, message: str) -> None:
    with pytest.raises(UsageError, match=None) as caught:
        create_judge(name)
    assert message in str(caught.value), caught.value


def test_ceg_check_with_a_cascade(run_cli: Any, tmp_path: Path,
                                  models: dict[str, Path]) -> None:
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"response": f"{UNSURE} {MISSING}",
                                     "contexts": [EVIDENCE]}) + "\n", encoding="utf-8")
    result = run_cli("check", responses, "--evidence", "contexts", "--judge",
                     f"cascade:nli:{models['entail']}")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["judge"]["name"] == f"cascade:nli:{models['entail']}"
    assert record["judge"]["threshold_source"] == "protocol, contexts setting"
    segments = record["segments"]
    assert [s["label"] for s in segments] == [FACTUAL, NONFACTUAL]
    assert "as the offline judge could not tell" in segments[0]["reason"]
    assert "'384'" in segments[1]["reason"]
    bad = run_cli("check", responses, "--evidence", "contexts", "--judge", "cascade:")
    assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
