"""The ledger as it stood at a moment, by publication date (issue 12 section 1).

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

A release enters the loss over time at `charged_from`: the earlier of its
planning and its publication (a planned release reserves budget from the day it
is planned; a publication recorded afterwards counts from its publication date).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from ..core.records import Release, Status

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
