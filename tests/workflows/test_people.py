"""People and duties: every step as a named person,
roles stored in the ledger, separation of duties by default, reasons for retract and
cancel, and (PostgreSQL) a store the ledger's own database role cannot rewrite.

Ledgers are written through the command line (`support.cli_main`); every refusal is
checked for its exit code (2), the argument it names, and that nothing was written
(every table compared row by row). Release files here state their status, and their
who and when, explicitly.
"""

from __future__ import annotations

import json
import os
import pwd
import sqlite3
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support import Run, acting_as, cli_main, dump_tables

DATASET = """\
dataset: survey
variables:
  - {name: income}
  - {name: region}
caps:
  - {subset: [income], epsilon: 2}
"""

WAIVED = DATASET.replace("dataset: survey\n", "dataset: survey\nself_approval: true\n")

PLAN = """\
dataset: survey
releases:
  - {id: r1, title: Mean income, reads: [income], mechanism: {name: laplace, epsilon: 0.5}}
"""


class Ledger:
    def __init__(self, url: str, directory: Path):
        self.url, self.directory = url, directory

    def __call__(self, *args) -> Run:
        return cli_main(self.url, *args)

    def ok(self, *args) -> Run:
        result = self(*args)
        assert result.code == 0, result.err
        return result

    def file(self, name: str, content: str) -> Path:
        path = self.directory / name
        path.write_text(textwrap.dedent(content), encoding="utf-8")
        return path

    def dump(self) -> dict[str, list[str]]:
        return dump_tables(self.url)

    def refused(self, *args, naming: str) -> Run:
        """The command exits 2 naming `naming`, and writes nothing."""
        before = self.dump()
        result = self(*args)
        assert result.code == 2, (result.out, result.err)
        assert naming in result.err, result.err
        assert "nothing was written" in result.err
        assert self.dump() == before
        return result

    def releases(self) -> dict[str, dict]:
        return {r["id"]: r for r in self.ok("releases", "--json").json()}


@pytest.fixture
def ledger(ledger_url, tmp_path) -> Ledger:
    """A ledger whose admin is ana (the first user), with bob a steward and carol an approver."""
    ledger = Ledger(ledger_url, tmp_path)
    with acting_as("ana"):
        said = ledger.ok("init").out
    assert "ana is its admin" in said
    with acting_as("ana"):
        ledger.ok("dataset", "add", ledger.file("survey.yaml", DATASET))
        ledger.ok("role", "grant", "bob", "steward")
        ledger.ok("role", "grant", "carol", "approver")
    return ledger


SQLITE = pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)


# --------------------------------------------------------------------------
# Roles
# --------------------------------------------------------------------------


def test_the_first_user_is_admin_with_every_role_and_role_changes_are_audit_events(ledger):
    assert ledger.ok("role", "list", "--json").json() == {
        "ana": ["admin", "steward", "approver", "auditor"], "bob": ["steward"], "carol": ["approver"]}  # as the text lists them
    with acting_as("ana"):
        ledger.ok("role", "revoke", "bob", "steward")
    assert "bob" not in ledger.ok("role", "list", "--json").json()
    engine = create_engine(ledger.url)
    with engine.connect() as connection:
        events = [tuple(r) for r in connection.execute(text(
            "SELECT kind, subject, actor FROM audit_events WHERE kind LIKE 'role.%' ORDER BY seq"))]
    engine.dispose()
    assert events == [("role.granted", "ana", "ana")] * 4 + [
        ("role.granted", "bob", "ana"), ("role.granted", "carol", "ana"), ("role.revoked", "bob", "ana")]
    assert ledger("audit", "verify").code == 0


@SQLITE
def test_a_step_without_its_role_exits_2_naming_the_role(ledger):
    plan = ledger.file("plan.yaml", PLAN)
    with acting_as("carol"):
        ledger.refused("record", plan, naming="needs the steward role")
    with acting_as("nobody"):
        ledger.refused("record", plan, naming="needs the steward role")
    with acting_as("bob"):
        ledger.ok("record", plan)
        ledger.refused("approve", "r1", naming="needs the approver role")
        ledger.refused("cap", "set", "income", "--epsilon", "1", naming="needs the admin role")
        ledger.refused("dataset", "add", ledger.file("other.yaml", DATASET.replace("survey", "other")),
                       naming="needs the admin role")
        ledger.refused("role", "grant", "bob", "approver", naming="needs the admin role")
    with acting_as("carol"):
        ledger.refused("cancel", "r1", "--reason", "x", naming="needs the steward role")


@SQLITE
@pytest.mark.parametrize("args, naming", [
    (["role", "grant", "dan", "owner"], "ROLE: unknown role 'owner'"),
    (["role", "grant", "  ", "steward"], "PERSON: a person's name cannot be empty"),
    (["role", "grant", "d\x1b[31man", "steward"], "control characters"),
    (["role", "revoke", "ghost", "steward"], "PERSON: unknown person 'ghost'"),
    (["role", "revoke", "carol", "steward"], "ROLE: 'carol' does not hold the steward role"),
    (["role", "revoke", "ana", "admin"], "only admin"),
])
def test_bad_role_input_exits_2_naming_the_argument(ledger, args, naming):
    args = [str(ledger.file("plan.yaml", PLAN)) if a == "PLAN" else a for a in args]
    with acting_as("ana"):
        ledger.refused(*args, naming=naming)


@SQLITE
def test_the_person_is_the_operating_system_user_whatever_ledger_user_says(ledger, monkeypatch):
    user = pwd.getpwuid(os.geteuid()).pw_name
    with acting_as("ana"):
        ledger.ok("role", "grant", user, "steward")
    monkeypatch.setenv("LEDGER_USER", "erin")
    ledger.ok("record", ledger.file("a.yaml", PLAN))
    assert {rid: r["recorded_by"] for rid, r in ledger.releases().items()} == {"r1": user}


# --------------------------------------------------------------------------
# Separation of duties
# --------------------------------------------------------------------------


def test_the_recorder_cannot_approve_their_own_release(ledger):
    with acting_as("ana"):
        ledger.ok("role", "grant", "bob", "approver")  # bob now holds both roles
    with acting_as("bob"):
        ledger.ok("record", ledger.file("plan.yaml", PLAN))
        ledger.refused("approve", "r1", naming="separation of duties")
    with acting_as("carol"):
        ledger.ok("approve", "r1")
    with acting_as("bob"):
        ledger.ok("publish", "r1")  # the publisher may be anyone holding the approver role
    release = ledger.releases()["r1"]
    assert (release["status"], release["recorded_by"], release["approved_by"]) == ("published", "bob", "carol")
    assert [(s["step"], s["by"]) for s in release["steps"]] == [("approved", "carol"), ("published", "bob")]


def test_a_file_cannot_name_an_approver_not_even_another_one(ledger):
    approved = PLAN.replace("epsilon: 0.5}}", "epsilon: 0.5}, status: approved, approved_by: carol, "
                                              "approved_at: \"2024-01-01T00:00:00Z\"}")
    with acting_as("ana"):
        ledger.ok("role", "grant", "bob", "approver")
    with acting_as("bob"):
        result = ledger.refused("record", ledger.file("plan.yaml", approved), naming="releases[0].approved_by")
    assert "approve it with `privacy-ledger approve ID` as another person" in result.err
    assert "r1" not in ledger.releases()


@SQLITE
def test_a_dataset_may_waive_separation_of_duties_and_the_report_says_so(ledger_url, tmp_path):
    ledger = Ledger(ledger_url, tmp_path)
    with acting_as("ana"):
        ledger.ok("dataset", "add", ledger.file("survey.yaml", WAIVED))
        ledger.ok("record", ledger.file("plan.yaml", PLAN))
        ledger.ok("approve", "r1")
    out = tmp_path / "report.md"
    ledger.ok("report", "--format", "md", "--out", out)
    assert "| Separation of duties | waived for this dataset (self_approval)" in out.read_text(encoding="utf-8")


# --------------------------------------------------------------------------
# Reasons: who, when and why, in the register and the audit trail
# --------------------------------------------------------------------------


@SQLITE
def test_retract_and_cancel_need_a_reason(ledger):
    two = PLAN + "  - {id: r2, reads: [income], mechanism: {name: laplace, epsilon: 0.5}}\n"
    with acting_as("bob"):
        ledger.ok("record", ledger.file("plan.yaml", two))
    with acting_as("carol"):
        ledger.ok("approve", "r1")
        ledger.ok("publish", "r1")
        ledger.refused("retract", "r1", naming="--reason")
        ledger.refused("retract", "r1", "--reason", "   ", naming="--reason: the reason is empty")
    with acting_as("bob"):
        ledger.refused("cancel", "r2", naming="--reason")
    # approve takes no --reason: its -h does not list it, and the command line refuses it (exit 2)
    with acting_as("carol"):
        no_reason = ledger("approve", "r2", "--reason", "why not")
    assert no_reason.code == 2 and "No such option: --reason" in no_reason.err
    with acting_as("carol"):
        ledger.ok("retract", "r1", "--reason", "a wrong region code")
    with acting_as("bob"):
        ledger.ok("cancel", "r2", "--reason", "no longer needed")

    releases = ledger.releases()
    retracted = releases["r1"]["steps"][-1]
    assert (retracted["step"], retracted["by"], retracted["reason"]) == ("retracted", "carol", "a wrong region code")
    assert releases["r2"]["steps"][-1]["reason"] == "no longer needed"
    listing = ledger.ok("releases").out
    assert "retracted by carol at " in listing and "a wrong region code" in listing

    out = ledger.directory / "report.md"
    ledger.ok("report", "--format", "md", "--out", out)
    md = out.read_text(encoding="utf-8")
    register = next(line for line in md.splitlines() if line.startswith("| r1 | retracted |"))
    assert "UTC by carol; retracted " in register and "by carol: a wrong region code" in register
    assert "| carol | release.retracted: a wrong region code | r1 |" in md
    assert "| bob | release.cancelled: no longer needed | r2 |" in md


# --------------------------------------------------------------------------
# The book of record on SQLite: enforced by the tool only, detected by the chain
# --------------------------------------------------------------------------


@SQLITE
def test_a_role_granted_behind_the_ledgers_back_is_caught_by_verify(ledger):
    path = ledger.url.removeprefix("sqlite:///")
    connection = sqlite3.connect(path)
    connection.execute("INSERT INTO roles (person, role) VALUES ('mallory', 'admin')")
    connection.commit()
    connection.close()
    result = ledger("audit", "verify")
    assert result.code == 1
    assert "role mallory/admin" in result.err and "no audit event" in result.err


# --------------------------------------------------------------------------
# PostgreSQL: the database refuses to rewrite events and releases
# --------------------------------------------------------------------------


POSTGRES = pytest.mark.parametrize("ledger_url", ["postgresql"], indirect=True)


@POSTGRES
@pytest.mark.parametrize("sql", [
    "UPDATE audit_events SET actor = 'mallory' WHERE seq = 1",
    "DELETE FROM audit_events WHERE seq = (SELECT max(seq) FROM audit_events)",
    "TRUNCATE audit_events",
    "DELETE FROM releases WHERE id = 'r1'",
    "UPDATE releases SET title = 'Something else' WHERE id = 'r1'",
    "UPDATE releases SET guarantees = '[]' WHERE id = 'r1'",
    "TRUNCATE releases CASCADE",
])
def test_postgresql_refuses_to_update_or_delete_events_and_releases(ledger, sql):
    with acting_as("bob"):
        ledger.ok("record", ledger.file("plan.yaml", PLAN))
    before = ledger.dump()
    engine = create_engine(ledger.url)  # the role the ledger runs as
    try:
        with pytest.raises(Exception, match="append-only|only its lifecycle changes"):
            with engine.begin() as connection:
                connection.execute(text(sql))
    finally:
        engine.dispose()
    assert ledger.dump() == before
    assert ledger("audit", "verify").code == 0


@POSTGRES
def test_postgresql_lets_the_ledger_change_a_lifecycle_and_append(ledger):
    with acting_as("bob"):
        ledger.ok("record", ledger.file("plan.yaml", PLAN))
    with acting_as("carol"):
        ledger.ok("approve", "r1")
        ledger.ok("publish", "r1")
        ledger.ok("retract", "r1", "--reason", "a test")
    assert ledger.releases()["r1"]["status"] == "retracted"
    assert ledger("audit", "verify").code == 0
    engine = create_engine(ledger.url)
    with engine.connect() as connection:
        triggers = {row[0] for row in connection.execute(text(
            "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal"))}
    engine.dispose()
    assert {"privacy_ledger_events_append_only", "privacy_ledger_releases_no_delete",
            "privacy_ledger_releases_lifecycle_only"} <= triggers


def test_release_json_carries_the_people(ledger):
    with acting_as("bob"):
        ledger.ok("record", ledger.file("plan.yaml", PLAN))
    release = ledger.releases()["r1"]
    assert (release["recorded_by"], release["approved_by"], release["steps"]) == ("bob", None, [])
    assert json.dumps(release)  # plain JSON


@SQLITE
def test_reclassifying_a_variable_public_needs_an_admin_and_is_an_audit_event(ledger):
    # public takes a variable out of the protected headline and every `protected` cap: an admin's step
    with acting_as("bob"):
        ledger.refused("dataset", "reclassify", "income", "public", "--reason", "published by law",
                       naming="needs the admin role")
    with acting_as("ana"):
        ledger.ok("dataset", "reclassify", "income", "public", "--reason", "published by law")
    engine = create_engine(ledger.url)
    with engine.connect() as connection:
        events = [tuple(r) for r in connection.execute(text(
            "SELECT kind, actor FROM audit_events WHERE kind = 'variable.reclassified'"))]
    engine.dispose()
    assert events == [("variable.reclassified", "ana")]
