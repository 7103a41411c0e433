"""The meeting pack (`report --since`) of a large ledger, from SQL and the accounting rows: what
changed since a moment (up to --as-of), without reading every release.

Invariants: the figures are those `meeting_pack` computes from the whole releases (tested, to the
figure): each kind of change counted in full and its CHANGES_LISTED most recent listed; each cap's
figure just before `since` from the index of the rows charged then; None where the rows cannot
say it exactly (the caller then reads every release).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select
from sqlmodel import Session

from ..core.records import Dataset
from ..store import configuration, table_models
from . import meeting_pack as pack
from .report_inputs import event_moment
from .report_reading import DATASET_AMENDMENTS, dated_by, event_columns, event_filter, events_of, publishers, titles_of


CHANGES_LISTED = 50  # the most recent changes of each kind a large report's meeting pack lists


def large_meeting(session: Session, dataset: Dataset, index, families, caps, since: datetime,
                  as_of: datetime | None, until: str | None, counts: list[tuple], checks=None):
    """report.meeting_pack of a large ledger (--since), from SQL and the accounting rows: the
    dataset's events since then (up to --as-of) counted, and of each kind of change the
    CHANGES_LISTED most recent listed (`MeetingPack.counts` has how many there are: the
    complete register beside the report has every release's lifecycle); approvals and
    publications by the releases' own dates, read from the release rows whose date may be
    that late (`_dated_since`); each cap's figure just before `since` over the index of the
    rows charged then (index_from_rows.index_for with that moment, decided as `meeting_pack` decides
    it: meeting_pack.cap_moves); `checks`: every cap as the Caps section decides it now (at --as-of),
    computed over `index` when None. `index`: the rows
    charged now (at --as-of); `until`: --as-of as the events' text; `counts`: event_counts with
    `since` (every moment compared is UTC text: gather_large checked it). None when the rows
    cannot say it exactly (see gather_large)."""
    from datetime import timedelta

    from sqlalchemy import and_, func

    from ..accounting.ledger_index import index_over
    from ..core.records import Status
    from ..store import as_of as rows_at
    from ..store import index_from_rows
    from .cap_accounting import checks_from_index

    connection = session.connection()
    since_text = rows_at.event_text(since)
    table, columns_ = event_columns()
    about = and_(event_filter(dataset.name, as_of, until), table.c.at >= since_text, *dated_by(session, until))
    events = sum(row[4] for row in counts)
    titles = titles_of

    def changes_of(kind: str, status_of) -> tuple[tuple, int]:
        chosen = about & (table.c.kind == kind)
        count = sum(row[4] for row in counts if row[0] == kind)
        # the seqs of the most recent first, from EVENT_INDEX alone (it holds every column `chosen`
        # reads), then those rows: SQLite otherwise read every event of the kind whole to sort
        # them (a million release.recorded at a million releases: 5 s)
        latest = select(table.c.seq).where(chosen).order_by(table.c.seq.desc()).limit(CHANGES_LISTED)
        listed = events_of(session, select(*columns_).where(table.c.seq.in_(latest)).order_by(table.c.seq))
        named = titles(session, [e.subject for e in listed])
        return tuple(pack.Change(e.subject, named.get(e.subject, ""), e.at, e.actor, status_of(e))
                     for e in listed), count

    recorded = changes_of("release.recorded", lambda e: e.data()["release"]["status"])
    retracted = changes_of("release.retracted", lambda e: Status.RETRACTED.value)
    cancelled = changes_of("release.cancelled", lambda e: Status.CANCELLED.value)
    approved, published = _dated_since(session, dataset.name, since, as_of, index.then, until)
    before = index_from_rows.index_for(session, configuration.write_context(session).datasets[dataset.name].variable_names,
                               dataset.name, families, False, None, True, when=since - timedelta(microseconds=1))
    if before is None:
        return None
    before = index_over(before, index.variables)  # (the columns of `index`: the dataset at --as-of)
    if checks is None:  # the Caps section's figures (gather_large gives them)
        checks = checks_from_index(list(caps), index)
    prefix = dataset.name + "/"
    set_at = {subject[len(prefix):]: event_moment(at) for subject, at in connection.execute(
        select(table.c.subject, table.c.at).where(table.c.kind == "cap.set",
                                                  func.substr(table.c.subject, 1, len(prefix)) == prefix,
                                                  *(() if until is None else (table.c.at <= until,)))
        .order_by(table.c.seq))}
    # the caps as they stood just before `since` (each against its limit then), and those removed since
    caps_then, removed = pack.caps_in_period(rows_at.state_changes(session, dataset.name), dataset.variable_names,
                                                since, as_of, dataset.allowance)
    moves = pack.cap_moves(caps, checks, checks_from_index(list(caps_then), before), set_at, since, removed,
                              dataset.public_names, before, index)
    # the dataset's own changes since then (report.meeting_pack's dataset_changes): the most recent
    changed = (table.c.kind.in_(DATASET_AMENDMENTS), table.c.subject == dataset.name, table.c.at >= since_text,
               *(() if until is None else (table.c.at <= until,)))
    dataset_count = connection.execute(select(func.count()).where(*changed)).scalar_one()
    dataset_changes = tuple(pack.dataset_change(e.at, e.actor, e.kind, e.data()) for e in events_of(
        session, select(*columns_).where(*changed).order_by(table.c.seq.desc()).limit(CHANGES_LISTED))[::-1])
    sections = (recorded, approved, published, retracted, cancelled)
    return pack.MeetingPack(
        since=since, events=events, recorded=recorded[0], approved=approved[0], published=published[0],
        retracted=retracted[0], cancelled=cancelled[0], caps=moves,
        counts=tuple(count for _, count in sections), dataset_changes=dataset_changes, dataset_count=dataset_count)


def _dated_since(session: Session, dataset: str, since: datetime, as_of: datetime | None, then,
                 until: str | None):
    """The meeting pack's approvals and publications: the releases (in the ledger at --as-of)
    approved, and published, since `since` (and by --as-of), by their own dates, each as
    (the CHANGES_LISTED most recent, sorted by date as `meeting_pack` sorts them; how many).
    Read from the release rows whose date text may be that late (its day not before the day
    before `since`'s: a stored moment's offset is under a day), then compared exactly."""
    from datetime import timedelta

    from sqlalchemy import func, or_

    from ..core.records import Status
    from ..store.codec import parse_time

    table = table_models.ReleaseRow.__table__
    c = table.c
    day = (since.astimezone(UTC) - timedelta(days=1)).date().isoformat()
    dated = {"approved": [], "published": []}
    rows = session.connection().execute(
        select(c.id, c.title, c.status, c.recorded_at, c.recorded_by, c.approved_at, c.approved_by, c.published_at)
        .where(c.dataset == dataset, or_(func.substr(c.approved_at, 1, 10) >= day,
                                         func.substr(c.published_at, 1, 10) >= day))
        .order_by(c.seq))
    for rid, title, status, recorded_at, recorded_by, approved_at, approved_by, published_at in rows:
        approved, published = pack.aware(parse_time(approved_at)), pack.aware(parse_time(published_at))
        if then is not None and then.row_status(rid, status, recorded_at, approved_at, published_at) is None:
            continue  # not in the ledger at --as-of
        if approved is not None and approved >= since and (as_of is None or approved <= as_of):
            dated["approved"].append((approved, rid, title, approved_by or ""))
        if published is not None and published >= since and (as_of is None or published <= as_of):
            dated["published"].append((published, rid, title, recorded_by))
    found = []
    for kind, status in (("approved", Status.APPROVED), ("published", Status.PUBLISHED)):
        changes = sorted(dated[kind], key=lambda change: change[0])  # (stable: recording order among equals)
        listed = changes[-CHANGES_LISTED:]
        actors = {}
        if kind == "published" and listed:  # who published it (the publication's event), else who recorded it
            actors = {subject: actor for subject, actor in publishers(session, [x[1] for x in listed], until)}
        found.append((tuple(pack.Change(rid, title, at, actors.get(rid, by), status.value)
                            for at, rid, title, by in listed), len(changes)))
    return found[0], found[1]
