"""Pairs/s of ceg's batched checkers beside the authors' one-pair-at-a-time loop.

For each family (MiniCheck's RoBERTa, DeBERTa-v2 and Flan-T5, and HHEM's T5)
a model of that architecture is built with random weights (speed does not
depend on the weights' values) at the size asked (``--size tiny``: hidden 32,
2 layers, the test models; ``--size base``: hidden 768, 12 layers, 12 heads, a
RoBERTa-base-sized network), and the same (document, claim) pairs, documents of
4-30 sentences, are scored twice in the same process:

- **reference**: the authors' loop, re-implemented here from their description
  (Liyan06/MiniCheck ``Inferencer.inference_per_example``; vectara's ``predict``
  called on one pair): one pair at a time, chunk the document, run its chunks;
- **batched**: ceg's judge on all pairs at once (tokenized once, sorted by
  length, batches of 16, ``torch.inference_mode``).

Both use every CPU core torch sees. The two paths' scores are compared and the
largest difference is reported. Results: benchmarks/results/checker_speed.json,
``{"families": {NAME: {"batched_pairs_per_s", "reference_pairs_per_s", "device",
"speedup", "max_abs_diff"}}}``.

    .venv/bin/python benchmarks/checker_speed.py --pairs 96
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _common import command_line, environment, log, work_dir, write_results  # noqa: E402

SIZES = {"tiny": (32, 2, 2), "base": (768, 12, 12)}


def workload(n: int, seed: int = 11) -> list[tuple[str, str]]:
    """``n`` (document, claim) pairs; documents of 4-30 sentences of 8-14 words.

    The test tokenizers are trained on a tiny corpus and cut a word into about 3
    tokens, so a document runs to 100-1,300 tokens: one to four chunks.
    """
    import random

    from tiny_checkers import sentences

    rng = random.Random(seed)
    pool = sentences(4000, seed=seed, words=(8, 14))
    out = []
    for _ in range(n):
        k = rng.randint(4, 30)
        at = rng.randrange(len(pool) - k)
        out.append((" ".join(pool[at : at + k]), rng.choice(pool)))
    return out


def reference_minicheck(judge: Any, pairs: list[tuple[str, str]]) -> list[float]:
    """One pair at a time: chunk its document, score its chunks in one padded batch."""
    import torch

    out = []
    for doc, claim in pairs:
        chunks = [c.text for c in judge.chunks([doc])]
        texts = [judge.input_text(c, claim) for c in chunks]
        enc = judge.tokenizer(
            texts,
            max_length=judge.max_length,
            truncation=True,
            padding=True,
            return_tensors="pt",
        )
        with torch.no_grad():
            if judge.seq2seq:
                start = torch.zeros((len(texts), 1), dtype=torch.long)
                logits = judge.model(**enc, decoder_input_ids=start).logits.squeeze(1)
                probs = torch.softmax(logits[:, torch.tensor([3, 209])], dim=-1)
            else:
                probs = torch.softmax(judge.model(**enc).logits, dim=1)
        out.append(probs[:, 1].max().item())
    return out


def reference_hhem(judge: Any, pairs: list[tuple[str, str]]) -> list[float]:
    import torch

    out = []
    for doc, claim in pairs:
        enc = judge.tokenizer([judge.prompt_text(doc, claim)], return_tensors="pt", padding=True)
        with torch.no_grad():
            logits = judge.model(**enc).logits[:, 0, :]
        out.append(torch.softmax(logits, dim=-1)[0, 1].item())
    return out


def items(pairs: list[tuple[str, str]]) -> list[Any]:
    from ceg_cli.types import Evidence, JudgeItem, Segment

    return [JudgeItem(Segment(0, 0, len(c), c), (Evidence(0, "d", "", d, 1.0),)) for d, c in pairs]


def timed(fn: Any, *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=96)
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--families", default="roberta,deberta-v2,t5,hhem")
    parser.add_argument("--results", default="checker_speed")
    parser.add_argument("--batch-size", type=int, default=16, help="ceg's batch size")
    args = parser.parse_args()
    import torch
    from tiny_checkers import build

    from ceg_cli.judges import create_judge

    hidden, layers, heads = SIZES[args.size]
    pairs = workload(args.pairs)
    families: dict[str, Any] = {}
    with work_dir(None, prefix="ceg-checker-speed-") as work:
        for family in args.families.split(","):
            arch = "t5" if family == "hhem" else family
            folder = build(arch, work / arch, hidden=hidden, layers=layers, heads=heads)
            if family == "hhem":
                from test_judge_hhem import make_hhem

                judge: Any = create_judge(
                    f"hhem:{make_hhem(work / 'hhem', folder)}", {"batch_size": args.batch_size}
                )
                reference = reference_hhem
                batched = judge.scores
                inputs: Any = pairs
            else:
                judge = create_judge(f"minicheck:{folder}", {"batch_size": args.batch_size})
                reference = reference_minicheck

                def batched(its: list[Any], judge: Any = judge) -> list[float]:
                    return [v.score for v in judge.judge(its)]

                inputs = items(pairs)
            reference(judge, pairs[:4])  # warm up both paths
            batched(inputs[:4])
            ref_s, ref_scores = timed(reference, judge, pairs)
            bat_s, bat_scores = timed(batched, inputs)
            diff = max(abs(a - b) for a, b in zip(ref_scores, bat_scores))
            families[f"minicheck-{family}" if family != "hhem" else "hhem"] = {
                "batched_pairs_per_s": round(len(pairs) / bat_s, 2),
                "reference_pairs_per_s": round(len(pairs) / ref_s, 2),
                "speedup": round(ref_s / bat_s, 2),
                # ceg's verdict score is rounded to 4 places.
                "max_abs_diff": float(f"{diff:.2e}"),
                "device": "cpu",
            }
            log(f"{family}: {families[list(families)[-1]]}")
    write_results(
        args.results,
        {
            "command": command_line(),
            "environment": environment(),
            "torch_threads": torch.get_num_threads(),
            "size": {"name": args.size, "hidden": hidden, "layers": layers, "heads": heads},
            "pairs": len(pairs),
            "batch_size": args.batch_size,
            "families": families,
        },
    )


if __name__ == "__main__":
    main()
