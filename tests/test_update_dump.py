"""``--update`` with a newer dump of the same wiki (issue 56, item 5).

Two versions of a small multistream dump at one path: pages edited (a new
revision sha1), deleted, turned into a redirect or into nothing, added. The
update must equal a fresh build of the newer dump, clean only the pages whose
revision changed, and read a multistream dump's ranges in reader processes
that have all ended when it returns.
"""

from __future__ import annotations

import bz2
import hashlib
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest
from multistream_fixture import make_multistream
from test_update import WORDS, _build, _fresh, _update, state

import ceg_cli.corpus.mediawiki
import ceg_cli.corpus.ranges
import ceg_cli.index.build.pool_engine
import ceg_cli.index.build.update as update_module
from ceg_cli.index import open_index

SITEINFO = """  <siteinfo>
    <sitename>Testwiki</sitename>
    <dbname>testwiki</dbname>
    <base>https://test.example.org/wiki/Main_Page</base>
    <namespaces>
      <namespace key="0" case="first-letter" />
      <namespace key="4" case="first-letter">Project</namespace>
      <namespace key="14" case="first-letter">{category}</namespace>
    </namespaces>
  </siteinfo>
"""


def _wikitext(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(2, 5)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 9))]
        words[1] = f"[[{words[1].capitalize()}|{words[1]}]]"
        sentences.append(" ".join(words).capitalize() + ".")
    return "'''" + " ".join(sentences) + "''' {{cite|x}}\n\n== Section ==\nMore " + \
        " ".join(rng.choice(WORDS) for _ in range(6)) + "."


def _page(page_id: int, text: str, ns: int = 0, redirect: bool = False,
          sha1: bool = True) -> str:
    title = f"Page {page_id}" if ns == 0 else f"Project:Page {page_id}"
    digest = hashlib.sha1(text.encode()).hexdigest()  # any value: ceg hashes the text
    return (f"  <page>\n    <title>{title}</title>\n    <ns>{ns}</ns>\n    <id>{page_id}</id>\n"
            + ('    <redirect title="Page 1" />\n' if redirect else "")
            + f"    <revision>\n      <id>{page_id}000</id>\n"
            f"      <timestamp>2024-01-01T00:00:00Z</timestamp>\n"
            f'      <text xml:space="preserve">{text}</text>\n'
            + (f"      <sha1>{digest}</sha1>\n" if sha1 else "")
            + "    </revision>\n  </page>\n")


def _dump(folder: Path, pages: dict[int, Any], category: str = "Category",
          sha1: bool = True) -> Path:
    """A multistream dump (two pages a stream) of ``pages``: id -> text, or (text, ns),
    or (text, "redirect"); always written as the same file names in ``folder``."""
    body = []
    for page_id, spec in pages.items():
        text, kind = spec if isinstance(spec, tuple) else (spec, 0)
        body.append(_page(page_id, text, ns=kind if isinstance(kind, int) else 0,
                          redirect=kind == "redirect", sha1=sha1))
    xml = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" '
           'xml:lang="en">\n' + SITEINFO.format(category=category) + "".join(body)
           + "</mediawiki>\n")
    plain = folder.parent / f"{folder.name}-plain.xml.bz2"
    folder.parent.mkdir(parents=True, exist_ok=True)
    plain.write_bytes(bz2.compress(xml.encode("utf-8")))
    dump, _ = make_multistream(plain, folder, per_stream=2)
    return dump


def _versions(seed: int = 7) -> tuple[dict[int, Any], dict[int, Any]]:
    """v1 and v2: 2 and 5 edited, 3 deleted, 7 a redirect, 9 nothing but a template,
    20 and 21 added, a Project: page (namespace 4) unchanged, the rest as they were."""
    rng = random.Random(seed)
    v1: dict[int, Any] = {i: _wikitext(rng) for i in range(1, 13)}
    v1[13] = (_wikitext(rng), 4)
    v2 = dict(v1)
    v2[2] = v1[2] + " An edit: zulu glacier meadow."
    v2[5] = _wikitext(rng)
    del v2[3]
    v2[7] = ("#REDIRECT [[Page 1]]", "redirect")
    v2[9] = "{{stub}}"
    v2[20] = _wikitext(rng)
    v2[21] = _wikitext(rng)
    return v1, v2


@pytest.fixture(autouse=True)
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges of two pages, four cores whatever the machine (readers are capped at them)."""
    monkeypatch.setattr(ceg_cli.corpus.ranges, "RANGE_PAGES", 2)
    monkeypatch.setattr(ceg_cli.index.build.pool_engine, "available_cores", lambda: 4)


def _plans(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The update's plans, as they read their dumps."""
    seen: list[Any] = []
    read = update_module._Plan._read_dump

    def spy(self: Any, source: str, path: Path) -> None:
        seen.append(self)
        read(self, source, path)

    monkeypatch.setattr(update_module._Plan, "_read_dump", spy)
    return seen


def _cleanings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every wikitext converted to text in this process."""
    calls: list[str] = []
    clean = ceg_cli.corpus.mediawiki.clean_wikitext

    def counted(wikitext: str, **kw: Any) -> str:
        calls.append(wikitext)
        return clean(wikitext, **kw)

    monkeypatch.setattr(ceg_cli.corpus.mediawiki, "clean_wikitext", counted)
    return calls


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_newer_dump_read_by_processes_equals_a_fresh_build_of_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v1, v2 = _versions()
    folder = tmp_path / "wiki"
    dump = _dump(folder, v1)
    _build([dump], tmp_path / "idx")
    _dump(folder, {**v1, 1: v1[1] + " Kilo."})  # an update: the record has revision digests
    _update([dump], tmp_path / "idx", workers=2)
    _dump(folder, v2)
    plans = _plans(monkeypatch)
    u = _update([dump], tmp_path / "idx", workers=2).update
    # 12 pages of namespace 0: 1 (back to v1), 2 and 5 edited, 3 gone, 7 a redirect,
    # 9 empty, 20 and 21 added.
    assert (u["changed"], u["removed"], u["added"], u["unchanged"]) == (3, 3, 2, 6)
    assert state(tmp_path / "idx") == _fresh([dump], tmp_path)
    pids = plans[0].reading.pids
    assert len(pids) >= 2 and os.getpid() not in pids
    assert not [pid for pid in pids if _alive(pid)]
    # The pages embedded again took their passage ids in dump order, as a fresh build.
    with open_index(tmp_path / "idx") as index:
        embedded = [c.doc_id for c in index.iter_chunks()  # in id order
                    if c.doc_id in {"1", "2", "5", "20", "21"}]
    assert list(dict.fromkeys(embedded)) == ["1", "2", "5", "20", "21"]


def test_unchanged_revisions_are_not_cleaned(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    v1, v2 = _versions(8)
    folder = tmp_path / "wiki"
    dump = _dump(folder, v1)
    _build([dump], tmp_path / "idx")
    _dump(folder, {**v1, 1: v1[1] + " Kilo."})
    _update([dump], tmp_path / "idx", workers=1)
    _dump(folder, v2)
    cleaned = _cleanings(monkeypatch)
    u = _update([dump], tmp_path / "idx", workers=1).update
    assert (u["changed"], u["removed"], u["added"], u["unchanged"]) == (3, 3, 2, 6)
    # The pages whose revision changed or is new (2, 5, 9, 20, 21) and page 1, whose
    # last revision this index has not seen: each once.
    assert sorted(cleaned) == sorted([v2[2], v2[5], v2[9], v2[20], v2[21], v2[1]])
    assert state(tmp_path / "idx") == _fresh([dump], tmp_path)


def test_the_first_update_of_a_built_index_embeds_only_what_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full build records no revision digests: the first update cleans every page
    once and compares its passages, and re-embeds only the changed ones."""
    v1, v2 = _versions(9)
    folder = tmp_path / "wiki"
    dump = _dump(folder, v1)
    _build([dump], tmp_path / "idx")
    _dump(folder, v2)
    u = _update([dump], tmp_path / "idx", workers=2).update
    assert (u["changed"], u["removed"], u["added"], u["unchanged"]) == (2, 3, 2, 7)
    assert u["passages_embedded"] == sum(
        1 for row in state(tmp_path / "idx")["passages"] if row[1] in {"2", "5", "20", "21"})
    assert state(tmp_path / "idx") == _fresh([dump], tmp_path)


def test_a_dump_without_sha1_is_updated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v1, v2 = _versions(10)
    folder = tmp_path / "wiki"
    dump = _dump(folder, v1, sha1=False)
    assert b"<sha1>" not in bz2.decompress((tmp_path / "wiki-plain.xml.bz2").read_bytes())
    _build([dump], tmp_path / "idx")
    _dump(folder, {**v1, 1: v1[1] + " Kilo."}, sha1=False)
    _update([dump], tmp_path / "idx", workers=2)
    _dump(folder, v2, sha1=False)
    cleaned = _cleanings(monkeypatch)
    u = _update([dump], tmp_path / "idx", workers=1).update
    assert (u["changed"], u["removed"], u["added"], u["unchanged"]) == (3, 3, 2, 6)
    assert len(cleaned) == 6
    assert state(tmp_path / "idx") == _fresh([dump], tmp_path)


def test_new_namespace_settings_are_read_as_a_full_build_reads_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Revisions unchanged, settings not: ``--namespaces 0,4`` on the same dump adds
    the Project: page; a siteinfo that names namespace 14 otherwise changes what
    ``[[Kategorie:...]]`` cleans to, and the page is cleaned again."""
    v1, _ = _versions(11)
    v1[4] = v1[4] + " See [[Kategorie:Alpha bravo]] too."
    folder = tmp_path / "wiki"
    dump = _dump(folder, v1)
    _build([dump], tmp_path / "idx")
    _dump(folder, {**v1, 1: v1[1] + " Kilo."})
    _update([dump], tmp_path / "idx", workers=1)
    u = _update([dump], tmp_path / "idx", workers=1, namespaces=frozenset({0, 4})).update
    assert (u["added"], u["changed"], u["removed"]) == (1, 0, 0)
    assert state(tmp_path / "idx") == _fresh([dump], tmp_path, namespaces=frozenset({0, 4}))
    _dump(folder, {**v1, 1: v1[1] + " Kilo."}, category="Kategorie")
    cleaned = _cleanings(monkeypatch)
    u = _update([dump], tmp_path / "idx", workers=1, namespaces=frozenset({0, 4})).update
    assert len(cleaned) == 13  # the siteinfo enters every page's digest
    assert (u["changed"], u["added"], u["removed"]) == (1, 0, 0)
    assert state(tmp_path / "idx") == _fresh([dump], tmp_path, namespaces=frozenset({0, 4}))


def test_the_revision_sha1_is_the_dumps(tmp_path: Path) -> None:
    """The sha1 ceg computes of a revision's text is the one MediaWiki writes."""
    from conftest import MINI_WIKI

    from ceg_cli.corpus.mediawiki import read_revisions, revision_sha1

    xml = bz2.decompress(MINI_WIKI.read_bytes()).decode("utf-8")
    written = dict(re.findall(r"<page>.*?<id>(\d+)</id>.*?<sha1>(\w+)</sha1>", xml, re.S))
    revisions = [r for _, r in read_revisions(MINI_WIKI)]
    assert revisions
    for revision in revisions:
        assert revision_sha1(revision.wikitext) == written[revision.page_id]


def test_readers_end_when_a_range_fails_and_the_index_stays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ceg_cli.errors import InputError

    v1, v2 = _versions(12)
    folder = tmp_path / "wiki"
    dump = _dump(folder, v1)
    _build([dump], tmp_path / "idx")
    before = state(tmp_path / "idx")
    _dump(folder, v2)
    data = bytearray(dump.read_bytes())
    streams = [m.start() for m in re.finditer(rb"BZh[1-9]1AY&SY", bytes(data))]
    at = streams[len(streams) // 2] + 20  # inside a stream in the middle: not bz2 data
    data[at:at + 40] = b"\0" * 40
    dump.write_bytes(bytes(data))
    plans = _plans(monkeypatch)
    with pytest.raises(InputError, match=re.escape(str(dump))):
        _update([dump], tmp_path / "idx", workers=2)
    pids = plans[0].reading.pids
    assert len(pids) >= 2 and not [pid for pid in pids if _alive(pid)]
    assert state(tmp_path / "idx") == before


def test_readers_end_on_ctrl_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the readers read (here: at the first warning, page 9's, that the
    update says): they are stopped, the update says nothing more, the index stays."""
    from test_update import OPTIONS, _embedder

    from ceg_cli.index.build.builder import BuildOptions, build_index

    v1, v2 = _versions(13)
    folder = tmp_path / "wiki"
    dump = _dump(folder, v1)
    _build([dump], tmp_path / "idx")
    before = state(tmp_path / "idx")
    _dump(folder, v2)
    plans = _plans(monkeypatch)

    def interrupt(message: str) -> None:
        raise KeyboardInterrupt

    options = BuildOptions(**{**OPTIONS.__dict__, "update": True, "workers": 2})
    with pytest.raises(KeyboardInterrupt):
        build_index([dump], tmp_path / "idx", options, embedder=_embedder(),
                    on_warning=interrupt)
    pids = plans[0].reading.pids
    assert len(pids) >= 2 and not [pid for pid in pids if _alive(pid)]
    assert state(tmp_path / "idx") == before


def test_other_cleaning_rules_clean_every_page_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ceg whose cleaning rules differ (``cleaning_rules``) cleans each page of a changed
    dump again: pages whose passages come out the same are not embedded again, and
    where the new rules change a page's text, its passages are replaced."""
    v1, v2 = _versions(14)
    folder = tmp_path / "wiki"
    dump = _dump(folder, v1)
    _build([dump], tmp_path / "idx")
    _dump(folder, {**v1, 1: v1[1] + " Kilo."})
    _update([dump], tmp_path / "idx", workers=1)
    _dump(folder, v2)
    monkeypatch.setattr(ceg_cli.corpus.mediawiki, "cleaning_rules", lambda: "other rules")
    clean = ceg_cli.corpus.mediawiki.clean_wikitext

    def cleaned_otherwise(wikitext: str, **kw: Any) -> str:  # page 4's text changes
        text = clean(wikitext, **kw)
        return text + " Lima." if wikitext == v1[4] else text

    monkeypatch.setattr(ceg_cli.corpus.mediawiki, "clean_wikitext", cleaned_otherwise)
    cleaned = _cleanings(monkeypatch)
    u = _update([dump], tmp_path / "idx", workers=1).update
    assert len(cleaned) == 12  # every page of namespace 0 in the newer dump
    assert (u["changed"], u["removed"], u["added"], u["unchanged"]) == (4, 3, 2, 5)
    with open_index(tmp_path / "idx") as index:
        assert any(c.doc_id == "4" and c.text.endswith("Lima.") for c in index.iter_chunks())
    assert state(tmp_path / "idx") == _fresh([dump], tmp_path)
