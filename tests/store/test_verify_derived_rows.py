"""Every derived row a figure is computed from is checked by `audit verify --since-checkpoint`,
not only the rows the events since the verified head name (store/derived.py), on both backends.

The figures below are pure sums (Tan Prop 3.4): r1 charges 1.5 and r2 0.75 on income, so
`subset income` is 2.25; an accounting row of r1 pointed at r2's guarantee value makes it 1.5.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support import acting_as, cli_main, cli_ok

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TWO = """\
dataset: graduates
releases:
  - {id: r1, title: one, reads: [income], mechanism: {name: laplace, epsilon: 1.5, sensitivity: 1}}
  - {id: r2, title: two, reads: [income], mechanism: {name: laplace, epsilon: 0.75, sensitivity: 1}}
"""

LATER = """\
dataset: graduates
releases:
  - {id: r3, title: three, reads: [income, sex], mechanism: {name: gaussian, sigma: 10, sensitivity: 1}}
  - {id: p1, title: planned, status: planned, reads: [sex], mechanism: {name: laplace, epsilon: 0.5, sensitivity: 1}}
  - {id: p2, title: planned, status: planned, reads: [sex], mechanism: {name: laplace, epsilon: 0.5, sensitivity: 1}}
"""


def sql(url: str, statement: str, **binds):
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            return connection.execute(text(statement), binds).all() if statement.lstrip().upper().startswith(
                "SELECT") else connection.execute(text(statement), binds)
    finally:
        engine.dispose()


def subset_income(url: str) -> float:
    return float(cli_ok(url, "subset", "income", "--json").json()["epsilon"])


@pytest.fixture
def ledger(ledger_url, tmp_path):
    (tmp_path / "two.yaml").write_text(TWO)
    cli_ok(ledger_url, "dataset", "add", EXAMPLES / "graduates.dataset.yaml")
    cli_ok(ledger_url, "cap", "set", "income", "--epsilon", "10", "--delta", "1e-9")
    cli_ok(ledger_url, "cap", "set", "sex", "--epsilon", "5", "--delta", "1e-9")
    cli_ok(ledger_url, "record", tmp_path / "two.yaml")
    cli_ok(ledger_url, "audit", "verify")  # the verified head, with the derived rows' digest
    return ledger_url


def lower_r1(url: str) -> None:
    """r1's accounting row pointed at r2's guarantee value and event (the ids r2's row names)."""
    value, event = sql(url, "SELECT value, event FROM release_accounting WHERE release = 'r2'")[0]
    sql(url, "UPDATE release_accounting SET value = :v, event = :e WHERE release = 'r1'", v=value, e=event)


def test_an_accounting_row_edited_after_a_passing_verify_fails_the_incremental_one(ledger, tmp_path):
    assert subset_income(ledger) == pytest.approx(2.25)
    lower_r1(ledger)
    assert subset_income(ledger) == pytest.approx(1.5)  # the lowered figure the edit makes
    run = cli_main(ledger, "audit", "verify", "--since-checkpoint")
    assert run.code == 1
    assert "(table release_accounting)" in run.err and "changed outside the ledger" in run.err
    out = tmp_path / "report.md"
    cli_ok(ledger, "report", "--dataset", "graduates", "--format", "md", "--out", out)
    line = next(line for line in out.read_text().splitlines() if line.startswith("| Audit chain"))
    assert "BROKEN" in line and "release\\_accounting" in line and "derived rows NOT verified" in line
    assert "| verified" not in line


def test_writes_since_the_head_verify_incrementally_and_an_older_row_edited_among_them_is_found(ledger, tmp_path):
    (tmp_path / "later.yaml").write_text(LATER)
    cli_ok(ledger, "record", tmp_path / "later.yaml")
    cli_ok(ledger, "role", "grant", "bob", "approver")
    with acting_as("bob"):
        cli_ok(ledger, "approve", "p1")
    cli_ok(ledger, "publish", "p1")
    cli_ok(ledger, "cancel", "p2", "--reason", "not needed")
    cli_ok(ledger, "cap", "set", "income", "--epsilon", "12", "--delta", "1e-9")
    run = cli_ok(ledger, "audit", "verify", "--since-checkpoint")
    assert "checked, appended since the last verified head" in run.out  # incremental, and nothing found
    cli_ok(ledger, "retract", "p1", "--reason", "wrong table")
    lower_r1(ledger)  # r1: recorded before the head, named by no event since
    run = cli_main(ledger, "audit", "verify", "--since-checkpoint")
    assert run.code == 1 and "(table release_accounting)" in run.err
    assert cli_main(ledger, "audit", "verify").code == 1  # the full one agrees


def test_a_read_row_deleted_is_found(ledger):
    sql(ledger, "DELETE FROM release_reads WHERE seq = (SELECT seq FROM release_accounting WHERE release = 'r1')")
    run = cli_main(ledger, "audit", "verify", "--since-checkpoint")
    assert run.code == 1 and "(table release_reads)" in run.err


def test_a_guarantee_value_edited_is_found(ledger):
    body = sql(ledger, "SELECT body FROM guarantee_values ORDER BY id LIMIT 1")[0][0]
    sql(ledger, "UPDATE guarantee_values SET body = :b WHERE body = :old", b=body.replace("3", "1", 1), old=body)
    run = cli_main(ledger, "audit", "verify", "--since-checkpoint")
    assert run.code == 1 and "(table release_accounting)" in run.err


@pytest.mark.parametrize("write_since", [False, True], ids=["untouched", "written-since"])
def test_a_running_total_edited_is_found(ledger, tmp_path, write_since):
    if write_since:  # the dataset's totals then change legitimately: recomputed and compared
        (tmp_path / "later.yaml").write_text(LATER)
        cli_ok(ledger, "record", tmp_path / "later.yaml")
    total = sql(ledger, "SELECT total FROM cap_totals WHERE cap = 'income'")[0][0]
    total = json.loads(total) if isinstance(total, str) else total
    total["drivers"] = [d for d in total["drivers"] if d[0] != "r1"]
    total["value"] = "3/4"
    sql(ledger, "UPDATE cap_totals SET total = :t WHERE cap = 'income'", t=json.dumps(total))
    run = cli_main(ledger, "audit", "verify", "--since-checkpoint")
    assert run.code == 1 and "cap graduates/income" in run.err
    assert ("(table cap_totals)" if write_since else "cap_totals") in run.err


def test_a_head_kept_without_a_digest_verifies_in_full(ledger):
    head = sql(ledger, "SELECT value FROM ledger_meta WHERE key = 'verified_head'")[0][0]
    body = json.loads(head)
    del body["derived"]
    sql(ledger, "UPDATE ledger_meta SET value = :v WHERE key = 'verified_head'", v=json.dumps(body))
    lower_r1(ledger)
    run = cli_main(ledger, "audit", "verify", "--since-checkpoint")
    assert run.code == 1 and "(release r1): the accounting row differs from the release" in run.err


@pytest.mark.parametrize("verified_before", [False, True], ids=["no-head", "from-the-verified-head"])
def test_audit_checkpoint_refuses_a_chain_that_does_not_verify(ledger, tmp_path, verified_before):
    cli_ok(ledger, "audit", "keygen", "--out", tmp_path / "key")
    if not verified_before:
        sql(ledger, "DELETE FROM ledger_meta WHERE key = 'verified_head'")
    lower_r1(ledger)
    out = tmp_path / "checkpoint.json"
    run = cli_main(ledger, "audit", "checkpoint", "--key", tmp_path / "key", "--out", out)
    assert run.code == 1 and not out.exists()
    assert "does not verify" in run.err and "privacy-ledger audit verify" in run.err
    assert "release_accounting" in run.err or "(release r1)" in run.err


def test_audit_checkpoint_signs_a_chain_that_verifies(ledger, tmp_path):
    cli_ok(ledger, "audit", "keygen", "--out", tmp_path / "key")
    cli_ok(ledger, "audit", "checkpoint", "--key", tmp_path / "key", "--out", tmp_path / "checkpoint.json")
    run = cli_ok(ledger, "audit", "verify", "--checkpoint", tmp_path / "checkpoint.json",
                 "--public-key", tmp_path / "key.pub")
    assert "checkpoint held" in run.out


def test_a_migration_since_the_head_makes_the_incremental_verify_a_full_one(ledger):
    """An upgrade (schema 18 to 20: a `ledger.migrated` event each) may rebuild derived rows no
    release event names: the next --since-checkpoint verifies in full, and finds an edit all the same."""
    sql(ledger, "UPDATE ledger_meta SET value = '18' WHERE key = 'schema_version'")
    cli_ok(ledger, "releases")  # upgraded on first use
    assert sql(ledger, "SELECT kind, subject FROM audit_events ORDER BY seq DESC LIMIT 1")[0] == (
        "ledger.migrated", "schema 20")
    run = cli_ok(ledger, "audit", "verify", "--since-checkpoint")
    assert "appended since the last verified head" not in run.out  # in full
    lower_r1(ledger)
    run = cli_main(ledger, "audit", "verify", "--since-checkpoint")
    assert run.code == 1 and "(table release_accounting)" in run.err


def test_rows_edited_with_the_digest_in_the_database_are_found_from_a_signed_checkpoint(ledger, tmp_path):
    """Who rewrites a row and the digest kept beside the head in the same database passes
    --since-checkpoint alone; from a signed checkpoint (its digest signed with its head) that
    edit is found."""
    from ledger.store import engines, sessions
    from ledger.store import derived

    cli_ok(ledger, "audit", "keygen", "--out", tmp_path / "key")
    cli_ok(ledger, "audit", "checkpoint", "--key", tmp_path / "key", "--out", tmp_path / "signed.json")
    signed = json.loads((tmp_path / "signed.json").read_text())
    assert signed["head"]["derived"]["seq"] == signed["head"]["seq"]
    lower_r1(ledger)
    engine = engines.make_engine(ledger)
    try:
        with sessions.read_session(engine) as session:  # the digest of the edited rows, as an informed forger makes it
            forged, _ = derived._accounting_sums(session.connection(), set())
    finally:
        engine.dispose()
    head = json.loads(sql(ledger, "SELECT value FROM ledger_meta WHERE key = 'verified_head'")[0][0])
    head["derived"]["accounting"] = format(forged, "064x")
    sql(ledger, "UPDATE ledger_meta SET value = :v WHERE key = 'verified_head'", v=json.dumps(head))
    assert cli_main(ledger, "audit", "verify", "--since-checkpoint").code == 0  # the database's own head: fooled
    run = cli_main(ledger, "audit", "verify", "--since-checkpoint", "--checkpoint", tmp_path / "signed.json",
                   "--public-key", tmp_path / "key.pub")
    assert run.code == 1 and "(table release_accounting)" in run.err


@pytest.mark.parametrize("edit, named", [
    ("UPDATE variables SET classification = 'public' WHERE name = 'income'", "(table datasets)"),
    ("UPDATE families SET description = 'changed'", "(family halves)"),
])
def test_the_configuration_a_figure_reads_is_under_the_digest(ledger, tmp_path, edit, named):
    (tmp_path / "family.yaml").write_text(
        "dataset: graduates\nfamilies:\n  - {id: halves, partition: random}\nreleases:\n"
        "  - {id: h1, reads: [sex], family: halves, part: one, mechanism: {name: laplace, epsilon: 1}}\n")
    cli_ok(ledger, "record", tmp_path / "family.yaml")
    cli_ok(ledger, "audit", "verify", "--since-checkpoint")  # the head moves past the family's events
    sql(ledger, edit)
    run = cli_main(ledger, "audit", "verify", "--since-checkpoint")
    assert run.code == 1 and named in run.err


def test_a_cap_row_edited_in_a_dataset_written_since_is_found(ledger, tmp_path):
    (tmp_path / "later.yaml").write_text(LATER)
    cli_ok(ledger, "record", tmp_path / "later.yaml")  # the dataset's figures change: recomputed
    sql(ledger, "UPDATE caps SET epsilon = '1000' WHERE name = 'sex'")  # no event names the cap since
    run = cli_main(ledger, "audit", "verify", "--since-checkpoint")
    assert run.code == 1 and "(cap graduates/sex): the cap's row (table caps) was changed" in run.err
