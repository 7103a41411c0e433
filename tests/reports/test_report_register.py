"""A report over a ledger past the summary threshold links a complete register.

The threshold is made small here (LEDGER_REPORT_SUMMARY_FROM) so that a ledger
of a few releases is "large": the page then lists the largest releases only and
links `<out>.register.csv`, which must hold every release (cancelled ones too)
with the figures computed independently here from Tan's rules (a release's
whole-dataset epsilon is its guarantee's epsilon when the guarantee covers all
it reads), text cells neutralised against formula injection, and the register
written under the --out rules (never onto the ledger; nothing written when refused).
"""

from __future__ import annotations

import csv
import re
import sqlite3
from html import unescape
from pathlib import Path

import pytest

from ledger.reporting.report import SUMMARY_ENV
from support import cli_main

DATASET = """\
dataset: survey
self_approval: true
variables:
  - {name: age}
  - {name: sex}
  - {name: income}
  - {name: region}
"""

RELEASES = """\
dataset: survey
releases:
  - {id: a, title: Ages, reads: [age, sex], mechanism: {name: laplace, epsilon: "1/3"}}
  - {id: b, title: "=HYPERLINK(\\"http://x\\")", reads: [income], mechanism: {name: laplace, epsilon: "1/2"}}
  - {id: c, title: Regions, reads: [region], mechanism: {name: geometric, epsilon: "1/10"}}
  - {id: d, title: Everything, reads: [age, sex, income, region], mechanism: {name: laplace, epsilon: 2}}
  - {id: e, title: Later, reads: [age], mechanism: {name: laplace, epsilon: "1/7"}}
  - {id: f, title: Dropped, reads: [sex], mechanism: {name: laplace, epsilon: "1/9"}}
"""

# the whole-dataset epsilon of each charged release: one pure guarantee on all it reads (docs/explanation/model.md#the-cost-of-one-release-on-a-subset)
WIDE = {"a": "1/3", "b": "1/2", "c": "1/10", "d": "2", "e": "1/7"}


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    db = tmp_path / "ledger.db"
    url = f"sqlite:///{db}"
    (tmp_path / "survey.yaml").write_text(DATASET)
    (tmp_path / "releases.yaml").write_text(RELEASES)
    assert cli_main(url, "dataset", "add", tmp_path / "survey.yaml").code == 0
    run = cli_main(url, "record", tmp_path / "releases.yaml")
    assert run.code == 0, run.err
    assert cli_main(url, "cancel", "f", "--reason", "not needed").code == 0
    monkeypatch.setenv(SUMMARY_ENV, "3")
    return url, tmp_path


def read_register(path: Path) -> dict[str, dict]:
    with path.open(newline="", encoding="utf-8") as stream:
        return {row["release"]: row for row in csv.DictReader(stream)}


def test_a_report_past_the_threshold_links_a_register_of_every_release(ledger, monkeypatch):
    url, tmp_path = ledger
    monkeypatch.setattr("ledger.reporting.report.LARGEST_LISTED", 2)
    out = tmp_path / "report.html"
    run = cli_main(url, "report", "--out", out)
    assert run.code == 0, run.err
    register = tmp_path / "report.html.register.csv"
    html = out.read_text()
    assert 'href="./report.html.register.csv"' in html
    assert "This dataset has 6 releases" in html
    rows = read_register(register)
    assert set(rows) == {"a", "b", "c", "d", "e", "f"}  # every release, the cancelled one too
    assert [rows[k]["status"] for k in "abcdef"] == ["planned"] * 5 + ["cancelled"]  # recorded as planned
    assert rows["f"]["charged"] == "no" and rows["f"]["whole dataset exact"] == ""
    assert (rows["f"]["retracted or cancelled"], rows["f"]["reason"]) == ("cancelled", "not needed")
    assert {k: rows[k]["whole dataset exact"] for k in WIDE} == WIDE
    assert rows["d"]["epsilon by variable"] == "{age} 2; {sex} 2; {income} 2; {region} 2"
    assert rows["a"]["epsilon by variable"] == "{age} 1/3; {sex} 1/3"
    assert float(rows["a"]["whole dataset (ordinary DP)"]) >= 1 / 3  # the float never below the loss
    assert rows["b"]["title"] == "'=HYPERLINK(\"http://x\")"  # a formula is text
    # the page lists the largest releases only: d (2) and b (1/2), in recording order
    register_section = html[html.index('id="register"'):]
    listed = re.findall(r'<span class="id">([^<]+)</span>', register_section)
    assert listed == ["b", "d"]


def test_the_pdfs_link_to_its_register_is_relative_and_reaches_the_file_beside_it(ledger):
    """Chromium printed the page from a temporary directory and wrote every link as an absolute
    URI: the PDF's link to its register pointed into that directory, gone once printed. A
    relative URI is read against the PDF's own location (ISO 32000-1, 12.6.4.7)."""
    import pdfplumber
    from urllib.parse import unquote

    url, tmp_path = ledger
    out = tmp_path / "board pack.pdf"
    run = cli_main(url, "report", "--out", out)
    assert run.code == 0, run.err
    with pdfplumber.open(out) as pdf:
        links = [link["uri"] for page in pdf.pages for link in page.hyperlinks]
    assert links and set(links) == {"board%20pack.pdf.register.csv"}, links  # the note and the register's line
    assert (out.parent / unquote(links[0])).is_file()


def test_below_the_threshold_the_page_lists_every_release_and_writes_no_register(ledger, monkeypatch):
    url, tmp_path = ledger
    monkeypatch.setenv(SUMMARY_ENV, "6")
    out = tmp_path / "report.html"
    assert cli_main(url, "report", "--out", out).code == 0
    assert not (tmp_path / "report.html.register.csv").exists()
    listed = re.findall(r'<span class="id">([^<]+)</span>', out.read_text())
    assert listed == list("abcdef")


def test_markdown_and_latex_link_the_register_too(ledger):
    url, tmp_path = ledger
    for name in ("report.md", "report.tex"):
        assert cli_main(url, "report", "--out", tmp_path / name).code == 0
        assert f"{name}.register.csv" in (tmp_path / name).read_text()
        assert len(read_register(tmp_path / f"{name}.register.csv")) == 6


def test_a_summarised_report_to_standard_output_is_refused(ledger):
    url, _ = ledger
    run = cli_main(url, "report", "--format", "md", "--out", "-")
    assert run.code == 2
    assert "register" in run.err


def test_the_register_is_never_written_onto_the_ledger(tmp_path, monkeypatch):
    db = tmp_path / "report.html.register.csv"  # the ledger bears the register's name
    url = f"sqlite:///{db}"
    (tmp_path / "survey.yaml").write_text(DATASET)
    (tmp_path / "releases.yaml").write_text(RELEASES)
    assert cli_main(url, "dataset", "add", tmp_path / "survey.yaml").code == 0
    assert cli_main(url, "record", tmp_path / "releases.yaml").code == 0
    monkeypatch.setenv(SUMMARY_ENV, "3")
    before = db.read_bytes()
    run = cli_main(url, "report", "--out", tmp_path / "report.html")
    assert run.code == 2, run.err
    assert not (tmp_path / "report.html").exists()  # nothing written
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT count(*) FROM releases").fetchone() == (6,)
    assert db.read_bytes()[:16] == before[:16] == b"SQLite format 3\x00"


def test_past_the_threshold_the_report_verifies_since_the_verified_head_and_says_so(ledger):
    """A full verification at a million releases takes minutes: past the threshold, with a
    verified head, the report checks what was appended since it (as `audit verify
    --since-checkpoint`) and says which events it checked; a tampered event after the head
    is still found."""
    url, tmp_path = ledger
    path = url.removeprefix("sqlite:///")

    def events() -> int:
        with sqlite3.connect(path) as connection:
            return connection.execute("SELECT count(*) FROM audit_events").fetchone()[0]

    out = tmp_path / "report.html"
    # no verified head yet: the full verification, stated as such
    assert cli_main(url, "report", "--out", out).code == 0
    head = events()
    assert f"every one of the {head} events matches its SHA-256 link" in out.read_text()
    assert cli_main(url, "audit", "verify").code == 0  # keeps the verified head
    (tmp_path / "more.yaml").write_text(
        "dataset: survey\nreleases:\n"
        "  - {id: g, title: More, reads: [age], mechanism: {name: laplace, epsilon: \"1/5\"}}\n")
    assert cli_main(url, "record", tmp_path / "more.yaml").code == 0
    now = events()
    assert now > head
    assert cli_main(url, "report", "--out", out).code == 0
    html = out.read_text()
    assert f"events {head + 1} to {now}, appended since the verified head (event {head}" in html
    assert f"events 1 to {head} were verified in full by that run" in html and "Audit chain verified" in html
    with sqlite3.connect(path) as connection:  # an event after the head, edited behind the ledger's back
        connection.execute("UPDATE audit_events SET actor = 'mallory' WHERE seq = ?", (now,))
    assert cli_main(url, "report", "--out", out).code == 0
    html = out.read_text()
    assert "Audit chain BROKEN" in html and f"event {now}" in html


def _meta(path: str) -> dict:
    with sqlite3.connect(path) as connection:
        return dict(connection.execute("SELECT key, value FROM ledger_meta").fetchall())


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_below_the_threshold_too_the_report_verifies_since_the_verified_head_and_says_what(ledger, monkeypatch, fmt):
    """At 10,000 releases the full verification (every release decoded
    and charged again) was most of a report's CPU. A ledger of any size with a verified head
    (kept by a passing `audit verify`) is checked from that head, and the report says which
    events it checked, since which event, when that head was kept and when the last full
    verification ran. Without a head: the full verification, and the report keeps no head
    (it writes nothing to the ledger). A tampered event after the head, or the head's own
    event rewritten, is still found."""
    url, tmp_path = ledger
    monkeypatch.delenv(SUMMARY_ENV)  # six releases: far below the threshold, a page lists them all
    path = url.removeprefix("sqlite:///")
    out = tmp_path / f"report.{fmt}"

    def events() -> int:
        with sqlite3.connect(path) as connection:
            return connection.execute("SELECT count(*) FROM audit_events").fetchone()[0]

    before = _meta(path)
    assert "verified_head" not in before
    assert cli_main(url, "report", "--out", out).code == 0
    if fmt == "html":  # (the Markdown and LaTeX certificates say the scope of an incremental check only)
        assert f"every one of the {events()} events matches its SHA-256 link" in out.read_text()
    assert _meta(path) == before  # no head kept by a report
    assert not (tmp_path / f"report.{fmt}.register.csv").exists()

    assert cli_main(url, "audit", "verify").code == 0  # keeps the verified head, with its time
    head = events()
    kept = _meta(path)["verified_head"]
    (tmp_path / "more.yaml").write_text(
        "dataset: survey\nreleases:\n"
        "  - {id: g, title: More, reads: [age], mechanism: {name: laplace, epsilon: \"1/5\"}}\n")
    assert cli_main(url, "record", tmp_path / "more.yaml").code == 0
    now = events()
    assert cli_main(url, "report", "--out", out).code == 0
    text = out.read_text()
    assert f"events {head + 1} to {now}, appended since the verified head (event {head}, kept by the last " \
           f"passing audit verify, at " in text
    assert f"events 1 to {head} were verified in full by that run" in text
    assert "does not recompute the releases untouched since that head" in text and "every one of the" not in text
    assert ("every other derived row (accounting rows, sealed chunks, running totals, accountant states) "
            "matches the digest") in text
    assert _meta(path)["verified_head"] == kept  # still the one audit verify kept

    with sqlite3.connect(path) as connection:  # the head's own event rewritten: its hash no longer holds
        connection.execute("UPDATE audit_events SET actor = 'mallory' WHERE seq = ?", (head,))
    assert cli_main(url, "report", "--out", out).code == 0
    text = unescape(out.read_text())
    assert "BROKEN" in text and "the verified checkpoint's content does not match its hash" in text


def test_the_scope_names_when_the_head_and_the_last_full_verification_were_kept():
    """chain_scope: a head kept by an incremental `audit verify --since-checkpoint` names the
    last full verification apart; a head with no time (before schema 8) says only that run."""
    from datetime import UTC, datetime

    from ledger.reporting.certificate import chain_scope
    from ledger.operations.report_inputs import ChainStatus

    full, later = datetime(2026, 1, 5, 9, 0, tzinfo=UTC), datetime(2026, 2, 1, 10, 30, tzinfo=UTC)
    incremental = chain_scope(ChainStatus(True, 120, "h", (), since=100, head_at=later, full_at=full))
    assert incremental.startswith("events 101 to 120, appended since the verified head (event 100, kept by the "
                                  "last passing audit verify, at 2026-02-01 10:30:00 UTC)")
    assert ("events 1 to 100 were verified by that run and those before it (the last full verification ran at "
            "2026-01-05 09:00:00 UTC)") in incremental
    assert "no event was appended since the verified head (event 120" in chain_scope(ChainStatus(
        True, 120, "h", (), since=120, head_at=later, full_at=later))
    untimed = chain_scope(ChainStatus(True, 120, "h", (), since=100))
    assert "kept by the last passing audit verify)" in untimed and "events 1 to 100 were verified by that run." in untimed


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(st.lists(st.one_of(st.text(), st.sampled_from(["=1+1", "+x", "-3", "@SUM(A1)", "\tx", "a\nb", "ok"]),
                          st.none(), st.integers())))
def test_a_register_column_is_neutralised_as_each_of_its_cells_would_be(values):
    """reporting.write.csv_column (the large register's columns, checked a column at a time) gives
    exactly csv_cell of each value: formulas behind an apostrophe, control characters made visible."""
    from ledger.reporting.write import csv_cell, csv_column

    assert csv_column(values) == [csv_cell(v) for v in values]


def test_a_ledger_that_changes_while_the_report_is_written_gets_no_report_of_two_moments(ledger, monkeypatch):
    """The page is read in one snapshot; the register of a large report in others (forked writers,
    new engines). A release recorded by someone else in between must never yield a page of one
    moment beside a register of another: exit 3, nothing written. Unchanged, the same report is
    written in full (the check compares the chain's last event, which every change moves)."""
    import ledger.cli.report as cli_report

    url, tmp_path = ledger
    (tmp_path / "late.yaml").write_text("dataset: survey\nreleases:\n"
                                        "  - {id: late, reads: [age], mechanism: {name: laplace, epsilon: 1}}\n")
    interleaved = []

    class RecordedMeanwhile(cli_report.RegisterAlongside):
        def __init__(self, *args, **kwargs):  # the page's snapshot is taken; its register not yet read
            if not interleaved:
                interleaved.append(cli_main(url, "record", tmp_path / "late.yaml").code)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(cli_report, "RegisterAlongside", RecordedMeanwhile)
    out = tmp_path / "report.html"
    run = cli_main(url, "report", "--out", out)
    assert interleaved == [0]
    assert run.code == 3, (run.code, run.out, run.err)
    assert "changed while the report was being written" in run.err
    assert not out.exists() and not (tmp_path / "report.html.register.csv").exists()
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]  # no part left behind

    run = cli_main(url, "report", "--out", out)  # nothing moves now: the report is written
    assert run.code == 0, run.err
    assert "late" in read_register(tmp_path / "report.html.register.csv")
