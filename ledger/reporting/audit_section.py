"""The report's audit trail: the dataset's events, counted by kind and actor, the most recent
listed with their notes, beside the chain's status (the chain is ledger-wide).

Invariant: at most AUDIT_EVENTS_LISTED events are listed; the rest are counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from ..operations.meeting_pack import change_note, dataset_events  # (computed below the API; the report shows it)
from ..operations.report_inputs import AuditEvent, ChainStatus, ReportInputs
from ..core.records import DATASET_CHANGE_KINDS


AUDIT_EVENTS_LISTED = 300  # the most recent events listed in full; the rest are counted by kind


@dataclass(frozen=True)
class AuditEntry:
    seq: int
    at: datetime
    actor: str
    kind: str
    subject: str
    note: str | None = None  # a retraction's or cancellation's reason; the role a role event grants or revokes


@dataclass(frozen=True)
class AuditTrail:
    """The dataset's audit events and the chain status (the chain is ledger-wide).

    listed: the AUDIT_EVENTS_LISTED most recent events of the dataset, oldest first;
    omitted: how many earlier ones are only counted in `by_kind`."""

    ok: bool
    head: str
    chain_events: int
    problems: tuple[str, ...]
    events: int  # events about this dataset
    first_at: datetime | None
    last_at: datetime | None
    by_kind: tuple[tuple[str, int], ...]
    by_actor: tuple[tuple[str, int], ...]
    listed: tuple[AuditEntry, ...]
    omitted: int


def audit_trail(inputs: ReportInputs, chain: ChainStatus) -> AuditTrail:
    events = dataset_events(inputs)
    listed = events[-AUDIT_EVENTS_LISTED:]
    return AuditTrail(
        ok=chain.ok,
        head=chain.head,
        chain_events=chain.events,
        problems=chain.problems,
        events=len(events),
        first_at=events[0].at if events else None,
        last_at=events[-1].at if events else None,
        by_kind=tuple(sorted(Counter(e.kind for e in events).items())),
        by_actor=tuple(sorted(Counter(e.actor for e in events).items())),
        listed=tuple(AuditEntry(e.seq, e.at, e.actor, e.kind, e.subject, audit_note(e)) for e in listed),
        omitted=len(events) - len(listed),
    )


def audit_note(event: AuditEvent) -> str | None:
    """The note the audit trail shows beside an event: a retraction's or cancellation's reason, the
    role a role event names, a dataset change in words; None for the others."""
    if event.kind in ("release.retracted", "release.cancelled"):
        return event.data().get("reason")
    if event.kind.startswith("role."):
        return (event.data().get("role") or {}).get("role")
    if event.kind.startswith(DATASET_CHANGE_KINDS):
        return change_note(event.data().get("change") or {})
    return None
