"""The database library's errors on opening a ledger, classified: a URL it cannot use (`BadUrl`),
a file or server that is not a database it reads (`NotADatabase`). An operational failure (the
server unreachable, the file locked: core/failures.operational_reason) is raised as it is, for
the command's exit 3.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError

from ..core import failures
from . import engines, schema_migrations


class BadUrl(ValueError):
    """A URL no engine can be made from; the message is the library's."""


class NotADatabase(Exception):
    """Not a database this version reads; the message is the first line of the driver's."""


def made_engine(url: str) -> Engine:
    """engines.make_engine, its URL errors raised as BadUrl."""
    try:
        return engines.make_engine(url)
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise BadUrl(str(exc)) from None


def schema_state(engine: Engine) -> tuple[str, int | None]:
    """schema_migrations.schema_state, a database error that is not operational raised as NotADatabase."""
    try:
        return schema_migrations.schema_state(engine)
    except DatabaseError as exc:
        if failures.operational_reason(exc) is not None:
            raise
        raise NotADatabase(str(exc.orig).splitlines()[0]) from None
