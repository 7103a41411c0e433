"""A review meeting in real headless Chromium: `privacy-ledger serve` started on a free loopback port
over a SQLite ledger, then dashboard -> table -> release -> approve, as the machine's user (local
mode); then what changed since the last meeting (the dashboard as of a date, two dates compared)
and a release's lineage, reached and decided with the keyboard alone. Every page visited has
header cells in its tables and, when axe-core can be fetched from npm, no serious or critical
axe violation. Screenshots at 1024 and 1400 px go to /tmp/web-shots/ for a person to look at."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tarfile
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.request import urlopen

import pytest
from support import acting_as, cli_ok
from web_support import DAYS, LINEAGE, census_ledger, dated_census_ledger

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
    with serving(url) as base:
        yield base, book, person


@pytest.fixture
def dated_server(ledger_url, monkeypatch):
    """`serve` over Tan's releases recorded on different days (web_support.DAYS) and a lineage
    (raw -> rounded -> map, chart, east; east in a family); the machine's user may approve."""
    url = ledger_url
    book = dated_census_ledger(url, monkeypatch)
    with acting_as("ana"):
        book.record(LINEAGE)
    monkeypatch.undo()  # (the server's clock is the machine's: the days above are in its past)
    person = serving_person(url)
    with acting_as("ana"):
        cli_ok(url, "role", "grant", person, "approver")
    with serving(url) as base:
        yield base, book, person


@contextmanager
def serving(url: str):
    """The base URL of `serve` on `url`, in its own process, until the block ends."""
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
                    raise RuntimeError(process.stdout.read().decode()) from None
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def axe_source(tmp_path_factory) -> str | None:
    """axe-core's script, fetched with `npm pack` into a temporary directory (nothing kept in the
    repository); None when npm or the registry is not reachable (the audit is then not run)."""
    npm = shutil.which("npm")
    if npm is None:
        return None
    directory = tmp_path_factory.mktemp("axe-core")
    try:
        subprocess.run([npm, "pack", "axe-core", "--silent"], cwd=directory, check=True, capture_output=True,
                       timeout=180)
        packed = next(directory.glob("axe-core-*.tgz"))
        with tarfile.open(packed) as archive:
            return archive.extractfile("package/axe.min.js").read().decode("utf-8")
    except (OSError, subprocess.SubprocessError, StopIteration, KeyError, tarfile.TarError):
        return None


def accessible(page, axe_source: str | None) -> None:
    """Every table of the page has header cells, and axe-core (when fetched) finds no serious or
    critical violation. (axe is evaluated through the browser's debugging protocol, which the
    page's Content-Security-Policy does not govern: the pages themselves still run no script.)"""
    assert page.evaluate("[...document.querySelectorAll('table')].every(t => t.querySelector('th'))"), page.url
    if axe_source is None:
        return
    page.evaluate(axe_source)
    found = page.evaluate("""async () => (await axe.run(document, {resultTypes: ['violations']})).violations
        .filter(v => v.impact === 'serious' || v.impact === 'critical')
        .map(v => `${v.id} (${v.impact}): ${v.nodes.map(n => n.target.join(' ')).join('; ')}`)""")
    assert not found, (page.url, found)


def tab_to(page, selector: str, limit: int = 80) -> int:
    """Press Tab from the top of the page until `selector` has the focus; how many presses it took."""
    target = page.locator(selector)
    page.evaluate("document.activeElement && document.activeElement.blur()")
    for presses in range(1, limit + 1):
        page.keyboard.press("Tab")
        if target.evaluate("element => element === document.activeElement"):
            return presses
    raise AssertionError(f"{selector} is not reached with the keyboard in {limit} presses on {page.url}")


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


def test_what_changed_since_the_last_meeting_and_a_lineage_by_keyboard(dated_server, browser, axe_source):
    base, book, person = dated_server
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.goto(base + "/dashboard?dataset=census")
    accessible(page, axe_source)
    page.fill("input[name=as_of]", DAYS[1])
    page.fill("input[name=since]", DAYS[0])
    page.get_by_role("button", name="Show").click()
    assert page.url.endswith(f"as_of={DAYS[1]}&since={DAYS[0]}")
    then = book.subset(["protected"], as_of=DAYS[1])
    assert then.exact == 2  # A and B, on every variable (C came later)
    assert float(page.locator("#protected .value").get_attribute("data-value")) == then.epsilon
    assert page.locator("#comparison tr[data-figure=protected] td").first.inner_text() == "1"  # A alone
    assert page.locator("#changes tr[data-change]").evaluate_all(
        "rows => rows.map(r => r.dataset.change + ' ' + r.dataset.release)") == ["recorded B"]
    accessible(page, axe_source)
    shoot(page, "7-dashboard-as-of")

    page.goto(base + "/release?id=east")
    assert page.locator("#lineage [data-node]").evaluate_all("nodes => nodes.map(n => n.dataset.node).sort()") == [
        "east", "north", "raw", "rounded", "south"]
    accessible(page, axe_source)
    shoot(page, "8-release-lineage")
    tab_to(page, '#lineage [data-node="rounded"]')  # a box of the graph is a link the keyboard reaches
    page.keyboard.press("Enter")
    page.wait_for_url("**/release?id=rounded")
    assert page.locator("#release-id").inner_text() == "rounded"
    accessible(page, axe_source)
    shoot(page, "9-release-lineage-descendants")

    page.goto(base + "/release?id=raw")
    approve = f"button:has-text('Approve as {person}')"
    tab_to(page, approve)  # the decision buttons are reached with the keyboard alone
    page.keyboard.press("Enter")
    page.wait_for_selector("#release-status:has-text('approved')")
    assert book.release("raw").approved_by == person
    accessible(page, axe_source)
    for path in ("/table?dataset=census", "/subset?dataset=census&v=age&v=sex", "/whatif?dataset=census", "/audit",
                 "/downloads?dataset=census", "/release?id=chart"):
        page.goto(base + path)
        accessible(page, axe_source)
    assert not problems, problems  # no CSP violation, no failed resource
