"""The recording path's statements, run on the database driver's own cursor (issue 13, section 3).

A record is one transaction of about ten statements (the audit event, the release row, its
accounting rows, the running totals and accountant states, the ledger's stamps). Through
SQLAlchemy's execution each statement cost about 50 microseconds of Python (its execution
context, parameter processing, the result object), more than SQLite takes to run it; recording
one release at a time is bound by that Python, not by the disk.

Here a Core statement (or a typed `text`) is compiled once per dialect and set of columns, and
run on the DBAPI cursor of the transaction's own connection. Each value goes through the bind
processor of its column's type for that dialect, the one SQLAlchemy itself applies, so the rows
stored are the very rows the Core statement would store (JSON through the dialect's serializer;
on PostgreSQL its `json` parameters and casts). Nothing else changes: the same connection, the
same transaction, the same lock.

On PostgreSQL every statement is a round trip to the server. `pipeline` puts the connection in
psycopg's pipeline mode: the writes after it are sent together, without waiting for each
result, and the first read or the end of the pipeline (before the commit) collects them, so a
record's writes cost one round trip. An error in any of them is raised there, and the
transaction is rolled back as before: nothing written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Connection

# per dialect (weakly: it goes with its engine): (id of the statement, the columns given) ->
# (the statement, its SQL, whether parameters are positional, ((name, bind processor or None), ...))
_COMPILED: WeakKeyDictionary = WeakKeyDictionary()


def _compiled(statement, dialect, keys: tuple[str, ...] | None) -> tuple[str, bool, tuple]:
    statements = _COMPILED.get(dialect)
    if statements is None:
        statements = _COMPILED[dialect] = {}
    found = statements.get((id(statement), keys))
    if found is None or found[0] is not statement:
        compiled = statement.compile(dialect=dialect, column_keys=list(keys) if keys is not None else None)
        positional = compiled.positiontup is not None  # qmark (SQLite): a tuple in the statement's order
        names = compiled.positiontup if positional else list(compiled.binds)
        binds = compiled.binds
        items = tuple((name, binds[name].type.dialect_impl(dialect).bind_processor(dialect)) for name in names)
        found = statements[(id(statement), keys)] = (statement, compiled.string, positional, items)
    return found[1:]


def _parameters(row: Mapping[str, Any], positional: bool, items: tuple):
    if positional:
        return tuple([row[name] if processor is None else processor(row[name]) for name, processor in items])
    return {name: row[name] if processor is None else processor(row[name]) for name, processor in items}


def dbapi(connection: Connection):
    """The driver's connection under a SQLAlchemy connection (sqlite3 or psycopg)."""
    return connection.connection.dbapi_connection


def execute(connection: Connection, statement, row: Mapping[str, Any] | None = None, *, columns: bool = False) -> None:
    """Run a write once with `row`'s values (pipelined after `pipeline`). `columns`: an INSERT
    of exactly the columns `row` names (compiled for those)."""
    row = row or {}
    sql, positional, items = _compiled(statement, connection.dialect, tuple(row) if columns else None)
    cursor = dbapi(connection).cursor()
    with disconnects(connection):
        cursor.execute(sql, _parameters(row, positional, items))


def query(connection: Connection, statement, row: Mapping[str, Any] | None = None):
    """Run a read and return the driver's cursor to fetch its rows from (any pipelined
    writes are sent and checked first)."""
    end_pipeline(connection)
    row = row or {}
    sql, positional, items = _compiled(statement, connection.dialect, None)
    cursor = dbapi(connection).cursor()
    with disconnects(connection):
        cursor.execute(sql, _parameters(row, positional, items))
    return cursor


def execute_many(connection: Connection, statement, rows: Sequence[Mapping[str, Any]], *,
                 columns: bool = False) -> None:
    """Run a write for every row (an executemany: SQLite steps it in C; psycopg sends the
    rows together). With `columns`, every row names the same columns, the first row's."""
    if not rows:
        return
    sql, positional, items = _compiled(statement, connection.dialect, tuple(rows[0]) if columns else None)
    cursor = dbapi(connection).cursor()
    with disconnects(connection):
        cursor.executemany(sql, [_parameters(row, positional, items) for row in rows])


@contextmanager
def disconnects(connection: Connection) -> Iterator[None]:
    """A driver error that says the connection is gone invalidates it in SQLAlchemy's pool, as
    SQLAlchemy's own execution does; every error is raised as the driver raised it (failures.py
    names the operational ones, bare or wrapped)."""
    try:
        yield
    except connection.dialect.loaded_dbapi.Error as exc:
        if connection.dialect.is_disconnect(exc, dbapi(connection), None):
            connection.invalidate(exc)
        raise


PIPELINE = "ledger_pipeline"  # connection.info key: the open psycopg pipeline


def pipeline(connection: Connection) -> None:
    """PostgreSQL: the writes that follow (`execute`, `execute_many`) are pipelined until a
    read (`query`), any statement SQLAlchemy runs (database.make_engine ends the pipeline
    before it: SQLAlchemy reads results and row counts as soon as it executes), or the end of
    the write transaction, before its commit (database.write_session). Elsewhere a no-op."""
    if connection.dialect.name != "postgresql" or PIPELINE in connection.info:
        return
    opened = dbapi(connection).pipeline()
    opened.__enter__()
    connection.info[PIPELINE] = opened


def end_pipeline(connection: Connection, failed: BaseException | None = None) -> None:
    """Send what is pipelined and check every result (an error is raised here: the transaction
    is then rolled back, nothing written). After `failed`, only leave pipeline mode."""
    opened = connection.info.pop(PIPELINE, None) if connection.info else None
    if opened is None:
        return
    with disconnects(connection):
        if failed is None:
            opened.__exit__(None, None, None)
        else:
            opened.__exit__(type(failed), failed, failed.__traceback__)


def begin_with(connection: Connection, sql: str, statements: int) -> tuple | None:
    """PostgreSQL: open the write transaction with `BEGIN; <sql>` (`statements` statements) in
    one simple query, and return the first row of the last one. psycopg would send its own
    BEGIN first, a round trip of its own: for this transaction it is in autocommit mode, so it
    sends none, while its commit and rollback still end the transaction the server holds open
    (psycopg acts on the server's transaction status). `end_begin` restores it."""
    raw = dbapi(connection)
    raw.autocommit = True
    cursor = raw.cursor()
    with disconnects(connection):
        cursor.execute(f"BEGIN; {sql}")
        for _ in range(statements):
            cursor.nextset()
        return cursor.fetchone()


def end_begin(connection: Connection) -> None:
    """After the commit or rollback of a transaction `begin_with` opened: psycopg back in its
    usual mode (a transaction per use of the pooled connection); a connection that cannot be
    put back is dropped from the pool, never reused in autocommit mode."""
    try:
        dbapi(connection).autocommit = False
    except Exception:  # noqa: BLE001 -- a broken or busy connection: not reused
        if not connection.invalidated:
            connection.invalidate()
