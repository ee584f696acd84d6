"""The check stage: from responses to judged segments.

Takes a responses file (or ``ResponseInput``s), an ``Index`` and a ``Judge``;
gives ``CheckedResponse``s: each response split into segments
(``segment``), evidence retrieved for each by the CEG rule (``retrieve``),
a verdict per segment (``pipeline``), and, on request, answers regenerated
from the evidence (``regenerate``). ``run`` is one whole ``ceg check`` run
(reading, checking, writing, resuming, gating) without the CLI.
"""
