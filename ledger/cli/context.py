"""The command line's shared context: which ledger a command works on (`--db`), how it is
opened, the light read most commands start with, and the date options.

`cli.py` defines the application and its commands; the other `cli_*` modules add
commands to it. All of them take their ledger from here, never from another CLI
module's private helpers, so the interface layer has one way in to the store.

Invariants: opening never creates a ledger except for the commands that say so
(`create=True`); a read never takes the write lock. Imports stay light (the store is
imported when a command first opens the ledger): `--help` and `--version` load no
database library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import failures
from ..core.errors import fail
from ..core.lazy import lazy_module

if TYPE_CHECKING:
    from ..input.loader import LedgerSnapshot

from ..operations.moments import moment_text, parse_date  # noqa: F401 (the date options' rule: the CLI's from here)

configuration = lazy_module("ledger.store.configuration")
engines = lazy_module("ledger.store.engines")
files = lazy_module("ledger.store.files")
schema_migrations = lazy_module("ledger.store.schema_migrations")
sessions = lazy_module("ledger.store.sessions")
table_models = lazy_module("ledger.store.table_models")

DEFAULT_URL = "sqlite:///ledger.db"  # engines.DEFAULT_URL, without importing the store


class State:
    """The options of the whole command line (set by `cli.main_options`)."""

    url: str = DEFAULT_URL


state = State()


def open_engine(create: bool = False):
    """The ledger's engine. Only `init`, `dataset add` and `demo` create a new SQLite file
    or a schema: any other command on a missing file, or on a database without the
    ledger's tables, is bad input and writes nothing. A ledger whose schema is current is
    opened without any lock (a reader never waits for a writer)."""
    path = files.sqlite_path(state.url)
    if path is not None:
        if not create and not path.exists():
            raise fail("--db", "url", f"no ledger at {path}; create one with `privacy-ledger init` "
                                      "or `privacy-ledger dataset add FILE`")
        engines.check_sqlite_file(path)
    from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError  #

    try:
        engine = engines.make_engine(state.url)
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise fail("--db", "url", f"cannot open ledger {failures.excerpt(state.url, 200)!r}: {exc}") from None
    try:
        found, version = schema_migrations.schema_state(engine)
    except DatabaseError as exc:
        if failures.operational_reason(exc) is not None:
            raise
        raise fail("--db", "url", f"{failures.excerpt(state.url, 200)} is not a privacy-ledger ledger "
                                  f"(not a database it can read: {str(exc.orig).splitlines()[0]})") from None
    if found == "missing" and not create:
        raise fail("--db", "url", f"{failures.excerpt(state.url, 200)} holds no ledger (no ledger tables); "
                                  "create one with `privacy-ledger init`, or give the ledger's URL")
    if found == "newer":
        raise fail("--db", "url", f"this ledger has schema version {version}; this privacy-ledger knows up to "
                                  f"{schema_migrations.SCHEMA_VERSION}. Upgrade privacy-ledger.")
    if found != "current":
        schema_migrations.ensure_schema(engine)
    return engine


def read_light() -> LedgerSnapshot:
    """Datasets and families, without loading every release."""
    with sessions.read_session(open_engine()) as session:
        return configuration.write_context(session)


def as_of_lines(dataset: str, when) -> list[str]:
    """What an `--as-of` output says first: the moment it used, and, when the dataset was added to
    the ledger after it, that it did not exist then (only history recorded later, dated by its
    publication before that moment, counts then)."""
    lines = [f"as of {moment_text(when)}: the ledger as it stood then (by publication date)"]
    added = dataset_added_at(dataset)
    if added is not None and added > when:
        lines.append(f"note: dataset {dataset} was added to this ledger at {moment_text(added)}, after that "
                     "moment: it did not exist then (only releases recorded later with an earlier "
                     "publication date count)")
    return lines


def as_of_json(dataset: str, when) -> dict:
    """`as_of_lines` as fields of a JSON document: the moment used and when the dataset was added."""
    added = dataset_added_at(dataset)
    return {"as_of": when.isoformat(), "dataset_added_at": None if added is None else added.isoformat(),
            "dataset_existed": added is None or added <= when}


def dataset_added_at(dataset: str):
    """When `dataset` was added to the ledger (its first `dataset.added` audit event), or None."""
    from sqlalchemy import select

    from ..input.loader import parse_moment

    table = table_models.AuditEventRow.__table__
    with sessions.read_session(open_engine()) as session:
        at = session.connection().execute(
            select(table.c.at).where(table.c.kind == "dataset.added", table.c.subject == dataset)
            .order_by(table.c.seq).limit(1)).scalar()
    return None if at is None else parse_moment(at)


def actor(engine=None) -> str:
    """Who runs the command, as authenticated (store/identity.py): the database login on
    PostgreSQL, the operating-system user on a SQLite file (read before any file is created)."""
    from ..store import identity

    if engine is None and files.sqlite_path(state.url) is not None:
        return identity.os_user().name
    if engine is not None:
        return identity.authenticated(engine).name
    engine = engines.make_engine(state.url)
    try:
        return identity.authenticated(engine).name
    finally:
        engine.dispose()
