"""A pytest file for a RAG application: each answer must be grounded in what it retrieved.

Copy it next to your tests and replace ``rag_answer`` with your pipeline. Installing
ceg (``pip install ceg-cli``) is enough: pytest then offers ``--ceg-index`` and
``--ceg-judge`` and the ``ceg_checker`` fixture, loaded once per session.

    pytest examples/test_rag_answer.py                 # against each answer's own contexts
    pytest --ceg-index index examples/test_rag_answer.py   # an index for answers without
"""

from __future__ import annotations

import pytest

from ceg_cli.testing import assert_grounded

#: A stand-in for your retriever's store.
DOCUMENTS = {
    "eiffel": "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in "
              "Paris, France. It was designed by Gustave Eiffel's company and completed in "
              "1889 as the entrance to the World's Fair.",
    "louvre": "The Louvre in Paris is the world's most-visited museum. It houses the Mona "
              "Lisa, painted by Leonardo da Vinci.",
}


def rag_answer(question: str) -> tuple[str, list[str]]:
    """Your pipeline: the answer and the passages it was given (a fixed stand-in here)."""
    if "Eiffel" in question:
        return ("The Eiffel Tower is in Paris. It was completed in 1889.",
                [DOCUMENTS["eiffel"]])
    return "The Louvre in Paris houses the Mona Lisa.", [DOCUMENTS["louvre"]]


@pytest.mark.parametrize("question", ["When was the Eiffel Tower completed?",
                                      "Where is the Mona Lisa?"])
def test_the_answer_is_grounded_in_its_contexts(ceg_checker, question: str) -> None:
    answer, contexts = rag_answer(question)
    result = ceg_checker.check(answer, question=question, contexts=contexts)
    assert_grounded(result)


def test_a_made_up_date_is_caught(ceg_checker) -> None:
    # What a regression looks like: the message names the sentence, why, and the evidence.
    result = ceg_checker.check("The Eiffel Tower is in Paris. It was completed in 1925.",
                               contexts=[DOCUMENTS["eiffel"]])
    with pytest.raises(AssertionError, match="It was completed in 1925"):
        assert_grounded(result)
    assert [s.text for s in result.flagged] == ["It was completed in 1925."]
