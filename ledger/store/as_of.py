"""The accounting rows as the ledger stood at a moment (`--as-of`).

`table --as-of T`, `subset --as-of T` and `cap list --as-of T` read the accounting rows
(accounting_rows.py), which hold what the ledger at T needs without decoding a release (decoding every
release, `decoded_history.snapshot`, takes minutes and gigabytes at a million releases):

- which releases count at T. By `history.status_at`, a release counts (is charged) at T
  when it is in the ledger then, published by T or recorded by T (a release recorded
  without a moment is always in it), and was not cancelled by T. Its recording and
  publication moments are the rows' `recorded_us` and `published_us` (a release recorded
  as published without a publication date was published when recorded, as
  `release_times.published_moment` and `status_at` both read it); a cancellation is dated by
  its audit event (`history.ended`). The rows read are the charged rows and the cancelled
  ones (a release cancelled after T counted at T), masked by those moments (`rows_then`).
- the status each had then (a table's rows show it): `history.status_at` over the release
  row's lifecycle columns, read only for the rows shown (`Then.heads`), and for the few
  releases the exact path reads whole (`Then.release`).

What the accountants read of a release does not change with T, with one exception: a
release recorded as published with neither a recording nor a publication moment is
published at `datetime.min` now, but at T it is not yet published (`status_at` has no
moment to date it by), so it has no publication moment then. `rows_then` says so.

The dataset and its caps at T (`state_then`): history.state_as_of over the dataset's and caps'
audited changes (`state_changes`: each event carries the whole state after it), the index put
over the variables then (ledger_index.index_over). Every --as-of view reads them from here.

The figures are the snapshot path's to the last bit (tests/store/test_as_of_rows.py compares
both with hypothesis, releases cancelled, retracted and amended after T included). Moments
are compared as the rows' float seconds (`row_arrays._stamps`: microseconds / 10**6, correctly
rounded), which order them exactly while a microsecond is more than half a float's spacing
(before about the year 2112); past that `rows_then` gives None and the caller decodes the
releases as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from ..core.lazy import lazy_module
from ..core.records import Release, Status
from .codec import cap_from_dict, dataset_from_dict

np = lazy_module("numpy")
# the store's tables and rows, imported when the rows are first read: `report` imports this module at
# start-up, and its --help imports no database library
configuration = lazy_module("ledger.store.configuration")
row_arrays = lazy_module("ledger.store.row_arrays")
table_models = lazy_module("ledger.store.table_models")

_EXACT_SECONDS = 4e9  # |seconds| below which a microsecond is more than twice a float's spacing (2**52 / 10**6)
_ENDING = ("release.retracted", "release.cancelled")
_ENDED = (Status.RETRACTED.value, Status.CANCELLED.value)  # the statuses whose end `status_at` reads
_SEEN_KEPT = 100_000
_UNSEEN = object()


@dataclass(frozen=True)
class _Lifecycle:
    """What `history.status_at` reads of a release, from its row."""

    id: str
    status: Status
    recorded_at: datetime | None
    approved_at: datetime | None
    published_at: datetime | None


class Then:
    """The ledger at `when`: the status each release had then (`history.status_at`)."""

    def __init__(self, connection, dataset: str, when: datetime, ended: Mapping[str, datetime], seqs,
                 published=None, at: float | None = None):
        self.connection, self.dataset, self.when, self.ended, self.seqs = connection, dataset, when, ended, seqs
        # the kept rows' publication moments as `rows_then` leaves them (seconds; inf: not published
        # by any moment), and `when` in the same seconds: `heads` reads the status then from them
        self.published, self.at = published, at
        self._seen: dict[tuple, Status | None] = {}  # row_status by what it reads (see there)

    def status(self, release) -> Status:
        from ..accounting.history import status_at

        return status_at(release, self.when, self.ended)

    def row_status(self, release_id: str, status: str, recorded_at: str | None, approved_at: str | None,
                   published_at: str | None) -> Status | None:
        """`status` of a release row's lifecycle columns (the stored texts; None: not yet in the ledger).
        `history.status_at` reads of a release its status, its three moments and, only when it is
        retracted or cancelled, when it ended: the answer is kept by those (a register at --as-of
        asks it of every release; releases recorded together share their moments), at most
        _SEEN_KEPT answers at a time."""
        end = self.ended.get(release_id) if status in _ENDED else None
        key = (status, recorded_at, approved_at, published_at, end)
        found = self._seen.get(key, _UNSEEN)
        if found is _UNSEEN:
            if len(self._seen) >= _SEEN_KEPT:
                self._seen.clear()
            found = self._seen[key] = self.status(_Lifecycle(release_id, Status(status), _moment(recorded_at),
                                                             _moment(approved_at), _moment(published_at)))
        return found

    def release(self, release: Release) -> Release:
        """The whole release with the status it had then (the exact path reads a few whole)."""
        status = self.status(release)
        return release if status is release.status else replace(release, status=status)

    def heads(self, seqs: list[int] | None):
        """index_from_rows.index_for's `heads` of the rows kept: with `seqs`, (seq, id, title, status then)
        rows of those; else (ids, titles, statuses then) of every row kept, in seq order."""
        from sqlalchemy import select


        table = table_models.ReleaseRow.__table__
        fields = (table.c.seq, table.c.id, table.c.title, table.c.status, table.c.recorded_at, table.c.approved_at,
                  table.c.published_at)

        def head(row) -> tuple:
            seq, rid, title, status, recorded, approved, published = row
            return seq, rid, title, self.row_status(rid, status, recorded, approved, published).value

        if seqs is not None:
            found = []
            for start in range(0, len(seqs), 500):
                found += [head(row) for row in self.connection.execute(
                    select(*fields).where(table.c.seq.in_(list(seqs[start:start + 500]))))]
            return found
        if self.published is None:
            kept = set(self.seqs.tolist())
            rows = [head(row) for row in self.connection.execute(
                select(*fields).where(table.c.dataset == self.dataset).order_by(table.c.seq)) if row[0] in kept]
            return [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]
        return self._every_head()

    def _every_head(self):
        """heads(None) from the accounting rows (id, title, status now), not the release rows: the
        status then by `history.status_at`'s cases over the kept rows' publication moments. A row
        published by then (its moment as `status_at` takes it: the rows' `published`) was
        published then, or retracted when its retraction came by then; a row not published by
        then was recorded by then and not cancelled by then (`rows_then` kept it), so it was
        approved when approved by then, else planned: a release planned now was never approved,
        and the others' approval moments are read (those rows only). At a million releases the
        release rows' moments parsed row by row took ten seconds."""
        from sqlalchemy import select


        rows = row_arrays._raw_rows(self.connection, select(row_arrays._ROWS.c.seq, row_arrays._ROWS.c.release, row_arrays._ROWS.c.title, row_arrays._ROWS.c.status)
                         .where(row_arrays._ROWS.c.dataset == self.dataset).order_by(row_arrays._ROWS.c.seq))
        seqs = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        rows = [rows[k] for k in np.flatnonzero(np.isin(seqs, self.seqs)).tolist()]
        published_by = (self.published <= self.at).tolist()
        retracted, planned = Status.RETRACTED.value, Status.PLANNED.value
        statuses: list[str] = []
        undecided: dict[int, int] = {}  # seq -> position: not published then, approved now or later
        for k, ((seq, rid, _, status), published) in enumerate(zip(rows, published_by)):
            if published:
                end = self.ended.get(rid) if status == retracted else None
                statuses.append(retracted if end is not None and end <= self.when else Status.PUBLISHED.value)
            else:
                statuses.append(planned)
                if status != planned:
                    undecided[seq] = k
        table = table_models.ReleaseRow.__table__
        chosen = sorted(undecided)
        for start in range(0, len(chosen), 500):
            for seq, approved in self.connection.execute(select(table.c.seq, table.c.approved_at).where(
                    table.c.seq.in_(chosen[start:start + 500]))):
                moment = _moment(approved)
                if moment is not None and _aware(moment) <= self.when:
                    statuses[undecided[seq]] = Status.APPROVED.value
        return [r[1] for r in rows], [r[2] for r in rows], statuses


    def ids(self) -> list[str]:
        """The ids of the rows kept, in seq order (a subset lists the releases charging it)."""
        from sqlalchemy import select


        rows = row_arrays._raw_rows(self.connection, select(row_arrays._ROWS.c.seq, row_arrays._ROWS.c.release)
                         .where(row_arrays._ROWS.c.dataset == self.dataset).order_by(row_arrays._ROWS.c.seq))
        seqs = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return [rows[k][1] for k in np.flatnonzero(np.isin(seqs, self.seqs)).tolist()]


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _moment(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)  # (as codec.parse_time reads it)


def ended_at(connection) -> dict[str, datetime]:
    """Release id -> when it was retracted or cancelled (`history.ended`), from those events only
    (an index search: table_models.EVENT_INDEX)."""
    from sqlalchemy import select

    from ..accounting.history import ended
    from ..input.utc_moments import parse_moment

    table = table_models.AuditEventRow.__table__
    rows = connection.execute(select(table.c.kind, table.c.subject, table.c.at)
                              .where(table.c.kind.in_(_ENDING)).order_by(table.c.seq))
    return ended((kind, subject, parse_moment(at)) for kind, subject, at in rows)


def rows_then(connection, dataset: str, rows, when: datetime):
    """(the rows charged at `when`, a `Then`) from `rows` (row_arrays._Rows of the dataset's charged
    and cancelled rows, in seq order, with their moments); None when a moment lies where floats
    no longer order microseconds exactly (see the module docstring)."""
    from sqlalchemy import select


    moment = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    at = row_arrays.micros(moment) / 10**6
    recorded, published = rows.recorded, rows.published
    finite = np.concatenate([recorded[np.isfinite(recorded)], published[np.isfinite(published)], [at]])
    if len(finite) and np.abs(finite).max() >= _EXACT_SECONDS:
        return None
    ended = ended_at(connection)
    cancelled = [seq for seq, rid in connection.execute(
        select(row_arrays._ROWS.c.seq, row_arrays._ROWS.c.release).where(row_arrays._ROWS.c.dataset == dataset,
                                                   row_arrays._ROWS.c.status == Status.CANCELLED.value))
        if ended.get(rid) is not None and ended[rid] <= moment]
    published_by = published <= at
    keep = (published_by | (recorded <= at)) & ~(np.isin(rows.seq, cancelled) & ~published_by)
    # recorded as published with no moment at all: published at datetime.min now, not yet then
    published = np.where(np.isneginf(recorded) & np.isneginf(published), np.inf, published)
    kept = _masked(rows, keep, published)
    return kept, Then(connection, dataset, moment, ended, kept.seq, kept.published, at)


def _masked(rows, keep, published):
    """The rows of `keep` (row_arrays._Rows: a row's place among its dict keys and among the rows
    with a first guarantee renumbered)."""
    place = np.cumsum(keep) - 1

    def kept_dict(found: Mapping[int, str]) -> dict[int, str]:
        return {int(place[i]): value for i, value in found.items() if keep[i]}

    with_value = rows.value >= 0
    return replace(
        rows, seq=rows.seq[keep], family=kept_dict(rows.family), reads=rows.reads[keep], value=rows.value[keep],
        protects=rows.protects[keep[with_value]], more=kept_dict(rows.more), event=rows.event[keep],
        charged_by_event=rows.charged_by_event[keep], recorded=rows.recorded[keep], published=published[keep],
        ids=None if rows.ids is None else [i for i, k in zip(rows.ids, keep.tolist()) if k])



def in_ledger(dataset: str, when: datetime):
    """The SQL condition on the accounting rows (accounting_rows._ROWS) of the releases of `dataset` in the
    ledger at `when` (any status then, cancelled ones too): published by then, or recorded by then
    (a release recorded without a moment always), as `rows_then` keeps them before it drops the
    cancelled ones; exact, on the rows' whole microseconds."""
    from sqlalchemy import and_, case, func, or_


    at = row_arrays.micros(when)
    recorded = func.coalesce(row_arrays._ROWS.c.recorded_us, row_arrays._BEFORE_ANY)
    published = func.coalesce(case((and_(row_arrays._ROWS.c.published_us.is_(None), row_arrays._ROWS.c.status.in_(sorted(row_arrays._PUBLISHED))),
                                    recorded), else_=row_arrays._ROWS.c.published_us), row_arrays._AFTER_ALL)
    return and_(row_arrays._ROWS.c.dataset == dataset, or_(recorded <= at, published <= at))


def event_text(when: datetime) -> str:
    """A moment as the audit events' text (`append_event`: the ISO 8601 text of a UTC moment; a naive
    moment is UTC), for comparing with them as text (store/report_queries.py: event_counts says
    when that orders them)."""
    moment = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


DATASET_STATE_KINDS = ("dataset.added", "dataset.self_approval", "dataset.described", "variable.added", "variable.categories_added",
                       "variable.described", "variable.reclassified", "variable.removed", "group.set",
                       "group.removed")  # each carries the dataset's whole state after it (amend_dataset)
CAP_STATE_KINDS = ("cap.set", "cap.removed")


def state_changes(session, dataset: str) -> list:
    """The changes of `dataset` and its caps (history.StateChange), in chain order, from their
    audit events (read through the (kind, subject) index)."""
    import json

    from sqlalchemy import func, select

    from ..input.utc_moments import parse_moment

    table = table_models.AuditEventRow.__table__
    prefix = dataset + "/"
    rows = session.connection().execute(
        select(table.c.seq, table.c.kind, table.c.subject, table.c.at, table.c.payload).where(
            ((table.c.kind.in_(DATASET_STATE_KINDS)) & (table.c.subject == dataset))
            | ((table.c.kind.in_(CAP_STATE_KINDS)) & (func.substr(table.c.subject, 1, len(prefix)) == prefix)))
        .order_by(table.c.seq))
    return [state_change(kind, subject, parse_moment(at), json.loads(payload))
            for _seq, kind, subject, at, payload in rows]


def state_change(kind: str, subject: str, at: datetime, payload: dict):
    """One audit event (already parsed) as a history.StateChange."""
    from ..accounting.history import StateChange

    if kind in CAP_STATE_KINDS:
        body = payload.get("cap")
        return StateChange(at, kind, cap=(subject.split("/", 1)[1], None if body is None else cap_from_dict(body)))
    return StateChange(at, kind, dataset=dataset_from_dict(payload["dataset"]))


def read_variables(index, names) -> set[str]:
    """Those of `names` some release of a LedgerIndex reads (a column each, not the whole matrix)."""
    columns = [index.column[name] for name in names if name in index.column]
    if not columns:
        return set()
    return {index.variables[j] for j, read in zip(columns, index.reads[:, columns].any(axis=0).tolist()) if read}


def state_then(session, dataset, when: datetime, index=None):
    """(the dataset then, its caps then, `index` over the dataset's variables then) at `when`
    (history.state_as_of over the dataset's recorded changes; `index`: of the releases charged
    then, whose reads the dataset then keeps; ledger_index.index_over)."""
    from ..accounting.ledger_index import index_over
    from ..accounting.history import state_as_of

    caps, changes = configuration.caps(session, dataset.name), state_changes(session, dataset.name)
    then = state_as_of(dataset, caps, changes, when)
    if index is None:
        return then.dataset, then.caps, None
    missing = set(dataset.variable_names) - set(then.dataset.variable_names)  # (added after `when`)
    read = read_variables(index, missing)
    if read:  # read by a release charged then (history recorded later): there then
        then = state_as_of(dataset, caps, changes, when, read)
    return then.dataset, then.caps, index_over(index, then.dataset.variable_names)
