"""The engine, made from a URL: `./ledger.db` by default, any SQLAlchemy URL by `--db` or
LEDGER_DATABASE_URL (PostgreSQL for teams: `postgresql+psycopg://...`).

SQLite: write-ahead log and synchronous=FULL (LEDGER_SQLITE_SYNCHRONOUS), a file this process cannot
write opened read-only (immutable when no writer can coordinate), a file with several hard links
refused; a write begins IMMEDIATE. PostgreSQL: one idle connection per engine, a connection refused
for too many clients retried until the lock time-out. A writer waits for the lock at most
LEDGER_LOCK_TIMEOUT seconds; both environment variables are refused when malformed (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote
import math
import os
import random
import stat
import time

from sqlalchemy import Engine, event
from sqlmodel import create_engine

from . import driver
from ..core.errors import fail
from .files import sqlite_path
from .table_models import AuditEventRow


DEFAULT_URL = "sqlite:///ledger.db"


# SQLite's synchronous setting: FULL (the default) keeps every acknowledged record through a
# power cut; NORMAL only through a crash (README, "Durability").
SYNCHRONOUS_ENV = "LEDGER_SQLITE_SYNCHRONOUS"


SYNCHRONOUS_SETTINGS = ("FULL", "EXTRA", "NORMAL")


def sqlite_synchronous() -> str:
    """The setting, read when an engine is made and a connection opens (not at import: one
    process may open ledgers under different environments). Unset or
    empty is FULL; any other value than the three is bad input (exit 2), never a guess."""
    given = os.environ.get(SYNCHRONOUS_ENV, "").strip()
    chosen = given.upper() or "FULL"
    if chosen not in SYNCHRONOUS_SETTINGS:
        raise fail("environment", SYNCHRONOUS_ENV, f"must be FULL, EXTRA or NORMAL (or unset: FULL); found "
                                                   f"{given[:40]!r}")
    return chosen


def database_url(option: str | None = None) -> str:
    # (choices.ledger_url says the same without importing this module)
    return option or os.environ.get("LEDGER_DATABASE_URL") or DEFAULT_URL


WRITE_OPTION = "ledger_write"  # execution option of write_session's connection: SQLite begins IMMEDIATE

# How long a writer waits for the ledger's write lock (SQLite: its busy handler, which
# retries with growing sleeps; PostgreSQL: lock_timeout on the advisory lock), and how long
# a PostgreSQL connection is retried while the server has too many clients. After that the
# command ends with exit 3 (failures.LedgerUnavailable): nothing written, retry later.
LOCK_TIMEOUT_ENV = "LEDGER_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 10  # one PostgreSQL connection attempt


MAX_LOCK_TIMEOUT_S = 3600.0


def lock_timeout() -> float:
    """$LEDGER_LOCK_TIMEOUT in seconds, 0 to an hour; unset or empty is the default. Anything
    else (not a number, NaN, which would mean no wait at all, a negative or larger number) is
    bad input (exit 2), never replaced by the default."""
    given = os.environ.get(LOCK_TIMEOUT_ENV, "").strip()
    if not given:
        return DEFAULT_LOCK_TIMEOUT_S
    try:
        value = float(given)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= MAX_LOCK_TIMEOUT_S:  # (NaN included)
        raise fail("environment", LOCK_TIMEOUT_ENV, f"must be a number of seconds from 0 to "
                                                    f"{MAX_LOCK_TIMEOUT_S:g} (or unset: {DEFAULT_LOCK_TIMEOUT_S:g}); "
                                                    f"found {given[:40]!r}")
    return value


def check_sqlite_file(path: Path) -> None:
    """Refuse a ledger file SQLite cannot lock safely: one with several hard links (each
    name gets its own lock, so two writers through two names lose writes), or one that
    is not a regular file."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(found.st_mode):
        raise fail("--db", "url", f"{path} is not a regular file; a ledger is a SQLite file")
    if found.st_nlink > 1:
        raise fail("--db", "url", f"{path} has {found.st_nlink} hard links: SQLite's locks do not hold across "
                                  "hard links, so writes through two names could be lost; keep one name "
                                  "(remove the other links) or copy the file")


def _sqlite_read_only(path: Path) -> tuple[bool, bool]:
    """(read only, immutable): a file this process cannot write (no permission, a read-only
    file system) is opened read-only; when its directory cannot be written either and no
    shared-memory index exists beside it, SQLite cannot coordinate with writers, so the
    file is read as immutable (a copy handed to an auditor, a read-only mount)."""
    if not path.exists():
        return False, False
    if os.access(path, os.W_OK) and os.access(path.parent if str(path.parent) else ".", os.W_OK):
        return False, False
    directory_writable = os.access(path.parent if str(path.parent) else ".", os.W_OK)
    shm = Path(f"{path}-shm")
    return True, not directory_writable and not shm.exists()


def _new_or_ledger(dbapi_connection) -> bool:
    tables = {row[0] for row in dbapi_connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return not tables or AuditEventRow.__tablename__ in tables


def make_engine(url: str) -> Engine:
    """An engine whose transactions take the ledger's write lock when they write."""
    lock_timeout()  # (its environment variable refused here, before any connection)
    if url.startswith("sqlite"):
        return _sqlite_engine(url)
    if url.startswith("postgresql"):
        return _postgresql_engine(url)
    return create_engine(url, pool_pre_ping=True)


def _sqlite_engine(url: str) -> Engine:
    """A SQLite engine: read-only for a file this process cannot write, in write-ahead-log mode,
    each write beginning IMMEDIATE (the write lock), each read DEFERRED (a snapshot)."""
    path = sqlite_path(url)
    if path is not None:
        check_sqlite_file(path)
        sqlite_synchronous()
    read_only, immutable = _sqlite_read_only(path) if path is not None else (False, False)
    connect_args: dict = {"check_same_thread": False, "timeout": lock_timeout()}
    if read_only:
        import sqlite3

        uri = f"file:{quote(str(path.absolute()))}?mode=ro" + ("&immutable=1" if immutable else "")

        def _connect_read_only():
            return sqlite3.connect(uri, uri=True, **connect_args)

        engine = create_engine(url, creator=_connect_read_only)
    else:
        engine = create_engine(url, connect_args=connect_args)

    @event.listens_for(engine, "connect")
    def _disable_pysqlite_transactions(dbapi_connection, _record):
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        if url not in ("sqlite://", "sqlite:///:memory:") and not read_only:
            # Write-ahead log: readers never block the writer. Switched once, and only for
            # a new file or a ledger: a database of another application is left as it is.
            # synchronous=FULL syncs the log at every commit, so an acknowledged record
            # survives a power cut, not only a crash (NORMAL may lose the last commits
            # then): a book of record.
            if dbapi_connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal" and \
                    _new_or_ledger(dbapi_connection):
                dbapi_connection.execute("PRAGMA journal_mode=WAL")
            dbapi_connection.execute(f"PRAGMA synchronous={sqlite_synchronous()}")
        dbapi_connection.execute("PRAGMA foreign_keys=ON")

    @event.listens_for(engine, "begin")
    def _begin(connection):
        # A write (write_session) begins IMMEDIATE: it takes SQLite's write lock at the
        # start, so a budget check and the record it guards cannot interleave with
        # another writer. A read begins DEFERRED: in WAL mode it reads a snapshot and
        # neither waits for the writer nor makes it wait (a report verifying the chain
        # in one process while it reads in another).
        immediate = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.connection.dbapi_connection.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _postgresql_engine(url: str) -> Engine:
    """A PostgreSQL engine: one idle connection kept, a busy server retried until the lock time-out."""
    # At most one idle connection kept per engine (pool_size=1), so a process that writes
    # release after release does not connect for each one; a connection beyond it (two
    # threads at once) is closed when its transaction ends (unbounded overflow): two
    # hundred writer processes hold at most one connection each. A connection refused
    # because the server has too many clients (or is starting up) is retried with
    # growing sleeps until the lock time-out; then exit 3, saying so.
    # synchronous_commit is set as a connection option (libpq `options`): no round trip.
    engine = create_engine(url, pool_size=1, max_overflow=-1, pool_recycle=300, pool_reset_on_return=None,
                           connect_args={"connect_timeout": CONNECT_TIMEOUT_S,
                                         "options": "-c synchronous_commit=on"})

    @event.listens_for(engine, "before_cursor_execute")
    def _end_pipeline(connection, _cursor, _statement, _parameters, _context, _executemany):
        # SQLAlchemy reads a statement's results and row count as it runs it: what a
        # record pipelined is sent and checked first (driver.pipeline)
        if driver.PIPELINE in connection.info:
            driver.end_pipeline(connection)

    @event.listens_for(engine, "do_connect")
    def _connect_with_retries(dialect, _record, cargs, cparams):
        deadline = time.monotonic() + lock_timeout()
        pause = 0.05
        while True:
            try:
                return dialect.loaded_dbapi.connect(*cargs, **cparams)
            except dialect.loaded_dbapi.OperationalError as exc:
                text_ = str(exc).lower()
                busy = any(s in text_ for s in ("too many clients", "remaining connection slots",
                                                "the database system is starting up"))
                if not busy or time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause * (0.5 + random.random()))
                pause = min(pause * 2, 2.0)

    return engine
