"""The lineage rule (docs/explanation/model.md#post-processing-and-lineage): post-processing is free only while its ancestors are charged.

A release derived from other releases' outputs reads no data and costs 0
(Pufferfish transformation invariance; Tan Remark 4.2.1). That is sound only
because what it was computed from is charged, and published no later than it:

- a release cannot be cancelled while any charged release (planned, approved,
  published, retracted) derives from it: the derived release would publish
  information from an output nobody pays for;
- a derived release cannot be published, nor recorded as published, before
  every release it derives from is published (published or retracted), and not
  dated before any of them was: in between, the ledger as it stood (`--as-of`)
  would show a function of an output out while the output itself does not count.

Pure functions: each returns the ids in the way (empty: allowed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from .release_times import _naive, published_moment
from ..core.records import CHARGED_STATUSES, Release, Status

PUBLISHED_STATUSES = frozenset({Status.PUBLISHED, Status.RETRACTED})  # what was published stays published


def cancel_blockers(deriving: Mapping[str, Status]) -> list[str]:
    """The charged releases among those deriving from a release (id -> status, as the store reads
    them: store.deriving_from): while any exists it cannot be cancelled."""
    return sorted(rid for rid, status in deriving.items() if status in CHARGED_STATUSES)


def publish_blockers(release: Release, known: Mapping[str, Release], at: datetime | None = None) -> list[str]:
    """The releases `release` derives from that are not published yet (unknown ones included),
    or published after `at`, the moment `release` is published (default: its own publication
    moment, as `release_times.published_moment` reads it)."""
    if at is None:
        at = published_moment(release)
    blockers = []
    for parent in release.derived_from:
        found = known.get(parent)
        if found is None or found.status not in PUBLISHED_STATUSES:
            blockers.append(parent)
        elif at is not None and (moment := published_moment(found)) is not None and _naive(moment) > _naive(at):
            blockers.append(parent)
    return blockers


def describe(blockers: Iterable[str], known: Mapping[str, Release]) -> str:
    """`raw (planned), rounded (published 2026-01-05T10:00:00+00:00)`: the releases in the way,
    with their status (and the publication date of a published one, which is in the way by it)."""
    parts = []
    for rid in blockers:
        found = known.get(rid)
        if found is None:
            parts.append(rid)
        elif found.status in PUBLISHED_STATUSES and found.published_at is not None:
            parts.append(f"{rid} ({found.status.value} {found.published_at.isoformat()})")
        else:
            parts.append(f"{rid} ({found.status.value})")
    return ", ".join(parts)
