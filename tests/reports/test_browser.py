"""The reports as a board member gets them: the HTML opened in real headless Chromium
(Playwright's Python package driving the system's /usr/bin/chromium, installed by
.ci/run), and the PDF's pages read back with pdfplumber.

Ledgers: the demo (Tan's Example 3.6), an empty one, one with only exact releases
(nothing protected), and a dataset with 200 variables.
"""

from __future__ import annotations

import io
import random
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

import pdfplumber
import pytest
from PIL import Image, ImageStat
from playwright.sync_api import sync_playwright
from test_report import MEETING, meeting_ledger  # noqa: F401 (the fixture, for the meeting pack's PDF)
from test_report_helpers import (
    CHROMIUM,
    TAN_HEADER,
    TAN_TABLE_1,
    context_of,
    demo_ledger,
    record,
    rendered,
    step,
)

from ledger.reporting.write import CHROMIUM_ARGS, render

if not Path(CHROMIUM).exists():  # .ci/run installs it; a missing browser is a failure, not a skip
    raise RuntimeError(f"{CHROMIUM} is missing: install the system's chromium package (see .ci/run)")

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return demo_ledger(tmp_path_factory.mktemp("demo"))


def open_report(browser, html: bytes, directory: Path):
    """The report as a file in a new page; returns the page and every URL it requested."""
    path = directory / "report.html"
    path.write_bytes(html)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri(), wait_until="load")
    return page, requests


def table_rows(page, selector: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        f"{selector} tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText.replace(/\\s+/g, ' ').trim()))")


def pdf_pages(data: bytes) -> list[dict]:
    """Each page's size, text, and the right-most and lowest edge of any character on it."""
    pages = []
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        for page in pdf.pages:
            chars = page.chars
            pages.append({
                "width": float(page.width), "height": float(page.height),
                "text": " ".join((page.extract_text() or "").split()),
                "right": max((float(c["x1"]) for c in chars), default=0.0),
                "left": min((float(c["x0"]) for c in chars), default=0.0),
                "bottom": max((float(c["bottom"]) for c in chars), default=0.0),
            })
    return pages


def assert_within_pages(pages: list[dict]) -> None:
    for number, page in enumerate(pages, 1):
        assert 0 <= page["left"] and page["right"] <= page["width"], f"page {number}: text runs off the side"
        assert page["bottom"] <= page["height"], f"page {number}: text runs off the bottom"


# --------------------------------------------------------------------------
# The demo in the browser and as a PDF
# --------------------------------------------------------------------------


def test_the_demo_report_in_chromium_shows_tans_table_1_and_the_charts(browser, demo, tmp_path):
    page, requests = open_report(browser, rendered(demo, "census", "html"), tmp_path)
    try:
        rows = table_rows(page, "#risk-table-1")
        assert rows[0][1:] == TAN_HEADER
        assert {row[0]: row[1:] for row in rows[1:]} == TAN_TABLE_1
        for chart in ("#heat-map", "#timeline-chart"):
            box = page.locator(chart).bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 200, (chart, box)
        assert page.locator("#heat-map image").count() >= 1  # the cells, one per pair (and the colour scale)
        # a step line per named variable (its name as its title), one for the other variables, the axes
        named = page.locator("#timeline-chart path > title").all_text_contents()
        assert named == ["{age}", "{residential region}", "{sex}", "{race}"]
        assert page.locator("#timeline-chart path").count() == len(named) + 2
        # accessible: a title and a description, tick labels and axis labels as text
        assert page.locator("#timeline-chart").get_attribute("aria-labelledby") == \
            "timeline-chart-title timeline-chart-desc"
        assert "basic composition" in page.locator("#timeline-chart-desc").text_content()  # what the lines are
        assert page.locator("#timeline-chart text", has_text="cumulative epsilon on the variable").count() == 1
        assert page.locator("#heat-map-title").text_content() == "Heat map of epsilon on every pair of 5 variables"
        # the heat map carries each pair's figure: {age, region} is charged by all three tables
        assert page.locator("#heat-map text", has_text=re.compile(r"^3$")).count() >= 4
        assert page.locator("#certificate").inner_text().count("Audit chain verified") == 1
        assert all(url.startswith("file:") for url in requests), requests  # self-contained: no network
        shot = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("RGB")
    finally:
        page.close()
    assert shot.height > 2000
    colours = shot.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200  # text, table rules, the heat map's scale
    assert max(ImageStat.Stat(shot).stddev) > 30  # not a blank page


def test_the_demo_pdf_has_its_pages_and_the_risk_table(demo):
    pages = pdf_pages(rendered(demo, "census", "pdf"))
    assert len(pages) >= 3
    assert all(abs(p["width"] - 841.92) < 1 and abs(p["height"] - 595) < 1 for p in pages)  # A4 landscape
    text = " ".join(p["text"] for p in pages)
    assert "Release {age} {sex} {residential region} {race} {other variable} whole dataset ordinary DP" in text
    for release, cells in TAN_TABLE_1.items():
        assert f"{release} {' '.join(cells)}" in text
    assert "Audit chain verified" in text and "page 1 of" in text
    assert_within_pages(pages)


# --------------------------------------------------------------------------
# An empty ledger, only exact releases, 200 variables
# --------------------------------------------------------------------------

SMALL = """\
dataset: survey
variables:
  - {name: age}
  - {name: income}
  - {name: region}
"""

EXACT = """\
dataset: survey
releases:
  - {id: microdata, title: Public-use file, reads: [age, income], mechanism: {name: exact}}
  - {id: regions, title: Counts by region, reads: [region], mechanism: {name: exact}}
"""


@pytest.fixture(scope="module")
def empty(tmp_path_factory):
    directory = tmp_path_factory.mktemp("empty")
    url = f"sqlite:///{directory / 'ledger.db'}"
    record(url, directory, "survey.yaml", SMALL, T0, command="dataset")
    return url


@pytest.fixture(scope="module")
def exact(tmp_path_factory):
    directory = tmp_path_factory.mktemp("exact")
    url = f"sqlite:///{directory / 'ledger.db'}"
    record(url, directory, "survey.yaml", SMALL, T0, command="dataset")
    record(url, directory, "exact.yaml", EXACT, T0)
    return url


def test_an_empty_ledger_renders_in_every_format(browser, empty, tmp_path):
    context = context_of(empty, "survey")
    for fmt in ("md", "tex", "csv"):
        assert render(context, fmt)
    page, _ = open_report(browser, render(context, "html"), tmp_path)
    try:
        assert table_rows(page, "#risk-table-1") == [
            ["Release", "{age}", "{income}", "{region}", "whole dataset ordinary DP"],
            ["All releases (composed)", "0", "0", "0", "0"]]
        assert "No release is charged yet." in page.locator("#timeline").inner_text()
        assert "No release is recorded" in page.locator("#register").inner_text()
    finally:
        page.close()
    pages = pdf_pages(render(context, "pdf", chromium=CHROMIUM))
    assert pages and "All releases (composed) 0 0 0 0" in " ".join(p["text"] for p in pages)
    assert_within_pages(pages)


def test_only_exact_releases_are_not_protected_and_styled_apart(browser, exact, tmp_path):
    context = context_of(exact, "survey")
    assert context.risk.unprotected == ("age", "income", "region") and context.pairs.unprotected == 3
    page, _ = open_report(browser, render(context, "html"), tmp_path)
    try:
        rows = {row[0]: row[1:] for row in table_rows(page, "#risk-table-1")[1:]}
        unprotected = "∞ (not protected)"
        assert rows["microdata"] == [unprotected, unprotected, "0", unprotected]
        assert rows["All releases (composed)"] == [unprotected] * 4
        background = page.eval_on_selector_all(
            "#risk-table-1 td", "cells => cells.map(c => [c.innerText, getComputedStyle(c).backgroundColor])")
        colours = {text: colour for text, colour in background}
        assert colours[unprotected] != colours["0"]  # unprotected cells are styled apart
        # beside the heat map, "∞ (not protected)" on one line (it was broken over two)
        lines = page.eval_on_selector_all("#highest-pairs td.unbounded", """cells => cells.map(c => {
            const range = document.createRange(); range.selectNodeContents(c);
            return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size; })""")
        assert lines and set(lines) == {1}, lines
    finally:
        page.close()
    pages = pdf_pages(render(context, "pdf", chromium=CHROMIUM))
    assert "microdata ∞ (not protected) ∞ (not protected) 0 ∞ (not protected)" in " ".join(p["text"] for p in pages)
    assert_within_pages(pages)
    assert "| microdata | ∞ (not protected) | ∞ (not protected) | 0 | ∞ (not protected) |" in render(context, "md").decode()
    assert r"\cellcolor{unprotected}$\infty$ (not protected)" in render(context, "tex").decode()
    # the CSV is numeric: floats (∞ as inf), then the exact columns
    assert "microdata,inf,inf,0.0,inf,inf,inf,0,inf" in render(context, "csv").decode()


def wide_dataset(count: int) -> str:
    return "dataset: wide\nvariables:\n" + "".join(f"  - {{name: variable_{k:03d}}}\n" for k in range(count))


def wide_releases(count: int, variables: int, seed: int = 3) -> str:
    rng = random.Random(seed)
    lines = ["dataset: wide", "releases:"]
    for k in range(count):
        reads = rng.sample([f"variable_{j:03d}" for j in range(variables)], rng.randint(1, 6))
        epsilon = rng.choice(["1/3", "0.25", "293764/114921", "1"])
        lines.append(f"  - {{id: table-{k:02d}, title: Table {k}, reads: [{', '.join(reads)}], "
                     f"mechanism: {{name: laplace, epsilon: \"{epsilon}\"}}}}")
    return "\n".join(lines) + "\n"


SPILLED_HEADERS = """() => [...document.querySelectorAll('table.risk thead th')]
    .filter(th => th.scrollWidth > th.clientWidth + 1).map(th => th.innerText)"""


def test_a_dataset_with_200_variables_splits_its_table_and_stays_on_the_page(browser, tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    record(url, tmp_path, "wide.yaml", wide_dataset(200), T0, command="dataset")
    record(url, tmp_path, "releases.yaml", wide_releases(16, 200), T0)
    context = context_of(url, "wide")
    assert context.risk.layout == "matrix" and len(context.risk.blocks) == 20
    assert [len(block.rows) for block in context.risk.blocks] == [16] * 20
    for fmt in ("md", "tex", "csv"):
        assert "variable_199" in render(context, fmt).decode("utf-8").replace("\\_", "_")

    page, _ = open_report(browser, render(context, "html"), tmp_path)
    try:
        # nothing wider than the page: the blocks fit the window
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0
        assert page.locator("table.risk").count() == 20
        # the heat map's variable names readable: a line of them at least 8 px high on screen (were 6)
        heights = page.evaluate("""() => [...document.querySelectorAll('#heat-map text:not([transform])')]
            .filter(t => t.textContent.startsWith('{variable_')).map(t => t.getBoundingClientRect().height)""")
        assert len(heights) == 40 and min(heights) >= 8, heights
        # no variable's name spills out of its header into the next ("{variable_000}" did, 14
        # characters in a tenth of the table): the names are printed vertically
        for width in (1280, 1024):
            page.set_viewport_size({"width": width, "height": 900})
            assert page.evaluate(SPILLED_HEADERS) == [], width
    finally:
        page.close()

    pdf = render(context, "pdf", chromium=CHROMIUM)
    pages = pdf_pages(pdf)
    text = " ".join(p["text"] for p in pages)
    assert "Variables 1–10 of 200" in text and "Variables 191–200 of 200" in text
    assert "293764/114921" in text
    assert_within_pages(pages)
    # and printed at 5 pt at least (were 3.1 pt): the heat map's labels, one every fifth variable
    with pdfplumber.open(io.BytesIO(pdf)) as document:
        words = [word for page in document.pages if "Every pair of variables" in (page.extract_text() or "")
                 for word in page.extract_words(extra_attrs=["size"])
                 if re.fullmatch(r"\{variable_\d+\}", word["text"]) and word["upright"]]
    assert len(words) == 40 and min(word["size"] for word in words) >= 5, sorted({w["size"] for w in words})


# --------------------------------------------------------------------------
# Page breaks: nothing orphaned
# --------------------------------------------------------------------------

SECTION_HEADINGS = ("Privacy loss by variable", "Caps", "Cap history", "Every pair of variables",
                    "Cumulative epsilon per variable over time", "Pufferfish-family guarantees", "Audit trail",
                    "Release register")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def page_lines(data: bytes) -> list[list[str]]:
    """Each page's lines of text, the running footer left out."""
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        return [[line for line in (page.extract_text() or "").splitlines()
                 if not line.startswith("privacy-ledger compliance report page")] for page in pdf.pages]


def orphans(pages: list[list[str]]) -> list[str]:
    """What a reader would call a bad page break: a page (not the last) holding a section heading and at
    most two lines under it and nothing else, or a section heading among the last two lines of a page
    with the rest of its section on the next page."""
    found = []
    for number, lines in enumerate(pages, 1):
        headings = [k for k, line in enumerate(lines) if line.strip() in SECTION_HEADINGS]
        if number < len(pages) and headings == [0] and len(lines) <= 3:
            found.append(f"page {number} holds only {lines}")
        continued = number < len(pages) and pages[number][:1] != [] and pages[number][0] not in SECTION_HEADINGS
        found += [f"page {number} ends with the heading {lines[k]!r}" for k in headings
                  if k >= len(lines) - 2 and continued]
    return found


@pytest.mark.parametrize("caps", [False, True], ids=["no caps", "a cap"])
def test_the_graduates_pdf_leaves_no_heading_or_short_section_alone_on_a_page(tmp_path, caps):
    """The README's graduates steps after the demo: "Caps / This dataset has no caps." shares a page
    with the heat map after it, and the risk table's heading and note begin the page its table is
    on, never alone at the foot of page 1."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    record(url, tmp_path, "graduates.dataset.yaml", (EXAMPLES / "graduates.dataset.yaml").read_text(), T0,
           command="dataset")
    record(url, tmp_path, "graduates.releases.yaml", (EXAMPLES / "graduates.releases.yaml").read_text(), T0)
    if caps:
        step(url, T0, "cap", "set", "personal", "--rho", "2", "-d", "graduates")
        record(url, tmp_path, "graduates.plan.yaml", (EXAMPLES / "graduates.plan.yaml").read_text(), T0)
    pages = page_lines(rendered(url, "graduates", "pdf"))
    assert orphans(pages) == []
    text = " ".join(" ".join(lines) for lines in pages)
    for heading in SECTION_HEADINGS[:2] + SECTION_HEADINGS[3:]:
        assert heading in text  # every section is printed (Cap history: only when a cap changed)


def test_the_orphan_check_finds_a_heading_alone():
    """The check above can fail: a page of a heading and one line, and a heading at a page's foot."""
    assert orphans([["Dataset graduates"], ["Caps", "This dataset has no caps."], ["Every pair of variables", "x"]]) \
        == ["page 2 holds only ['Caps', 'This dataset has no caps.']"]
    assert orphans([["a", "b", "Audit trail", "note"], ["table"]]) == ["page 1 ends with the heading 'Audit trail'"]
    assert orphans([["a", "b", "Caps", "This dataset has no caps."], ["Audit trail", "table"]]) == []


def test_a_risk_table_taller_than_a_page_begins_on_page_1_under_the_certificate(tmp_path):
    """A section is kept whole when it fits on a page; one taller than a page flows from where the
    certificate ends. Chromium moved it to page 2 anyway (page 1: the certificate alone, and every
    long section after it left the page before it part empty); 100 variables and 3 releases make 10
    blocks of the risk table, about a page and a half."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    record(url, tmp_path, "wide.yaml", wide_dataset(100), T0, command="dataset")
    record(url, tmp_path, "releases.yaml", wide_releases(3, 100), T0)
    pages = page_lines(render(context_of(url, "wide"), "pdf", chromium=CHROMIUM))
    assert pages[0][0] == "PRIVACY-LOSS COMPLIANCE REPORT"
    assert "Privacy loss by variable (Tan, Table 1)" in pages[0] and "Variables 1–10 of 100" in pages[0]
    assert orphans(pages) == []


NARROW_LAYOUT = """() => {
  const box = element => element.getBoundingClientRect();
  const [seal, title] = [box(document.querySelector('.seal')), box(document.querySelector('.certificate h1'))];
  return {
    sideways: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    sealOverTitle: seal.left < title.right && title.left < seal.right && seal.top < title.bottom && title.top < seal.bottom,
    spilled: [...document.querySelectorAll('#risk-table-1 thead th')]
      .filter(th => th.scrollWidth > th.clientWidth + 1).map(th => th.innerText),
    tickHeight: Math.min(...[...document.querySelectorAll('#timeline-chart text:not([transform])')]
      .map(t => box(t).height)),
    registerCell: Math.min(...[...document.querySelectorAll('section.register tbody td')].map(td => box(td).width)),
    whenLines: Math.max(...[...document.querySelectorAll('#audit-table tbody td:nth-child(2)')]
      .map(td => { const r = document.createRange(); r.selectNodeContents(td);
                   return new Set([...r.getClientRects()].map(q => Math.round(q.top))).size; })),
  };
}"""


def test_the_demo_report_reads_on_a_phone(browser, demo, tmp_path):
    """At 390 px: the seal sat over the dataset's name, the risk table's 7 columns were squeezed until
    their headers ran into one another, and the timeline was scaled to half its size (its labels
    ~4 px). Now the seal and facts stack, a wide table or chart scrolls sideways in its own frame at
    its own size, and the page itself never scrolls sideways."""
    path = tmp_path / "report.html"
    path.write_bytes(rendered(demo, "census", "html"))
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        page.goto(path.as_uri(), wait_until="load")
        layout = page.evaluate(NARROW_LAYOUT)
        # the table scrolls in its own frame and keeps every figure (Tan's Table 1)
        rows = table_rows(page, "#risk-table-1")
    finally:
        page.close()
    assert layout["sideways"] <= 0
    assert not layout["sealOverTitle"]
    assert layout["spilled"] == []
    assert layout["tickHeight"] >= 8, layout
    # text columns keep room to be read (were shrunk to their longest word, ~60 px: one word a line),
    # and a time stays on one line (was broken at its hyphens over four)
    assert layout["registerCell"] >= 150 and layout["whenLines"] == 1, layout
    assert {row[0]: row[1:] for row in rows[1:]} == TAN_TABLE_1


def test_the_benchmarks_200_variable_pdf_begins_its_risk_table_on_page_1(tmp_path):
    """bench_report's ledger (200 variables, 20 public, some read without a bound, caps, families),
    300 releases: its certificate fills three quarters of page 1 (the alarms, every public variable's
    figure, a five-line notion). Page 1 held the certificate alone, the rest of it blank; printed
    a little tighter (the certificate's spacing), the risk table's heading, notes and first block
    follow it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from bench_report import build_ledger

    url = build_ledger(tmp_path / "ledger.db", 200, 300)
    pages = page_lines(render(context_of(url, "survey"), "pdf", chromium=CHROMIUM))
    assert pages[0][0] == "PRIVACY-LOSS COMPLIANCE REPORT" and "public variables (not in the headline)" in pages[0]
    assert "Privacy loss by variable (Tan, Table 1)" in pages[0] and "Variables 1–10 of 200" in pages[0]
    assert orphans(pages) == []


MEETING_PARTS = re.compile(r"(Recorded|Approved|Published|Retracted|Cancelled) \(\d+\)|How each cap moved")


def test_the_changes_since_a_date_follow_the_certificate_on_page_1(meeting_ledger):
    """`report --since`: the changes were one section kept whole; a page's worth, it moved to page 2
    and left page 1 to the certificate alone (the risk table then on page 3). It now breaks between
    its parts (each kind of change, the cap moves), each kept whole, none left at a page's foot."""
    url, _ = meeting_ledger
    pages = page_lines(render(context_of(url, "graduates", since=MEETING), "pdf", chromium=CHROMIUM))
    assert pages[0][0] == "PRIVACY-LOSS COMPLIANCE REPORT"
    assert "Changes since 2024-04-01 09:00:00 UTC" in pages[0] and "Recorded (2)" in pages[0]
    assert orphans(pages) == []
    for number, lines in enumerate(pages[:-1], 1):
        assert not MEETING_PARTS.fullmatch(lines[-1].strip()), f"page {number} ends with the heading {lines[-1]!r}"
    text = " ".join(" ".join(lines) for lines in pages)
    assert all(part in text for part in ("Cancelled (1)", "How each cap moved", "Privacy loss by variable"))
