"""The eval stage: how right a judge's labels are on labelled benchmarks.

Takes a benchmark file (FELM, HaluEval, FEVER or labelled JSONL) and a judge;
gives examples with gold labels (``datasets``), the index of the benchmark's
own corpus, built once and cached (``corpus``), and the metrics of the CEG
paper over the checked examples (``evaluate``).
"""
