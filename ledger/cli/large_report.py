"""What a summarised report of a large ledger is computed from (`report.LargeInputs`), read from
the accounting rows and by SQL: no release is decoded but those listed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from fractions import Fraction
from typing import TYPE_CHECKING


from ..operations.report_inputs import (  # (gathered below the API)
    event_moment,
    release_count,
    verify_for_report,
)
from ..operations.report_reading import (  # (read below the API)
    dated_by,
    event_columns,
    event_counts,
    event_filter,
    events_of,
    lifecycle_events,
    whole_releases,
)
from ..core.lazy import lazy_callable, lazy_module
from ..core.numbers import is_infinite
from ..core.records import Dataset

if TYPE_CHECKING:
    from ..operations.report_inputs import ChainStatus

configuration = lazy_module("ledger.store.configuration")  # the ORM, imported when a report is made
session_state = lazy_module("ledger.store.session_state")  # the ORM, imported when a report is made
table_models = lazy_module("ledger.store.table_models")  # the ORM, imported when a report is made
# the report's context builder (and markupsafe, the chart data): imported when a report is
# made, not by `--help`, `check` or `record`, which only register this command
_report = lazy_module("ledger.reporting.report")
_audit = lazy_module("ledger.reporting.audit_section")
_chart_figures = lazy_module("ledger.reporting.chart_figures")
large_meeting = lazy_callable("ledger.operations.large_meeting", "large_meeting")  # the meeting pack, from the rows
pack = lazy_module("ledger.operations.meeting_pack")  # the meeting pack (--since), computed below the API
plan_book = lazy_module("ledger.operations.plan_book")  # the stored plans (the "Plan against actual" section)
plans_of = lazy_callable("ledger.reporting.plan_view", "plans_of")
select = lazy_callable("sqlalchemy", "select")
Session = lazy_callable("sqlmodel", "Session")


def large_audit(session: Session, dataset: str, when: datetime | None = None, until: str | None = None,
                counts: list[tuple] | None = None):
    """report.audit_trail of a large ledger by SQL: the dataset's events counted by kind and by
    actor (`event_counts`, unless given), the last AUDIT_EVENTS_LISTED read (with `when`,
    `until`: those dated by then, see event_filter). Returns a function of the chain's status."""
    table, columns_ = event_columns()
    about = event_filter(dataset, when, until)
    if counts is None:
        counts = event_counts(session, dataset, when, until)
    counts = [row for row in counts if row[2]]
    listed = events_of(session, select(*columns_).where(about, *dated_by(session, until)).order_by(table.c.seq.desc())
                     .limit(_audit.AUDIT_EVENTS_LISTED))[::-1]
    total = sum(row[2] for row in counts)
    by_kind, by_actor = {}, {}
    for kind, actor, c, *_ in counts:
        by_kind[kind] = by_kind.get(kind, 0) + c
        by_actor[actor] = by_actor.get(actor, 0) + c
    first_at = last_at = None
    if counts:
        first_seq = min(row[3] for row in counts)
        first_at = event_moment(session.connection().execute(
            select(table.c.at).where(table.c.seq == first_seq)).scalar_one())
        last_at = listed[-1].at

    def trail(chain: ChainStatus):
        return _report.AuditTrail(
            ok=chain.ok, head=chain.head, chain_events=chain.events, problems=chain.problems, events=total,
            first_at=first_at, last_at=last_at, by_kind=tuple(sorted(by_kind.items())),
            by_actor=tuple(sorted(by_actor.items())),
            listed=tuple(_audit.AuditEntry(e.seq, e.at, e.actor, e.kind, e.subject, _audit.audit_note(e))
                         for e in listed),
            omitted=total - len(listed))

    return trail


def gather_large(session: Session, dataset: Dataset, delta: Fraction,
                 chain: Callable[[], ChainStatus] | None = None, generated_at: datetime | None = None,
                 indexed: Callable | None = None, as_of: datetime | None = None, since: datetime | None = None):
    """report.LargeInputs: what a summarised report is computed from, read from the accounting
    rows (index_from_rows.index_for, chunked_table.large_table, as `table` reads them at a million releases),
    SQL counts of the audit trail, the caps as `cap list` decides them, and the listed releases
    read whole by id. No Release is built but those listed. `indexed` is called with
    what the complete register needs (the index, its whole-dataset ids) once they are read.

    With `as_of` (--as-of): the ledger as it stood then, as `build_report` shows it after
    `as_it_stood`: the rows charged then (index_from_rows.index_for with the moment), each listed
    release with the status it had then, the caps checked over that index (as `cap list
    --as-of`), the audit events dated by then. With `since` (--since): the meeting pack
    (`large_meeting`). None when the rows or the events cannot say it exactly (a moment past
    what floats order, as_of.rows_then; an event moment not in UTC text,
    event_counts): the caller then reads every release (`gather`)."""
    from sqlalchemy import Text, cast

    from ..store import as_of as rows_at
    from ..accounting import chunked_table
    from ..store import index_from_rows
    from ..reporting.accountant_views import TableAccounts
    from ..core.records import CHARGED_STATUSES
    from ..accounting.index_figures import index_events
    from ..accounting.charge_choice import at_delta
    from ..operations.transactions import cap_checks
    from ..operations.cap_accounting import checks_from_index

    connection = session.connection()
    until = None if as_of is None else rows_at.event_text(as_of)  # the events dated by --as-of
    since_text = None if since is None else rows_at.event_text(since)
    counts = None
    if until is not None or since_text is not None:  # (one pass over the dataset's events, first)
        counts = event_counts(session, dataset.name, as_of, until, since_text)
        if any(row[5] for row in counts):  # a moment not in UTC text: text does not order it
            return None
    light = configuration.write_context(session)
    families = {fid: f for fid, f in light.families.items() if f.dataset == dataset.name}
    index = index_from_rows.index_for(session, dataset.variable_names, dataset.name, families, False, None, True, when=as_of)
    if index is None:
        return None
    then = index.then
    caps = tuple(configuration.caps(session, dataset.name))
    if as_of is not None:  # the dataset (variables, classifications, groups) and caps as they stood then
        dataset, caps, index = rows_at.state_then(session, dataset, as_of, index)
    if chain is None:
        chain = verify_for_report(session)
    generated_at = generated_at or session_state.now()
    wanted = ["basic", "rdp"]  # the figures shown (shown_accounts); the PLD is information only
    table, per_variable, wide = chunked_table.large_table(index, dataset.name, at_delta(delta), delta,
                                                    _report.LARGEST_LISTED, wanted)
    accounts = TableAccounts(table.variables, per_variable, wide, None)
    wide_ids = index.cost_ids(range(len(index.variables)))  # remembered by large_table
    if indexed is not None:  # what the register needs (large_register_csv), given as soon as it is known
        from types import SimpleNamespace

        indexed(SimpleNamespace(index=index, delta=delta, wide_ids=wide_ids, families=tuple(families.values()),
                                dataset=dataset, as_of=as_of, until=until,
                                ended=None if then is None else then.ended))
    events = index_events(index)
    stamps = _chart_figures.charged_from_stamps(events.recorded, events.published)
    ids = [r.id for r in table.releases]
    largest = whole_releases(session, ids)
    if then is not None:  # each with the status it had then
        largest = {rid: then.release(release) for rid, release in largest.items()}
    releases = table_models.ReleaseRow.__table__
    if then is None:
        named = tuple(f for (f,) in connection.execute(
            select(releases.c.family).where(releases.c.dataset == dataset.name, releases.c.family.is_not(None),
                                            releases.c.status.in_(sorted(s.value for s in CHARGED_STATUSES)))
            .distinct()))
        count = release_count(session, dataset.name)
    else:  # the families of the releases charged then; the releases in the ledger then, any status
        from sqlalchemy import func

        rows = table_models.AccountingRow.__table__
        charged_then = set(index.releases.seqs.tolist())
        named = tuple(sorted({family for seq, family in connection.execute(
            select(rows.c.seq, rows.c.family).where(rows.c.dataset == dataset.name, rows.c.family.is_not(None)))
            if seq in charged_then}))
        count = connection.execute(select(func.count()).where(rows_at.in_ledger(dataset.name, as_of))).scalar_one()
    puffer_ids = [i for (i,) in connection.execute(
        select(releases.c.id).where(releases.c.dataset == dataset.name,
                                    cast(releases.c.pufferfish, Text) != "[]").order_by(releases.c.seq))]
    pufferfish = whole_releases(session, puffer_ids)
    if then is not None:
        puffer_ids = [i for i in puffer_ids if then.status(pufferfish[i]) is not None]
    table_, columns_ = event_columns()
    prefix = dataset.name + "/"
    from sqlalchemy import func

    by_then = () if until is None else (table_.c.at <= until,)
    cap_events = tuple(events_of(session, select(*columns_).where(
        table_.c.kind.in_(("cap.set", "cap.removed")), func.substr(table_.c.subject, 1, len(prefix)) == prefix,
        *by_then).order_by(table_.c.seq)))
    last = events_of(session, select(*columns_).where(*by_then, *dated_by(session, until))
                   .order_by(table_.c.seq.desc()).limit(1))
    if then is None:  # as `cap list` decides them now (the stored running totals and states)
        checks = tuple(cap_checks(session, dataset.name, list(caps)))
    else:  # as `cap list --as-of` decides them (operations.cap_checks_as_of): over the index then
        checks = tuple(checks_from_index(list(caps), index))
    if any(is_infinite(value) for c in checks for _name, value in c.drivers):
        index.release_ids[:0]  # read now, while the session is open: an ∞ driver's own reason finds its row by id
    meeting = None
    if since is not None:
        meeting = large_meeting(session, dataset, index, families, caps, since, as_of, until, counts, checks)
        if meeting is None:
            return None
    return _report.LargeInputs(
        dataset=dataset, index=index, table=table, accounts=accounts, stamps=stamps,
        releases=count, largest=largest,
        steps=lifecycle_events(session, ids, until) if ids else {}, families=tuple(families.values()),
        families_named=named, caps=caps, cap_checks=checks,
        chain=chain, audit=large_audit(session, dataset.name, as_of, until, counts), cap_events=cap_events,
        pufferfish=tuple(pufferfish[i] for i in puffer_ids), last_event=last[0] if last else None,
        generated_at=generated_at, delta=delta, wide_ids=wide_ids, as_of=as_of, meeting=meeting,
        plans=() if as_of is not None else plans_of(plan_book.against_actual(session, dataset.name)),
        timeline=_report.timeline_of(index, delta, at_delta(delta), as_of or generated_at,
                                     public=dataset.public_names, caps=caps, stamps=stamps,
                                     final=[f.epsilon for f in accounts.shown()[0]]))
