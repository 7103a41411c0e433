"""The command line's shared context: which ledger a command works on (`--db`), how it is
opened, the light read most commands start with, and the date options.

`cli.py` defines the application and its commands; the other `cli_*` modules add
commands to it. All of them take their ledger from here, never from another CLI
module's private helpers, so the interface layer has one way in to the store.

Invariants: opening never creates a ledger except for the commands that say so
(`create=True`); a read never takes the write lock. Imports stay light (the store is
imported when a command first opens the ledger): `--help` and `--version` load no
database library (issue 13).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import failures
from ..core.errors import InputErrors, fail
from ..core.lazy import lazy_module

if TYPE_CHECKING:
    from ..input.loader import LedgerSnapshot

store = lazy_module("ledger.store.database")
people = lazy_module("ledger.operations.people")

DEFAULT_URL = "sqlite:///ledger.db"  # store.DEFAULT_URL, without importing the store


class State:
    """The options of the whole command line (set by `cli.main_options`)."""

    url: str = DEFAULT_URL


state = State()


def open_engine(create: bool = False):
    """The ledger's engine. Only `init`, `dataset add` and `demo` create a new SQLite file
    or a schema: any other command on a missing file, or on a database without the
    ledger's tables, is bad input and writes nothing. A ledger whose schema is current is
    opened without any lock (a reader never waits for a writer)."""
    path = store.sqlite_path(state.url)
    if path is not None:
        if not create and not path.exists():
            raise fail("--db", "url", f"no ledger at {path}; create one with `privacy-ledger init` "
                                      "or `privacy-ledger dataset add FILE`")
        store.check_sqlite_file(path)
    from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError  # (issue 13: not for --help)

    try:
        engine = store.make_engine(state.url)
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise fail("--db", "url", f"cannot open ledger {failures.excerpt(state.url, 200)!r}: {exc}") from None
    try:
        found, version = store.schema_state(engine)
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
                                  f"{store.SCHEMA_VERSION}. Upgrade privacy-ledger.")
    if found != "current":
        store.ensure_schema(engine)
    return engine


def read_light() -> LedgerSnapshot:
    """Datasets and families, without loading every release."""
    with store.read_session(open_engine()) as session:
        return store.write_context(session)


def parse_date(text: str | None, option: str):
    """An ISO 8601 date or date-time from the command line, as an aware UTC moment; never in the future."""
    from ..input.loader import parse_moment

    if text is None:
        return None
    moment = parse_moment(text)
    if moment is None:
        raise fail("command line", option, f"not a date: {text!r} (write it as 2024-05-01 or 2024-05-01T09:30)")
    if moment.replace(microsecond=0) > store.now():  # (the store's clock keeps whole seconds)
        raise fail("command line", option, f"{moment.isoformat()} is in the future")
    return moment


def actor(by: str | None) -> str:
    """Who runs the command: --as, then $LEDGER_USER, then the login (DESIGN 2.12)."""
    from ..input.limits import check_text

    actor = people.actor_name(by)
    errors = check_text(actor, "command line", "--as", "name")
    if errors:
        raise InputErrors(errors)
    return actor
