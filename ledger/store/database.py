"""The database: SQLModel tables, sessions, and the append-only audit chain.

SQLite file `./ledger.db` by default; any SQLAlchemy URL by `--db` or
LEDGER_DATABASE_URL (PostgreSQL for teams: `postgresql+psycopg://...`).
The engine never sees these rows: `snapshot()` turns them into frozen records.
Per-release accounting rows (columns.py) are written beside every release row,
in the same transaction, so read commands need not decode the releases.

Invariants:
- every change appends an `AuditEventRow` whose hash is SHA-256 over the
  previous hash and the event's canonical JSON (codec.chain_hash); rows are
  never updated or deleted by the ledger;
- every event that creates or changes a release or dataset carries its full
  state after the change, so `verify()` can detect a row edited behind the
  ledger's back;
- writes run in one transaction that holds the ledger's write lock (SQLite:
  BEGIN IMMEDIATE; PostgreSQL: a transaction-level advisory lock), so checks
  made inside it see every committed release and no two writers interleave;
  reads take no lock (SQLite: a WAL snapshot, BEGIN DEFERRED);
- a writer waits for the lock at most LEDGER_LOCK_TIMEOUT seconds; a verification or
  report reads one snapshot (`read_session`: PostgreSQL REPEATABLE READ READ ONLY), so it
  never mixes moments of a ledger others are writing; a read never creates or upgrades a
  schema unless asked (`schema_state` first);
- the last event's seq is kept in ledger_meta (`events_written`): a chain cut short or
  emptied does not verify;
- what this process caches (datasets, families and caps, by the configuration
  stamp; running totals, by the audit head) serves a transaction only when the
  stamp or head it read at its start is the one the cache was made at: a write
  by any other process moves the head.
"""

from __future__ import annotations

import json
import math
import os
import random
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    cast,
    Connection,
    Engine,
    Index,
    String,
    Text,
    UniqueConstraint,
    bindparam,
    event,
    false,
    insert,
    inspect,
    text,
    update,
)
from sqlmodel import Field, Session, SQLModel, create_engine, select

from ..accounting.spend import ALLOWANCE, ZERO as ZERO_SPEND
from ..accounting.budget import (FAMILY_DRIVER, CapTotal, top_drivers, total_differences, total_from_index,
                                 total_from_parts)
from ..accounting.cap_measure import options_measure
from .codec import (
    GENESIS_HASH,
    canonical_json,
    cap_from_dict,
    cap_to_dict,
    cap_total_from_dict,
    cap_total_to_dict,
    chain_hash,
    event_hash,
    dataset_from_dict,
    dataset_to_dict,
    family_from_dict,
    family_to_dict,
    release_from_dict,
    release_to_dict,
)
from ..accounting.cap_decisions import choose_filter
from ..accounting.cap_states import state_from_index
from ..accounting.cost_rule import family_options
from ..accounting.ledger_index import LedgerIndex
from ..core.errors import fail
from ..input.snapshot import LedgerSnapshot
from ..core.memory import paused_gc
from ..core.records import CHARGED_STATUSES, Cap, Dataset, Family, Release, Status, in_name_order
from .files import sqlite_path  # (the file of a SQLite URL: the output guard's too)

DEFAULT_URL = "sqlite:///ledger.db"
SCHEMA_VERSION = 20  # 1: releases; 2: caps and running totals; 3: Pufferfish guarantees and outputs;
# 4: people's roles, the self-approval waiver of a dataset, PostgreSQL append-only triggers
# 5: accounting rows (columns.py); 6: their accounting events and lifecycle moments;
# 7: a subsampled release's accounting event is its sampling event
# 8: the verified head (verified_head.py) keeps when it was verified
# 9: audit events indexed by (kind, subject, actor): EVENT_INDEX
# 10: the accounting rows sealed in binary chunks (sealed.py)
# 11: a Gaussian declared only by (epsilon, delta) has its implied multiplier's event (catalogue)
# 12: the audit events' index holds their moment too: EVENT_INDEX (kind, subject, actor, at)
# 13: the figures of caps at a delta are filter figures at their statement's share of it (spend.py)
# 14: a release offering (epsilon, delta) beside pure or rho is charged by a side fixed in advance (engine)
# 15: an epsilon at a delta of a composition is an odometer: no zCDP conversion at the best order (spend.py);
#     a declared plan cut short by a cancellation after a publication is adaptive (accountants, state v4)
# 16: a family member names its part of the records (releases.part, indexed with the family: PART_INDEX);
#     members recorded before are their own part, their id (_v16_parts)
# 17: a plan declared in advance is stated at half the delta, the filter's orders at the other half,
#     1/44 each: the caps at a delta are decided again (_v17_declared_share)
# 18: one case, fully adaptive; a cap at a delta is a filter of a recorded kind (caps.filter, _v18_filters);
#     a dataset states its neighbour relation (datasets.relation, docs/explanation/model.md#variables-subsets-and-neighbours); earlier ones are replace-one
# 19: PostgreSQL refuses an event whose lifecycle step or duty is not allowed (enforced.py: _v19_enforced)
# 20: a plan's version is an audit event (plan.recorded), a steward's duty on PostgreSQL (_v20_plan_versions)
WRITE_LOCK_KEY = 0x1ED6E5  # PostgreSQL advisory lock id for ledger writes
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


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


class MetaRow(SQLModel, table=True):
    __tablename__ = "ledger_meta"
    key: str = Field(primary_key=True)
    value: str


class DatasetRow(SQLModel, table=True):
    __tablename__ = "datasets"
    name: str = Field(primary_key=True)
    description: str = ""
    delta: str | None = None  # exact fraction text
    groups: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime
    # schema version 4: separation of duties waived for this dataset (docs/explanation/model.md#people-duties-and-the-book-of-record)
    self_approval: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, server_default=false()))
    # schema version 18: the neighbour relation its figures are in (docs/explanation/model.md#variables-subsets-and-neighbours), fixed once recorded
    relation: str = Field(default="replace", sa_column=Column(String, nullable=False, server_default="replace"))


class VariableRow(SQLModel, table=True):
    __tablename__ = "variables"
    __table_args__ = (UniqueConstraint("dataset", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    dataset: str = Field(foreign_key="datasets.name", index=True)
    name: str
    classification: str
    description: str = ""
    position: int
    categories: list | None = Field(default=None, sa_column=Column(JSON, nullable=True))  # schema version 3


class FamilyRow(SQLModel, table=True):
    __tablename__ = "families"
    id: str = Field(primary_key=True)
    dataset: str = Field(foreign_key="datasets.name")
    partition: list | None = Field(default=None, sa_column=Column(JSON, nullable=True))  # None: random split
    description: str = ""


PART_INDEX = "ix_releases_family_part"  # (schema 16) a record finds the members holding its parts by it


class ReleaseRow(SQLModel, table=True):
    __tablename__ = "releases"
    __table_args__ = (Index(PART_INDEX, "family", "part"),)
    id: str = Field(primary_key=True)
    seq: int = Field(index=True)
    dataset: str = Field(foreign_key="datasets.name", index=True)
    title: str = ""
    reads: list = Field(sa_column=Column(JSON, nullable=False))
    mechanism_name: str
    mechanism_params: dict = Field(sa_column=Column(JSON, nullable=False))
    guarantees: list = Field(sa_column=Column(JSON, nullable=False))
    derived_from: list = Field(sa_column=Column(JSON, nullable=False))
    family: str | None = Field(default=None, foreign_key="families.id")
    status: str
    recorded_by: str
    recorded_at: str | None = None
    approved_by: str | None = None
    approved_at: str | None = None
    published_at: str | None = None
    # schema version 3
    pufferfish: list = Field(default_factory=list, sa_column=Column(JSON, nullable=False, server_default="[]"))
    output_digest: str | None = None
    output: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # schema version 16: a family member's part of the records (docs/explanation/model.md#families); None outside a family
    part: str | None = None


class RoleRow(SQLModel, table=True):
    """Who holds which role (ledger.operations.people.ROLES); every grant and revocation is an audit
    event (role.granted / role.revoked), and `verify` compares this table with them."""

    __tablename__ = "roles"
    person: str = Field(primary_key=True)
    role: str = Field(primary_key=True)


class CapRow(SQLModel, table=True):
    __tablename__ = "caps"
    dataset: str = Field(foreign_key="datasets.name", primary_key=True)
    name: str = Field(primary_key=True)
    subset: list = Field(sa_column=Column(JSON, nullable=False))
    whole_dataset: bool = False
    epsilon: str | None = None  # exact fraction text
    delta: str | None = None
    rho: str | None = None
    filter: str | None = None  # a cap at a delta: its privacy filter (accounting/filters.py)


class CapTotalRow(SQLModel, table=True):
    """The running total of a cap (budget.CapTotal), updated with every record."""

    __tablename__ = "cap_totals"
    dataset: str = Field(primary_key=True)
    cap: str = Field(primary_key=True)
    total: dict = Field(sa_column=Column(JSON, nullable=False))


class CapAccountantRow(SQLModel, table=True):
    """A cap's running accountant state (accountants.state_*): event counts and lifecycle
    times on its subset, for the Rényi filter and the declared-in-advance case.
    A cache of the releases: missing or stale rows are recomputed from the history."""

    __tablename__ = "cap_accountant_state"
    dataset: str = Field(primary_key=True)
    cap: str = Field(primary_key=True)
    state: dict = Field(sa_column=Column(JSON, nullable=False))


# (schema 9) The audit events by kind and subject, with the actor: a report reads a few kinds of
# event (publications, retractions and cancellations, cap changes, the events of some releases)
# and counts the dataset's events by kind and actor. Without it each of those read every event,
# payloads and all (about 4 GB at a million releases); with it they are index searches, and the
# counts a scan of the index alone (it holds every column they read: the seq is the row id).
# (schema 12) With the moment: a report --as-of or --since counts the events dated by then (or
# since), which read every event's row for its `at` (12 s cold at a million releases); with `at`
# in the index those counts are a scan of the index alone too. It replaces the schema 9 index
# (EVENT_INDEX_9), of which it is an extension: every search that one served, this one serves.
EVENT_INDEX = "ix_audit_events_kind_subject_at"
EVENT_INDEX_9 = "ix_audit_events_kind_subject"


class AuditEventRow(SQLModel, table=True):
    __tablename__ = "audit_events"
    __table_args__ = (Index(EVENT_INDEX, "kind", "subject", "actor", "at"),)
    seq: int = Field(primary_key=True)
    at: str
    actor: str
    kind: str  # dataset.added, family.added, release.recorded, ...
    subject: str  # the dataset or release it is about
    payload: str = Field(sa_column=Column(Text, nullable=False))  # canonical JSON
    prev_hash: str
    hash: str = Field(index=True)


from . import columns  # noqa: E402  (its tables: accounting rows)
from . import identity  # noqa: E402  (the role a front end's person writes as)
from . import driver  # noqa: E402  (the recording path's statements on the driver's cursor)
from . import sealed  # noqa: E402  (its tables: the accounting rows in sealed chunks)
from . import derived  # noqa: E402  (the derived rows' digest a verified head keeps)
from . import enforced  # noqa: E402  (what PostgreSQL refuses at INSERT)

# Statements on the recording path, built once so SQLAlchemy's compiled cache serves them.
_EVENTS = AuditEventRow.__table__
_RELEASES = ReleaseRow.__table__
_TOTALS = CapTotalRow.__table__
_LAST_EVENT = select(_EVENTS.c.seq, _EVENTS.c.hash).order_by(_EVENTS.c.seq.desc()).limit(1)
_INSERT_EVENT = insert(_EVENTS)
_INSERT_RELEASE = insert(_RELEASES)
_RELEASE_PAYLOAD = '{"release":'  # how a release event's payload starts (canonical JSON)


def _text_rows(table, where: str = "", order: str = "", *binds):
    """SELECT every column of `table` as SQL text typed by the table's own columns (the same rows,
    JSON decoded and booleans as bool, as the Core select). The reads every `check` and `record`
    start with are written so: a fresh process compiles a Core select in 1-6 ms (the first ones
    the most), its text in a fraction of that, and a command is a fresh process."""
    names = ", ".join(f'"{column.name}"' for column in table.c)
    clause = text(f"SELECT {names} FROM {table.name}" + (f" WHERE {where}" if where else "")
                  + (f" ORDER BY {order}" if order else ""))
    return (clause.bindparams(*binds) if binds else clause).columns(*table.c)


_RELEASE_EXISTS = text("SELECT id FROM releases WHERE id = :id")
# the configuration stamp, the head of the audit chain and the running totals' stamp
# (stale_totals), in one round trip (SQL text, as _text_rows says why)
_STAMP_AND_HEAD_SQL = (
    """SELECT (SELECT value FROM ledger_meta WHERE "key" = 'config_seq'), """
    "(SELECT seq FROM audit_events ORDER BY seq DESC LIMIT 1), "
    "(SELECT hash FROM audit_events ORDER BY seq DESC LIMIT 1), "
    """(SELECT value FROM ledger_meta WHERE "key" = 'totals_head')""")
_STAMP_AND_HEAD = text(_STAMP_AND_HEAD_SQL)
MAX_IDS_READ_WITH_LOCK = 10_000  # ids of a record read with the lock (more: looked up one by one)


def _stamp_head_and_ids_sql(connection: Connection, ids: Sequence[str]) -> str:
    """PostgreSQL: the stamps and head, and which of `ids` the releases table holds (an array),
    in one SELECT; each id a literal quoted by psycopg (driver.literal)."""
    if not ids:
        return f"{_STAMP_AND_HEAD_SQL}, NULL"
    listed = ", ".join(driver.literal(connection, rid) for rid in ids)
    return f"{_STAMP_AND_HEAD_SQL}, ARRAY(SELECT id FROM releases WHERE id IN ({listed}))"
# ledger_meta values a write sets at its end (the totals' stamp, the events written): one
# statement for them all, which inserts a key that has no row yet (a ledger's first writes).
# The running totals and accountant states are written the same way. (INSERT ... ON CONFLICT
# DO UPDATE: SQLite 3.24 and PostgreSQL 9.5 read it alike.)
_SET_META = text("""INSERT INTO ledger_meta ("key", value) VALUES (:k, :v) """
                 """ON CONFLICT ("key") DO UPDATE SET value = excluded.value""")
_READ_TOTALS = text("SELECT cap, total FROM cap_totals WHERE dataset = :dataset AND cap IN :names").bindparams(
    bindparam("names", expanding=True)).columns(_TOTALS.c.cap, _TOTALS.c.total)
_READ_STATES = text("SELECT cap, state FROM cap_accountant_state WHERE dataset = :dataset AND cap IN :names"
                    ).bindparams(bindparam("names", expanding=True)).columns(
    CapAccountantRow.__table__.c.cap, CapAccountantRow.__table__.c.state)
_SAVE_STATE = text("INSERT INTO cap_accountant_state (dataset, cap, state) VALUES (:d, :c, :s) "
                     "ON CONFLICT (dataset, cap) DO UPDATE SET state = excluded.state").bindparams(
    bindparam("s", type_=CapAccountantRow.__table__.c.state.type))
_SAVE_TOTAL = text("INSERT INTO cap_totals (dataset, cap, total) VALUES (:d, :c, :t) "
                     "ON CONFLICT (dataset, cap) DO UPDATE SET total = excluded.total").bindparams(
    bindparam("t", type_=_TOTALS.c.total.type))


# --------------------------------------------------------------------------
# Engine and transactions
# --------------------------------------------------------------------------


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
    if url.startswith("postgresql"):
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
    return create_engine(url, pool_pre_ping=True)


def ensure_schema(engine: Engine) -> None:
    """Create the tables on first use, or upgrade a ledger made by an earlier version.

    Runs under the write lock, so concurrent first uses do not race. New tables
    of a version are created by `create_all`; a version's other changes are a
    function in MIGRATIONS, run in order, each recorded in the audit chain.
    """
    with write_session(engine) as session:
        connection = session.connection()
        fresh = not inspect(connection).has_table(AuditEventRow.__tablename__)
        SQLModel.metadata.create_all(connection)
        stamp = session.get(MetaRow, "schema_version")
        if fresh or stamp is None:
            version = SCHEMA_VERSION if fresh else 1  # version 1 ledgers carry no stamp of their own
            session.merge(MetaRow(key="schema_version", value=str(version)))
            if fresh:
                _append_only(connection)
                enforced.install(connection)
                return
        else:
            version = int(stamp.value)
        if version > SCHEMA_VERSION:
            raise RuntimeError(f"this ledger has schema version {version}; this privacy-ledger knows up to "
                               f"{SCHEMA_VERSION}. Upgrade privacy-ledger.")
        if version < 16:  # (the migrations before 16 read release rows by the current model, which names it)
            _release_part_column(connection)
        if version < 18:  # (likewise the caps' filter column, and the datasets' relation)
            _cap_filter_column(connection)
            _dataset_relation_column(connection)
        for target in range(version + 1, SCHEMA_VERSION + 1):
            MIGRATIONS.get(target, lambda _session: None)(session)
            session.merge(MetaRow(key="schema_version", value=str(target)))
            if not is_empty(session):
                append_event(session, kind="ledger.migrated", subject=f"schema {target}", actor="privacy-ledger",
                             payload={"from": target - 1, "to": target})


def _v3_release_outputs(session: Session) -> None:
    """Releases gain their Pufferfish guarantees, output digest and output; variables
    their public categories."""
    connection = session.connection()
    columns = {column["name"] for column in inspect(connection).get_columns("releases")}
    if "pufferfish" not in columns:
        connection.exec_driver_sql("ALTER TABLE releases ADD COLUMN pufferfish JSON NOT NULL DEFAULT '[]'")
    if "output_digest" not in columns:
        connection.exec_driver_sql("ALTER TABLE releases ADD COLUMN output_digest VARCHAR")
    if "output" not in columns:
        connection.exec_driver_sql("ALTER TABLE releases ADD COLUMN output TEXT")
    if "categories" not in {column["name"] for column in inspect(connection).get_columns("variables")}:
        connection.exec_driver_sql("ALTER TABLE variables ADD COLUMN categories JSON")


def _v4_people(session: Session) -> None:
    """Datasets gain their self-approval waiver (the roles table is made by create_all);
    on PostgreSQL the audit events and releases become append-only."""
    connection = session.connection()
    if "self_approval" not in {column["name"] for column in inspect(connection).get_columns("datasets")}:
        connection.exec_driver_sql("ALTER TABLE datasets ADD COLUMN self_approval BOOLEAN NOT NULL DEFAULT FALSE")
    _append_only(connection)


def _dataset_relation_column(connection) -> None:
    """Datasets gain their neighbour relation (schema 18): every earlier dataset is replace-one."""
    if "relation" not in {column["name"] for column in inspect(connection).get_columns("datasets")}:
        connection.exec_driver_sql("ALTER TABLE datasets ADD COLUMN relation VARCHAR NOT NULL DEFAULT 'replace'")


# The lifecycle columns: the only columns of a release row that ever change (lifecycle.py).
LIFECYCLE_COLUMNS = ("status", "approved_by", "approved_at", "published_at")

# (statements run through the driver: a percent sign is written %%)
# PostgreSQL enforces the book of record itself (docs/explanation/model.md#people-duties-and-the-book-of-record): whatever role the ledger runs
# as, an audit event can be inserted and never updated, deleted or truncated; a release row
# is never deleted, and an update may change its lifecycle columns only; what an appended event may
# say -- its lifecycle step, and under a person's login its duty -- is judged by enforced.py. (The table owner or
# a superuser can still drop a trigger: that is what the hash chain, and a checkpoint kept
# outside the database, detect.)
_APPEND_ONLY_SQL = [
    """CREATE OR REPLACE FUNCTION privacy_ledger_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'privacy-ledger: %% on %% refused: the ledger is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
    END $$""",
    """CREATE OR REPLACE FUNCTION privacy_ledger_release_update() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF (to_jsonb(OLD) - ARRAY['status', 'approved_by', 'approved_at', 'published_at'])
         IS DISTINCT FROM (to_jsonb(NEW) - ARRAY['status', 'approved_by', 'approved_at', 'published_at']) THEN
        RAISE EXCEPTION 'privacy-ledger: UPDATE of a recorded release refused: only its lifecycle changes'
          USING ERRCODE = 'insufficient_privilege';
      END IF;
      RETURN NEW;
    END $$""",
    "CREATE OR REPLACE TRIGGER privacy_ledger_events_append_only BEFORE UPDATE OR DELETE ON audit_events "
    "FOR EACH ROW EXECUTE FUNCTION privacy_ledger_refuse()",
    "CREATE OR REPLACE TRIGGER privacy_ledger_events_no_truncate BEFORE TRUNCATE ON audit_events "
    "FOR EACH STATEMENT EXECUTE FUNCTION privacy_ledger_refuse()",
    "CREATE OR REPLACE TRIGGER privacy_ledger_releases_no_delete BEFORE DELETE ON releases "
    "FOR EACH ROW EXECUTE FUNCTION privacy_ledger_refuse()",
    "CREATE OR REPLACE TRIGGER privacy_ledger_releases_no_truncate BEFORE TRUNCATE ON releases "
    "FOR EACH STATEMENT EXECUTE FUNCTION privacy_ledger_refuse()",
    "CREATE OR REPLACE TRIGGER privacy_ledger_releases_lifecycle_only BEFORE UPDATE ON releases "
    "FOR EACH ROW EXECUTE FUNCTION privacy_ledger_release_update()",
]


def _append_only(connection: Connection) -> None:
    """Install the append-only triggers (PostgreSQL; on SQLite the tool alone keeps the rules)."""
    if connection.dialect.name != "postgresql":
        return
    for statement in _APPEND_ONLY_SQL:
        connection.exec_driver_sql(statement)


def _v5_accounting_rows(session: Session) -> None:
    """Every release gains its accounting row (columns.py), built once from the release rows."""
    columns.build_all(session)


def _v6_accounting_events(session: Session) -> None:
    """The accounting rows gain what the accountants read: each release's accounting
    event and its recording and publication moments (columns.py), built once from the release rows."""
    columns.add_event_columns(session)


def _v7_sampled_events(session: Session) -> None:
    """A Laplace or geometric release run on a sample keeps its sampling event for the Rényi and
    PLD accountants: its accounting row is brought to that event; and the
    caps' running accountant states, whose version this changes, are rebuilt once here, so no
    read has to recompute them from the whole history on every call until a write saves them."""
    columns.refresh_sampled_events(session)
    _rebuild_accountant_states(session)


def _rebuild_accountant_states(session: Session) -> None:
    """Every cap at a delta gets its accountant state from the history (as
    cap_accounting.current_states computes a missing one), saved beside its running total."""
    from ..accounting import cap_states

    datasets = sorted(set(session.exec(select(CapRow.dataset).where(CapRow.delta.is_not(None))).all()))
    if not datasets:
        return
    history = snapshot(session)
    for dataset in datasets:
        stated = [cap for cap in caps(session, dataset) if cap.delta is not None and cap.rho is None]
        releases = [r for r in history.releases.values() if r.dataset == dataset]
        families = {f.id: f for f in history.families.values() if f.dataset == dataset}
        save_accountant_states(session, dataset, {cap.name: cap_states.state_from_history(cap, releases, families)
                                                  for cap in stated})


def _v8_verified_head_time(session: Session) -> None:
    """The verified head kept by `audit verify` (ledger_meta) gains when it was verified and when
    the last full verification ran: JSON where it was "seq:hash"; a head kept before has no
    time (unknown), and the next verification stamps its own."""
    row = session.get(MetaRow, "verified_head")  # (verified_head.CHECKPOINT_KEY; its reader: verified_head.parse)
    if row is not None and not row.value.startswith("{"):
        seq, digest = row.value.split(":", 1)
        row.value = json.dumps({"seq": int(seq), "hash": digest, "at": None, "full_at": None}, sort_keys=True)
        session.add(row)


def _v9_event_index(session: Session) -> None:
    """The audit events gain their index by (kind, subject, actor) (since schema 12 with their
    moment: EVENT_INDEX), built once."""
    index = next(i for i in AuditEventRow.__table__.indexes if i.name == EVENT_INDEX)
    index.create(session.connection(), checkfirst=True)


def _v12_event_index_at(session: Session) -> None:
    """The audit events' index gains their moment (EVENT_INDEX: kind, subject, actor, at), built
    once; the schema 9 index it extends (EVENT_INDEX_9) is dropped (a ledger upgraded from before
    schema 9 never had it: _v9_event_index built this one)."""
    connection = session.connection()
    connection.exec_driver_sql(f"DROP INDEX IF EXISTS {EVENT_INDEX_9}")
    _v9_event_index(session)


def _v10_sealed_chunks(session: Session) -> None:
    """The accounting rows of every complete range of seqs are sealed in binary chunks
    (sealed.py), built once from the accounting rows."""
    sealed.build_all(session)


def _v11_implied_gaussian_events(session: Session) -> None:
    """A Gaussian release declared only by (epsilon, delta) gets the accounting event of the
    smallest multiplier its claim allows (columns.refresh_implied_gaussian_events); the sealed
    chunks, which hold the event column, are sealed again when a row changed."""
    if columns.refresh_implied_gaussian_events(session):
        sealed.build_all(session)


def _v13_filter_shares(session: Session) -> None:
    """An epsilon at a delta is a filter figure at its statement's share of the delta (spend.py);
    a cap at a delta keeps its figure in its running total, so every such cap's total is computed
    again from its accounting rows (budget.total_from_index, as `cap set` does)."""
    _caps_at_a_delta_again(session, states=False)


def _v15_odometer(session: Session) -> None:
    """What a cap at a delta is held to changed (spend.py: the Rényi orders fixed in advance take
    the delta, 1/22 each), so every cap at a delta has its running total and accountant state
    computed again from its accounting rows; the accounting rows' (dataset, status) index is built
    first (it finds a dataset's cancelled rows)."""
    status_index = next(i for i in columns.AccountingRow.__table__.indexes if i.name == "ix_release_accounting_status")
    status_index.create(session.connection(), checkfirst=True)
    _caps_at_a_delta_again(session, states=True)


def _caps_at_a_delta_again(session: Session, states: bool) -> None:
    from ..accounting.cap_states import state_from_index

    for dataset in sorted(set(session.exec(select(CapRow.dataset).where(CapRow.delta.is_not(None),
                                                                     CapRow.rho.is_(None))).all())):
        stated = [cap for cap in caps(session, dataset) if cap.delta is not None and cap.rho is None]
        index = caps_index(session, dataset, stated)
        save_totals(session, dataset, {cap.name: total_from_index(cap, index) for cap in stated})
        if states:
            save_accountant_states(session, dataset, {cap.name: state_from_index(cap, index) for cap in stated})


def _v14_fixed_sides(session: Session) -> None:
    """A release with an (epsilon, delta) guarantee beside a pure or rho one (or several (epsilon,
    delta) ones) is charged by one side fixed by the release (cost_rule.charge_options), no longer by the
    combination the history favours; such releases have several guarantees (an accounting row's
    `more`), so in each dataset holding one, every cap's running total and accountant state is
    computed again from the accounting rows (as `cap set` does)."""
    from ..accounting.cap_states import state_from_index

    found = session.connection().execute(
        select(columns._ROWS.c.dataset).where(columns._ROWS.c.more.is_not(None)).distinct())
    for dataset in sorted(found.scalars()):
        stated = caps(session, dataset)
        if not stated:
            continue
        index = caps_index(session, dataset, stated)
        save_totals(session, dataset, {cap.name: total_from_index(cap, index) for cap in stated})
        save_accountant_states(session, dataset, {cap.name: state_from_index(cap, index) for cap in stated
                                                  if cap.delta is not None and cap.rho is None})


def _release_part_column(connection: Connection) -> None:
    """The release rows gain their `part` column (schema 16), empty."""
    if "part" not in {column["name"] for column in inspect(connection).get_columns("releases")}:
        connection.exec_driver_sql("ALTER TABLE releases ADD COLUMN part VARCHAR")


_LIFECYCLE_TRIGGER = "privacy_ledger_releases_lifecycle_only"  # (_APPEND_ONLY_SQL)


def _v16_parts(session: Session) -> None:
    """A family member names the part of the records it is computed on (docs/explanation/model.md#families), and the
    charged members of a family hold distinct parts. Every member recorded before is given its own
    id as its part: the ledger charged each as a part of its own (which the new rule can no longer
    let two members on one part claim). Its audit event is untouched: a release dict without `part`
    reads back with its id as its part (codec.release_from_dict), so `verify` finds the row and the
    event the same release. On PostgreSQL the append-only trigger, which lets an update change only
    a release's lifecycle, is disabled for this one statement, in the migration's transaction. The
    index the record's check reads by (PART_INDEX) is built after."""
    connection = session.connection()
    _release_part_column(connection)
    trigger = connection.dialect.name == "postgresql" and connection.exec_driver_sql(
        f"SELECT 1 FROM pg_trigger WHERE tgname = '{_LIFECYCLE_TRIGGER}' AND tgrelid = 'releases'::regclass"
    ).first() is not None
    if trigger:
        connection.exec_driver_sql(f"ALTER TABLE releases DISABLE TRIGGER {_LIFECYCLE_TRIGGER}")
    connection.exec_driver_sql("UPDATE releases SET part = id WHERE family IS NOT NULL AND part IS NULL")
    if trigger:
        connection.exec_driver_sql(f"ALTER TABLE releases ENABLE TRIGGER {_LIFECYCLE_TRIGGER}")
    index = next(i for i in ReleaseRow.__table__.indexes if i.name == PART_INDEX)
    index.create(connection, checkfirst=True)


def _v17_declared_share(session: Session) -> None:
    """The delta of a figure is split before any release between the statements of a plan declared
    in advance (the PLD, the Rényi curve at its best order: half) and the Rényi filter's orders (the
    other half, 1/44 each; spend.DECLARED_SHARE), since one history prints both kinds (the review's
    R1). Every cap at a delta has its running total and accountant state computed again from its
    accounting rows (its PLD memo, made at the whole delta, no longer matches its digest)."""
    _caps_at_a_delta_again(session, states=True)


def _cap_filter_column(connection: Connection) -> None:
    """The cap rows gain their `filter` column (schema 18), empty."""
    if "filter" not in {column["name"] for column in inspect(connection).get_columns("caps")}:
        connection.exec_driver_sql("ALTER TABLE caps ADD COLUMN filter VARCHAR")


def _v18_filters(session: Session) -> None:
    """Every figure is fully adaptive and a cap at a delta is a privacy filter of a recorded kind
    (accounting/filters.py): each such cap is given its filter from the releases it holds now
    (cap_decisions.choose_filter), written as a `cap.set` event by privacy-ledger, and every cap's
    running total and state computed again from its accounting rows."""
    for dataset in sorted(set(session.exec(select(CapRow.dataset)).all())):
        stated = caps(session, dataset)
        index = caps_index(session, dataset, stated)
        for cap in stated:
            if cap.delta is not None and cap.rho is None and not cap.filter:
                cap = replace(cap, filter=choose_filter(cap, state_from_index(cap, index)))
                row = session.get(CapRow, (dataset, cap.name))
                row.filter = cap.filter
                session.add(row)
                append_event(session, kind="cap.set", subject=f"{dataset}/{cap.name}", actor="privacy-ledger",
                             payload={"cap": cap_to_dict(cap), "reason": "schema 18: the cap's privacy filter"})
        session.flush()
        bump_config(session)
        stated = caps(session, dataset)
        save_totals(session, dataset, {cap.name: total_from_index(cap, index) for cap in stated})
        save_accountant_states(session, dataset, {cap.name: state_from_index(cap, index) for cap in stated
                                                  if cap.delta is not None and cap.rho is None})


def _v19_enforced(session: Session) -> None:
    """PostgreSQL refuses, at INSERT, an audit event whose lifecycle step lifecycle.TRANSITIONS does
    not allow, and, under a person's own login, an event of a duty the login's group role does not
    hold (enforced.py); the group roles are made when missing. Nothing on SQLite."""
    enforced.install(session.connection())


def _v20_plan_versions(session: Session) -> None:
    """A solved plan's version is recorded as a `plan.recorded` event (operations/plan_book.py), a
    steward's duty: PostgreSQL's event check is made again from enforced.EVENT_ROLES, which names
    the new kind (else it would need the admin role). Nothing on SQLite."""
    enforced.install(session.connection())


MIGRATIONS: dict[int, Callable[[Session], None]] = {
    # 2: the caps and cap_totals tables (created by create_all); existing ledgers have no caps yet.
    3: _v3_release_outputs,
    4: _v4_people,
    5: _v5_accounting_rows,
    6: _v6_accounting_events,
    7: _v7_sampled_events,
    8: _v8_verified_head_time,
    9: _v9_event_index,
    10: _v10_sealed_chunks,
    11: _v11_implied_gaussian_events,
    12: _v12_event_index_at,
    13: _v13_filter_shares,
    14: _v14_fixed_sides,
    15: _v15_odometer,
    16: _v16_parts,
    17: _v17_declared_share,
    18: _v18_filters,
    19: _v19_enforced,
    20: _v20_plan_versions,
}


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
        _remember_totals(session)  # committed: only now may the caches move
        _remember_roles(session)
        _remember_ids(session)


def pipelined(session: Session) -> None:
    """In a `write_session`: the writes that follow are sent together (PostgreSQL's pipeline
    mode: one round trip for a record's writes, until a read or the commit: driver.pipeline);
    a no-op on SQLite, whose statements cost no round trip."""
    _flush(session)
    driver.pipeline(_connection(session))


EVENTS_WRITTEN = "events_written"  # ledger_meta key: the seq of the last event the ledger wrote


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
    _flush(session)


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


def schema_state(engine: Engine) -> tuple[str, int | None]:
    """("missing", None) when there are no ledger tables (not a ledger), else ("current" |
    "older" (needs an upgrade, which writes) | "newer", the schema version): read without
    any lock and without writing."""
    with read_session(engine) as session:
        connection = session.connection()
        if not inspect(connection).has_table(AuditEventRow.__tablename__) or \
                not inspect(connection).has_table(MetaRow.__tablename__):
            return "missing", None
        stamp = session.get(MetaRow, "schema_version")
    version = 1 if stamp is None else int(stamp.value)
    if version == SCHEMA_VERSION:
        return "current", version
    return ("older" if version < SCHEMA_VERSION else "newer"), version


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


# --------------------------------------------------------------------------
# Reading: rows -> frozen records
# --------------------------------------------------------------------------


def snapshot(session: Session, dataset: str | None = None) -> LedgerSnapshot:
    """Everything recorded (or one dataset's part of it), as frozen records."""
    datasets = {d.name: d for d in _datasets(session)}
    family_query = select(FamilyRow)
    if dataset is not None:
        family_query = family_query.where(FamilyRow.dataset == dataset)
    # Core rows, no ORM objects to build, and the JSON columns as text (`release_row_dicts`)
    release_query = select(*_RELEASE_TEXT_COLUMNS).order_by(_RELEASES.c.seq)
    if dataset is not None:
        release_query = release_query.where(_RELEASES.c.dataset == dataset)
    families = {row.id: family_from_dict(_family_dict(row)) for row in session.exec(family_query)}
    releases = {body["id"]: release_from_dict(body)
                for rows in session.connection().execute(release_query).partitions(VERIFY_CHUNK)
                for body in release_row_dicts(rows)}
    from .as_of import ended_at

    return LedgerSnapshot(datasets=datasets, releases=releases, families=families,
                          ended=ended_at(session.connection()))


RELEASE_PAGE = 5_000  # releases decoded at a time by `release_pages`


def release_pages(session: Session, dataset: str | None = None, page: int | None = None):
    """The releases of `snapshot` (every dataset's, or one's), in the same order (recording
    order), decoded `page` at a time: one list of Release per page, read by keyset paging on
    seq, so that a command listing every release holds one page, not the ledger."""
    page = page or RELEASE_PAGE
    after = -1
    while True:
        query = select(*_RELEASE_TEXT_COLUMNS, _RELEASES.c.seq).where(_RELEASES.c.seq > after)
        if dataset is not None:
            query = query.where(_RELEASES.c.dataset == dataset)
        rows = session.connection().execute(query.order_by(_RELEASES.c.seq).limit(page)).all()
        if not rows:
            return
        after = rows[-1].seq
        yield [release_from_dict(body) for body in release_row_dicts(rows)]


def _datasets(session: Session, names: Sequence[str] | None = None) -> list[Dataset]:
    # Core rows (the columns as attributes, the same column types): no ORM object is built
    # and no mapper configured, which a `check` in a fresh process paid for
    variable_table, dataset_table = VariableRow.__table__, DatasetRow.__table__
    variables: dict[str, list[dict]] = {}
    binds = {} if names is None else {"names": list(names)}
    named = [bindparam("names", expanding=True)] if names is not None else []
    query = _text_rows(variable_table, "dataset IN :names" if named else "", "dataset, position", *named)
    datasets = _text_rows(dataset_table, "name IN :names" if named else "", "", *named)
    _flush(session)
    connection = _connection(session)
    for row in connection.execute(query, binds):
        variables.setdefault(row.dataset, []).append(
            {"name": row.name, "classification": row.classification, "description": row.description,
             "categories": row.categories}
        )
    rows = connection.execute(datasets, binds).all()
    allowances = dataset_allowances(connection, [row.name for row in rows])
    return [dataset_from_dict(_dataset_dict(row, variables.get(row.name, []), allowances.get(row.name)))
            for row in rows]


def dataset_allowances(connection, names: Sequence[str]) -> dict[str, str]:
    """Dataset name -> its approximate allowance (Dataset.allowance) as recorded, for the datasets
    that state one. The allowance is fixed when the dataset is recorded (amend.plan refuses a
    change), so its `dataset.added` event, which carries the whole dataset, holds it: no column
    of its own. A dataset whose event states none has the default."""
    if not names:
        return {}
    found = {}
    for subject, payload in connection.execute(select(_EVENTS.c.subject, _EVENTS.c.payload).where(
            _EVENTS.c.kind == "dataset.added", _EVENTS.c.subject.in_(list(names)))):
        allowance = json.loads(payload).get("dataset", {}).get("allowance")
        if allowance is not None:
            found[subject] = allowance
    return found


def _dataset_dict(row: DatasetRow, variables: list[dict], allowance: str | None = None) -> dict:
    return {"name": row.name, "description": row.description, "delta": row.delta,
            "variables": variables, "groups": row.groups, "self_approval": bool(row.self_approval),
            "relation": row.relation or "replace", **({"allowance": allowance} if allowance is not None else {})}


def _family_dict(row: FamilyRow) -> dict:
    return {"id": row.id, "dataset": row.dataset, "partition": row.partition, "description": row.description}


def release_row_dict(row) -> dict:
    """A release row (ORM or Core: the columns as attributes) as the codec's dict."""
    return {
        "id": row.id,
        "dataset": row.dataset,
        "title": row.title,
        "reads": row.reads,
        "mechanism": {"name": row.mechanism_name, "params": row.mechanism_params},
        "guarantees": row.guarantees,
        "derived_from": row.derived_from,
        "family": row.family,
        "status": row.status,
        "recorded_by": row.recorded_by,
        "recorded_at": row.recorded_at,
        "approved_by": row.approved_by,
        "approved_at": row.approved_at,
        "published_at": row.published_at,
        "pufferfish": row.pufferfish,
        "output_digest": row.output_digest,
        "output": row.output,
        **({} if row.part is None else {"part": row.part}),  # (as codec.release_to_dict writes it)
    }


def is_empty(session: Session) -> bool:
    return session.exec(select(AuditEventRow.seq).limit(1)).first() is None


# --------------------------------------------------------------------------
# Writing: always inside write_session, always with an audit event
# --------------------------------------------------------------------------


def _connection(session: Session) -> Connection:
    """The session's connection, kept for the transaction: the recording path runs
    several statements, and asking the Session each time costs more than the SQL."""
    connection = session.info.get("connection")
    if connection is None:
        connection = session.info["connection"] = session.connection()
    return connection


def _flush(session: Session) -> None:
    """Write pending ORM objects before a Core statement (and skip the call when none are)."""
    if session.new or session.dirty or session.deleted:
        session.flush()


def append_event(session: Session, *, kind: str, subject: str, actor: str, payload: dict,
                 at: datetime | None = None) -> tuple[int, str]:
    """Append one event to the chain; returns its (seq, hash)."""
    _flush(session)  # anything the ORM holds goes first, in order
    connection = _connection(session)
    head = session.info.get("audit_head")  # (seq, hash) of the last event this transaction wrote
    if head is None:
        last = connection.execute(_LAST_EVENT).first()
        head = (0, GENESIS_HASH) if last is None else (last[0], last[1])
    session.info.setdefault("head_before_writes", head)  # what the running totals were stamped with
    seq, previous = head[0] + 1, head[1]
    moment = (at or now()).isoformat()
    payload_json = canonical_json(payload)
    digest = event_hash(previous, seq, moment, actor, kind, subject, payload_json)
    driver.execute(connection, _INSERT_EVENT, {"seq": seq, "at": moment, "actor": actor, "kind": kind,
                                               "subject": subject, "payload": payload_json,
                                               "prev_hash": previous, "hash": digest}, columns=True)
    session.info["audit_head"] = (seq, digest)
    session.info["appended"] = True
    session.info["appended_seq"] = seq
    return seq, digest


def add_dataset(session: Session, dataset: Dataset, actor: str) -> None:
    body = dataset_to_dict(dataset)
    bump_config(session)
    session.add(DatasetRow(name=dataset.name, description=dataset.description, delta=body["delta"],
                           groups=body["groups"], created_at=now(), self_approval=dataset.self_approval,
                           relation=dataset.relation.value))
    session.flush()
    for position, variable in enumerate(dataset.variables):
        session.add(VariableRow(dataset=dataset.name, name=variable.name, classification=variable.classification,
                                description=variable.description, position=position,
                                categories=None if variable.categories is None else list(variable.categories)))
    append_event(session, kind="dataset.added", subject=dataset.name, actor=actor, payload={"dataset": body})


def add_releases(session: Session, releases: Sequence[Release], families: Sequence[Family], actor: str,
                 decisions: Sequence[dict] = ()) -> None:
    for family in families:
        session.add(FamilyRow(**family_to_dict(family)))
        append_event(session, kind="family.added", subject=family.id, actor=actor,
                     payload={"family": family_to_dict(family)})
    if families:
        bump_config(session)
        session.flush()  # families before the releases that name them
    rows = []
    for release in releases:
        body = release_to_dict(release)
        payload = {"release": body}
        if decisions:  # which accountant admitted it, under which case and theorem
            payload["budget_decisions"] = list(decisions)
        seq, _ = append_event(session, kind="release.recorded", subject=release.id, actor=actor,
                              payload=payload)
        rows.append(_release_values(body, seq))  # a release's seq is that of its recording event
        session.info.setdefault("release_exists", {})[release.id] = True  # (ReleaseLookup)
    if rows:
        driver.execute_many(_connection(session), _INSERT_RELEASE, rows, columns=True)
        columns.insert_rows(_connection(session), [(row["seq"], r) for row, r in zip(rows, releases)],
                            dataset_variables(session, {r.dataset for r in releases}), _known_ids(session))


def dataset_variables(session: Session, names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Each named dataset's variables, in order (the positions of the accounting bitsets)."""
    config = configuration(session)
    found = {name: config.variable_names(name) for name in names if name in config.datasets}
    missing = [name for name in names if name not in found]
    if missing:  # added in this transaction, after the configuration was read
        _flush(session)
        found.update({d.name: d.variable_names for d in _datasets(session, missing)})
    return found


def _release_values(body: dict, seq: int) -> dict:
    return {
        "id": body["id"], "seq": seq, "dataset": body["dataset"], "title": body["title"], "reads": body["reads"],
        "mechanism_name": body["mechanism"]["name"], "mechanism_params": body["mechanism"]["params"],
        "guarantees": body["guarantees"], "derived_from": body["derived_from"], "family": body["family"],
        "status": body["status"], "recorded_by": body["recorded_by"], "recorded_at": body["recorded_at"],
        "approved_by": body["approved_by"], "approved_at": body["approved_at"],
        "published_at": body["published_at"], "pufferfish": body["pufferfish"],
        "output_digest": body["output_digest"], "output": body["output"], "part": body.get("part"),
    }


# --------------------------------------------------------------------------
# Fast lookups for writes: a check must not load the whole history
# --------------------------------------------------------------------------


class ReleaseLookup(Mapping):
    """Recorded releases by id, fetched on demand (for the loader's checks)."""

    def __init__(self, session: Session):
        self.session = session

    def __getitem__(self, release_id: str) -> Release:
        row = self.session.get(ReleaseRow, release_id)
        if row is None:
            raise KeyError(release_id)
        return release_from_dict(release_row_dict(row))

    def __contains__(self, release_id: object) -> bool:
        # asked once per transaction and id (the batch's checks, then `already_recorded`: on
        # PostgreSQL each ask is a round trip); `add_releases` notes the ids it writes
        known = self.session.info.setdefault("release_exists", {})
        found = known.get(release_id)
        if found is None:
            found = known[release_id] = driver.query(_connection(self.session), _RELEASE_EXISTS,
                                                     {"id": release_id}).fetchone() is not None
        return found

    def __iter__(self):
        return iter(self.session.exec(select(ReleaseRow.id)).all())

    def __len__(self) -> int:
        return len(self.session.exec(select(ReleaseRow.id)).all())


def deriving_from(session: Session, release_id: str) -> dict[str, Status]:
    """The releases that name `release_id` in their derived-from list, with their status (the
    lineage rule of a cancellation, docs/explanation/model.md#post-processing-and-lineage): only the rows whose list is not empty are read,
    three columns each, never a whole release."""
    from sqlalchemy import Text, cast

    rows = _connection(session).execute(
        select(_RELEASES.c.id, _RELEASES.c.status, _RELEASES.c.derived_from)
        .where(cast(_RELEASES.c.derived_from, Text) != "[]"))
    return {row.id: Status(row.status) for row in rows if release_id in (row.derived_from or ())}


@dataclass(frozen=True)
class Configuration:
    """What changes rarely: datasets, families, caps. Cached per process and reloaded
    whenever the ledger's configuration stamp (bumped by every such change) moves."""

    datasets: Mapping[str, Dataset]
    families: Mapping[str, Family]
    caps: Mapping[str, tuple[Cap, ...]]
    # each dataset's variable names, in order, worked out once per configuration (a record asks
    # for them every time; a dataset's `variable_names` builds them afresh)
    variables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def variable_names(self, dataset: str) -> tuple[str, ...]:
        found = self.variables.get(dataset)
        return found if found is not None else self.datasets[dataset].variable_names


_CONFIGURATION_CACHE: dict[str, tuple[str, Configuration]] = {}  # by ledger URL (_ledger_key)


def _ledger_key(session: Session) -> str:
    """The key of this process's caches for the session's ledger: its URL, rendered once per
    transaction (a SQLAlchemy URL renders itself again on every hash)."""
    key = session.info.get("ledger_key")
    if key is None:
        key = session.info["ledger_key"] = session.get_bind().engine.url.render_as_string(hide_password=False)
    return key


def bump_config(session: Session) -> None:
    session.info.pop("configuration", None)
    row = session.get(MetaRow, "config_seq")
    session.merge(MetaRow(key="config_seq", value=str(int(row.value) + 1 if row else 1)))


def configuration(session: Session) -> Configuration:
    cached = session.info.get("configuration")  # once per transaction
    if cached is not None:
        return cached
    result = _configuration(session)
    session.info["configuration"] = result
    return result


def _configuration(session: Session) -> Configuration:
    url = _ledger_key(session)
    read = session.info.pop("stamp_and_head", None)  # (read with the lock: write_session)
    if read is None:
        read = driver.query(_connection(session), _STAMP_AND_HEAD).fetchone()
    stamp, seq, digest, totals_stamp = read
    stamp = stamp or "0"
    session.info.setdefault("totals_stamp", totals_stamp)  # as it was when this transaction began
    head = (0, GENESIS_HASH) if seq is None else (seq, digest)
    session.info.setdefault("head_at_start", head[1])
    if "audit_head" not in session.info:  # read under the write lock: it cannot move before commit
        session.info["audit_head"] = head
    cached = _CONFIGURATION_CACHE.get(url)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    datasets = {d.name: d for d in _datasets(session)}  # (Core rows, as below: no ORM objects)
    connection = _connection(session)
    families = {r.id: family_from_dict(_family_dict(r)) for r in connection.execute(_text_rows(FamilyRow.__table__))}
    caps_by_dataset: dict[str, list[Cap]] = {}
    for cap_row in connection.execute(_text_rows(CapRow.__table__)):
        known = datasets.get(cap_row.dataset)
        order = known.variable_names if known is not None else ()
        caps_by_dataset.setdefault(cap_row.dataset, []).append(
            replace(cap_from_dict(_cap_dict(cap_row), order), allowance=known.allowance if known else ALLOWANCE))
    # by dataset and name in Python's order, not SQL's: PostgreSQL's ORDER BY follows the database's collation
    result = Configuration(datasets, families, {k: in_name_order(v) for k, v in sorted(caps_by_dataset.items())},
                           {name: dataset.variable_names for name, dataset in datasets.items()})
    _CONFIGURATION_CACHE[url] = (stamp, result)
    return result


def write_context(session: Session) -> LedgerSnapshot:
    """Datasets and families in full (small, cached), releases and the parts their members hold
    by lookup (in a `write_session`: under the write lock, in the record's transaction)."""
    config = configuration(session)
    return LedgerSnapshot(datasets=config.datasets, releases=ReleaseLookup(session), families=config.families,
                          parts_held=lambda pairs: parts_held(session, pairs))


def parts_held(session: Session, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(family, part) -> the first recorded release of that family holding that part and charged
    (any status but cancelled: docs/explanation/model.md#families's members on disjoint parts), for the pairs asked about:
    the loader's check that a new member's part is free (batch._distinct_parts). Reads those
    families' rows with those parts only, by PART_INDEX."""
    pairs = set(pairs)
    found: dict[tuple[str, str], str] = {}
    if not pairs:
        return found
    _flush(session)
    families, parts = sorted({family for family, _ in pairs}), sorted({part for _, part in pairs})
    for start in range(0, len(parts), 500):
        query = (select(_RELEASES.c.family, _RELEASES.c.part, _RELEASES.c.id)
                 .where(_RELEASES.c.family.in_(families), _RELEASES.c.part.in_(parts[start:start + 500]),
                        _RELEASES.c.status != Status.CANCELLED.value)
                 .order_by(_RELEASES.c.seq))
        for family, part, release_id in _connection(session).execute(query):
            if (family, part) in pairs:
                found.setdefault((family, part), release_id)
    return found


def family_members(session: Session, family_ids: Iterable[str]) -> dict[str, list[Release]]:
    family_ids = list(family_ids)
    if not family_ids:
        return {}
    members: dict[str, list[Release]] = {fid: [] for fid in family_ids}
    for row in session.exec(select(ReleaseRow).where(ReleaseRow.family.in_(family_ids)).order_by(ReleaseRow.seq)):
        members[row.family].append(release_from_dict(release_row_dict(row)))
    return members


def caps(session: Session, dataset: str) -> list[Cap]:
    return list(configuration(session).caps.get(dataset, ()))


def _cap_dict(row: CapRow) -> dict:
    return {"dataset": row.dataset, "name": row.name, "subset": row.subset, "whole_dataset": row.whole_dataset,
            "epsilon": row.epsilon, "delta": row.delta, "rho": row.rho,
            **({"filter": row.filter} if row.filter else {})}  # (as codec.cap_to_dict writes it)


def cap_totals(session: Session, dataset: str, names: Iterable[str] | None = None) -> dict[str, CapTotal]:
    """The stored running totals of `names` (every cap of the dataset when None, always read
    from the database). Named totals come from the process's cache when it is current."""
    if names is None:
        rows = session.exec(select(CapTotalRow).where(CapTotalRow.dataset == dataset))
        return {row.cap: cap_total_from_dict(row.total) for row in rows}
    names = list(names)
    saved = session.info.get("saved_totals", {})  # written earlier in this transaction
    cached = _current_cache(session)
    found: dict[str, CapTotal] = {}
    missing = []
    for name in names:
        total = saved.get((dataset, name)) or cached.get((dataset, name))
        if total is None:
            missing.append(name)
        else:
            found[name] = total
    if missing:
        for cap, body in _connection(session).execute(_READ_TOTALS, {"dataset": dataset, "names": missing}):
            found[cap] = cached[(dataset, cap)] = cap_total_from_dict(body)
    return found


# Running totals as this process last read or wrote them, per ledger URL, valid while the
# ledger's audit head is the one stored beside them. Every write to the ledger appends an
# audit event, so a head that has not moved means no total has changed.
_TOTALS_CACHE: dict[str, tuple[str, dict[tuple[str, str], CapTotal]]] = {}


# The caps' running accountant states, cached the same way.
_STATES_CACHE: dict[str, tuple[str, dict[tuple[str, str], dict]]] = {}


def _current_cache(session: Session, caches: dict | None = None) -> dict[tuple[str, str], CapTotal]:
    caches = _TOTALS_CACHE if caches is None else caches
    head = session.info.get("head_at_start")
    if head is None:  # no head read in this transaction: no way to tell whether the cache is current
        return {}
    url = _ledger_key(session)
    cached = caches.get(url)
    if cached is None or cached[0] != head:
        cached = caches[url] = (head, {})
    return cached[1]


# The guarantee value and accounting event ids (columns.py) this process last knew, per ledger
# URL, valid while the audit head is the one they were known at (as the running totals): the id
# tables are append-only, so what a committed transaction read or gave is still so at its head.
_IDS_CACHE: dict[str, tuple[str, columns.Known]] = {}
_IDS_KEPT = 4096  # ids carried from one transaction to the next (a copy each time), at most


def _known_ids(session: Session) -> columns.Known:
    """The ids this transaction may take as known: this process's, while the head is unmoved."""
    known = session.info.get("known_ids")
    if known is None:
        cached = _IDS_CACHE.get(_ledger_key(session))
        head = session.info.get("head_at_start")
        if head is not None and cached is not None and cached[0] == head:
            known = columns.Known(dict(cached[1].values), dict(cached[1].events), dict(cached[1].stops))
        else:
            known = columns.Known({}, {})
        session.info["known_ids"] = known
    return known


def _remember_ids(session: Session) -> None:
    """After a commit: the ids this transaction knew (read or given) are current at the new head."""
    known, head = session.info.get("known_ids"), session.info.get("audit_head")
    if known is not None and head is not None and len(known.values) + len(known.events) <= _IDS_KEPT:
        _IDS_CACHE[_ledger_key(session)] = (head[1], known)


def _remember_roles(session: Session) -> None:
    """After a commit that changed no role: the roles it read are current at the new head."""
    found, head = session.info.get("roles"), session.info.get("audit_head")
    if found is not None and head is not None and "roles_changed" not in session.info:
        _ROLES_CACHE[_ledger_key(session)] = (head[1], found)


def _remember_totals(session: Session) -> None:
    """After a commit: the totals (and accountant states) this transaction wrote become the
    cache, as of the new head."""
    head = session.info.get("audit_head")
    if head is None:
        return
    url = _ledger_key(session)
    for caches, key in ((_TOTALS_CACHE, "saved_totals"), (_STATES_CACHE, "saved_states")):
        saved = session.info.get(key)
        if not saved:
            continue
        cached = caches.get(url)
        entries = cached[1] if cached is not None and cached[0] == session.info.get("head_at_start") else {}
        entries.update(saved)
        entries = {k: v for k, v in entries.items() if v is not None}  # (a dropped state is read again)
        if len(entries) > 4096:
            entries = {k: v for k, v in saved.items() if v is not None}
        caches[url] = (head[1], entries)


def save_totals(session: Session, dataset: str, totals: Mapping[str, CapTotal]) -> None:
    if not totals:
        return
    _flush(session)
    driver.execute_many(_connection(session), _SAVE_TOTAL,
                        [{"d": dataset, "c": name, "t": cap_total_to_dict(total)} for name, total in totals.items()])
    session.info.setdefault("saved_totals", {}).update({(dataset, name): t for name, t in totals.items()})


def set_cap(session: Session, cap: Cap, actor: str) -> Cap:
    """Add or replace a cap; its running total is computed once from the history, and a cap at a
    delta is given its filter (cap_decisions.choose_filter) from the releases it already holds.
    Returns the cap as set."""
    # from the accounting rows of the releases that read the cap's subset (the others cost 0
    # on it, Tan Prop 3.3), not by decoding the history
    index = caps_index(session, cap.dataset, [cap])
    if cap.delta is not None and cap.rho is None:  # the accountants' running state, from the same rows
        state = state_from_index(cap, index)
        cap = replace(cap, filter=choose_filter(cap, state))
    body = cap_to_dict(cap)
    session.merge(CapRow(**{"filter": None, **body}))
    bump_config(session)
    save_totals(session, cap.dataset, {cap.name: total_from_index(cap, index)})
    if cap.delta is not None and cap.rho is None:
        save_accountant_states(session, cap.dataset, {cap.name: state})
    append_event(session, kind="cap.set", subject=f"{cap.dataset}/{cap.name}", actor=actor, payload={"cap": body})
    return cap


def caps_index(session: Session, dataset: str, caps: Sequence[Cap]):
    """The LedgerIndex of the charged releases that read some variable of the caps' subsets, from
    the accounting rows (columns.index_for with `touching`): every cap's total
    (`budget.total_from_index`) and accountant state (`state_from_index`) over it are those of
    the whole history (the other releases cost 0 on a cap's subset, Tan Prop 3.3). Pending
    changes of this session are flushed first (a cancellation just written is read)."""
    _flush(session)
    families = {f.id: f for f in _families(session, dataset)}
    variables = dataset_variables(session, [dataset])[dataset]
    return columns.index_for(session, variables, dataset, families, touching=set().union(*(cap.subset for cap in caps)))


def _families(session: Session, dataset: str) -> list[Family]:
    return [family_from_dict(_family_dict(row)) for row in session.exec(select(FamilyRow).where(
        FamilyRow.dataset == dataset))]


def amend_dataset(session: Session, dataset: Dataset, actor: str, kind: str, change: dict) -> None:
    """Write a recorded dataset's new state (amend.Amendment) and its audit event, which
    carries that whole state, as `dataset.added` does, and what changed."""
    body = dataset_to_dict(dataset)
    bump_config(session)
    row = session.get(DatasetRow, dataset.name)
    row.description = dataset.description
    row.groups = body["groups"]
    row.self_approval = dataset.self_approval
    session.add(row)
    rows = {r.name: r for r in session.exec(select(VariableRow).where(VariableRow.dataset == dataset.name))}
    before = tuple(sorted(rows, key=lambda name: rows[name].position))
    for name in rows.keys() - set(dataset.variable_names):
        session.delete(rows[name])
    session.flush()
    for position, variable in enumerate(dataset.variables):
        categories = None if variable.categories is None else list(variable.categories)
        row = rows.get(variable.name)
        if row is None:
            row = VariableRow(dataset=dataset.name, name=variable.name, position=position,
                              classification=variable.classification)
        row.classification, row.description, row.position = variable.classification, variable.description, position
        row.categories = categories
        session.add(row)
    if before != tuple(dataset.variable_names):  # the accounting bitsets are over variable positions
        session.flush()
        columns.rebuild_dataset(session, dataset.name, dataset.variable_names)
    append_event(session, kind=kind, subject=dataset.name, actor=actor, payload={"dataset": body, "change": change})


def remove_cap(session: Session, dataset: str, name: str, actor: str, reason: str | None = None) -> None:
    """Remove a cap and its running total; the audit chain keeps every value it had."""
    row = session.get(CapRow, (dataset, name))
    if row is None:
        raise KeyError(name)
    was = _cap_dict(row)
    session.delete(row)
    total = session.get(CapTotalRow, (dataset, name))
    if total is not None:
        session.delete(total)
    bump_config(session)
    session.info.get("saved_totals", {}).pop((dataset, name), None)
    drop_accountant_states(session, dataset, [name])  # a cap set again starts afresh
    append_event(session, kind="cap.removed", subject=f"{dataset}/{name}", actor=actor,
                 payload={"cap": None, "was": was, "reason": reason})


def set_status(session: Session, release: Release, actor: str, kind: str, decisions: Sequence[dict] = (),
               reason: str | None = None) -> None:
    """Write a lifecycle change (the release already carries its new status); a retraction
    or cancellation carries its reason in the event, an enforcing step its budget decisions."""
    row = session.get(ReleaseRow, release.id)
    body = release_to_dict(release)
    for name in LIFECYCLE_COLUMNS:
        setattr(row, name, body[name])
    session.add(row)
    payload = {"release": body} if reason is None else {"release": body, "reason": reason}
    if decisions:
        payload["budget_decisions"] = list(decisions)
    append_event(session, kind=kind, subject=release.id, actor=actor, payload=payload)
    columns.set_status(_connection(session), release.id, release.status, release.published_at)  #


def accountant_states(session: Session, dataset: str, names: Iterable[str]) -> dict[str, dict]:
    """The stored running accountant states of these caps."""
    names = list(names)
    if not names:
        return {}
    # written earlier in this transaction (None: dropped), else this process's cache while the
    # head is the one it was made at (as the running totals: cap_totals), else the table
    saved = session.info.get("saved_states", {})
    cached = _current_cache(session, _STATES_CACHE)
    found: dict[str, dict] = {}
    missing = []
    for name in names:
        key = (dataset, name)
        if key in saved:
            if saved[key] is not None:
                found[name] = saved[key]
        elif key in cached:
            found[name] = cached[key]
        else:
            missing.append(name)
    if missing:
        rows = _connection(session).execute(_READ_STATES, {"dataset": dataset, "names": missing})
        for cap, state in rows:
            found[cap] = cached[(dataset, cap)] = state
    return found


def save_accountant_states(session: Session, dataset: str, states: Mapping[str, dict]) -> None:
    if not states:
        return
    _flush(session)
    # one statement for every cap (an executemany), which inserts a cap with no state yet
    driver.execute_many(_connection(session), _SAVE_STATE,
                        [{"d": dataset, "c": name, "s": state} for name, state in states.items()])
    session.info.setdefault("saved_states", {}).update({(dataset, name): state for name, state in states.items()})


def drop_accountant_states(session: Session, dataset: str, names: Iterable[str]) -> None:
    """Forget running states (a cancellation): they are recomputed from the history when next needed."""
    names = list(names)
    if names:
        table = CapAccountantRow.__table__
        _connection(session).execute(table.delete().where(table.c.dataset == dataset, table.c.cap.in_(names)))
        session.info.setdefault("saved_states", {}).update({(dataset, name): None for name in names})


def lifecycle_events(session: Session, kinds: Sequence[str],
                     subjects: Sequence[str] | None = None) -> list[tuple[int, str, str, str, str, str]]:
    """(seq, kind, subject, at, actor, payload) of the events of these kinds (about these
    subjects, when given: read through the (kind, subject) index), in chain order."""
    query = (select(_EVENTS.c.seq, _EVENTS.c.kind, _EVENTS.c.subject, _EVENTS.c.at, _EVENTS.c.actor,
                    _EVENTS.c.payload).where(_EVENTS.c.kind.in_(list(kinds))).order_by(_EVENTS.c.seq))
    if subjects is not None:
        query = query.where(_EVENTS.c.subject.in_(list(subjects)))
    return [tuple(row) for row in _connection(session).execute(query)]


# Roles as this process last read them, per ledger URL, valid while the audit head is the
# one they were read at (every grant and revocation appends an event: set_role).
_ROLES_CACHE: dict[str, tuple[str, dict[str, frozenset[str]]]] = {}
_READ_ROLES = select(RoleRow.__table__.c.person, RoleRow.__table__.c.role)


def roles(session: Session) -> dict[str, frozenset[str]]:
    """Every person holding a role, and their roles (read once per transaction; a process
    that wrote the previous transaction itself reuses what it read, while the head is unmoved)."""
    found = session.info.get("roles")
    if found is not None:
        return found
    url = _ledger_key(session)
    head = session.info.get("head_at_start")
    cached = _ROLES_CACHE.get(url)
    if head is not None and "roles_changed" not in session.info and cached is not None and cached[0] == head:
        found = cached[1]
    else:
        held: dict[str, set[str]] = {}
        for person, role in _connection(session).execute(_READ_ROLES):
            held.setdefault(person, set()).add(role)
        found = {person: frozenset(names) for person, names in held.items()}
        if head is not None and "roles_changed" not in session.info:
            _ROLES_CACHE[url] = (head, found)
    session.info["roles"] = found
    return found


def set_role(session: Session, person: str, role: str, granted: bool, actor: str) -> None:
    """Grant or revoke one role, with its audit event."""
    connection = _connection(session)
    if connection.dialect.name == "postgresql":
        _grant_login(connection, person, role, granted)
    session.info.pop("roles", None)
    session.info["roles_changed"] = True  # read from the table until this transaction ends
    row = session.get(RoleRow, (person, role))
    if granted and row is None:
        session.add(RoleRow(person=person, role=role))
    elif not granted and row is not None:
        session.delete(row)
    append_event(session, kind="role.granted" if granted else "role.revoked", subject=person, actor=actor,
                 payload={"role": {"person": person, "role": role, "granted": granted}})


def _grant_login(connection: Connection, person: str, role: str, granted: bool) -> None:
    """On PostgreSQL a person is a database login: granting a role makes it a member of the group
    role `ledger_<role>` (enforced.py), revoking one ends that. A name with no login is a name the
    tool alone knows: refused under a person's own login (database roles mode: the DBA makes each
    person's login first), kept by the tool on a ledger run by its owner's single login."""
    from sqlalchemy.exc import DBAPIError

    if not enforced.login_exists(connection, person):
        if enforced.database_roles_mode(connection):
            raise fail("command line", "PERSON", f"{person!r} has no database login on this server: people act "
                                                 "through their own logins, which the database administrator makes "
                                                 f"(CREATE ROLE \"{person}\" LOGIN) before roles are granted")
        return
    try:
        with connection.begin_nested():
            enforced.grant(connection, person, role, granted)
    except DBAPIError as exc:
        raise fail("command line", "ROLE", f"the database refused to {'grant' if granted else 'revoke'} "
                                           f"ledger_{role} {'to' if granted else 'from'} {person!r}: "
                                           f"{str(exc.orig).splitlines()[0]} (the granting login needs the "
                                           f"ledger_{role} role WITH ADMIN OPTION, or CREATEROLE)") from None


# --------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Verification:
    ok: bool
    events: int
    head: str
    problems: tuple[str, ...]  # the first names the first bad event
    full: bool = True  # the whole chain and every row recomputed (else: since a verified head)
    derived: dict | None = None  # a passing one: the derived rows' digest (derived.py), kept with the head


VERIFY_CHUNK = 5_000  # events, and release rows, read and checked at a time by `verify`

# The release columns with each JSON column read as its stored text (no JSON type processor:
# `release_row_dicts` parses each distinct text of a chunk once), under the column's own name.
_JSON_COLUMNS = ("reads", "mechanism_params", "guarantees", "derived_from", "pufferfish")
_RELEASE_TEXT_COLUMNS = tuple(cast(column, Text).label(column.name) if column.name in _JSON_COLUMNS else column
                              for column in _RELEASES.c)
_RELEASE_DICT_ORDER = ("id", "dataset", "title", "reads", "mechanism_name", "mechanism_params", "guarantees",
                       "derived_from", "family", "status", "recorded_by", "recorded_at", "approved_by", "approved_at",
                       "published_at", "pufferfish", "output_digest", "output", "part")  # release_row_dict's keys


def release_row_dicts(rows: Sequence) -> list[dict]:
    """`release_row_dict` of each row of `_RELEASE_TEXT_COLUMNS` (the JSON columns as their
    stored text), the same dicts: each distinct JSON text of the chunk is parsed once (a JSON
    column's processor parsed every cell, through three layers of calls: five cells a release,
    and most of them repeat, the mechanisms' parameters above all). Rows with the same text
    share its parsed value: the dicts are read, never changed. Each text is parsed alone, so
    a cell that is not JSON fails as the processor failed on it (joining the texts into one
    array to parse them in one call was slower, and could read two bad cells as good ones)."""
    names = [column.name for column in _RELEASE_TEXT_COLUMNS]
    at = {name: names.index(name) for name in names}
    json_at = [at[name] for name in _JSON_COLUMNS]
    loads = json.loads
    parsed = {text: loads(text) for text in {row[k] for row in rows for k in json_at} if type(text) is str}
    parsed[None] = None  # (NULL stays None, as the processor gave it)
    fields = itemgetter(*(at[name] for name in _RELEASE_DICT_ORDER))
    found = []
    for (id_, dataset, title, reads, mechanism_name, params, guarantees, derived_from, family, status, recorded_by,
         recorded_at, approved_by, approved_at, published_at, pufferfish, output_digest, output, part) in map(fields, rows):
        body = {
            "id": id_, "dataset": dataset, "title": title, "reads": parsed[reads],
            "mechanism": {"name": mechanism_name, "params": parsed[params]}, "guarantees": parsed[guarantees],
            "derived_from": parsed[derived_from], "family": family, "status": status, "recorded_by": recorded_by,
            "recorded_at": recorded_at, "approved_by": approved_by, "approved_at": approved_at,
            "published_at": published_at, "pufferfish": parsed[pufferfish], "output_digest": output_digest,
            "output": output}
        if part is not None:  # (as codec.release_to_dict writes it)
            body["part"] = part
        found.append(body)
    return found


class ChainWalk:
    """The audit chain walked in seq order from just after event `start` (whose hash is
    `previous`), `batch` events at a time (a keyset query per batch: nothing holds the whole
    chain, on SQLite or PostgreSQL). Iterating yields (row, canonical) after checking the
    sequence and the previous-hash link; `canonical` says the row hashes to its stored hash
    as stored. Problems found go to `problems`; `count` and `head` follow the walk.
    Shared by `verify` and `verified_head.verify_since`."""

    def __init__(self, connection: Connection, problems: list[str], start: int = 0,
                 previous: str = GENESIS_HASH, batch: int | None = None):
        self.connection, self.problems, self.batch = connection, problems, batch or VERIFY_CHUNK
        self.start, self.count, self.head = start, start, previous

    def __iter__(self):
        after = self.start
        while True:
            rows = self.connection.execute(
                select(_EVENTS).where(_EVENTS.c.seq > after).order_by(_EVENTS.c.seq).limit(self.batch)).all()
            for row in rows:
                self.count += 1
                if row.seq != self.count:
                    self.problems.append(f"event {row.seq}: sequence gap (expected event {self.count})")
                    self.count = row.seq
                if row.prev_hash != self.head:
                    self.problems.append(f"event {row.seq} ({row.kind} {row.subject}): previous-hash link broken")
                self.head = row.hash
                # The stored payload is canonical JSON, so the hash is taken over it as it is.
                canonical = event_hash(row.prev_hash, row.seq, row.at, row.actor, row.kind, row.subject,
                                       row.payload) == row.hash
                yield row, canonical
            if len(rows) < self.batch:
                return
            after = rows[-1].seq


class _LatestReleaseEvents:
    """Release id -> the seq of its latest event that carries the release's state, and
    whether that event's payload text may be compared as it is (canonical, `{"release":`
    first). Kept in a temporary SQLite file, not in memory: a million releases are a
    million keys, and `verify` must stay within bounded memory at any size."""

    def __init__(self):
        import sqlite3
        import tempfile

        self.directory = tempfile.TemporaryDirectory(prefix="ledger-verify-")
        self.db = sqlite3.connect(Path(self.directory.name) / "latest.db")
        self.db.execute("PRAGMA journal_mode = OFF")
        self.db.execute("PRAGMA synchronous = OFF")
        self.db.execute("CREATE TABLE latest (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, text INTEGER NOT NULL, "
                        "seen INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID")
        self.pending: list[tuple[str, int, int]] = []

    def note(self, release_id: str, seq: int, as_text: bool) -> None:
        self.pending.append((release_id, seq, int(as_text)))
        if len(self.pending) >= VERIFY_CHUNK:
            self.flush()

    def flush(self) -> None:
        # events come in seq order: the last one written for an id is its latest
        self.db.executemany("INSERT INTO latest (id, seq, text) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE "
                            "SET seq = excluded.seq, text = excluded.text", self.pending)
        self.pending = []

    def lookup(self, ids: Sequence[str]) -> dict[str, tuple[int, bool]]:
        """The latest events of these releases (marked seen: they have a row)."""
        found = {}
        for at in range(0, len(ids), 500):
            part = list(ids[at:at + 500])
            marks = ",".join("?" * len(part))
            found.update((rid, (seq, bool(text))) for rid, seq, text in self.db.execute(
                f"SELECT id, seq, text FROM latest WHERE id IN ({marks})", part))
            self.db.execute(f"UPDATE latest SET seen = 1 WHERE id IN ({marks})", part)
        return found

    def unseen(self) -> Iterator[tuple[str, int]]:
        """The releases with an event and no row."""
        yield from self.db.execute("SELECT id, seq FROM latest WHERE seen = 0 ORDER BY seq")

    def close(self) -> None:
        self.db.close()
        self.directory.cleanup()


class StateEvents:
    """What the latest audit event of each dataset, family, cap and role grant says its row
    holds, noted event by event along the chain; `problems` compares the rows with it. The
    full verification notes every event (and a row no event names is reported); the
    incremental one (`verified_head.verify_since`) notes the events since its checkpoint and
    compares only the rows they name. A cap's latest event may remove it (`cap.removed`,
    payload {"cap": None}): its row must then be gone."""

    def __init__(self) -> None:
        # key -> (seq of its latest event, the state it recorded (None: removed), its canonical JSON if known)
        self.datasets: dict[str, tuple[int, dict | None, str | None]] = {}
        self.families: dict[str, tuple[int, dict | None, str | None]] = {}
        self.caps: dict[str, tuple[int, dict | None, str | None]] = {}
        self.roles: dict[tuple[str, str], tuple[int, bool]] = {}  # (person, role) -> (seq, held)

    def note(self, row, payload: dict) -> None:
        if "dataset" in payload:
            self.datasets[row.subject] = (row.seq, _normal(payload["dataset"], dataset_from_dict, dataset_to_dict),
                                          None)
        if "family" in payload:
            self.families[row.subject] = (row.seq, payload["family"], None)
        if "cap" in payload:
            self.caps[row.subject] = (row.seq, payload["cap"], None)
        if row.kind.startswith("role.") and isinstance(payload.get("role"), dict):
            grant = payload["role"]
            self.roles[(str(grant.get("person")), str(grant.get("role")))] = (row.seq, bool(grant.get("granted")))

    def problems(self, session: Session, only_named: bool = False) -> list[str]:
        """Every row against its latest event's state; `only_named`: only the rows the noted
        events name (an incremental verification: the others were verified before)."""
        problems = []
        if self.datasets or not only_named:
            datasets = _datasets(session, list(self.datasets)) if only_named else _datasets(session)
            problems.extend(_compare("dataset", self.datasets, {d.name: dataset_to_dict(d) for d in datasets}))
        if self.families or not only_named:
            query = select(FamilyRow)
            if only_named:
                query = query.where(FamilyRow.id.in_(list(self.families)))
            problems.extend(_compare("family", self.families,
                                     {f.id: _family_dict(f) for f in session.exec(query)}))
        caps = {f"{c.dataset}/{c.name}": _cap_dict(c) for c in session.exec(select(CapRow))}
        removed = {key: seq for key, (seq, body, _) in self.caps.items() if body is None}
        for key, seq in removed.items():
            if caps.pop(key, None) is not None:
                problems.append(f"event {seq} (cap {key}): the cap was removed by this event, but its row remains")
        if only_named:
            caps = {key: body for key, body in caps.items() if key in self.caps}
        problems.extend(_compare("cap", {k: v for k, v in self.caps.items() if k not in removed}, caps))
        held = {(r.person, r.role) for r in session.exec(select(RoleRow))}
        for (person, role), (seq, granted) in self.roles.items():
            if granted != ((person, role) in held):
                problems.append(f"event {seq} (role {person}/{role}): the roles table was changed outside the "
                                f"ledger ({'granted' if granted else 'revoked'} by this event)")
        if not only_named:
            for person, role in held - {key for key, (_, granted) in self.roles.items() if granted}:
                if (person, role) not in self.roles:
                    problems.append(f"event ? (role {person}/{role}): a role row has no audit event")
        return problems


def verify(session: Session) -> Verification:
    """Recompute the hash chain, and compare every release, dataset and family row
    with the state its latest audit event recorded; recompute every accounting row and
    every cap's running total from the releases.

    Streams: the chain is walked VERIFY_CHUNK events at a time, and the
    release rows are read, compared, decoded and charged VERIFY_CHUNK at a time (in seq
    order), the running totals summed chunk by chunk (`_TotalsCheck`); what must be
    remembered across the whole chain for each release (its latest event) is kept in a
    temporary SQLite file. Memory does not grow with the number of releases, except for
    the members of families (a family is charged once, over all its members: docs/explanation/model.md#families)."""
    problems: list[str] = []
    states = StateEvents()
    connection = _connection(session)
    latest = _LatestReleaseEvents()
    pause = paused_gc()  # a chunk's rows are freed by reference counting; cycle searches cost a third of the time
    pause.__enter__()
    try:
        walk = ChainWalk(connection, problems)
        for row, canonical in walk:
            if canonical and row.kind.startswith("release.") and row.payload.startswith(_RELEASE_PAYLOAD):
                # {"release": body}: the text holds the body's canonical JSON; it is parsed only if
                # the row differs from it (and a wrong cut can only cause that re-check)
                latest.note(row.subject, row.seq, True)
                continue
            try:
                payload = json.loads(row.payload)
            except ValueError:
                problems.append(f"event {row.seq} ({row.kind} {row.subject}): payload is not valid JSON")
                payload = {}
            if not canonical and chain_hash(row.prev_hash, {"seq": row.seq, "at": row.at, "actor": row.actor,
                                                            "kind": row.kind, "subject": row.subject,
                                                            "payload": payload}) != row.hash:
                problems.append(f"event {row.seq} ({row.kind} {row.subject}): content does not match its hash")
            if "release" in payload:
                latest.note(row.subject, row.seq, False)
            states.note(row, payload)
        latest.flush()
        count = walk.count

        config = configuration(session)
        totals = _TotalsCheck(session, config)
        accounting = columns.Check(session, {d.name: d.variable_names for d in config.datasets.values()})
        for rows in _release_chunks(connection):
            release_rows = {body["id"]: body for body in release_row_dicts(rows)}
            seqs = {r.id: r.seq for r in rows}
            expected = _expected_releases(connection, latest.lookup(list(release_rows)))
            problems.extend(_compare("release", expected, release_rows, _normal_release, ))
            decoded = {rid: release_from_dict(body) for rid, body in release_rows.items()}  # once, for both
            totals.add(decoded.values())
            accounting.add([(seqs[rid], release) for rid, release in decoded.items()],
                           trusted=lambda rid: rid in expected and canonical_json(release_rows[rid]) == (
                               expected[rid][2] or canonical_json(expected[rid][1])))
        for rid, seq in latest.unseen():
            problems.append(f"event {seq} (release {rid}): the release row is missing")
    finally:
        latest.close()
        pause.__exit__(None, None, None)
    problems.extend(states.problems(session))
    problems.sort(key=_event_number)
    problems.extend(totals.problems())
    problems.extend(accounting.problems())
    problems.extend(sealed.check(connection, {d.name: d.variable_names for d in config.datasets.values()}))
    problems.extend(_check_count(session, count))
    digest = None if problems else derived.digest(connection, count)
    return Verification(ok=not problems, events=count, head=walk.head, problems=tuple(problems), derived=digest)


def _release_chunks(connection: Connection, batch: int | None = None) -> Iterator[list]:
    """The release rows in (seq, id) order, `batch` at a time (keyset pagination: a seq
    changed behind the ledger's back may repeat, the id never does), the JSON columns as
    their text (`release_row_dicts` reads them)."""
    from sqlalchemy import tuple_

    batch = batch or VERIFY_CHUNK
    after = None
    while True:
        query = select(*_RELEASE_TEXT_COLUMNS).order_by(_RELEASES.c.seq, _RELEASES.c.id).limit(batch)
        if after is not None:
            query = query.where(tuple_(_RELEASES.c.seq, _RELEASES.c.id) > tuple_(*after))
        rows = connection.execute(query).all()
        if rows:
            yield rows
        if len(rows) < batch:
            return
        after = (rows[-1].seq, rows[-1].id)


def _expected_releases(connection: Connection, latest: Mapping[str, tuple[int, bool]]
                       ) -> dict[str, tuple[int, dict | None, str | None]]:
    """Release id -> (seq, body, body JSON) of its latest event, read by seq (as `_compare` takes them)."""
    by_seq = {seq: (rid, as_text) for rid, (seq, as_text) in latest.items()}
    found: dict[str, tuple[int, dict | None, str | None]] = {}
    seqs = sorted(by_seq)
    for at in range(0, len(seqs), 500):
        for seq, payload in connection.execute(
                select(_EVENTS.c.seq, _EVENTS.c.payload).where(_EVENTS.c.seq.in_(seqs[at:at + 500]))):
            rid, as_text = by_seq[seq]
            if as_text:
                found[rid] = (seq, None, payload[len(_RELEASE_PAYLOAD):-1])
            else:
                try:
                    found[rid] = (seq, json.loads(payload)["release"], None)
                except (ValueError, KeyError, TypeError):
                    found[rid] = (seq, {}, None)
    return found


class _TotalsCheck:
    """Every cap's running total recomputed from the releases, a chunk at a time, and
    compared with the stored one (`budget.total_from_index` per chunk; the chunks' totals
    composed exactly: standalone spends add, choices add their counts, the largest drivers
    of each chunk compete again; a family is charged once over all its members, docs/explanation/model.md#families)."""

    def __init__(self, session: Session, config: "Configuration"):
        from ..accounting.cap_states import state_from_history, state_is_current

        self.session, self.config = session, config
        self.parts: dict[str, dict[str, list]] = {
            dataset: {cap.name: [ZERO_SPEND, {}, []] for cap in caps} for dataset, caps in config.caps.items()}
        self.members: dict[str, dict[str, list[Release]]] = {dataset: {} for dataset in config.caps}
        # the running accountant states a decision would read, recomputed chunk by chunk
        # (cap_states.state_apply from the empty history; family members last, over all of them)
        self.families = {dataset: {f.id: f for f in config.families.values() if f.dataset == dataset}
                         for dataset in config.caps}
        self.stored_states: dict[str, dict[str, dict]] = {}
        self.states: dict[str, dict[str, dict]] = {}
        for dataset, caps in config.caps.items():
            table = CapAccountantRow.__table__  # read from the table itself, never a process's cache
            stored = dict(_connection(session).execute(select(table.c.cap, table.c.state).where(
                table.c.dataset == dataset)).all())
            by_name = {cap.name: cap for cap in caps}
            self.stored_states[dataset] = {name: state for name, state in stored.items()
                                           if name in by_name and state is not None
                                           and state_is_current(by_name[name], state)}
            self.states[dataset] = {cap.name: state_from_history(cap, (), self.families[dataset])
                                    for cap in caps if cap.name in self.stored_states[dataset]}

    def add(self, releases: Iterable[Release]) -> None:
        by_dataset: dict[str, list[Release]] = {}
        for release in releases:
            if release.dataset in self.parts and release.status in CHARGED_STATUSES:
                if release.family is not None:
                    self.members[release.dataset].setdefault(release.family, []).append(release)
                else:
                    by_dataset.setdefault(release.dataset, []).append(release)
        for dataset, counted in by_dataset.items():
            self._apply_states(dataset, counted)
            variables = self.config.datasets[dataset].variable_names
            index = LedgerIndex(variables, counted, ())
            for cap in self.config.caps[dataset]:
                part = total_from_index(cap, index)
                kept = self.parts[dataset][cap.name]
                kept[0] = kept[0] + part.standalone
                for options, number in part.choices:
                    kept[1][options] = kept[1].get(options, 0) + number
                kept[2] = list(top_drivers(cap, kept[2] + list(part.drivers)))

    def _apply_states(self, dataset: str, releases: Sequence[Release]) -> None:
        from ..accounting.cap_states import state_apply

        for cap in self.config.caps[dataset]:
            if cap.name in self.states[dataset]:
                self.states[dataset][cap.name] = state_apply(self.states[dataset][cap.name], cap, releases,
                                                             self.families[dataset], {})

    def _state_problems(self, dataset: str) -> list[str]:
        from ..accounting.cap_states import state_differences

        self._apply_states(dataset, [m for group in self.members[dataset].values() for m in group])
        problems = []
        for name, expected in self.states[dataset].items():
            differences = state_differences(self.stored_states[dataset][name], expected)
            if differences:
                problems.append(f"cap {dataset}/{name}: the running accountant state differs from the state "
                                f"recomputed from the releases: {'; '.join(differences)}")
        return problems

    def problems(self) -> list[str]:
        problems = []
        for dataset, dataset_caps in self.config.caps.items():
            families = {f.id: f for f in self.config.families.values() if f.dataset == dataset}
            stored = cap_totals(self.session, dataset)
            for cap in dataset_caps:
                standalone, choices, drivers = self.parts[dataset][cap.name]
                found_families = {}
                drivers = list(drivers)
                for fid, group in self.members[dataset].items():
                    options = family_options(families[fid], group, cap.subset)
                    if options != (ZERO_SPEND,):
                        found_families[fid] = options
                        drivers.append((FAMILY_DRIVER + fid, options_measure(cap, options)))
                expected = total_from_parts(cap, standalone, choices, found_families, drivers)
                found = stored.get(cap.name)
                if found is None:
                    problems.append(f"cap {dataset}/{cap.name}: the running total is missing")
                elif cap_total_to_dict(found) != cap_total_to_dict(expected):
                    differences = total_differences(found, expected) or ["its stored form"]
                    problems.append(f"cap {dataset}/{cap.name}: the running total differs from the total "
                                    f"recomputed from the releases: {'; '.join(differences)}")
            problems.extend(self._state_problems(dataset))
        return problems


def _check_count(session: Session, count: int) -> list[str]:
    """A chain with no event, or with fewer than the ledger recorded writing, is not intact:
    rows were deleted (a chain cut at its end still links)."""
    row = session.get(MetaRow, EVENTS_WRITTEN)
    written = int(row.value) if row is not None and row.value.isdigit() else None
    if written is not None and count < written:
        return [f"event {count + 1}: the ledger wrote {written} events, only {count} are left "
                f"(events {count + 1} to {written} were deleted)"]
    if count == 0:
        return ["event 1: the ledger holds no audit event at all (an empty or emptied ledger)"]
    return []


def _normal_release(body: dict) -> dict:
    return _normal(body, release_from_dict, release_to_dict)


def _normal(body: dict, read, write) -> dict:
    """A record as the current format writes it (fields added since are given their defaults)."""
    try:
        return write(read(body))
    except (KeyError, TypeError, ValueError):
        return body  # unreadable: compared as it is, and reported


def _compare(kind: str, expected: Mapping[str, tuple[int, dict | None, str | None]], actual: dict[str, dict],
             normal=None) -> list[str]:
    """Every row equal to the state its latest event recorded (`normal` brings a record
    written by an earlier version of the format to the current one before comparing).
    `expected` maps a key to (event seq, body, body's canonical JSON): either may be None,
    and the body is then parsed from the JSON only when the row differs from it."""
    problems = []
    for key, (seq, body, body_json) in expected.items():
        row = actual.get(key)
        if row is None:
            problems.append(f"event {seq} ({kind} {key}): the {kind} row is missing")
            continue
        if body_json is None:
            body_json = canonical_json(body)
        if canonical_json(row) == body_json:
            continue
        if body is None:  # a release event's payload, as stored: parse it whole
            try:
                body = json.loads(_RELEASE_PAYLOAD + body_json + "}")["release"]
            except (ValueError, KeyError, TypeError):
                body = {}
        if normal is not None:
            row, body = normal(row), normal(body)
        if canonical_json(row) != canonical_json(body):
            fields = sorted(k for k in body if canonical_json(body.get(k)) != canonical_json(row.get(k)))
            problems.append(f"event {seq} ({kind} {key}): the {kind} row was changed outside the ledger "
                            f"(fields: {', '.join(fields)})")
    for key in actual.keys() - expected.keys():
        problems.append(f"event ? ({kind} {key}): a {kind} row has no audit event")
    return problems


def _event_number(problem: str) -> float:
    token = problem.split()[1]
    return float(token.rstrip(":")) if token.rstrip(":").isdigit() else float("inf")



# --------------------------------------------------------------------------
# The running totals' stamp, and the chain head
# --------------------------------------------------------------------------

# Every write through the ledger keeps the running totals equal to the totals recomputed
# from the releases (budget.apply, or total_from_history for a new or changed cap) and, in
# the same transaction, stamps them with the audit head it leaves ("seq:hash", a MetaRow).
# A command that decides (check, record, approve, publish) compares that stamp with the
# head it reads: two primary-key reads, whatever the length of the history. A stamp
# behind the head means events were appended by something that did not keep the totals
# (raw SQL, a restored backup of one table): the totals may disagree with the releases,
# and the command refuses. A change that appends nothing (a row edited in place) leaves
# the head where it was: that is what `audit verify` (which recomputes every total) finds.
TOTALS_STAMP = "totals_head"
_META = MetaRow.__table__
_READ_STAMP = select(_META.c.value).where(_META.c.key == TOTALS_STAMP)
_WRITE_STAMP = update(_META).where(_META.c.key == TOTALS_STAMP).values(value=bindparam("stamp"))


def stamp_totals(session: Session) -> None:
    """Stamp the running totals with the head this transaction leaves (called by write_session)."""
    head = session.info.get("audit_head")
    if head is None:
        return
    set_meta(session, {TOTALS_STAMP: f"{head[0]}:{head[1]}"})


def set_meta(session: Session, values: Mapping[str, str]) -> None:
    """Set ledger_meta values: one statement for them all (an executemany), which inserts a
    key that has no row yet (a ledger's first writes)."""
    if not values:
        return
    _flush(session)
    driver.execute_many(_connection(session), _SET_META, [{"k": key, "v": value} for key, value in values.items()])


def stale_totals(session: Session) -> str | None:
    """Why the running totals cannot be trusted by a decision, or None when their stamp is
    the chain head read at the start of this transaction."""
    configuration(session)  # reads the head (once per transaction)
    # events this transaction appended itself (a first writer's roles, say) come after the stamp
    head = session.info.get("head_before_writes", session.info.get("audit_head"))
    # read with the head, in the same statement (a write stamps only when it commits)
    stamp = session.info["totals_stamp"] if "totals_stamp" in session.info else \
        _connection(session).execute(_READ_STAMP).scalar()
    if stamp is None or head is None:
        return None  # a ledger written before stamps existed: `audit verify` recomputes its totals
    seq, _, digest = stamp.partition(":")
    if (seq, digest) == (str(head[0]), head[1]):
        return None
    return (f"the running cap totals were computed at audit event {seq} but the chain head is event "
            f"{head[0]}: the ledger was changed by something other than privacy-ledger, so the totals "
            "may disagree with the releases they came from. Nothing was decided; run "
            "`privacy-ledger audit verify` to find the change")


@dataclass(frozen=True)
class HeadRow:
    seq: int
    hash: str
    at: str
    events: int


def last_event(session: Session) -> tuple[int, str]:
    """(seq, hash) of the chain's last event ((0, GENESIS_HASH) when there is none): every change
    to a ledger appends an event, so two reads that find the same last event read the same ledger
    (what a report written by several processes checks, each in its own snapshot)."""
    last = _connection(session).execute(_LAST_EVENT).first()
    return (0, GENESIS_HASH) if last is None else (int(last.seq), str(last.hash))


def chain_head(session: Session) -> HeadRow:
    """The last event of the chain and how many events there are."""
    connection = _connection(session)
    last = connection.execute(select(_EVENTS.c.seq, _EVENTS.c.hash, _EVENTS.c.at)
                              .order_by(_EVENTS.c.seq.desc()).limit(1)).first()
    if last is None:
        return HeadRow(0, GENESIS_HASH, "", 0)
    from sqlalchemy import func

    count = connection.execute(select(func.count()).select_from(_EVENTS)).scalar_one()
    return HeadRow(last.seq, last.hash, last.at, count)


def event_at(session: Session, seq: int) -> tuple[int, str] | None:
    row = _connection(session).execute(select(_EVENTS.c.seq, _EVENTS.c.hash).where(_EVENTS.c.seq == seq)).first()
    return None if row is None else (row.seq, row.hash)


# --------------------------------------------------------------------------
# A dataset's declared privacy unit: kept in the audit chain itself
# --------------------------------------------------------------------------

PRIVACY_UNIT_EVENT = "dataset.privacy-unit"


def set_privacy_unit(session: Session, dataset: str, unit: Mapping[str, str], actor: str) -> None:
    """Declare whose data the dataset's guarantees protect ({privacy_unit, privacy_unit_details});
    an event of the chain, so it is as tamper-evident as the rest and the latest one holds."""
    append_event(session, kind=PRIVACY_UNIT_EVENT, subject=dataset, actor=actor,
                 payload={"privacy_unit": dict(unit)})


def privacy_unit(session: Session, dataset: str) -> dict[str, str]:
    """The latest declared privacy unit of `dataset` ({} when none was declared)."""
    row = _connection(session).execute(
        select(_EVENTS.c.payload).where(_EVENTS.c.kind == PRIVACY_UNIT_EVENT, _EVENTS.c.subject == dataset)
        .order_by(_EVENTS.c.seq.desc()).limit(1)).first()
    return {} if row is None else dict(json.loads(row[0]).get("privacy_unit", {}))
