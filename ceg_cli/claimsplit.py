"""Split a sentence that states several facts into self-contained parts, by rule.

``split_claim("X, born in 1909, was an actress and died in 1980.")`` gives
``["X was an actress.", "X died in 1980.", "X was born in 1909."]``: a judge
that requires every part to be supported can then say which fact failed.

What it splits:

- clauses joined by a semicolon, when each side has a verb;
- predicates coordinated with "and" that share the sentence's subject
  ("X was born in 1909 and died in 1980"), the subject copied into each part;
- clauses joined by ", and" / ", but" / ", while" / ", whereas" that have their
  own subject; a leading he/she/it/they becomes the sentence's subject when
  that subject is in the same segment and agrees with the pronoun;
- a relative clause (", who ..." / ", which ..."), an apposition (", a ...")
  or a participial phrase (", born in ...") set off by commas after the
  sentence's subject or after a name: "X, who founded Y, ..." gives "X founded Y".

What it leaves alone: anything inside quotes or parentheses; lists ("X, Y
and Z were founders"); commas inside names and numbers ("Washington, D.C.",
"1,000"); sentences that open with a clause or a phrase before the subject
("In 1973, ..."); and whatever it is unsure of: then it returns ``[text]``.
No model, no network: word lists and the shape of the sentence only.

``carry_subject(segment, previous)`` does the same across segments: a segment
that opens with he/she/it/they (or his/her/its/their) gets the subject of the
nearest of the previous segments (at most three back) that opens with a plain
subject agreeing with the pronoun: "He died in 1865." after "Abraham Lincoln
was the 16th president." gives "Abraham Lincoln died in 1865."
"""

from __future__ import annotations

import re

from .claims import has_claim

__all__ = ["carry_subject", "split_claim"]

_PROTECTED = re.compile(r'"[^"]*"|“[^”]*”|\([^()]*\)')
_MARK = re.compile("\ue000(\\d+)\ue001")
_SENTENCE_BREAK = re.compile(r"(\w+)[.!?][\"”)]* *[A-Z][a-z]")
_ABBREVIATIONS = set("mr mrs ms dr st jr sr mt no vs prof gen col lt sgt rev inc ltd co".split())
_SPACED = re.compile(r" [,.;:!] ?")  # tokenised text ("known , but"): its commas say little

_AUX = set("is was are were has have had be been does did do can could will would may might "
           "must should shall".split())
_PAST = set("became began brought built came chose drew drove fell fought found gave got grew "
            "held kept knew led left lost made meant met paid ran rose said sang saw sent set "
            "sold spent spoke stood taught thought took told went won wore wrote".split())
_PRESENT = set("becomes contains covers features holds includes lies lives makes operates plays "
               "produces provides remains represents runs serves stands uses works consists "
               "means occurs refers describes allows requires leads gives takes shows belongs "
               "owns hosts".split())
_PARTICIPLE = set("born known made written built held given taken found seen done grown drawn "
                  "chosen driven shown sold led set run begun spoken won bought taught brought "
                  "kept left".split())
_NOT_ED = set("hundred united need speed seed feed breed indeed embed shed bred sacred naked "
              "wicked kindred weed reed deed heed".split())
#: Verbs that take no "was" when coordinated after a passive ("born in 1909 and died in 1980").
_ACTIVE = set("died lived moved retired returned served worked played graduated studied remained "
              "continued appeared starred married joined competed emigrated arrived traveled "
              "travelled started ended finished debuted resigned stayed failed helped turned "
              "founded created co-founded received earned gained reached scored grossed "
              "attended".split())
_ADVERBS = set("also later then still now first once subsequently eventually originally "
               "previously currently often never only actually additionally initially famously "
               "reportedly briefly".split())
#: Words after which a coordinated verb may belong to a nested clause, not the subject.
_NESTED = set("when while whereas if because that which who whom whose where although though "
              "unless whether than so being having".split())
_OPENERS = set("in on at by for with from after before during since until as when while if "
               "because although though however yes no so but and or also there here this "
               "that these those then thus therefore overall additionally furthermore moreover "
               "although unlike like despite what which who whom whose where why how".split())
_FOLLOW = set("in on at as to from for with by into over under after before during until "
              "the a an his her its their several many two three".split())
_PREPOSITIONS = set("in on at for from with during by".split())
_PRONOUNS = {"he", "she", "it", "they"}
_DETERMINERS = {"a", "an", "the"}


def _bare(word: str) -> str:
    return word.strip(".,;:!?").lower()


def _is_verb(word: str) -> bool:
    """A word that is (most likely) a finite verb or a past participle; lowercase only."""
    if not word[:1].islower():
        return False
    w = _bare(word)
    if w in _AUX or w in _PAST or w in _PRESENT:
        return True
    return len(w) >= 4 and w.endswith("ed") and w not in _NOT_ED and w.replace("-", "").isalpha()


def _subject(words: list[str]) -> int:
    """Index of the first verb after a plain subject at the start, or 0 where there is none."""
    if not words or not (words[0][:1].isupper() or words[0][:1].isdigit()):
        return 0
    if _bare(words[0]) in _OPENERS or _is_verb(words[0].lower()):
        return 0
    for i, w in enumerate(words[:9]):
        if w.endswith((",", ";", ":")) or _bare(w) in _NESTED:
            return 0
        if i and _is_verb(w):
            return i
    return 0


def _subject_text(words: list[str], verb: int) -> str:
    subject = words[:verb]
    while subject and _bare(subject[-1]) in _ADVERBS:
        subject = subject[:-1]
    return " ".join(subject)


def _plural(subject: str) -> bool:
    last = subject.split()[-1]
    return last.lower() == "they" or (last.islower() and last.endswith("s")
                                      and not last.endswith("ss"))


def _copula(subject: str, main: str) -> str:
    """"is" or "was" (or "are", "were") for a part about ``subject``, in the tense of ``main``."""
    words = main.split()
    if words and _bare(words[0]) in {"is", "was", "are", "were"}:
        return _bare(words[0])  # the main clause's own verb, after the same subject
    verbs = [_bare(w) for w in words if _is_verb(w)]
    verb = next((v for v in verbs if v in _AUX | _PRESENT | _PAST), verbs[0] if verbs else "is")
    past = verb not in _AUX - {"was", "were", "had", "did", "could", "would", "might"} and (
        verb not in _PRESENT)
    return ("were" if past else "are") if _plural(subject) else ("was" if past else "is")


def _agrees(pronoun: str, subject: str) -> bool:
    words = subject.split()
    if not words or _bare(words[0]) in _PRONOUNS | {"this", "these", "those", "i", "we", "you"}:
        return False
    if pronoun == "they":
        return _plural(subject)
    if pronoun == "it":
        return not _plural(subject)
    return all(w[:1].isupper() for w in words) and _bare(words[0]) not in _DETERMINERS


def _name_before(words: list[str], end: int) -> int:
    """Start of the run of capitalised words that ends at ``words[end]`` (-1: none)."""
    i = end
    while i >= 0 and (words[i][:1].isupper() or (words[i] == "of" and i < end)):
        i -= 1
    start = i + 1
    while start <= end and words[start] == "of":
        start += 1
    if start > end or start == 0 or words[start - 1].endswith(","):
        return -1
    return start


def _commas(words: list[str]) -> list[str] | None:
    """Relative clause, apposition or participle set off by commas after the subject or a name."""
    for k, word in enumerate(words[:-1]):
        if not word.endswith(","):
            continue
        nxt = _bare(words[k + 1])
        close = next((j for j in range(k + 1, len(words)) if words[j].endswith(",")), None)
        middle = words[k + 1:close + 1 if close is not None else len(words)]
        rest = words[close + 1:] if close is not None else []
        kind = ("relative" if nxt in {"who", "which"} else "apposition" if nxt in _DETERMINERS
                else "participle" if nxt in _PARTICIPLE or (_is_verb(words[k + 1])
                                                              and nxt.endswith("ed")) else "")
        if not kind:
            continue
        if kind == "apposition" and any(_is_verb(w) for w in middle):
            return None
        head = words[:k] + [word[:-1]]
        initial = k < 6 and _subject(head + ["is"]) == k + 1
        start = 0 if initial else _name_before(head, k)
        if start < 0 or (nxt == "which" and not initial) or not (
                initial or any(_is_verb(w) for w in head)):
            return None  # "..., which" after a name may well be about the whole clause
        if start and head[start - 1].lower() == "the":
            start -= 1
        antecedent = " ".join(head[start:])
        if initial and rest and (_is_verb(rest[0]) or _bare(rest[0]) in _ADVERBS):
            main = head + rest
        elif not initial and (not rest or (kind != "relative"
                                           and _bare(rest[0]) in _PREPOSITIONS)):
            main = head + rest
        else:
            return None
        text = " ".join(middle)
        if kind == "relative":
            part = f"{antecedent} {text.split(' ', 1)[1] if ' ' in text else ''}"
        else:
            part = f"{antecedent} {_copula(antecedent, ' '.join(rest if initial else head))} {text}"
        return [" ".join(main), part]
    return None


def _coordination(words: list[str]) -> list[str] | None:
    """Predicates sharing the subject ("and died"), or clauses joined by ", and he ..."."""
    verb = _subject(words)
    if not verb:
        return None
    subject = _subject_text(words, verb)
    aux = _bare(words[verb]) if _bare(words[verb]) in {"is", "was", "are", "were"} else ""
    for j in range(verb + 1, len(words) - 1):
        conj = _bare(words[j])
        if conj == "who" and aux and _bare(words[verb + 1]) in {"a", "an"} and not any(
                _is_verb(w) or _bare(w) in _FOLLOW for w in words[verb + 2:j]):
            # "X was an actress who appeared in ...": X was an actress; X appeared in ...
            return [" ".join(words[:j]), f"{subject} {' '.join(words[j + 1:])}"]
        if conj not in {"and", "but", "while", "whereas"}:
            if conj in _NESTED:
                return None
            continue
        after = j + 1 + (_bare(words[j + 1]) in _ADVERBS and j + 2 < len(words))
        first, rest = words[:j], words[j + 1:]
        w = _bare(words[after])
        if conj == "and" and _is_verb(words[after]) and w not in {"be", "do", "have"}:
            head = _bare(words[verb])
            if head.endswith("ed") and head not in _PAST and not (
                    _agrees("he", subject) or _bare(subject) in _PRONOUNS):
                return None  # "Metabolites produced by ... and found in ...": a reduced relative
            if w.endswith("ed") and w not in _PAST and after + 1 < len(words) and not (
                    _bare(words[after + 1]) in _FOLLOW or words[after + 1][:1].isupper()
                    or words[after + 1][:1].isdigit()):
                return None
            by = _bare(words[min(after + 1, len(words) - 1)]) == "by"
            passive = _is_verb(words[verb + 1]) or by
            carry = f"{aux} " if aux and w.endswith("ed") and w not in _ACTIVE and passive else ""
            return [" ".join(first), f"{subject} {carry}{' '.join(rest)}"]
        lead = _bare(rest[0])
        if words[j - 1].endswith(",") and (inner := _subject([rest[0][:1].upper() + rest[0][1:],
                                                               *rest[1:]])):
            if lead in _PRONOUNS and all(_bare(w) in _ADVERBS for w in rest[1:inner]):
                if not _agrees(lead, subject):
                    return None
                rest = [*subject.split(), *rest[1:]]
            return [" ".join(first), " ".join(rest)]
        if conj in _NESTED:
            return None
    return None


def _split(text: str, depth: int = 0) -> list[str]:
    if depth > 3:
        return [text]
    if "; " in text:
        sides = text.split("; ")
        if all(any(_is_verb(w) for w in s.split()) for s in sides):
            verb = _subject(sides[0].split())
            subject = _subject_text(sides[0].split(), verb) if verb else ""
            for n, side in enumerate(sides[1:], 1):
                head = side.split()[0].lower()
                if head in _PRONOUNS and _agrees(head, subject):
                    sides[n] = f"{subject} {side.split(' ', 1)[1]}"
            return [p for s in sides for p in _split(s, depth + 1)]
    words = text.split()
    parts = _commas(words) or _coordination(words)
    if not parts:
        return [text]
    return [p for part in parts for p in _split(part, depth + 1)]


def split_claim(text: str) -> list[str]:
    """The facts ``text`` states, each a sentence of its own; ``[text]`` when unsure."""
    protected: list[str] = []

    def protect(m: re.Match[str]) -> str:
        protected.append(m.group(0))
        return f"\ue000{len(protected) - 1}\ue001"

    masked = _PROTECTED.sub(protect, text.strip())
    if "\n" in text or "\\n" in text or "?" in masked or _SPACED.search(masked) or any(
            len(m[1]) > 1 and m[1].lower() not in _ABBREVIATIONS
            for m in _SENTENCE_BREAK.finditer(masked)):
        return [text]  # a list, a poem or more than one sentence: not one claim to take apart
    end = masked[-1] if masked[-1:] in {".", "!", "?"} else ""
    body = masked[:-1] if end else masked
    parts = []
    for part in _split(" ".join(body.split())):
        part = _MARK.sub(lambda m: protected[int(m.group(1))], part).strip(" ,;:")
        if not part.endswith((".", "!", "?", '."', '!"', '?"', ".”")):
            part += end or "."
        parts.append(part[:1].upper() + part[1:])
    if len(parts) < 2 or not all(has_claim(p) and len(p.split()) >= 3 for p in parts):
        return [text]
    return list(dict.fromkeys(parts))


_POSSESSIVES = {"his": "he", "her": "she", "its": "it", "their": "they"}
_DUMMY_IT = re.compile(r"(?i)it(?: is|'s| was| seems| appears)(?: \w+)? (?:to|that)\b")
#: How many previous segments a pronoun is looked up in.
LOOK_BACK = 3


def carry_subject(segment: str, previous: list[str]) -> str:
    """``segment`` with an opening pronoun replaced by the subject it most likely stands for.

    The subject is that of the nearest of the last ``LOOK_BACK`` segments of
    ``previous`` that opens with a plain subject ("Abraham Lincoln was ...")
    agreeing with the pronoun ("he", "she": a capitalised name; "it": a
    singular; "they": a plural). Unchanged where there is no such segment, or
    the segment does not open with a pronoun.
    """
    words = segment.strip().split()
    if len(words) < 2:
        return segment
    head = _bare(words[0])
    pronoun = _POSSESSIVES.get(head, head)
    if pronoun not in _PRONOUNS or not words[0].rstrip(".,;:!?").isalpha():
        return segment
    if _DUMMY_IT.match(segment.strip()):
        return segment  # "It is important to note that ...": "it" stands for nothing
    for before in reversed(previous[-LOOK_BACK:]):
        before_words = before.strip().split()
        verb = _subject(before_words)
        subject = _subject_text(before_words, verb) if verb else ""
        last = subject.split()[-1] if subject else ""
        if not subject or (last.islower() and last.endswith("ly")) or not _agrees(
                pronoun, subject):
            continue  # none, cut before its noun ("The oldest continuously"), or disagreeing
        if head in _POSSESSIVES:
            subject += "'" if subject.endswith("s") else "'s"
        return " ".join([subject, *words[1:]])
    return segment
