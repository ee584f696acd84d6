"""Regenerate ceg_cli/corpus/wikinames.json: each Wikipedia's names for Media, File
and Category links, and its redirect words.

A dump's <siteinfo> names each namespace once, in its wiki's language; the
aliases editors also type (German "Bild:" for "Datei:", Chinese "分类:" where
zhwiki's siteinfo says "Category", Arabic "صورة:" for "ملف:") and the localized
"#REDIRECT" words are not in a dump. They are in MediaWiki's siteinfo API
(namespaces, namespacealiases, magicwords), which DBpedia's extraction framework
collects for every Wikipedia into two generated files:

    core/src/main/scala/org/dbpedia/extraction/wikiparser/impl/wikipedia/Namespaces.scala
    core/src/main/scala/org/dbpedia/extraction/wikiparser/impl/wikipedia/Redirect.scala

Usage: python scripts/wiki_names.py FOLDER_WITH_THOSE_TWO_FILES [COMMIT]

Only the names of namespaces -2 (Media), 6 (File) and 14 (Category) are kept,
and the redirect words without their "#"; English's own names are left out
(ceg always knows them).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "ceg_cli" / "corpus" / "wikinames.json"
_KEYS = {"-2": "media", "6": "file", "14": "category"}
_ENGLISH = {"media", "file", "image", "category"}
_LANGS = re.compile(r'"([a-z][a-z0-9-]*)"->([a-z_]+)_(?:namespaces|redirects)')
_DEF = re.compile(
    r"private def ([a-z_]+)_(namespaces|redirects) = (?:LinkedHashMap|Set)\((.*)\)\s*$"
)
_PAIR = re.compile(r'"((?:[^"\\]|\\.)*)"->\s*(-?\d+)')
_WORD = re.compile(r'"((?:[^"\\]|\\.)*)"')


def main(folder: Path, commit: str) -> None:
    names = (folder / "Namespaces.scala").read_text(encoding="utf-8")
    redirects = (folder / "Redirect.scala").read_text(encoding="utf-8")
    codes = {ident: code for code, ident in _LANGS.findall(names + redirects)}
    table: dict[str, dict[str, list[str]]] = {}
    for text in (names, redirects):
        for line in text.splitlines():
            found = _DEF.search(line)
            if found is None or found.group(1) not in codes:
                continue
            code, kind, body = codes[found.group(1)], found.group(2), found.group(3)
            entry = table.setdefault(code, {})
            if kind == "namespaces":
                for name, key in _PAIR.findall(body):
                    if key in _KEYS and name.casefold() not in _ENGLISH:
                        entry.setdefault(_KEYS[key], []).append(name)
            else:
                # A few entries carry stray quotes ("'#REDIRECT", "дӀасахьажор'").
                words = [w.strip(" '").lstrip("#＃").strip() for w in _WORD.findall(body)]
                kept = [w for w in words if w and w.casefold() != "redirect"]
                if kept:
                    entry["redirect"] = kept
    for entry in table.values():
        for kind, values in entry.items():
            entry[kind] = sorted(set(values))
    data = {
        "source": "MediaWiki siteinfo (namespaces, namespacealiases, magicwords) of each "
        "Wikipedia, as collected by dbpedia/extraction-framework "
        f"@ {commit} (Namespaces.scala, Redirect.scala); regenerate with "
        "scripts/wiki_names.py",
        "languages": {code: table[code] for code in sorted(table) if table[code]},
    }
    OUT.write_text(
        json.dumps(data, ensure_ascii=False, indent=0, sort_keys=False) + "\n", encoding="utf-8"
    )
    print(f"{OUT}: {len(data['languages'])} languages")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "unknown")
