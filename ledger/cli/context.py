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

store = lazy_module("ledger.store.database")

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
    from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError  #

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


def parse_date(text: str | None, option: str, *, start: bool = False, future: bool = False):
    """An ISO 8601 date or date-time from the command line (`--as-of`, `--since`, `--at`), as an
    aware UTC moment; no zone means UTC (the ledger states no zone of its own).

    A date alone names a whole day: for `--as-of` its end, 23:59:59.999999, so everything dated
    that day is included and `--as-of` today is accepted (a date is in the future only after
    today, UTC); with `start` (`--since`, and `publish --at`, which stamps a moment) its
    beginning, 00:00. A moment in the future is refused unless `future`. `moment_text` states
    the moment used."""
    from datetime import UTC, datetime, time

    from ..input.loader import MomentOutOfRange, utc_moment

    if text is None:
        return None
    stripped = str(text).strip()
    try:
        moment = utc_moment(stripped)  # (a date alone: its midnight, in range exactly when its day is)
    except MomentOutOfRange as exc:
        raise fail("command line", option, str(exc)) from None
    day = _date_only(stripped)
    if day is not None:
        moment = datetime.combine(day, time.min if start else time.max, tzinfo=UTC)
        if not future and (day > store.now().date() if not start else moment > store.now()):
            raise fail("command line", option, f"{day.isoformat()} is in the future (today is "
                                               f"{store.now().date().isoformat()}, UTC)")
        return moment
    if moment is None:
        raise fail("command line", option, f"not a date: {failures.excerpt(stripped, 80)!r} (write it as "
                                           "2024-05-01 or 2024-05-01T09:30, UTC unless it says otherwise)")
    if not future and moment.replace(microsecond=0) > store.now():  # (the store's clock keeps whole seconds)
        raise fail("command line", option, f"{moment_text(moment)} is in the future")
    return moment


def _date_only(text: str):
    """The date `text` names when it is a date alone (2024-05-01), else None."""
    from datetime import date

    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def moment_text(moment) -> str:
    """The moment a date option stands for, in words: `the end of 2026-11-24 UTC` (a date
    alone given to --as-of), `the start of 2026-11-24 UTC` (to --since), else
    `2026-11-24 09:30:00 UTC` (with its microseconds when it has any)."""
    from datetime import UTC, time

    moment = moment.astimezone(UTC)
    if moment.timetz().replace(tzinfo=None) == time.max:
        return f"the end of {moment.date().isoformat()} UTC"
    if moment.timetz().replace(tzinfo=None) == time.min:
        return f"the start of {moment.date().isoformat()} UTC"
    return moment.strftime("%Y-%m-%d %H:%M:%S" + (".%f" if moment.microsecond else "")) + " UTC"


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
    from sqlalchemy import func, select

    from ..input.loader import parse_moment

    table = store.AuditEventRow.__table__
    with store.read_session(open_engine()) as session:
        at = session.connection().execute(
            select(table.c.at).where(table.c.kind == "dataset.added", table.c.subject == dataset)
            .order_by(table.c.seq).limit(1)).scalar()
    return None if at is None else parse_moment(at)


def actor(engine=None) -> str:
    """Who runs the command, as authenticated (store/identity.py): the database login on
    PostgreSQL, the operating-system user on a SQLite file (read before any file is created)."""
    from ..store import identity

    if engine is None and store.sqlite_path(state.url) is not None:
        return identity.os_user().name
    if engine is not None:
        return identity.authenticated(engine).name
    engine = store.make_engine(state.url)
    try:
        return identity.authenticated(engine).name
    finally:
        engine.dispose()
