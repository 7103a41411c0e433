"""A review meeting in real headless Chromium: `privacy-ledger serve` started on a free loopback port
over a SQLite ledger, then dashboard -> table -> release -> approve, as the machine's user (local
mode). Screenshots at 1024 and 1400 px go to /tmp/web-shots/ for a person to look at."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.request import urlopen

import pytest
from support import acting_as, cli_ok
from web_support import census_ledger

from ledger import api


def serving_person(url: str) -> str:
    """Who a local `serve` acts as: whoever the store authenticates (the OS user on SQLite, the
    database login on PostgreSQL)."""
    return api.open(url).person.name

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path("/tmp/web-shots")
WIDTHS = (1024, 1400)

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed")]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def server(ledger_url):
    """`serve` in its own process on the census ledger (SQLite; PostgreSQL too when
    LEDGER_TEST_POSTGRES_URL is set); the machine's user may approve."""
    url = ledger_url
    book = census_ledger(url, gaussian=True)
    person = serving_person(url)
    with acting_as("ana"):
        cli_ok(url, "role", "grant", person, "approver")
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "ledger", "--db", url, "serve", "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):  # (start-up imports the stack: a few seconds on a busy machine)
            try:
                with urlopen(base + "/audit", timeout=1):
                    break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError(process.stdout.read().decode())
                time.sleep(0.1)
        yield base, book, person
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def browser():
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM,
                                              args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        yield chromium
        chromium.close()


def shoot(page, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": WIDTHS[-1], "height": 900})


def test_a_review_meeting_dashboard_table_release_approve(server, browser):
    base, book, person = server
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.goto(base + "/")  # one dataset: straight to its dashboard
    assert page.locator("h1").inner_text() == "census"
    protected = book.subset(book.dataset().protected_names)
    assert float(page.locator("#protected .value").get_attribute("data-value")) == protected.epsilon
    assert page.locator("header .person strong").inner_text() == person
    page.keyboard.press("Tab")  # the keyboard reaches the navigation first, then the pages
    assert page.evaluate("document.activeElement.textContent") == "privacy-ledger"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Dashboard"
    shoot(page, "1-dashboard")

    page.get_by_role("link", name="per-variable table").click()
    assert page.locator("#loss-table tfoot td[data-value]").evaluate_all(
        "cells => cells.map(c => Number(c.dataset.value))") == book.table().loc["All releases"].tolist()
    page.get_by_role("link", name="Release").first.click()  # sort by release id
    page.get_by_role("link", name="Release").first.click()  # and the other way
    assert page.locator("#loss-table tbody tr").first.get_attribute("data-release") == "G"
    assert page.evaluate("[...document.querySelectorAll('table')].every(t => t.querySelector('thead th[scope=col]'))")
    shoot(page, "2-table")

    page.locator("#loss-table tbody th a", has_text="A").first.click()
    assert page.locator("#release-id").inner_text() == "A"
    shoot(page, "3-release")
    page.get_by_role("button", name=f"Approve as {person}").click()
    assert page.locator("#release-status").text_content() == "approved"
    assert "approved by" in page.locator(".message.ok").inner_text()
    shoot(page, "4-approved")
    assert book.release("A").approved_by == person

    page.goto(base + "/subset?dataset=census&v=age&v=sex")
    shoot(page, "5-subset")
    page.goto(base + "/whatif?dataset=census")
    page.fill("#plan", "dataset: census\nreleases:\n  - id: big\n    reads: [age]\n"
                       "    mechanism: {name: laplace, epsilon: 9}\n")
    page.get_by_role("button", name="Check").click()
    assert page.locator("#verdict").text_content() == "refused"
    shoot(page, "6-whatif")
    assert not problems, problems  # no CSP violation, no failed resource
