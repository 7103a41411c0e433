"""Shared by the tests: the command line run in this process, as a user runs it.

`cli_main(url, *args)` is `privacy-ledger --db URL ARGS` through the console entry
point `ledger.cli.app.main()`, which maps bad input to exit 2 and a refused budget
check to exit 1; it returns the exit code and what was printed. `migrations(first, last)` is
what an upgrade writes in the audit chain. `dump_tables(url)` and `dump_sqlite(path)` are a
ledger's stored bytes, compared before and after a command that must write nothing.
`cli_ok(url, *args)` is `cli_main` that must exit 0; `tick_ledger_clock(monkeypatch)` makes the
ledger's clock move a minute at every step. `acting_as(name)` is the one seam of who acts: in this
process the operating-system user is `name` (the command line run here and the Python API on a
SQLite ledger); a test in other processes runs them as real users (`os_users`, test_four_eyes.py).
"""

from __future__ import annotations

import io
import json
import sqlite3
import sys
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from sqlalchemy import create_engine, inspect, text

from ledger.cli import app as cli


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)

    @property
    def errors(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("error: ")]


def cli_main(url: str, *args) -> Run:
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.object(sys, "argv", ["privacy-ledger", "--db", url, *map(str, args)]), \
            redirect_stdout(out), redirect_stderr(err):
        try:
            cli.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return Run(code, out.getvalue(), err.getvalue())


def migrations(first: int, last: int) -> list[tuple[str, str, str]]:
    """The audit events (kind, subject, payload) an upgrade through schemas `first`..`last` writes,
    one per schema, in order: `ledger.migrated`, `schema N`, {"from": N - 1, "to": N}."""
    return [("ledger.migrated", f"schema {n}", f'{{"from":{n - 1},"to":{n}}}') for n in range(first, last + 1)]


def dump_tables(url: str) -> dict[str, list[str]]:
    """Every table of the ledger at `url` (either backend), row by row (order-independent)."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return {table: sorted(repr(tuple(row)) for row in connection.execute(text(f'SELECT * FROM "{table}"')))
                    for table in sorted(inspect(connection).get_table_names())}
    finally:
        engine.dispose()


def dump_sqlite(path: Path) -> list[str]:
    """Every table of the SQLite file, row by row, as SQL (`iterdump`)."""
    connection = sqlite3.connect(path)
    try:
        return list(connection.iterdump())
    finally:
        connection.close()


def cli_ok(url: str, *args) -> Run:
    """`cli_main` of a step that must succeed (exit 0; what it printed in the failure's message)."""
    result = cli_main(url, *map(str, args))
    assert result.code == 0, (args, result.out, result.err)
    return result


def tick_ledger_clock(monkeypatch, start=None) -> None:
    """Every step the ledger stamps a minute after the one before, from `start` (default 2026-01-01
    09:00 UTC): the ledger keeps whole seconds, so steps run in one second would be simultaneous,
    and a publication at its plan's moment is not after it (docs/explanation/accounting.md's cases read the order)."""
    from datetime import UTC, datetime, timedelta

    from ledger.store import session_state

    clock = {"now": start or datetime(2026, 1, 1, 9, 0, tzinfo=UTC)}

    def now():
        clock["now"] += timedelta(minutes=1)
        return clock["now"]

    monkeypatch.setattr(session_state, "now", now)


@contextmanager
def acting_as(name: str):
    """Within it, this process's operating-system user is `name` (ledger.store.identity.os_user),
    and so is its database login (a test of the rules on either backend), the name checked as a
    real one is."""
    from ledger.core.names import check_person
    from ledger.store import identity

    def os_user():
        return identity.Person(check_person(name, "name", identity.OS_USER), identity.OS_USER)

    with mock.patch.object(identity, "os_user", os_user), \
            mock.patch.object(identity, "database_login", lambda engine: os_user()):
        yield


def as_person(book, name: str):
    """The same ledger, acted on by `name` as a front end authenticated them (the Python API's
    `person=`)."""
    import ledger

    return ledger.api.Ledger(book.url, book.engine, person=ledger.api.front_end(name, "test"))
