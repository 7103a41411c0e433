"""The ledger opened by URL: `ledger.open`, and `Ledger`, the one façade, made of its readers,
writers, figures, plans, audit and report inputs (one module each in this package).
"""

from __future__ import annotations

from ..core.errors import InputErrors, LedgerError
from ..operations import choices
from ..store import engines, identity, schema_migrations
from ..store.identity import Person
from ..store.sessions import Engine

from .audit import Audit
from .decisions import Decisions
from .figures import Figures
from .plans import Plans
from .reports import Reports


class Ledger(Decisions, Plans, Figures, Audit, Reports):
    """A ledger opened by URL. Cheap to keep: each call opens its own transaction. A read of an
    unchanged ledger is answered from its database's read cache (operations/read_cache.py)."""

    def __init__(self, url: str, engine: Engine, *, person: Person | None = None):
        self.url = url
        self.engine = engine if person is None else identity.acting_engine(engine, person)
        self._person = person

    def __repr__(self) -> str:
        return f"Ledger({self.url!r})"

    @classmethod
    def opened(cls, url: str, *, create: bool = False) -> Ledger:
        """The ledger at `url` as a command opens it (operations/opening.py): refused, never
        created, where there is none, unless `create`; its schema brought up to date."""
        from ..operations.opening import checked_engine

        return cls(url, checked_engine(url, create))

    @classmethod
    def on_own_engine(cls, url: str) -> Ledger:
        """The ledger at `url` on an engine of its own, not checked (a forked helper's: never another
        process's connections); `dispose()` it when done."""
        return cls(url, engines.make_engine(url))

    def dispose(self) -> None:
        """Close the engine's connections."""
        self.engine.dispose()


def open(url: str | None = None, *, person: Person | None = None) -> Ledger:  # noqa: A001 (ledger.open)
    """Open (and, on first use, create) the ledger at `url`: any SQLAlchemy URL, default
    $LEDGER_DATABASE_URL, else sqlite:///ledger.db -- as the CLI's --db. Who acts is the
    database login on PostgreSQL, else the operating-system user; a front end that
    authenticated its user itself passes `person=front_end(name, how)` (on PostgreSQL the
    database then checks that its login may act as that person's role)."""
    chosen = choices.ledger_url(url)
    try:
        engine = engines.make_engine(chosen)
        schema_migrations.ensure_schema(engine)
    except Exception as exc:  # a bad URL or an unreachable server is bad input
        raise InputErrors([LedgerError("url", "url", f"cannot open ledger {chosen!r}: {exc}")]) from None
    return Ledger(chosen, engine, person=person)


def acting_person(url: str) -> str:
    """Who runs a command on the ledger at `url`, read before any file is created."""
    from ..operations.opening import acting_person as who

    return who(url)
