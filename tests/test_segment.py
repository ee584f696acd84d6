from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ceg_cli.check.segment import has_claim, segment_response
from ceg_cli.types import Segment

REPO = Path(__file__).resolve().parents[1]


def seg_texts(text: str) -> list[str]:
    segments = segment_response(text)
    for i, s in enumerate(segments):
        assert s.index == i
        assert text[s.start : s.end] == s.text
        assert s.text == s.text.strip() and s.text
    return [s.text for s in segments]


def test_sentences_are_split_by_punkt() -> None:
    text = "Dr. Smith went to Washington. He arrived at 5 p.m. on Monday."
    assert segment_response(text) == [
        Segment(0, 0, 29, "Dr. Smith went to Washington."),
        Segment(1, 30, 61, "He arrived at 5 p.m. on Monday."),
    ]


def test_bullets_split_segments_and_markers_are_left_out() -> None:
    text = (
        "Capitals:\n- Paris is in France.\n* Berlin is in Germany.\n"
        "  • Rome is in Italy. It is old."
    )
    assert seg_texts(text) == [
        "Capitals:",
        "Paris is in France.",
        "Berlin is in Germany.",
        "Rome is in Italy.",
        "It is old.",
    ]
    assert segment_response(text)[1].start == text.index("Paris")


def test_numbered_lists_lose_their_numbers() -> None:
    text = (
        "Steps:\n\n\n1. Stay calm.\n2) Sit down.\n(3) Lean forward.\na) Pinch the nose.\n## Notes"
    )
    assert seg_texts(text) == [
        "Steps:",
        "Stay calm.",
        "Sit down.",
        "Lean forward.",
        "Pinch the nose.",
        "Notes",
    ]


def test_numbers_that_are_not_markers_are_kept() -> None:
    assert seg_texts("1990 was a good year.\n3.14 is close to pi.\n-5 degrees is cold.") == [
        "1990 was a good year.",
        "3.14 is close to pi.",
        "-5 degrees is cold.",
    ]


def test_crlf_and_unicode_offsets() -> None:
    text = "Zürich is in Switzerland.\r\n\r\n• Ünïcödé 🚀 item.\r\n2. Café — très bon.\r\n"
    assert seg_texts(text) == ["Zürich is in Switzerland.", "Ünïcödé 🚀 item.", "Café — très bon."]


def test_a_line_break_ends_a_segment_without_punctuation() -> None:
    assert seg_texts("Lana Turner has collapsed!\nI was trotting along\nand suddenly") == [
        "Lana Turner has collapsed!",
        "I was trotting along",
        "and suddenly",
    ]


@pytest.mark.parametrize("text", ["", "  \n\n ", "1.\n2.\n", "---\n***\n", "- \n* "])
def test_empty_and_marker_only_lines_give_no_segments(text: str) -> None:
    assert segment_response(text) == []


def test_felm_style_list_response() -> None:
    text = (
        "Here are a few examples from history:\n\n\n\n\n"
        "1. Robin Hood: The legendary outlaw stole from the rich.\n\n\n\n\n"
        "2. Jesse James: The outlaw was loyal to his gang."
    )
    assert seg_texts(text) == [
        "Here are a few examples from history:",
        "Robin Hood: The legendary outlaw stole from the rich.",
        "Jesse James: The outlaw was loyal to his gang.",
    ]


NO_CLAIM = [
    "Do you want to know more?",
    "What else would you like to know?",
    "Hello!",
    "Hi there!",
    "Sure!",
    "Of course.",
    "**Great question!**",
    "Certainly, here is a list of the tallest buildings:",
    "Here are a few examples from history:",
    "Sure, here are some famous graduates of the University of Leicester:",
    "I hope this helps.",
    "Hope this helps!",
    "Let me know if you have other questions.",
    "If you have any other questions, feel free to ask!",
    "Thank you!",
    "Have a great day!",
    "I'm not sure.",
    "I’m not sure.",
    "As an AI language model, I cannot browse the internet.",
    "As an AI language model, I do not have access to real-time information.",
    "I'm sorry, but I couldn't find any information on that.",
    "I don't know.",
    "Here it is.",
    "---",
    "",
]

CLAIM = [
    "Paris is the capital of France.",
    "Yes.",
    "No, it is not.",
    "42.",
    "Did you know the Eiffel Tower was built in 1889?",
    "I'm not sure, but the tower opened in 1889.",
    "As an AI language model, I cannot browse the internet, but the tower is 330 m tall.",
    "Unfortunately, the museum closed in 2010.",
    "Language models predict the next word.",
    "Hello Kitty was created by Sanrio in 1974.",
    "Sure enough, the river flooded in 1993.",
    "Here is the answer: Paris.",
    "Some of the tools developed by Mondeca include:",
    "I recommend visiting the Louvre, which holds the Mona Lisa.",
    "It is difficult to say when Rome was founded, but tradition gives 753 BC.",
    "Thank you, Mario, for the 1985 game Super Mario Bros.",
]


@pytest.mark.parametrize("text", NO_CLAIM)
def test_segments_without_a_claim(text: str) -> None:
    assert has_claim(text) is False


@pytest.mark.parametrize("text", CLAIM)
def test_segments_with_a_claim(text: str) -> None:
    assert has_claim(text) is True


def _modules_after(code: str) -> set[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


HEAVY = {"torch", "numpy", "sentence_transformers", "faiss", "nltk"}


def test_importing_segment_loads_no_heavy_module() -> None:
    loaded = _modules_after(
        "import ceg_cli.check.segment, ceg_cli.sentences, ceg_cli.index.build.chunking"
    )
    assert "ceg_cli.check.segment" in loaded
    assert loaded.isdisjoint(HEAVY), loaded & HEAVY


def test_segmenting_never_loads_torch() -> None:
    # Punkt itself comes from NLTK, which imports numpy and scipy on its own;
    # torch, faiss and sentence-transformers must still stay out.
    loaded = _modules_after("import ceg_cli.check.segment as s; s.segment_response('A b. C d.')")
    assert "nltk" in loaded
    assert loaded.isdisjoint({"torch", "sentence_transformers", "faiss"})
