"""The report a board reads, checked in real headless Chromium at
1024 and 1400 pixels and as an A4 PDF, for a 12-variable household survey with public
variables, a retracted release, an approved one and a protected variable read exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright
from test_browser import assert_within_pages, pdf_pages
from test_report_helpers import CHROMIUM, context_of

from ledger.reporting.write import CHROMIUM_ARGS, render
from support import acting_as, cli_main

DATASET = """\
dataset: household
description: Household survey, 12 variables
self_approval: true  # (its history recorded as published by its recorder)
variables:
  - {name: region, classification: public}
  - {name: household_size, classification: public}
  - {name: age_of_reference_person, classification: identifying}
  - {name: sex, classification: identifying}
  - {name: income, classification: sensitive}
  - {name: employment_status, classification: sensitive}
  - {name: tenure, classification: sensitive}
  - {name: health_status, classification: sensitive}
  - {name: disability, classification: sensitive}
  - {name: benefits_received, classification: sensitive}
  - {name: ethnicity, classification: sensitive}
  - {name: education_level, classification: sensitive}
"""

RELEASES = """\
dataset: household
releases:
  - {id: region-size, status: published, published_at: "2026-01-05T10:00:00Z", reads: [region, household_size], mechanism: {name: exact}}
  - {id: income, status: published, published_at: "2026-01-05T10:00:00Z", reads: [region, income], mechanism: {name: laplace, epsilon: 1, sensitivity: 1},
     guarantees: [{protects: [income], epsilon: 1}]}
  - {id: employment, status: published, published_at: "2026-01-05T10:00:00Z", reads: [age_of_reference_person, sex, employment_status],
     mechanism: {name: laplace, epsilon: 0.5, sensitivity: 1}}
  - {id: health, status: published, published_at: "2026-01-05T10:00:00Z", reads: [health_status, disability], mechanism: {name: laplace, epsilon: 1.5, sensitivity: 1}}
  - {id: benefits, status: published, published_at: "2026-01-05T10:00:00Z", reads: [benefits_received, income], mechanism: {name: laplace, epsilon: 1, sensitivity: 1}}
  - {id: education, status: published, published_at: "2026-01-05T10:00:00Z", reads: [education_level, ethnicity], mechanism: {name: laplace, epsilon: 0.75, sensitivity: 1}}
  - {id: tenure-exact, status: published, published_at: "2026-01-05T10:00:00Z", reads: [tenure], mechanism: {name: exact}}
  - {id: summary, status: planned, reads: [income, employment_status],
     mechanism: {name: laplace, epsilon: 0.25, sensitivity: 1}}
"""


@pytest.fixture(scope="module")
def household(tmp_path_factory):
    directory = tmp_path_factory.mktemp("household")
    url = f"sqlite:///{directory / 'ledger.db'}"
    (directory / "d.yaml").write_text(DATASET)
    (directory / "r.yaml").write_text(RELEASES)
    assert cli_main(url, "dataset", "add", directory / "d.yaml").code == 0
    assert cli_main(url, "record", directory / "r.yaml").code == 0
    assert cli_main(url, "retract", "income", "--reason", "a wrong income band").code == 0
    assert cli_main(url, "role", "grant", "approver", "approver").code == 0  # another person approves
    with acting_as("approver"):
        assert cli_main(url, "approve", "summary").code == 0
    return url


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


# every word of every table header: how many line boxes it is laid out in (2 or more: broken)
BROKEN_WORDS = """() => {
  const broken = [];
  for (const th of document.querySelectorAll('thead th')) {
    const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const re = /\\S+/g; let m;
      while ((m = re.exec(node.data)) !== null) {
        const range = document.createRange();
        range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.left) + ':' + Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""

BOXES = """() => {
  const svg = document.querySelector('#timeline-chart');
  const label = [...svg.querySelectorAll('text')].find(t => t.textContent.includes('∞'));
  const legend = svg.querySelector('[id^="legend"]');
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return [label ? box(label) : null, legend ? box(legend) : null];
}"""


@pytest.mark.parametrize("width", [1024, 1400])
def test_the_report_is_legible_at_1024_and_1400_pixels(browser, household, tmp_path, width):
    context = context_of(household, "household")
    assert context.risk.rotate  # 12 long names: printed vertically
    path = Path(tmp_path / "report.html")
    path.write_bytes(render(context, "html"))
    page = browser.new_page(viewport={"width": width, "height": 900})
    try:
        page.goto(path.as_uri(), wait_until="load")
        assert page.evaluate(BROKEN_WORDS) == []  # no header broken mid-word
        # nothing wider than the window
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        label, legend = page.evaluate(BOXES)
        assert label is not None and legend is not None
        overlap = not (label[2] <= legend[0] or legend[2] <= label[0] or label[3] <= legend[1] or legend[3] <= label[1])
        assert not overlap, (label, legend)  # the legend never covers the ∞ label
        # status badges: retracted is not green like published; each status its own colour
        colours = {name: page.eval_on_selector(f".status.release-{name}", "e => getComputedStyle(e).backgroundColor")
                   for name in ("published", "retracted", "approved")}
        assert len(set(colours.values())) == 3
        # the headline: an alarm (tenure read exactly), styled as one; public variables apart, neutral
        lead = page.locator("#protected-epsilon")
        assert "ALARM" in lead.inner_text() and "∞ (not protected)" in lead.inner_text()
        public = page.locator("#public-variables")
        assert "{region} ∞" in public.inner_text() and "not protected" not in public.inner_text()
        assert lead.evaluate("e => getComputedStyle(e).borderColor") != \
            public.evaluate("e => getComputedStyle(e).borderColor")
        cells = page.eval_on_selector_all("td.public", "cells => cells.map(c => c.innerText)")
        assert cells and all(text == "∞ (public, released exactly)" for text in cells)
    finally:
        page.close()


def test_the_pdf_of_a_12_variable_survey_stays_on_a4_pages(household):
    pages = pdf_pages(render(context_of(household, "household"), "pdf", chromium=CHROMIUM))
    assert all(abs(p["width"] - 841.92) < 1 and abs(p["height"] - 595) < 1 for p in pages)  # A4 landscape
    assert_within_pages(pages)
    text = " ".join(p["text"] for p in pages)
    assert "ALARM" in text and "public, released exactly" in text and "DESIGN" not in text
