"""The model checkers: ``nli:``, ``minicheck:``, ``hhem:`` and the trained
``verifier`` (its cross-encoder, features and evidence window), with what they
share: sorted token-budgeted batches, float width and CPU kernels.

A part of ``ceg_cli.judges``: it may import the judges' own modules and the
offline judge (the verifier reads its analysis), never ``llm_judges``.
"""
