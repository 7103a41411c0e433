"""The recording path's statements, run on the database driver's own cursor.

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

On PostgreSQL every statement is a round trip to the server. After `pipeline` the writes are
held, and the first read or the end of the write transaction sends them together as one
simple query (each statement's values rendered as literals by psycopg's own adapters, its
client-side binding: `ClientCursor.mogrify`), so a record's writes cost one round trip. At the
end of the write transaction the COMMIT is the query's last statement: the writes and the
commit are one round trip, answered once the commit's WAL record is flushed
(synchronous_commit=on). psycopg's pipeline mode cost about 20 microseconds of Python per
statement (per row of an executemany) beside 5 for a rendered one. An error in any statement
is raised there (the server runs none after it, the COMMIT included), and the transaction is
rolled back as before: nothing written.
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
    held = connection.info.get(PIPELINE)
    if held is not None:  # sent with the others (end_pipeline)
        held.append((sql, _parameters(row, positional, items)))
        return
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
    held = connection.info.get(PIPELINE)
    if held is not None:  # one statement per row, sent with the others (end_pipeline)
        held.extend([(sql, _parameters(row, positional, items)) for row in rows])
        return
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


PIPELINE = "ledger_pipeline"  # connection.info key: the writes held, [(SQL, parameters), ...]


def pipeline(connection: Connection) -> None:
    """PostgreSQL: the writes that follow (`execute`, `execute_many`) are held until a read
    (`query`), any statement SQLAlchemy runs (engines.make_engine ends the pipeline before it:
    SQLAlchemy reads results and row counts as soon as it executes), or the end of the write
    transaction (sessions.write_session), and then sent together, in order. Elsewhere a no-op."""
    if connection.dialect.name != "postgresql" or PIPELINE in connection.info:
        return
    connection.info[PIPELINE] = []


def end_pipeline(connection: Connection, failed: BaseException | None = None, *, commit: bool = False) -> None:
    """Send the writes held, as one simple query, and check it (an error is raised here: the
    transaction is then rolled back, nothing written). `commit`: the transaction's last
    statements, so its COMMIT ends the query (then psycopg's own commit, finding the
    transaction ended, sends nothing). After `failed`, the writes held are dropped."""
    held = connection.info.pop(PIPELINE, None) if connection.info else None
    if not held or failed is not None:
        return
    import psycopg

    raw = dbapi(connection)
    render = psycopg.ClientCursor(raw).mogrify  # the values as literals, by psycopg's adapters
    statements = [render(sql, parameters) for sql, parameters in held]
    if commit:
        statements.append("COMMIT")
    with disconnects(connection):
        raw.cursor().execute("; ".join(statements))  # no parameters: the simple query protocol


def literal(connection: Connection, value) -> str:
    """PostgreSQL: `value` as an SQL literal, quoted by psycopg (libpq's escaping)."""
    from psycopg import sql

    return sql.Literal(value).as_string(dbapi(connection))


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
