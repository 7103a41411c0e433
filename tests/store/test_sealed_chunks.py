"""The accounting rows sealed in binary chunks (store/sealed.py).

A read takes the sealed chunks (a few BLOBs) and then the rows after them. Whatever the
chunk size, the statuses changed after a chunk was sealed (noted, or the chunk sealed
again), the families, further guarantees and cancellations, the arrays read are the ones
the row reader reads from the accounting rows, and so every figure is the same. `audit
verify` seals every chunk afresh and names any difference; a ledger of schema 9 gains its
chunks once, with an audit event; an amended dataset's chunks are rebuilt at its new width.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import Session
from support import cli_main, migrations
from test_accounting_rows import DELTA, T0, VARIABLES, both_indexes, ledgers, record, same_rows, sql
from test_scale import DATASET, RELEASES, write

from ledger.accounting import index_figures
from ledger.accounting.charge_choice import at_delta
from ledger.core.records import CHARGED_STATUSES, Status
from ledger.store import audit_verify, decoded_history, engines, index_from_rows, release_writes, row_arrays, schema_migrations, sealed, sessions

CHARGED = sorted(s.value for s in CHARGED_STATUSES)


def test_a_chunk_encodes_and_decodes_its_arrays():
    arrays = {"seq": np.arange(5, dtype="<i8"), "reads": np.arange(10, dtype=np.uint8).reshape(5, 2),
              "value": np.asarray([-1, 0, 3, 2**31 - 1, 7], dtype="<i4"), "ids": np.zeros(0, dtype=np.uint8)}
    found = sealed.decode(sealed.encode(arrays))
    assert list(found) == list(arrays)
    for name, array in arrays.items():
        assert found[name].dtype == array.dtype and np.array_equal(found[name], array)
    with pytest.raises(ValueError):
        sealed.decode(b"XXXX" + sealed.encode(arrays)[4:])
    with pytest.raises(ValueError):
        sealed.decode(sealed.encode(arrays) + b"\0")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.sets(st.sampled_from(VARIABLES), min_size=1, max_size=3), st.sampled_from([1, 2, 3, 5]),
       st.sampled_from([0, 1, 256]), st.lists(st.booleans(), min_size=9, max_size=9))
def test_the_chunks_and_the_tail_read_as_the_rows(ledger, subset, size, reseal, cancel):
    """Chunks of 1 to 5 seqs (so most rows are sealed, some in the tail), statuses changed after
    sealing (noted, or the chunk sealed again at once, after one note, or never), cancellations:
    `read_rows` equals the row reader over the accounting rows, for the whole dataset and for
    a subset (with the release ids), with and without the accountants' columns; the figures
    are those of the whole releases; `audit verify` finds nothing."""
    entries, lifecycle = ledger
    with tempfile.TemporaryDirectory() as directory, mock.patch.object(sealed, "CHUNK_SEQS", size), \
            mock.patch.object(sealed, "RESEAL_CHANGES", reseal):
        url = f"sqlite:///{directory}/l.db"
        record(url, entries, lifecycle)  # (publishes some planned releases once the chunks are sealed)
        engine = engines.make_engine(url)
        with Session(engine) as session:
            snapshot = decoded_history.snapshot(session, "t")
        with sessions.write_session(engine) as session:  # cancel some planned or approved releases, later still
            for release, drop in zip(snapshot.releases.values(), cancel):
                if drop and release.status in (Status.PLANNED, Status.APPROVED):
                    release_writes.set_status(session, replace(release, status=Status.CANCELLED), "t", "release.cancelled",
                                     reason="test")
        with Session(engine) as session:
            connection = session.connection()
            if size <= 2:
                assert sealed.sealed_stop(connection, "t") > 0
            for positions in (None, sorted(VARIABLES.index(v) for v in subset)):
                for accounts in (True, False):
                    found = index_from_rows.read_rows(connection, "t", CHARGED, positions, len(VARIABLES), accounts)
                    expected = row_arrays._read_rows(
                        connection, index_from_rows._row_statement("t", CHARGED, positions, accounts)[1], len(VARIABLES),
                        accounts)
                    same_rows(found, expected)
                    if positions is not None:
                        by_seq = dict(connection.exec_driver_sql("SELECT seq, release FROM release_accounting").all())
                        assert found.ids == [by_seq[s] for s in found.seq.tolist()]
        with sessions.read_session(engine) as session:
            assert audit_verify.verify(session).problems == ()
        engine.dispose()
        rows, whole = both_indexes(url, touching=subset)
        objective = at_delta(DELTA)
        assert index_figures.subset_figures(rows, subset, DELTA, rows.subset_cost(subset, objective).spend) == \
            index_figures.subset_figures(whole, subset, DELTA, whole.subset_cost(subset, objective).spend)


# --------------------------------------------------------------------------
# Through the command line, on either backend
# --------------------------------------------------------------------------

COMMANDS = [("table", "--json"), ("subset", "age", "income", "--json"), ("subset", "degree", "--json"),
            ("pairs", "--json"), ("headroom", "age", "sex")]


def outputs(url: str) -> list[str]:
    found = []
    for command in COMMANDS:
        run = cli_main(url, *command)
        assert run.code == 0, run.err
        found.append(run.out)
    return found


@pytest.fixture
def chunked(ledger_url, tmp_path, monkeypatch):
    """The survey ledger of test_scale (families, several guarantees, a cancellation) in chunks
    of 4 seqs, then two more releases in the tail and one publication inside a sealed chunk."""
    monkeypatch.setattr(sealed, "CHUNK_SEQS", 4)
    url = ledger_url
    assert cli_main(url, "dataset", "add", write(tmp_path, "survey.yaml", DATASET)).code == 0
    run = cli_main(url, "record", write(tmp_path, "releases.yaml", RELEASES))
    assert run.code == 0, run.err
    assert cli_main(url, "cancel", "j", "--reason", "not run").code == 0
    assert cli_main(url, "record", write(tmp_path, "more.yaml", "dataset: survey\nreleases:\n"
                    "  - {id: m, reads: [age, sex], mechanism: {name: laplace, epsilon: 1}}\n"
                    "  - {id: n, reads: [income], mechanism: {name: laplace, epsilon: 1}, status: published,\n"
                    "     published_at: '2026-02-01T00:00:00Z'}\n"
                    )).code == 0
    engine = engines.make_engine(url)
    with sessions.write_session(engine) as session:  # a (planned) release in the first chunk approved and published
        release = replace(decoded_history.snapshot(session, "survey").releases["a"], status=Status.APPROVED, approved_by="u",
                          approved_at=T0)
        release_writes.set_status(session, release, "u", "release.approved")  # (PostgreSQL refuses a publication unapproved)
        release_writes.set_status(session, replace(release, status=Status.PUBLISHED, published_at=T0), "t",
                         "release.published")
    engine.dispose()
    return url, tmp_path


def chunk_rows(url: str) -> list[tuple]:
    return sql(url, "SELECT first, stop, count FROM accounting_chunks WHERE dataset = 'survey' ORDER BY first")[0]


def test_the_figures_from_the_chunks_are_those_from_the_rows(chunked):
    url, _ = chunked
    assert len(chunk_rows(url)) >= 3 and sql(url, "SELECT count(*) FROM accounting_chunk_changes")[0][0][0] >= 1
    with_chunks = outputs(url)
    assert cli_main(url, "audit", "verify").code == 0
    sql(url, "DELETE FROM accounting_chunk_changes", "DELETE FROM accounting_chunks")  # every row from the rows
    assert outputs(url) == with_chunks


def test_a_chunk_that_does_not_run_on_is_not_read_and_is_named(chunked):
    url, _ = chunked
    with_chunks = outputs(url)
    first = chunk_rows(url)[1][0]
    sql(url, f"DELETE FROM accounting_chunks WHERE dataset = 'survey' AND first = {first}")
    assert outputs(url) == with_chunks  # (a gap: the reader takes the rows)
    run = cli_main(url, "audit", "verify")
    assert run.code == 1 and "the sealed accounting chunks do not run on from seq" in run.err


@pytest.mark.parametrize("change, message", [
    ("status", "differs from the accounting rows (fields: status"),
    ("reads", "differs from the accounting rows (fields: reads"),
    ("note", "differs from the accounting rows (fields: status"),
    ("past", "reaches past the last event"),
    ("garbage", "differs from the accounting rows (unreadable"),
])
def test_verify_names_a_chunk_changed_behind_the_ledger(chunked, change, message):
    url, _ = chunked
    assert cli_main(url, "audit", "verify").code == 0
    first = next(first for first, _, count in chunk_rows(url) if count)
    if change == "note":  # the note of the publication dropped: the chunk still says planned
        sql(url, "DELETE FROM accounting_chunk_changes")
    elif change == "past":
        (top,), = sql(url, "SELECT max(seq) FROM audit_events")[0]
        last = chunk_rows(url)[-1][0]
        sql(url, f"UPDATE accounting_chunks SET stop = {top + 50} WHERE dataset = 'survey' AND first = {last}")
    else:
        engine = engines.make_engine(url)
        with engine.begin() as connection:
            (body,), = connection.execute(sealed._CHUNKS.select().with_only_columns(sealed._CHUNKS.c.body).where(
                sealed._CHUNKS.c.first == first)).all()
            if change == "garbage":
                new = b"garbage"
            else:
                arrays = {k: v.copy() for k, v in sealed.decode(body).items()}
                if change == "status":
                    arrays["status"][-1] = sealed.STATUSES.index("retracted")
                else:
                    arrays["reads"][-1] ^= 1
                new = sealed.encode(arrays)
            connection.execute(sealed._CHUNKS.update().where(sealed._CHUNKS.c.first == first).values(body=new))
        engine.dispose()
    run = cli_main(url, "audit", "verify")
    assert run.code == 1 and message in run.err, run.err


def test_a_ledger_of_schema_9_gains_its_chunks_once_with_an_audit_event(chunked):
    url, _ = chunked
    before = outputs(url)
    chunks = chunk_rows(url)
    (events,), = sql(url, "SELECT count(*) FROM audit_events")[0]
    sql(url, "DROP TABLE accounting_chunk_changes", "DROP TABLE accounting_chunks",
        "UPDATE ledger_meta SET value = '9' WHERE key = 'schema_version'")  # as schema 9 left it
    assert outputs(url) == before
    migrated, = sql(url, f"SELECT kind, subject, payload FROM audit_events WHERE seq > {events}")
    assert migrated == migrations(10, schema_migrations.SCHEMA_VERSION)
    # every complete range sealed (the migration's event completes one more than before)
    assert chunk_rows(url)[:len(chunks)] == [(first, stop, count) for first, stop, count in chunks]
    assert sql(url, "SELECT count(*) FROM accounting_chunk_changes")[0] == [(0,)]
    assert cli_main(url, "audit", "verify").code == 0
    outputs(url)
    assert sql(url, "SELECT count(*) FROM audit_events")[0] == [(events + len(migrations(10, schema_migrations.SCHEMA_VERSION)),)]


def test_an_added_variable_rebuilds_the_chunks_at_the_new_width(chunked):
    url, _ = chunked
    run = cli_main(url, "dataset", "add-variable", "weight", "--dataset", "survey")
    assert run.code == 0, run.err
    widths = sql(url, "SELECT DISTINCT width FROM accounting_chunks WHERE dataset = 'survey'")[0]
    assert widths == [(6,)]
    after = outputs(url)
    assert cli_main(url, "audit", "verify").code == 0
    sql(url, "DELETE FROM accounting_chunk_changes", "DELETE FROM accounting_chunks")
    assert outputs(url) == after


def test_many_changes_to_one_chunk_seal_it_again(ledger_url, tmp_path, monkeypatch):
    """More than RESEAL_CHANGES status changes in one chunk: it is sealed again, its notes dropped."""
    monkeypatch.setattr(sealed, "CHUNK_SEQS", 8)
    monkeypatch.setattr(sealed, "RESEAL_CHANGES", 2)
    url = ledger_url
    assert cli_main(url, "dataset", "add", write(tmp_path, "survey.yaml", DATASET)).code == 0
    lines = "".join(f"  - {{id: p{k}, reads: [age], mechanism: {{name: laplace, epsilon: 1}}}}\n" for k in range(12))
    assert cli_main(url, "record", write(tmp_path, "p.yaml", f"dataset: survey\nreleases:\n{lines}")).code == 0
    first, stop = next((first, stop) for first, stop, count in chunk_rows(url) if count >= 4)
    inside, = sql(url, f"SELECT release FROM release_accounting WHERE seq >= {first} AND seq < {stop} ORDER BY seq")
    changes = []
    for (release,) in inside[:4]:
        assert cli_main(url, "cancel", release, "--reason", "not run").code == 0
        changes.append(sql(url, "SELECT count(*) FROM accounting_chunk_changes")[0][0][0])
    assert changes == [1, 2, 0, 1]  # the third note seals the chunk again
    assert cli_main(url, "audit", "verify").code == 0
    found = outputs(url)
    sql(url, "DELETE FROM accounting_chunk_changes", "DELETE FROM accounting_chunks")
    assert outputs(url) == found
