"""Verifier training: labelled pairs, synthetic pairs from a corpus, and ``ceg judge train``."""
