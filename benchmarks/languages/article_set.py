"""The second domain for the offline judge's cuts per language: answers written from an article.

    .venv/bin/python benchmarks/languages/article_set.py --xquad DIR [--piaf FILE]
        [--out benchmarks/data/articles]

Issue 58 item 1. XNLI's entailed hypotheses are human paraphrases that share few words
with their premise; an LLM answer written from a source reuses the source's words, and
its errors keep most of them. So for each language ceg fits a cut in, real article text
(XQuAD: Wikipedia paragraphs, translated by professionals, CC BY-SA 4.0; README.md beside
the data) gives pairs of that kind, each checked against its own paragraph:

true
  ``copy``       the sentence of the paragraph that holds a question's answer, as it is;
  ``restated``   the question restated with its answer ("Panthers savunması sayı
                 bırakmıştır: 308."): the words a person chose to ask about the
                 paragraph, which an answer written from it reuses, the question words
                 (``WH``) left out;
not true
  ``restated_wrong``  the same with another answer of the same kind (a number for a
                 number, words for words) from another article, one the paragraph does not
                 hold: a wrong answer to the question;
  ``number``     the sentence with one number changed (a year by 1 to 9, another number
                 by one digit) to one the paragraph does not hold;
  ``answer``     the sentence with its answer replaced as in ``restated_wrong`` (a name,
                 a date, a value: whatever the question asked for);
  ``negation``   the sentence's verb negated where that is a local edit
                 (``multilingual_set.NEGATIONS``: de es ru zh ar hi; a relation changed).

Each of ``PARAGRAPHS`` paragraphs (chosen by a hash) gives one item (its question chosen
by a hash): both true pairs and two wrong ones, ``restated_wrong`` and the first of
``number``, ``answer``, ``negation`` that applies, in an order rotated by a hash.
``split`` (``dev`` or ``test``) is by the article, as ``multilingual_set.split_of``:
the same articles on each side in every language (XQuAD's articles are the same in
all). Every choice is made by a hash; the gzip header carries no name or time: the
same sources give the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import log, usage_error  # noqa: E402
from multilingual_set import digest, negation_error, split_of  # noqa: E402

LANGUAGES = ("en", "ar", "de", "el", "es", "hi", "ru", "th", "tr", "vi", "zh")
UNSPACED = frozenset({"zh", "th"})
#: Question words left out of a restated question, per language, lower case.
WH: dict[str, frozenset[str]] = {k: frozenset(v.split()) for k, v in {
    "en": "what which who whom whose when where why how many much did does do was were is "
          "are",
    "de": "wer wen wem wessen was wann wo wohin woher warum wieso weshalb wie welche welcher "
          "welches welchen welchem wieviel wieviele viele",
    "es": "qué que quién quiénes cuál cuáles cuándo dónde cómo cuánto cuántos cuánta cuántas "
          "por",
    "ru": "кто что какой какая какое какие каком какого какую каких когда где куда откуда "
          "почему зачем как сколько чей чья чьё чьи ли",
    "tr": "ne neyi neyin nedir neden nerede nereye nereden kim kimi kimin kimdir hangi "
          "hangisi kaç nasıl niçin niye mi mı mu mü",
    "ar": "ما ماذا من متى أين اين كيف لماذا كم أي اي هل ماهو ماهي",
    "fr": "qui que qu quoi quel quelle quels quelles quand où comment combien pourquoi "
          "lequel laquelle lesquels lesquelles est-ce est ce",
    "el": "ποιος ποια ποιο ποιοι ποιες ποιον ποιας ποιου ποιων πότε πού πώς γιατί πόσοι "
          "πόσα πόσο πόσες πόσων τι",
    "hi": "क्या कौन कौनसा कौनसी किस किसने किसको किसे किसका किसकी किसके कब कहाँ कहां कैसे "
          "क्यों कितना कितने कितनी",
    "vi": "gì ai nào đâu bao nhiêu sao tại vì",
    "zh": "什么时候 为什么 什么 哪一 哪些 哪个 哪里 哪儿 多少 怎么 怎样 如何 谁 哪 几",
    "th": "เมื่อไหร่ เมื่อไร อะไร ใคร ที่ไหน ทำไม อย่างไร เท่าไร เท่าไหร่ กี่ ไหน",
}.items()}
_QUESTION_END = "?？؟;;"
_PUNCT = ".,;:!?()[]«»\"“”„‚‘،؛؟।"
#: A sentence's length in characters, spaced and unspaced scripts.
SPACED_LEN, UNSPACED_LEN = (40, 300), (12, 150)
#: Items (paragraphs) per language: a few hundred sentences at most.
PARAGRAPHS = 160
_NUMBER = re.compile(r"(?<![\d.,])\d+(?:[.,]\d+)*(?![\d])")


def read_xquad(path: Path) -> list[dict[str, Any]]:
    """XQuAD's paragraphs: title, context, questions (question, answer, its offset)."""
    data = json.loads(path.read_text(encoding="utf-8-sig"))
    out = []
    for article in data["data"]:
        for n, para in enumerate(article["paragraphs"]):
            qas = [(q["question"], q["answers"][0]["text"], q["answers"][0]["answer_start"])
                   for q in para["qas"] if q["answers"] and q["answers"][0]["text"].strip()]
            out.append({"title": article["title"], "n": n, "context": para["context"],
                        "qas": qas})
    return out


def answer_sentence(context: str, start: int, answer: str, lang: str) -> str | None:
    """The sentence of ``context`` holding the answer at ``start``, if it holds it whole and
    its length fits."""
    from ceg_cli.sentences import sentence_spans

    for a, b in sentence_spans(context, lang):
        if a <= start < b:
            if start + len(answer) > b:
                return None
            s = context[a:b].strip()
            low, high = UNSPACED_LEN if lang in UNSPACED else SPACED_LEN
            # Thai writes no full stop: a sentence is what ceg's rules cut, which may be a
            # phrase; it must say more than its answer.
            ends = s[-1:] in ".!?。！？।" or (lang == "th" and len(s) >= 30 + 2 * len(answer))
            return s if low <= len(s) <= high and ends else None
    return None


def restate(question: str, answer: str, lang: str) -> str:
    """The question without its question words and mark, and the answer."""
    q = question.strip().rstrip(_QUESTION_END).strip()
    if lang in UNSPACED:
        for w in sorted(WH[lang], key=len, reverse=True):
            q = q.replace(w, "")
        return f"{q.strip()}{'：' if lang == 'zh' else ' '}{answer}{'。' if lang == 'zh' else ''}"
    words = [w for w in q.split() if w.strip(_PUNCT).casefold() not in WH[lang]]
    return f"{' '.join(words)}: {answer}."


def kind_of(answer: str) -> str:
    return "number" if any(ch.isdigit() for ch in answer) else "words"


def other_answer(answer: str, context: str, pool: Sequence[tuple[str, str]], key: str
                 ) -> str | None:
    """An answer of the same kind from another article, which ``context`` does not hold,
    of a similar length."""
    kind = kind_of(answer)
    options = [a for title, a in pool if kind_of(a) == kind and a not in context
               and answer not in a and 0.5 <= len(a) / max(1, len(answer)) <= 2.0]
    if not options:
        return None
    return options[int(digest(key, "answer")[:8], 16) % len(options)]


def change_number(sentence: str, context: str, key: str) -> tuple[str, str] | None:
    matches = list(_NUMBER.finditer(sentence))
    if not matches:
        return None
    m = matches[int(digest(key, "number")[:8], 16) % len(matches)]
    old = m.group()
    h = int(digest(key, "value")[:8], 16)
    if old.isdigit() and len(old) == 4 and 1000 <= int(old) <= 2100:
        new = str(int(old) + (1 + h % 9) * (1 if h % 2 else -1))
    else:
        digits = [i for i, ch in enumerate(old) if ch.isdigit()]
        at = digits[-1] if len(digits) == 1 else digits[h % len(digits)]
        d = (int(old[at]) + 1 + h % 8) % 10
        if at == 0 and d == 0 and len(digits) > 1:
            d = 1 if old[at] != "1" else 2
        new = old[:at] + str(d) + old[at + 1:]
    if new == old or new in context:
        return None
    return sentence[: m.start()] + new + sentence[m.end():], f"{old} -> {new}"


def items(paragraphs: list[dict[str, Any]], lang: str) -> tuple[list[dict[str, Any]],
                                                               list[dict[str, Any]]]:
    """The passages and the pairs of one language."""
    pool = [(p["title"], a) for p in paragraphs for _, a, _ in p["qas"]]
    passages, pairs = [], []
    # At most PARAGRAPHS a language, chosen by a hash (the same in every language).
    paragraphs = sorted(paragraphs, key=lambda p: digest(p["title"], str(p["n"])))
    for p in paragraphs:
        if len(passages) >= PARAGRAPHS:
            break
        pid = f"{lang}:{p['title']}:{p['n']}"
        chosen = None
        order = sorted(range(len(p["qas"])), key=lambda i: digest(pid, str(i)))
        for i in order:
            q, a, start = p["qas"][i]
            s = answer_sentence(p["context"], start, a, lang)
            if s is not None and a in s:
                chosen = (q, a, s)
                break
        if chosen is None:
            continue
        q, a, s = chosen
        others = [(t, x) for t, x in pool if t != p["title"]]
        wrong = other_answer(a, p["context"], others, pid)
        split = split_of(p["title"])
        passages.append({"type": "passage", "id": pid, "title": p["title"].replace("_", " "),
                         "text": p["context"]})
        made = [("copy", s, True, ""), ("restated", restate(q, a, lang), True, "")]
        if wrong is not None:
            made.append(("restated_wrong", restate(q, wrong, lang), False, f"{a} -> {wrong}"))
        edits = []
        num = change_number(s, p["context"], pid)
        if num:
            edits.append(("number", num[0], False, num[1]))
        if wrong is not None:
            edits.append(("answer", s.replace(a, wrong, 1), False, f"{a} -> {wrong}"))
        neg = negation_error(s, lang, pid)
        if neg:
            edits.append(("negation", neg[0], False, neg[1]))
        if edits:
            h = int(digest(pid, "edit")[:8], 16) % len(edits)
            made.append(edits[h])
        for kind, text, supported, detail in made:
            pairs.append({"type": "pair", "id": f"{pid}:{kind}", "split": split,
                          "passage": pid, "text": text, "supported": supported,
                          "kind": kind, "detail": detail, "question": q})
    return passages, pairs


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                               compresslevel=9) as gz:
        for row in rows:
            gz.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xquad", type=Path, required=True,
                        help="a clone of google-deepmind/xquad (xquad.LANG.json)")
    parser.add_argument("--piaf", type=Path, default=None,
                        help="PIAF v1.0 (etalab-ia/piaf-code, piaf-v1.0.json): French pairs "
                             "from native French Wikipedia, read as XQuAD is")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent.parent / "data" / "articles")
    args = parser.parse_args(argv)
    sources = [(lang, args.xquad / f"xquad.{lang}.json") for lang in LANGUAGES]
    if args.piaf is not None:
        sources.append(("fr", args.piaf))
    for lang, source in sources:
        if not source.is_file():
            usage_error(f"{source}: missing; --xquad names a clone of google-deepmind/xquad, "
                        "--piaf etalab-ia/piaf-code's piaf-v1.0.json")
        passages, pairs = items(read_xquad(source), lang)
        write(args.out / f"{lang}.jsonl.gz", passages + pairs)
        kinds: dict[str, int] = {}
        for r in pairs:
            kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
        log(f"[{lang}] {len(passages)} paragraphs, {len(pairs)} pairs: {kinds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
