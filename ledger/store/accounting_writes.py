"""Writing the accounting rows (accounting_rows.py), inside `sessions.write_session`: a record's
rows with their guarantee value and event ids (new ones given the next id, under the ledger's
write lock), a lifecycle change, and an amended dataset's rows rebuilt over its new variables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import bindparam, insert, select, update
from sqlmodel import Session

from ..core.records import Release, Status
from . import driver, row_dicts, sealed, table_models
from .accounting_rows import _EVENTS, _READS, _ROWS, _VALUES, _positions, expected_row
from .codec import release_from_dict
from .row_arrays import micros

_VALUE_BY_BODY = select(_VALUES.c.id).where(_VALUES.c.body == bindparam("body"))
_ROWS_INSERT = insert(_ROWS)
_READS_INSERT = insert(_READS)
_EVENT_BY_KEY = select(_EVENTS.c.id).where(_EVENTS.c.key == bindparam("key"))
_SET_STATUS = update(_ROWS).where(_ROWS.c.release == bindparam("r")).values(
    status=bindparam("s"), published_us=bindparam("p"))


def _value_ids(connection, bodies: Iterable[str], known: dict[str, int], table=_VALUES, lookup=_VALUE_BY_BODY,
               column: str = "body") -> dict[str, int]:
    """Ids of these value bodies (or event keys), new ones inserted (under the ledger's write lock)."""
    for body in bodies:
        if body in known:
            continue
        found = connection.execute(lookup, {column: body}).scalar()
        if found is None:
            top = connection.execute(select(table.c.id).order_by(table.c.id.desc()).limit(1)).scalar()
            found = 0 if top is None else top + 1
            connection.execute(insert(table), {"id": found, column: body})
        known[body] = found
    return known


def _event_ids(connection, keys: Iterable[str], known: dict[str, int]) -> dict[str, int]:
    return _value_ids(connection, keys, known, _EVENTS, _EVENT_BY_KEY, "key")


@dataclass
class Known:
    """The value and event ids met so far in one transaction (a cache of the id tables), and where
    each dataset's sealed chunks end: kept by the audit head (process_caches.known_ids)."""

    values: dict[str, int]
    events: dict[str, int]
    stops: dict[str, int] = field(default_factory=dict)  # where each dataset's sealed chunks end (sealed.py)


def insert_rows(connection, releases: Sequence[tuple[int, Release]], variables: Mapping[str, Sequence[str]],
                known: Known | None = None, seal: bool = True) -> None:
    """Accounting rows for (seq, release) pairs; `variables` gives each dataset's variables in
    order. `seal`: then seal the chunks the new seqs complete (sealed.py; not while the rows of
    a whole ledger or dataset are rebuilt, which seal once at the end)."""
    if not releases:
        return
    known = Known({}, {}) if known is None else known
    values_, events = known.values, known.events
    expected = [(seq, expected_row(release, variables[release.dataset])) for seq, release in releases]
    _value_ids(connection, sorted({body for _, row in expected for body, _ in row.guarantees} - values_.keys()),
               values_)
    _event_ids(connection, sorted({row.event for _, row in expected if row.event is not None} - events.keys()), events)
    values = []
    for seq, row in expected:
        first = row.guarantees[0] if row.guarantees else None
        more = ";".join(f"{values_[body]}:{bits.hex()}" for body, bits in row.guarantees[1:]) or None
        values.append({"seq": seq, "release": row.release, "dataset": row.dataset, "status": row.status,
                       "family": row.family, "title": row.title, "reads": row.reads,
                       "value": None if first is None else values_[first[0]],
                       "protects": None if first is None else first[1], "more": more,
                       "event": None if row.event is None else events[row.event],
                       "charged_by_event": row.charged_by_event, "recorded_us": row.recorded_us,
                       "published_us": row.published_us})
    driver.execute_many(connection, _ROWS_INSERT, values, columns=True)
    driver.execute_many(connection, _READS_INSERT, [
        {"dataset": row.dataset, "position": k, "seq": seq}
        for seq, row in expected for k in _positions(row.reads)], columns=True)
    if seal:  # the ranges these seqs complete, sealed (sealed.py)

        by_dataset: dict[str, list[int]] = {}
        for seq, row in expected:
            by_dataset.setdefault(row.dataset, []).append(seq)
        sealed.seal_after_insert(connection, by_dataset, variables, known.stops)



def set_status(connection, release_id: str, status: Status, published_at: datetime | None) -> None:
    """A lifecycle change: the status and the publication moment (schema 6) as the release now
    has them; noted for the sealed chunk holding the row, if any (sealed.note_change)."""

    connection.execute(_SET_STATUS, {"r": release_id, "s": status.value, "p": micros(published_at)})
    found = connection.execute(_SEQ_OF, {"r": release_id}).first()
    if found is not None:
        sealed.note_change(connection, found.dataset, found.seq)


_SEQ_OF = select(_ROWS.c.seq, _ROWS.c.dataset).where(_ROWS.c.release == bindparam("r"))


def rebuild_dataset(session: Session, dataset: str, variables: Sequence[str]) -> int:
    """The accounting rows of one dataset's releases, rebuilt for its variables as they now
    are (an amended dataset: its bitsets are over variable positions, which a
    variable added or removed changes). Only these derived tables change: the release rows
    and the audit chain are untouched. Returns how many rows."""

    connection = session.connection()
    connection.execute(_READS.delete().where(_READS.c.dataset == dataset))
    connection.execute(_ROWS.delete().where(_ROWS.c.dataset == dataset))
    table = table_models.ReleaseRow.__table__
    pending = [(row.seq, release_from_dict(row_dicts.release_row_dict(row)))
               for row in connection.execute(select(table).where(table.c.dataset == dataset).order_by(table.c.seq))]
    insert_rows(connection, pending, {dataset: tuple(variables)}, seal=False)

    sealed.rebuild(connection, dataset, len(variables))  # (over the new positions)
    return len(pending)
