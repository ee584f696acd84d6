"""What a wiki in another language writes for files, categories and redirects.

A dump's ``<siteinfo>`` names each namespace once, in its wiki's language
(``Datei``, ``Kategorie``; ``ملف``, ``تصنيف``), and ``mediawiki`` reads those.
Editors also type the namespaces' aliases, which no dump carries: German
``[[Bild:...]]`` for ``Datei``, Chinese ``[[分类:...]]`` where zhwiki's siteinfo
says ``Category``, Japanese ``[[画像:...]]``, Arabic ``[[صورة:...]]``; and a
redirect page may start with its language's word (``#WEITERLEITUNG``,
``#重定向``, ``#تحويل``) rather than ``#REDIRECT``. ``wikinames.json`` holds
those names for each Wikipedia language, as MediaWiki's siteinfo API reports
them (``scripts/wiki_names.py`` says where from and regenerates it); the
dump's own language (``xml:lang`` on ``<mediawiki>``, else its ``<dbname>``)
picks the entry.

Chinese and a few other wikis also write language-variant markup, ``-{...}-``
(``-{zh-hans:信息;zh-hant:資訊;}-``), which ``convert_variants`` resolves to
one variant's text, as a reader of the page sees it.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources

from ceg_cli.lang.codes import LANGUAGES, base_language

__all__ = [
    "VARIANT_LANGUAGES",
    "convert_variants",
    "language_of",
    "local_names",
    "pages_language",
    "redirect_pattern",
]

#: Wikis whose pages may hold ``-{...}-`` variant markup (MediaWiki's LanguageConverter).
VARIANT_LANGUAGES = frozenset(
    {"zh", "gan", "wuu", "sr", "sh", "kk", "ku", "uz", "tg", "iu", "shi", "crh", "ban", "tly",
     "zgh"}
)  # fmt: skip
#: For a Chinese page, simplified script first, then the traditional ones.
_ZH_PREFERENCE = ("zh-hans", "zh-cn", "zh-sg", "zh-my", "zh", "zh-hant", "zh-tw", "zh-hk", "zh-mo")
#: Wikis whose pages are in many languages, whatever their ``xml:lang`` says.
MULTILINGUAL_WIKIS = frozenset(
    {"commonswiki", "metawiki", "specieswiki", "incubatorwiki", "mediawikiwiki", "wikidatawiki",
     "sourceswiki", "outreachwiki", "foundationwiki", "testwiki", "test2wiki", "wikimaniawiki",
     "wikifunctionswiki", "betawikiversity", "testwikidatawiki", "testcommonswiki"}
)  # fmt: skip
_DBNAME = re.compile(r"^([a-z][a-z_]*?)wiki$")
_CODE = re.compile(r"^[a-z]{2,3}(?:-[a-z0-9]+)*$")


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, list[str]]]:
    text = resources.files("ceg_cli.corpus").joinpath("wikinames.json").read_text("utf-8")
    return json.loads(text)["languages"]  # type: ignore[no-any-return]


def language_of(xml_lang: str | None, dbname: str | None) -> str | None:
    """The wiki's language code: the dump's ``xml:lang``, else its ``<dbname>``'s prefix."""
    lang = (xml_lang or "").strip().lower()
    if _CODE.match(lang):
        return lang
    found = _DBNAME.match((dbname or "").strip().lower())
    return found.group(1).replace("_", "-") if found else None


def pages_language(language: str | None, dbname: str | None) -> str | None:
    """The language every page of a wiki is written in: the wiki's own ``language``
    (``language_of``) where it is a code ceg knows and the wiki is of one language;
    None for the wikis written in many (Commons, Meta, Wikispecies, ...), whose pages'
    languages are detected one by one."""
    if language is None or (dbname or "").strip().lower() in MULTILINGUAL_WIKIS:
        return None
    code = base_language(language)
    return code if code in LANGUAGES else None


def local_names(language: str | None) -> dict[str, tuple[str, ...]]:
    """A language's names for ``media``, ``file`` and ``category`` links and its
    ``redirect`` words (each kind possibly empty); nothing for English or an unknown code."""
    entry = _table().get(language or "", {})
    kinds = ("media", "file", "category", "redirect")
    return {kind: tuple(entry.get(kind, ())) for kind in kinds}


def redirect_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """Matches the start of a redirect page's text: ``#REDIRECT`` (any case, a prefix as
    before) or ``#`` and one of ``words`` as a whole word (``#WEITERLEITUNG``,
    ``＃転送``; an underscore in a word also matches a space)."""
    local = [re.escape(w).replace("_", "[_ ]") for w in sorted(words, key=len, reverse=True)]
    alternatives = "redirect" + "".join(f"|(?:{w})(?![^\\W_])" for w in local)
    return re.compile(rf"\s*[#＃](?:{alternatives})", re.IGNORECASE)


_VARIANT_BLOCK = re.compile(r"-\{([^{}]*)\}-")
_FLAGS = re.compile(r"^\s*([A-Za-z\-;\s]{1,40}?)\s*\|")
_RULE = re.compile(r"(?:^|;)\s*([a-z]{2,3}(?:-[a-z0-9]+)*)\s*:")
_HIDDEN_FLAGS = frozenset("TH-D")


def convert_variants(wikitext: str, language: str | None) -> str:
    """Resolve ``-{...}-`` markup to the text one variant's reader sees.

    ``-{text}-`` is text kept from conversion; ``-{zh-hans:A;zh-hant:B;}-`` is
    A (for Chinese the simplified variant when given, else the first listed);
    ``-{R|raw}-`` is raw; rules that show nothing (``T|``, ``H|``, ``-|``,
    ``D|``) go; ``A|`` rules show their text. Innermost blocks first.
    """
    if "-{" not in wikitext:
        return wikitext
    chinese = (language or "").split("-")[0] in {"zh", "gan", "wuu"}
    for _ in range(8):  # nested blocks, innermost first; real pages nest one deep
        converted = _VARIANT_BLOCK.sub(lambda m: _resolve(m.group(1), chinese), wikitext)
        if converted == wikitext:
            break
        wikitext = converted
    return wikitext


def _resolve(body: str, chinese: bool) -> str:
    flags = _FLAGS.match(body)
    if flags is not None and _known_flags(flags.group(1)):
        letters = {
            c for part in flags.group(1).split(";") if not _CODE.match(part.strip())
            for c in part.strip()
        }
        body = body[flags.end() :]
        if letters & _HIDDEN_FLAGS:
            return ""
        if "R" in letters:
            return body
    source, arrow, rules = body.partition("=>")
    if not arrow:
        rules, source = body, ""
    found = list(_RULE.finditer(rules))
    if not found:
        return body if not arrow else source
    texts: dict[str, str] = {}
    for i, rule in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(rules)
        texts.setdefault(rule.group(1), rules[rule.end() : end].strip().rstrip(";").strip())
    if chinese:
        for variant in _ZH_PREFERENCE:
            if variant in texts:
                return texts[variant]
    return next(iter(texts.values()))


def _known_flags(flags: str) -> bool:
    """``A``, ``R``, ``T``... or variant codes: a ``-{...|...}-`` block's flags."""
    parts = [p.strip() for p in flags.split(";") if p.strip()]
    return bool(parts) and all(
        (len(p) <= 3 and set(p) <= set("ATRDHN-")) or _CODE.match(p) for p in parts
    )
