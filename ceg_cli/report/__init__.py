"""The report stage: what a check run gives back to people and to CI.

Takes ``CheckedResponse``s (or output records read back); gives the versioned
output records (``records``), the output file written as it goes and resumed
(``output``), the gate's summary and exit status (``gate``), JUnit XML and a
Markdown summary (``ci``), and the self-contained HTML report (``html``,
with its page assets in ``assets/``).
"""
