"""The ledger as it stood at a moment, by publication date.

A release is in the ledger at moment T when it was planned (recorded) by T, or
published by T (history imported later is dated by its publication, not by
when it was typed in). Its status at T:
- published by T (published_at <= T): published, or retracted when its
  retraction came by T;
- else, recorded by T: cancelled when its cancellation came by T, approved when
  approved by T, planned otherwise;
- else: not yet in the ledger.

Approval and publication times are fields of the release; retractions and
cancellations are dated by their audit events (`ended`). Pure functions.

The dataset (its variables, their classification, its groups) and its caps at T are
those its audited changes left by T (`state_as_of`, with its rules for history recorded
before the ledger knew of it).

A release enters the loss over time at `charged_from`: the earlier of its
planning and its publication (a planned release reserves budget from the day it
is planned; a publication recorded afterwards counts from its publication date).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from ..core.records import Cap, Dataset, Release, Status, Variable, in_name_order

# audit event kinds that end a release's lifecycle, and the status they lead to
ENDING_KINDS = {"release.retracted": Status.RETRACTED, "release.cancelled": Status.CANCELLED}


def aware(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def ended(events: Iterable[tuple[str, str, datetime]]) -> dict[str, datetime]:
    """Release id -> when it was retracted or cancelled, from (kind, subject, at) events."""
    found: dict[str, datetime] = {}
    for kind, subject, at in events:
        if kind in ENDING_KINDS:
            found[subject] = aware(at)
    return found


def status_at(release: Release, when: datetime, ended_at: Mapping[str, datetime]) -> Status | None:
    """The status `release` had at `when` (None: not in the ledger yet)."""
    when = aware(when)
    end = ended_at.get(release.id)
    published = aware(release.published_at)
    if published is None and release.status in (Status.PUBLISHED, Status.RETRACTED):
        published = aware(release.recorded_at)  # recorded as published before publication dates were kept
    if published is not None and published <= when:
        if release.status is Status.RETRACTED and end is not None and end <= when:
            return Status.RETRACTED
        return Status.PUBLISHED
    recorded = aware(release.recorded_at)
    if recorded is not None and recorded > when:
        return None
    if release.status is Status.CANCELLED and end is not None and end <= when:
        return Status.CANCELLED
    approved = aware(release.approved_at)
    if approved is not None and approved <= when:
        return Status.APPROVED
    return Status.PLANNED


def releases_as_of(releases: Sequence[Release], when: datetime, ended_at: Mapping[str, datetime]) -> list[Release]:
    """The releases in the ledger at `when`, each with the status it had then."""
    result = []
    for release in releases:
        status = status_at(release, when, ended_at)
        if status is not None:
            result.append(release if status is release.status else replace(release, status=status))
    return result


def charged_from(release: Release) -> datetime | None:
    """When a release started to count: the earlier of its planning and its publication."""
    moments = [m for m in (aware(release.recorded_at), aware(release.published_at)) if m is not None]
    return min(moments) if moments else None


# --------------------------------------------------------------------------
# The dataset and its caps as they stood at a moment (every --as-of view)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class StateChange:
    """One audited change of a dataset or of one of its caps, with the state it left.

    Every such event carries the whole state after it (store.add_dataset and
    store.amend_dataset: the dataset's whole body; store.set_cap: the whole cap;
    store.remove_cap: none), so the state at a moment is that of the last change by then.
    at: the event's moment; kind: its kind; dataset: the dataset after it (dataset.added and
    every amendment: dataset.described, variable.*, group.*), else None; cap: (the cap's name,
    the cap after it, None when removed) for cap.set / cap.removed, else None."""

    at: datetime
    kind: str
    dataset: Dataset | None = None
    cap: tuple[str, Cap | None] | None = None


@dataclass(frozen=True)
class StateThen:
    """The dataset (variables with their classification, groups) and its caps as they stood."""

    dataset: Dataset
    caps: tuple[Cap, ...]


def state_as_of(dataset_now: Dataset, caps_now: Sequence[Cap], changes: Sequence[StateChange], when: datetime,
                read: Iterable[str] = ()) -> StateThen:
    """The dataset and its caps as they stood at `when`, by replaying the changes dated by then.

    Replay, not undo: each change carries the whole state it left (StateChange), so the state
    at `when` is the one the last change by then left, with no chain of inverses to get wrong;
    undoing the later changes from today's state would give the same, but needs each change's
    state before it, which is only the previous change's state after. `changes` in chain order
    (their moments may tie; the later in the chain wins).

    The rules for history recorded before the ledger knew of it (a release recorded later, dated
    by its publication, is in the ledger at a moment before its dataset or its variable was
    recorded; history.status_at):
    - the dataset before its first change (dataset.added after `when`): the dataset as first
      recorded, the earliest state the ledger knows (its releases then were recorded against it);
    - a variable not in the dataset at `when` (added after it) does not exist then, unless a
      release charged then reads it (`read`): then it did, in its earliest recorded state (its
      classification when first recorded), placed after the others in today's order. Leaving it
      out would drop a release's exact read of it from the protected headline (never under-report,
      docs/explanation/model.md#public-and-protected-variables);
    - a variable in the dataset at `when` and removed since existed then, so it is shown, at cost 0:
      no release ever read it, charged at `when` or not. operations.amend refuses to remove a
      variable any recorded release reads, whatever its status (a cancelled release was charged
      while planned, a retracted one from its publication), so its zeros are the answer the ledger
      gave at `when` (tests/store/test_as_of_state.py, against the ledger built up to `when`);
    - a cap not set by `when` (set after it, or never recorded through an event) does not exist
      then; a cap removed after `when` existed then, with the limit it had; a cap changed after
      `when` has the limit it had then. Caps in name order (records.in_name_order, as store.caps
      lists them), each ordered by the dataset's variables then.
    `changes`: those of this dataset and its caps only. Without any (a dataset recorded before
    its events were kept), today's state."""
    if not changes:
        return StateThen(dataset_now, tuple(caps_now))
    when = aware(when)
    states = [c.dataset for c in changes if c.dataset is not None]
    then = next((c.dataset for c in reversed(changes) if c.dataset is not None and aware(c.at) <= when),
                states[0] if states else dataset_now)
    read = set(read)
    have = set(then.variable_names)
    missing = [v for v in dataset_now.variable_names if v in read and v not in have]
    if missing:
        first: dict[str, Variable] = {}
        for state in [*states, dataset_now]:
            for variable in state.variables:
                first.setdefault(variable.name, variable)
        then = replace(then, variables=then.variables + tuple(first[v] for v in missing))
    caps: dict[str, Cap | None] = {}
    for change in changes:
        if change.cap is not None and aware(change.at) <= when:
            caps[change.cap[0]] = change.cap[1]
    order = then.variable_names
    return StateThen(then, in_name_order(replace(cap, order=order, allowance=then.allowance)
                                           for cap in caps.values() if cap is not None))
