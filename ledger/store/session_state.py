"""What one transaction keeps on its Session (`session.info`): its connection, the key of this
process's caches for its ledger; pending ORM writes flushed before a Core statement; the clock every
recorded moment reads (`now`, whole seconds in UTC).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Connection
from sqlmodel import Session



def session_connection(session: Session) -> Connection:
    """The session's connection, kept for the transaction: the recording path runs
    several statements, and asking the Session each time costs more than the SQL."""
    connection = session.info.get("connection")
    if connection is None:
        connection = session.info["connection"] = session.connection()
    return connection


def flush_pending(session: Session) -> None:
    """Write pending ORM objects before a Core statement (and skip the call when none are)."""
    if session.new or session.dirty or session.deleted:
        session.flush()


def ledger_key(session: Session) -> str:
    """The key of this process's caches for the session's ledger: its URL, rendered once per
    transaction (a SQLAlchemy URL renders itself again on every hash)."""
    key = session.info.get("ledger_key")
    if key is None:
        key = session.info["ledger_key"] = session.get_bind().engine.url.render_as_string(hide_password=False)
    return key


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)
