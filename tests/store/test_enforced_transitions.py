"""PostgreSQL refuses a forged append at INSERT (store/enforced.py): a lifecycle step
lifecycle.TRANSITIONS does not allow, and, under a person's own login, an event of a duty the
login's group role does not hold. Each forged event below is chained correctly (its hash is
SHA-256 over the previous hash and the event, codec.event_hash), so only the trigger can refuse it.
"""

from __future__ import annotations

import json
import secrets
from fractions import Fraction as F
from pathlib import Path

import pytest
from conftest import _new_database
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from support import cli_main, cli_ok

import ledger
from ledger.accounting.lifecycle import TRANSITIONS
from ledger.core.records import Guarantee, Mechanism, Notion, Release, Status
from ledger.operations.people import DUTIES
from ledger.store import enforced
from ledger.store.codec import canonical_json, event_hash

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

RELEASES = """\
dataset: graduates
releases:
  - {id: out, title: published, reads: [income], status: published, published_at: "2026-01-02T00:00:00Z",
     mechanism: {name: laplace, epsilon: 1.5, sensitivity: 1}}
  - {id: plan, title: planned, reads: [income], status: planned,
     mechanism: {name: laplace, epsilon: 0.5, sensitivity: 1}}
"""


@pytest.fixture
def pg(tmp_path):
    with _new_database("postgresql", tmp_path) as url:
        (tmp_path / "releases.yaml").write_text(RELEASES)
        # (one person records the history, a release published among it: the dataset waives four eyes)
        (tmp_path / "graduates.dataset.yaml").write_text("self_approval: true\n"
                                                         + (EXAMPLES / "graduates.dataset.yaml").read_text())
        cli_ok(url, "dataset", "add", tmp_path / "graduates.dataset.yaml")
        cli_ok(url, "record", tmp_path / "releases.yaml")
        book = ledger.open(url)  # a planned release whose output was computed elsewhere: charged for good
        book.record(Release(id="ran", dataset="graduates", reads=frozenset({"income"}),
                            mechanism=Mechanism("laplace", (("epsilon", F(1, 2)),)), output_digest="ab" * 32,
                            guarantees=(Guarantee(frozenset({"income"}), Notion.PURE, epsilon=F(1, 2)),)))
        yield url


def forge(url: str, kind: str, subject: str, payload: dict, actor: str = "mallory") -> None:
    """Append one event, chained correctly, by raw SQL (as `url`'s login)."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            seq, previous = connection.execute(text("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1")).one()
            at, body = "2026-06-01T00:00:00+00:00", canonical_json(payload)
            connection.execute(text("INSERT INTO audit_events (seq, at, actor, kind, subject, payload, prev_hash, hash) "
                                    "VALUES (:s, :at, :actor, :kind, :subject, :payload, :prev, :hash)"),
                               {"s": seq + 1, "at": at, "actor": actor, "kind": kind, "subject": subject,
                                "payload": body, "prev": previous,
                                "hash": event_hash(previous, seq + 1, at, actor, kind, subject, body)})
    finally:
        engine.dispose()


def release_body(url: str, release: str) -> dict:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            payload = connection.execute(text("SELECT payload FROM audit_events WHERE subject = :r ORDER BY seq DESC "
                                              "LIMIT 1"), {"r": release}).scalar_one()
    finally:
        engine.dispose()
    return json.loads(payload)["release"]


def test_a_published_release_turned_cancelled_is_refused_at_insert(pg):
    body = {**release_body(pg, "out"), "status": "cancelled"}
    with pytest.raises(DBAPIError, match="release out cannot go from published to cancelled"):
        forge(pg, "release.cancelled", "out", {"release": body, "reason": "refund"})
    assert cli_ok(pg, "audit", "verify").out.startswith("audit chain intact")  # nothing was written


@pytest.mark.parametrize("release, kind, status, why", [
    ("out", "release.approved", "approved", "cannot go from published to approved"),
    ("plan", "release.published", "published", "cannot go from planned to published"),
    ("plan", "release.retracted", "retracted", "cannot go from planned to retracted"),
    ("ran", "release.cancelled", "cancelled", "has an output: it stays charged"),
    ("out", "release.recorded", "cancelled", "is recorded already"),
])
def test_a_step_the_lifecycle_does_not_allow_is_refused_at_insert(pg, release, kind, status, why):
    body = {**release_body(pg, release), "status": status}
    with pytest.raises(DBAPIError, match=why):
        forge(pg, kind, release, {"release": body})


def test_an_allowed_step_that_changes_more_than_the_lifecycle_is_refused(pg):
    body = {**release_body(pg, "plan"), "status": "cancelled", "reads": []}
    with pytest.raises(DBAPIError, match="changes more than its lifecycle"):
        forge(pg, "release.cancelled", "plan", {"release": body})
    forge(pg, "release.cancelled", "plan", {"release": {**release_body(pg, "plan"), "status": "cancelled"}})


def test_an_update_of_a_release_row_status_follows_the_lifecycle(pg):
    engine = create_engine(pg)
    try:
        with pytest.raises(DBAPIError, match="cannot go from published to cancelled"), engine.begin() as connection:
            connection.execute(text("UPDATE releases SET status = 'cancelled' WHERE id = 'out'"))
    finally:
        engine.dispose()


@pytest.fixture
def person(pg):
    """A person's own login (trust authentication on 127.0.0.1), a steward, not an admin."""
    name = f"person_{secrets.token_hex(4)}"
    engine = create_engine(pg)
    try:
        with engine.begin() as connection:
            connection.execute(text(f'CREATE ROLE "{name}" LOGIN'))
            connection.execute(text(f'GRANT ledger_steward TO "{name}"'))
        yield name, make_url(pg).set(username=name).render_as_string(hide_password=False)
    finally:
        with engine.begin() as connection:
            connection.execute(text(f'DROP OWNED BY "{name}"'))
            connection.execute(text(f'DROP ROLE "{name}"'))
        engine.dispose()


def test_a_login_without_ledger_admin_cannot_set_a_cap(pg, person):
    name, url = person
    cap = {"dataset": "graduates", "name": "income", "subset": ["income"], "whole_dataset": False,
           "epsilon": "1000", "delta": None, "rho": None, "filter": None}
    with pytest.raises(DBAPIError, match=f"{name} may not write a cap.set event: it needs the role ledger_admin"):
        forge(url, "cap.set", "graduates/income", {"cap": cap}, actor=name)
    body = {**release_body(pg, "plan"), "status": "cancelled"}  # a steward's own duty goes through
    forge(url, "release.cancelled", "plan", {"release": body}, actor=name)


def test_role_grant_makes_the_login_a_member_of_the_group_role(pg, person):
    name, _ = person
    cli_ok(pg, "role", "grant", name, "approver")

    def member() -> bool:
        engine = create_engine(pg)
        try:
            with engine.connect() as connection:
                return connection.execute(text("SELECT pg_has_role(:n, 'ledger_approver', 'MEMBER')"),
                                          {"n": name}).scalar()
        finally:
            engine.dispose()

    assert member()
    cli_ok(pg, "role", "revoke", name, "approver")
    assert not member()


def test_role_grant_under_a_persons_login_refuses_a_name_with_no_login(pg, person):
    name, url = person
    assert cli_main(pg, "role", "grant", name, "admin").code == 0  # by the tables' owner: in the ledger and the database
    run = cli_main(url, "role", "grant", f"nobody_{secrets.token_hex(3)}", "steward")
    assert run.code == 2 and "has no database login on this server" in run.err


def test_the_sql_table_is_the_lifecycle_table():
    pairs = {f"{s.value}>{target.value}" for sources, target in TRANSITIONS.values() for s in sources}
    assert set(enforced.allowed_pairs()) == pairs
    assert "published>cancelled" not in pairs and "planned>cancelled" in pairs
    assert {f"release.{target.value}" for _, target in TRANSITIONS.values()} < set(enforced.release_kinds())
    assert set(Status) >= {target for _, target in TRANSITIONS.values()}


def test_the_roles_of_each_event_are_the_duties_people_hold():
    for kind, duty in enforced.EVENT_DUTIES.items():
        needed = DUTIES[duty]
        assert set(enforced.EVENT_ROLES[kind]) == ({needed} if isinstance(needed, str) else set(needed)), kind


def test_a_schema_18_ledger_is_upgraded_and_then_refuses_a_forged_append(pg):
    """Schema 19 installs the triggers: a ledger made before them (as schema 18 left it: no
    trigger on INSERT, stamped 18) gets them, with one `ledger.migrated` event, on first use."""
    engine = create_engine(pg)
    try:
        with engine.begin() as connection:
            connection.execute(text("DROP TRIGGER privacy_ledger_events_checked ON audit_events"))
            connection.execute(text("DROP TRIGGER privacy_ledger_releases_status ON releases"))
            connection.execute(text("DROP FUNCTION privacy_ledger_event_check(), privacy_ledger_status_check()"))
            connection.execute(text("UPDATE ledger_meta SET value = '18' WHERE key = 'schema_version'"))
    finally:
        engine.dispose()
    forge(pg, "release.retracted", "out", {"release": {**release_body(pg, "out"), "status": "retracted"}})
    cli_ok(pg, "record", "--help")  # (help opens no ledger)
    cli_ok(pg, "releases")  # the first command that opens it upgrades it
    engine = create_engine(pg)
    try:
        with engine.connect() as connection:
            assert connection.execute(text("SELECT kind, subject FROM audit_events ORDER BY seq DESC LIMIT 2")).all() \
                == [("ledger.migrated", "schema 20"), ("ledger.migrated", "schema 19")]
    finally:
        engine.dispose()
    with pytest.raises(DBAPIError, match="cannot go from retracted to cancelled"):
        forge(pg, "release.cancelled", "out", {"release": {**release_body(pg, "out"), "status": "cancelled"}})


def test_a_steward_login_records_but_not_a_release_recorded_as_published(pg, person):
    name, url = person
    planned = {**release_body(pg, "plan"), "id": "new", "status": "planned"}
    forge(url, "release.recorded", "new", {"release": planned}, actor=name)
    published = {**planned, "id": "newer", "status": "published", "published_at": "2026-06-01T00:00:00+00:00"}
    with pytest.raises(DBAPIError, match="it needs the role ledger_approver"):
        forge(url, "release.recorded", "newer", {"release": published}, actor=name)


def test_a_steward_login_may_store_a_plan_version_as_it_records(pg, person):
    """plan.recorded is a steward's duty (EVENT_ROLES), not the admin's every unnamed kind needs."""
    name, url = person
    forge(url, "plan.recorded", "q@v1", {"plan": {"name": "q", "version": 1, "dataset": "graduates", "source": "",
                                                  "releases": []}}, actor=name)
    engine = create_engine(pg)
    try:
        with engine.begin() as connection:
            connection.execute(text(f'REVOKE ledger_steward FROM "{name}"'))
            connection.execute(text(f'GRANT ledger_auditor TO "{name}"'))  # (reads and writes tables, no steward duty)
    finally:
        engine.dispose()
    with pytest.raises(DBAPIError, match="may not write a plan.recorded event: it needs the role ledger_steward"):
        forge(url, "plan.recorded", "q@v2", {"plan": {"name": "q", "version": 2, "dataset": "graduates",
                                                      "source": "", "releases": []}}, actor=name)
