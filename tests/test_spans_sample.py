"""Spans add, never change a label: the sample's verdicts are main's, and its planted
errors are where the spans point (issue 57).

The sample responses (``sample_data/responses.jsonl``) are checked by the offline
judge against a lexical index of the sample dump (built here: nothing is embedded,
about 15 s). Every segment's (label, verdict, score, reason, start, end) must equal
what main's code gave before spans: ``tests/data/sample_verdicts.json``, written from
main at 1f5d9fd with ``Checker(index=..., judge="offline")`` over an index built by
``ceg index build sample_data/enwiki-sample.xml.bz2 --retrieval lexical``, then written
again after issue 60 item 4's one-document rule, which changed three scores and reasons
and no label (apollo-11's third sentence, aristotle's and aardvark's planted errors).
A change of the judge that is meant to change them refreshes the file the same way:
the fixture's build and ``Checker`` run, each segment's six fields dumped by record id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = Path(__file__).resolve().parent / "data" / "sample_verdicts.json"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    from typer.testing import CliRunner

    from ceg_cli import Checker
    from ceg_cli.cli.main import app

    index = tmp_path_factory.mktemp("sample") / "index"
    built = CliRunner().invoke(app, ["index", "build", str(ROOT / "sample_data" /
                                     "enwiki-sample.xml.bz2"), "--index", str(index),
                                     "--retrieval", "lexical", "--quiet"])
    assert built.exit_code == 0, built.output
    lines = (ROOT / "sample_data" / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    with Checker(index=index, judge="offline") as checker:
        return list(checker.check_many([json.loads(line) for line in lines]))


def test_the_samples_verdicts_are_mains(checked: list[Any]) -> None:
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    got = {r.to_dict()["id"]: [[s.label, s.verdict, s.score, s.reason, s.start, s.end]
                               for s in r.segments] for r in checked}
    assert got == expected


def test_the_planted_errors_are_spans(checked: list[Any]) -> None:
    flagged = {}
    for r in checked:
        for s in r.segments:
            assert bool(s.spans) == (s.label == "nonfactual")
            for sp in s.spans:
                assert r.response[sp.start:sp.end] == sp.text
                assert s.start <= sp.start < sp.end <= s.end
            if s.spans:
                flagged[r.to_dict()["id"]] = [(sp.kind, sp.text) for sp in s.spans]
    assert flagged["lincoln"] == [("date", "1812")]
    assert ("name", "Serena Williams") in flagged["agassi"]
    assert ("name", "South America") in flagged["aardvark"]
    assert ("date", "320") in flagged["aristotle"]
