"""The store: records written and read back unchanged, atomic writes, and the audit chain.

The audit chain is checked against its definition (docs/explanation/architecture.md): event n's hash is
SHA-256 over event n-1's hash and event n's canonical JSON, recomputed here with
hashlib, not with the ledger's own codec. Tampering is done the way an insider
would, with raw SQL on the SQLite file behind the ledger's back.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

import pytest
from sqlmodel import Session
from support import acting_as, Run, cli_main, dump_sqlite

from ledger.store import audit_verify, dataset_writes, decoded_history, engines, release_writes, row_reads, schema_migrations, sessions
from ledger.input.datasets import build_dataset
from ledger.input.documents import parse_document
from ledger.input.releases import load_releases
from ledger.input.snapshot import LedgerSnapshot

F = Fraction
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WHEN = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

GRADUATES = """\
dataset: graduates
self_approval: true  # (its history recorded published or approved by its recorder)
description: graduate survey
delta: "1/1000000000"
variables:
  - {name: degree, classification: public, description: degree programme}
  - {name: income, classification: sensitive}
  - {name: sex, classification: identifying}
groups:
  personal: [income, sex]
"""

# Every kind of field a release can carry: exact fractions, both family kinds,
# lineage, lifecycle, publication time, add-remove relations, extra parameters.
RICH_RELEASES = """\
dataset: graduates
families:
  - {id: by-degree, partition: [degree], description: one table per degree programme}
  - {id: random-halves, partition: random}
releases:
  - id: arts
    title: Income of arts graduates
    reads: [degree, income]
    family: by-degree
    part: degree=arts
    mechanism: {name: laplace, scale: 3, sensitivity: 1, relation: add-remove}
    status: published
    published_at: "2024-02-01"
  - id: science
    reads: [degree, income]
    family: by-degree
    part: degree=science
    mechanism: {name: gaussian, rho: "104/4099"}
    status: planned
  - id: half-1
    reads: [sex]
    family: random-halves
    part: half 1
    mechanism: {name: gaussian, sigma: "0.3", sensitivity: 2}
    status: published
    published_at: "2024-03-01T09:30:00+01:00"
  - id: consistent
    reads: [degree, income]
    mechanism: {name: tan-consistent-counts, epsilon: 0.1, protects: [income], margin: degree, nonnegative: true}
  - id: approximate
    reads: [income, sex]
    mechanism: {name: gaussian, rho: 0.02}
    guarantees:
      - {protects: [income], epsilon: 0.5, delta: "1/100000", relation: add-remove}
      - {protects: [income, sex], rho: 0.02}
  - id: sums
    reads: []
    derived_from: [arts, science]
    status: approved
"""


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def execute(path: Path, sql: str, *params) -> None:
    connection = sqlite3.connect(path)
    try:
        connection.execute(sql, params)
        connection.commit()
    finally:
        connection.close()


def rows(path: Path, sql: str) -> list[tuple]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def loaded(tmp_path: Path):
    document, errors = parse_document("dataset.yaml", GRADUATES)
    dataset, errors = build_dataset(document)
    assert errors == []
    path = tmp_path / "rich.yaml"
    path.write_text(RICH_RELEASES)
    releases, families, errors = load_releases(
        [path], LedgerSnapshot(datasets={dataset.name: dataset}), recorded_by="ana", recorded_at=WHEN
    )
    assert errors == [], [str(e) for e in errors]
    return dataset, releases, families


@pytest.fixture
def db(tmp_path):
    return tmp_path / "ledger.db"


@pytest.fixture
def engine(db):
    engine = engines.make_engine(sqlite_url(db))
    schema_migrations.ensure_schema(engine)
    yield engine
    engine.dispose()


def record_examples(engine) -> None:
    """The example dataset and releases: events 1 (dataset) and 2-5 (releases, in file order)."""
    document, _ = parse_document("d.yaml", (EXAMPLES / "graduates.dataset.yaml").read_text())
    dataset, _ = build_dataset(document)
    releases, families, errors = load_releases(
        [EXAMPLES / "graduates.releases.yaml"], LedgerSnapshot(datasets={dataset.name: dataset}),
        recorded_by="ana", recorded_at=WHEN,
    )
    assert errors == []
    with sessions.write_session(engine) as session:
        dataset_writes.add_dataset(session, dataset, "ana")
    with sessions.write_session(engine) as session:
        release_writes.add_releases(session, releases, families, "ana")


def verify(engine) -> audit_verify.Verification:
    with Session(engine) as session:
        return audit_verify.verify(session)


# --------------------------------------------------------------------------
# Round trip
# --------------------------------------------------------------------------


def test_records_read_back_equal_the_records_loaded(engine, tmp_path):
    dataset, releases, families = loaded(tmp_path)
    assert {f.id for f in families} == {"by-degree", "random-halves"}
    with sessions.write_session(engine) as session:
        dataset_writes.add_dataset(session, dataset, "ana")
        release_writes.add_releases(session, releases, families, "ana")

    with Session(engine) as session:
        snapshot = decoded_history.snapshot(session)
    assert snapshot.datasets == {"graduates": dataset}
    assert snapshot.families == {f.id: f for f in families}
    assert snapshot.releases == {r.id: r for r in releases}
    assert list(snapshot.releases) == [r.id for r in releases]  # recording order kept

    # and the values are what the file says, not merely what was written
    back = snapshot.releases
    assert back["science"].guarantees[0].rho == F(104, 4099)
    assert type(back["science"].guarantees[0].rho) is Fraction
    assert back["half-1"].guarantees[0].rho == F(200, 9)  # 2^2 / (2 (3/10)^2)
    assert back["arts"].guarantees[0].epsilon == F(1, 3)
    assert back["arts"].guarantees[0].relation.value == "add-remove"
    assert back["approximate"].guarantees[0].delta == F(1, 100000)
    assert back["sums"].derived_from == ("arts", "science")
    assert back["sums"].status.value == "approved"
    assert back["science"].status.value == "planned"
    assert back["half-1"].published_at == datetime(2024, 3, 1, 8, 30, tzinfo=UTC)
    assert back["consistent"].mechanism.param("protects") == ("income",)
    assert back["consistent"].mechanism.param("margin") == "degree"
    assert back["consistent"].mechanism.param("nonnegative") is True
    assert snapshot.families["by-degree"].partition == {"degree"}
    assert snapshot.families["random-halves"].partition is None
    assert snapshot.datasets["graduates"].delta == F(1, 10**9)
    assert snapshot.datasets["graduates"].group("personal") == {"income", "sex"}


def test_one_dataset_snapshot_holds_only_its_part(engine, tmp_path):
    dataset, releases, families = loaded(tmp_path)
    other, _ = build_dataset(parse_document("o.yaml", "dataset: other\nvariables: [{name: x}]\n")[0])
    with sessions.write_session(engine) as session:
        dataset_writes.add_dataset(session, dataset, "ana")
        dataset_writes.add_dataset(session, other, "ana")
        release_writes.add_releases(session, releases, families, "ana")
    with Session(engine) as session:
        part = decoded_history.snapshot(session, "other")
    assert part.releases == {} and part.families == {}


def test_exact_fractions_are_stored_as_exact_text(engine, db, tmp_path):
    dataset, releases, families = loaded(tmp_path)
    with sessions.write_session(engine) as session:
        dataset_writes.add_dataset(session, dataset, "ana")
        release_writes.add_releases(session, releases, families, "ana")
    (stored,) = rows(db, "SELECT guarantees FROM releases WHERE id = 'science'")
    assert json.loads(stored[0])[0]["rho"] == "104/4099"


def test_a_failed_write_leaves_the_database_as_it_was(engine, db, tmp_path):
    dataset, releases, families = loaded(tmp_path)
    with sessions.write_session(engine) as session:
        dataset_writes.add_dataset(session, dataset, "ana")
    before = dump_sqlite(db)
    with pytest.raises(RuntimeError, match="stop"):
        with sessions.write_session(engine) as session:
            release_writes.add_releases(session, releases, families, "ana")
            raise RuntimeError("stop")
    assert dump_sqlite(db) == before


# --------------------------------------------------------------------------
# The audit chain, by its definition
# --------------------------------------------------------------------------


def test_every_event_hashes_the_previous_hash_and_its_canonical_json(engine, db):
    record_examples(engine)
    events = rows(db, "SELECT seq, at, actor, kind, subject, payload, prev_hash, hash FROM audit_events ORDER BY seq")
    assert [(e[0], e[3], e[4]) for e in events] == [
        (1, "dataset.added", "graduates"),
        (2, "release.recorded", "income-by-degree"),
        (3, "release.recorded", "consistent-income"),
        (4, "release.recorded", "mean-income"),
        (5, "release.recorded", "income-by-degree-rounded"),
    ]
    previous = "0" * 64
    for seq, at, actor, kind, subject, payload, prev_hash, digest in events:
        body = {"seq": seq, "at": at, "actor": actor, "kind": kind, "subject": subject, "payload": json.loads(payload)}
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert prev_hash == previous
        assert digest == hashlib.sha256((previous + canonical).encode("utf-8")).hexdigest()
        previous = digest
    # each event carries the full state it created
    assert json.loads(events[3][5])["release"]["guarantees"][0]["rho"] == "1/200"

    result = verify(engine)
    assert (result.ok, result.events, result.head, result.problems) == (True, 5, previous, ())


@pytest.mark.parametrize(
    "sql, first_bad",
    [
        # mean-income was recorded by event 4: edit its guarantee behind the ledger's back
        ("""UPDATE releases SET guarantees = '[{"protects": ["income"], "notion": "zcdp", "epsilon": null, """
         """"delta": null, "rho": "1/2000", "relation": "replace"}]' WHERE id = 'mean-income'""", 4),
        ("UPDATE releases SET title = 'Something else' WHERE id = 'consistent-income'", 3),
        ("UPDATE releases SET reads = '[\"degree\"]' WHERE id = 'income-by-degree'", 2),
        ("UPDATE releases SET status = 'cancelled' WHERE id = 'income-by-degree'", 2),
        ("DELETE FROM releases WHERE id = 'income-by-degree-rounded'", 5),
        ("UPDATE variables SET name = 'salary' WHERE name = 'income'", 1),
        ("UPDATE datasets SET delta = '1/1000' WHERE name = 'graduates'", 1),
        # the events themselves
        ("UPDATE audit_events SET payload = replace(payload, '\"1/200\"', '\"1/2000\"') WHERE seq = 4", 4),
        ("UPDATE audit_events SET actor = 'mallory' WHERE seq = 2", 2),
        ("UPDATE audit_events SET subject = 'census' WHERE seq = 1", 1),
    ],
)
def test_verify_names_the_first_bad_event(engine, db, sql, first_bad):
    record_examples(engine)
    execute(db, sql)
    result = verify(engine)
    assert not result.ok
    assert result.problems[0].startswith(f"event {first_bad} "), result.problems


def test_a_deleted_event_is_detected(engine, db):
    record_examples(engine)
    execute(db, "DELETE FROM audit_events WHERE seq = 3")
    result = verify(engine)
    assert not result.ok
    assert "event 3" in result.problems[0], result.problems


def test_a_row_added_behind_the_ledgers_back_is_detected(engine, db):
    record_examples(engine)
    columns = ("dataset, title, reads, mechanism_name, mechanism_params, guarantees, derived_from, family, status, "
               "recorded_by, recorded_at, approved_by, approved_at, published_at")
    execute(db, f"INSERT INTO releases (id, seq, {columns}) SELECT 'ghost', 99, {columns} "
                "FROM releases WHERE id = 'mean-income'")
    result = verify(engine)
    assert not result.ok
    assert any("ghost" in problem for problem in result.problems)


def test_family_rows_are_covered_by_the_chain(engine, db, tmp_path):
    dataset, releases, families = loaded(tmp_path)
    with sessions.write_session(engine) as session:
        dataset_writes.add_dataset(session, dataset, "ana")
        release_writes.add_releases(session, releases, families, "ana")
    assert verify(engine).ok
    (seq,) = rows(db, "SELECT seq FROM audit_events WHERE kind = 'family.added' AND subject = 'by-degree'")[0]
    execute(db, "UPDATE families SET partition = 'null' WHERE id = 'by-degree'")  # keyed split -> random split
    result = verify(engine)
    assert not result.ok
    assert result.problems[0].startswith(f"event {seq} ")


# --------------------------------------------------------------------------
# `privacy-ledger audit verify`: exit 0 intact, exit 1 broken
# --------------------------------------------------------------------------


def run_main(db: Path, *args: str) -> Run:
    """`privacy-ledger --db URL ARGS` in this process, through the console entry point."""
    return cli_main(sqlite_url(db), *args)


def run_process(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LEDGER_DATABASE_URL": sqlite_url(db)}
    return subprocess.run([sys.executable, "-m", "ledger", *args], cwd=db.parent, env=env,
                          capture_output=True, text=True, timeout=120)


def test_audit_verify_exits_0_when_intact_and_1_naming_the_event_when_tampered(engine, db):
    record_examples(engine)
    intact = run_process(db, "audit", "verify")
    assert intact.returncode == 0, intact.stderr
    assert "5 events" in intact.stdout

    execute(db, "UPDATE releases SET guarantees = '[]' WHERE id = 'mean-income'")
    broken = run_process(db, "audit", "verify")
    assert broken.returncode == 1
    first = broken.stderr.strip().splitlines()[0]
    assert "first bad event" in first
    assert "event 4 " in first and "mean-income" in first


@pytest.mark.parametrize(
    "sql, named",
    [
        ("UPDATE releases SET title = 'x' WHERE id = 'consistent-income'", "event 3 "),
        ("UPDATE audit_events SET payload = '{}' WHERE seq = 2", "event 2 "),
        ("DELETE FROM audit_events WHERE seq = 4", "event 4"),
    ],
)
def test_audit_verify_cli_reports_each_kind_of_tampering(engine, db, sql, named):
    record_examples(engine)
    assert run_main(db, "audit", "verify").code == 0
    execute(db, sql)
    result = run_main(db, "audit", "verify")
    assert result.code == 1
    assert named in result.err.splitlines()[0]


def test_recording_through_the_cli_keeps_the_chain_intact(db, tmp_path):
    # (a dataset delta whose allowance, half of it, holds the approximate release's converted delta)
    (tmp_path / "d.yaml").write_text(GRADUATES.replace('delta: "1/1000000000"', 'delta: "1/10000"'))
    (tmp_path / "r.yaml").write_text(RICH_RELEASES)
    with acting_as("ana"):
        assert run_main(db, "dataset", "add", str(tmp_path / "d.yaml")).code == 0
        assert run_main(db, "role", "grant", "grace", "approver").code == 0  # (a second person)
        assert run_main(db, "record", str(tmp_path / "r.yaml")).code == 0
    result = run_main(db, "audit", "verify")
    assert result.code == 0, result.err
    # 4 roles of the first user + 1 grant + 1 dataset + 2 families + 6 releases
    assert "14 events" in result.out
    assert rows(db, "SELECT DISTINCT actor FROM audit_events") == [("ana",)]


def test_a_fresh_ledger_is_empty_and_verifies(tmp_path):
    engine = engines.make_engine(sqlite_url(tmp_path / "new.db"))
    schema_migrations.ensure_schema(engine)
    with Session(engine) as session:
        assert row_reads.is_empty(session)
        assert decoded_history.snapshot(session) == LedgerSnapshot()
        result = audit_verify.verify(session)  # an empty chain is reported, not "intact"
        assert not result.ok and result.events == 0 and "no audit event" in result.problems[0]
    engine.dispose()


def test_reading_neither_waits_for_a_writer_nor_makes_it_wait(engine, db):
    """A write holds SQLite's write lock from its start (BEGIN IMMEDIATE); a read is a WAL
    snapshot (BEGIN DEFERRED): a report or a check reads while a steward records."""
    import threading
    from dataclasses import replace

    graduates, _ = build_dataset(parse_document("graduates.yaml", GRADUATES)[0])
    with sessions.write_session(engine) as session:
        dataset_writes.add_dataset(session, graduates, "ana")
    reader = engines.make_engine(sqlite_url(db))
    seen = []

    def read():
        with Session(reader) as session:
            seen.append(sorted(decoded_history.snapshot(session).datasets))

    try:
        with sessions.write_session(engine) as session:  # holds the write lock until the block ends
            dataset_writes.add_dataset(session, replace(graduates, name="graduates-2"), "ana")
            thread = threading.Thread(target=read, daemon=True)
            thread.start()
            thread.join(timeout=10)
            assert not thread.is_alive(), "a read waited for the writer's lock"
            assert seen == [["graduates"]]  # the snapshot before the write commits
        with Session(reader) as session:
            assert sorted(decoded_history.snapshot(session).datasets) == ["graduates", "graduates-2"]
    finally:
        reader.dispose()
