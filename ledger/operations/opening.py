"""Opening a ledger for a command: the URL checked, the engine made, the schema current.

Invariants: opening never creates a ledger unless asked (`create=True`: `init`, `dataset add`,
`demo`); any other command on a missing SQLite file, or on a database without the ledger's
tables, is bad input and writes nothing. A ledger whose schema is current is opened without any
lock (a reader never waits for a writer). Errors name the `--db` option the URL came from.
"""

from __future__ import annotations

from datetime import datetime

from ..core import failures
from ..core.errors import fail
from ..store import engines, files, identity, opening_checks, report_queries, schema_migrations, sessions


def checked_engine(url: str, create: bool = False):
    """The engine of the ledger at `url`, refused (exit 2) when it holds no ledger and `create`
    is False, when it is not a database this version reads, or when its schema is newer."""
    path = files.sqlite_path(url)
    if path is not None:
        if not create and not path.exists():
            raise fail("--db", "url", f"no ledger at {path}; create one with `privacy-ledger init` "
                                      "or `privacy-ledger dataset add FILE`")
        engines.check_sqlite_file(path)
    try:
        engine = opening_checks.made_engine(url)
    except opening_checks.BadUrl as exc:
        raise fail("--db", "url", f"cannot open ledger {failures.excerpt(url, 200)!r}: {exc}") from None
    try:
        found, version = opening_checks.schema_state(engine)
    except opening_checks.NotADatabase as exc:
        raise fail("--db", "url", f"{failures.excerpt(url, 200)} is not a privacy-ledger ledger "
                                  f"(not a database it can read: {exc})") from None
    if found == "missing" and not create:
        raise fail("--db", "url", f"{failures.excerpt(url, 200)} holds no ledger (no ledger tables); "
                                  "create one with `privacy-ledger init`, or give the ledger's URL")
    if found == "newer":
        raise fail("--db", "url", f"this ledger has schema version {version}; this privacy-ledger knows up to "
                                  f"{schema_migrations.SCHEMA_VERSION}. Upgrade privacy-ledger.")
    if found != "current":
        schema_migrations.ensure_schema(engine)
    return engine


def acting_person(url: str, engine=None) -> str:
    """Who runs a command on `url`, as authenticated (store/identity.py): the database login on
    PostgreSQL, the operating-system user on a SQLite file (read before any file is created)."""
    if engine is None and files.sqlite_path(url) is not None:
        return identity.os_user().name
    if engine is not None:
        return identity.authenticated(engine).name
    engine = engines.make_engine(url)
    try:
        return identity.authenticated(engine).name
    finally:
        engine.dispose()


def dataset_added_at(engine, dataset: str) -> datetime | None:
    """When `dataset` was added to the ledger (its first `dataset.added` audit event), or None."""
    from ..input.utc_moments import parse_moment

    with sessions.read_session(engine) as session:
        at = report_queries.dataset_added_text(session, dataset)
    return None if at is None else parse_moment(at)


def is_sqlite_file(url: str) -> bool:
    """Whether `url` names a SQLite file (the command line's default ledger is one)."""
    return files.sqlite_path(url) is not None
