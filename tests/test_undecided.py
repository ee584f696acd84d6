"""Where the offline judge is at chance, a run says so in one line (issue 58 item 4).

The bands per language are shipped in ``thresholds.json`` (``bands``), chosen by
``benchmarks/languages/language_cuts.py`` on dev data (re-fitted by
``tests/test_language_cuts.py``);
a run whose segments mostly score in their language's band suggests the cascade.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ceg_cli.errors import UsageError
from ceg_cli.judges.offline.offline import SHIPPED
from ceg_cli.judges.offline.undecided import CASCADE, Undecided, for_judge, load_bands

EVIDENCE = ("Die Elbphilharmonie ist ein Konzerthaus in Hamburg, das im Jahr 2017 nach langer "
            "Bauzeit eröffnet wurde.")
#: 'Hamburg' checked, 2 of its 5 words found: 0.7, in German's band.
IN_BAND = "Die Elbphilharmonie ist ein neues, teures und großes Konzerthaus in Hamburg."
#: Every word found: 1.0, out of every band.
COPIED = "Die Elbphilharmonie ist ein Konzerthaus in Hamburg."


def write(path: Path, segments: list[str]) -> Path:
    path.write_text("".join(json.dumps({"response": s, "contexts": [EVIDENCE]},
                                       ensure_ascii=False) + "\n" for s in segments),
                    encoding="utf-8")
    return path


def test_every_language_with_a_cut_has_a_band_and_german_holds_the_example() -> None:
    bands = load_bands(SHIPPED / "thresholds.json")
    data = json.loads((SHIPPED / "thresholds.json").read_text(encoding="utf-8"))
    assert set(data["languages"]) <= set(bands)
    low, high = bands["de"]
    assert low <= 0.7 < high and not low <= 1.0 < high


def test_a_run_mostly_in_the_band_suggests_the_cascade_in_one_line(run_cli: Any,
                                                                  tmp_path: Path) -> None:
    responses = write(tmp_path / "r.jsonl", [IN_BAND] * 8 + [COPIED] * 3)
    result = run_cli("check", responses, "--evidence", "contexts")
    assert result.exit_code == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if CASCADE in line]
    assert said == [
        "warning: --judge offline could not tell 8 of 11 segments (73%): their score is in "
        f"the band where it is at chance for their language (de {low_high('de')}); a judge "
        f"that reads meaning decides those: --judge {CASCADE} (after ceg models pull "
        "mdeberta-v3-base-xnli)"]


def low_high(lang: str) -> str:
    low, high = load_bands(SHIPPED / "thresholds.json")[lang]
    return f"{low:g}-{high:g}"


def test_a_run_mostly_decided_says_nothing(run_cli: Any, tmp_path: Path) -> None:
    responses = write(tmp_path / "r.jsonl", [IN_BAND] * 4 + [COPIED] * 7)
    result = run_cli("check", responses, "--evidence", "contexts")
    assert result.exit_code == 0, result.stderr
    assert CASCADE not in result.stderr


def test_only_the_offline_judges_lexical_verdicts_count() -> None:
    counter = Undecided({"de": (0.65, 0.75)})
    segment = {"verdict": "supported", "score": 0.7, "reason": "..."}
    counter.add({"judge": {"name": "offline"}, "language": "de", "segments": [segment] * 6})
    counter.add({"judge": {"name": "offline"}, "language": "de", "segments": [
        {"verdict": "no_claim", "score": 1.0, "reason": "no factual claim to check"},
        {"verdict": "supported", "score": 0.7, "reason": "across languages (de segment, "
                                                         "en evidence): ..."}]})
    counter.add({"judge": {"name": "cascade:nli:x"}, "language": "de", "segments": [segment]})
    assert (counter.seen, counter.inside) == (6, 6)
    assert counter.advice() is None  # fewer than ten segments say nothing
    counter.add({"judge": {"name": "offline"}, "language": "ko", "segments": [segment] * 6})
    assert (counter.seen, counter.inside) == (12, 6)
    assert counter.advice() is None  # half is not most
    assert for_judge("cascade:nli:x") is None and for_judge("offline") is not None


@pytest.mark.parametrize("bands, said", [
    ('{"de": [0.8, 0.7]}', "field 'bands.de' is [0.8, 0.7]; [low, high]"),
    ('{"de": "wide"}', "field 'bands.de' is 'wide'"),
    ('[0.6, 0.7]', "field 'bands' is [0.6, 0.7]"),
])  # fmt: skip
def test_a_bad_band_is_one_line(tmp_path: Path, bands: str, said: str) -> None:
    path = tmp_path / "thresholds.json"
    path.write_text('{"format": 1, "bands": ' + bands + "}", encoding="utf-8")
    with pytest.raises(UsageError) as err:
        load_bands(path)
    assert str(err.value).startswith(f"{path}: ") and said in str(err.value)
    assert "\n" not in str(err.value)
