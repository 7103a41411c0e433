"""Release lifecycle: planned -> approved -> published; retracted after publishing,
cancelled before.

Planned and approved releases reserve budget; published and retracted ones
count (what was published cannot be unpublished, so a retraction is a new
event and the release still counts); a cancelled one frees its reservation.
Pure: `transition` returns the changed release or the reason it cannot change.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from ..core.records import Release, Status

# action -> (statuses it may start from, status it leads to)
TRANSITIONS: dict[str, tuple[frozenset[Status], Status]] = {
    "approve": (frozenset({Status.PLANNED}), Status.APPROVED),
    "publish": (frozenset({Status.APPROVED}), Status.PUBLISHED),
    "retract": (frozenset({Status.PUBLISHED}), Status.RETRACTED),
    "cancel": (frozenset({Status.PLANNED, Status.APPROVED}), Status.CANCELLED),
}

ENFORCING = frozenset({"approve", "publish"})  # steps that re-check the caps


def transition(release: Release, action: str, actor: str, at: datetime) -> Release | str:
    if action not in TRANSITIONS:
        return f"unknown lifecycle action {action!r}; known: {', '.join(TRANSITIONS)}"
    sources, target = TRANSITIONS[action]
    if release.status not in sources:
        allowed = " or ".join(s.value for s in sorted(sources, key=list(Status).index))
        article = "an" if allowed[0] in "aeiou" else "a"
        then = "; approve it first" if action == "publish" and release.status is Status.PLANNED else ""
        return (f"cannot {action} release {release.id!r}: it is {release.status.value} "
                f"(only {article} {allowed} release can be {target.value}){then}")
    changes: dict = {"status": target}
    if action == "approve":
        changes.update(approved_by=actor, approved_at=at)
    if action == "publish":
        changes.update(published_at=at)
    return replace(release, **changes)
