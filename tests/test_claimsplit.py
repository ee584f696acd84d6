"""The rule-based claim splitter: what it takes apart, and what it must leave whole.

Several sentences are segments of FELM world-knowledge answers and
Factcheck-GPT claims (``shared/data``), as an LLM wrote them.
"""

from __future__ import annotations

import pytest

from ceg_cli.claims import has_claim
from ceg_cli.claimsplit import carry_subject, split_claim

SPLITS = [
    # coordinated predicates sharing the subject
    ("Ruth Hussey was born in 1911 and died in 2005.",
     ["Ruth Hussey was born in 1911.", "Ruth Hussey died in 2005."]),
    ("He co-founded Twitter in 2006 and served as the CEO until 2008, and returned as CEO "
     "in 2015.",
     ["He co-founded Twitter in 2006.", "He served as the CEO until 2008.",
      "He returned as CEO in 2015."]),
    ("The university was founded in 1831 and headquartered in New York.",
     ["The university was founded in 1831.", "The university was headquartered in New York."]),
    ("It stands at a height of 300 meters (984 feet) and has 64 floors.",
     ["It stands at a height of 300 meters (984 feet).", "It has 64 floors."]),
    # participial phrase and apposition after the subject
    ("Bette Davis, born in 1908, was an American actress who appeared in over fifty films.",
     ["Bette Davis was an American actress.", "Bette Davis appeared in over fifty films.",
      "Bette Davis was born in 1908."]),
    ("Paris, the capital of France, is located on the Seine.",
     ["Paris is located on the Seine.", "Paris is the capital of France."]),
    ("The New Zealand national rugby team, known as the All Blacks, is one of the most "
     "successful teams in the world.",
     ["The New Zealand national rugby team is one of the most successful teams in the world.",
      "The New Zealand national rugby team is known as the All Blacks."]),
    # relative clause and apposition after a name
    ("Jack Dorsey, who founded Twitter, was born in St. Louis.",
     ["Jack Dorsey was born in St. Louis.", "Jack Dorsey founded Twitter."]),
    ("The shortest US president was James Madison, who was 5 feet 4 inches tall.",
     ["The shortest US president was James Madison.", "James Madison was 5 feet 4 inches tall."]),
    ("Dorsey is also the CEO and co-founder of Square, a financial services and mobile payment "
     "company.",
     ["Dorsey is also the CEO and co-founder of Square.",
      "Square is a financial services and mobile payment company."]),
    ('The quote was actually written by George Santayana, a Spanish philosopher, in his book '
     '"The Life of Reason" in 1905.',
     ['The quote was actually written by George Santayana in his book "The Life of Reason" '
      'in 1905.', "George Santayana was a Spanish philosopher."]),
    # clauses with their own subject; a pronoun takes the subject of the same segment
    ("Monterey was the capital of California under Spanish and Mexican rule, but it was never "
     "the capital of California after it became a state in 1850.",
     ["Monterey was the capital of California under Spanish and Mexican rule.",
      "Monterey was never the capital of California after it became a state in 1850."]),
    ("Jupiter has a density of 1.33 grams per cubic centimeter, while Saturn has a density of "
     "0.69 grams per cubic centimeter.",
     ["Jupiter has a density of 1.33 grams per cubic centimeter.",
      "Saturn has a density of 0.69 grams per cubic centimeter."]),
    ("The mud made it difficult to move around, and it also caused health problems such as "
     "trench foot.",
     ["The mud made it difficult to move around.",
      "The mud also caused health problems such as trench foot."]),
    # semicolons
    ("The city was founded in 1718; it became the capital in 1722.",
     ["The city was founded in 1718.", "The city became the capital in 1722."]),
]

WHOLE = [
    # commas inside names and numbers
    "Washington, D.C., is the capital of the United States.",
    "Walt Disney's body is interred at Forest Lawn Memorial Park in Glendale, California.",
    "The stadium in Austin, Texas holds 1,000 people and cost $2,500,000.",
    # lists of subjects or objects
    "Larry Page, Sergey Brin and Eric Schmidt were founders of Google.",
    "Apple, Google, and Microsoft were founded in the United States.",
    "Other countries with a significant number of nuclear power plants include France, China, "
    "Russia, and South Korea.",
    "Dorsey is the CEO and co-founder of Square.",
    # quotes: nothing inside them is taken apart
    'He said "I was born in 1909 and died in 1980" on stage.',
    '"Jack was born in 1909, and he died in 1980," the obituary said.',
    # a verb coordinated inside a nested clause, not with the subject
    "Solar eclipses occur when the Moon passes in front of the Sun and blocks its light.",
    "Metabolites of dietary phospholipids and nutrients produced by gut flora and found in the "
    "systemic circulation contribute to vascular inflammation and atherosclerosis.",
    # an opening phrase before the subject, a discourse marker, a question
    "In 1973, it was not illegal for black people to attend the University of Alabama.",
    "Yes, Lincoln's assassin, John Wilkes Booth, was on the same continent as Lincoln.",
    "Which band was formed in Liverpool and released Abbey Road?",
    # "which" after a name may be about the whole clause ("58 sites, which is the most")
    "As of 2021, Italy has 58 UNESCO World Heritage Sites, which is the most of any country.",
    # a pronoun that does not agree with the subject is not replaced, so no split
    "The Beatles were formed in Liverpool, and she left the band in 1962.",
    # adjectives coordinated, not predicates
    "The company makes cheap and advanced technology.",
    # more than one sentence, lists, tokenised dialogue
    "The highway is known as Midland Trail, but it is not accessible by US 60. Instead, it can "
    "be accessed by Interstate 64.",
    "Sir David Attenborough - Naturalist and broadcaster.\n\n2.",
    "The process is not known , but is thought to involve the anterior cingulate cortex",
]


@pytest.mark.parametrize(("text", "parts"), SPLITS, ids=[t[:40] for t, _ in SPLITS])
def test_splits_into_self_contained_parts(text: str, parts: list[str]) -> None:
    assert split_claim(text) == parts


@pytest.mark.parametrize("text", WHOLE, ids=[t[:40] for t in WHOLE])
def test_leaves_alone(text: str) -> None:
    assert split_claim(text) == [text]


@pytest.mark.parametrize("text", [text for text, _ in SPLITS])
def test_every_part_is_a_claim(text: str) -> None:
    parts = split_claim(text)
    assert len(parts) > 1 and all(p.strip() and has_claim(p) for p in parts)
    assert len(set(parts)) == len(parts)


def test_pronoun_without_its_subject_in_the_segment_stays() -> None:
    # The subject is in an earlier sentence: nothing to carry, the pronoun stays.
    assert split_claim("He was born in 1909 and died in 1980.") == [
        "He was born in 1909.", "He died in 1980."]


def test_part_too_small_to_be_a_claim_keeps_the_segment() -> None:
    assert split_claim("It is, and was.") == ["It is, and was."]


@pytest.mark.parametrize("text", ["", "   ", "1981", "Yes.", "..."])
def test_degenerate_input(text: str) -> None:
    assert split_claim(text) == [text]


CARRIED = [
    # (segment, previous segments, expected)
    ("He died in 1865.", ["Abraham Lincoln was the 16th president of the United States."],
     "Abraham Lincoln died in 1865."),
    ("It was completed in 1889.", ["The Eiffel Tower is a wrought-iron tower in Paris."],
     "The Eiffel Tower was completed in 1889."),
    ("Its height is 330 metres.", ["The Eiffel Tower is a wrought-iron tower in Paris."],
     "The Eiffel Tower's height is 330 metres."),
    # the nearest agreeing subject, skipping a segment that has none
    ("She starred in over fifty films.",
     ["Bette Davis was an American actress.", "In 1962, the film was released."],
     "Bette Davis starred in over fifty films."),
]


@pytest.mark.parametrize(("segment", "previous", "expected"), CARRIED)
def test_subject_is_carried_into_a_pronoun(segment: str, previous: list[str],
                                           expected: str) -> None:
    assert carry_subject(segment, previous) == expected


@pytest.mark.parametrize(("segment", "previous"), [
    ("He died in 1865.", []),  # nothing before
    ("He died in 1865.", ["In 1861, the Civil War began."]),  # no plain subject
    ("She won an award.", ["The Eiffel Tower is in Paris."]),  # does not agree
    ("They are found in Africa.", ["The aardvark is a mammal."]),  # singular for "they"
    ("The aardvark eats ants.", ["The aardvark is a mammal."]),  # no pronoun
    ("He died in 1865.", ["Abraham Lincoln was president.", "A.", "B.", "C."]),  # too far back
])
def test_subject_is_not_carried(segment: str, previous: list[str]) -> None:
    assert carry_subject(segment, previous) == segment


@pytest.mark.parametrize("segment", [
    # FELM segments where "it" stands for nothing
    "It is important to note that while cannabis use is tolerated, it is still illegal.",
    "It seems that the record was broken in 1990.",
    "It was reported that the bridge opened in 1932.",
])
def test_dummy_it_gets_no_subject(segment: str) -> None:
    assert carry_subject(segment, ["Cannabis is legal in the Netherlands."]) == segment


def test_subject_cut_before_its_noun_is_not_carried() -> None:
    # "inhabited" is read as the verb of "The oldest continuously inhabited city ..."
    previous = ["The oldest continuously inhabited city in the world is Damascus."]
    assert carry_subject("It has been inhabited for 11,000 years.", previous) == (
        "It has been inhabited for 11,000 years.")
