"""Why a figure is ∞, in the same words in every command (docs/explanation/model.md#families, reasons.py).

A family split by key variables K is charged ∞ on a subset U meeting K when some member holds
no add/remove guarantee protecting everything it reads: a record moving between parts takes all
of it along. Every member's own figure is finite then, and nothing is read without a
guarantee, so "not protected" (a read without a certified bound) is the wrong reason. `check`
named the family; `subset`, `cap list` and `cap set` did not, and `cap list` printed its
drivers as a bare ∞ with the reason on another line. The report's caps table gave every ∞
driver the cap's overall reason, not its own.

The firms ledger: a family by-region keyed on region, two geometric counts by region of
income (epsilon 1 each, replacement neighbours: no add/remove guarantee), and a count of sex
(epsilon 1/2). On {income} the family costs its worst member, 1 (K ∩ U empty); on any
subset with region, ∞.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from test_report_helpers import clock, context_of, record, run_main

from ledger.reporting.write import render
from ledger.reporting.report import SUMMARY_ENV

T = lambda month, day, hour=9: datetime(2024, month, day, hour, 0, tzinfo=UTC)  # noqa: E731

DATASET = """\
dataset: firms
delta: 1e-9
variables:
  - {name: region, classification: sensitive}
  - {name: income, classification: sensitive}
  - {name: sex, classification: identifying}
"""

RELEASES = """\
dataset: firms
families:
  - {id: by-region, partition: [region]}
releases:
  - id: north
    reads: [region, income]
    mechanism: {name: geometric, epsilon: 1}
    family: by-region
    part: region=north
  - id: south
    reads: [region, income]
    mechanism: {name: geometric, epsilon: 1}
    family: by-region
    part: region=south
  - id: by-sex
    reads: [sex]
    mechanism: {name: geometric, epsilon: 1/2}
"""

PLAN = """\
dataset: firms
releases:
  - id: more-sex
    reads: [sex]
    mechanism: {name: geometric, epsilon: 1/2}
"""

# reasons.family_reason: the family, in a word (short enough for a table's cell)
SHORT = "family by-region: no add/remove bound"
# cap_unbounded.why_family_unbounded: `check`'s sentence for a plan's family
LONG = ("family by-region is split by region, in this cap's subset: a record moving between parts takes "
        "everything north reads (income, region) with it, and no add/remove guarantee of north protects all of it")


def firms(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    record(url, tmp_path, "firms.yaml", DATASET, T(1, 1), command="dataset")
    record(url, tmp_path, "releases.yaml", RELEASES, T(1, 2))
    with clock(T(1, 3)):  # set after the releases: over at once
        assert run_main(url, "cap", "set", "region", "sex", "--epsilon", "3", "--name", "rs", "-d", "firms").code == 0
    return url


def test_check_names_the_family_when_its_plan_makes_the_cap_infinite(tmp_path):
    """The reference: `check` of the family as a plan (already right before this change)."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    record(url, tmp_path, "firms.yaml", DATASET, T(1, 1), command="dataset")
    with clock(T(1, 2)):
        assert run_main(url, "cap", "set", "region", "sex", "--epsilon", "3", "--name", "rs", "-d", "firms").code == 0
    (tmp_path / "plan.yaml").write_text(RELEASES, encoding="utf-8")
    out = run_main(url, "check", str(tmp_path / "plan.yaml")).out
    assert f"this plan: family by-region (its members charged once) +∞: {LONG}" in out
    assert out.count(LONG) == 1  # said once, on the charge that makes it


def test_cap_list_and_cap_set_give_the_familys_reason_not_not_protected(tmp_path):
    url = firms(tmp_path)
    for args in (("cap", "list"), ("cap", "list", "--as-of", "2024-01-04"),
                 ("cap", "set", "region", "sex", "--epsilon", "3", "--name", "rs", "-d", "firms")):
        with clock(T(1, 4)):
            out = run_main(url, *args).out
        assert f"no bound: {LONG}" in out, args
        assert "not protected" not in out, args
    listed = json.loads(run_main(url, "cap", "list", "--json").out)
    assert listed[0]["reason"] == LONG
    # `check` of another plan on the cap, already ∞: the same sentence (was the generic one)
    (tmp_path / "plan.yaml").write_text(PLAN, encoding="utf-8")
    out = run_main(url, "check", str(tmp_path / "plan.yaml")).out
    assert f"no bound: {LONG}" in out and "not protected" not in out


def test_subset_gives_the_familys_reason_in_text_and_json(tmp_path):
    url = firms(tmp_path)
    assert run_main(url, "subset", "region", "income").out.splitlines()[0] == f"{{region, income}}: ∞ ({SHORT})"
    assert run_main(url, "subset", "region").out.splitlines()[0] == f"{{region}}: ∞ ({SHORT})"
    assert json.loads(run_main(url, "subset", "region", "sex", "--json").out)["reason"] == SHORT
    # K ∩ U empty: the family costs its worst member, epsilon 1 (docs/explanation/model.md#families)
    assert run_main(url, "subset", "income").out.splitlines()[0] == "{income}: epsilon 1 (pure)"


def test_cap_list_prints_an_infinite_driver_with_its_reason_beside_it(tmp_path):
    url = firms(tmp_path)
    out = run_main(url, "cap", "list").out
    assert f"driven by: family by-region (∞ ({SHORT}), charged once), by-sex (0.5)" in out
    assert "(∞, charged once)" not in out
    # --json gives each driver the reason the text prints beside it (null for a finite charge)
    (rs,) = [c for c in run_main(url, "cap", "list", "--json").json() if c["cap"] == "rs"]
    assert [(d["release"], d["family"], d["value"], d["reason"]) for d in rs["drivers"]] == [
        (None, "by-region", "inf", SHORT), ("by-sex", None, 0.5, None)]


def test_the_heat_maps_legend_and_the_pairs_name_the_alarm_and_each_reason(tmp_path):
    """The heat map's red cells are every ∞ on protected variables, here a family's move, not a read
    without a bound: its legend names the alarm, not "∞: not protected" whatever the cause, and
    points to the tables, which give each pair's reason."""
    url = firms(tmp_path)
    html = render(context_of(url, "firms"), "html").decode()
    assert "∞ on a protected variable: an alarm (why: the tables)" in html
    assert "∞: not protected" not in html and "red: ∞, not protected" not in html
    # the pairs beside it, ∞ by the same family's move, say so in `subset`'s words (they said "not protected")
    assert run_main(url, "subset", "region", "income").out.splitlines()[0] == f"{{region, income}}: ∞ ({SHORT})"
    highest = html.split('id="highest-pairs"')[1].split("</table>")[0]
    assert highest.count(f"∞ ({SHORT})") == 2 and "not protected" not in highest
    assert "2 pairs of protected variables at ∞)" in html


def test_the_reports_caps_table_gives_the_familys_reason_on_both_paths(tmp_path, monkeypatch):
    url = firms(tmp_path)
    row = f"| rs | {{region, sex}} | epsilon | 3 | ∞ ({SHORT}) | -∞ | over | family by-region (∞ ({SHORT})), by-sex (0.5) |"
    md = render(context_of(url, "firms", charts=False), "md").decode()
    assert row in md
    monkeypatch.setenv(SUMMARY_ENV, "1")  # the summarised report of a large ledger, from the accounting rows
    out = tmp_path / "large.md"
    assert run_main(url, "report", "-o", str(out), "-d", "firms").code == 0
    assert row in out.read_text(encoding="utf-8")


GRADUATES = """\
dataset: graduates
delta: 1e-9
variables:
  - {name: degree, classification: public}
  - {name: income, classification: sensitive}
"""

GRADUATE_RELEASES = """\
dataset: graduates
releases:
  - id: consistent-income
    reads: [degree, income]
    mechanism: {name: tan-consistent-counts, epsilon: 1}
    guarantees: [{protects: [income], epsilon: 1}]
  - id: mean-income
    reads: [income]
    mechanism: {name: gaussian, sigma: 10, sensitivity: 1}
"""


def test_each_infinite_driver_in_the_caps_table_and_cap_list_gives_its_own_reason(tmp_path, monkeypatch):
    """A pure-epsilon cap on the whole dataset: ∞ because degree (public) is read exactly by
    consistent-income (the cap's reason, neutral); mean-income, a Gaussian (rho 1/200), is ∞ there
    for want of a pure-epsilon bound, not because anything is released exactly."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    record(url, tmp_path, "graduates.yaml", GRADUATES, T(1, 1), command="dataset")
    record(url, tmp_path, "releases.yaml", GRADUATE_RELEASES, T(1, 2))
    with clock(T(1, 3)):
        assert run_main(url, "cap", "set", "all", "--epsilon", "10", "-d", "graduates").code == 0
    drivers = "consistent-income (∞ (public, released exactly)), mean-income (∞ (no pure-epsilon bound))"
    md = render(context_of(url, "graduates", charts=False), "md").decode()
    assert f"| ∞ (public, released exactly) | -∞ | over | {drivers} |" in md
    monkeypatch.setenv(SUMMARY_ENV, "1")
    out = tmp_path / "large.md"
    assert run_main(url, "report", "-o", str(out), "-d", "graduates").code == 0
    assert f"| ∞ (public, released exactly) | -∞ | over | {drivers} |" in out.read_text(encoding="utf-8")
    assert f"driven by: {drivers}" in run_main(url, "cap", "list").out
    (cap,) = run_main(url, "cap", "list", "--json").json()
    assert [(d["release"], d["reason"]) for d in cap["drivers"]] == [
        ("consistent-income", "public, released exactly"), ("mean-income", "no pure-epsilon bound")]


def test_table_and_the_reports_headline_total_row_and_pairs_give_the_familys_reason(tmp_path, monkeypatch):
    """The headline said "region read without a certified bound" (region is read by two counts
    that protect it); the total row and the pairs said "not protected"."""
    url = firms(tmp_path)
    table = run_main(url, "table", "-d", "firms").out
    assert f"ALARM: protected subset (every variable not classified public) {{region, income, sex}}: epsilon ∞ ({SHORT})" \
        in table.splitlines()
    assert f"  worst protected variable: region (∞ ({SHORT}))" in table.splitlines()
    assert f"  worst protected pair: {{region, income}} (∞ ({SHORT}))" in table.splitlines()
    assert "without a certified bound" not in table and "not protected" not in table
    md = render(context_of(url, "firms", charts=False), "md").decode()
    assert f"| **Protected subset epsilon** (every variable not classified public) | **ALARM: ∞ ({SHORT})** |" in md
    assert f"| Worst protected variable | {{region}} ∞ ({SHORT}) |" in md
    # the total row: region and the whole dataset ∞ by the family's move; income 1 (K ∩ U empty), sex 1/2
    assert f"| **All releases (composed)** | **∞ ({SHORT})** | **1** | **0.5** | **∞ ({SHORT})** |" in md
    assert f"| {{income}} | ∞ ({SHORT}) | 1 | 1.5 |" in md  # the pairs: {income, region} ∞, {income, sex} 1 + 1/2
    assert "∞ (not protected)" not in md
    monkeypatch.setenv(SUMMARY_ENV, "1")
    out = tmp_path / "large.md"
    assert run_main(url, "report", "-o", str(out), "-d", "firms").code == 0
    large = out.read_text(encoding="utf-8")
    assert f"| **All releases (composed)** | **∞ ({SHORT})** | **1** | **0.5** | **∞ ({SHORT})** |" in large
    assert f"**ALARM: ∞ ({SHORT})**" in large and "∞ (not protected)" not in large
