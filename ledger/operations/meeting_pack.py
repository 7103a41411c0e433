"""The meeting pack: what changed about a dataset between two moments, and how each cap moved.

Computed here, below the API, so that `Ledger.changes`, the report's `--since` section and the web
app's period show one pack: the releases recorded, approved, published, retracted and cancelled in
the period (approvals and publications by the releases' own dates), the dataset's own amendments,
and each cap's decided figure then and now (the smallest valid figure, as `cap list` prints it,
recomputed over the releases as they stood then: docs/explanation/model.md#composition). A cap
that did not exist then is "new", one removed in the period "removed"; every ∞ says why (reasons.py).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from fractions import Fraction

from ..accounting.budget import CapCheck, composed, total_from_index
from ..accounting.history import ended
from ..accounting.history import releases_as_of as _releases_then
from ..accounting.ledger_index import LedgerIndex
from ..accounting.spend import ALLOWANCE
from ..core.numbers import Number, float_down, float_up, is_infinite
from ..core.records import CHARGED_STATUSES, Cap, Dataset, Release, Status, cap_unit_text
from . import reasons
from .report_inputs import AuditEvent, ReportInputs
from ..core.records import DATASET_CHANGE_KINDS
from .report_reading import DATASET_AMENDMENTS, LIFECYCLE_KINDS


@dataclass(frozen=True)
class Change:
    """A release event since the meeting-pack date."""

    release: str
    title: str
    at: datetime
    actor: str
    status: str  # the status the event left it in


@dataclass(frozen=True)
class CapMove:
    """A cap's figure at the meeting-pack date and now, in the cap's unit.

    before: recomputed from the releases recorded before the date, with the status each had
    then; now: the figure of the report's Caps section. Both are the decided figure (the
    smallest valid one, cap_accounting.checks_from_index), as `cap list` prints it."""

    name: str
    subset: tuple[str, ...]
    unit: str
    delta: Fraction | None
    limit: Fraction
    before: Number | None  # None: the cap did not exist then (status_before "new")
    now: Number | None  # None: the cap was removed since (status_now "removed")
    change: Number | None  # now - before; None when both are ∞, or the cap is new or removed
    status_before: str
    status_now: str
    set_after: bool  # the cap existed at the date and was set again (changed) since: its figure then is against its limit then
    why_before: str | None = None  # why `before` is ∞, when it is (reasons.py)
    why_now: str | None = None

    @property
    def unit_text(self) -> str:
        """`epsilon at delta 1 × 10⁻⁹`: the one text of a cap's unit (records.cap_unit_text)."""
        return cap_unit_text(self.unit, self.delta)


@dataclass(frozen=True)
class DatasetChange:
    """A change of the dataset since the meeting-pack date: a variable added or reclassified, a
    group set or removed, ... (its audit event, operations.amend), with what it changed."""

    at: datetime
    actor: str
    kind: str  # the event's kind: variable.reclassified, group.set, ...
    note: str  # what changed (the audit trail's `change_note`): x: sensitive → public (reason)


@dataclass(frozen=True)
class MeetingPack:
    """What changed since the meeting-pack date (up to --as-of, when given). `counts`: how many
    changes of each section there are (recorded, approved, published, retracted, cancelled),
    when a large ledger's pack lists only the most recent of each (operations/large_meeting.py);
    None: each section lists every change."""

    since: datetime
    events: int  # events about the dataset since then
    recorded: tuple[Change, ...]
    approved: tuple[Change, ...]
    published: tuple[Change, ...]
    retracted: tuple[Change, ...]
    cancelled: tuple[Change, ...]
    caps: tuple[CapMove, ...]
    counts: tuple[int, ...] | None = None
    # the dataset's own changes since then (reclassifications, variables added, groups set), as
    # the audit trail shows them; at most CHANGES_LISTED on a large ledger (`dataset_count`: how many)
    dataset_changes: tuple[DatasetChange, ...] = ()
    dataset_count: int | None = None

    @property
    def dataset_total(self) -> int:
        """How many changes of the dataset there were since then (those listed, or `dataset_count`)."""
        return len(self.dataset_changes) if self.dataset_count is None else self.dataset_count

    @property
    def sections(self) -> tuple[tuple[str, tuple[Change, ...], int], ...]:
        """(heading, the changes listed, how many there are), in the order of `counts`."""
        listed = (("Recorded", self.recorded), ("Approved", self.approved), ("Published", self.published),
                  ("Retracted", self.retracted), ("Cancelled", self.cancelled))
        counts = self.counts or tuple(len(changes) for _, changes in listed)
        return tuple((heading, changes, count) for (heading, changes), count in zip(listed, counts))


def meeting_between(inputs: ReportInputs) -> MeetingPack:
    """The meeting pack alone (`report --since`, with `--as-of` when `inputs.as_of` is set): what
    changed from `inputs.since` up to then, each cap decided as `build_report` decides it."""
    if inputs.as_of is None:
        return meeting_pack(inputs, inputs.cap_checks)
    from ..operations.cap_accounting import checks_from_index

    inputs = as_it_stood(inputs)
    index = charged_index_of(inputs.dataset, inputs.releases, inputs.families)
    totals = {cap.name: total_from_index(cap, index) for cap in inputs.caps}
    inputs = replace(inputs, cap_totals=totals)
    return meeting_pack(inputs, checks_from_index(inputs.caps, index, totals))


def meeting_pack(inputs: ReportInputs, checks: Sequence[CapCheck] | None = None) -> MeetingPack:
    """What changed since `inputs.since`, and how each cap moved (docs/explanation/model.md#the-cost-of-one-release-on-a-subset-2.6 figures
    recomputed as the ledger stood then). `checks`: every cap as the report's Caps section
    decides it (the smallest valid figure, cap_accounting.checks_from_index; computed here when
    None): a cap's figure now is that one, and its figure then is decided the same way over the
    releases as they stood then (same question, same answer, docs/explanation/model.md#composition)."""
    from ..operations.cap_accounting import checks_from_index

    since = inputs.since
    events = dataset_events(inputs)
    titles = {r.id: r.title for r in inputs.releases}
    changes: dict[str, list[Change]] = {kind: [] for kind in ("recorded", *LIFECYCLE_KINDS)}
    for event in events:
        if event.at < since:
            continue
        if event.kind == "release.recorded":
            status = event.data()["release"]["status"]
            changes["recorded"].append(Change(event.subject, titles.get(event.subject, ""), event.at, event.actor,
                                              status))
        elif event.kind in ("release.retracted", "release.cancelled"):
            changes[event.kind].append(Change(event.subject, titles.get(event.subject, ""), event.at, event.actor,
                                              LIFECYCLE_KINDS[event.kind].value))
    # approved and published by the releases' own dates (a publication recorded late is dated
    # by when it happened, not by when it was typed in)
    # (with --as-of, those dated by then: a release approved after it was still planned then)
    publishers = {e.subject: e.actor for e in events if e.kind == "release.published"}
    until = inputs.as_of

    def between(moment: datetime | None) -> bool:
        return moment is not None and moment >= since and (until is None or moment <= until)

    for release in inputs.releases:
        approved, published = aware(release.approved_at), aware(release.published_at)
        if between(approved):
            changes["release.approved"].append(Change(release.id, release.title, approved,
                                                      release.approved_by or "", Status.APPROVED.value))
        if between(published):
            changes["release.published"].append(Change(release.id, release.title, published, publishers.get(
                release.id, release.recorded_by), Status.PUBLISHED.value))
    for kind in ("release.approved", "release.published"):
        changes[kind].sort(key=lambda change: change.at)
    then = releases_as_of(inputs.releases, events, since)
    # one index of the releases charged then, each cap's total over its arrays (total_from_index:
    # total_from_history's figure, without a pass over the releases per cap)
    index_then = charged_index_of(inputs.dataset, then, inputs.families)
    index_now = charged_index_of(inputs.dataset, inputs.releases, inputs.families)
    if checks is None:
        checks = checks_from_index(inputs.caps, index_now, inputs.cap_totals)
    set_at = {e.subject.split("/", 1)[1]: e.at for e in events if e.kind == "cap.set"}
    from ..store.as_of import CAP_STATE_KINDS, state_change

    prefix = inputs.dataset.name + "/"
    caps_then, removed = caps_in_period(
        [state_change(e.kind, e.subject, e.at, e.data()) for e in inputs.events
         if e.kind in CAP_STATE_KINDS and e.subject.startswith(prefix)],
        inputs.dataset.variable_names, since, inputs.as_of, inputs.dataset.allowance)
    moves = cap_moves(inputs.caps, checks, checks_from_index(list(caps_then), index_then), set_at, since, removed,
                      inputs.dataset.public_names, index_then, index_now)
    return MeetingPack(
        since=since,
        events=sum(1 for e in events if e.at >= since),
        dataset_changes=tuple(dataset_change(e.at, e.actor, e.kind, e.data()) for e in events
                              if e.at >= since and e.kind in DATASET_AMENDMENTS and e.subject == inputs.dataset.name),
        recorded=tuple(changes["recorded"]),
        approved=tuple(changes["release.approved"]),
        published=tuple(changes["release.published"]),
        retracted=tuple(changes["release.retracted"]),
        cancelled=tuple(changes["release.cancelled"]),
        caps=tuple(moves),
    )


def caps_in_period(changes: Sequence, order: Sequence[str], since: datetime,
                   until: datetime | None = None, allowance: Fraction = ALLOWANCE
                   ) -> tuple[tuple[Cap, ...], tuple[Cap, ...]]:
    """(the caps as they stood just before `since`, the caps removed between `since` and `until`
    that are not set again by then, each with the value it had when removed), replayed from the
    cap changes (history.StateChange, chain order; store.as_of.state_changes / state_change), each
    with its dataset's variable `order` and `allowance` (Cap.order, Cap.allowance)."""
    then: dict[str, Cap | None] = {}
    last: dict[str, Cap | None] = {}
    removed: dict[str, Cap] = {}
    for change in changes:
        if change.cap is None:
            continue
        name, cap = change.cap
        at = aware(change.at)
        if until is not None and at > aware(until):
            break
        if at < aware(since):
            then[name] = cap
        elif cap is None:
            if last.get(name) is not None:
                removed[name] = last[name]
        else:
            removed.pop(name, None)  # set again: it is a cap now
        last[name] = cap
    kept = [replace(cap, order=tuple(order), allowance=allowance) for cap in then.values() if cap is not None]
    return tuple(sorted(kept, key=lambda c: c.name)), tuple(replace(c, order=tuple(order), allowance=allowance)
                                                            for c in removed.values())


def cap_moves(caps: Sequence[Cap], now: Sequence[CapCheck], then: Sequence[CapCheck], set_at: Mapping[str, datetime],
              since: datetime, removed: Sequence[Cap] = (), public: Collection[str] = (),
              index_then: LedgerIndex | None = None, index_now: LedgerIndex | None = None) -> tuple[CapMove, ...]:
    """How each cap moved: its figure then and now, each the decided one (the smallest valid
    figure, as the Caps section and `cap list` show it: cap_accounting.checks_from_index), never
    the basic sum beside a decided figure for the same cap. `then`: the checks of the caps as
    they stood just before `since` (caps_in_period), each against its limit then; a cap that did
    not exist then is "new" (no figure then), one removed in the period (`removed`, with the
    value it had) is "removed" (no figure now); every cap that existed in the period is listed."""
    now_of = {c.cap.name: c for c in now}
    then_of = {c.cap.name: c for c in then}
    shown = {cap.name: cap for cap in removed}
    shown.update({c.cap.name: c.cap for c in then})
    shown.update({cap.name: cap for cap in caps})
    moves = []
    for name in sorted(shown):
        cap, before, current = shown[name], then_of.get(name), now_of.get(name)
        figure_then = None if before is None else before.current
        figure_now = None if current is None else current.current
        moves.append(CapMove(
            name=name, subset=cap.ordered_subset, unit=cap.unit, delta=cap.delta, limit=cap.limit,
            before=figure_then, now=figure_now,
            change=None if figure_then is None or figure_now is None else _difference(figure_now, figure_then),
            status_before=NEW_CAP if before is None else before.status,
            status_now=REMOVED_CAP if current is None else current.status,
            set_after=name in set_at and set_at[name] >= since and before is not None,
            why_before=None if before is None else cap_reasons(before, public, index_then)[0],
            why_now=None if current is None else cap_reasons(current, public, index_now)[0],
        ))
    return tuple(moves)


NEW_CAP = "new"  # a cap that did not exist at the meeting-pack date
REMOVED_CAP = "removed"  # a cap removed since the meeting-pack date


def dataset_change(at: datetime, actor: str, kind: str, data: dict) -> DatasetChange:
    """A change of the dataset (amend.plan's event), as the audit trail notes it (`change_note`)."""
    change = data.get("change") or {}
    return DatasetChange(at, actor, kind, change_note(change) or "")


def releases_as_of(releases: Sequence[Release], events: Sequence[AuditEvent], when: datetime) -> list[Release]:
    """The releases in the ledger just before `when`, by publication date, each with the
    status it had then (ledger.accounting.history; retractions and cancellations dated by their events)."""
    ended_at = ended((e.kind, e.subject, e.at) for e in events)
    just_before = when - timedelta(microseconds=1)
    return _releases_then(releases, just_before, ended_at)


def _difference(a: Number, b: Number) -> Number | None:
    if is_infinite(a) or is_infinite(b):
        return None if a == b else a - b
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a - b
    return math.nextafter(float_up(a) - float_down(b), math.inf)  # a change in a loss: rounded up


def aware(moment: datetime | None) -> datetime | None:
    """A moment as the report shows it: a naive one is UTC (as the ledger records it); an aware
    one, or None, as it is."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def as_it_stood(inputs: ReportInputs) -> ReportInputs:
    """The inputs as the ledger stood at `inputs.as_of` (ledger.accounting.history): the releases in it
    then, with the status each had, and the events up to then (`build_report` recomputes the caps'
    totals over the index of the releases charged then: `budget.total_from_index`, equal to
    `total_from_history` of those releases, one pass over arrays per cap)."""
    when = inputs.as_of
    ended_at = ended((e.kind, e.subject, e.at) for e in inputs.events)
    releases = tuple(_releases_then(inputs.releases, when, ended_at))
    events = tuple(e for e in inputs.events if e.at <= when)
    then = state_of(inputs.dataset, inputs.caps, inputs.events, when,
                    {name for r in releases if r.status in CHARGED_STATUSES for name in r.reads})
    return replace(inputs, releases=releases, events=events, dataset=then.dataset, caps=then.caps)


def state_of(dataset: Dataset, caps: Sequence[Cap], events: Sequence[AuditEvent], when: datetime, read=()):
    """The dataset (variables, classifications, groups) and its caps as they stood at `when`
    (history.state_as_of), from the audit events of their changes."""
    from ..accounting.history import state_as_of
    from ..store.as_of import CAP_STATE_KINDS, DATASET_STATE_KINDS, state_change

    prefix = dataset.name + "/"
    changes = [state_change(e.kind, e.subject, e.at, e.data()) for e in events
               if (e.kind in DATASET_STATE_KINDS and e.subject == dataset.name)
               or (e.kind in CAP_STATE_KINDS and e.subject.startswith(prefix))]
    return state_as_of(dataset, caps, changes, when, read)


def charged_index_of(dataset: Dataset, releases: Sequence[Release], families) -> LedgerIndex:
    """The LedgerIndex of the charged ones of `releases` (each with its status then)."""
    return LedgerIndex(dataset.variable_names, [r for r in releases if r.status in CHARGED_STATUSES],
                       families).for_dataset(dataset.allowance)


def cap_reasons(c: CapCheck, public: Collection[str] = (), index: LedgerIndex | None = None
                ) -> tuple[str | None, tuple[str | None, ...]]:
    """Why a cap's figure and each of its drivers' charges are ∞ (reasons.py; None where finite),
    from the index of the releases charged (reasons.index_reason and reasons.driver_reasons: the
    same on every path and in `cap list`): each driver by its own reason."""
    spend = composed(c.cap, c.after_total) if c.after_total is not None else None
    overall = None
    if is_infinite(c.current):
        if index is not None:
            overall = reasons.index_reason(c.cap, index, public)
        else:
            overall = reasons.NOT_PROTECTED if spend is None else reasons.unit_reason(c.cap, spend)
    if index is None:  # (no releases to ask: an ∞ driver by the cap's reason)
        return overall, tuple(overall if is_infinite(value) else None for _name, value in c.drivers)
    return overall, reasons.driver_reasons(c.cap, c.drivers, index, public)


def change_note(change: dict) -> str | None:
    """What a change of the dataset changed (its event's `change`, operations.amend.plan): the
    variable or group, a classification's old and new value, and the reason given. A variable
    reclassified public leaves the protected headline (docs/explanation/model.md#public-and-protected-variables): the board sees which, and why."""
    subject = change.get("variable") or (f"group {change['group']}" if change.get("group") else None)
    if "self_approval" in change:
        subject = "separation of duties " + ("waived" if change["self_approval"] else "required")
    if subject is None:
        return None
    if "classification" in change and "was" in change:
        subject += f": {change['was']} → {change['classification']}"
    elif "classification" in change:
        subject += f" ({change['classification']})"
    reason = change.get("reason")
    return subject + (f" ({reason})" if reason else "")


def dataset_events(inputs: ReportInputs) -> list[AuditEvent]:
    """The events about this dataset: the dataset, its families, caps and releases
    (and ledger-wide migrations and role changes)."""
    name = inputs.dataset.name
    releases = {r.id for r in inputs.releases}
    families = {f.id for f in inputs.families}

    def about(event: AuditEvent) -> bool:
        if event.kind.startswith("release."):
            return event.subject in releases
        if event.kind.startswith("family."):
            return event.subject in families
        if event.kind.startswith("cap."):
            return event.subject.startswith(name + "/")
        if event.kind.startswith(DATASET_CHANGE_KINDS):  # the dataset's own changes (store.amend_dataset)
            return event.subject == name
        return event.kind.startswith(("ledger.", "role."))  # ledger-wide: migrations, and who holds which duty

    return [e for e in inputs.events if about(e)]
