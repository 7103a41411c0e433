"""Accounting rows: what the read commands need of each release, readable without
decoding the release.

A release row holds everything a steward recorded (JSON columns, the output, the
lifecycle); `subset`, `table` and `pairs` need only, per charged release, what it
reads and what its guarantees protect at which value. This module keeps that in
two tables, written in the same transaction as every record and status change:

- `guarantee_values`: each distinct guarantee value (notion, exact epsilon /
  delta / rho as fraction text, relation) once, with a small integer id;
- `release_accounting`: one row per release, keyed by its seq: id, dataset,
  status, family, title, the variables it reads as a bitset over the dataset's
  variable positions, its first guarantee as (value id, protects bitset) and any
  further guarantees as compact text ("id:hex;id:hex"); and what the accountants
  need (schema 6): the accounting event its mechanism's parameters
  describe (an id into `accounting_events`, with whether the release is charged
  through it: `dp_events.mechanism_event`), and its recording and publication
  moments (`accountants.note_times`, `published_moment`) as whole microseconds
  since 1970-01-01 UTC.
- `accounting_events`: each distinct accounting event key (`dp_events.Event.key`:
  exact fractions as text) once, with a small integer id.

The rows of each complete range of seqs are also kept sealed in one binary chunk
(sealed.py, schema 9): `read_rows` takes the chunks, then the rows after them.

`index_for` turns the rows of one dataset into the engine's `LedgerIndex`
without building a `Release` per row (bitsets are unpacked by numpy), with the
accountants' per-release events and times attached (`index_figures.index_events`
then returns them: the same `IndexEvents` as from the whole releases, in the same
event order, so every figure is the same to the last bit); the few releases the
exact path needs whole (family members, releases whose guarantees leave a choice)
are read from the release rows. Values stay exact: a value id names exact
fractions, an event id an exact event key.

Why no per-variable aggregates. The read commands' targets are approached from these rows: `subset` reads only the rows of
the releases that read the subset (the `release_reads` inverted index), `headroom`
reads the caps' running totals, `table` and `pairs` read every charged row once
as packed bitsets and integer ids (about 60 bytes of array per release) and
compose them over arrays, chunk by chunk for Table 1 (`large_table`). On SQLite
the rows are read a column at a time (`_read_columns`: one `group_concat` per
column, parsed by numpy), since a Python tuple per row costs about twice the
reading; the pair counts come from the pairs of variables each release reads
(`LedgerIndex.pair_counts`). An aggregate per variable would save `table` one pass
over the rows but could not serve `pairs`, the whole-dataset column, the largest
releases or the accountants' lifecycle moments, which need the rows anyway, and it
would be one more stored form for `audit verify` to recompute. What remains of
`subset`'s and `table`'s time at a million releases, where the PLD figure is valid
and so must be computed, is start-up (SQLAlchemy, numpy, scipy.fft: the PLDs are built
in `privacy_loss` without importing dp_accounting), reading the rows, and composing.

Invariants:
- every release row has exactly one accounting row, equal to `rows_for(release)`;
  `audit verify` recomputes them from the release rows and reports any difference;
- a guarantee value id, once given, never changes meaning (the table is append-only);
- an event id, likewise (`accounting_events` is append-only);
- a ledger made before these tables existed gets them built once, in place, by the
  schema 5 migration, and a ledger of schema 5 its event and time columns by the
  schema 6 migration (each an audit event, like every migration).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from functools import lru_cache

from sqlalchemy import and_, bindparam, case, func, insert, inspect, select, update
from sqlmodel import Session

from ..core.lazy import lazy_module
from ..core.records import CHARGED_STATUSES, DEFAULT_ALLOWANCE, Family, Guarantee, Notion, Relation, Release, Status
from . import configuration, driver, row_dicts, row_reads, sealed, table_models
from .as_of import rows_then
from .codec import canonical_json, release_from_dict
from .row_arrays import _AFTER_ALL, _BEFORE_ANY, _PUBLISHED, _Rows, _raw_rows, _read_columns, _read_rows, _unpack, _unpack_packed, micros, stream_raw_rows
from .table_models import AccountingEventRow, AccountingReadRow, AccountingRow, GuaranteeValueRow

np = lazy_module("numpy")

_READS = AccountingReadRow.__table__
_VALUES = GuaranteeValueRow.__table__
_ROWS = AccountingRow.__table__
_EVENTS = AccountingEventRow.__table__
_VALUE_BY_BODY = select(_VALUES.c.id).where(_VALUES.c.body == bindparam("body"))
_ROWS_INSERT = insert(AccountingRow.__table__)
_READS_INSERT = insert(AccountingReadRow.__table__)
_EVENT_BY_KEY = select(_EVENTS.c.id).where(_EVENTS.c.key == bindparam("key"))
_SET_STATUS = update(_ROWS).where(_ROWS.c.release == bindparam("r")).values(
    status=bindparam("s"), published_us=bindparam("p"))
EVENT_COLUMNS = ("event", "charged_by_event", "recorded_us", "published_us")  # added by schema 6
# the first charged release of a dataset with a given event and status (an indexed look-up)
_FIRST_WITH_EVENT = select(_ROWS.c.seq).where(
    _ROWS.c.dataset == bindparam("d"), _ROWS.c.event == bindparam("e"), _ROWS.c.status == bindparam("s")
).order_by(_ROWS.c.seq).limit(1)


# --------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------


def bitset(names: Iterable[str], position: Mapping[str, int], width: int) -> bytes:
    """The names' positions as a little-endian bitset of `width` variables (unknown names ignored)."""
    mask = 0
    for name in names:
        k = position.get(name)
        if k is not None:
            mask |= 1 << k
    return mask.to_bytes((width + 7) // 8 or 1, "little")


def value_body(guarantee: Guarantee) -> str:
    """A guarantee's value (everything but what it protects), as canonical JSON."""
    # cached by the exact values' integer pairs (a Fraction hashes in Python, an int in C)
    return _value_body(guarantee.notion, _pair(guarantee.epsilon), _pair(guarantee.delta), _pair(guarantee.rho),
                       guarantee.relation, guarantee.charged_in)


def _pair(x: Fraction | None) -> tuple[int, int] | None:
    return None if x is None else (x.numerator, x.denominator)


@lru_cache(maxsize=4096)  # a ledger repeats a few values over and over
def _value_body(notion: Notion, epsilon: tuple[int, int] | None, delta: tuple[int, int] | None,
                rho: tuple[int, int] | None, relation: Relation, charged_in: Relation | None = None) -> str:
    def exact(x: tuple[int, int] | None):
        return None if x is None else f"{x[0]}/{x[1]}"

    body = {"notion": notion.value, "epsilon": exact(epsilon), "delta": exact(delta), "rho": exact(rho),
            "relation": relation.value}
    if charged_in is not None:  # (only in an add/remove dataset: every earlier body is unchanged)
        body["charged_in"] = charged_in.value
    return canonical_json(body)


def guarantee_of(body: str) -> Guarantee:
    """The guarantee a value body describes (protecting nothing: only its value counts here)."""
    data = json.loads(body)

    def exact(text: str | None) -> Fraction | None:
        return None if text is None else Fraction(text)

    return Guarantee(protects=frozenset(), notion=Notion(data["notion"]), epsilon=exact(data["epsilon"]),
                     delta=exact(data["delta"]), rho=exact(data["rho"]), relation=Relation(data["relation"]),
                     charged_in=Relation(data["charged_in"]) if "charged_in" in data else None)


@dataclass(frozen=True)
class Expected:
    """An accounting row as recomputed from its release: value bodies, not ids."""

    release: str
    dataset: str
    status: str
    family: str | None
    title: str
    reads: bytes
    guarantees: tuple[tuple[str, bytes], ...]  # (value body, protects bitset), in the release's order
    event: str | None = None  # the mechanism's event key (dp_events.Event.key)
    charged_by_event: bool = False
    recorded_us: int | None = None
    published_us: int | None = None



def expected_row(release: Release, variables: Sequence[str]) -> Expected:
    from ..accounting.dp_events import release_event

    position = _position(tuple(variables))
    width = len(variables)
    event, charged = release_event(release)
    return Expected(release=release.id, dataset=release.dataset, status=release.status.value, family=release.family,
                    title=release.title, reads=bitset(release.reads, position, width),
                    guarantees=tuple((value_body(g), bitset(g.protects, position, width)) for g in release.guarantees),
                    event=event, charged_by_event=charged, recorded_us=micros(release.recorded_at),
                    published_us=micros(release.published_at))


@lru_cache(maxsize=64)
def _position(variables: tuple[str, ...]) -> dict[str, int]:
    """Each variable's position (a dataset's variables, once, not once per release)."""
    return {name: k for k, name in enumerate(variables)}


# --------------------------------------------------------------------------
# Writing (inside sessions.write_session)
# --------------------------------------------------------------------------


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


def _positions(bits: bytes) -> list[int]:
    mask = int.from_bytes(bits, "little")
    found = []
    while mask:  # one step per variable read, not per variable of the dataset
        low = mask & -mask
        found.append(low.bit_length() - 1)
        mask ^= low
    return found


def set_status(connection, release_id: str, status: Status, published_at: datetime | None) -> None:
    """A lifecycle change: the status and the publication moment (schema 6) as the release now
    has them; noted for the sealed chunk holding the row, if any (sealed.note_change)."""

    connection.execute(_SET_STATUS, {"r": release_id, "s": status.value, "p": micros(published_at)})
    found = connection.execute(_SEQ_OF, {"r": release_id}).first()
    if found is not None:
        sealed.note_change(connection, found.dataset, found.seq)


_SEQ_OF = select(_ROWS.c.seq, _ROWS.c.dataset).where(_ROWS.c.release == bindparam("r"))


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
    population) is charged through its sampling event (`dp_events.Event` kind `sampled`, issue
    11 section 4) where schema 6 charged its amplified guarantee. Returns how many rows changed
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


# --------------------------------------------------------------------------
# Reading: rows -> LedgerIndex
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReleaseHead:
    """What a table row shows of a release (its id, title and status), without the release."""

    id: str
    title: str
    status: Status


_STATUS_OF = {status.value: status for status in Status}  # (a dict look-up: Status(text) is ten times slower)


class _Releases(Sequence):
    """The index's releases: heads (id, title, status), read when first asked for (only a
    table shows them: all of them for a small table, the rows it shows of a large one,
    `prefetch`), and the whole release where the exact path needs it."""

    def __init__(self, seqs, whole: Mapping[int, Release], heads, ids=None):
        self.seqs, self.whole, self._heads, self._ids = seqs, whole, heads, ids
        self.heads: tuple[list[str], list[str], list[str]] | None = None
        self.found: dict[int, ReleaseHead] = {}
        self.known_ids: list[str] | None = None  # the ids alone, when read with the rows

    def ids(self) -> list[str]:
        """The ids of every release, in index order: the heads' when read, else the ids alone
        (`ids`: a cap's drivers name tied rows by id; at a million releases the heads at
        --as-of, statuses then and titles, took seven seconds, the ids one)."""
        if self.known_ids is None:
            self.known_ids = self.load()[0] if self.heads is not None or self._ids is None else self._ids()
        return self.known_ids

    def __len__(self) -> int:
        return len(self.seqs)

    def load(self) -> tuple[list[str], list[str], list[str]]:
        """(ids, titles, statuses) of every release, in index order."""
        if self.heads is None:
            self.heads = self._heads(None)
        return self.heads

    def prefetch(self, rows: Sequence[int]) -> None:
        """The heads of these rows only, read now."""
        rows = [int(r) for r in rows if int(r) not in self.found and int(r) not in self.whole]
        if self.heads is None and rows:
            at = {int(self.seqs[r]): r for r in rows}
            for start in range(0, len(rows), 500):
                for seq, rid, title, status in self._heads(sorted(at)[start:start + 500]):
                    self.found[at[seq]] = ReleaseHead(rid, title, _STATUS_OF[status])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        found = self.whole.get(i)
        if found is None:
            found = self.found.get(i)
        if found is not None:
            return found
        ids, titles, statuses = self.load()
        return ReleaseHead(ids[i], titles[i], _STATUS_OF[statuses[i]])


class _LazyIds:
    """`LedgerIndex.release_ids`, read when first indexed (a table's headline, a subset's
    list of charged releases); `pairs` never reads them."""

    def __init__(self, releases: _Releases):
        self.releases = releases
        self.ids = None

    def __len__(self) -> int:
        return len(self.releases)

    def __getitem__(self, key):
        if self.ids is None:
            self.ids = np.asarray(self.releases.ids(), dtype=object)
        return self.ids[key]

    def __iter__(self):
        return iter(self[:])


def _row_statement(dataset: str, charged: list[str], positions: list[int] | None, accounts: bool,
                   after: int | None = None):
    """(the WHERE clauses, the SELECT) of the accounting rows `index_for` reads row by row:
    the dataset's charged rows, or with `positions` those of the releases reading one of them;
    with `after`, only those whose seq is at least that (the tail after the sealed chunks)."""
    chosen = (_ROWS.c.dataset == dataset, _ROWS.c.status.in_(charged))
    if positions is not None:
        # the dataset is the inverted index's: the rows are then looked up by seq, not scanned
        chosen = (_ROWS.c.status.in_(charged), _ROWS.c.seq.in_(select(_READS.c.seq).where(
            _READS.c.dataset == dataset, _READS.c.position.in_(positions),
            *(() if after is None else (_READS.c.seq >= after,)))))
    if after is not None:
        chosen += (_ROWS.c.seq >= after,)
    # what the accounting needs, and no more (on a million releases every column, and every
    # Python object, read costs about 0.1 s): a first guarantee protecting exactly what the
    # release reads as NULL; the event with whether it is charged as one number; the
    # publication moment as `release_times.published_moment` takes it (a release recorded as
    # published without a date was published when recorded)
    published = case((and_(_ROWS.c.published_us.is_(None), _ROWS.c.status.in_(sorted(_PUBLISHED))),
                      func.coalesce(_ROWS.c.recorded_us, _BEFORE_ANY)), else_=_ROWS.c.published_us)
    fields = [_ROWS.c.seq, _ROWS.c.reads, func.coalesce(_ROWS.c.value, -1),
              case((_ROWS.c.protects == _ROWS.c.reads, None), else_=_ROWS.c.protects), _ROWS.c.family, _ROWS.c.more]
    if accounts:
        fields += [func.coalesce(_ROWS.c.event * 2 + case((_ROWS.c.charged_by_event, 1), else_=0), -2),
                   func.coalesce(_ROWS.c.recorded_us, _BEFORE_ANY), func.coalesce(published, _AFTER_ALL)]
    return chosen, select(*fields).where(*chosen).order_by(_ROWS.c.seq)


def index_for(session: Session, variables: Sequence[str], dataset: str, families: Mapping[str, Family],
              titles: bool = False, touching: Iterable[str] | None = None, accounts: bool = True,
              when: datetime | None = None):
    """The `LedgerIndex` of a dataset's charged releases, from the accounting rows: equal to
    `LedgerIndex(variables, releases, families)` over the same releases in recording order.
    Release ids, titles and statuses (a table shows them, a subset lists the ids) are read
    now when `titles`, else when first asked for, while the session is open. With
    `touching` (a subset), only the releases that read some variable of it: the index then
    answers `subset_cost` on that subset (or a part of it) exactly, every other release
    costing 0 there (Tan Prop 3.3; a family of members that read nothing of it costs 0,
    docs/explanation/model.md#families). `accounts=False`: without the accountants'
    events and times (`pairs` composes by the basic accountant only). With `when`: the
    releases charged at that moment, each with the status it had then, as from
    `history.releases_as_of` (as_of.py; every row read, `touching` aside); None when the rows
    cannot say it exactly (as_of.rows_then)."""
    from ..accounting.spend import UNBOUNDED, ZERO, Spend, guarantee_spend
    from ..accounting.cost_rule import one_charge
    from ..accounting.ledger_index import LedgerIndex

    connection = session.connection()
    charged = sorted(s.value for s in CHARGED_STATUSES)
    if when is not None:  # the rows charged then are among those charged or cancelled now (as_of.py)
        listed = touching is not None  # (a subset lists the ids of the releases charging it)
        charged, touching, accounts = sorted({*charged, Status.CANCELLED.value}), None, True
    wanted = None if touching is None else sorted({k for k, name in enumerate(variables) if name in set(touching)})
    chosen, _ = _row_statement(dataset, charged, wanted, accounts)
    rows = read_rows(connection, dataset, charged, wanted, len(variables), accounts)
    then = None
    if when is not None:

        found = rows_then(connection, dataset, rows, when)
        if found is None:
            return None
        rows, then = found
    bodies = dict(connection.execute(select(_VALUES.c.id, _VALUES.c.body)).all())
    n_rel, n_var = len(rows.value), len(variables)

    def heads(seqs: list[int] | None):
        """(ids, titles, statuses) of every release; with `seqs`, (seq, id, title, status) rows of those."""
        fields = (_ROWS.c.release, _ROWS.c.title, _ROWS.c.status)
        if seqs is not None:
            return _raw_rows(connection, select(_ROWS.c.seq, *fields).where(_ROWS.c.seq.in_(seqs)))
        found = _raw_rows(connection, select(*fields).where(*chosen).order_by(_ROWS.c.seq))
        return [r[0] for r in found], [r[1] for r in found], [r[2] for r in found]

    def ids() -> list[str]:
        return [r[0] for r in _raw_rows(connection, select(_ROWS.c.release).where(*chosen).order_by(_ROWS.c.seq))]

    releases = _Releases(rows.seq, {}, heads if then is None else then.heads, ids if then is None else then.ids)
    releases.known_ids = rows.ids if then is None or not listed else then.ids()
    families = {fid: f for fid, f in families.items() if f.dataset == dataset}

    index = LedgerIndex.__new__(LedgerIndex)
    index.variables = tuple(variables)
    index.column = {name: j for j, name in enumerate(index.variables)}
    index.families = dict(families)
    index.reads = _unpack_packed(rows.reads, n_var)

    # guarantees: the first of each release over arrays, further ones (rare) one by one
    first = rows.value
    with_first = np.flatnonzero(first >= 0)
    g_release = [with_first]
    g_order = [np.zeros(len(with_first), dtype=np.int64)]
    g_raw = [first[with_first]]
    if len(with_first) == n_rel and np.array_equal(rows.protects, rows.reads):
        # every first guarantee protects what its release reads (nearly always): one matrix for both
        # (neither is written to after this), not a second million-row unpacking
        g_protects = [index.reads]
    else:
        g_protects = [_unpack_packed(rows.protects, n_var)]
    extra_release, extra_order, extra_raw, extra_bits = [], [], [], []
    several = sorted(rows.more)
    for i in several:
        for k, part in enumerate(rows.more[i].split(";"), start=1):
            value, bits = part.split(":")
            extra_release.append(i)
            extra_order.append(k)
            extra_raw.append(int(value))
            extra_bits.append(bytes.fromhex(bits))
    if extra_release:
        g_release.append(np.asarray(extra_release, dtype=np.int64))
        g_order.append(np.asarray(extra_order, dtype=np.int64))
        g_raw.append(np.asarray(extra_raw, dtype=np.int64))
        g_protects.append(_unpack(extra_bits, n_var))
    if extra_release:
        g_release_all = np.concatenate(g_release)
        order = np.lexsort((np.concatenate(g_order), g_release_all))
        index.g_release = g_release_all[order]
        raw = np.concatenate(g_raw)[order]
        index.g_protects = np.concatenate(g_protects)[order]
    else:  # one guarantee at most per release: already in order (no copy of the protects matrix)
        index.g_release, raw, index.g_protects = g_release[0], g_raw[0], g_protects[0]
    del g_protects

    # distinct values in rank order, as LedgerIndex.__init__ numbers them
    spend_of_raw = {int(v): guarantee_spend(guarantee_of(bodies[int(v)])) for v in np.unique(raw)}
    distinct = sorted(set(spend_of_raw.values()), key=Spend.rank)
    value_id = {spend: k for k, spend in enumerate(distinct)}
    index.NONE = len(distinct)
    index.ZERO_ID = len(distinct) + 1
    index.values = tuple(distinct) + (UNBOUNDED, ZERO)
    index.value_is_zero = np.asarray([v.is_zero for v in index.values], dtype=bool)
    remap = np.zeros(max(spend_of_raw, default=0) + 1, dtype=np.int64)
    for v, spend in spend_of_raw.items():
        remap[v] = value_id[spend]
    index.g_value = remap[raw] if len(raw) else np.zeros(0, dtype=np.int64)
    index.release_ids = _LazyIds(releases)

    # family members and releases whose guarantees leave a choice: the exact path needs them whole
    index.members = {}
    for i, family in sorted(rows.family.items()):
        if family in families:
            index.members.setdefault(family, []).append(i)
    ambiguous = [i for i in several if not one_charge(
        [spend_of_raw[int(v)] for v in raw[index.g_release == i]])]
    needed = sorted({i for rows_ in index.members.values() for i in rows_} | set(several))
    whole = releases.whole
    release_table = table_models.ReleaseRow.__table__
    if titles or (touching is not None and rows.ids is None):
        releases.load()
    else:
        releases.prefetch(needed)
    for start in range(0, len(needed), 500):
        chunk = {releases[i].id: i for i in needed[start:start + 500]}
        for row in connection.execute(select(release_table).where(release_table.c.id.in_(list(chunk)))):
            whole[chunk[row.id]] = release_from_dict(row_dicts.release_row_dict(row))
            if then is not None:
                whole[chunk[row.id]] = then.release(whole[chunk[row.id]])
    index.releases = releases
    index.then = then  # (with `when`: the status each release had then, as_of.Then; else None)

    index.finish_arrays(ambiguous)  # the same derived arrays as LedgerIndex.__init__
    if accounts:
        _attach_events(connection, index, rows, dataset, charged, partial=touching is not None)
    stated = row_reads.dataset_allowances(connection, [dataset]).get(dataset)  # (Dataset.allowance)
    return index.for_dataset(DEFAULT_ALLOWANCE if stated is None else Fraction(stated))


def read_rows(connection, dataset: str, charged: list[str], positions: list[int] | None, n_var: int,
              accounts: bool) -> "_Rows":
    """The dataset's charged accounting rows (those reading one of `positions`, when given) as
    `_Rows`: the sealed chunks' part (sealed.py: a few BLOBs), then the rows after them, a
    column at a time on SQLite (`_read_columns`), else row by row (`_read_rows`)."""

    found = sealed.read_part(connection, dataset, charged, positions, n_var, accounts)
    head, after = found if found is not None else (None, None)
    rows = None
    if connection.dialect.name == "sqlite":  # (the same rows, a column at a time: _read_columns)
        rows = _read_columns(connection, dataset, charged, positions, n_var, accounts, after)
    if rows is None:
        rows = _read_rows(connection, _row_statement(dataset, charged, positions, accounts, after)[1], n_var,
                          accounts)
    return rows if head is None else sealed.join_rows(head, rows)


def _attach_events(connection, index, rows: _Rows, dataset: str, charged: list[str], partial: bool) -> None:
    """The accountants' per-release events and times (index_figures.stored_index_events) from
    the rows' schema 6 columns. Events are numbered in the order of their first charged
    release of the dataset, as the index of the whole releases numbers them: from the rows
    themselves, or for a `partial` index (the releases touching a subset) by a few indexed
    look-ups, one per event and status."""
    from ..accounting.dp_events import Event
    from ..accounting.index_figures import stored_index_events

    stored = rows.event
    present = stored >= 0
    used, first_row = np.unique(stored[present], return_index=True)
    used = [int(k) for k in used]
    if partial and len(used) > 1:
        first = {k: min(seq for status in charged if (seq := connection.execute(
            _FIRST_WITH_EVENT, {"d": dataset, "e": k, "s": status}).scalar()) is not None) for k in used}
        order = sorted(used, key=first.__getitem__)
    else:
        order = [used[k] for k in np.argsort(first_row, kind="stable")]
    keys = dict(_raw_rows(connection, select(_EVENTS.c.id, _EVENTS.c.key).where(_EVENTS.c.id.in_(used)))) \
        if used else {}
    rank = np.full(max(used, default=0) + 1, -1, dtype=np.int64)
    rank[order] = np.arange(len(order))
    stored = np.where(present, rank[np.where(present, stored, 0)], -1)
    stored_index_events(index, stored, [Event.from_key(keys[k]) for k in order], rows.charged_by_event,
                        rows.recorded, rows.published)



# --------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------


def _check_reads(connection, stored: Mapping[int, Expected], some: bool,
                 variables: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The inverted index equal to the stored reads bitsets (streamed in seq order). `some`: only
    the rows of the stored seqs, found through the primary key (dataset, position, seq): one
    seq range per dataset and position (a filter on seq alone would scan the whole index: 0.4 s
    at a million releases, for every chunk), the rows outside the seqs asked for dropped here."""
    query = select(_READS.c.seq, _READS.c.position).order_by(_READS.c.seq, _READS.c.position)
    if some:
        query = _reads_of(connection, stored, variables)
    problems: list[str] = []
    indexed: dict[int, list[int]] = {}

    def compare(seq: int, positions: list[int]) -> None:
        row = stored.get(seq)
        if row is None:
            problems.append(f"event {seq} (release ?): release_reads rows name no accounting row")
        elif _positions(row.reads) != positions:
            problems.append(f"event {seq} (release {row.release}): the release_reads rows differ from its reads")

    current, positions = None, []
    for seq, position in (query if isinstance(query, list) else stream_raw_rows(connection, query)):
        if seq != current:
            if current is not None:
                compare(current, positions)
                indexed[current] = []
            current, positions = seq, []
        positions.append(position)
    if current is not None:
        compare(current, positions)
        indexed[current] = []
    for seq, row in stored.items():
        if seq not in indexed and _positions(row.reads):
            problems.append(f"event {seq} (release {row.release}): its release_reads rows are missing")
    return problems


def _reads_of(connection, stored: Mapping[int, Expected], variables: Mapping[str, Sequence[str]] | None):
    """The release_reads rows (seq, position) of the stored seqs, in (seq, position) order."""
    if not stored:
        return []
    seqs = sorted(stored)
    if variables is None:  # (no catalogue at hand: by seq, a scan)
        return _raw_rows(connection, select(_READS.c.seq, _READS.c.position)
                         .where(_READS.c.seq.in_(seqs)).order_by(_READS.c.seq, _READS.c.position))
    width = max((len(names) for names in variables.values()), default=0)
    datasets = sorted(set(variables) | {row.dataset for row in stored.values()})
    span = _READS.c.seq.between(seqs[0], seqs[-1])
    rows = _raw_rows(connection, select(_READS.c.seq, _READS.c.position).where(
        _READS.c.dataset.in_(datasets), _READS.c.position.in_(range(width)), span))
    rows += _raw_rows(connection, select(_READS.c.seq, _READS.c.position).where(  # (a position past every
        _READS.c.dataset.in_(datasets), _READS.c.position >= width, span))         # variable: wrong, reported)
    wanted = set(seqs)
    return sorted(row for row in rows if row[0] in wanted)


_STORED_FIELDS = select(_ROWS.c.seq, _ROWS.c.release, _ROWS.c.dataset, _ROWS.c.status, _ROWS.c.family, _ROWS.c.title,
                        _ROWS.c.reads, _ROWS.c.value, _ROWS.c.protects, _ROWS.c.more, _ROWS.c.event,
                        _ROWS.c.charged_by_event, _ROWS.c.recorded_us, _ROWS.c.published_us)


def _stored(rows, bodies: Mapping[int, str], event_keys: Mapping[int, str]) -> dict[int, Expected]:
    """Stored accounting rows (as _STORED_FIELDS selects them) -> seq: Expected (value bodies and
    event keys, not ids)."""
    stored = {}
    for (seq, release, dataset, status, family, title, reads, value, protects, more, event, by_event, recorded,
         published) in rows:
        guarantees = []
        if value is not None:
            guarantees.append((bodies.get(value, f"missing value {value}"), bytes(protects)))
        for part in more.split(";") if more else ():
            value_id, bits = part.split(":")
            guarantees.append((bodies.get(int(value_id), f"missing value {value_id}"), bytes.fromhex(bits)))
        stored[seq] = Expected(release, dataset, status, family, title, bytes(reads), tuple(guarantees),
                               None if event is None else event_keys.get(event, f"missing event {event}"),
                               bool(by_event), recorded, published)
    return stored


def _compare_rows(stored: Mapping[int, Expected], releases: Iterable[tuple[int, Release]],
                  variables: Mapping[str, Sequence[str]], problems: list[str], limit: int, trusted=None,
                  seen: set[int] | None = None) -> None:
    """Each release's accounting row equal to the one recomputed from it (see `check`)."""
    for seq, release in releases:
        if seen is not None:
            seen.add(seq)
        expected = expected_row(release, variables.get(release.dataset, ()))
        found = stored.get(seq)
        if found is None:
            problems.append(f"event {seq} (release {release.id}): its accounting row is missing")
        elif found != expected and (trusted is None or trusted(release.id)):
            fields = [name for name in Expected.__dataclass_fields__ if getattr(found, name) != getattr(expected, name)]
            problems.append(f"event {seq} (release {release.id}): the accounting row differs from the release "
                            f"(fields: {', '.join(fields)})")
        if len(problems) >= limit:
            return


def check(session: Session, releases: Iterable[tuple[int, Release]], variables: Mapping[str, Sequence[str]],
          limit: int = 20, only: set[str] | None = None, trusted=None) -> list[str]:
    """Every accounting row equal to the one recomputed from its release (and no row without
    a release); at most `limit` differences are named. `only`: just these releases' rows.
    `trusted(release id)`: whether the release row is the state its audit event recorded; a
    difference beside a release row changed behind the ledger's back is that change, already
    reported, and is not named again. (`Check` does the same a chunk of releases at a time.)"""
    connection = session.connection()
    bodies = dict(connection.execute(select(_VALUES.c.id, _VALUES.c.body)).all())
    event_keys = dict(connection.execute(select(_EVENTS.c.id, _EVENTS.c.key)).all())
    if only is None:
        stored_rows = stream_raw_rows(connection, _STORED_FIELDS)
    else:
        names = sorted(only)
        stored_rows = [row for at in range(0, len(names), 500)
                       for row in _raw_rows(connection, _STORED_FIELDS.where(_ROWS.c.release.in_(names[at:at + 500])))]
    stored = _stored(stored_rows, bodies, event_keys)
    problems = _check_reads(connection, stored, only is not None, variables)
    seen: set[int] = set()
    _compare_rows(stored, releases, variables, problems, limit, trusted, seen)
    if len(problems) >= limit:
        return problems
    for seq in sorted(stored.keys() - seen)[:limit]:
        problems.append(f"event {seq} (release {stored[seq].release}): an accounting row has no release")
    return problems


class Check:
    """`check` over the whole ledger, a chunk of releases at a time (the streaming `audit
    verify`): `add(chunk)` compares the chunk's accounting rows and their inverted
    reads, read by seq; `problems()` adds the rows no release has (anti-joins in the
    database). Memory holds one chunk, whatever the number of releases."""

    def __init__(self, session: Session, variables: Mapping[str, Sequence[str]], limit: int = 20):
        self.connection = session.connection()
        self.variables, self.limit = variables, limit
        self.bodies = dict(self.connection.execute(select(_VALUES.c.id, _VALUES.c.body)).all())
        self.event_keys = dict(self.connection.execute(select(_EVENTS.c.id, _EVENTS.c.key)).all())
        # release_reads rows naming no accounting row (as `check` names them, first)
        unnamed = _raw_rows(self.connection, select(_READS.c.seq).distinct().where(
            _READS.c.seq.not_in(select(_ROWS.c.seq))).order_by(_READS.c.seq).limit(limit))
        self.found: list[str] = [f"event {seq} (release ?): release_reads rows name no accounting row"
                                 for (seq,) in unnamed]

    def add(self, releases: Sequence[tuple[int, Release]], trusted=None) -> None:
        if len(self.found) >= self.limit or not releases:
            return
        seqs = sorted({seq for seq, _ in releases})
        rows = [row for at in range(0, len(seqs), 500)
                for row in _raw_rows(self.connection, _STORED_FIELDS.where(_ROWS.c.seq.in_(seqs[at:at + 500])))]
        stored = _stored(rows, self.bodies, self.event_keys)
        self.found.extend(_check_reads(self.connection, stored, True, self.variables))
        _compare_rows(stored, releases, self.variables, self.found, self.limit, trusted)

    def problems(self) -> list[str]:

        problems = self.found[:]
        if len(problems) >= self.limit:
            return problems
        releases = table_models.ReleaseRow.__table__
        orphans = _stored(_raw_rows(self.connection, _STORED_FIELDS.where(
            _ROWS.c.seq.not_in(select(releases.c.seq))).order_by(_ROWS.c.seq).limit(self.limit)), self.bodies,
            self.event_keys)
        problems.extend(_check_reads(self.connection, orphans, True, self.variables))
        for seq, row in orphans.items():
            problems.append(f"event {seq} (release {row.release}): an accounting row has no release")
        return problems


# --------------------------------------------------------------------------
# Table 1 in bounded memory
# --------------------------------------------------------------------------


def table_in_chunks(index, dataset: str, objective, delta: Fraction, shown: int, chunk: int = 65_536):
    """`index.table()` with the release rows limited to the `shown` largest on the whole
    dataset (in recording order), computed `chunk` releases at a time (`large_table`)."""
    return large_table(index, dataset, objective, delta, shown, (), chunk)[0]


def large_table(index, dataset: str, objective, delta: Fraction, shown: int, accountants: Sequence[str],
                chunk: int = 65_536):
    """`index.table()` with the release rows limited to the `shown` largest on the whole
    dataset (in recording order), and `index_figures.table_figures` of the named accountants,
    computed `chunk` releases at a time, so memory does not grow with the history (the cells
    of Table 1 at a million releases over 100 variables would be 800 MB).

    The total row is summed exactly chunk by chunk (integer numerators over each
    component's common denominator, as `_ExactComponents` does), then families and
    releases with a choice are composed in through the exact path (`_others`). The
    accountants' inputs per variable are gathered the same way: event counts (integers),
    whether a cell is ∞, the latest recording and earliest publication among the releases
    reading it (a maximum and a minimum), then composed as `table_figures` composes them,
    in the same order, so the figures are the same. Returns (RiskTable, per-variable
    figures, whole-dataset figures); equal, on the rows it keeps, to `index.table()` and to
    `table_figures` (tests/store/test_scale.py). Leaves on the index `cell_value_ids`: the ids of the
    values other than zero that some cell of the whole table holds (np.unique of
    `index.table()`'s cells and whole-dataset column, zero left out)."""
    from collections import Counter

    from ..accounting import composition_figures, dp_events, figure_validity, index_figures, pld_accountant, renyi_curves, subset_composition
    from ..accounting.spend import UNBOUNDED, Spend
    from ..accounting.index_chunks import rows_of
    from ..accounting.risk_table import RiskTable

    n_rel, n_var = len(index.releases), len(index.variables)
    components = index._components
    n_values = len(index.values)
    per_value = np.zeros((n_values, n_var), dtype=np.int64)  # simple cells of each value id, per variable
    unbounded = np.zeros(n_var, dtype=bool)
    wide_float = np.asarray([np.inf if v.unbounded else float(v.own_epsilon(delta, index.allowance))
                             for v in index.values])
    dataset_wide = np.empty(n_rel, dtype=np.int64)
    n_guarantees, first_guarantee = index._guarantee_spans()
    single = index.simple & (n_guarantees <= 1)  # a cell is this release's one value, ∞ or 0
    single_value = np.where(first_guarantee >= 0, index.g_value[first_guarantee.clip(min=0)], index.NONE) \
        if len(index.g_value) else np.full(n_rel, index.NONE, dtype=np.int64)
    g_bounds = np.searchsorted(index.g_release, np.arange(0, n_rel + chunk, chunk).clip(max=n_rel))
    events = index_figures.index_events(index) if accountants else None
    if events is not None:
        n_events = max(len(events.events), 1)
        counts = np.zeros((n_var, n_events), dtype=np.int64)
        several = {}  # (variable, value id) -> cells of a value with several parts (index_figures._single: -2)
        multi = False  # some simple cell's value has several parts: table_figures composes column by column
        others = {}  # row -> its cells, for the rows the exact path composes (families, choices)
        row_event = np.where(events.mech >= 0, events.mech, events.value_event[single_value])

    def add_cells(j_cells, values, event_ids, weights):
        """Accountant counts for simple cells: per variable j, value id, event id, how many."""
        nonlocal multi
        keep = ~index.value_is_zero[values] & (event_ids >= 0)
        np.add.at(counts, (j_cells[keep], event_ids[keep]), weights[keep])
        multi = multi or bool((events.value_event[values][weights > 0] == -2).any())
        for j, value, weight in zip(j_cells[event_ids == -2], values[event_ids == -2], weights[event_ids == -2]):
            if weight:
                several[int(j), int(value)] = several.get((int(j), int(value)), 0) + int(weight)

    in_cells: set[int] = set()  # value ids of the cells the exact path makes (see index.cell_value_ids)
    one_rows = np.flatnonzero(single)
    # the common case: each of these releases has one guarantee, protecting exactly what it
    # reads (the index's protects matrix is its reads matrix and its guarantee is its own row):
    # every cell read is its value, none is ∞, so the cells are counted per (value, event)
    # and variable from the read entries by one bincount, not a chunk of matrices at a time
    fast = index.g_protects is index.reads and np.array_equal(first_guarantee[one_rows], one_rows)
    if fast:
        entry_rows, entry_cols = index.read_entries()
        width = np.bincount(entry_rows, minlength=n_rel)
        values = single_value[one_rows]
        dataset_wide[one_rows] = np.where(width[one_rows] == 0, index.ZERO_ID, values)  # (0: reads nothing)
        stride = 1 if events is None else n_events + 2
        group = np.full(n_rel, -1, dtype=np.int64)
        group[one_rows] = values * stride + (0 if events is None else row_event[one_rows] + 2)
        keys = group[entry_rows]
        kept = keys >= 0
        n_keys = int(group.max()) + 1 if len(one_rows) else 0
        cells_per_key = np.bincount(keys[kept] * n_var + entry_cols[kept], minlength=n_keys * n_var).reshape(
            n_keys, n_var)
        del keys, kept
        for key in np.flatnonzero(cells_per_key.any(axis=1)):
            column = cells_per_key[key]
            value = int(key) // stride
            per_value[value] += column
            if events is not None:
                add_cells(np.arange(n_var), np.full(n_var, value), np.full(n_var, int(key) % stride - 2), column)
    for k, start in enumerate(range(0, n_rel, chunk)):
        stop = min(start + chunk, n_rel)
        reads = index.reads[start:stop]
        one = single[start:stop]
        # releases with at most one guarantee (value v, protects P): the cell of a variable read
        # is v when P protects it, ∞ when not; the whole-dataset cost is v when P covers every
        # variable read, ∞ when not, 0 when nothing is read (docs/explanation/model.md#the-cost-of-one-release-on-a-subset), without the cells
        rows = np.flatnonzero(one) if not fast else np.zeros(0, dtype=np.int64)
        values = single_value[start:stop][rows]
        read = reads[rows]
        protects = np.zeros_like(read)
        has = first_guarantee[start:stop][rows] >= 0
        protects[has] = index.g_protects[first_guarantee[start:stop][rows][has]]
        covered, exposed = read & protects, read & ~protects
        unbounded |= exposed.any(axis=0)
        dataset_wide[start + rows] = np.where(~read.any(axis=1), index.ZERO_ID,
                                              np.where(exposed.any(axis=1), index.NONE, values))
        groups = values if events is None else values * (n_events + 2) + (row_event[start:stop][rows] + 2)
        for key in np.unique(groups):
            members = groups == key
            column = covered[members].sum(axis=0)
            value = int(values[members][0])
            per_value[value] += column
            if events is not None:
                event = int(row_event[start + rows[members][0]])
                add_cells(np.arange(n_var), np.full(n_var, value), np.full(n_var, event), column)
        # other releases (several guarantees, families, choices): their cells, as index.table makes them
        if not one.all():
            part = rows_of(index, start, stop, g_bounds[k], g_bounds[k + 1])
            cells = part.single_cells()
            rest = np.flatnonzero(~one)
            in_cells.update(np.unique(cells[rest]).tolist())
            dataset_wide[start + rest] = part.cost_ids(range(n_var))[rest]
            simple_rest = rest[index.simple[start + rest]]
            if len(simple_rest):
                simple = cells[simple_rest]
                unbounded |= (simple == components.unbounded_id).any(axis=0)
                np.add.at(per_value, (simple, np.broadcast_to(np.arange(n_var), simple.shape)), 1)
                if events is not None:
                    r_, j_ = np.nonzero(simple != index.ZERO_ID)
                    ids = simple[r_, j_]
                    mech = events.mech[start + simple_rest[r_]]
                    add_cells(j_, ids, np.where(mech >= 0, mech, events.value_event[ids]), np.ones(len(ids), np.int64))
            if events is not None:
                others.update((start + int(r), cells[r]) for r in rest if not index.simple[start + r])
    sums = {field: [sum(int(numerators[v]) * int(per_value[v, j]) for v in range(n_values) if per_value[v, j])
                    for j in range(n_var)] for field, _, numerators in components.components}
    totals = [UNBOUNDED if unbounded[j] else Spend(**{field: Fraction(sums[field][j], denominator)
                                                      for field, denominator, _ in components.components})
              for j in range(n_var)]
    if index.members or index.ambiguous:
        totals = [index._others(frozenset({name}), total, objective) for total, name in zip(totals, index.variables)]
    index.remember_cost_ids(range(n_var), dataset_wide)  # (the headline's protected subset, when it is every variable)
    # the value ids some cell of Table 1 holds, over every release (the report's basis reads them):
    # a simple release's covered cells (per_value), the others' cells, the whole-dataset column
    in_cells.update(np.flatnonzero(per_value.any(axis=1)).tolist(), np.unique(dataset_wide).tolist())
    found = np.asarray(sorted(in_cells), dtype=np.int64)
    index.cell_value_ids = found[~index.value_is_zero[found]]
    total_wide = index._others(frozenset(index.variables), index.exact_total(dataset_wide[index.simple]), objective)
    rows = np.sort(np.argsort(-wide_float[dataset_wide], kind="stable")[:shown])
    cells = np.concatenate([rows_of(index, int(r), int(r) + 1).single_cells()
                            for r in rows]) if len(rows) else np.zeros((0, n_var), dtype=np.int64)
    if hasattr(index.releases, "prefetch"):
        index.releases.prefetch(rows)  # the heads of the rows shown, not of every release
    table = RiskTable(dataset=dataset, variables=index.variables, releases=tuple(index.releases[int(r)] for r in rows),
                      values=index.values, cells=cells, dataset_wide=dataset_wide[rows], total=tuple(totals),
                      total_dataset_wide=total_wide, allowance=index.allowance)
    if events is None:
        return table, [], {}

    def figures(comp):
        case = figure_validity.ADAPTIVE
        makers = {"basic": composition_figures.basic_figure, "rdp": composition_figures.rdp_figure, "pld": pld_accountant.pld_figure}
        return {name: makers[name](comp, delta, case) for name in accountants}

    if events.events:
        curves = np.asarray([renyi_curves.event_curve(e) for e in events.events])
    else:
        curves = np.zeros((1, len(renyi_curves.ORDERS)))
    summed = counts @ curves
    exact_rows = np.asarray(sorted(others), dtype=np.int64)
    per_variable = []
    for j, name in enumerate(index.variables):
        found = Counter()
        for (jj, value), count in sorted(several.items()):  # as IndexEvents.composition meets them
            if jj == j:
                for event in dp_events.spend_events(index.values[value]):
                    found[event] += count
        for k in np.flatnonzero(counts[j]):
            found[events.events[k]] += int(counts[j, k])
        comp = subset_composition.Composition(totals[j], found, bool(unbounded[j]) or totals[j].unbounded, allowance=index.allowance)
        if others:  # families and releases with a choice, one by one
            column = np.full(n_rel, index.ZERO_ID, dtype=np.int64)
            column[exact_rows] = [others[int(r)][j] for r in exact_rows]
            extra = events.composition(column, frozenset({name}), Spend())
            comp.events.update(extra.events)
            comp.unbounded |= extra.unbounded
        elif not multi:
            comp.known_curve = summed[j]
        per_variable.append(figures(comp))
    wide = figures(events.composition(dataset_wide, frozenset(index.variables), total_wide))
    return table, per_variable, wide

