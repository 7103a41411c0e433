"""Plans in the book of record (ledger/operations/plan_book.py): `plan record --name` stores a
solved plan as a numbered version, its releases planned in the same transaction; `plan list`,
`plan show`, `plan diff NAME@v1 NAME@v2`; the report's "Plan against actual". On SQLite and
PostgreSQL (ledger_url).

The expected allocations are water-filling by hand over two pure caps (tight: x, epsilon 1;
slack: y, epsilon 3): v1 (a on x, c on y, weights 1 and 1): tight binds a at 1, c alone takes
the 3 slack leaves. v2 (a 1; c 3 and g 1 on y): a = 1 again, c + g = 3t + t = 3 so t = 3/4:
c = 9/4, g = 3/4.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
import yaml
from sqlalchemy import create_engine, text
from support import cli_main, cli_ok, dump_tables

import ledger
from ledger.core.errors import Refused
from ledger.operations import plan_book
from ledger.store import schema_migrations
from ledger.store import enforced

DATASET = {"dataset": "d", "self_approval": True, "variables": [{"name": "x"}, {"name": "y"}],
           "caps": [{"name": "tight", "subset": ["x"], "epsilon": 1}, {"name": "slack", "subset": ["y"], "epsilon": 3}]}
V1 = {"dataset": "d", "releases": [{"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": 1},
                                   {"id": "c", "reads": ["y"], "mechanism": "laplace", "weight": 1}]}
V2 = {"dataset": "d", "releases": [{"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": 1},
                                   {"id": "c", "reads": ["y"], "mechanism": "laplace", "weight": 3},
                                   {"id": "g", "reads": ["y"], "mechanism": "geometric", "weight": 1}]}


@pytest.fixture
def book(ledger_url, tmp_path):
    for name, body in (("d.yaml", DATASET), ("v1.yaml", V1), ("v2.yaml", V2)):
        (tmp_path / name).write_text(yaml.safe_dump(body))
    cli_ok(ledger_url, "dataset", "add", tmp_path / "d.yaml")
    return ledger_url


def spent(url: str) -> dict:
    return {c.cap.name: c.after for c in ledger.open(url).caps()}


def test_v1_reserves_the_sum_of_its_solved_charges_and_is_stored(book, tmp_path):
    out = cli_ok(book, "plan", "record", tmp_path / "v1.yaml", "--name", "q").out
    assert "as plan q@v1" in out
    assert spent(book) == {"tight": 1, "slack": 3}
    stored = ledger.open(book).plan("q")
    assert (stored.label, stored.dataset) == ("q@v1", "d")
    assert {r["key"]: (r["id"], r["allocated"], r["binding"]) for r in stored.releases} == {
        "a": ("q/v1/a", {"epsilon": "1"}, "tight"), "c": ("q/v1/c", {"epsilon": "3"}, "slack")}
    assert {r.id: r.status.value for r in ledger.open(book).releases()} == {"q/v1/a": "planned", "q/v1/c": "planned"}
    assert sum(F(next(iter(r["allocated"].values()))) for r in stored.releases) == sum(spent(book).values())


def test_v2_is_numbered_reserves_its_own_charges_and_the_diff_names_what_changed(book, tmp_path):
    cli_ok(book, "plan", "record", tmp_path / "v1.yaml", "--name", "q")
    api = ledger.open(book)
    for rid in ("q/v1/a", "q/v1/c"):
        api.cancel(rid, reason="replanned")  # frees v1's reservation
    cli_ok(book, "plan", "record", tmp_path / "v2.yaml", "--name", "q")
    assert spent(book) == {"tight": 1, "slack": F(9, 4) + F(3, 4)}
    assert [v.label for v in api.plans()] == ["q@v1", "q@v2"] == [v.label for v in api.plans("d")]
    assert {r["key"]: F(r["value"]) for r in api.plan("q@v2").releases} == {"a": 1, "c": F(9, 4), "g": F(3, 4)}
    diff = api.plan_diff("q@v1", "q@v2").set_index("id")
    assert diff["status"].to_dict() == {"a": "same", "c": "changed", "g": "added"}
    assert (diff.loc["c", "old"], diff.loc["c", "new"], diff.loc["c", "change"]) == (3, F(9, 4), pytest.approx(-0.25))
    assert diff.loc["c", "new_std"] == pytest.approx(2 ** 0.5 / 2.25)  # Laplace: sqrt(2) / epsilon
    run = cli_ok(book, "plan", "diff", "q@v1", "q@v2", "--json").json()
    assert {r["id"]: r["status"] for r in run["releases"]} == {"a": "same", "c": "changed", "g": "added"}
    listed = cli_ok(book, "plan", "list", "--json").json()
    assert [(p["plan"], p["releases"]) for p in listed] == [("q@v1", 2), ("q@v2", 3)]
    assert "q/v2/g" in cli_ok(book, "plan", "show", "q@v2").out
    assert cli_ok(book, "audit", "verify").code == 0


def test_a_plan_release_that_would_break_a_cap_exits_1_and_writes_nothing(book, tmp_path):
    (tmp_path / "big.yaml").write_text(yaml.safe_dump({"dataset": "d", "releases": [
        {"id": "b", "reads": ["x"], "mechanism": "laplace", "epsilon": 2}]}))
    before = dump_tables(book)
    run = cli_main(book, "plan", "record", tmp_path / "big.yaml", "--name", "q")
    assert run.code == 1 and "cap d/tight" in run.err
    assert dump_tables(book) == before


@pytest.mark.parametrize("args, field", [(("--name", "q"), "releases[0].mechanism"),
                                         (("--name", "no/slash"), "name")])
def test_a_bad_plan_file_or_name_exits_2_and_writes_nothing(book, tmp_path, args, field):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"dataset": "d", "releases": [
        {"id": "a", "reads": ["x"], "mechanism": "laplace" if field == "name" else "cauchy", "weight": 1}]}))
    before = dump_tables(book)
    run = cli_main(book, "plan", "record", tmp_path / "bad.yaml", *args)
    assert run.code == 2 and field in run.err
    assert dump_tables(book) == before


def test_the_version_event_failing_writes_none_of_the_releases(book, tmp_path, monkeypatch):
    """All or nothing: another v1 appearing between the solve and the write refuses the whole record."""
    real = plan_book.versions_in
    calls = []

    def seen(session, dataset=None, name=None):
        calls.append(name)
        found = real(session, dataset, name)
        return found if len(calls) == 1 else [*found, "another v1"]

    monkeypatch.setattr(plan_book, "versions_in", seen)
    before = dump_tables(book)
    with pytest.raises(Refused, match="recorded by another steward"):
        ledger.open(book).record_plan(tmp_path / "v1.yaml", name="q")
    assert dump_tables(book) == before


def test_unknown_versions_are_bad_input(book, tmp_path):
    cli_ok(book, "plan", "record", tmp_path / "v1.yaml", "--name", "q")
    assert cli_main(book, "plan", "show", "q@v2").code == 2
    assert cli_main(book, "plan", "diff", "q@v1", "q@v3").code == 2
    assert cli_main(book, "plan", "show", "nothing").code == 2


def test_the_report_lists_allocated_beside_actual_after_one_release_is_published(book, tmp_path):
    cli_ok(book, "plan", "record", tmp_path / "v1.yaml", "--name", "q")
    cli_ok(book, "approve", "q/v1/a")
    cli_ok(book, "publish", "q/v1/a")
    cli_ok(book, "report", "-o", tmp_path / "r.md")
    section = (tmp_path / "r.md").read_text().split("## Plan against actual", 1)[1].split("\n## ", 1)[0]
    assert "### Plan q@v1" in section
    assert "| a | q/v1/a | laplace | epsilon 1 | epsilon 1 | tight | published | epsilon 1 | epsilon 1 |" in section
    assert "| c | q/v1/c | laplace | epsilon 3 | epsilon 3 | slack | planned | epsilon 3 | epsilon 3 |" in section
    cli_ok(book, "report", "-o", tmp_path / "r.html")
    assert "Plan against actual" in (tmp_path / "r.html").read_text()


def test_a_summarised_report_of_a_large_ledger_has_the_same_plan_section(book, tmp_path, monkeypatch):
    cli_ok(book, "plan", "record", tmp_path / "v1.yaml", "--name", "q")
    cli_ok(book, "approve", "q/v1/a")
    cli_ok(book, "publish", "q/v1/a")
    cli_ok(book, "report", "-o", tmp_path / "small.md")
    monkeypatch.setenv("LEDGER_REPORT_SUMMARY_FROM", "1")  # every ledger past it is summarised
    cli_ok(book, "report", "-o", tmp_path / "large.md")

    def section(name: str) -> str:
        return (tmp_path / name).read_text().split("## Plan against actual", 1)[1].split("\n## ", 1)[0]

    assert "complete register" in (tmp_path / "large.md").read_text()  # (the large path wrote it)
    assert section("large.md") == section("small.md")


def test_a_report_without_plans_has_no_plan_section(book, tmp_path):
    cli_ok(book, "report", "-o", tmp_path / "r.md")
    assert "Plan against actual" not in (tmp_path / "r.md").read_text()


def test_a_schema_19_ledger_is_upgraded_so_a_steward_may_write_plan_versions(book, monkeypatch):
    """As schema 19 left it: on PostgreSQL, an event check that does not name plan.recorded (admin only)."""
    engine = create_engine(book)
    try:
        with engine.begin() as connection:
            if engine.dialect.name == "postgresql":
                with monkeypatch.context() as patch:
                    patch.delitem(enforced.EVENT_ROLES, "plan.recorded")
                    for statement in enforced.statements():
                        connection.exec_driver_sql(statement)
                source = connection.execute(text("SELECT prosrc FROM pg_proc WHERE proname = "
                                                 "'privacy_ledger_event_check'")).scalar()
                assert "plan.recorded" not in source
            connection.execute(text("UPDATE ledger_meta SET value = '19' WHERE key = 'schema_version'"))
    finally:
        engine.dispose()
    cli_ok(book, "plan", "list")  # the first command that opens it upgrades it
    engine = create_engine(book)
    try:
        with engine.connect() as connection:
            assert connection.execute(text("SELECT kind, subject FROM audit_events ORDER BY seq DESC LIMIT 1")).one() \
                == ("ledger.migrated", "schema 20")
            assert connection.execute(text("SELECT value FROM ledger_meta WHERE key = 'schema_version'")).scalar() \
                == str(schema_migrations.SCHEMA_VERSION) == "20"
            if engine.dialect.name == "postgresql":  # the event check names the new kind: a steward's duty
                source = connection.execute(text("SELECT prosrc FROM pg_proc WHERE proname = "
                                                 "'privacy_ledger_event_check'")).scalar()
                assert "WHEN 'plan.recorded' THEN ARRAY['ledger_steward']" in source
    finally:
        engine.dispose()
