"""The meeting pack (`report --since`) of a large ledger, from SQL and the accounting rows: what
changed since a moment (up to --as-of), without reading every release.

Invariants: the figures are those `meeting_pack` computes from the whole releases (tested, to the
figure): each kind of change counted in full and its CHANGES_LISTED most recent listed; each cap's
figure just before `since` from the index of the rows charged then; None where the rows cannot
say it exactly (the caller then reads every release).
"""

from __future__ import annotations

from datetime import UTC, datetime

from typing import TYPE_CHECKING

from ..core.records import Dataset
from ..store import configuration, report_queries
from . import meeting_pack as pack
from .report_inputs import event_moment
from .report_reading import DATASET_AMENDMENTS, events_of

if TYPE_CHECKING:
    from ..store.sessions import Session


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
    `since` (every moment compared is UTC text: large_report.read_large checked it). None when the
    rows cannot say it exactly (see large_report.read_large)."""
    from datetime import timedelta

    from ..accounting.ledger_index import index_over
    from ..core.records import Status
    from ..store import as_of as rows_at
    from ..store import index_from_rows
    from .cap_accounting import checks_from_index

    since_text = rows_at.event_text(since)
    events = sum(row[4] for row in counts)

    def changes_of(kind: str, status_of) -> tuple[tuple, int]:
        count = sum(row[4] for row in counts if row[0] == kind)
        listed = events_of(report_queries.latest_of_kind(session, dataset.name, kind, as_of, until, since_text,
                                                         CHANGES_LISTED))
        named = report_queries.titles_of(session, [e.subject for e in listed])
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
    if checks is None:  # the Caps section's figures (large_report.read_large gives them)
        checks = checks_from_index(list(caps), index)
    prefix = dataset.name + "/"
    set_at = {subject[len(prefix):]: event_moment(at)
              for subject, at in report_queries.caps_set_at(session, dataset.name, until)}
    # the caps as they stood just before `since` (each against its limit then), and those removed since
    caps_then, removed = pack.caps_in_period(rows_at.state_changes(session, dataset.name), dataset.variable_names,
                                                since, as_of, dataset.allowance)
    moves = pack.cap_moves(caps, checks, checks_from_index(list(caps_then), before), set_at, since, removed,
                              dataset.public_names, before, index)
    # the dataset's own changes since then (report.meeting_pack's dataset_changes): the most recent
    dataset_count, changed = report_queries.dataset_changes(session, dataset.name, DATASET_AMENDMENTS, since_text,
                                                            until, CHANGES_LISTED)
    dataset_changes = tuple(pack.dataset_change(e.at, e.actor, e.kind, e.data()) for e in events_of(changed))
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

    from ..core.records import Status
    from ..store.codec import parse_time

    day = (since.astimezone(UTC) - timedelta(days=1)).date().isoformat()
    dated: dict[str, list] = {"approved": [], "published": []}
    rows = report_queries.dated_releases(session, dataset, day)
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
            actors = dict(report_queries.publishers(session, [x[1] for x in listed], until))
        found.append((tuple(pack.Change(rid, title, at, actors.get(rid, by), status.value)
                            for at, rid, title, by in listed), len(changes)))
    return found[0], found[1]
