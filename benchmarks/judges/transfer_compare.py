"""Designs of ``transfer.py`` side by side, with how sure the ranking is.

    .venv/bin/python benchmarks/judges/transfer_compare.py \\
        shipped:lexical shipped:lexical-lodo shipped:mean-lodo work/verifier-qa:mean-lodo \\
        [--per-source 250] [--resamples 1000]

Each candidate is ``MODEL:DESIGN``: a verifier directory (``shipped`` for the
one in the package) and a design of ``transfer.designs``. Every candidate is
fitted leave-one-domain-out exactly as in ``transfer.py`` (same pairs, same
cached features), once; then the pairs of every domain are resampled by group
(a FELM response, a HaluEval question, a source document: the pairs of one
group stay together), ``--resamples`` times, and each candidate's worst domain
is read off every resample. Reported: each candidate's worst-domain balanced
accuracy (point and 95 % interval), and for each candidate against the first
the difference in worst domain and in every domain, with its interval and the
share of resamples in which the candidate is ahead. A difference whose
interval holds 0 is not a ranking. Results: ``results/transfer_compare.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    SHARED_DATA,
    command_line,
    environment,
    log,
    results_name,
    write_results,
)
from transfer import (  # noqa: E402
    ALL,
    COUNTED,
    balanced_accuracy,
    designs,
    domain_features,
    load_all,
    lodo_rows,
)


def fitted_verdicts(X: np.ndarray, y: np.ndarray, domains: np.ndarray, design: Any
                    ) -> np.ndarray:
    """Each pair's verdict (supported) under ``design`` fitted without the pair's domain."""
    out = np.zeros(len(y), dtype=bool)
    for domain in ALL:
        here, rest = lodo_rows(domains, domain)
        score, cut = design(X[rest], y[rest], domains[rest])
        out[here] = score(X[here]) >= cut
    return out


def group_members(groups: np.ndarray, domains: np.ndarray) -> dict[str, list[list[int]]]:
    """Per counted domain: the row indices of each of its groups."""
    out: dict[str, list[list[int]]] = {}
    for domain in COUNTED:
        by_group: dict[str, list[int]] = {}
        for i in np.flatnonzero(domains == domain).tolist():
            by_group.setdefault(groups[i], []).append(i)
        out[domain] = list(by_group.values())
    return out


def resample_index(members: dict[str, list[list[int]]], rng: np.random.Generator
                   ) -> dict[str, np.ndarray]:
    """Per counted domain: row indices of a resample of its groups, with replacement."""
    out = {}
    for domain, groups in members.items():
        picked = rng.integers(0, len(groups), len(groups))
        out[domain] = np.array([i for g in picked.tolist() for i in groups[g]])
    return out


def per_domain(y: np.ndarray, verdicts: np.ndarray, index: dict[str, np.ndarray]
               ) -> dict[str, float]:
    return {d: balanced_accuracy(y[ix], verdicts[ix]) for d, ix in index.items()}


def interval(values: list[float]) -> list[float]:
    lo, mid, hi = np.percentile(values, [2.5, 50, 97.5])
    return [round(100 * float(v), 1) for v in (lo, mid, hi)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("candidates", nargs="+", help="MODEL:DESIGN (MODEL: a directory or shipped)")
    ap.add_argument("--data", type=Path, default=SHARED_DATA)
    ap.add_argument("--per-source", type=int, default=250)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--results", default="transfer_compare")
    args = ap.parse_args()
    results_name(args.results)  # before any work: a bare name only
    from ceg_cli.judges.checkers.verifier import SHIPPED

    rows = load_all(args.data, args.per_source, args.seed)
    domains = np.array([d for d, _ in rows])
    groups = np.array([f"{d}/{p.group}" for d, p in rows])
    y = np.array([p.label for _, p in rows])
    verdicts: dict[str, np.ndarray] = {}
    for cand in args.candidates:
        model_name, _, design_name = cand.rpartition(":")
        model = SHIPPED if model_name == "shipped" else Path(model_name)
        X = domain_features(rows, model, args.per_source, args.seed)
        verdicts[cand] = fitted_verdicts(X, y, domains, designs(model)[design_name])
        log(f"{cand}: fitted")
    full = {d: np.flatnonzero(domains == d) for d in COUNTED}
    point = {c: per_domain(y, v, full) for c, v in verdicts.items()}
    rng = np.random.default_rng(args.seed)
    worst: dict[str, list[float]] = {c: [] for c in verdicts}
    diffs: dict[str, dict[str, list[float]]] = {
        c: {d: [] for d in (*COUNTED, "worst")} for c in args.candidates[1:]}
    first = args.candidates[0]
    members = group_members(groups, domains)
    for _ in range(args.resamples):
        index = resample_index(members, rng)
        scores = {c: per_domain(y, v, index) for c, v in verdicts.items()}
        for c, s in scores.items():
            worst[c].append(min(s.values()))
        for c in diffs:
            for d in COUNTED:
                diffs[c][d].append(scores[c][d] - scores[first][d])
            diffs[c]["worst"].append(worst[c][-1] - worst[first][-1])
    report: dict[str, Any] = {
        "command": command_line(),
        "environment": environment(),
        "resamples": args.resamples,
        "candidates": {
            c: {"domains": {d: round(100 * v, 1) for d, v in point[c].items()},
                "worst": round(100 * min(point[c].values()), 1),
                "worst_domain": min(point[c], key=lambda d: point[c][d]),
                "worst_interval": interval(worst[c])}
            for c in verdicts},
        "against_first": {
            c: {d: {"interval": interval(v),
                    "ahead_share": round(float(np.mean(np.array(v) > 0)), 3)}
                for d, v in per.items()}
            for c, per in diffs.items()},
    }
    write_results(args.results, report)
    print(f"Worst domain, balanced accuracy (95 % interval over {args.resamples} resamples "
          "of groups):")
    for c, r in report["candidates"].items():
        lo, _, hi = r["worst_interval"]
        print(f"  {c}: {r['worst']} ({r['worst_domain']}), {lo} to {hi}")
    print(f"\nAgainst {first} (difference, 95 % interval; share of resamples ahead):")
    for c, per in report["against_first"].items():
        cells = ", ".join(f"{d} {v['interval'][1]:+.1f} [{v['interval'][0]:+.1f}, "
                          f"{v['interval'][2]:+.1f}] {v['ahead_share']:.2f}"
                          for d, v in per.items())
        print(f"  {c}: {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
