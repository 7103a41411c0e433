"""Snapshot tests: every report format for the demo ledger (Tan's Example 3.6).

The demo is recorded by `ledger.cli.demo.run_demo` with the store's clock fixed, and each
report is rendered at a fixed "generated at"; hashes (and the drawing commands of the
inline SVG charts, but not their text) are normalised. The snapshots live in
tests/snapshots/. After a deliberate change, regenerate them with

    UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/reports/test_report_snapshots.py

and read the diff before committing it.
"""

from __future__ import annotations

import difflib
import io
import os
import textwrap
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

import pdfplumber
import pytest
from test_report_helpers import DEMO_TIME, TAN_TABLE_1, demo_ledger, normalise, rendered

SNAPSHOTS = Path(__file__).resolve().parents[1] / "snapshots"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1"


def check_snapshot(name: str, actual: str) -> None:
    """Compare with tests/snapshots/NAME (or write it, with UPDATE_SNAPSHOTS=1)."""
    path = SNAPSHOTS / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    difference = snapshot_difference(name, actual)
    if difference is not None:
        raise AssertionError(f"{name} differs from its snapshot (UPDATE_SNAPSHOTS=1 to accept):\n{difference}")


def snapshot_difference(name: str, actual: str) -> str | None:
    """The unified diff between the snapshot and `actual`, or None when they are equal."""
    path = SNAPSHOTS / name
    if not path.exists():
        return f"no snapshot {path}; run with UPDATE_SNAPSHOTS=1 to create it"
    expected = path.read_text(encoding="utf-8")
    if actual == expected:
        return None
    return "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                       f"snapshots/{name}", "rendered", n=2))[:6000]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return demo_ledger(tmp_path_factory.mktemp("demo"))


def pdf_text(data: bytes) -> tuple[int, str]:
    """The page count and the words of each page, re-wrapped at 100 characters: line breaks
    made by the page layout (which fonts and Chromium versions move) do not count."""
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        pages = [" ".join((page.extract_text() or "").split()) for page in pdf.pages]
    return len(pages), "\n".join(f"--- page {k}\n" + textwrap.fill(text, 100) for k, text in enumerate(pages, 1))


@pytest.mark.parametrize("fmt,name", [("html", "demo.html"), ("md", "demo.md"), ("tex", "demo.tex"),
                                      ("csv", "demo.csv")])
def test_every_text_format_of_the_demo_matches_its_snapshot(demo, fmt, name):
    text = rendered(demo, "census", fmt).decode("utf-8")
    check_snapshot(name, normalise(text))


def test_the_demo_pdf_matches_its_snapshot_text(demo):
    pages, text = pdf_text(rendered(demo, "census", "pdf"))
    check_snapshot("demo.pdf.txt", normalise(f"pages: {pages}\n{text}\n"))


def test_the_csv_is_tans_table_1(demo):
    lines = rendered(demo, "census", "csv").decode("utf-8").splitlines()
    names = ["{age}", "{sex}", "{residential region}", "{race}", "{other variable}", "whole dataset (ordinary DP)"]
    assert lines[0] == ",".join(["release", *names, *(f"{name} exact" for name in names)])
    # numeric cells: a float column per variable, then the exact column (Tan's Table 1 in both)
    rows = {line.split(",")[0]: line.split(",")[1:] for line in lines[1:]}
    assert {release: [str(int(float(cell))) for cell in cells[:6]] for release, cells in rows.items()} == TAN_TABLE_1
    assert {release: cells[6:] for release, cells in rows.items()} == TAN_TABLE_1


@pytest.mark.skipif(UPDATE, reason="snapshots are being rewritten")
def test_a_changed_report_fails_its_snapshot(demo):
    """The comparison is not vacuous: the same report as the ledger stood at a moment differs from it
    (the demo is pure-only: its figures, and so its report, do not depend on the delta)."""
    changed = normalise(rendered(demo, "census", "md", as_of=DEMO_TIME + timedelta(hours=1)).decode("utf-8"))
    difference = snapshot_difference("demo.md", changed)
    assert difference is not None
    assert "+| As of | 2024-05-02 10:15:00 UTC: the ledger as it stood then, by publication date |" in difference
    same_figures = normalise(rendered(demo, "census", "md", delta=Fraction(1, 10**6)).decode("utf-8"))
    assert snapshot_difference("demo.md", same_figures) is None
