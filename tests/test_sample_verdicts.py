"""The English sample's verdicts do not move with the languages work (issues 58 and 60).

``scripts/sample`` checks the eight answers of ``sample_data/responses.jsonl``: four carry a
planted error and are flagged, four are not. Here each answer is checked by the offline judge
against its own article of ``sample_data/enwiki-sample.xml.bz2`` (its record's contexts, so
no index and no embedder are needed), and every segment's verdict must be what it was
before the offline judge checked names and numbers apart from words in other languages
and sent all evidence in another language through the cross-language rule.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TITLES = {"apollo-11": "Apollo 11", "einstein": "Albert Einstein", "lincoln": "Abraham Lincoln",
          "aristotle": "Aristotle", "algeria": "Algeria", "aardvark": "Aardvark",
          "agassi": "Andre Agassi", "alabama": "Alabama"}
S, N, C = ("factual", "supported"), ("nonfactual", "not_enough_evidence"), ("factual",
                                                                           "no_claim")
#: Each answer's segments, as main gave them before this change.
EXPECTED = {
    "apollo-11": [S, S, S],
    "einstein": [S, S, S],
    "lincoln": [N, S],
    "aristotle": [C, S, N, C],
    "algeria": [S, S],
    "aardvark": [S, S, N],
    "agassi": [S, N],
    "alabama": [S, S],
}
#: The planted errors (sample_data/README.md), each the one segment flagged in its answer.
PLANTED = {"lincoln": "Springfield, Massachusetts", "aristotle": "Julius Caesar",
           "aardvark": "South America", "agassi": "Serena Williams"}


def test_the_english_samples_segment_verdicts_are_unchanged() -> None:
    from ceg_cli.api import Checker
    from ceg_cli.corpus.mediawiki import read_mediawiki

    articles = {d.title: d for d in read_mediawiki(ROOT / "sample_data" / "enwiki-sample.xml.bz2")
                if d.title in TITLES.values()}
    records = [json.loads(line) for line in
               (ROOT / "sample_data" / "responses.jsonl").read_text(encoding="utf-8").splitlines()]
    flagged = []
    with Checker(evidence="contexts") as checker:
        for record in records:
            article = articles[TITLES[record["id"]]]
            result = checker.check(record["response"], question=record.get("question"),
                                   contexts=[{"title": article.title, "text": article.text}])
            got = [(s.label, s.verdict) for s in result.segments]
            assert got == EXPECTED[record["id"]], record["id"]
            assert result.to_dict()["language"] == "en"
            if result.label == "nonfactual":
                flagged.append(record["id"])
                bad = [s.text for s in result.segments if s.label == "nonfactual"]
                assert len(bad) == 1 and PLANTED[record["id"]] in bad[0], bad
    assert flagged == ["lincoln", "aristotle", "aardvark", "agassi"]
