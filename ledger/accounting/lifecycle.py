"""Release lifecycle: planned -> approved -> published; retracted after publishing,
cancelled before.

Planned and approved releases reserve budget; published and retracted ones
count (what was published cannot be unpublished, so a retraction is a new
event and the release still counts); a cancelled one frees its reservation.

A release is charged from the moment an output of it exists (docs/explanation/accounting.md): computed
by `run`, or recorded with its digest (`output_digest`, or the output itself). Whatever
is published afterwards may depend on what that output showed, so cancelling it would
under-report the transcript: `cancel` frees only a reservation whose output never
existed, and is refused otherwise (`OutputCharged`).

Pure: `transition` returns the changed release or the reason it cannot change.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
FREEING = frozenset({"cancel"})  # steps that stop a release being charged: refused once an output exists


@dataclass(frozen=True, slots=True)
class OutputCharged:
    """A step refused because it would stop charging a release whose output exists
    (docs/explanation/accounting.md): a refusal of the accounting, as a cap's (exit 1), not bad input."""

    message: str


def output_exists(release: Release) -> bool:
    """Has an output of `release` been computed (by `run`) or recorded as computed?"""
    return release.output_digest is not None or release.output is not None


def transition(release: Release, action: str, actor: str, at: datetime) -> Release | str | OutputCharged:
    if action not in TRANSITIONS:
        return f"unknown lifecycle action {action!r}; known: {', '.join(TRANSITIONS)}"
    sources, target = TRANSITIONS[action]
    if release.status not in sources:
        allowed = " or ".join(s.value for s in sorted(sources, key=list(Status).index))
        article = "an" if allowed[0] in "aeiou" else "a"
        then = "; approve it first" if action == "publish" and release.status is Status.PLANNED else ""
        return (f"cannot {action} release {release.id!r}: it is {release.status.value} "
                f"(only {article} {allowed} release can be {target.value}){then}")
    if action in FREEING and output_exists(release):
        return OutputCharged(_output_kept(release, action))
    changes: dict = {"status": target}
    if action == "approve":
        changes.update(approved_by=actor, approved_at=at)
    if action == "publish":
        changes.update(published_at=at)
    return replace(release, **changes)


def _output_kept(release: Release, action: str) -> str:
    """One line: the output that exists (when, digest prefix), the rule, and what the steward can do."""
    facts = ([f"recorded {release.recorded_at.isoformat()}"] if release.recorded_at is not None else []) + \
        ([f"SHA-256 {release.output_digest[:16]}…"] if release.output_digest else [])
    return (f"cannot {action} release {release.id!r}: its output exists"
            + (f" ({', '.join(facts)})" if facts else "")
            + ", and an output that exists stays charged: what is published next may depend on it (docs/explanation/accounting.md). "
            f"Leave it {release.status.value} and unpublished (charged, never out); only a release whose output was never computed "
            "can be cancelled")
