"""The judges that ask an LLM behind an OpenAI-compatible endpoint (``llm:MODEL``):
the paper's prompt (``llm``), MiniCheck's prompt scored by probability
(``llm_minicheck``), and what both share (``llm_base``, ``unreadable``).

Named ``llm_judges``, not ``llm``, so that it is never mistaken for
``ceg_cli.llm`` (the client, prompts and cache these judges use). A part of
``ceg_cli.judges``: it may import the judges' own modules and ``checkers``
(MiniCheck's chunks and cut).
"""
