"""The report's reading of the store's events (store/report_queries.py): the lifecycle steps of its
releases, the stored event rows as AuditEvents, and the release rows as they stood at --as-of (the
summarised report of a large ledger and its register).

Read here, below the API, beside the report's inputs (report_inputs.py); no Release is decoded but
those asked for by id. A register read in a snapshot of its own is refused when the ledger has
changed since the page was read (`same_ledger`: every change appends an event).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..core.lazy import lazy_module
from ..core.records import Status
from ..store.as_of import DATASET_STATE_KINDS
from .report_inputs import AuditEvent, event_moment

if TYPE_CHECKING:
    from collections.abc import Sequence

audit_chain = lazy_module("ledger.store.audit_chain")  # the ORM, imported when a report is read
report_queries = lazy_module("ledger.store.report_queries")  # the ORM, imported when a report is read

# audit event kinds that change a release, and the status each leads to
LIFECYCLE_KINDS = {
    "release.approved": Status.APPROVED,
    "release.published": Status.PUBLISHED,
    "release.retracted": Status.RETRACTED,
    "release.cancelled": Status.CANCELLED,
}
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


def events_of(rows) -> list[AuditEvent]:
    """Stored event rows (report_queries.EVENT_FIELDS) as AuditEvents."""
    return [AuditEvent(seq, event_moment(at), actor, kind, subject, payload, digest)
            for seq, at, actor, kind, subject, payload, digest in rows]


def lifecycle_events(session, ids=None, until: str | None = None) -> dict[str, dict]:
    """report.lifecycle_steps from the publication, retraction and cancellation events only
    (of the releases `ids`, or of every release; with `until`, dated by then: as_of.event_text)."""
    if ids is not None:
        return lifecycle_steps(events_of(report_queries.lifecycle_events(session, ids, until)))
    found: dict[str, dict] = {}
    for subject, actor in report_queries.every_publisher(session, until):
        found.setdefault(subject, {})["published_by"] = actor
    for subject, steps in lifecycle_steps(events_of(report_queries.every_ending(session, until))).items():
        found.setdefault(subject, {}).update(steps)
    return found


def register_moment(session, large):
    """A large report's register at --as-of: an as_of.Then (the status each release row had then;
    `when`: --as-of, aware) and --as-of as the audit events' text; (None, None) without --as-of.
    The events' moments are UTC text (the large path is taken only then: event_counts), so the
    moment's UTC text orders with them."""
    return report_queries.register_moment(session, large.dataset.name, getattr(large, "as_of", None))


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
