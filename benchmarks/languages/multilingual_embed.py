"""Multilingual embedders: retrieval recall across and within languages, and speed.

```
.venv/bin/python benchmarks/languages/multilingual_embed.py --xnli DIR
    [--models use-multilingual-v3,multilingual-e5-small-q4,all-MiniLM-L6-v2]
    [--languages ar,bg,de,el,es,fr,hi,ru,sw,th,tr,ur,vi,zh] [--premises 830]
    [--passages 300] [--rounds 3] [--results NAME]
```

``--xnli DIR`` holds XNLI's dev split as ``dev-LANG.tsv`` (premise,
hypothesis, label; the rows of every language are translations of the same
English rows): GautamGupta17/MESH, ``data/xnli/``; CC BY-NC, used here for
evaluation only and never committed. The English default model is run beside
the multilingual ones as the baseline.

- **cross-lingual recall@5**: each unique premise in language X is a query,
  the unique English premises are the corpus; a hit when the query's own
  English premise is among the 5 nearest (e5 embeds queries with "query: " and
  the corpus with "passage: ", as ceg does).
- **monolingual recall@5**: each entailed hypothesis in X is a query, the
  unique premises in X the corpus; a hit when its premise is among the 5.
- **passages/s**: ``--passages`` passages of about 100 words cut from the
  enwiki sample by ceg's chunker, embedded as a build embeds them, in
  ``--rounds`` rounds (the models' order rotating); the median.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (
    ENWIKI_SAMPLE,
    command_line,
    environment,
    log,
    markdown_table,
    median,
    results_name,
    usage_error,
    write_results,
)

TOP = 5
LANGUAGES = "ar,bg,de,el,es,fr,hi,ru,sw,th,tr,ur,vi,zh"
MODELS = "use-multilingual-v3,multilingual-e5-small-q4,all-MiniLM-L6-v2"


def read_xnli(folder: Path, language: str) -> list[tuple[str, str, str]]:
    path = folder / f"dev-{language}.tsv"
    if not path.is_file():
        usage_error(f"--xnli {folder}: no dev-{language}.tsv")
    with open(path, encoding="utf-8", newline="") as fh:
        rows = [tuple(r[:3]) for r in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)]
    return [r for r in rows if len(r) == 3]  # type: ignore[misc]


def premise_groups(rows: list[tuple[str, str, str]], limit: int) -> list[list[int]]:
    """Row numbers of each premise, premises in first-seen order (by the English rows)."""
    groups: dict[str, list[int]] = {}
    for i, (premise, _, _) in enumerate(rows):
        groups.setdefault(premise, []).append(i)
    return list(groups.values())[:limit]


def recall(query_vectors: Any, corpus_vectors: Any, targets: list[int]) -> float:
    import numpy as np

    scores = query_vectors @ corpus_vectors.T
    top = np.argsort(-scores, axis=1)[:, :TOP]
    return float(np.mean([t in row for t, row in zip(targets, top)]))


def passages(count: int) -> list[str]:
    from ceg_cli.corpus import iter_documents
    from ceg_cli.index.build.chunking import chunk_document

    out: list[str] = []
    for document in iter_documents(ENWIKI_SAMPLE):
        out.extend(c.text for c in chunk_document(document))
        if len(out) >= count * 3:
            break
    step = max(1, len(out) // count)
    return out[::step][:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xnli", type=Path, required=True)
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--languages", default=LANGUAGES)
    parser.add_argument("--premises", type=int, default=830)
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--results", default="multilingual_embed")
    args = parser.parse_args(argv)
    name = results_name(args.results)
    from ceg_cli.index.dense.embedding import load_embedder, query_vectors

    english = read_xnli(args.xnli, "en")
    groups = premise_groups(english, args.premises)
    languages = [x.strip() for x in args.languages.split(",") if x.strip()]
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    embedders = {m: load_embedder(m) for m in models}
    table: dict[str, dict[str, Any]] = {m: {"cross": {}, "mono": {}} for m in models}
    for model, embedder in embedders.items():
        corpus_en = embedder.embed([english[g[0]][0] for g in groups])
        for language in languages:
            rows = read_xnli(args.xnli, language)
            if len(rows) != len(english):
                usage_error(f"dev-{language}.tsv has {len(rows)} rows, English {len(english)}")
            premises = [rows[g[0]][0] for g in groups]
            cross = recall(query_vectors(embedder, premises), corpus_en, list(range(len(groups))))
            entailed = [(k, i) for k, g in enumerate(groups) for i in g
                        if rows[i][2] == "entailment"]
            mono = recall(query_vectors(embedder, [rows[i][1] for _, i in entailed]),
                          embedder.embed(premises), [k for k, _ in entailed])
            table[model]["cross"][language] = round(cross, 3)
            table[model]["mono"][language] = round(mono, 3)
            log(f"{model} {language}: cross-lingual {cross:.3f}, monolingual {mono:.3f}")
    texts = passages(args.passages)
    words = sum(len(t.split()) for t in texts) / max(1, len(texts))
    rates: dict[str, list[float]] = {m: [] for m in models}
    for round_no in range(args.rounds):
        order = models[round_no % len(models):] + models[: round_no % len(models)]
        for model in order:
            t0 = time.perf_counter()
            embedders[model].embed(texts)
            rates[model].append(len(texts) / (time.perf_counter() - t0))
    rows_out = []
    for model in models:
        cross = list(table[model]["cross"].values())
        mono = list(table[model]["mono"].values())
        table[model]["passages_per_s"] = round(median(rates[model]), 1)
        table[model]["mean_cross"] = round(sum(cross) / len(cross), 3)
        table[model]["mean_mono"] = round(sum(mono) / len(mono), 3)
        rows_out.append([model, table[model]["mean_cross"], table[model]["mean_mono"],
                         table[model]["passages_per_s"]])
    print(markdown_table(["model", "cross-lingual recall@5 (mean)", "monolingual recall@5 (mean)",
                          "passages/s"], rows_out))
    per_language = [[lang] + [f"{table[m]['cross'][lang]:.3f} / {table[m]['mono'][lang]:.3f}"
                              for m in models] for lang in languages]
    print(markdown_table(["language", *[f"{m} (cross / mono)" for m in models]], per_language))
    path = write_results(name, {
        "command": command_line(), "environment": environment(),
        "premises": len(groups), "passages": len(texts), "passage_words": round(words, 1),
        "models": table,
    })
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
