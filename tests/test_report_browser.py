"""The HTML report in a real browser: Debian's headless Chromium driven by Playwright.

Each test opens a report from disk (a ``file://`` URL) in a fresh page and
fails on any console error or uncaught exception and on any request other
than the file itself. The set-up installs Chromium (``apt-get install
chromium``) and Playwright's Python package; Playwright's own browser
downloads are never used.

The sample report's screenshot in the README is taken by
``test_sample_report_screenshot``; to refresh it, check the sample against
the enwiki sample index::

    CEG_UPDATE_SCREENSHOT=1 CEG_INDEX=/path/to/sample/index \\
        .venv/bin/python -m pytest tests/test_report_browser.py -k screenshot
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    expect,
    sync_playwright,
)
from test_html_report import (
    BUILT_CONTEXT,
    EIFFEL_CONTEXT,
    HOSTILE_CONTEXT,
    HOSTILE_QUESTION,
    HOSTILE_TEXT,
    IRRELEVANT_REASON,
    TUTOR,
    UNRESOLVED_REASON,
    contexts_records,
    report_records,
    response,
)

from ceg_cli.report.html import write_report
from ceg_cli.report.records import to_record
from ceg_cli.types import FACTUAL, NONFACTUAL, NOT_ENOUGH_EVIDENCE, SUPPORTED, Evidence, Verdict

REPO = Path(__file__).resolve().parent.parent
SCREENSHOT = REPO / "docs" / "report-screenshot.png"
CHROMIUM = os.environ.get("CEG_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-quic",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium, shared by the tests of this module.

    Playwright starts it with a fresh temporary ``--user-data-dir`` and gives
    each test its own context (no shared cookies, storage or cache).
    """
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"needs Chromium at {CHROMIUM}, which pip does not install: "
                    "scripts/setup installs Debian's (apt-get install chromium), or set "
                    "CEG_CHROMIUM to one")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


class Opened:
    """A report open in a page, with what the page logged and requested."""

    def __init__(self, page: Page, url: str) -> None:
        self.page, self.url = page, url
        self.problems: list[str] = []
        self.requests: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.problems.append(f"uncaught: {e}"))
        page.on("request", lambda r: self.requests.append(r.url))
        page.goto(url)
        page.wait_for_selector("html[data-ready]")

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"{message.type}: {message.text}")

    def cards(self) -> list[str]:
        return self.page.eval_on_selector_all("#list > article", "cs => cs.map(c => c.className)")

    def assert_clean(self) -> None:
        assert self.problems == []
        assert self.requests == [self.url]


@pytest.fixture
def open_report(browser: Browser, tmp_path: Path) -> Iterator[Callable[..., Opened]]:
    """``open_report(records=None, bypass_csp=False, **write_report_options)``."""
    contexts: list[BrowserContext] = []

    def open_(
        records: list[dict[str, Any]] | None = None, bypass_csp: bool = False, **options: Any
    ) -> Opened:
        path = tmp_path / f"report{len(contexts)}.html"
        write_report(path, report_records() if records is None else records, **options)
        contexts.append(browser.new_context(
            viewport={"width": 1280, "height": 900}, offline=True, bypass_csp=bypass_csp))
        return Opened(contexts[-1].new_page(), path.as_uri())

    yield open_
    for context in contexts:
        context.close()


def test_opens_from_disk_without_errors_or_requests(open_report: Callable[..., Opened]) -> None:
    report = open_report()
    assert len(report.cards()) == 5
    assert report.page.text_content("#status") == "Showing 1–5 of 5 responses"
    # The overview is there before any interaction.
    assert report.page.is_visible("text=Nonfactual rate")
    report.assert_clean()


def test_an_empty_report_opens(open_report: Callable[..., Opened]) -> None:
    report = open_report([])
    assert report.cards() == []
    assert report.page.text_content("#status") == "No response matches."
    assert report.page.is_disabled("#next")
    report.assert_clean()


def test_only_nonfactual_filter(open_report: Callable[..., Opened]) -> None:
    report = open_report()
    report.page.check("#filter-nonfactual")
    assert report.cards() == ["card label-nonfactual"] * 2
    # The keyboard toggles it back.
    report.page.keyboard.press("f")
    assert len(report.cards()) == 5
    report.page.keyboard.press("f")
    assert report.cards() == ["card label-nonfactual"] * 2
    report.assert_clean()


def test_citation_marker_reveals_the_passage(open_report: Callable[..., Opened]) -> None:
    report = open_report()
    card = report.page.locator("#r0")
    passage = card.locator(".sources blockquote", has_text=TUTOR.text)
    assert not passage.is_visible()
    card.locator("button.cite", has_text="[2]").click()
    assert passage.is_visible()
    source = card.locator("#r0-s2")
    assert "similarity 0.71" in source.inner_text()
    link = source.locator("a")
    assert link.get_attribute("href") == TUTOR.url
    assert link.get_attribute("rel") == "noopener noreferrer"
    # Focus moved to the revealed source, so the keyboard carries on from there.
    assert report.page.evaluate("document.activeElement.closest('li').id") == "r0-s2"
    report.assert_clean()


def test_flag_jumps_to_the_judge_reason(open_report: Callable[..., Opened]) -> None:
    report = open_report()
    card = report.page.locator("#r1")
    reason = card.locator("#r1-f2")
    assert "the evidence says 384 BC" in reason.inner_text()
    assert "contradicted" in reason.inner_text()
    card.locator("button.flag").nth(1).click()
    assert report.page.evaluate("document.activeElement.closest('li').id") == "r1-f2"
    evidence = reason.locator("details.evidence")
    assert evidence.get_attribute("open") == ""
    report.assert_clean()


@pytest.mark.parametrize("bypass_csp", [False, True], ids=["with-csp", "escaping-alone"])
def test_hostile_response_renders_as_text(
    open_report: Callable[..., Opened], bypass_csp: bool
) -> None:
    """Safe twice over: the page's policy would block a script, and none gets made."""
    report = open_report(bypass_csp=bypass_csp)
    page = report.page
    page.locator("#r2 button.flag").click()
    page.locator("#r2 details.passage").first.click()  # expand the hostile passage too
    assert page.evaluate("typeof window.__pwned") == "undefined"
    card = page.locator("#r2")
    text = card.inner_text()
    assert HOSTILE_TEXT in text
    assert HOSTILE_QUESTION in text
    assert "<img src=x onerror=window.__pwned=5> passage" in text
    assert '"><script>window.__pwned=7</script>' in card.locator("h3").inner_text()
    # Markup in the data made no elements, and a javascript: URL is not a link.
    assert card.locator("script, img, svg, i, b").count() == 0
    assert card.locator("a").count() == 0
    assert "Source: javascript:window.__pwned=6" in text
    report.assert_clean()


def test_search_narrows_the_list(open_report: Callable[..., Opened]) -> None:
    report = open_report()
    page = report.page
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "search"
    page.keyboard.type("julius caesar")
    expect(page.locator("#list > article")).to_have_count(1)
    assert page.locator("#list h3").inner_text() == "flagged"
    page.fill("#search", "no such words anywhere")
    expect(page.locator("#status")).to_have_text("No response matches (5 in all).")
    page.fill("#search", "")
    expect(page.locator("#list > article")).to_have_count(5)
    report.assert_clean()


def test_keyboard_moves_between_responses(open_report: Callable[..., Opened]) -> None:
    report = open_report()
    page = report.page
    for expected in ("r0", "r1", "r2"):
        page.keyboard.press("j")
        assert page.evaluate("document.activeElement.id") == expected
    page.keyboard.press("k")
    assert page.evaluate("document.activeElement.id") == "r1"
    report.assert_clean()


def test_large_reports_render_one_page(open_report: Callable[..., Opened]) -> None:
    base = report_records()[1]
    records = [{**base, "id": f"resp-{n}", "line": n} for n in range(1, 121)]
    report = open_report(records)
    page = report.page
    assert page.locator("#list > article").count() == 50
    assert page.text_content("#page") == "Page 1 of 3"
    page.keyboard.press("]")
    assert page.locator("#list h3").first.inner_text() == "resp-51"
    page.select_option("#size", "100")
    assert page.locator("#list > article").count() == 100
    page.click("#next")
    assert page.text_content("#status") == "Showing 101–120 of 120 responses"
    report.assert_clean()


def test_regeneration_attempts_side_by_side(open_report: Callable[..., Opened]) -> None:
    report = open_report()
    columns = report.page.locator("#r1 .regen-grid > .attempt")
    assert columns.count() == 2
    assert columns.nth(0).inner_text().startswith("Original")
    final = columns.nth(1)
    assert "Final answer" in final.inner_text()
    assert "final" in (final.get_attribute("class") or "").split()
    final.locator("button.cite").click()
    assert final.locator("blockquote", has_text=TUTOR.text).is_visible()
    report.assert_clean()


def test_print_shows_every_match_with_passages_open(open_report: Callable[..., Opened]) -> None:
    base = report_records()[0]
    report = open_report([{**base, "id": f"r{n}"} for n in range(60)])
    page = report.page
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    assert page.locator("#list > article").count() == 60
    assert page.locator("#list details:not([open])").count() == 0
    page.evaluate("window.dispatchEvent(new Event('afterprint'))")
    assert page.locator("#list > article").count() == 50
    report.assert_clean()


# -- records checked against their own contexts ------------------------------------


def test_contexts_are_shown_with_their_sources(open_report: Callable[..., Opened]) -> None:
    report = open_report(contexts_records())
    card = report.page.locator("#r0")
    items = card.locator(".contexts > ol > li")
    assert items.count() == 3
    head = card.locator(".contexts h4").text_content()
    assert head == "Contexts (3) from the field retrieved_contexts"
    assert "checked against its contexts" in card.locator(".meta").inner_text()
    first = items.nth(0)
    assert first.locator("summary .mark").inner_text() == "[1]"
    assert first.locator("summary .ptitle").inner_text() == "Eiffel Tower"
    assert "id eiffel" in first.locator("summary").inner_text()
    first.locator("summary").click()
    assert first.locator("blockquote").inner_text() == EIFFEL_CONTEXT["text"]
    assert first.locator("a").get_attribute("href") == EIFFEL_CONTEXT["url"]
    # A context with neither title nor id is named by its position.
    assert items.nth(1).locator("summary .ptitle").inner_text() == "context 2"
    # Only index passages are listed as sources: these are shown in their contexts.
    assert card.locator(".sources").count() == 0
    # The record whose list of contexts was empty says it was judged on no evidence.
    empty = report.page.locator("#r1")
    assert "judged on no evidence" in empty.locator(".contexts").inner_text()
    report.assert_clean()


def test_citation_reveals_the_passage_inside_its_context(
    open_report: Callable[..., Opened],
) -> None:
    report = open_report(contexts_records())
    page = report.page
    card = page.locator("#r0")
    built = card.locator("#r0-c2")
    assert not built.locator("blockquote").is_visible()
    card.locator("button.cite.ctx", has_text="ctx 2").click()
    mark = built.locator("mark.hl")
    assert mark.is_visible()
    # Exactly the cited span, though two characters outside the BMP come before it.
    assert mark.inner_text() == "the tower was finished in March 1889"
    assert built.locator("blockquote").inner_text() == BUILT_CONTEXT
    assert "on" in (mark.get_attribute("class") or "").split()
    assert page.evaluate("document.activeElement.tagName") == "MARK"
    assert "It was finished in 1889" in (mark.get_attribute("title") or "")
    # The other contexts' passages are highlighted too, but not the one just shown.
    card.locator("button.cite.ctx", has_text="ctx 1").click()
    assert card.locator("mark.on").count() == 1
    assert card.locator("#r0-c1 mark.on").inner_text().startswith("The Eiffel Tower is")
    report.assert_clean()


def test_failed_citation_is_visible_beside_its_sentence(
    open_report: Callable[..., Opened],
) -> None:
    report = open_report(contexts_records())
    page = report.page
    card = page.locator("#r0")
    # Each mark follows its own sentence (after ceg's markers), on the same line.
    beside = card.evaluate("""c => [...c.querySelectorAll('.text .cc')].map(m => {
        let s = m.previousElementSibling;
        while (s && !s.classList.contains('seg')) s = s.previousElementSibling;
        const a = s.getClientRects(), b = m.getBoundingClientRect();
        const last = a[a.length - 1];
        return [s.textContent, m.className, m.textContent, Math.abs(last.top - b.top) < 12];
    })""")
    assert [b[:2] for b in beside] == [
        ["The Eiffel Tower is in Paris [1].", "cc ok"],
        ["It was finished in 1889 [2][3].", "cc bad k-unsupported"],
        ["It is 500 metres tall [7].", "cc bad k-unsupported"],
        ["Gustave Eiffel's company built it.", "cc bad k-uncited"],
    ]
    assert all(b[3] for b in beside)
    assert beside[0][2] == "[1]✓"
    assert [b[2] for b in beside[1:]] == [
        "⚠ irrelevant citation: " + IRRELEVANT_REASON,
        "⚠ unsupported citation: " + UNRESOLVED_REASON,
        "⚠ no citation: a claim with no citation",
    ]
    assert card.locator(".text .cc.bad").nth(1).get_attribute("title") == (
        "cited [7] does not support it; [7] names no context")
    for n in (1, 2, 3):
        assert card.locator(".text .cc.bad").nth(n - 1).is_visible()
    # The record's own figures are in its header, the run's in the overview.
    assert card.locator(".card-head .ccsum").inner_text() == (
        "citation recall 50% · precision 50%")
    assert page.locator(".tile.cite-rate").count() == 2
    # The mark of an irrelevant citation opens that context.
    card.locator(".text .cc.bad").first.click()
    assert card.locator("#r0-c3 blockquote").is_visible()
    report.assert_clean()


@pytest.mark.parametrize("bypass_csp", [False, True], ids=["with-csp", "escaping-alone"])
def test_hostile_context_renders_as_text(
    open_report: Callable[..., Opened], bypass_csp: bool
) -> None:
    report = open_report(contexts_records(), bypass_csp=bypass_csp)
    page = report.page
    hostile = page.locator("#r0-c3")
    hostile.locator("summary").click()
    page.locator("#r0 button.cite.ctx", has_text="ctx 3").click()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    text = hostile.inner_text()
    assert HOSTILE_CONTEXT["title"] in text and HOSTILE_CONTEXT["text"] in text
    # A javascript: URL is shown, not linked; markup made no element.
    assert hostile.locator("a").count() == 0
    assert "Source: javascript:window.__pwned=9" in text
    assert hostile.locator("script, img, svg").count() == 0
    report.assert_clean()


@pytest.mark.slow
def test_sample_report_screenshot(
    open_report: Callable[..., Opened], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The sample responses checked for real, then reported; the README's screenshot.

    CI checks them against the mini index; ``CEG_UPDATE_SCREENSHOT=1`` checks
    them against ``$CEG_INDEX`` (the enwiki sample index) and rewrites the
    committed image.
    """
    from ceg_cli.check.run import CheckRun, RunSettings

    update = os.environ.get("CEG_UPDATE_SCREENSHOT", "") not in ("", "0")
    index = Path(os.environ["CEG_INDEX"]) if update else request.getfixturevalue("mini_index")
    out = tmp_path / "sample-checked.jsonl"
    settings = RunSettings.resolve(responses=str(REPO / "sample_data" / "responses.jsonl"),
                                   index=index, out=out)
    run = CheckRun(settings)
    try:
        run.execute()
        gate = run.finish()
    finally:
        run.close()
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    report = open_report(records, summary=run.summary, gate=gate, index=index)
    page = report.page
    assert len(report.cards()) == 8
    # What a reviewer does first: only the nonfactual answers, one citation opened.
    page.check("#filter-nonfactual")
    nonfactual = sum(r["label"] == "nonfactual" for r in records)
    assert len(report.cards()) == nonfactual > 0
    # The aristotle response cites the Aristotle article, which both indexes hold.
    page.locator("#list button.cite").first.click()
    assert page.locator("#list .sources details[open] blockquote").first.is_visible()
    page.evaluate("window.scrollTo(0, 0)")
    shot = SCREENSHOT if update else tmp_path / "screenshot.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 1440})
    page.screenshot(path=str(shot), full_page=False, animations="disabled")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == 1280  # the IHDR width
    report.assert_clean()


# -- answers in other scripts (issue 39.8) -------------------------------------------

ARABIC_ANSWER = "ولد أرسطو في ستاغيرا عام 384 قبل الميلاد. وكان معلم الإسكندر الأكبر."
CHINESE_ANSWER = "亚里士多德出生于斯塔基拉。他是亚历山大大帝的老师。他在1900年获得了诺贝尔奖。"
ARABIC_PASSAGE = Evidence(40, "3", "أرسطو", "أرسطو فيلسوف يوناني ولد في ستاغيرا سنة 384 ق.م.",
                          0.77, "https://ar.wikipedia.org/wiki/أرسطو")


def multilingual_records() -> list[dict[str, Any]]:
    supported = Verdict(FACTUAL, SUPPORTED, 0.9, (0,), "found in the passage")
    arabic_segments = ARABIC_ANSWER.split(". ")
    arabic = response(
        "ar", 1, ARABIC_ANSWER,
        [(arabic_segments[0] + ".", supported, (ARABIC_PASSAGE,)),
         (arabic_segments[1],
          Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.2, (), "'الإسكندر' غير موجود"),
          (ARABIC_PASSAGE,))],
        "من هو أرسطو؟",
    )
    chinese_segments = [s + "。" for s in CHINESE_ANSWER.split("。") if s]
    chinese = response(
        "zh", 2, CHINESE_ANSWER,
        [(chinese_segments[0], supported, (TUTOR,)), (chinese_segments[1], supported, (TUTOR,)),
         (chinese_segments[2],
          Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.1, (), "'1900' 不在证据中"), (TUTOR,))],
        "亚里士多德是谁？",
    )
    judge = {"name": "test", "method": "a judge for tests"}
    return [to_record(c, judge) for c in (arabic, chinese)]


def test_arabic_and_chinese_answers_read_in_their_direction_with_exact_highlights(
    open_report: Callable[..., Opened],
) -> None:
    records = multilingual_records()
    report = open_report(records)
    assert len(report.cards()) == 2
    page = report.page
    for record in records:
        card = f"#list > article[aria-label='Response {record['id']}']"
        spans = page.eval_on_selector_all(f"{card} .text > span.seg",
                                          "ss => ss.map(s => s.textContent)")
        # Each highlight holds exactly its segment's characters (offsets in characters
        # in the output, UTF-16 in the page).
        assert spans == [s["text"] for s in record["segments"]]
        assert spans == [record["response"][s["start"]:s["end"]] for s in record["segments"]]
    direction = "e => getComputedStyle(e).direction"
    ar = "#list > article[aria-label='Response ar']"
    zh = "#list > article[aria-label='Response zh']"
    assert page.eval_on_selector(f"{ar} .text", direction) == "rtl"
    assert page.eval_on_selector(f"{zh} .text", direction) == "ltr"
    # Right to left on screen: the first Arabic segment starts at the right edge.
    box = page.eval_on_selector(
        "#list > article[aria-label='Response ar'] .text",
        "e => { const t = e.getBoundingClientRect(); const s = e.querySelector('span.seg')"
        ".getBoundingClientRect(); return [t.left, t.right, s.left, s.right]; }",
    )
    assert abs(box[1] - box[3]) < 4 and box[2] - box[0] > 20
    # The question, the judge's reason and the passage text are isolated too.
    assert page.eval_on_selector_all(
        "#list > article[aria-label='Response ar'] [dir=auto]", "es => es.length") >= 5
    page.click("#list > article[aria-label='Response ar'] button.flag")
    reason = page.text_content("#list > article[aria-label='Response ar'] .flagged .reason")
    assert "'الإسكندر' غير موجود" in reason
    report.assert_clean()


def test_cjk_and_arabic_glyphs_render(open_report: Callable[..., Opened]) -> None:
    """A glyph the page's fonts lack is drawn as the same empty box as an unassigned
    character: the Chinese and Arabic text must be wider or narrower than those boxes."""
    report = open_report(multilingual_records())
    widths = report.page.evaluate(
        """() => {
          const probe = (text) => {
            const s = document.createElement("span"); s.textContent = text;
            document.body.append(s);
            const w = s.getBoundingClientRect().width; s.remove(); return w;
          };
          return {missing: probe("\\uE000\\uE001\\uE002"), zh: probe("亚里士多"),
                  ar: probe("ولد أر")};
        }"""
    )
    assert widths["zh"] > 0 and widths["ar"] > 0
    assert abs(widths["zh"] * 3 / 4 - widths["missing"]) > 1, widths
    report.assert_clean()


def spans_records() -> list[dict[str, Any]]:
    """A flagged segment with a name and a date unsupported, after an emoji (two UTF-16
    units in JavaScript, one character in Python), and an Arabic one."""
    from ceg_cli.check.pipeline import CheckedResponse, ResponseInput, SegmentResult
    from ceg_cli.types import Segment, Span, SpanEvidence

    lincoln = Evidence(7, "d7", "Abraham Lincoln", "Lincoln was born in 1809 in Kentucky.", 0.7)
    text = "🚀 Lincoln was born in Springfield in 1812."
    seg_start = text.index("Lincoln")
    at = text.index("Springfield")
    year = text.index("1812")
    result = SegmentResult(
        Segment(0, seg_start, len(text), text[seg_start:]),
        Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.2, (), "'Springfield' and '1812' missing"),
        (lincoln,),
        spans=(Span(at, at + 11, "Springfield", "name"),
               Span(year, year + 4, "1812", "date", SpanEvidence("1809", 0))))
    arabic = "ولد لينكولن في بوسطن عام 1812."
    where = arabic.index("بوسطن")
    ar = SegmentResult(
        Segment(0, 0, len(arabic), arabic),
        Verdict(NONFACTUAL, NOT_ENOUGH_EVIDENCE, 0.2, (), "'بوسطن' missing"), (lincoln,),
        spans=(Span(where, where + 5, "بوسطن", "word"),))
    return [
        to_record(CheckedResponse(ResponseInput("lincoln", 1, text), (result,), NONFACTUAL),
                  {"name": "offline", "method": "m"}),
        to_record(CheckedResponse(ResponseInput("ar", 2, arabic), (ar,), NONFACTUAL),
                  {"name": "offline", "method": "m"}),
    ]


def test_spans_are_marked_with_the_evidence_on_hover_and_for_screen_readers(
    open_report: Callable[..., Opened]
) -> None:
    report = open_report(spans_records())
    card = report.page.locator("#r0")
    marks = card.locator(".text mark.unsup")
    assert marks.count() == 2
    # Each mark holds exactly its span, after the astral-plane emoji too.
    shown = marks.evaluate_all("ms => ms.map(m => m.firstChild.textContent)")
    assert shown == ["Springfield", "1812"]
    assert marks.nth(1).get_attribute("title") == (
        "unsupported date; the evidence has '1809' (Abraham Lincoln)")
    assert marks.nth(0).get_attribute("title") == "unsupported name"
    # The hover text is also text a screen reader reads, though not seen.
    hidden = marks.nth(1).locator(".vh")
    assert hidden.text_content() == " (unsupported date; the evidence has '1809' (Abraham Lincoln))"
    box = hidden.bounding_box()
    assert box is not None and box["width"] <= 1 and box["height"] <= 1
    assert report.page.evaluate(
        "getComputedStyle(document.querySelector('#r0 mark.unsup')).textDecorationLine"
    ) == "underline"
    # The segment reads as before apart from the hidden words: nothing lost or doubled.
    segment = card.locator(".text .seg").first
    visible = segment.evaluate(
        "s => [...s.childNodes].map(n => n.nodeType === 3 ? n.textContent"
        " : n.firstChild.textContent).join('')")
    assert visible == "Lincoln was born in Springfield in 1812."
    # The flagged list quotes the segment with the same marks.
    assert card.locator(".flagged q mark.unsup").count() == 2
    # Right to left: the mark holds the Arabic word, inside a dir="auto" block.
    ar = report.page.locator("#r1 .text mark.unsup")
    assert ar.evaluate("m => m.firstChild.textContent") == "بوسطن"
    assert report.page.locator("#r1 .text").get_attribute("dir") == "auto"
    report.assert_clean()
