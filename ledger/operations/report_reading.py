"""The report's reading of the store by SQL: the audit events about a dataset (counted, listed, dated
by --as-of and --since), the lifecycle steps of its releases, releases read whole by id, and the
release rows as they stood at --as-of (the summarised report of a large ledger and its register).

Read here, below the API, beside the report's inputs (report_inputs.py); no Release is decoded but
those asked for by id. A register read in a snapshot of its own is refused when the ledger has
changed since the page was read (`same_ledger`: every change appends an event).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..core.lazy import lazy_callable, lazy_module
from ..core.records import Status
from ..store.as_of import DATASET_STATE_KINDS
from .report_inputs import AuditEvent, event_moment

if TYPE_CHECKING:
    from collections.abc import Sequence

audit_chain = lazy_module("ledger.store.audit_chain")  # the ORM, imported when a report is read
row_dicts = lazy_module("ledger.store.row_dicts")  # the ORM, imported when a report is read
table_models = lazy_module("ledger.store.table_models")  # the ORM, imported when a report is read
select = lazy_callable("sqlalchemy", "select")

# audit event kinds that change a release, and the status each leads to
LIFECYCLE_KINDS = {
    "release.approved": Status.APPROVED,
    "release.published": Status.PUBLISHED,
    "release.retracted": Status.RETRACTED,
    "release.cancelled": Status.CANCELLED,
}
DATASET_CHANGE_KINDS = ("dataset.", "variable.", "group.")  # events whose subject is the dataset: its changes
# the amendments of a recorded dataset (operations.amend.plan): the meeting pack's dataset changes
DATASET_AMENDMENTS = tuple(kind for kind in DATASET_STATE_KINDS if kind != "dataset.added")


@dataclass(frozen=True)
class Ending:
    """A retraction or cancellation: who did it, when, and why (docs/explanation/model.md#people-duties-and-the-book-of-record)."""

    action: str  # retracted / cancelled
    by: str
    at: datetime
    reason: str


def lifecycle_steps(events: Sequence[AuditEvent]) -> dict[str, dict]:
    """Release id -> the register's who/when/why of its later steps: who published it, and
    its retraction or cancellation (from the audit events; docs/explanation/model.md#people-duties-and-the-book-of-record)."""
    found: dict[str, dict] = {}
    for event in events:
        if event.kind == "release.published":
            found.setdefault(event.subject, {})["published_by"] = event.actor
        elif event.kind in ("release.retracted", "release.cancelled"):
            reason = event.data().get("reason") or "(no reason recorded)"
            found.setdefault(event.subject, {})["ended"] = Ending(
                LIFECYCLE_KINDS[event.kind].value, event.actor, event.at, reason)
    return found


def event_filter(dataset: str, when: datetime | None = None, until: str | None = None):
    """The SQL condition of report.dataset_events: the events about this dataset (its releases,
    families, caps, itself) and the ledger-wide ones (migrations, roles). With `when` (--as-of)
    and `until` (`when` as the events' text, as_of.event_text): the events dated by then about
    the releases in the ledger then (as `build_report` reads them after `as_it_stood`)."""
    from sqlalchemy import func, or_

    from ..store import as_of as rows_at
    from ..store.table_models import AccountingRow

    events = table_models.AuditEventRow.__table__
    releases = table_models.ReleaseRow.__table__
    families = table_models.FamilyRow.__table__
    prefix = dataset + "/"
    mine = select(releases.c.id).where(releases.c.dataset == dataset) if when is None else \
        select(AccountingRow.__table__.c.release).where(rows_at.in_ledger(dataset, when))
    about = or_(
        events.c.kind.startswith("release.", autoescape=True) & events.c.subject.in_(mine),
        events.c.kind.startswith("family.", autoescape=True)
        & events.c.subject.in_(select(families.c.id).where(families.c.dataset == dataset)),
        events.c.kind.startswith("cap.", autoescape=True)
        & (func.substr(events.c.subject, 1, len(prefix)) == prefix),
        or_(*(events.c.kind.startswith(kind, autoescape=True) for kind in DATASET_CHANGE_KINDS))
        & (events.c.subject == dataset),
        events.c.kind.startswith("ledger.", autoescape=True),
        events.c.kind.startswith("role.", autoescape=True),
    )
    return about if until is None else about & (events.c.at <= until)


def dated_by(session, until: str | None) -> tuple:
    """With `until` (--as-of as the events' text), the condition `seq <= s` for s the last event
    dated by then: a search of the most recent events dated by --as-of (`ORDER BY seq DESC LIMIT`)
    otherwise walks back from the last event over every event after --as-of, payloads and all
    (half the table at a million releases midway: seconds, more cold). s is found from
    EVENT_INDEX alone (it holds `at`; schema 12); on SQLite only, which otherwise scans the table
    for it (PostgreSQL plans it by itself: no condition)."""
    connection = session.connection()
    if until is None or connection.dialect.name != "sqlite":
        return ()
    from sqlalchemy import text

    table = table_models.AuditEventRow.__table__
    last = connection.execute(text(f"SELECT max(seq) FROM {table.name} INDEXED BY {table_models.EVENT_INDEX} "
                                   "WHERE at <= :until"), {"until": until}).scalar()
    return (table.c.seq <= (last if last is not None else -1),)


def events_of(session, statement) -> list:
    return [AuditEvent(seq, event_moment(at), actor, kind, subject, payload, digest)
            for seq, at, actor, kind, subject, payload, digest in session.connection().execute(statement)]


def event_columns():
    table = table_models.AuditEventRow.__table__
    return table, (table.c.seq, table.c.at, table.c.actor, table.c.kind, table.c.subject, table.c.payload,
                   table.c.hash)


def event_counts(session, dataset: str, when: datetime | None = None, until: str | None = None,
                 since: str | None = None) -> list[tuple]:
    """The dataset's events (report.dataset_events; with `when`, about the releases in the ledger
    then) counted by SQL in one pass, by kind and actor: (kind, actor, how many dated by `until`
    (all without it), the first seq of those, how many dated from `since` to `until`, how many
    moments are not UTC text). `until`, `since`: moments as the events' text (as_of.event_text),
    compared as text, which orders them when every moment compared is UTC text as `append_event`
    writes it (`YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00`; a whole second's "+" sorts before "."): the
    last count says whether it is (the caller reads every release otherwise). Without `until`
    and `since` no moment is read (an index-only count: EVENT_INDEX)."""
    from sqlalchemy import case, func, literal, not_, or_

    table, _ = event_columns()
    at = table.c.at
    then = (at <= until) if until is not None else None
    counted = func.count() if then is None else func.sum(case((then, 1), else_=0))
    first = func.min(table.c.seq if then is None else case((then, table.c.seq)))
    recent, odd = literal(0), literal(0)
    if since is not None:
        recent = func.sum(case(((at >= since) if then is None else (at >= since) & then, 1), else_=0))
    if until is not None or since is not None:
        utc = or_(at.like("____-__-__T__:__:__+00:00"), at.like("____-__-__T__:__:__.______+00:00"))
        odd = func.sum(case((not_(utc), 1), else_=0))
    return [tuple(row) for row in session.connection().execute(
        select(table.c.kind, table.c.actor, counted, first, recent, odd)
        .where(event_filter(dataset, when)).group_by(table.c.kind, table.c.actor))]


def whole_releases(session, ids) -> dict:
    from ..store.codec import release_from_dict

    table = table_models.ReleaseRow.__table__
    found = {}
    ids = list(ids)
    for start in range(0, len(ids), 500):
        for row in session.connection().execute(select(table).where(table.c.id.in_(ids[start:start + 500]))):
            found[row.id] = release_from_dict(row_dicts.release_row_dict(row))
    return found


def lifecycle_events(session, ids=None, until: str | None = None) -> dict[str, dict]:
    """report.lifecycle_steps from the publication, retraction and cancellation events only
    (of the releases `ids`, or of every release; with `until`, dated by then: as_of.event_text)."""
    table, columns_ = event_columns()
    kinds = ("release.published", "release.retracted", "release.cancelled")
    by_then = () if until is None else (table.c.at <= until,)
    statement = select(*columns_).where(table.c.kind.in_(kinds), *by_then).order_by(table.c.seq)
    if ids is not None:
        statement = statement.where(table.c.subject.in_(list(ids)))
        return lifecycle_steps(events_of(session, statement))
    found: dict[str, dict] = {}
    published = table_models.AuditEventRow.__table__.c
    for _kind, subject, actor in session.connection().execute(
            select(published.kind, published.subject, published.actor)
            .where(published.kind == "release.published", *by_then)):
        found.setdefault(subject, {})["published_by"] = actor
    ended = select(*columns_).where(table.c.kind.in_(kinds[1:]), *by_then).order_by(table.c.seq)
    for subject, steps in lifecycle_steps(events_of(session, ended)).items():
        found.setdefault(subject, {}).update(steps)
    return found


def titles_of(session, ids) -> dict[str, str]:
    table = table_models.ReleaseRow.__table__
    ids = list(ids)
    found = {}
    for start in range(0, len(ids), 500):
        found.update(session.connection().execute(
            select(table.c.id, table.c.title).where(table.c.id.in_(ids[start:start + 500]))).all())
    return found


def publishers(session, ids, until: str | None):
    """(release, who published it) from the publication events (dated by --as-of: `until`), in order."""
    table = table_models.AuditEventRow.__table__
    return session.connection().execute(
        select(table.c.subject, table.c.actor).where(
            table.c.kind == "release.published", table.c.subject.in_(list(ids)),
            *(() if until is None else (table.c.at <= until,))).order_by(table.c.seq)).all()


def register_moment(session, large):
    """A large report's register at --as-of: an as_of.Then (the status each release row had then;
    `when`: --as-of, aware) and --as-of as the audit events' text; (None, None) without --as-of.
    The events' moments are UTC text (gather_large took the large path only then:
    event_counts), so the moment's UTC text orders with them."""
    as_of = getattr(large, "as_of", None)
    if as_of is None:
        return None, None
    from ..store.as_of import Then, ended_at, event_text

    moment = as_of if as_of.tzinfo is not None else as_of.replace(tzinfo=UTC)
    connection = session.connection()
    return Then(connection, large.dataset.name, moment, ended_at(connection), None), event_text(moment)


def rows_as_they_stood(rows, then) -> list:
    """A page of large_register_csv's release rows (seq, id, title, status, ...) as they stood
    then (`then`, an as_of.Then): each with the status it had then, those not yet in the
    ledger left out."""
    kept = []
    for row in rows:
        status = then.row_status(row[1], row[3], row[11], row[13], row[14])
        if status is not None:
            kept.append(row if status.value == row[3] else (*row[:3], status.value, *row[4:]))
    return kept


def same_ledger(session, head: tuple[int, str] | None) -> None:
    """Refuse to read the register of a ledger that changed since the page was read (`head`: the
    last event the page's snapshot saw; None: nothing to compare). A large report's register is
    read in snapshots of its own (forked writers, new engines); every change appends an event, so
    the same last event means the same ledger, and a register of another moment is never written
    beside the page (exit 3: nothing written; run the report again)."""
    if head is None:
        return
    now = audit_chain.last_event(session)
    if now != head:
        from ..core.failures import LedgerUnavailable

        raise LedgerUnavailable(f"the ledger changed while the report was being written (its last event was "
                                f"{head[0]}, now {now[0]}): no report was written; run it again")
