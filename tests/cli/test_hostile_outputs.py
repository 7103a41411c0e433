"""Every output escapes what it prints.

A ledger is recorded whose titles, variable names and stewards carry every kind
of payload (release ids are held to a safe pattern by the release schema) -- Markdown pipes, CR/LF, backticks, HTML, TeX and mathtext
(`$\\notacommand$`), CSV formula prefixes, terminal escape sequences. Input now
refuses control characters, so the ledger is recorded as an older version would
have (the input limits switched off): outputs must cope with what is already in
ledgers. Every report format is rendered through the command line and each of its
tables is checked to keep its shape; the terminal commands print no control
character.
"""

from __future__ import annotations

import csv
import io
import re
from html.parser import HTMLParser

import pytest
from support import acting_as, cli_main

from ledger.input import documents, limits

DATASET = '''\
dataset: d
variables:
  - {name: "pipe|var"}
  - {name: "new\\nline"}
  - {name: "cr\\rvar"}
  - {name: "`tick`"}
  - {name: "<b>bold</b>"}
  - {name: "$\\\\notacommand$"}
  - {name: "=SUM(A1)"}
caps:
  - {subset: all, epsilon: 100}
'''

RELEASES = '''\
dataset: d
releases:
  - id: "a-1"
    title: "title | with pipe\\r\\nand CRLF `code` <script>alert(1)</script> $x^2$ \\e[31mred"
    reads: ["pipe|var", "new\\nline"]
    mechanism: {name: laplace, epsilon: 1}
  - id: "b 2"
    title: "@title\\rcr"
    reads: ["cr\\rvar", "`tick`", "<b>bold</b>"]
    mechanism: {name: laplace, epsilon: 1/2}
    status: planned
  - id: "c:3/x"
    title: "-dash"
    reads: ["$\\\\notacommand$", "=SUM(A1)", "pipe|var"]
    mechanism: {name: laplace, epsilon: 1/4}
    status: planned
'''

STEWARD = "eve|`<i>m</i>"  # control characters in names are refused at input
APPROVER = "ann|`<b>a</b>"  # separation of duties: another person approves


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    directory = tmp_path_factory.mktemp("hostile")
    url = f"sqlite:///{directory / 'ledger.db'}"
    (directory / "d.yaml").write_text(DATASET, encoding="utf-8")
    (directory / "r.yaml").write_text(RELEASES, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:  # a ledger recorded before the input limits
        patch.setattr(documents, "check_values", lambda document, depth: [])
        patch.setattr(limits, "check_text", lambda *args, **kwargs: [])
        for person, args in ((STEWARD, ["dataset", "add", directory / "d.yaml"]),
                             (STEWARD, ["record", directory / "r.yaml"]),
                             (STEWARD, ["role", "grant", APPROVER, "approver"]),
                             (APPROVER, ["approve", "b 2"])):
            with acting_as(person):
                result = cli_main(url, *args)
            assert result.code == 0, result.err
    return url, directory


def _markdown_tables(text: str) -> list[list[str]]:
    """Each table of a Markdown document as its lines (a table: consecutive lines
    beginning with `|`)."""
    tables, current = [], []
    for line in text.split("\n"):
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


def _cells(line: str) -> int:
    """Cells of a GFM table row: split on pipes not escaped by a backslash."""
    unescaped = re.sub(r"\\.", "x", line)
    return unescaped.strip().strip("|").count("|") + 1


def test_markdown_tables_keep_their_shape(hostile, tmp_path):
    url, _ = hostile
    out = tmp_path / "r.md"
    result = cli_main(url, "report", "--format", "md", "--out", out)
    assert result.code == 0, result.err
    raw = out.read_bytes()
    assert b"\r" not in raw and b"\x1b" not in raw
    text = raw.decode("utf-8")
    tables = _markdown_tables(text)
    assert len(tables) >= 4
    for table in tables:
        width = _cells(table[0])
        assert all(_cells(line) == width for line in table), table
        assert re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", table[1].replace(" ", "")), table[1]
    for line in text.split("\n"):  # nothing a Markdown renderer would take as markup or HTML
        assert "<script>" not in line and "<b>" not in line and "<i>" not in line
        assert not re.search(r"(?<!\\)`", line)


class _Tables(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables: list[list[int]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append(0)
        elif tag in ("td", "th") and self.tables and self.tables[-1]:
            span = int(dict(attrs).get("colspan") or 1)
            self.tables[-1][-1] += span


def test_html_escapes_every_payload_and_draws_its_charts(hostile, tmp_path):
    url, _ = hostile
    out = tmp_path / "r.html"
    result = cli_main(url, "report", "--format", "html", "--out", out)
    assert result.code == 0, result.err  # the mathtext label no longer breaks the charts
    text = out.read_text(encoding="utf-8")
    parser = _Tables()
    parser.feed(text)
    assert "script" not in [t for t in parser.tags if t == "script" and "alert(1)" in text.split("<script")[-1][:40]]
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;" in text
    assert "<b>bold</b>" not in text and "<i>m</i>" not in text
    assert "\x1b" not in text
    assert "$\\notacommand$" in text.replace("&#36;", "$")  # drawn as written in the charts
    for rows in parser.tables:
        assert rows and len(set(rows[1:] or rows)) <= 2, rows  # body rows share one width (a total row may span)


def test_latex_escapes_every_payload(hostile, tmp_path):
    url, _ = hostile
    out = tmp_path / "r.tex"
    result = cli_main(url, "report", "--format", "tex", "--out", out)
    assert result.code == 0, result.err
    text = out.read_text(encoding="utf-8")
    assert "$\\notacommand$" not in text and r"\$\textbackslash{}notacommand\$" in text
    assert "\x1b" not in text and "\r" not in text
    assert "pipe|var" in text or r"pipe\textbar{}var" in text or "pipe|var" in text.replace("{}", "")


def test_csv_keeps_its_shape_and_neutralises_formulas(hostile, tmp_path):
    url, _ = hostile
    out = tmp_path / "r.csv"
    result = cli_main(url, "report", "--format", "csv", "--out", out)
    assert result.code == 0, result.err
    rows = list(csv.reader(io.StringIO(out.read_bytes().decode("utf-8"), newline="")))
    assert len({len(row) for row in rows}) == 1, rows
    for row in rows:
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell


@pytest.mark.parametrize("command", [["releases"], ["table"], ["cap", "list"], ["pairs"], ["subset", "pipe|var"]])
def test_terminal_commands_print_no_control_character(hostile, command):
    url, _ = hostile
    result = cli_main(url, *command)
    assert result.code == 0, result.err
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", result.out + result.err), result.out


def test_input_refuses_control_characters_and_oversized_names(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    dataset = tmp_path / "d.yaml"
    dataset.write_text("dataset: d\nvariables:\n  - {name: \"a\\u0000b\"}\n  - {name: ok}\n", encoding="utf-8")
    result = cli_main(url, "dataset", "add", dataset)
    assert result.code == 2 and "U+0000" in result.err and "variables[0].name" in result.err
    dataset.write_text("dataset: d\nvariables:\n  - {name: " + "v" * 201 + "}\n", encoding="utf-8")
    result = cli_main(url, "dataset", "add", dataset)
    assert result.code == 2 and "at most 200" in result.err
    dataset.write_text("dataset: d\nvariables:\n  - {name: a}\n", encoding="utf-8")
    assert cli_main(url, "dataset", "add", dataset).code == 0
    release = tmp_path / "r.yaml"
    release.write_text("dataset: d\nreleases:\n  - id: r\n    title: \"" + "t" * 1001 + "\"\n    reads: [a]\n"
                       "    mechanism: {name: laplace, epsilon: 1}\n", encoding="utf-8")
    result = cli_main(url, "record", release)
    assert result.code == 2 and "at most 1000" in result.err and len(result.err) < 1000
    release.write_text("dataset: d\nreleases:\n  - id: r\n    title: \"a\\e[2Jb\"\n    reads: [a]\n"
                       "    mechanism: {name: laplace, epsilon: 1}\n", encoding="utf-8")
    result = cli_main(url, "record", release)
    assert result.code == 2 and "U+001B" in result.err and "\x1b" not in result.err
    with acting_as("x\x1b[2J"):
        result = cli_main(url, "record", release.with_name("none.yaml"))
    assert result.code == 2 and "\x1b" not in result.err
    assert cli_main(url, "releases").out.strip() in ("", "no releases")


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised():
    import pandas as pd

    from ledger.reporting.write import csv_safe

    frame = pd.DataFrame({"=cmd": ["=1+2", "+x", "-y", "@z", "a\x1bb", "plain"]},
                         index=pd.Index(["=HYPERLINK(1)", "r", "s", "t", "u", "v"], name="release"))
    rows = list(csv.reader(io.StringIO(csv_safe(frame).to_csv(lineterminator="\n"))))
    assert rows[0] == ["release", "'=cmd"]
    assert [row[1] for row in rows[1:]] == ["'=1+2", "'+x", "'-y", "'@z", "a\\x1bb", "plain"]
    assert rows[1][0] == "'=HYPERLINK(1)"
