"""The Python API: `import ledger` gives the figures the CLI prints.

Expected numbers are Tan's Table 1 (Example 3.6) and closed forms, never the
code's own output.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

import ledger
from ledger.api import front_end
from ledger.reporting import write_report
from support import as_person, acting_as, cli_main

CENSUS = {
    "dataset": "census",
    "variables": [{"name": n} for n in ("age", "sex", "region", "race", "other")],
}
TABLES = {"dataset": "census", "releases": [
    {"id": "A", "reads": ["age", "sex"], "mechanism": {"name": "geometric", "epsilon": 1}},
    {"id": "B", "reads": ["region", "race"], "mechanism": {"name": "geometric", "epsilon": 1}},
    {"id": "C", "reads": ["region", "age"], "mechanism": {"name": "geometric", "epsilon": 1}},
]}


@pytest.fixture
def book(tmp_path):
    book = ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", person=front_end("tester", "test"))
    book.add_dataset(CENSUS)
    book.record(TABLES)
    return book


def test_top_level_surface_is_documented_and_typed():
    import importlib.resources

    for name in ("open", "Ledger", "InputErrors", "BudgetRefused", "LedgerError", "SubsetLoss"):
        assert getattr(ledger, name).__doc__, name
    assert importlib.resources.files("ledger").joinpath("py.typed").is_file()


def test_table_is_tans_table_1(book):
    frame = book.table()
    assert list(frame.columns) == ["age", "sex", "region", "race", "other"]
    assert list(frame.index) == ["A", "B", "C", "All releases"]
    # Tan, Table 1: totals 2, 1, 2, 1, 0 on the singletons
    assert frame.loc["All releases"].tolist() == [2, 1, 2, 1, 0]
    assert frame.loc["B"].tolist() == [0, 0, 1, 1, 0]
    assert book.table(whole_dataset=True).loc["All releases", "whole dataset"] == 3


def test_table_without_its_release_rows_is_its_total_row(book):
    totals = book.table(whole_dataset=True, releases=False)
    whole = book.table(whole_dataset=True)
    assert list(totals.index) == ["All releases"] and totals.attrs["statuses"] == {}
    assert totals.loc["All releases"].tolist() == whole.loc["All releases"].tolist() == [2, 1, 2, 1, 0, 3]
    assert {k: v for k, v in totals.attrs.items() if k != "statuses"} == \
        {k: v for k, v in whole.attrs.items() if k != "statuses"}


def test_subset_safe_float_and_exact(book):
    loss = book.subset(["age", "sex"])
    assert loss.exact == Fraction(2) and loss.epsilon == 2.0
    assert loss.releases == ("A", "C")
    assert book.subset("race").exact == 1


def test_cancelled_releases_never_count(book, tmp_path):
    """The obvious route through store.snapshot counted cancelled releases (3.476 vs 3.301)."""
    book.record({"dataset": "census", "releases": [
        {"id": "D", "reads": ["age"], "mechanism": {"name": "laplace", "epsilon": "1/3"}, "status": "planned"}]})
    assert book.subset(["age"]).exact == Fraction(7, 3)
    book.cancel("D", reason="not needed")
    assert book.subset(["age"]).exact == 2
    assert book.table().loc["All releases", "age"] == 2
    assert "D" not in book.table().index
    run = cli_main(book.url, "subset", "age", "--json")
    assert run.code == 0 and run.json()["epsilon"] == 2


def test_subset_zcdp_is_a_safe_bound(tmp_path, reference_filter):
    book = ledger.open(f"sqlite:///{tmp_path / 'z.db'}")
    book.add_dataset({"dataset": "d", "delta": "1e-6", "variables": [{"name": "x"}]})
    book.record({"dataset": "d", "releases": [
        {"id": "g", "reads": ["x"], "mechanism": {"name": "gaussian", "sigma": 1, "sensitivity": 1}}]})
    loss = book.subset(["x"])
    assert loss.rho == Fraction(1, 2) and loss.exact is None
    # the running figure: CKS at each of the 22 fixed orders at delta / 44, the smallest
    assert loss.epsilon >= reference_filter(rho=0.5, delta=1e-6)
    assert loss.epsilon == pytest.approx(reference_filter(rho=0.5, delta=1e-6), rel=1e-9)
    # rho-zCDP gives (rho + 2 sqrt(rho ln(1/delta')), delta') (Bun and Steinke 2016, Prop 1.3): CKS
    # at the same delta' = delta / 44 is tighter
    assert 0.5 < loss.epsilon <= 0.5 + 2 * math.sqrt(0.5 * math.log(44e6))
    assert loss.delta == Fraction(1, 10**6)


def test_errors_are_the_collected_ledger_errors(book):
    with pytest.raises(ledger.InputErrors) as caught:
        book.subset(["agee"])
    (error,) = caught.value.errors
    assert isinstance(error, ledger.LedgerError)
    assert "did you mean 'age'" in error.message
    assert (error.source, error.field) == ("argument", "variables")  # the API's parameter, not a CLI option
    with pytest.raises(ledger.InputErrors) as caught:
        book.approve("AA")
    assert "did you mean 'A'" in caught.value.errors[0].message


def test_budget_refused_and_nothing_written(book):
    book.set_cap(["age"], epsilon=2)
    plan = {"dataset": "census", "releases": [
        {"id": "E", "reads": ["age"], "mechanism": {"name": "laplace", "epsilon": "1/10"}}]}
    assert not book.check(plan).ok
    with pytest.raises(ledger.BudgetRefused):
        book.record(plan)
    assert [r.id for r in book.releases()] == ["A", "B", "C"]
    assert book.headroom(["age"]).epsilon == 0


def test_lifecycle_pairs_verify_and_report(book, tmp_path):
    book.record({"dataset": "census", "releases": [
        {"id": "P", "reads": ["sex"], "mechanism": {"name": "laplace", "epsilon": 1}, "status": "planned"}]})
    # separation of duties (docs/explanation/model.md#people-duties-and-the-book-of-record): another person approves and publishes
    with acting_as(book.releases()[0].recorded_by):
        assert cli_main(book.url, "role", "grant", "grace", "approver").code == 0
    assert as_person(book, "grace").approve("P").status == ledger.Status.APPROVED
    assert as_person(book, "grace").publish("P").status == ledger.Status.PUBLISHED
    pairs = book.pairs()
    row = pairs[(pairs.variable_1 == "age") & (pairs.variable_2 == "sex")]
    assert row.epsilon.tolist() == [3]  # A 1 + C 1 (reads age) + P 1 (reads sex)
    assert book.verify().ok
    out = write_report(book, tmp_path / "table.csv")
    assert out.read_text().splitlines()[0].startswith("release") or "age" in out.read_text().splitlines()[0]


def test_report_inputs_hold_the_dataset_its_releases_and_the_verified_chain(book):
    inputs = book.report_inputs(delta="1e-6", since="2024-05-01")
    assert inputs.dataset.name == "census" and inputs.delta == Fraction(1, 10**6)
    assert [r.id for r in inputs.releases] == ["A", "B", "C"]
    assert inputs.since.isoformat() == "2024-05-01T00:00:00+00:00"  # a date alone: its start, UTC
    chain = inputs.chain_status()
    assert chain.ok and chain.events == len(inputs.events) and chain.head == inputs.events[-1].hash


def _recording_meanwhile(book, ids):
    """A Summary whose `starting` (the count read, the page not yet) records releases `ids` through
    another Ledger: a writer committing while the report reads."""
    from ledger.operations.report_source import Summary

    other = ledger.open(book.url, person=front_end("tester", "test"))
    releases = [{"id": rid, "reads": ["other"], "mechanism": {"name": "geometric", "epsilon": 1}} for rid in ids]
    return lambda inputs_of: Summary(above=0, inputs_of=inputs_of, listed=10, audit_listed=10,
                                     starting=lambda count: other.record({"dataset": "census", "releases": releases}))


@pytest.mark.parametrize("summarised", [True, False])
def test_the_report_page_is_read_in_the_snapshot_its_release_count_chose_it_in(book, summarised):
    # summarised: the reading from the accounting rows; else the rows decline (inputs_of gives None)
    # and every release is read, in the same read
    summary = _recording_meanwhile(book, ["D", "E"])(
        (lambda reading: reading) if summarised else (lambda reading: None))
    chosen = book.dataset("census")
    reading = book.report_reading(chosen, Fraction(1, 10**9), summary=summary)
    assert reading.releases == 3
    if summarised:
        assert reading.inputs is None and reading.large.releases == 3
        assert sorted(reading.large.largest) == ["A", "B", "C"]
    else:
        assert reading.large is None and [r.id for r in reading.inputs.releases] == ["A", "B", "C"]
    assert [r.id for r in book.report_inputs().releases] == ["A", "B", "C", "D", "E"]  # (committed meanwhile)


def test_the_api_writes_the_report_the_cli_writes(book, tmp_path):
    # the CSV export carries no moment of its own: the same ledger gives the same bytes
    api, cli = tmp_path / "api.csv", tmp_path / "cli.csv"
    assert write_report(book, api) == api
    assert cli_main(book.url, "report", "--out", cli).code == 0
    assert api.read_bytes() == cli.read_bytes()
    # Tan, Table 1: the total row (floats, then the exact figures), the whole dataset 3
    assert api.read_text().splitlines()[-1] == "All releases (composed),2.0,1.0,2.0,1.0,0.0,3.0,2,1,2,1,0,3"


def test_open_defaults_to_the_cli_url(monkeypatch, tmp_path):
    monkeypatch.setenv("LEDGER_DATABASE_URL", f"sqlite:///{tmp_path / 'env.db'}")
    assert ledger.open().url == f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.delenv("LEDGER_DATABASE_URL")
    monkeypatch.chdir(tmp_path)
    assert ledger.open().url == "sqlite:///ledger.db"


def test_postgres_scheme_is_read_as_psycopg():
    from ledger.operations.choices import ledger_url

    assert ledger_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert ledger_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"


def test_figures_read_the_accounting_rows_not_every_release(book, monkeypatch):
    """The façade's figures come from the index the command line reads (the accounting rows):
    with the full decode of every release made impossible, subset, table, pairs and caps still answer."""
    from ledger.store import decoded_history

    def decoded(*_args, **_kwargs):
        raise AssertionError("every release decoded for a figure")

    monkeypatch.setattr(decoded_history, "snapshot", decoded)
    fresh = ledger.open(book.url, person=front_end("tester", "test"))
    assert fresh.subset(["age", "sex"]).exact == Fraction(2)
    assert fresh.table().loc["All releases"].tolist() == [2, 1, 2, 1, 0]
    assert fresh.pairs()["epsilon"].max() == 3
    assert fresh.worst_pair()["epsilon"].tolist() == [3]
    assert fresh.caps() == []


def test_release_count_is_how_many_releases_lists(book):
    assert book.release_count("census") == len(book.releases("census")) == 3
    book.record({"dataset": "census", "releases": [
        {"id": "D", "reads": ["other"], "mechanism": {"name": "geometric", "epsilon": 1}, "status": "planned"}]})
    book.cancel("D", reason="not needed")
    assert book.release_count("census") == len(book.releases("census")) == 4
    assert book.release_count("census", as_of="2000-01-01") == len(book.releases("census", as_of="2000-01-01")) == 0
