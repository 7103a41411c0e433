"""The accountants read the stored accounting rows.

Each release's accounting event and its recording and publication moments are kept in
its accounting row (schema 6). The figures `table` and `subset` print from those rows
are compared with the figures of the same accountants over the whole releases (the
path every figure took before: `LedgerIndex` of the decoded releases), on random
ledgers, through every accountant (basic, Rényi, PLD): they must be equal, not close.
`audit verify` recomputes the new columns; a ledger of schema 5 is upgraded once.
"""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from fractions import Fraction as F
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import Session
from support import acting_as, cli_main, migrations

from ledger.accounting import index_figures
from ledger.accounting import chunked_table
from ledger.store import audit_chain, audit_verify, dataset_writes, decoded_history, engines, index_from_rows, release_writes, row_arrays, schema_migrations, sessions
from ledger.accounting.figure_validity import ACCOUNTANTS
from ledger.accounting.charge_choice import at_delta
from ledger.accounting.ledger_index import LedgerIndex
from ledger.input.datasets import build_dataset
from ledger.input.documents import Document
from ledger.input.releases import build_releases
from ledger.input.snapshot import LedgerSnapshot
from ledger.core.records import CHARGED_STATUSES, Family, Status

VARIABLES = ("a", "b", "c", "d")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
FAMILIES = [Family("by-a", "t", frozenset({"a"})), Family("split", "t", None)]


def dataset():
    found, errors = build_dataset(Document("t.yaml", {"dataset": "t", "variables": [{"name": v} for v in VARIABLES]}))
    assert not errors, errors
    return found


# --------------------------------------------------------------------------
# Random ledgers: every kind of charge the accountants treat differently
# --------------------------------------------------------------------------

KINDS = {
    # the mechanism's parameters give its event (gaussian, laplace, discrete laplace)
    "laplace": lambda e, reads: {"mechanism": {"name": "laplace", "epsilon": e}},
    "geometric": lambda e, reads: {"mechanism": {"name": "geometric", "scale": str(1 / F(e)), "sensitivity": 1}},
    "geometric-epsilon": lambda e, reads: {"mechanism": {"name": "geometric", "epsilon": e}},  # (no event)
    "gaussian": lambda e, reads: {"mechanism": {"name": "gaussian", "sigma": str(1 / F(e)), "sensitivity": 1}},
    # a weaker explicit claim: the event is known but the release is charged by its guarantee
    "claimed": lambda e, reads: {"mechanism": {"name": "laplace", "epsilon": e},
                                 "guarantees": [{"protects": sorted(reads), "epsilon": str(2 * F(e))}]},
    # guarantees only
    "pure": lambda e, reads: {"mechanism": {"name": "declared"},
                              "guarantees": [{"protects": sorted(reads), "epsilon": e}]},
    "rho": lambda e, reads: {"mechanism": {"name": "declared"},
                             "guarantees": [{"protects": sorted(reads), "rho": e}]},
    "approx": lambda e, reads: {"mechanism": {"name": "declared"},
                                "guarantees": [{"protects": sorted(reads), "epsilon": e, "delta": "1e-8"}]},
    # a choice between two guarantees (the exact path), and a variable released exactly (∞)
    "choice": lambda e, reads: {"mechanism": {"name": "declared"},
                                "guarantees": [{"protects": sorted(reads), "epsilon": e},
                                               {"protects": sorted(reads), "rho": str(F(e) ** 2)}]},
    "exact": lambda e, reads: {"mechanism": {"name": "declared"},
                               "guarantees": [{"protects": sorted(reads)[:1], "epsilon": e}]},
}


@st.composite
def ledgers(draw):
    n = draw(st.integers(1, 9))
    entries, lifecycle = [], []
    for i in range(n):
        reads = draw(st.sets(st.sampled_from(VARIABLES), min_size=1, max_size=3))
        kind = draw(st.sampled_from(sorted(KINDS)))
        epsilon = draw(st.sampled_from(["1/10", "1/4", "1/2", "1"]))
        family = draw(st.sampled_from([None, None, "by-a", "split"]))
        if family == "by-a":
            reads = reads | {"a"}  # (a member reads its family's key)
        entry = {"id": f"r{i}", "reads": sorted(reads), **KINDS[kind](epsilon, reads)}
        if family is not None and kind != "exact":
            entry["family"] = family
            entry["part"] = f"part {i}"  # (each member on a part of its own: docs/explanation/model.md#families)
        entries.append(entry)
        # (status, recorded second or None, published second or None, published later by a status change)
        status = draw(st.sampled_from([Status.PLANNED, Status.APPROVED, Status.PUBLISHED, Status.RETRACTED,
                                       Status.CANCELLED]))
        recorded = draw(st.one_of(st.none(), st.integers(0, 5)))
        published = draw(st.one_of(st.none(), st.integers(0, 5))) if status in (
            Status.PUBLISHED, Status.RETRACTED) else None
        later = status is Status.PLANNED and draw(st.booleans())
        lifecycle.append((status, recorded, published, later))
    return entries, lifecycle


def moment(second):
    return None if second is None else T0 + timedelta(seconds=second, microseconds=7 * second)


def record(url: str, entries, lifecycle, endings=None) -> None:
    """The releases written as the store writes them (accounting rows included), then the
    publications recorded as status changes (which update the rows). `endings` (test_as_of_rows):
    per release, the second of its retraction's or cancellation's audit event, or None for a
    release ended with no event."""
    engine = engines.make_engine(url)
    schema_migrations.ensure_schema(engine)
    chosen = dataset()
    releases, _, errors = build_releases(Document("r.json", {"dataset": "t", "releases": entries}),
                                         LedgerSnapshot(datasets={"t": chosen}, families={f.id: f for f in FAMILIES}),
                                         recorded_by="t", recorded_at=T0)
    assert not errors, errors
    stated = [replace(r, status=status, recorded_at=moment(recorded), published_at=moment(published))
              for r, (status, recorded, published, _) in zip(releases, lifecycle)]
    with sessions.write_session(engine) as session:
        dataset_writes.add_dataset(session, chosen, "t")
        release_writes.add_releases(session, stated, FAMILIES, "t")
    with sessions.write_session(engine) as session:
        for release, (_, _, _, later), end in zip(stated, lifecycle, endings or [None] * len(stated)):
            if later:  # published after it was planned: the row's publication moment is set later
                release_writes.set_status(session, replace(release, status=Status.PUBLISHED, published_at=T0 + timedelta(
                    seconds=3)), "t", "release.published")
            kind = {Status.CANCELLED: "release.cancelled", Status.RETRACTED: "release.retracted"}.get(release.status)
            if kind is not None and end is not None:
                audit_chain.append_event(session, kind=kind, subject=release.id, actor="t", payload={"reason": "r"},
                                   at=moment(end))
    engine.dispose()


def same_events(rows: LedgerIndex, whole: LedgerIndex) -> None:
    """The accountants' events of the index from the rows (`index_events`) are those of the index
    of the whole releases: each release's mechanism event and its moments."""
    events, reference = index_figures.index_events(rows), index_figures.IndexEvents(whole)
    assert [events.events[k] if k >= 0 else None for k in events.mech] == \
        [reference.events[k] if k >= 0 else None for k in reference.mech]
    assert (events.recorded == reference.recorded).all() and (events.published == reference.published).all()


def same_rows(found: row_arrays._Rows, expected: row_arrays._Rows) -> None:
    """Two readings of the accounting rows hold the same arrays (dtype and shape too); the ids aside."""
    for name in row_arrays._Rows.__dataclass_fields__:
        if name == "ids":
            continue
        a, b = getattr(found, name), getattr(expected, name)
        if isinstance(a, dict):
            assert a == b, name
        else:
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), name


def both_indexes(url: str, touching=None):
    """(the index from the accounting rows, the index of the whole releases)."""
    engine = engines.make_engine(url)
    with Session(engine) as session:
        snapshot = decoded_history.snapshot(session, "t")
        families = {f.id: f for f in snapshot.families.values()}
        rows = index_from_rows.index_for(session, VARIABLES, "t", families, titles=True, touching=touching)
    whole = LedgerIndex(VARIABLES, [r for r in snapshot.releases.values() if r.status in CHARGED_STATUSES],
                        families.values())
    engine.dispose()
    return rows, whole


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sets(st.sampled_from(VARIABLES), min_size=1, max_size=3),
                          st.sampled_from(["laplace", "geometric", "gaussian", "pure", "rho"]),
                          st.sampled_from(["1/10", "1/4", "1"])), min_size=1, max_size=12),
       st.sampled_from([2, 5, 65_536]))
def test_one_guarantee_per_release_protecting_its_reads_costs_the_same_by_the_shared_matrix(drawn, chunk):
    """Where every release has one guarantee protecting what it reads, the rows' index shares one
    matrix for reads and protects, and `cost_ids` takes the short way (c_r(U) is the guarantee's
    value where r reads U, else zero: Tan Prop 3.3): every subset's ids equal the whole releases'
    index's, a chunk of releases at a time or not."""
    from itertools import combinations

    from ledger.accounting import ledger_index

    entries = [{"id": f"r{i}", "reads": sorted(reads), **KINDS[kind](epsilon, reads)}
               for i, (reads, kind, epsilon) in enumerate(drawn)]
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/l.db"
        record(url, entries, [(Status.PUBLISHED, 0, 1, False)] * len(entries))
        rows, whole = both_indexes(url)
    assert rows.g_protects is rows.reads  # (the short way's condition)
    before, ledger_index._CHUNK = ledger_index._CHUNK, chunk
    try:
        for size in range(1, len(VARIABLES) + 1):
            for subset in combinations(range(len(VARIABLES)), size):
                assert rows._cost_ids(np.asarray(subset)).tolist() == whole._cost_ids(np.asarray(subset)).tolist()
    finally:
        ledger_index._CHUNK = before


DELTA = F(1, 10**6)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.sets(st.sampled_from(VARIABLES), min_size=1, max_size=3))
def test_figures_from_the_rows_equal_the_figures_from_the_whole_releases(ledger, subset):
    entries, lifecycle = ledger
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/l.db"
        record(url, entries, lifecycle)
        rows, whole = both_indexes(url)
        assert list(rows.release_ids) == list(whole.release_ids)
        same_events(rows, whole)

        # the table's total row and whole-dataset column, every accountant
        objective = at_delta(DELTA)
        expected = index_figures.table_figures(whole, whole.table("t", objective), DELTA, ACCOUNTANTS)
        assert index_figures.table_figures(rows, rows.table("t", objective), DELTA, ACCOUNTANTS) == expected
        # ... and a chunk of two releases at a time (a large table)
        table, per_variable, wide = chunked_table.large_table(rows, "t", objective, DELTA, 3, ACCOUNTANTS, chunk=2)
        assert (per_variable, wide) == expected
        full = whole.table("t", objective)
        assert table.total == full.total
        # the values some cell of the whole table holds (the report's basis), read two releases at a time
        in_cells = {whole.values[i] for i in np.unique(np.concatenate([full.cells.ravel(), full.dataset_wide]))}
        assert {rows.values[i] for i in rows.cell_value_ids} == {v for v in in_cells if not v.is_zero}

        # one subset, from the rows of the releases that read it
        touching, _ = both_indexes(url, touching=subset)
        assert index_figures.subset_figures(touching, subset, DELTA, touching.subset_cost(subset, objective).spend) == \
            index_figures.subset_figures(whole, subset, DELTA, whole.subset_cost(subset, objective).spend)

        engine = engines.make_engine(url)
        with sessions.read_session(engine) as session:
            assert audit_verify.verify(session).problems == ()
        engine.dispose()


def test_the_event_order_of_a_subset_is_that_of_the_whole_dataset(tmp_path):
    """Three mechanisms whose first releases read other variables than the subset's first:
    the Rényi curves are summed in the order of the whole dataset (floats: the same sum)."""
    entries = [
        {"id": "x1", "reads": ["b"], "mechanism": {"name": "gaussian", "sigma": 3, "sensitivity": 1}},
        {"id": "x2", "reads": ["c"], "mechanism": {"name": "laplace", "epsilon": "1/3"}},
        {"id": "x3", "reads": ["a"], "mechanism": {"name": "geometric", "scale": 7, "sensitivity": 1}},
        {"id": "x4", "reads": ["a", "b", "c"], "mechanism": {"name": "laplace", "epsilon": "1/3"}},
        {"id": "x5", "reads": ["a", "c"], "mechanism": {"name": "gaussian", "sigma": 3, "sensitivity": 1}},
    ]
    url = f"sqlite:///{tmp_path}/l.db"
    record(url, entries, [(Status.PUBLISHED, k, k, False) for k in range(5)])
    touching, whole = both_indexes(url, touching={"a"})
    assert [e.kind for e in index_figures.index_events(touching).events[:3]] == ["gaussian", "laplace", "dlaplace"]
    assert index_figures.subset_figures(touching, {"a"}, DELTA, touching.subset_cost({"a"}).spend) == \
        index_figures.subset_figures(whole, {"a"}, DELTA, whole.subset_cost({"a"}).spend)


# --------------------------------------------------------------------------
# Verification and the schema 6 upgrade
# --------------------------------------------------------------------------

RELEASES = """\
dataset: t
releases:
  - {id: g, reads: [a, b], mechanism: {name: gaussian, sigma: 4, sensitivity: 1}}
  - {id: l, reads: [b], mechanism: {name: laplace, epsilon: "1/2"}, status: published,
     published_at: "2026-01-02T10:00:00Z"}
  - {id: p, reads: [c], mechanism: {name: declared}, guarantees: [{protects: [c], epsilon: 1}]}
"""


def ledger_file(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/ledger.db"
    (tmp_path / "t.yaml").write_text("dataset: t\nself_approval: true\nvariables: [{name: a}, {name: b}, {name: c}, {name: d}]\n")
    (tmp_path / "r.yaml").write_text(RELEASES)
    assert cli_main(url, "dataset", "add", tmp_path / "t.yaml").code == 0
    run = cli_main(url, "record", tmp_path / "r.yaml")
    assert run.code == 0, run.err
    return url


def test_the_rows_hold_the_event_and_the_moments(tmp_path):
    url = ledger_file(tmp_path)
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        rows = dict((release, rest) for release, *rest in connection.execute(
            "SELECT release, e.key, charged_by_event, recorded_us, published_us FROM release_accounting "
            "LEFT JOIN accounting_events e ON e.id = event"))
    published = int((datetime(2026, 1, 2, 10, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 10**6
    assert rows["g"][:3] == ["gaussian:4", 1, rows["g"][2]] and rows["g"][3] is None
    assert rows["l"][0] == "laplace:2" and rows["l"][1] == 1 and rows["l"][3] == published
    assert rows["p"][:2] == [None, 0] and rows["p"][3] is None
    assert rows["g"][2] == rows["l"][2] == rows["p"][2] and rows["g"][2] > published  # recorded now


def test_a_publication_updates_the_row(tmp_path):
    url = ledger_file(tmp_path)
    assert cli_main(url, "role", "grant", "approver", "approver").code == 0
    with acting_as("approver"):
        assert cli_main(url, "approve", "g").code == 0
    run = cli_main(url, "publish", "g")
    assert run.code == 0, run.err
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        status, published = connection.execute(
            "SELECT status, published_us FROM release_accounting WHERE release = 'g'").fetchone()
        (stated,) = connection.execute("SELECT published_at FROM releases WHERE id = 'g'").fetchone()
    assert status == "published"
    moment = datetime.fromisoformat(stated)
    assert published == round((moment - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 10**6
    assert cli_main(url, "audit", "verify").code == 0


def test_verify_names_a_tampered_event_or_moment(tmp_path):
    url = ledger_file(tmp_path)
    path = url.removeprefix("sqlite:///")
    assert cli_main(url, "audit", "verify").code == 0
    for statement, field in [
        ("UPDATE release_accounting SET event = NULL WHERE release = 'g'", "event"),
        ("UPDATE accounting_events SET key = 'gaussian:40' WHERE key = 'gaussian:4'", "event"),
        ("UPDATE release_accounting SET charged_by_event = 0 WHERE release = 'l'", "charged_by_event"),
        ("UPDATE release_accounting SET recorded_us = recorded_us - 1 WHERE release = 'p'", "recorded_us"),
        ("UPDATE release_accounting SET published_us = NULL WHERE release = 'l'", "published_us"),
    ]:
        copy = tmp_path / f"copy-{field}-{len(statement)}.db"
        with sqlite3.connect(path) as source, sqlite3.connect(copy) as target:
            source.backup(target)
        with sqlite3.connect(copy) as connection:
            connection.execute(statement)
        run = cli_main(f"sqlite:///{copy}", "audit", "verify")
        assert run.code == 1, statement
        assert "the accounting row differs from the release (fields: " + field in run.err, (statement, run.err)


def sql(url: str, *statements: str) -> list[list[tuple]]:
    """Raw SQL behind the ledger's back, in one transaction (either backend)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            found = []
            for statement in statements:
                result = connection.execute(text(statement))
                found.append([tuple(row) for row in result] if result.returns_rows else [])
            return found
    finally:
        engine.dispose()


def test_a_ledger_of_schema_5_gains_the_columns_once_with_an_audit_event(ledger_url, tmp_path):
    url = ledger_url
    (tmp_path / "t.yaml").write_text("dataset: t\nself_approval: true\nvariables: [{name: a}, {name: b}, {name: c}, {name: d}]\n")
    (tmp_path / "r.yaml").write_text(RELEASES)
    assert cli_main(url, "dataset", "add", tmp_path / "t.yaml").code == 0
    assert cli_main(url, "record", tmp_path / "r.yaml").code == 0
    before = cli_main(url, "table", "--json").json()
    subset = cli_main(url, "subset", "a", "b", "--json").json()
    (events,), = sql(url, "SELECT count(*) FROM audit_events")[0]
    sql(url, "DROP INDEX ix_release_accounting_event",  # as schema 5 left it
        *(f"ALTER TABLE release_accounting DROP COLUMN {column}"
          for column in ("event", "charged_by_event", "recorded_us", "published_us")),
        "DROP TABLE accounting_events", "UPDATE ledger_meta SET value = '5' WHERE key = 'schema_version'")
    assert cli_main(url, "table", "--json").json() == before
    assert cli_main(url, "subset", "a", "b", "--json").json() == subset
    migrated, keys = sql(url, f"SELECT kind, subject, payload FROM audit_events WHERE seq > {events}",
                         "SELECT release, e.key FROM release_accounting LEFT JOIN accounting_events e "
                         "ON e.id = event ORDER BY release")
    assert migrated == migrations(6, schema_migrations.SCHEMA_VERSION)
    assert keys == [("g", "gaussian:4"), ("l", "laplace:2"), ("p", None)]
    engine = engines.make_engine(url)
    with engine.connect() as connection:
        from sqlalchemy import inspect

        assert "ix_release_accounting_event" in {i["name"] for i in inspect(connection).get_indexes(
            "release_accounting")}
    engine.dispose()
    assert cli_main(url, "audit", "verify").code == 0
    cli_main(url, "subset", "a")
    assert sql(url, "SELECT count(*) FROM audit_events")[0] == [(events + len(migrations(6, schema_migrations.SCHEMA_VERSION)),)]  # once each


SAMPLED = """\
dataset: t
releases:
  - {id: s, reads: [a], mechanism: {name: laplace, epsilon: 1, sample_size: 10, population: 100}}
  - {id: l, reads: [a], mechanism: {name: laplace, epsilon: "1/2"}}
"""


def test_a_ledger_of_schema_6_charges_its_subsampled_releases_through_the_sampling_event(ledger_url, tmp_path):
    """Schema 6 charged a subsampled Laplace release through its amplified
    guarantee (no event on its row); the schema 7 upgrade gives the row its sampling event, once,
    with an audit event; the figures are then the ones a new ledger prints, and `audit verify` agrees."""
    url = ledger_url
    (tmp_path / "t.yaml").write_text("dataset: t\nself_approval: true\nvariables: [{name: a}, {name: b}]\ndelta: 1e-9\n"
                                     "caps:\n  - {name: c, subset: [a], epsilon: 50, delta: 1e-9}\n")
    (tmp_path / "s.yaml").write_text(SAMPLED)
    assert cli_main(url, "dataset", "add", tmp_path / "t.yaml").code == 0
    assert cli_main(url, "record", tmp_path / "s.yaml").code == 0
    now = cli_main(url, "subset", "a", "--json").json()
    (key,), = sql(url, "SELECT e.key FROM release_accounting JOIN accounting_events e ON e.id = event "
                       "WHERE release = 's'")[0]
    assert key.startswith("sampled:") and key.endswith(":1/10:1")
    (events,), = sql(url, "SELECT count(*) FROM audit_events")[0]
    sql(url, "UPDATE release_accounting SET event = NULL, charged_by_event = FALSE WHERE release = 's'",
        "UPDATE ledger_meta SET value = '6' WHERE key = 'schema_version'")  # as schema 6 left it
    assert cli_main(url, "subset", "a", "--json").json() == now
    migrated, rows = sql(url, f"SELECT kind, subject FROM audit_events WHERE seq > {events}",
                         "SELECT e.key, charged_by_event FROM release_accounting JOIN accounting_events e "
                         "ON e.id = event WHERE release = 's'")
    assert migrated == [("ledger.migrated", "schema 7"), ("ledger.migrated", "schema 8"),
                        ("ledger.migrated", "schema 9"), ("ledger.migrated", "schema 10"),
                        ("ledger.migrated", "schema 11"), ("ledger.migrated", "schema 12"),
                        ("ledger.migrated", "schema 13"), ("ledger.migrated", "schema 14"), ("ledger.migrated", "schema 15"),
                        ("ledger.migrated", "schema 16"),
        ("ledger.migrated", "schema 17"), ("ledger.migrated", "schema 18"),
                        ("ledger.migrated", "schema 19"), ("ledger.migrated", "schema 20")]
    assert rows == [(key, True)] or rows == [(key, 1)]
    assert cli_main(url, "audit", "verify").code == 0
