"""`privacy-ledger demo`: Tan's Example 3.6 recorded through the real pipeline.

The expected table is Tan (2023), Table 1, typed in from the paper: three count
tables each from an independent eps = 1 mechanism, Table A by age and sex,
Table B by residential region and race, Table C by residential region and age.
The whole-dataset column is Prop 3.1 (U = V is ordinary bounded DP): each table
costs 1, all three cost 3.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from unittest import mock

import pytest
from support import dump_sqlite

from ledger.cli import app as cli

PAPER_HEADER = ["{age}", "{sex}", "{residential region}", "{race}", "{other variable}", "whole dataset"]
PAPER_ROWS = {
    # release:          {age} {sex} {region} {race} {other}  whole dataset
    "Table A":         ["1", "1", "0", "0", "0", "1"],
    "Table B":         ["0", "0", "1", "1", "0", "1"],
    "Table C":         ["1", "0", "1", "0", "0", "1"],
    "Tables A, B & C": ["2", "1", "2", "1", "0", "3"],
}


def run_demo(cwd: Path, *args: str, db: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m ledger demo` in `cwd`; with no db, the default ledger (./ledger.db)."""
    env = {key: value for key, value in os.environ.items() if key != "LEDGER_DATABASE_URL"}
    if db is not None:
        env["LEDGER_DATABASE_URL"] = f"sqlite:///{db}"
    return subprocess.run([sys.executable, "-m", "ledger", "demo", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def text_table(output: str) -> tuple[list[str], dict[str, list[str]]]:
    """The header and the rows (by release) of the printed table."""
    lines = [line for line in output.splitlines() if line.startswith("| ")]
    cells = [[part.strip() for part in line.strip().strip("|").split("|")] for line in lines]
    header, *rows = cells
    assert header[0] == "Release"
    return header[1:], {row[0]: row[1:] for row in rows}


class _TableCells(HTMLParser):
    """Every <tr> of the document as a list of its cells' text."""

    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def html_table(html: str) -> tuple[list[str], dict[str, list[str]]]:
    parser = _TableCells()
    parser.feed(html)
    header, *rows = [row for row in parser.rows if row]
    return header[1:], {row[0]: row[1:] for row in rows}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """The demo in an empty directory, with no ledger configured."""
    directory = tmp_path_factory.mktemp("demo")
    result = run_demo(directory)
    return directory, result


def test_demo_prints_tans_table_1_with_the_whole_dataset_column(first_run):
    _, result = first_run
    assert result.returncode == 0, result.stderr
    header, rows = text_table(result.stdout)
    assert header == PAPER_HEADER
    assert rows == PAPER_ROWS
    assert list(rows) == list(PAPER_ROWS)  # in the paper's order, the total last


def test_demo_writes_the_table_as_html(first_run):
    directory, result = first_run
    assert result.returncode == 0, result.stderr
    html = (directory / "ledger-demo.html").read_text(encoding="utf-8")
    header, rows = html_table(html)
    assert header == PAPER_HEADER
    assert rows == PAPER_ROWS
    assert "<script" not in html.lower()


def test_demo_records_in_the_default_ledger_of_the_directory(first_run):
    directory, _ = first_run
    connection = sqlite3.connect(directory / "ledger.db")
    try:
        released = connection.execute("SELECT id, reads FROM releases ORDER BY seq").fetchall()
        events = connection.execute("SELECT kind FROM audit_events ORDER BY seq").fetchall()
    finally:
        connection.close()
    assert [(rid, sorted(json.loads(reads))) for rid, reads in released] == [
        ("Table A", ["age", "sex"]),
        ("Table B", ["race", "residential region"]),
        ("Table C", ["age", "residential region"]),
    ]
    assert [kind for (kind,) in events].count("release.recorded") == 3


def test_a_second_run_records_nothing_and_prints_the_same_table(first_run):
    directory, first = first_run
    before = dump_sqlite(directory / "ledger.db")
    again = run_demo(directory)
    assert again.returncode == 0, again.stderr
    assert dump_sqlite(directory / "ledger.db") == before
    assert text_table(again.stdout) == text_table(first.stdout)
    assert "nothing recorded" in again.stdout


def test_demo_refuses_a_ledger_that_holds_other_data(tmp_path):
    db = tmp_path / "ledger.db"
    dataset = tmp_path / "survey.yaml"
    dataset.write_text("dataset: survey\nvariables:\n  - {name: age}\n")
    env = {**os.environ, "LEDGER_DATABASE_URL": f"sqlite:///{db}"}
    # add the dataset in this process: the same entry point, without a second interpreter start-up
    with mock.patch.dict(os.environ, env), mock.patch.object(sys, "argv", ["privacy-ledger", "dataset", "add",
                                                                            str(dataset)]):
        with pytest.raises(SystemExit) as exit_:
            cli.main()
    assert exit_.value.code in (0, None)

    before = dump_sqlite(db)
    result = run_demo(tmp_path, "--out", "table.html", db=db)
    assert result.returncode == 2
    assert dump_sqlite(db) == before
    assert not (tmp_path / "table.html").exists()
    assert "nothing was written" in result.stderr
