"""The report's audit trail names every change of the dataset (docs/explanation/model.md#public-and-protected-variables, docs/explanation/model.md#people-duties-and-the-book-of-record).

A reclassification from protected to public takes a variable out of the headline: the board
reading the report must see it in the audit trail, as it sees caps changed. Every change of
a dataset is an event whose subject is the dataset (`amend_dataset`); its kind says what
changed (`variable.reclassified`, `variable.added`, `group.set`, ...), not only `dataset.*`.
Both paths are checked: the report built from every event, and the summarised report of a
large ledger, which counts the events by SQL (LEDGER_REPORT_SUMMARY_FROM=1 here).
"""

from __future__ import annotations

import pytest
from support import cli_main

DATASET = """\
dataset: d
variables:
  - {name: x, classification: sensitive}
  - {name: y, classification: sensitive}
"""


@pytest.mark.parametrize("summarised", [False, True])
def test_reclassifications_and_groups_are_in_the_reports_audit_trail(tmp_path, monkeypatch, summarised):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    (tmp_path / "d.yaml").write_text(DATASET, encoding="utf-8")
    (tmp_path / "r.yaml").write_text(
        "dataset: d\nreleases:\n  - {id: a, reads: [x], mechanism: {name: laplace, epsilon: 1}}\n", encoding="utf-8")
    for args in (("dataset", "add", tmp_path / "d.yaml"), ("record", tmp_path / "r.yaml"),
                 ("dataset", "reclassify", "x", "public", "--reason", "bands published"),
                 ("group", "set", "people", "x", "y")):
        run = cli_main(url, *args)
        assert run.code == 0, (args, run.out, run.err)
    if summarised:
        monkeypatch.setenv("LEDGER_REPORT_SUMMARY_FROM", "1")
    out = tmp_path / "report.md"
    run = cli_main(url, "report", "--out", out)
    assert run.code == 0, run.err
    text = out.read_text(encoding="utf-8")
    trail = text[text.index("events about this dataset"):]
    assert "variable.reclassified 1" in trail and "group.set 1" in trail, trail[:400]
    # which variable, from what to what, and why; which group
    assert "variable.reclassified: x: sensitive → public (bands published)" in trail, trail
    assert "group.set: group people" in trail, trail
    tex = tmp_path / "report.tex"
    assert cli_main(url, "report", "--out", tex).code == 0
    assert r"x: sensitive $\rightarrow$ public (bands published)" in tex.read_text(encoding="utf-8")
