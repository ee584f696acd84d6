"""``ceg languages``: the language codes ceg knows and what it does for each."""

from __future__ import annotations

import json

import typer

from .common import handle_errors


@handle_errors
def languages_command(
    as_json: bool = typer.Option(False, "--json", help="Print JSON lines instead of a table."),
    all_codes: bool = typer.Option(
        False, "--all", help="List every code, not only those with a splitter, stemmer or "
        "stop words of their own.",
    ),
) -> None:
    """List the codes --language takes, with how ceg splits and compares each language."""
    from ..lang.support import supported_languages

    rows = supported_languages()
    if not all_codes:
        rows = [r for r in rows if r["sentences"] == "punkt" or r["stemmer"] or r["stopwords"]
                or r["words"] != "words"]
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row, ensure_ascii=False))
        return
    typer.echo("code  language              sentences  words              stemmer   stop words")
    for r in rows:
        typer.echo(f"{r['language']:<5} {r['name'][:21]:<21} {r['sentences']:<10} "
                   f"{r['words']:<18} {r['stemmer'] or '-':<9} {r['stopwords'] or '-'}")
    if not all_codes:
        typer.echo("Every other ISO 639-1 code is taken too (ceg languages --all): split by the "
                   "rules of its script, words compared folded, no stems or stop words.")
