"""The second domain of the offline judge's cuts (issue 58 item 1): answers written from an
article, ``benchmarks/data/articles`` (XQuAD paragraphs, CC BY-SA 4.0; README beside it),
built by ``benchmarks/languages/article_set.py``. What the cuts were chosen on must be
what it says."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "articles"
LANGUAGES = ("en", "ar", "de", "el", "es", "fr", "hi", "ru", "th", "tr", "vi", "zh")


def rows(lang: str) -> list[dict]:
    with gzip.open(DATA / f"{lang}.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_each_pair_is_what_its_kind_says(lang: str) -> None:
    data = rows(lang)
    passages = {r["id"]: r for r in data if r["type"] == "passage"}
    pairs = [r for r in data if r["type"] == "pair"]
    assert len(passages) == 160
    assert sum(r["supported"] for r in pairs) == sum(not r["supported"] for r in pairs) == 320
    for r in pairs:
        text, passage = r["text"], passages[r["passage"]]["text"]
        assert r["supported"] == (r["kind"] in ("copy", "restated")), r
        if r["kind"] == "copy":
            assert text in passage
        elif r["kind"] in ("number", "answer", "restated_wrong"):
            old, new = r["detail"].split(" -> ")
            assert new in text and new not in passage, r
        if r["kind"] == "number":
            assert re.fullmatch(r"[\d.,]+", new)
    # An article is on one side only, and on the same side in every language.
    side = {}
    for r in pairs:
        side.setdefault(r["passage"].split(":")[1], set()).add(r["split"])
    assert all(len(s) == 1 for s in side.values())
    english = {r["passage"].split(":")[1]: r["split"] for r in rows("en") if r["type"] == "pair"}
    # (French comes from other articles, PIAF's: none is shared.)
    assert all(english.get(title, s.copy().pop()) == s.copy().pop() for title, s in side.items())


def test_the_readme_names_the_source_and_its_licence() -> None:
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    assert "google-deepmind/xquad @ 7d30520" in readme and "CC BY-SA 4.0" in readme
    assert "translated" in readme
    assert "etalab-ia/piaf-code @ 86948a7" in readme and "MIT" in readme
