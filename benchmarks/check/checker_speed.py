"""Pairs/s of ceg's batched checkers beside the authors' one-pair-at-a-time loop.

For each family (MiniCheck's RoBERTa, DeBERTa-v2 and Flan-T5, and HHEM's T5)
a model of that architecture is built with random weights (speed does not
depend on the weights' values) at the size asked (``--size tiny``: hidden 32,
2 layers, the test models; ``--size base``: hidden 768, 12 layers, 12 heads, a
RoBERTa-base-sized network), and the same (evidence, claim) pairs are scored
twice in the same process:

- **reference**: the authors' loop, re-implemented here from their description
  (Liyan06/MiniCheck ``Inferencer.inference_per_example``; vectara's ``predict``
  called on one pair): one pair at a time, chunk the document, run its chunks
  (one padded batch of that pair's chunks), on a model with PyTorch's own
  linear layers, as the authors load it;
- **batched**: ceg's judge on a call's pairs at once (tokenized once, sorted by
  length, batches of at most ``--batch-size`` pairs and, on a CPU, the judge's
  ``batch_tokens`` padded tokens, ``torch.inference_mode``, and on a CPU in
  float32 oneDNN's linear layers: ceg_cli/judges/checkers/kernels.py).

``--device cuda`` runs both paths on the GPU (the authors' loop moves its inputs
to the model's device, as their code does).

The workload (``--workload``), stated in tokens of the judge's own tokenizer
because compute follows tokens (the test tokenizers cut an English word into
1.6-2.8 tokens, a real BPE into about 1.3):

- ``evidence`` (the default), what ``ceg check`` feeds a checker: a claim of one
  sentence (8-14 words, 20-45 tokens) against its segment's evidence, 1 to 5
  retrieved passages (weights 30/30/20/10/10 %: after the score threshold most
  segments keep 1-3) of 80-130 tokens each (an index passage is at most 100
  words, about 130 RoBERTa tokens); documents of 80-650 tokens, so one 400-token
  chunk for most pairs and two for some;
- ``long``: one document of 4-30 sentences per claim (100-1,300 tokens, one to
  four chunks, most of them full 400-token chunks), the workload of the first
  measurements.

The pairs are cut into ``--rounds`` groups; each group is a call of the batched
judge, and the two paths alternate group by group (which goes first alternates
too), so that load from other work on a shared machine falls on both alike.
``--fixed-too`` also times, in the same rounds, the batched path without the
token budget (batches of ``--batch-size`` pairs whatever their length);
``--variant NAME:KEY=VALUE[,KEY=VALUE]`` (repeatable) the batched path with
those judge options changed (``torch:kernels=torch`` is ceg's schedule on
PyTorch's linear layers, ``t2048:batch_tokens=2048`` another budget); and
``--precision bfloat16`` (or ``float16`` on CUDA) is the variant
``bfloat16:precision=bfloat16`` (``--judge-precision``). Each variant reports
its largest score difference from the reference and the share of pairs whose
verdict (support > 0.5) it keeps. Both
paths use every CPU core torch sees. The two paths' scores are compared and the
largest difference is reported. Results: benchmarks/results/NAME.json,
``{"families": {NAME: {"batched_pairs_per_s", "reference_pairs_per_s", "device",
"speedup", "max_abs_diff", "inputs"}}}`` with the load average before and after.

    .venv/bin/python benchmarks/check/checker_speed.py --pairs 96
    .venv/bin/python benchmarks/check/checker_speed.py --size base --families roberta --pairs 48 \\
        --results checker_speed_base
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import command_line, environment, log, work_dir, write_results  # noqa: E402

SIZES = {"tiny": (32, 2, 2), "base": (768, 12, 12)}
#: Passages per claim in the ``evidence`` workload, and how often (per cent).
PASSAGE_COUNTS = {1: 30, 2: 30, 3: 20, 4: 10, 5: 10}
PASSAGE_TOKENS = (80, 130)

Pair = tuple[tuple[str, ...], str]


def workload_long(n: int, seed: int = 11) -> list[Pair]:
    """``n`` (document, claim) pairs; documents of 4-30 sentences of 8-14 words, one passage."""
    from tiny_checkers import sentences

    rng = random.Random(seed)
    pool = sentences(4000, seed=seed, words=(8, 14))
    out = []
    for _ in range(n):
        k = rng.randint(4, 30)
        at = rng.randrange(len(pool) - k)
        out.append(((" ".join(pool[at : at + k]),), rng.choice(pool)))
    return out


def workload_evidence(n: int, count: Any, seed: int = 11) -> list[Pair]:
    """``n`` (passages, claim) pairs as ``ceg check`` makes them (see the module's docstring).

    ``count(text)`` is the judge's token count of a text; a passage is consecutive
    sentences up to a target of 80-130 tokens.
    """
    from tiny_checkers import sentences

    rng = random.Random(seed)
    pool = sentences(4000, seed=seed, words=(8, 14))
    counts, weights = zip(*PASSAGE_COUNTS.items())
    out = []
    for _ in range(n):
        passages = []
        for _ in range(rng.choices(counts, weights)[0]):
            target = rng.randint(*PASSAGE_TOKENS)
            at = rng.randrange(len(pool) - 20)
            text = pool[at]
            while count(text + " " + pool[at + 1]) <= target:
                at += 1
                text += " " + pool[at]
            passages.append(text)
        out.append((tuple(passages), rng.choice(pool)))
    return out


def reference_minicheck(judge: Any, pairs: list[Pair]) -> list[float]:
    """One pair at a time: chunk its document, score its chunks in one padded batch."""
    import torch

    out = []
    for passages, claim in pairs:
        chunks = [c.text for c in judge.chunks(passages)]
        texts = [judge.input_text(c, claim) for c in chunks]
        enc = judge.tokenizer(
            texts,
            max_length=judge.max_length,
            truncation=True,
            padding=True,
            return_tensors="pt",
        ).to(judge.model.device)
        with torch.no_grad():
            if judge.seq2seq:
                start = torch.zeros((len(texts), 1), dtype=torch.long, device=judge.model.device)
                logits = judge.model(**enc, decoder_input_ids=start).logits.squeeze(1)
                probs = torch.softmax(logits[:, torch.tensor([3, 209])], dim=-1)
            else:
                probs = torch.softmax(judge.model(**enc).logits, dim=1)
        out.append(probs[:, 1].max().item())
    return out


def reference_hhem(judge: Any, pairs: list[Pair]) -> list[float]:
    """vectara's ``predict`` on one (premise, hypothesis) pair at a time."""
    import torch

    out = []
    for passages, claim in pairs:
        text = judge.prompt_text("\n".join(passages), claim)
        enc = judge.tokenizer([text], return_tensors="pt", padding=True).to(judge.model.device)
        with torch.no_grad():
            logits = judge.model(**enc).logits[:, 0, :]
        out.append(torch.softmax(logits, dim=-1)[0, 1].item())
    return out


def items(pairs: list[Pair]) -> list[Any]:
    """The judge's items: the claim as a segment, each passage as ranked evidence."""
    from ceg_cli.types import Evidence, JudgeItem, Segment

    return [
        JudgeItem(
            Segment(0, 0, len(c), c),
            tuple(Evidence(i, f"d{i}", "", p, 1.0 - i / 10) for i, p in enumerate(ps)),
        )
        for ps, c in pairs
    ]


def model_inputs(judge: Any, pairs: list[Pair]) -> dict[str, Any]:
    """What the model reads for this workload: tokens per input, inputs per pair."""
    if hasattr(judge, "chunks"):
        per_pair = [[(c.text, claim) for c in judge.chunks(ps)] for ps, claim in pairs]
        lengths = [len(x) for row in per_pair for x in judge.encode(row)]
        chunks = [len(row) for row in per_pair]
    else:
        lengths = [len(x) for x in judge.encode([("\n".join(ps), c) for ps, c in pairs])]
        chunks = [1] * len(pairs)
    lengths.sort()
    return {
        "inputs": len(lengths),
        "inputs_per_pair": {str(k): chunks.count(k) for k in sorted(set(chunks))},
        "tokens_min": lengths[0],
        "tokens_median": int(statistics.median(lengths)),
        "tokens_p90": lengths[int(0.9 * (len(lengths) - 1))],
        "tokens_max": lengths[-1],
        "passages_per_pair": {
            str(k): sum(len(ps) == k for ps, _ in pairs)
            for k in sorted({len(ps) for ps, _ in pairs})
        },
    }


def timed(fn: Any, *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def make_judge(family: str, folder: Path, work: Path, options: dict[str, Any]) -> Any:
    from ceg_cli.judges import create_judge

    if family == "hhem":
        from test_judge_hhem import make_hhem

        hhem = work / f"hhem-{len(list(work.glob('hhem-*')))}"
        return create_judge(f"hhem:{make_hhem(hhem, folder)}", options)
    return create_judge(f"minicheck:{folder}", options)


def measure(
    judges: dict[str, Any], reference: Any, reference_judge: Any, pairs: list[Pair], rounds: int
) -> dict[str, Any]:
    """Seconds and scores of each path, the paths alternating group by group."""
    size = -(-len(pairs) // rounds)
    groups = [pairs[at : at + size] for at in range(0, len(pairs), size)]
    seconds = {"reference": 0.0, **{name: 0.0 for name in judges}}
    scores: dict[str, list[float]] = {name: [] for name in seconds}

    def run(name: str, group: list[Pair]) -> None:
        if name == "reference":
            spent, got = timed(reference, reference_judge, group)
        else:
            its = items(group)
            spent, verdicts = timed(judges[name].judge, its)
            got = [v.score for v in verdicts]
        seconds[name] += spent
        scores[name].extend(got)

    names = list(seconds)
    for r, group in enumerate(groups):
        for name in names if r % 2 == 0 else names[::-1]:
            run(name, group)
    return {"seconds": seconds, "scores": scores}


def against_reference(got: dict[str, Any], name: str) -> dict[str, Any]:
    """Path ``name`` of ``measure``'s result beside the authors' loop: pairs/s, speedup,
    largest score difference and the share of verdicts (support > 0.5) it keeps."""
    ref_s, ref = got["seconds"]["reference"], got["scores"]["reference"]
    scores = got["scores"][name]
    return {
        "pairs_per_s": round(len(scores) / got["seconds"][name], 3),
        "speedup": round(ref_s / got["seconds"][name], 2),
        # ceg's verdict score is rounded to 4 places.
        "max_abs_diff": float(f"{max(abs(a - b) for a, b in zip(ref, scores)):.2e}"),
        "verdict_agreement": round(
            sum((a > 0.5) == (b > 0.5) for a, b in zip(ref, scores)) / len(scores), 4),
    }


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """``NAME:KEY=VALUE[,KEY=VALUE]`` as (NAME, options); digits become numbers."""
    name, sep, rest = text.partition(":")
    pairs = [p.partition("=") for p in rest.split(",") if p]
    if not name or not sep or not pairs or any(not k or not eq for k, eq, _ in pairs):
        raise SystemExit(f"--variant {text!r}: write NAME:KEY=VALUE[,KEY=VALUE]")
    return name, {k: int(v) if v.isdigit() else v for k, _, v in pairs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=96)
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--families", default="roberta,deberta-v2,t5,hhem")
    parser.add_argument("--workload", choices=("evidence", "long"), default="evidence")
    parser.add_argument("--rounds", type=int, default=4, help="groups the paths alternate over")
    parser.add_argument("--results", default="checker_speed")
    parser.add_argument("--batch-size", type=int, default=16, help="ceg's batch size")
    parser.add_argument(
        "--batch-tokens", type=int, default=None, help="ceg's token budget (default: the judge's)"
    )
    parser.add_argument(
        "--fixed-too", action="store_true", help="also time batches without the token budget"
    )
    parser.add_argument(
        "--variant", action="append", default=[], metavar="NAME:KEY=VALUE[,KEY=VALUE]",
        help="also time the batched path with these judge options (repeatable)",
    )
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu",
        help="where both paths run (the judges' device option; the authors' loop on the same)",
    )
    parser.add_argument(
        "--precision", default=None,
        help="also time the batched path in this --judge-precision and report its agreement",
    )
    args = parser.parse_args()
    from _common import results_name

    results_name(args.results)
    variants = dict(parse_variant(v) for v in args.variant)
    if args.precision is not None:
        variants[args.precision] = {"precision": args.precision}
    import torch
    from tiny_checkers import build

    hidden, layers, heads = SIZES[args.size]
    load_before = [round(x, 2) for x in os.getloadavg()]
    families: dict[str, Any] = {}
    with work_dir(None, prefix="ceg-checker-speed-") as work:
        for family in args.families.split(","):
            arch = "t5" if family == "hhem" else family
            folder = build(arch, work / arch, hidden=hidden, layers=layers, heads=heads)
            options: dict[str, Any] = {"batch_size": args.batch_size, "device": args.device}
            if args.batch_tokens is not None:
                options["batch_tokens"] = args.batch_tokens
            judges = {"batched": make_judge(family, folder, work, options)}
            if args.fixed_too:
                # The same weights and tokenizer; only the schedule differs.
                fixed = make_judge(family, folder, work, options)
                fixed.batch_tokens = None
                judges["fixed_count"] = fixed
            for name, changed in variants.items():
                judges[f"variant:{name}"] = make_judge(family, folder, work, options | changed)
            # The authors' loop runs on the model as they load it: PyTorch's linear layers.
            plain = make_judge(family, folder, work, options | {"kernels": "torch"})
            judge = judges["batched"]
            reference = reference_hhem if family == "hhem" else reference_minicheck
            if args.workload == "long":
                pairs = workload_long(args.pairs)
            else:

                def count(text: str, judge: Any = judge) -> int:
                    ids = judge.tokenizer(text, add_special_tokens=False, verbose=False)
                    return len(ids["input_ids"])

                pairs = workload_evidence(args.pairs, count)
            reference(plain, pairs[:2])  # warm up every path
            for j in judges.values():
                j.judge(items(pairs[:2]))
            got = measure(judges, reference, plain, pairs, args.rounds)
            batched = against_reference(got, "batched")
            row: dict[str, Any] = {
                "batched_pairs_per_s": batched["pairs_per_s"],
                "reference_pairs_per_s": round(len(pairs) / got["seconds"]["reference"], 3),
                "speedup": batched["speedup"],
                "max_abs_diff": batched["max_abs_diff"],
                "device": str(judge.model.device),
                "batch_tokens": judge.batch_tokens,
                "inputs": model_inputs(judge, pairs),
            }
            if "fixed_count" in got["seconds"]:
                fixed_row = against_reference(got, "fixed_count")
                row["fixed_count_pairs_per_s"] = fixed_row["pairs_per_s"]
                row["fixed_count_speedup"] = fixed_row["speedup"]
            for name, changed in variants.items():
                row.setdefault("variants", {})[name] = {
                    "options": changed, **against_reference(got, f"variant:{name}")}
            name = f"minicheck-{family}" if family != "hhem" else "hhem"
            families[name] = row
            log(f"{name}: {row}")
    write_results(
        args.results,
        {
            "command": command_line(),
            "environment": environment(),
            "load_average_before": load_before,
            "torch_threads": torch.get_num_threads(),
            "size": {"name": args.size, "hidden": hidden, "layers": layers, "heads": heads},
            "workload": args.workload,
            "pairs": args.pairs,
            "rounds": args.rounds,
            "batch_size": args.batch_size,
            "families": families,
        },
    )


if __name__ == "__main__":
    main()
