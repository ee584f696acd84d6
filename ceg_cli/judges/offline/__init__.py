"""The offline judge and its rules: words, numbers and names in every language
(``langwords``, ``scriptrules``), what it measures (``analysis``), its reasons,
its rule for evidence in another language (``crosslang``, ``crossrule``), and the
cascade that starts with it (``cascade``).

A part of ``ceg_cli.judges``: it may import the judges' own modules (the
registry, ``cuts``, ``once``, ``english_only``), never ``checkers`` or
``llm_judges``.
"""
