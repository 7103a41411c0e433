"""The accounting rows' schema migrations, each streamed a batch at a time from the release rows:
schema 5 builds every release's row (`build_all`), schema 6 adds the accountants' event and time
columns (`add_event_columns`), schemas 7 and 11 bring the rows of some mechanisms to the event
`dp_events.release_event` now gives (`refresh_sampled_events`, `refresh_implied_gaussian_events`).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import bindparam, inspect, select, update
from sqlmodel import Session

from ..core.records import Release
from . import configuration, row_dicts, table_models
from .accounting_rows import _EVENTS, _ROWS
from .accounting_writes import Known, _event_ids, insert_rows
from .codec import release_from_dict
from .row_arrays import micros

EVENT_COLUMNS = ("event", "charged_by_event", "recorded_us", "published_us")  # added by schema 6


def build_all(session: Session, batch: int = 20_000) -> int:
    """Accounting rows for every release that has none (the schema 5 migration); returns how many."""

    connection = session.connection()
    variables = {name: d.variable_names for name, d in configuration.configuration(session).datasets.items()}
    have = select(_ROWS.c.seq)
    query = (select(table_models.ReleaseRow.__table__).where(table_models.ReleaseRow.__table__.c.seq.not_in(have))
             .order_by(table_models.ReleaseRow.__table__.c.seq))
    known = Known({}, {})
    count = 0
    pending: list[tuple[int, Release]] = []
    for row in connection.execute(query.execution_options(yield_per=batch)):  # streamed, not held
        pending.append((row.seq, release_from_dict(row_dicts.release_row_dict(row))))
        if len(pending) >= batch:
            insert_rows(connection, pending, variables, known, seal=False)  # (schema 9 seals)
            count += len(pending)
            pending = []
    insert_rows(connection, pending, variables, known, seal=False)
    return count + len(pending)


_FILL_EVENT = update(_ROWS).where(_ROWS.c.seq == bindparam("s")).values(
    event=bindparam("e"), charged_by_event=bindparam("c"), recorded_us=bindparam("r"), published_us=bindparam("p"))


_SET_EVENT = update(_ROWS).where(_ROWS.c.seq == bindparam("s")).values(
    event=bindparam("e"), charged_by_event=bindparam("c"))


def _fill_events(connection, statement, rows: Iterable[dict], batch: int) -> int:
    """The batched filler both event migrations share: `rows` (streamed dicts whose "e" is an
    event key or None) are written by `statement` (an executemany) a batch at a time, each
    batch's new event keys given their ids first. Returns how many rows were written."""
    events: dict[str, int] = {}
    count = 0
    pending: list[dict] = []

    def flush() -> None:
        _event_ids(connection, sorted({p["e"] for p in pending if p["e"] is not None} - events.keys()), events)
        for p in pending:
            p["e"] = None if p["e"] is None else events[p["e"]]
        connection.execute(statement, pending)

    for row in rows:
        pending.append(row)
        if len(pending) >= batch:
            flush()
            count += len(pending)
            pending = []
    if pending:
        flush()
    return count + len(pending)


def refresh_sampled_events(session: Session, batch: int = 20_000) -> int:
    """The schema 7 migration: a Laplace or geometric release run on a sample (sample_size of
    population) is charged through its sampling event (`dp_events.Event` kind
    `sampled`) where schema 6 charged its amplified guarantee. Returns how many rows changed
    (none in a ledger without subsampled releases)."""
    return _refresh_events(session, ("laplace", "geometric"), lambda params: "sample_size" in params, batch)


def refresh_implied_gaussian_events(session: Session, batch: int = 20_000) -> int:
    """The schema 11 migration: a Gaussian release declared only by (epsilon, delta) has the
    accounting event of the smallest multiplier its claim allows (`catalogue.gaussian_multiplier`)
    where schema 10 had none. One recorded before keeps the guarantee it was recorded with (the
    book of record), so it is not charged through the event: only the row's event changes.
    Returns how many rows changed."""
    return _refresh_events(session, ("gaussian",), lambda params: "sigma" not in params, batch)


def _refresh_events(session: Session, mechanisms: tuple[str, ...], selected, batch: int) -> int:
    """The accounting rows of the releases of `mechanisms` whose parameters `selected` accepts
    are brought to the event `dp_events.release_event` now gives, streamed a batch at a time
    with each row's stored event key read in the same query (a join: no query per row)."""
    from ..accounting.dp_events import release_event

    connection = session.connection()
    table = table_models.ReleaseRow.__table__
    query = (select(table, _EVENTS.c.key.label("_stored_event_key"))
             .join(_ROWS, _ROWS.c.seq == table.c.seq)
             .outerjoin(_EVENTS, _EVENTS.c.id == _ROWS.c.event)
             .where(table.c.mechanism_name.in_(mechanisms))
             .order_by(table.c.seq))

    def changed():
        for row in connection.execute(query.execution_options(yield_per=batch)):
            if not selected(row.mechanism_params or {}):
                continue
            release = release_from_dict(row_dicts.release_row_dict(row))
            key, charged = release_event(release)
            if row._stored_event_key != key:
                yield {"s": row.seq, "e": key, "c": charged}

    return _fill_events(connection, _SET_EVENT, changed(), batch)


def add_event_columns(session: Session, batch: int = 20_000) -> int:
    """The schema 6 migration: the accounting rows of a schema 5 ledger gain their event and
    time columns (EVENT_COLUMNS), computed once from the release rows, streamed a batch at a
    time; returns how many rows were filled. A ledger whose rows were written with these
    columns (a new table, or rows built by the schema 5 migration just before) is left as
    it is."""
    from ..accounting.dp_events import release_event

    connection = session.connection()
    have = {column["name"] for column in inspect(connection).get_columns(_ROWS.name)}
    missing = [name for name in EVENT_COLUMNS if name not in have]
    if not missing:
        return 0
    kinds = {"event": "INTEGER", "charged_by_event": "BOOLEAN NOT NULL DEFAULT FALSE", "recorded_us": "BIGINT",
             "published_us": "BIGINT"}
    for name in missing:
        connection.exec_driver_sql(f"ALTER TABLE {_ROWS.name} ADD COLUMN {name} {kinds[name]}")
    table = table_models.ReleaseRow.__table__
    query = select(table).order_by(table.c.seq)  # (every release row has its accounting row)

    def filled():
        for row in connection.execute(query.execution_options(yield_per=batch)):  # streamed, not held
            release = release_from_dict(row_dicts.release_row_dict(row))
            key, charged = release_event(release)
            yield {"s": row.seq, "e": key, "c": charged, "r": micros(release.recorded_at),
                   "p": micros(release.published_at)}

    count = _fill_events(connection, _FILL_EVENT, filled(), batch)
    for index in _ROWS.indexes:  # after the rows are filled (create_all makes none on an existing table)
        if index.name == "ix_release_accounting_event":
            index.create(connection, checkfirst=True)
    return count
