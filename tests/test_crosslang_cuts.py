"""The cross-language rule's cut (issue 50 item 3) is the protocol's on the committed scores.

``benchmarks/languages/crosslang_cuts.py --ship`` fits the cosine cut on XNLI dev's tune part
across languages (each direction, segment in one language and evidence in the other,
a domain) and writes it into ``thresholds.json`` (``crosslang``); the per-pair scores
it fitted on are committed (numbers only), so a re-fit here must give the shipped cut,
and the held-out figures in the results file must be what the scores give.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

from ceg_cli.judges.offline.offline import SHIPPED

REPO = Path(__file__).resolve().parent.parent
SCORES = REPO / "benchmarks" / "results" / "crosslang_cuts_scores.json.gz"
RESULTS = REPO / "benchmarks" / "results" / "crosslang_cuts.json"


def bench() -> Any:
    # its stage's folder, and judges/ for transfer.py's fit
    stages = [str(REPO / "benchmarks" / "languages"), str(REPO / "benchmarks" / "judges")]
    sys.path[:0] = stages
    try:
        import crosslang_cuts
    finally:
        for stage in stages:
            sys.path.remove(stage)
    return crosslang_cuts


def test_a_refit_on_the_committed_scores_gives_the_shipped_cut() -> None:
    committed = json.loads(gzip.decompress(SCORES.read_bytes()).decode("utf-8"))
    record = committed["scores"]
    assert len(record) == 28  # 14 languages, both ways
    cc = bench()
    shipped = json.loads((SHIPPED / "thresholds.json").read_text(encoding="utf-8"))["crosslang"]
    assert shipped["cosine"] == cc.fit(record, cc.cross_names(record))
    assert shipped["model"] == committed["model"]


def test_the_held_out_figures_are_the_scores() -> None:
    cc = bench()
    record = json.loads(gzip.decompress(SCORES.read_bytes()).decode("utf-8"))["scores"]
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    for lang in ("de", "zh"):
        left_out = cc.fit(record, cc.cross_names(record, lang))
        got = results["languages"][lang]
        assert got["left_out_cut"] == left_out
        parts = [record[n]["held"] for n in cc.directions(lang)]
        import numpy as np

        s = np.concatenate([cc.rule_score(p) for p in parts])
        labels = "".join(p["label"] for p in parts)
        assert got["after_left_out"] == cc.measure(s >= left_out, labels)
        lexical = np.concatenate([cc.lexical_pass(p) for p in parts])
        assert got["before"] == cc.measure(lexical, labels)
