"""Every command lists a dataset's caps in one order, on both backends: by name, in Python's
string order (records.in_name_order). `cap list` took the database's ORDER BY name, which on
PostgreSQL follows the database's collation: under a language's locale (here ICU en-US,
`collated_ledger_url`) mixed-case names came out `Alpha, beta, Delta, gamma`, while `cap list
--as-of` (history.state_as_of) sorted them in Python: `Alpha, Delta, beta, gamma`.
"""

from __future__ import annotations

import json

import ledger
from test_as_of_state import START, STEP, Ledger, release

DATASET = """\
dataset: d
self_approval: true  # (history recorded as published by one person)
delta: 1e-6
variables:
  - {name: x, classification: sensitive}
  - {name: y, classification: sensitive}
caps:
  - {name: gamma, subset: [x], epsilon: 5}
  - {name: Delta, subset: [y], epsilon: 5}
"""

# code points: upper case (65-90) before lower case (97-122); no locale in it
IN_NAME_ORDER = ["Alpha", "Delta", "beta", "gamma"]


def caps_section(markdown: str) -> list[str]:
    start = markdown.index("## Caps")
    section = markdown[start:markdown.index("\n## ", start + 1)]
    return [line.split("|")[1].strip() for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| Cap ")]


def test_every_command_lists_mixed_case_caps_in_one_order_on_both_backends(tmp_path, monkeypatch,
                                                                            collated_ledger_url):
    book = Ledger(tmp_path / "caps", monkeypatch, collated_ledger_url)
    book.now = START
    book.run("dataset", "add", book.file(DATASET))
    book.now = START + STEP
    book.run("cap", "set", "x", "y", "--epsilon", "8", "--name", "beta")
    book.run("cap", "set", "x", "--epsilon", "3", "--name", "Alpha")
    book.now = START + 2 * STEP
    book.run("record", book.file(release("r1", ["x", "y"], "1", book.now)))
    book.now = START + 3 * STEP

    assert [c["cap"] for c in json.loads(book.ask("cap", "list", "--json"))] == IN_NAME_ORDER
    at = START + 2 * STEP
    assert [c["cap"] for c in json.loads(book.ask("cap", "list", "--json", at=at))] == IN_NAME_ORDER
    text = book.ask("cap", "list")
    assert sorted(IN_NAME_ORDER, key=text.index) == IN_NAME_ORDER
    plan = book.file("dataset: d\nreleases:\n  - {id: r2, reads: [x, y], mechanism: {name: laplace, epsilon: \"1/2\"}}\n")
    assert [c["cap"] for c in json.loads(book.ask("check", plan, "--json"))["caps"]] == IN_NAME_ORDER
    for moment in (None, at):
        out = tmp_path / "report.md"
        book.ask("report", "--out", out, at=moment)
        assert caps_section(out.read_text(encoding="utf-8")) == IN_NAME_ORDER
    assert [c.cap.name for c in ledger.open(collated_ledger_url).caps()] == IN_NAME_ORDER
