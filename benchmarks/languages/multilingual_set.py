"""Build the multilingual end-to-end set from real Wikipedia text, with planted errors.

    .venv/bin/python benchmarks/languages/multilingual_set.py --sources DIR [--out DIR]
        [--claims 150]

``DIR`` holds checkouts of three public repositories at the commits in ``REPOS``
(``git clone https://github.com/OWNER/NAME DIR/NAME && git -C DIR/NAME checkout COMMIT``);
the script reads their files and nothing else, and writes one JSONL file per
language to ``--out`` (default ``benchmarks/data/multilingual``, committed with its
README: sources, licences, how the set was made). The same sources give the same
files byte for byte: every choice is made by a hash of the item, never at random.

Each file holds three kinds of lines (``type``):

- ``passage``: a Wikipedia paragraph (``id``, ``title``, ``text``, ``source``): the
  corpus the language's index is built from.
- ``claim``: one sentence to check, ``supported`` true (taken word for word from
  its ``passage``) or false (a planted error: ``error`` says which, ``detail`` what
  changed, ``pair`` names the true sentence it was made from). ``question`` is
  the source's question about it; ``en_passage``, where the source is parallel
  (MLQA), names the English paragraph that says the same thing (the target of a
  cross-lingual search).
- ``response``: two to four consecutive sentences of a passage as one answer, with
  ``starts``, the offset where each sentence begins: the reference split that
  segmentation is compared with.

``split`` is ``dev`` (tune on it) or ``test`` (held out: report it, never tune on
it), by a hash of the article's title, so that one article's sentences are never on
both sides.

Sentences come from a splitter of this script's own (``reference_sentences``),
deliberately independent of ceg's and conservative: a full stop after a number, a
single letter, a short capitalised word or a known abbreviation ("3.", "Dr.",
"z. B.") is *ambiguous*, and no claim or response contains an ambiguous stop,
so every boundary in the reference is one a reader would not dispute.

Planted errors, each in the sentence's own script:

- ``number``: one digit of a number changed (its own digits: Arabic-Indic,
  Devanagari or full-width stay so), to a value the passage does not hold;
- ``date``: a year shifted by 1 to 9 years, to one the passage does not hold;
- ``name``: the source's answer span (a name, a place, a term) replaced by another
  answer of the same language's corpus that the passage does not hold; where the
  source has no answer spans (TyDi QA), a capitalised word replaced by another
  with the same ending (the same grammatical case in Russian);
- ``negation``: the main verb negated where the language makes that a local edit
  ("ist" -> "ist nicht", "est" -> "n'est pas", "是" -> "不是", "है" -> "नहीं है",
  "كان" -> "لم يكن").

A lexical judge cannot see a negation (every word is still in the evidence); the
kinds are reported apart, so that this is visible rather than averaged away.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent.parent
DEFAULT_OUT = BENCH_DIR / "data" / "multilingual"

#: The repositories read, at the commits the committed set was built from.
REPOS = {
    "MESH": ("GautamGupta17/MESH", "68f82e29e71a4e425069ff398a61387c24c0f30d"),
    "JGLUE": ("yahoojapan/JGLUE", "6f071c09316baae89c3d083a90985b4b1cb9968c"),
    "piaf-code": ("etalab-ia/piaf-code", "86948a73b26498948e70ad92e4b9b0231eac81f7"),
}
MLQA = "MESH/data/mlqa/MLQA_V1/dev/dev-context-{0}-question-{0}.json"
#: language -> (source name, path under --sources)
SOURCES = {
    "en": ("mlqa", MLQA.format("en")),
    "de": ("mlqa", MLQA.format("de")),
    "es": ("mlqa", MLQA.format("es")),
    "zh": ("mlqa", MLQA.format("zh")),
    "ar": ("mlqa", MLQA.format("ar")),
    "hi": ("mlqa", MLQA.format("hi")),
    "fr": ("piaf", "piaf-code/piaf-v1.0.json"),
    "ja": ("jsquad", "JGLUE/datasets/jsquad-v1.3/valid-v1.3.json"),
    "ru": ("tydiqa", "MESH/data/tydiqa/tydiqa-goldp-v1.1-dev/tydiqa.goldp.ru.dev.json"),
}
LANGUAGES = tuple(SOURCES)
#: MLQA's languages whose questions have an English twin (the same question id).
PARALLEL = ("de", "es", "zh", "ar", "hi")
#: Languages written without spaces between words.
UNSPACED = frozenset({"zh", "ja"})

MAX_PASSAGE_CHARS = 1500
#: A claim's length in characters: (min, max) for spaced and unspaced scripts.
SPACED_LEN, UNSPACED_LEN = (40, 260), (12, 120)
#: Passages per language: every claim's own, then others of the same source.
CORPUS_PASSAGES = 200
RESPONSES = 80
ERROR_KINDS = ("name", "number", "date", "negation")


def digest(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()


def split_of(title: str) -> str:
    """``dev`` or ``test``, by the article: half and half, the same on every run."""
    return "dev" if int(digest("split", title)[:8], 16) % 2 == 0 else "test"


# --------------------------------------------------------------------------- sentences

_CJK_END = "。！？．"
_OTHER_END = "।॥؟"
_CLOSERS = "\"'”’»)）」』】〕》"
_OPENERS = "\"'“‘«(（「『【〔《¿¡"
#: Abbreviations a full stop may follow inside a sentence (lower-cased, no stop).
ABBREVIATIONS = frozenset(
    """
    etc al approx ca cf dept corp univ prof gen gov sen rev capt col sgt jan feb mar apr jun
    jul aug sep sept oct nov dec vs mt ft st bzw evtl ggf inkl insb jh jhd mio mrd tsd usw
    vgl zb sog bspw geb gest verh ehem ebd hrsg abs nr bd hl chr ev röm kath
    av apr env mme mlle mgr ste vol chap ibid
    sra srta dra ud uds pág aprox núm
    г гг т др проф акад им ул пр см ср тыс млн млрд руб коп в вв ст н э
    англ нем франц фр лат греч итал исп араб род ум напр сокр рус укр каз тур букв
    """.split()
)
_ROMAN = re.compile(r"^[IVXLCDM]{1,5}$")
_TOKEN_BEFORE = re.compile(r"[\w.]*\w$")


@dataclass(frozen=True)
class Sentence:
    start: int
    end: int
    #: True when an ambiguous stop lies inside: it may really be two sentences.
    ambiguous: bool


def _uncased_letter(ch: str) -> bool:
    return ch.isalpha() and not ch.isupper() and not ch.islower()


def _boundary_kind(text: str, i: int) -> tuple[str, int]:
    """What the terminator at ``i`` is: ``clear``, ``ambiguous`` or ``none``; and where
    the next sentence may start (after closing quotes and brackets)."""
    t = text[i]
    j = i + 1
    while j < len(text) and text[j] in _CLOSERS:
        j += 1
    if j >= len(text):
        return "clear", j
    if t in _CJK_END:
        return "clear", j
    if not text[j].isspace():
        # "z.B.", "U.S." or a missing space after a full stop ("المغلقة.كانت"): unclear.
        if text[j].isalpha() and text[i - 1 : i].isalpha():
            return "ambiguous", j
        return "none", j
    k = j
    while k < len(text) and text[k].isspace():
        k += 1
    if k >= len(text):
        return "clear", j
    nxt = text[k]
    while nxt in _OPENERS and k + 1 < len(text):
        k += 1
        nxt = text[k]
    if t in _OTHER_END:
        return "clear", j
    if nxt.islower():
        return "none", j
    if nxt.isdigit():
        return "ambiguous", j
    if not (nxt.isupper() or _uncased_letter(nxt)):
        return "ambiguous", j
    if t in "!?":
        return "clear", j
    if t == "…":
        return "ambiguous", j
    # A full stop before a capital: an abbreviation, an ordinal or an initial?
    m = _TOKEN_BEFORE.search(text, 0, i)
    tok = m.group() if m else ""
    if (
        not tok
        or tok.isdigit()
        or any(c.isdigit() for c in tok)
        or "." in tok
        or len(tok) == 1
        or _ROMAN.match(tok)
        or (len(tok) <= 3 and tok[0].isupper())
        or tok.lower() in ABBREVIATIONS
    ):
        return "ambiguous", j
    return "clear", j


def reference_sentences(text: str) -> list[Sentence]:
    """The sentences of ``text`` by this script's conservative rules (see the docstring)."""
    out: list[Sentence] = []
    start = _skip_space(text, 0)
    ambiguous = False
    i = start
    while i < len(text):
        ch = text[i]
        if ch == "\n":
            if text[start:i].strip():
                out.append(Sentence(start, _trim_end(text, start, i), ambiguous))
            start, ambiguous = _skip_space(text, i + 1), False
            i = start
            continue
        if ch in ".!?…" or ch in _CJK_END or ch in _OTHER_END:
            kind, j = _boundary_kind(text, i)
            if kind == "clear":
                out.append(Sentence(start, j, ambiguous))
                start, ambiguous = _skip_space(text, j), False
                i = start
                continue
            if kind == "ambiguous":
                ambiguous = True
            i = j if j > i else i + 1
            continue
        i += 1
    if start < len(text) and text[start:].strip():
        out.append(Sentence(start, _trim_end(text, start, len(text)), ambiguous))
    return out


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _trim_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _ends_a_sentence(text: str, s: Sentence) -> bool:
    """Whether the sentence closes with a terminator (not a cut-off fragment)."""
    body = text[s.start : s.end].rstrip(_CLOSERS)
    return bool(body) and body[-1] in ".!?。！？．।॥؟"


# --------------------------------------------------------------------------- numbers

# Not inside a Latin word or another number; a CJK character may touch it ("5月").
_NUMBER = re.compile(
    r"(?<![\dA-Za-z.,،٬٫])\d+(?:[.,،٬\u00a0\u202f ]\d{3})*(?:[.,٫]\d+)?(?![\dA-Za-z])"
)


def _digit_value(ch: str) -> int:
    return unicodedata.decimal(ch)


def _with_digit(ch: str, value: int) -> str:
    """The digit ``value`` in the same script as ``ch``."""
    return chr(ord(ch) - _digit_value(ch) + value)


def _is_year(run: str) -> bool:
    if len(run) != 4 or not all(c.isdigit() for c in run):
        return False
    return 1000 <= int("".join(str(_digit_value(c)) for c in run)) <= 2099


def _year_text(value: int, like: str) -> str:
    return "".join(_with_digit(like[0], int(d)) for d in f"{value:04d}")


def number_error(sentence: str, passage: str, key: str) -> tuple[str, str] | None:
    """``sentence`` with one number changed to a value ``passage`` does not hold."""
    runs = [m for m in _NUMBER.finditer(sentence) if not _is_year(m.group())]
    if not runs:
        return None
    m = runs[int(digest(key, "number")[:8], 16) % len(runs)]
    run = m.group()
    first = next(k for k, c in enumerate(run) if c.isdigit())
    old = _digit_value(run[first])
    more_digits = sum(c.isdigit() for c in run) > 1
    for step in range(1, 10):
        new = (old + step + int(digest(key, "step")[:2], 16) % 7) % 10
        if new == old or (new == 0 and more_digits):
            continue
        changed = run[:first] + _with_digit(run[first], new) + run[first + 1 :]
        if changed not in passage:
            return sentence[: m.start()] + changed + sentence[m.end() :], f"{run} -> {changed}"
    return None


def date_error(sentence: str, passage: str, key: str) -> tuple[str, str] | None:
    """``sentence`` with one year shifted by 1 to 9 years, to one ``passage`` lacks."""
    runs = [m for m in _NUMBER.finditer(sentence) if _is_year(m.group())]
    if not runs:
        return None
    m = runs[int(digest(key, "date")[:8], 16) % len(runs)]
    run = m.group()
    year = int("".join(str(_digit_value(c)) for c in run))
    base = int(digest(key, "shift")[:8], 16)
    for k in range(18):
        shift = (base + k) % 9 + 1
        shifted = year + shift if (base >> 4 + k) % 2 else year - shift
        new = _year_text(shifted, run)
        if new not in passage and 1000 <= shifted <= 2099:
            return sentence[: m.start()] + new + sentence[m.end() :], f"{run} -> {new}"
    return None


# --------------------------------------------------------------------------- names

def name_error(
    sentence: str, span: tuple[int, int] | None, pool: Sequence[str], passage: str, key: str,
    lang: str,
) -> tuple[str, str] | None:
    """The answer span replaced by another answer from ``pool`` that ``passage`` lacks."""
    if span is None or (lang not in UNSPACED and not _whole_words(sentence, *span)):
        return None
    old = sentence[span[0] : span[1]]
    cased = old[:1].isupper()
    # French elides before a vowel: "l'Albanie" takes a name that starts with one.
    elided = span[0] > 0 and sentence[span[0] - 1] in "'’"
    options = [
        a for a in pool
        if a != old and a.lower() != old.lower() and a not in passage and old not in a
        and (a[:1].isupper() == cased)
        and (not elided or a[:1].lower() in "aeiouyhâéèêîôû")
        and 0.5 <= len(a) / max(1, len(old)) <= 2.0
    ]
    if not options:
        return None
    new = options[int(digest(key, "name")[:8], 16) % len(options)]
    return sentence[: span[0]] + new + sentence[span[1] :], f"{old} -> {new}"


def _whole_words(text: str, a0: int, a1: int) -> bool:
    """Whether the span starts and ends at word edges (for spaced scripts)."""
    return not (a0 > 0 and text[a0 - 1].isalnum()) and not (a1 < len(text) and text[a1].isalnum())


_CAP_WORD = re.compile(r"(?<![\w-])[A-ZА-ЯЁ][a-zа-яё]{3,}(?![\w-])")


def capitalised_words(text: str) -> list[re.Match[str]]:
    """Capitalised words not at a sentence's start (in Russian: names)."""
    out = []
    for m in _CAP_WORD.finditer(text):
        before = text[: m.start()].rstrip(" «\"(")
        if before and before[-1] not in ".!?:;—–-":
            out.append(m)
    return out


def cap_name_error(
    sentence: str, pool: Sequence[str], passage: str, key: str
) -> tuple[str, str] | None:
    """A capitalised word replaced by another of the corpus with the same ending."""
    words = capitalised_words(sentence)
    if not words:
        return None
    m = words[int(digest(key, "capword")[:8], 16) % len(words)]
    old = m.group()
    options = [w for w in pool if w != old and w[-2:] == old[-2:] and w not in passage]
    if not options:
        return None
    new = options[int(digest(key, "capname")[:8], 16) % len(options)]
    return sentence[: m.start()] + new + sentence[m.end() :], f"{old} -> {new}"


# --------------------------------------------------------------------------- negation

#: (pattern, replacement) per language: the verb negated as a local edit.
NEGATIONS: dict[str, list[tuple[str, str]]] = {
    "en": [(r"\b(is|was|are|were)\b(?! not)", r"\1 not")],
    "de": [(r"\b(ist|war|sind|waren|wurde|wurden)\b(?! nicht)", r"\1 nicht")],
    "fr": [
        (r"(?<=\s)(?<!ne )(est|était|sont|étaient|fut)\b(?! pas)", r"ne \1 pas"),
    ],
    "es": [(r"(?<=\s)(?<!no )(es|era|fue|son|eran|fueron)\b", r"no \1")],
    "ru": [(r"(?<=\s)(?<!не )(является|являлся|являлась|был|была|было|были)\b", r"не \1")],
    "zh": [(r"(?<![于但就总还可只而正便凡要若倒硬真老更不是])是(?!否)", "不是")],
    "ja": [(r"である。$", "ではない。"), (r"であった。$", "ではなかった。"),
           (r"だった。$", "ではなかった。")],
    "hi": [(r"(?<!नहीं)\s(है|था|थी|थे|हैं)(\s*।)$", r" नहीं \1\2")],
    # Arabic: "كان" -> "لم يكن", and لا before a present-tense verb of being or lying.
    "ar": [
        (r"(?<=\s)(?<!لا )(?<!لم )كانت(?=\s)", "لم تكن"),
        (r"(?<=\s)(?<!لا )(?<!لم )كان(?=\s)", "لم يكن"),
        (r"(?<=\s)(?<!لا )(?<!لم )(يعد|يعتبر|تعد|تعتبر|يقع|تقع|يوجد|توجد|يضم|تضم)(?=\s)",
         r"لا \1"),
    ],
}


def negation_error(sentence: str, lang: str, key: str) -> tuple[str, str] | None:
    for pattern, repl in NEGATIONS.get(lang, []):
        matches = list(re.finditer(pattern, sentence))
        if not matches:
            continue
        m = matches[int(digest(key, "neg")[:8], 16) % len(matches)]
        made = m.expand(repl)
        if lang == "fr":
            # French elides "ne" before a vowel: "ne est" -> "n'est".
            made = re.sub(r"\bne ([aeéêiouh])", r"n'\1", made)
        new = sentence[: m.start()] + made + sentence[m.end() :]
        if new != sentence:
            return new, f"{m.group().strip()} -> {made.strip()}"
    return None


# --------------------------------------------------------------------------- reading

@dataclass
class Question:
    id: str
    question: str
    answer: str | None  # the answer text, where the source has one
    answer_start: int | None


@dataclass
class Paragraph:
    lang: str
    source: str
    title: str
    text: str
    questions: list[Question] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.lang}-{self.source}-{digest(self.title, self.text)[:10]}"


def read_source(lang: str, root: Path) -> list[Paragraph]:
    """The paragraphs (with their questions) of ``lang``'s source, in file order."""
    source, rel = SOURCES[lang]
    path = root / rel
    if not path.is_file():
        owner = REPOS[rel.split("/", 1)[0]]
        raise SystemExit(
            f"multilingual_set.py: {path}: missing; clone {owner[0]} into "
            f"{root / rel.split('/', 1)[0]} and check out {owner[1]}"
        )
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    out = []
    for article in data:
        title = str(article.get("title") or "")
        for p in article["paragraphs"]:
            text = str(p["context"])
            shift = 0
            if source == "jsquad":  # "Title [SEP] text": the title is the article's
                head, sep, rest = text.partition(" [SEP] ")
                if sep:
                    title, text, shift = head, rest, len(head) + len(sep)
            lead = shift + len(text) - len(text.lstrip())
            text = text.strip()
            para = Paragraph(lang, source, title, text)
            for q in p["qas"]:
                answers = q.get("answers") or []
                first = answers[0] if answers else {}
                ans = str(first.get("text") or "") or None
                start = first.get("answer_start") if ans else None
                if ans is not None and start is not None:
                    start = int(start) - lead
                    if text[start : start + len(ans)] != ans:
                        ans = start = None  # an answer the text does not hold here
                para.questions.append(Question(str(q["id"]), str(q["question"]), ans, start))
            out.append(para)
    return out


# --------------------------------------------------------------------------- claims

@dataclass
class Candidate:
    para: Paragraph
    q: Question
    sentence: Sentence
    #: The answer's span within the sentence, where there is one.
    span: tuple[int, int] | None
    #: Whether that answer is a name (``name_like``): only names are swapped.
    name: bool

    @property
    def text(self) -> str:
        return self.para.text[self.sentence.start : self.sentence.end]


def _good_sentence(text: str, s: Sentence, lang: str) -> bool:
    low, high = UNSPACED_LEN if lang in UNSPACED else SPACED_LEN
    body = text[s.start : s.end]
    return (
        not s.ambiguous
        and low <= len(body) <= high
        and _ends_a_sentence(text, s)
        and not body[:1].islower()
        and "[" not in body
    )


def _question_overlap(sentence: str, question: str) -> int:
    words = {w[:5].lower() for w in re.findall(r"\w{3,}", question)}
    return sum(1 for w in re.findall(r"\w{3,}", sentence) if w[:5].lower() in words)


def candidates(
    paras: Sequence[Paragraph], lang: str, en_named: dict[str, bool]
) -> list[Candidate]:
    """One candidate per question: the clean sentence holding its answer (or, with
    no answer span, the clean sentence sharing most words with the question)."""
    out = []
    for para in paras:
        if len(para.text) > MAX_PASSAGE_CHARS:
            continue
        sentences = reference_sentences(para.text)
        for q in para.questions:
            if q.answer is not None and q.answer_start is not None:
                a0, a1 = _strip_span(para.text, q.answer_start, q.answer_start + len(q.answer))
                hit = next((s for s in sentences if s.start <= a0 and a1 <= s.end), None)
                if hit is None or not _good_sentence(para.text, hit, lang) or a0 >= a1:
                    continue
                answer = para.text[a0:a1]
                own = named_in_context(para.text, a0, answer)
                named = name_like(answer, lang, own, en_named.get(q.id))
                out.append(Candidate(para, q, hit, (a0 - hit.start, a1 - hit.start), named))
            else:
                good = [s for s in sentences if _good_sentence(para.text, s, lang)]
                if not good:
                    continue
                best = max(
                    good,
                    key=lambda s: (
                        _question_overlap(para.text[s.start : s.end], q.question), -s.start
                    ),
                )
                out.append(Candidate(para, q, best, None, False))
    return out


def _strip_span(text: str, a0: int, a1: int) -> tuple[int, int]:
    """The span without surrounding spaces and punctuation."""
    while a0 < a1 and (text[a0].isspace() or unicodedata.category(text[a0]).startswith("P")):
        a0 += 1
    while a1 > a0 and (
        text[a1 - 1].isspace() or unicodedata.category(text[a1 - 1]).startswith("P")
    ):
        a1 -= 1
    return a0, a1


#: Lower-case words a name may hold: "Universidad de Virginia", "Ludwig van Beethoven".
_NAME_JOINERS = frozenset(
    "of the and de da del der di van von la le les du des al bin y e et d l um und".split()
)
_WORDS = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
_HIRAGANA = re.compile(r"[\u3040-\u309f]")
_NOT_IN_NAMES = re.compile(r"[,;:()\[\]!?\"«»“”„،؛、，（）]")


def sentence_initial(text: str, start: int) -> bool:
    """Whether ``start`` opens a sentence of ``text`` (where any word is capitalised)."""
    before = text[:start].rstrip(" \"'“‘„«(¿¡")
    return not before or before[-1] in ".!?:"


def named_in_context(text: str, start: int, answer: str) -> bool:
    """A name by its capitals, in its place: a single capitalised word opening a
    sentence may be any word ("Football is ..."), so it does not count."""
    return title_case(answer) and (
        len(_WORDS.findall(answer)) > 1 or not sentence_initial(text, start)
    )


def title_case(text: str) -> bool:
    """Whether ``text`` is written as a name: every word but the joiners capitalised."""
    if any(c.isdigit() for c in text) or len(text) > 40 or _NOT_IN_NAMES.search(text):
        return False
    words = [w for w in _WORDS.findall(text) if w.lower() not in _NAME_JOINERS]
    return bool(words) and len(words) <= 5 and all(w[0].isupper() for w in words)


def name_like(answer: str, lang: str, own: bool, english: bool | None) -> bool:
    """Whether an answer span is a name (a person, a place, a work, an organisation).

    Capitals tell where they mark names (English, French, Spanish: ``own``, from
    ``named_in_context``); where they do not (German nouns) or there are none
    (Chinese, Arabic, Hindi), MLQA's English twin of the same answer tells
    (``english``: ``named_in_context`` of it, None where there is no twin).
    Japanese (no twin): a short span without hiragana, that is without particles
    or inflections: a noun, often a name.
    """
    if lang == "ja":
        return (
            len(answer) <= 10
            and not _HIRAGANA.search(answer)
            and not any(c.isdigit() for c in answer)
            and not _NOT_IN_NAMES.search(answer)
        )
    if any(c.isdigit() for c in answer) or _NOT_IN_NAMES.search(answer):
        return False
    if lang in ("en", "fr"):
        return own
    if lang == "es":
        return own and english is not False
    return english is True


def answer_pool(cands: Sequence[Candidate]) -> list[str]:
    """The name-like answers of a language, to stand in for one another; sorted."""
    return sorted({c.text[c.span[0] : c.span[1]] for c in cands if c.name and c.span})


def errors_for(
    c: Candidate, lang: str, pool: Sequence[str], cap_pool: Sequence[str]
) -> dict[str, tuple[str, str]]:
    """Every planted error the candidate's sentence allows: kind -> (text, detail)."""
    key = f"{lang}:{c.q.id}"
    sentence, passage = c.text, c.para.text
    made: dict[str, tuple[str, str] | None] = {
        "number": number_error(sentence, passage, key),
        "date": date_error(sentence, passage, key),
        "negation": negation_error(sentence, lang, key),
    }
    if c.span is not None and c.name:
        made["name"] = name_error(sentence, c.span, pool, passage, key, lang)
    elif lang == "ru":
        made["name"] = cap_name_error(sentence, cap_pool, passage, key)
    return {k: v for k, v in made.items() if v is not None and v[0] != sentence}


def choose(
    cands: Sequence[Candidate], n: int, priority: dict[str, int],
    errors: dict[int, dict[str, tuple[str, str]]],
) -> list[tuple[Candidate, str]]:
    """``n`` candidates that allow a planted error, one per passage and per sentence
    (those whose question has the most parallel twins first, ``priority``, then in
    hash order), each with the kind of error it gets: the kind used least so far
    among those it allows, so that every language gets as even a mix as its
    sentences allow."""
    ordered = sorted(
        (c for c in cands if errors[id(c)]),
        key=lambda c: (-priority.get(c.q.id, 0), digest(c.para.lang, c.q.id)),
    )
    seen_para: set[str] = set()
    seen_text: set[str] = set()
    used: Counter[str] = Counter()
    out = []
    for c in ordered:
        if c.para.id in seen_para or c.text in seen_text:
            continue
        seen_para.add(c.para.id)
        seen_text.add(c.text)
        kind = min(errors[id(c)], key=lambda k: (used[k], ERROR_KINDS.index(k)))
        used[kind] += 1
        out.append((c, kind))
        if len(out) == n:
            break
    return out


# --------------------------------------------------------------------------- responses

def responses(paras: Sequence[Paragraph], lang: str, n: int) -> list[dict[str, Any]]:
    """Up to ``n`` answers of 2 to 4 consecutive clean sentences, one per passage."""
    out = []
    for para in sorted(paras, key=lambda p: digest("response", p.id)):
        sents = reference_sentences(para.text)
        size = 2 + int(digest("size", para.id)[:4], 16) % 3
        for k in range(len(sents) - size + 1):
            run = sents[k : k + size]
            if all(_good_sentence(para.text, s, lang) for s in run):
                base = run[0].start
                out.append({
                    "type": "response",
                    "id": f"{para.id}-r{k}",
                    "split": split_of(para.title or para.id),
                    "passage": para.id,
                    "text": para.text[base : run[-1].end],
                    "starts": [s.start - base for s in run],
                })
                break
        if len(out) == n:
            break
    return out


# --------------------------------------------------------------------------- building

def build(
    root: Path, n_claims: int, languages: Sequence[str] = LANGUAGES
) -> dict[str, list[dict[str, Any]]]:
    """Every language's lines, in a fixed order (English is read in any case: its
    answers tell names, its paragraphs are the cross-lingual targets)."""
    paras = {lang: read_source(lang, root) for lang in ("en", *languages) if lang in SOURCES}
    parallel = [lang for lang in PARALLEL if lang in paras]
    en_named = {
        q.id: named_in_context(p.text, q.answer_start, q.answer)
        for p in paras["en"] for q in p.questions
        if q.answer is not None and q.answer_start is not None
    }
    cands = {lang: candidates(paras[lang], lang, en_named) for lang in paras}
    errors: dict[int, dict[str, tuple[str, str]]] = {}
    for lang in paras:
        pool = answer_pool(cands[lang])
        cap_pool = sorted({
            m.group() for p in paras[lang] for m in capitalised_words(p.text)
        }) if lang == "ru" else []
        for c in cands[lang]:
            errors[id(c)] = errors_for(c, lang, pool, cap_pool)
    # Questions with twins in several MLQA languages first: the same facts across languages.
    twins: Counter[str] = Counter()
    for lang in parallel:
        twins.update({c.q.id for c in cands[lang] if errors[id(c)]})
    chosen = {
        lang: choose(cands[lang], n_claims, twins, errors) for lang in paras if lang != "en"
    }
    picked_ids: Counter[str] = Counter()
    for lang in parallel:
        picked_ids.update(c.q.id for c, _ in chosen[lang])
    chosen["en"] = choose(cands["en"], n_claims, picked_ids, errors)
    # The English paragraph of each MLQA question id: the cross-lingual target.
    en_para = {q.id: p for p in paras["en"] for q in p.questions}

    out: dict[str, list[dict[str, Any]]] = {}
    for lang in paras:
        claims: list[dict[str, Any]] = []
        needed: dict[str, Paragraph] = {}
        for c, kind in chosen[lang]:
            text, detail = errors[id(c)][kind]
            needed[c.para.id] = c.para
            split = split_of(c.para.title or c.para.id)
            cross = None
            if lang in parallel and c.q.id in en_para:
                cross = en_para[c.q.id].id
            base = {"type": "claim", "split": split, "passage": c.para.id,
                    "question": c.q.question, "en_passage": cross}
            true_id = f"{lang}-{digest(lang, c.q.id)[:10]}"
            claims.append({**base, "id": true_id, "supported": True, "text": c.text,
                           "error": None, "detail": None, "pair": None})
            claims.append({**base, "id": true_id + "-x", "supported": False, "text": text,
                           "error": kind, "detail": detail, "pair": true_id})
        corpus = dict(needed)
        if lang == "en":  # the targets of every cross-lingual claim
            for other in parallel:
                for c, _ in chosen[other]:
                    if c.q.id in en_para:
                        p = en_para[c.q.id]
                        corpus.setdefault(p.id, p)
        # Distractors: the same articles' other paragraphs, then others, by hash.
        titles = {p.title for p in corpus.values()}
        rest = sorted(
            (p for p in paras[lang] if p.id not in corpus and len(p.text) <= MAX_PASSAGE_CHARS),
            key=lambda p: (p.title not in titles, digest("distractor", p.id)),
        )
        for p in rest:
            if len(corpus) >= max(CORPUS_PASSAGES, len(needed)):
                break
            corpus.setdefault(p.id, p)
        passages = [
            {"type": "passage", "id": p.id, "title": p.title, "text": p.text, "source": p.source}
            for p in sorted(corpus.values(), key=lambda p: p.id)
        ]
        resp = responses(list(corpus.values()), lang, RESPONSES)
        out[lang] = passages + sorted(claims, key=lambda c: c["id"]) + resp
    return out


def write(out_dir: Path, lines: dict[str, list[dict[str, Any]]]) -> None:
    """``LANG.jsonl.gz`` per language; gzip with no name and no time in its header, so
    that the same lines give the same bytes."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for lang, rows in lines.items():
        path = out_dir / f"{lang}.jsonl.gz"
        tmp = path.with_name(f".{path.name}.tmp")
        body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
        with open(tmp, "wb") as raw, gzip.GzipFile(
            filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9
        ) as fh:
            fh.write(body.encode("utf-8"))
        tmp.replace(path)


def read_set(folder: Path, lang: str) -> list[dict[str, Any]]:
    """The lines of ``LANG.jsonl.gz`` (or a plain ``LANG.jsonl``) in ``folder``."""
    gz, plain = folder / f"{lang}.jsonl.gz", folder / f"{lang}.jsonl"
    if gz.is_file():
        with gzip.open(gz, "rt", encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    with open(plain, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def summary(lines: dict[str, list[dict[str, Any]]]) -> Iterator[str]:
    for lang, rows in lines.items():
        kinds = Counter(r["type"] for r in rows)
        errors = Counter(r["error"] for r in rows if r["type"] == "claim" and r["error"])
        splits = Counter(r["split"] for r in rows if r["type"] == "claim" and r["supported"])
        cross = sum(1 for r in rows if r["type"] == "claim" and r.get("en_passage"))
        yield (
            f"{lang}: {kinds['passage']} passages, {kinds['claim']} claims "
            f"(dev {splits['dev']}, test {splits['test']} true; errors "
            f"{dict(sorted(errors.items()))}; {cross} with an English twin), "
            f"{kinds['response']} responses"
        )


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=Path, required=True,
                        help="a folder holding checkouts of " + ", ".join(REPOS))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--claims", type=int, default=150,
                        help="true sentences per language (each gets a planted twin)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    lines = build(args.sources, args.claims)
    write(args.out, lines)
    for line in summary(lines):
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
