"""An answer's references list is not judged as claims (issue 44, item 5).

Answers are shaped like what chatbots write: Perplexity's and ChatGPT's "Sources:" lists,
Markdown footnote definitions, Bing's "Learn more:" lines, a References heading in bold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ceg_cli.check.references import REFERENCE_REASON, find_references

PARIS = "Paris is the capital and largest city of France."
LOUVRE = "The Louvre is the world's most-visited museum, in Paris."
#: The issue's answer: two cited claims, then the sources the markers point to.
SOURCED = (
    "Paris is the capital of France [1]. The Louvre is in Paris [2].\n"
    "\n"
    "Sources:\n"
    "[1] Paris https://en.wikipedia.org/wiki/Paris\n"
    "[2] Louvre https://en.wikipedia.org/wiki/Louvre"
)


def listed(text: str) -> list[str]:
    return [text[s:e] for s, e in find_references(text)]


def test_the_issues_sources_list_is_one_block() -> None:
    assert listed(SOURCED) == [
        "Sources:\n"
        "[1] Paris https://en.wikipedia.org/wiki/Paris\n"
        "[2] Louvre https://en.wikipedia.org/wiki/Louvre"
    ]


@pytest.mark.parametrize(
    ("text", "block"),
    [
        (  # a Markdown heading, bullets, titles without addresses
            "Paris is big.\n\n## References\n- Paris, Wikipedia\n- The Louvre, Britannica\n",
            "## References\n- Paris, Wikipedia\n- The Louvre, Britannica",
        ),
        (  # bold heading, a plain title line right under it
            "Paris is big.\n\n**Sources:**\nWikipedia: Paris\n",
            "**Sources:**\nWikipedia: Paris",
        ),
        (  # footnote definitions, no heading
            "Paris is big[^1].\n\n[^1]: Wikipedia, the article Paris.\n[^2]: Britannica.",
            "[^1]: Wikipedia, the article Paris.\n[^2]: Britannica.",
        ),
        (  # labelled lines with addresses, blank lines between, no heading
            "Paris is big [1].\n\n[1] Paris - https://x.org/paris\n\n2. [2] www.louvre.fr\n",
            "[1] Paris - https://x.org/paris\n\n2. [2] www.louvre.fr",
        ),
        (  # Bing's "Learn more:" with numbered addresses
            "Paris is big.\nLearn more:\n1. en.wikipedia.org\n2. https://www.britannica.com\n",
            "Learn more:\n1. en.wikipedia.org\n2. https://www.britannica.com",
        ),
        (  # a list of links, CRLF line breaks
            "Paris is big.\r\nCitations\r\n- [Paris](https://x.org/paris)\r\n",
            "Citations\r\n- [Paris](https://x.org/paris)",
        ),
    ],
)
def test_reference_blocks(text: str, block: str) -> None:
    assert listed(text) == [block]


def test_a_closing_line_after_the_list_is_still_judged() -> None:
    text = (
        "Paris is big.\n\nSources:\n- Wikipedia\n- Britannica\n\n"
        "Paris has 2.1 million inhabitants.\n"
    )
    assert listed(text) == ["Sources:\n- Wikipedia\n- Britannica"]


@pytest.mark.parametrize(
    "text",
    [
        "Paris is the capital of France.\nThe Louvre is in Paris.",
        # claims in a list that mention an address, without a label or a heading
        "Facts:\n- Paris is big, see https://x.org/paris\n- The Louvre is in Paris.",
        # a heading with nothing under it, and a word that only starts like one
        "Paris is big.\nSources:",
        "Sources of energy in France are mostly nuclear.",
        "References to Paris abound in novels [1].",
        # a source list inside fenced code is code
        "Example:\n```\nSources:\n[1] https://x.org\n```\nParis is big.",
        "[1] Paris is the capital of France.",  # a marker opening a claim, no address
    ],
)
def test_no_reference_block(text: str) -> None:
    assert listed(text) == []


def test_each_line_of_a_long_answer_is_read_once() -> None:
    text = "Paris is big [1].\n" * 20_000 + "Sources:\n" + "[1] https://x.org\n" * 20_000
    blocks = find_references(text)
    assert len(blocks) == 1 and text[blocks[0][0]:].startswith("Sources:\n[1] https://x.org")


# -- through ceg check -------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_sources_list_is_neither_judged_nor_counted_in_citation_recall(
    run_cli: Any, tmp_path: Path
) -> None:
    rows = [{"id": "src", "question": "What is the capital of France?", "response": SOURCED,
             "contexts": [PARIS, LOUVRE]}]
    responses = write_jsonl(tmp_path / "r.jsonl", rows)
    out = tmp_path / "o.jsonl"
    result = run_cli("check", responses, "--evidence", "contexts", "--out", out,
                     "--min-citation-recall", "1", "--max-nonfactual-rate", "0", "-q")
    assert result.exit_code == 0, result.stderr
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["label"] == "factual"
    segments = record["segments"]
    claims = [s for s in segments if s["reason"] != REFERENCE_REASON]
    listed_segments = [s for s in segments if s["reason"] == REFERENCE_REASON]
    assert [s["text"] for s in claims] == [
        "Paris is the capital of France.", "The Louvre is in Paris."]
    assert [s["verdict"] for s in claims] == ["supported", "supported"]
    # The list stays in the output, each line a segment with exact offsets, judged not at all.
    assert [s["text"] for s in listed_segments] == [
        "Sources:",
        "[1] Paris https://en.wikipedia.org/wiki/Paris",
        "[2] Louvre https://en.wikipedia.org/wiki/Louvre",
    ]
    for s in segments:
        assert SOURCED[s["start"]:s["end"]].replace(" [1]", "").replace(" [2]", "") == s["text"]
    for s in listed_segments:
        assert (s["label"], s["verdict"], s["citations"], s["evidence"]) == (
            "factual", "no_claim", [], [])
        assert s["citation_check"]["status"] == "no_claim"
    assert record["annotated"].endswith(SOURCED[SOURCED.index("\n\nSources:"):])
    # Recall was 0.4: the list's three lines were counted as uncited claims.
    assert record["citation_check"]["recall"] == 1.0
    assert record["citation_check"]["sentences"] == 2
    assert record["citation_check"]["precision"] == 1.0


def test_the_judge_never_reads_the_list(tmp_path: Path) -> None:
    from ceg_cli.check.ctxsearch import context_search
    from ceg_cli.check.pipeline import CheckOptions, check
    from ceg_cli.types import Context, ResponseInput, Verdict

    seen: list[str] = []

    class Recording:
        name = method = "recording"

        def judge(self, items: list[Any]) -> list[Verdict]:
            seen.extend(item.segment.text for item in items)
            return [Verdict("factual", "supported", 1.0) for _ in items]

    item = ResponseInput("x", 1, SOURCED, contexts=(Context(1, PARIS), Context(2, LOUVRE)))
    [result] = check([item], None, Recording(), CheckOptions(evidence="contexts"),  # type: ignore[arg-type]
                     context_search(None, "cpu"))
    assert all("http" not in text and "Sources" not in text for text in seen), seen
    assert [r.verdict.verdict for r in result.segments] == [
        "supported", "supported", "no_claim", "no_claim", "no_claim"]
