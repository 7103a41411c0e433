"""The schema's steps: one per version, in order, walked by `ensure_schema` from a ledger's version.

A ledger made at schema 17 (fixtures/ledger_before_filters.sql; fixtures/make_ledger_before_filters.py
says how it was made) is upgraded by `ensure_schema` through every later step, each recorded as a
`ledger.migrated` event, and its audit chain verifies afterwards.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from support import migrations

from ledger.store import audit_verify, engines, schema_migrations, sessions

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ledger_before_filters.sql"


def test_the_steps_are_one_per_version_from_2_to_the_schema_version():
    assert [step.version for step in schema_migrations.MIGRATIONS] == list(range(2, schema_migrations.SCHEMA_VERSION + 1))


def test_every_step_says_what_it_changes_in_one_line():
    for step in schema_migrations.MIGRATIONS:
        assert step.description.strip() and "\n" not in step.description, step.version


def _rows(url: str, statement: str) -> list[tuple]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        return connection.execute(statement).fetchall()


def test_a_ledger_at_schema_17_is_upgraded_step_by_step_and_verifies(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(FIXTURE.read_text(encoding="utf-8"))
    url = f"sqlite:///{path}"
    assert _rows(url, "SELECT value FROM ledger_meta WHERE key = 'schema_version'") == [("17",)]
    events = _rows(url, "SELECT count(*) FROM audit_events")[0][0]

    engine = engines.make_engine(url)
    try:
        schema_migrations.ensure_schema(engine)
        assert schema_migrations.schema_state(engine) == ("current", schema_migrations.SCHEMA_VERSION)
        with sessions.read_session(engine) as session:
            verification = audit_verify.verify(session)
    finally:
        engine.dispose()

    assert verification.ok, verification.problems
    assert _rows(url, "SELECT value FROM ledger_meta WHERE key = 'schema_version'") == [
        (str(schema_migrations.SCHEMA_VERSION),)]
    migrated = _rows(url, f"SELECT kind, subject, payload FROM audit_events WHERE kind = 'ledger.migrated' "
                          f"AND seq > {events} ORDER BY seq")
    assert migrated == migrations(18, schema_migrations.SCHEMA_VERSION)
    assert "filter" in {row[1] for row in _rows(url, "PRAGMA table_info(caps)")}
    assert "relation" in {row[1] for row in _rows(url, "PRAGMA table_info(datasets)")}
