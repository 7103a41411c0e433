"""The command line's shared context: which ledger a command works on (`--db`), how it is
opened, the light read most commands start with, and the date options.

cli/app.py defines the application; each `*_commands` module holds one group of commands.
All of them take their ledger from here (`book()`: the façade, ledger.api.Ledger), never from
another CLI module's private helpers nor from the store, so the command line has one way in.

Invariants: opening never creates a ledger except for the commands that say so
(`create=True`); a read never takes the write lock. Imports stay light (the store is
imported when a command first opens the ledger): `--help` and `--version` load no
database library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakSet

if TYPE_CHECKING:
    from ..api import Ledger
    from ..input.snapshot import LedgerSnapshot

from ..operations.moments import moment_text

DEFAULT_URL = "sqlite:///ledger.db"  # store.DEFAULT_URL, without importing the store


class State:
    """The options of the whole command line (set by `cli.main_options`)."""

    url: str = DEFAULT_URL


state = State()


# the engines `book` opened in this process and still alive, closed by `close_ledgers` (weakly:
# in a process that runs many commands, the tests', an engine no one holds goes as before)
_OPENED: WeakSet = WeakSet()


def book(create: bool = False) -> Ledger:
    """The ledger the command works on, through the façade (ledger.api.Ledger.opened). Only
    `init`, `dataset add` and `demo` create a new SQLite file or a schema: any other command on a
    missing file, or on a database without the ledger's tables, is bad input and writes nothing."""
    from ..api import Ledger  # (the façade and the ORM: imported when a command opens the ledger)

    ledger = Ledger.opened(state.url, create=create)
    _OPENED.add(ledger.engine)
    return ledger


def close_ledgers() -> None:
    """Close the connections of every ledger `book` opened (entry.main, once a command has
    returned): a SQLite ledger's last close checkpoints its WAL into the file."""
    for engine in list(_OPENED):
        engine.dispose()
    _OPENED.clear()


def open_engine(create: bool = False):
    """The ledger's engine, for the operations that take one (`run`, `demo`, `serve`)."""
    return book(create).engine


def read_light() -> LedgerSnapshot:
    """Datasets and families, without loading every release."""
    return book().overview()


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
    return book().dataset_added_at(dataset)


def actor() -> str:
    """Who runs the command, as authenticated (store/identity.py): the database login on
    PostgreSQL, the operating-system user on a SQLite file (read before any file is created)."""
    from ..api.ledger import acting_person

    return acting_person(state.url)
