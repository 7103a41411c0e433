"""Transactions: `write_session` (one atomic write under the ledger's write lock: SQLite BEGIN
IMMEDIATE, PostgreSQL a transaction-level advisory lock, waited for at most LEDGER_LOCK_TIMEOUT
seconds) and `read_session` (one consistent snapshot, no lock: SQLite a WAL snapshot, PostgreSQL
REPEATABLE READ READ ONLY).

Invariant: checks made inside a write see every committed release and no two writers interleave;
a read never mixes moments of a ledger others are writing; the caches move only after a commit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, text
from sqlmodel import Session

__all__ = ["Engine", "Session", "pipelined", "read_session", "write_session"]  # Engine, Session: the store's
# types for the layers above, which import no database library (tests/test_layers.py)

from . import driver, identity
from .process_caches import remember_ids, remember_roles, remember_totals
from .configuration import STAMP_AND_HEAD_SQL
from .engines import WRITE_OPTION, lock_timeout
from .ledger_meta import EVENTS_WRITTEN, TOTALS_STAMP, set_meta
from .session_state import session_connection, flush_pending


WRITE_LOCK_KEY = 0x1ED6E5  # PostgreSQL advisory lock id for ledger writes


MAX_IDS_READ_WITH_LOCK = 10_000  # ids of a record read with the lock (more: looked up one by one)


def _stamp_head_and_ids_sql(connection: Connection, ids: Sequence[str]) -> str:
    """PostgreSQL: the stamps and head, and which of `ids` the releases table holds (an array),
    in one SELECT; each id a literal quoted by psycopg (driver.literal)."""
    if not ids:
        return f"{STAMP_AND_HEAD_SQL}, NULL"
    listed = ", ".join(driver.literal(connection, rid) for rid in ids)
    return f"{STAMP_AND_HEAD_SQL}, ARRAY(SELECT id FROM releases WHERE id IN ({listed}))"
# ledger_meta values a write sets at its end (the totals' stamp, the events written): one
# statement for them all, which inserts a key that has no row yet (a ledger's first writes).


@contextmanager
def write_session(engine: Engine, *, read_head: bool = False, release_ids: Sequence[str] = ()) -> Iterator[Session]:
    """One atomic write: everything inside commits together or not at all.

    The transaction belongs to one connection, opened here with the ledger's write lock
    (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory transaction lock); the Session
    joins it, so ORM writes and the recording path's Core statements share it.
    `read_head`: a write into an existing ledger that decides from its configuration stamp,
    audit head and totals' stamp (`configuration`) reads them in the lock's round trip.
    `release_ids` (with `read_head`): the ids a record's files declare; on PostgreSQL which of
    them the ledger holds is read in that round trip too, under the lock (ReleaseLookup then
    asks the server nothing for them: one round trip fewer per record)."""
    with engine.connect() as connection:
        connection.execution_options(**{WRITE_OPTION: True})
        postgresql = engine.dialect.name == "postgresql"
        try:
            with connection.begin():
                stamp_and_head = None
                if postgresql:
                    # the wait for the lock is bounded: then exit 3 (failures), nothing written.
                    # One round trip: statements of constants in one simple query (with
                    # `read_head`, BEGIN itself is the first (driver.begin_with) and the last
                    # reads the stamps and the head once the lock is held).
                    statement = (f"{identity.role_statement(connection)}"  # (a front end's person)
                                 f"SET LOCAL lock_timeout = {int(lock_timeout() * 1000)}; "
                                 f"SELECT pg_advisory_xact_lock({int(WRITE_LOCK_KEY)})")
                    if not read_head:
                        connection.exec_driver_sql(statement)
                    else:
                        ids = list(dict.fromkeys(release_ids))[:MAX_IDS_READ_WITH_LOCK]
                        stamp_and_head = driver.begin_with(
                            connection, f"{statement}; {_stamp_head_and_ids_sql(connection, ids)}", 3)
                session = Session(bind=connection, join_transaction_mode="rollback_only")
                session.info["connection"] = connection
                if stamp_and_head is not None:
                    session.info["stamp_and_head"] = stamp_and_head[:4]
                    held = set(stamp_and_head[4] or ())
                    session.info["release_exists"] = {rid: rid in held for rid in ids}
                try:
                    yield session
                    _finish_write(session)
                    # what `pipelined` holds is sent and checked, the COMMIT its last statement (PostgreSQL:
                    # the writes and the commit in one round trip; the commit below then sends nothing)
                    driver.end_pipeline(connection, commit=True)
                except BaseException as exc:
                    driver.end_pipeline(connection, exc)
                    raise
                finally:
                    session.close()
        finally:
            if postgresql and read_head:
                driver.end_begin(connection)
        remember_totals(session)  # committed: only now may the caches move
        remember_roles(session)
        remember_ids(session)


def pipelined(session: Session) -> None:
    """In a `write_session`: the writes that follow are sent together (PostgreSQL's pipeline
    mode: one round trip for a record's writes, until a read or the commit: driver.pipeline);
    a no-op on SQLite, whose statements cost no round trip."""
    flush_pending(session)
    driver.pipeline(session_connection(session))


def _finish_write(session: Session) -> None:
    """Before a write commits, in one statement: the running totals stamped with the head
    this transaction leaves (stamp_totals), and the number of events written so far, kept
    beside them in ledger_meta, so `verify` can tell a chain cut short (its newest events
    deleted, or every row) from one that is whole."""
    values = {}
    head = session.info.get("audit_head")
    if session.info.get("appended") and head is not None:
        values[TOTALS_STAMP] = f"{head[0]}:{head[1]}"
    written = session.info.get("appended_seq")
    if written is not None:
        values[EVENTS_WRITTEN] = str(written)
    set_meta(session, values)
    flush_pending(session)


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """One consistent read: every statement sees the ledger as it was at one instant,
    whatever writers commit meanwhile (SQLite: one deferred transaction, a WAL snapshot;
    PostgreSQL: a REPEATABLE READ, READ ONLY transaction). Takes no lock and waits for
    no writer. For `verify` and reports: a verification during writes is never a false
    alarm."""
    with engine.connect() as connection:
        with connection.begin():
            if engine.dialect.name == "postgresql":
                connection.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"))
            session = Session(bind=connection, join_transaction_mode="rollback_only")
            session.info["connection"] = connection
            try:
                yield session
            finally:
                session.close()
