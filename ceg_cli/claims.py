"""Whether a segment makes a factual claim that needs evidence.

Shared by segmentation (``check.segment``) and the judges, which pass a
segment with no claim as the CEG paper's FELM prompt says.
"""

from __future__ import annotations

import re

__all__ = ["has_claim"]

_ALNUM_RE = re.compile(r"[^\W_]")

# Function words: a segment made only of these says nothing checkable ("Here it
# is."). Negations, "yes"/"no" and numbers are left out on purpose: "No, it is
# not." answers the question and is a claim the judge can check against it.
_STOP = frozenset(
    """
    a an the this that these those it its it's itself i i'm i've i'd i'll me my
    mine myself we we're we've us our ours you you're you've you'll your yours he
    he's him his she she's her hers they they're they've them their theirs one
    is am are was were be been being do does did doing have has had having will
    would shall should can could may might must ought to of in on at by for with
    from into onto upon about as than then so too very just also even still
    here there where when how why what which who whom whose if or and but
    because while though although until unless whether up out over under again
    further once oh well now really quite rather let's that's there's here's
    what's some any all both each such own same other more most
    """.split()
)

# Words that only ever talk about the conversation or the assistant itself.
# Used only in the tail of a segment that already opened like a greeting,
# closer or hedge (below), never on their own: "Language models predict
# words." must stay a claim.
_META = frozenset(
    """
    hello hi hey greetings sure certainly course okay ok alright great good nice
    wonderful thanks thank welcome glad happy help helps helped helpful assist
    assistance hope answer answers answered question questions query queries
    further additional anything else ask asking know knowing let feel free
    hesitate need needs want like clarify clarification context rest
    sorry afraid apologize apologies unfortunately mistake confusion
    ai language model assistant chatbot bot program
    access browse browsing internet web online real time realtime date updated
    update updates current currently latest recent data records information info
    knowledge cutoff training trained personal opinion opinions belief beliefs
    feeling feelings emotion emotions experience experiences preference
    preferences able unable cannot can't don't doesn't didn't couldn't won't
    provide providing give giving specific details detailed exact accurate
    precise certain aware find found say tell confirm verify predict determine
    future events constantly changing change changes reliable sources source
    check checking official consult professional recommend suggest advise
    day luck enjoy regards best cheers please question's difficult hard
    impossible without not
    """.split()
)

# Openings of greetings, closers and hedges. The rest of the segment must then
# consist of _STOP/_META words only, so "I'm not sure, but it opened in 1889."
# keeps its claim.
_NO_CLAIM_OPENINGS = re.compile(
    r"""^(?:
        hello | hi | hey | greetings | sure | certainly | of\ course | okay | ok
      | alright | thanks | thank\ you | you're\ welcome | no\ problem
      | (?:that's\ |that\ is\ |what\ )?(?:a\ |an\ )?
        (?:great|good|interesting|excellent|fascinating)\ question
      | (?:i\ )?hope\ (?:this|that|it|my) | let\ me\ know | feel\ free
      | (?:please\ )?(?:don't|do\ not)\ hesitate | if\ you\ have
      | if\ you\ (?:need|want|would\ like) | happy\ to | glad\ (?:i|to)
      | good\ luck | have\ a | enjoy | best\ regards | cheers
      | (?:i'm|i\ am)\ (?:not\ (?:sure|certain|aware)|sorry|afraid|unable)
      | i\ (?:do\ not|don't|cannot|can't|could\ not|couldn't|am\ unable\ to)
        \ (?:know|find|provide|answer|access|browse|have|say|give|confirm
           |verify|predict|determine|tell)
      | as\ an\ ai | i\ apologize | unfortunately | sorry | i\ have\ no
      | i\ (?:would\ )?(?:recommend|suggest|advise)
      | it\ is\ (?:difficult|hard|impossible)\ to\ (?:say|know|predict|determine)
    )\b""",
    re.VERBOSE,
)

# "Certainly, here is a list of ...:" announces content without stating any.
_LEAD_IN = re.compile(
    r"^(?:(?:sure|certainly|of course|okay|ok|alright|great|absolutely)[\s,!.]*)?"
    r"(?:here(?:'s| is| are)|below (?:is|are)|the following (?:is|are))\b.*:$",
    re.DOTALL,
)
_WORD_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_EDGE_JUNK = " \t\r\n*_`\"'“”‘’«»()[]{}<>"


def has_claim(segment_text: str) -> bool:
    """Whether a segment may state a fact that needs evidence.

    False only for segments that clearly state nothing checkable (the FELM
    prompt of the paper treats those as factual):

    - no letter or digit at all;
    - a question ("Do you want to know more?"), except "Did you know ...?";
    - a lead-in that announces a list: "Certainly, here are ...:";
    - only function words ("Here it is."); negations, yes/no and numbers
      count as content, since they answer the question;
    - a greeting, closer or pure hedge ("Hello!", "Sure!", "I hope this helps.",
      "Let me know if you have other questions.", "I'm not sure.", "As an AI
      language model, I cannot browse the internet.") whose remaining words are
      all function words or words about the conversation itself.

    Everything else is True. The rules err towards True on purpose: a wrong
    False exempts the segment from checking and lets a hallucination through
    the gate, while a wrong True only costs one judge call.
    """
    text = _normalize(segment_text)
    if not text or _ALNUM_RE.search(text) is None:
        return False
    if text.endswith("?") and not text.startswith("did you know"):
        return False
    if _LEAD_IN.match(text):
        return False
    words = _WORD_RE.findall(text)
    if all(w in _STOP for w in words):
        return False
    opening = _NO_CLAIM_OPENINGS.match(text)
    if opening is not None:
        rest = _WORD_RE.findall(text[opening.end() :])
        if all(w in _STOP or w in _META for w in rest):
            return False
    return True


def _normalize(text: str) -> str:
    """Lowercase, straight apostrophes, no Markdown emphasis or quotes at the edges."""
    text = text.replace("’", "'").replace("‘", "'").strip(_EDGE_JUNK).lower()
    return " ".join(text.split())
