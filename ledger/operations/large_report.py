"""What a summarised report of a large ledger is computed from, read from the accounting rows and
the store's report queries (store/report_queries.py): no release is decoded but those listed.

`read_large` reads it in one session, in named steps, as a `LargeReading`; the report
(reporting/report.py, `large_inputs`) makes its inputs from that reading inside the same session
(a ledger whose releases share one moment labels the timeline's points with release ids, read
from the store). None when the rows or the events cannot say it exactly: the caller then reads
every release (report_inputs.gather).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

from ..core.lazy import lazy_module
from ..core.numbers import is_infinite
from ..core.records import Cap, Dataset, Family, Release
from .report_inputs import AuditEvent, ChainStatus, event_moment, verify_for_report
from .report_reading import events_of, lifecycle_events

audit_chain = lazy_module("ledger.store.audit_chain")  # the ORM, imported when a report is read
configuration = lazy_module("ledger.store.configuration")  # the ORM, imported when a report is read
report_queries = lazy_module("ledger.store.report_queries")  # the ORM, imported when a report is read
rows_at = lazy_module("ledger.store.as_of")  # the ORM, imported when a report is read
session_state = lazy_module("ledger.store.session_state")  # the ORM, imported when a report is read

@dataclass(frozen=True)
class LargeAudit:
    """The audit trail of a large ledger, counted by SQL: how many events (by kind, by actor), the
    first and last moments, and the `listed` most recent events, oldest first."""

    events: int
    first_at: datetime | None
    last_at: datetime | None
    by_kind: tuple[tuple[str, int], ...]
    by_actor: tuple[tuple[str, int], ...]
    listed: tuple[AuditEvent, ...]


@dataclass(frozen=True)
class LargeReading:
    """What a summarised report is computed from (reporting/report.py's LargeInputs holds it beside
    the report's own views of it): the index of the charged rows and `chunked_table.large_table` of it
    (`table`, `per_variable`, `wide`), the accountants' `events` of the index, the listed releases
    read whole (`largest`, with their lifecycle `steps`), the caps as `cap list` decides them, the
    audit trail counted by SQL, and the plans against actual (None at --as-of)."""

    dataset: Dataset
    index: Any
    table: Any
    per_variable: Any
    wide: Any
    events: Any
    releases: int
    largest: dict[str, Release]
    steps: dict[str, dict]
    families: tuple[Family, ...]
    families_named: tuple[str, ...]
    caps: tuple[Cap, ...]
    cap_checks: tuple
    chain: ChainStatus | Callable[[], ChainStatus]
    audit: LargeAudit
    cap_events: tuple[AuditEvent, ...]
    pufferfish: tuple[Release, ...]
    last_event: AuditEvent | None
    generated_at: datetime
    delta: Fraction
    wide_ids: Any
    as_of: datetime | None
    meeting: Any
    plans: list | None


def large_audit(session, dataset: str, when: datetime | None, until: str | None, counts: list[tuple] | None,
                listed: int) -> LargeAudit:
    """The dataset's audit trail by SQL: its events counted by kind and by actor (`event_counts`,
    unless given), the last `listed` read (with `when`, `until`: those dated by then)."""
    if counts is None:
        counts = report_queries.event_counts(session, dataset, when, until)
    counts = [row for row in counts if row[2]]
    shown = events_of(report_queries.latest_events(session, dataset, when, until, listed))
    by_kind: dict[str, int] = {}
    by_actor: dict[str, int] = {}
    for kind, actor, c, *_ in counts:
        by_kind[kind] = by_kind.get(kind, 0) + c
        by_actor[actor] = by_actor.get(actor, 0) + c
    first_at = last_at = None
    if counts:
        first_at = event_moment(report_queries.event_moment_text(session, min(row[3] for row in counts)))
        last_at = shown[-1].at
    return LargeAudit(sum(row[2] for row in counts), first_at, last_at, tuple(sorted(by_kind.items())),
                      tuple(sorted(by_actor.items())), tuple(shown))


def read_large(session, dataset: Dataset, delta: Fraction, inputs_of: Callable[[LargeReading], Any], *,
               listed: int, audit_listed: int,
               chain: Callable[[], ChainStatus] | None = None, generated_at: datetime | None = None,
               indexed: Callable | None = None, as_of: datetime | None = None, since: datetime | None = None):
    """`inputs_of` of the LargeReading of `dataset` (None when the rows cannot say it exactly), read
    from the accounting rows (index_from_rows.index_for, table_view.table_figures with the `listed` largest rows,
    as `table` reads them at a million releases), SQL counts of the audit trail, the caps as `cap
    list` decides them, and the listed releases read whole by id (the `audit_listed` most recent events). `indexed` is called with what
    the complete register needs (the index, its whole-dataset ids, the chain's last event) once
    they are read.

    With `as_of` (--as-of): the ledger as it stood then, as `build_report` shows it after
    `as_it_stood`: the rows charged then (index_from_rows.index_for with the moment), each listed
    release with the status it had then, the caps checked over that index (as `cap list
    --as-of`), the audit events dated by then. With `since` (--since): the meeting pack
    (`large_meeting`). None when the rows or the events cannot say it exactly (a moment past
    what floats order, as_of.rows_then; an event moment not in UTC text, event_counts)."""
    head = audit_chain.last_event(session)  # the moment the page is of: the register must be too
    until = None if as_of is None else rows_at.event_text(as_of)  # the events dated by --as-of
    counts = _moments_counted(session, dataset.name, as_of, until, since)
    if counts is False:
        return None
    state = _indexed_state(session, dataset, as_of)
    if state is None:
        return None
    dataset, caps, index, families = state
    table, per_variable, wide, wide_ids = _large_table(index, dataset, delta, listed)
    if indexed is not None:  # what the register needs (the register's writers), given as soon as it is known
        then = index.then
        indexed(SimpleNamespace(index=index, delta=delta, wide_ids=wide_ids, families=tuple(families.values()),
                                dataset=dataset, as_of=as_of, until=until, head=head,
                                ended=None if then is None else then.ended))
    checks = _cap_checks(session, dataset.name, caps, index)
    meeting = None
    if since is not None:
        from .large_meeting import large_meeting

        meeting = large_meeting(session, dataset, index, families, caps, since, as_of, until, counts, checks)
        if meeting is None:
            return None
    return inputs_of(_reading(session, dataset, delta, index, families, caps, checks, until, counts, meeting,
                              (table, per_variable, wide, wide_ids), listed=audit_listed, chain=chain,
                              generated_at=generated_at, as_of=as_of))


def _moments_counted(session, dataset: str, as_of: datetime | None, until: str | None, since: datetime | None):
    """The dataset's events counted by kind and actor with --as-of or --since (one pass, first); None
    without either; False when a moment compared is not UTC text (text does not order it)."""
    since_text = None if since is None else rows_at.event_text(since)
    if until is None and since_text is None:
        return None
    counts = report_queries.event_counts(session, dataset, as_of, until, since_text)
    return False if any(row[5] for row in counts) else counts


def _indexed_state(session, dataset: Dataset, as_of: datetime | None):
    """(the dataset, its caps, the index of its charged rows, its families), now or as they stood at
    `as_of`; None when the rows cannot say it exactly."""
    from ..store import index_from_rows

    light = configuration.write_context(session)
    families = {fid: f for fid, f in light.families.items() if f.dataset == dataset.name}
    index = index_from_rows.index_for(session, dataset.variable_names, dataset.name, families, False, None, True, when=as_of)
    if index is None:
        return None
    caps = tuple(configuration.caps(session, dataset.name))
    if as_of is not None:  # the dataset (variables, classifications, groups) and caps as they stood then
        dataset, caps, index = rows_at.state_then(session, dataset, as_of, index)
    return dataset, caps, index, families


def _large_table(index, dataset: Dataset, delta: Fraction, listed: int):
    """Table 1 of the index as `table` computes it (table_view.table_figures: the `listed` largest rows,
    the figures shown: basic and RDP; the PLD is information only) and each index release's
    whole-dataset value id (remembered by its computation)."""
    from .table_view import table_figures

    found = table_figures(index, dataset, delta, rows=listed, headline=False)
    accounts = found.accounts
    return found.table, accounts.per_variable, accounts.dataset_wide, index.cost_ids(range(len(index.variables)))


def _cap_checks(session, dataset: str, caps, index) -> tuple:
    """The caps as `cap list` decides them now (the stored running totals and states), or at
    --as-of as `cap list --as-of` does (operations.cap_checks_as_of): over the index then."""
    from .cap_accounting import checks_from_index
    from .transactions import cap_checks

    if index.then is None:
        checks = tuple(cap_checks(session, dataset, list(caps)))
    else:
        checks = tuple(checks_from_index(list(caps), index))
    if any(is_infinite(value) for c in checks for _name, value in c.drivers):
        index.release_ids[:0]  # read now, while the session is open: an ∞ driver's own reason finds its row by id
    return checks


def _charged_families(session, dataset: str, index, as_of: datetime | None) -> tuple[tuple[str, ...], int]:
    """(the families some charged release of the dataset is a member of, how many releases it has,
    any status): now, or (the index at --as-of) of the releases charged then and in the ledger then."""
    from ..core.records import CHARGED_STATUSES

    then = index.then
    if then is None:
        return (report_queries.charged_families(session, dataset, {s.value for s in CHARGED_STATUSES}),
                report_queries.release_count(session, dataset))
    charged_then = set(index.releases.seqs.tolist())
    named = tuple(sorted({family for seq, family in report_queries.row_families(session, dataset)
                          if seq in charged_then}))
    return named, report_queries.count_in_ledger(session, dataset, as_of)


def _pufferfish(session, dataset: str, then) -> tuple[Release, ...]:
    """The dataset's releases with Pufferfish-family guarantees (those in the ledger then, as they stood)."""
    ids = report_queries.pufferfish_ids(session, dataset)
    found = report_queries.whole_releases(session, ids)
    if then is not None:
        ids = [i for i in ids if then.status(found[i]) is not None]
    return tuple(found[i] for i in ids)


def _reading(session, dataset: Dataset, delta: Fraction, index, families: dict, caps, checks, until: str | None,
             counts, meeting, figures, *, listed: int, chain, generated_at: datetime | None,
             as_of: datetime | None) -> LargeReading:
    """The rest of the LargeReading, once the index and the caps are read."""
    from ..accounting.index_figures import index_events
    from .plan_book import against_actual

    table, per_variable, wide, wide_ids = figures
    then = index.then
    ids = [r.id for r in table.releases]
    largest = report_queries.whole_releases(session, ids)
    if then is not None:  # each with the status it had then
        largest = {rid: then.release(release) for rid, release in largest.items()}
    named, count = _charged_families(session, dataset.name, index, as_of)
    last = report_queries.last_event_dated_by(session, until)
    return LargeReading(
        dataset=dataset, index=index, table=table, per_variable=per_variable, wide=wide, events=index_events(index),
        releases=count, largest=largest, steps=lifecycle_events(session, ids, until) if ids else {},
        families=tuple(families.values()), families_named=named, caps=caps, cap_checks=checks,
        chain=verify_for_report(session) if chain is None else chain,
        audit=large_audit(session, dataset.name, as_of, until, counts, listed),
        cap_events=tuple(events_of(report_queries.cap_events(session, dataset.name, until))),
        pufferfish=_pufferfish(session, dataset.name, then),
        last_event=None if last is None else events_of([last])[0],
        generated_at=generated_at or session_state.now(), delta=delta, wide_ids=wide_ids, as_of=as_of,
        meeting=meeting, plans=None if as_of is not None else against_actual(session, dataset.name))
