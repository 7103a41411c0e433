"""The report's queries: the audit events about a dataset (counted, listed, dated by --as-of and
--since), the release rows a summarised report and its register read, each a named SELECT.

Every function returns plain values: an event is the tuple of `EVENT_FIELDS` (seq, at, actor, kind,
subject, payload, hash), as stored; a release is read whole (codec) only when asked for by id or by
the register's pages. Moments are compared as the events' text (as_of.event_text), which orders them
when every moment compared is UTC text as `append_event` writes it: `event_counts` says whether it is.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Text, and_, case, cast, func, literal, not_, or_, select, text

from . import as_of as rows_at
from . import table_models
from ..core.records import DATASET_CHANGE_KINDS
from .as_of import Then, ended_at, event_text
from .codec import release_from_dict
from .row_arrays import stream_raw_rows
from .row_dicts import release_row_dict
from .table_models import AccountingRow

EVENTS = table_models.AuditEventRow.__table__
RELEASES = table_models.ReleaseRow.__table__
FAMILIES = table_models.FamilyRow.__table__
EVENT_FIELDS = (EVENTS.c.seq, EVENTS.c.at, EVENTS.c.actor, EVENTS.c.kind, EVENTS.c.subject, EVENTS.c.payload,
                EVENTS.c.hash)
BATCH = 500  # ids asked for in one IN (...)


def _by(until: str | None) -> tuple:
    return () if until is None else (EVENTS.c.at <= until,)


def _of_caps(dataset: str):
    prefix = dataset + "/"
    return func.substr(EVENTS.c.subject, 1, len(prefix)) == prefix


def event_filter(dataset: str, when: datetime | None = None, until: str | None = None):
    """The condition of report.dataset_events: the events about this dataset (its releases,
    families, caps, itself) and the ledger-wide ones (migrations, roles). With `when` (--as-of)
    and `until` (`when` as the events' text, as_of.event_text): the events dated by then about
    the releases in the ledger then (as `build_report` reads them after `as_it_stood`)."""
    mine = select(RELEASES.c.id).where(RELEASES.c.dataset == dataset) if when is None else \
        select(AccountingRow.__table__.c.release).where(rows_at.in_ledger(dataset, when))
    kind = EVENTS.c.kind
    about = or_(
        kind.startswith("release.", autoescape=True) & EVENTS.c.subject.in_(mine),
        kind.startswith("family.", autoescape=True)
        & EVENTS.c.subject.in_(select(FAMILIES.c.id).where(FAMILIES.c.dataset == dataset)),
        kind.startswith("cap.", autoescape=True) & _of_caps(dataset),
        or_(*(kind.startswith(k, autoescape=True) for k in DATASET_CHANGE_KINDS)) & (EVENTS.c.subject == dataset),
        kind.startswith("ledger.", autoescape=True),
        kind.startswith("role.", autoescape=True),
    )
    return about if until is None else about & (EVENTS.c.at <= until)


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
    last = connection.execute(text(f"SELECT max(seq) FROM {EVENTS.name} INDEXED BY {table_models.EVENT_INDEX} "
                                   "WHERE at <= :until"), {"until": until}).scalar()
    return (EVENTS.c.seq <= (last if last is not None else -1),)


def _rows(session, statement) -> list[tuple]:
    return [tuple(row) for row in session.connection().execute(statement)]


def every_event(session) -> list[tuple]:
    """The whole audit chain, in order."""
    return _rows(session, select(*EVENT_FIELDS).order_by(EVENTS.c.seq))


def event_counts(session, dataset: str, when: datetime | None = None, until: str | None = None,
                 since: str | None = None) -> list[tuple]:
    """The dataset's events (report.dataset_events; with `when`, about the releases in the ledger
    then) counted in one pass, by kind and actor: (kind, actor, how many dated by `until` (all
    without it), the first seq of those, how many dated from `since` to `until`, how many
    moments are not UTC text). `until`, `since`: moments as the events' text, compared as text
    (a whole second's "+" sorts before "."): the last count says whether every moment compared
    is UTC text (the caller reads every release otherwise). Without `until` and `since` no moment
    is read (an index-only count: EVENT_INDEX)."""
    at = EVENTS.c.at
    then = (at <= until) if until is not None else None
    counted = func.count() if then is None else func.sum(case((then, 1), else_=0))
    first = func.min(EVENTS.c.seq if then is None else case((then, EVENTS.c.seq)))
    recent, odd = literal(0), literal(0)
    if since is not None:
        recent = func.sum(case(((at >= since) if then is None else (at >= since) & then, 1), else_=0))
    if until is not None or since is not None:
        utc = or_(at.like("____-__-__T__:__:__+00:00"), at.like("____-__-__T__:__:__.______+00:00"))
        odd = func.sum(case((not_(utc), 1), else_=0))
    return _rows(session, select(EVENTS.c.kind, EVENTS.c.actor, counted, first, recent, odd)
                 .where(event_filter(dataset, when)).group_by(EVENTS.c.kind, EVENTS.c.actor))


def latest_events(session, dataset: str, when: datetime | None, until: str | None, limit: int) -> list[tuple]:
    """The `limit` most recent events about the dataset dated by `until`, oldest first."""
    return _rows(session, select(*EVENT_FIELDS).where(event_filter(dataset, when, until), *dated_by(session, until))
                 .order_by(EVENTS.c.seq.desc()).limit(limit))[::-1]


def event_moment_text(session, seq: int) -> str:
    """The stored moment of event `seq`."""
    return session.connection().execute(select(EVENTS.c.at).where(EVENTS.c.seq == seq)).scalar_one()


def last_event_dated_by(session, until: str | None) -> tuple | None:
    """The chain's last event (dated by `until`), or None."""
    found = _rows(session, select(*EVENT_FIELDS).where(*_by(until), *dated_by(session, until))
                  .order_by(EVENTS.c.seq.desc()).limit(1))
    return found[0] if found else None


def cap_events(session, dataset: str, until: str | None) -> list[tuple]:
    """The dataset's cap.set and cap.removed events (dated by `until`), in order."""
    return _rows(session, select(*EVENT_FIELDS).where(EVENTS.c.kind.in_(("cap.set", "cap.removed")),
                                                      _of_caps(dataset), *_by(until)).order_by(EVENTS.c.seq))


def caps_set_at(session, dataset: str, until: str | None) -> list[tuple[str, str]]:
    """(subject, stored moment) of the dataset's cap.set events (dated by `until`), in order."""
    return _rows(session, select(EVENTS.c.subject, EVENTS.c.at).where(
        EVENTS.c.kind == "cap.set", _of_caps(dataset), *_by(until)).order_by(EVENTS.c.seq))


def latest_of_kind(session, dataset: str, kind: str, when: datetime | None, until: str | None, since: str,
                   limit: int) -> list[tuple]:
    """The `limit` most recent events of `kind` about the dataset dated from `since` to `until`,
    oldest first. Their seqs are picked from EVENT_INDEX alone (it holds every column the condition
    reads), then those rows read: SQLite otherwise reads every event of the kind whole to sort them
    (a million release.recorded at a million releases: 5 s)."""
    chosen = and_(event_filter(dataset, when, until), EVENTS.c.at >= since, *dated_by(session, until)) \
        & (EVENTS.c.kind == kind)
    latest = select(EVENTS.c.seq).where(chosen).order_by(EVENTS.c.seq.desc()).limit(limit)
    return _rows(session, select(*EVENT_FIELDS).where(EVENTS.c.seq.in_(latest)).order_by(EVENTS.c.seq))


def _changed(dataset: str, kinds, since: str, until: str | None) -> tuple:
    return (EVENTS.c.kind.in_(kinds), EVENTS.c.subject == dataset, EVENTS.c.at >= since, *_by(until))


def dataset_changes(session, dataset: str, kinds, since: str, until: str | None, limit: int
                    ) -> tuple[int, list[tuple]]:
    """(how many events of `kinds` about the dataset itself are dated from `since` to `until`,
    the `limit` most recent of them, oldest first)."""
    changed = _changed(dataset, kinds, since, until)
    count = session.connection().execute(select(func.count()).where(*changed)).scalar_one()
    return count, _rows(session, select(*EVENT_FIELDS).where(*changed).order_by(EVENTS.c.seq.desc())
                        .limit(limit))[::-1]


def lifecycle_events(session, ids, until: str | None) -> list[tuple]:
    """The publication, retraction and cancellation events of the releases `ids` (dated by `until`), in order."""
    kinds = ("release.published", "release.retracted", "release.cancelled")
    return _rows(session, select(*EVENT_FIELDS).where(EVENTS.c.kind.in_(kinds), *_by(until),
                                                      EVENTS.c.subject.in_(list(ids))).order_by(EVENTS.c.seq))


def every_publisher(session, until: str | None) -> list[tuple[str, str]]:
    """(release, who published it) of every publication event (dated by `until`)."""
    return _rows(session, select(EVENTS.c.subject, EVENTS.c.actor)
                 .where(EVENTS.c.kind == "release.published", *_by(until)))


def every_ending(session, until: str | None) -> list[tuple]:
    """Every retraction and cancellation event (dated by `until`), in order."""
    return _rows(session, select(*EVENT_FIELDS).where(
        EVENTS.c.kind.in_(("release.retracted", "release.cancelled")), *_by(until)).order_by(EVENTS.c.seq))


def publishers(session, ids, until: str | None) -> list[tuple[str, str]]:
    """(release, who published it) from the publication events (dated by --as-of: `until`), in order."""
    return _rows(session, select(EVENTS.c.subject, EVENTS.c.actor).where(
        EVENTS.c.kind == "release.published", EVENTS.c.subject.in_(list(ids)), *_by(until)).order_by(EVENTS.c.seq))


def release_count(session, dataset: str) -> int:
    """How many releases the dataset has, any status (one count)."""
    return session.connection().execute(
        select(func.count()).select_from(RELEASES).where(RELEASES.c.dataset == dataset)).scalar_one()


def count_in_ledger(session, dataset: str, when: datetime) -> int:
    """How many releases of the dataset were in the ledger at `when`, any status (the accounting rows)."""
    return session.connection().execute(select(func.count()).where(rows_at.in_ledger(dataset, when))).scalar_one()


def whole_releases(session, ids) -> dict:
    """Release id -> the Release, for each of `ids` the ledger holds."""
    found = {}
    ids = list(ids)
    for start in range(0, len(ids), BATCH):
        for row in session.connection().execute(select(RELEASES).where(RELEASES.c.id.in_(ids[start:start + BATCH]))):
            found[row.id] = release_from_dict(release_row_dict(row))
    return found


def titles_of(session, ids) -> dict[str, str]:
    """Release id -> its title, for each of `ids`."""
    ids = list(ids)
    found: dict[str, str] = {}
    for start in range(0, len(ids), BATCH):
        found.update(_rows(session, select(RELEASES.c.id, RELEASES.c.title)
                           .where(RELEASES.c.id.in_(ids[start:start + BATCH]))))
    return found


def charged_families(session, dataset: str, statuses) -> tuple[str, ...]:
    """The families some release of the dataset with one of `statuses` is a member of."""
    return tuple(f for (f,) in session.connection().execute(
        select(RELEASES.c.family).where(RELEASES.c.dataset == dataset, RELEASES.c.family.is_not(None),
                                        RELEASES.c.status.in_(sorted(statuses))).distinct()))


def row_families(session, dataset: str) -> list[tuple[int, str]]:
    """(seq, family) of the dataset's accounting rows that are in a family."""
    rows = AccountingRow.__table__
    return _rows(session, select(rows.c.seq, rows.c.family).where(rows.c.dataset == dataset,
                                                                  rows.c.family.is_not(None)))


def pufferfish_ids(session, dataset: str) -> list[str]:
    """The ids of the dataset's releases with Pufferfish-family guarantees, in recording order."""
    return [i for (i,) in session.connection().execute(
        select(RELEASES.c.id).where(RELEASES.c.dataset == dataset, cast(RELEASES.c.pufferfish, Text) != "[]")
        .order_by(RELEASES.c.seq))]


def dated_releases(session, dataset: str, day: str) -> list[tuple]:
    """(id, title, status, recorded_at, recorded_by, approved_at, approved_by, published_at) of the
    dataset's releases approved or published on `day` (ISO date) or later, by their date text, in order."""
    c = RELEASES.c
    return _rows(session, select(c.id, c.title, c.status, c.recorded_at, c.recorded_by, c.approved_at,
                                 c.approved_by, c.published_at)
                 .where(c.dataset == dataset, or_(func.substr(c.approved_at, 1, 10) >= day,
                                                  func.substr(c.published_at, 1, 10) >= day))
                 .order_by(c.seq))


def register_moment(session, dataset: str, as_of: datetime | None):
    """A large report's register at --as-of: an as_of.Then (the status each release row had then)
    and --as-of as the audit events' text; (None, None) without --as-of."""
    if as_of is None:
        return None, None
    moment = as_of if as_of.tzinfo is not None else as_of.replace(tzinfo=UTC)
    connection = session.connection()
    return Then(connection, dataset, moment, ended_at(connection), None), event_text(moment)


def _of_dataset(dataset: str):
    # the dataset compared through an expression, so that a page is read along the seq index
    # (SQLite otherwise picks the dataset's index and sorts every release of the dataset for each
    # page: quadratic in the ledger's size)
    return RELEASES.c.dataset.concat("") == dataset


def release_page(session, dataset: str, after: int, page: int) -> list[tuple[int, object]]:
    """(seq, Release) of the dataset's next `page` releases after seq `after`, in recording order."""
    rows = session.connection().execute(select(RELEASES).where(_of_dataset(dataset), RELEASES.c.seq > after)
                                        .order_by(RELEASES.c.seq).limit(page)).all()
    return [(row.seq, release_from_dict(release_row_dict(row))) for row in rows]


_c = RELEASES.c
REGISTER_FIELDS = (_c.seq, _c.id, _c.title, _c.status, cast(_c.reads, Text), _c.mechanism_name,
                   cast(_c.mechanism_params, Text), cast(_c.guarantees, Text), cast(_c.derived_from, Text), _c.family,
                   _c.recorded_by, _c.recorded_at, _c.approved_by, _c.approved_at, _c.published_at,
                   cast(_c.pufferfish, Text), _c.output_digest, _c.part)


def register_page(session, dataset: str, after: int, upto: int | None, page: int) -> list[tuple]:
    """The dataset's next `page` release rows after seq `after` (and at most `upto`), in recording
    order, as REGISTER_FIELDS: every JSON column as its text (parsed once per distinct text)."""
    within = () if upto is None else (_c.seq <= upto,)
    return list(stream_raw_rows(session.connection(), select(*REGISTER_FIELDS).where(
        _of_dataset(dataset), _c.seq > after, *within).order_by(_c.seq).limit(page), page))


def first_event_moment_text(session) -> str | None:
    """The stored moment of the chain's first event (None when there is none)."""
    return session.connection().execute(select(EVENTS.c.at).order_by(EVENTS.c.seq).limit(1)).scalar()


def dataset_added_text(session, dataset: str) -> str | None:
    """The stored moment of the dataset's first `dataset.added` event (None when there is none)."""
    return session.connection().execute(
        select(EVENTS.c.at).where(EVENTS.c.kind == "dataset.added", EVENTS.c.subject == dataset)
        .order_by(EVENTS.c.seq).limit(1)).scalar()
