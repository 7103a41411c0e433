"""The lineage rule (DESIGN 2.5): post-processing is free only while its ancestors are charged.

A release derived from other releases' outputs reads no data and costs 0
(Pufferfish transformation invariance; Tan Remark 4.2.1). That is sound only
because what it was computed from is charged, and published no later than it:

- a release cannot be cancelled while any charged release (planned, approved,
  published, retracted) derives from it: the derived release would publish
  information from an output nobody pays for;
- a derived release cannot be published, nor recorded as published, before
  every release it derives from is published (published or retracted).

Pure functions: each returns the ids in the way (empty: allowed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..core.records import CHARGED_STATUSES, Release, Status

PUBLISHED_STATUSES = frozenset({Status.PUBLISHED, Status.RETRACTED})  # what was published stays published


def cancel_blockers(deriving: Mapping[str, Status]) -> list[str]:
    """The charged releases among those deriving from a release (id -> status, as the store reads
    them: store.deriving_from): while any exists it cannot be cancelled."""
    return sorted(rid for rid, status in deriving.items() if status in CHARGED_STATUSES)


def publish_blockers(release: Release, known: Mapping[str, Release]) -> list[str]:
    """The releases `release` derives from that are not published yet (unknown ones included)."""
    blockers = []
    for parent in release.derived_from:
        found = known.get(parent)
        if found is None or found.status not in PUBLISHED_STATUSES:
            blockers.append(parent)
    return blockers


def describe(blockers: Iterable[str], known: Mapping[str, Release]) -> str:
    """`raw (planned), rounded (approved)`: the releases in the way, with their status."""
    parts = []
    for rid in blockers:
        found = known.get(rid)
        parts.append(f"{rid} ({found.status.value})" if found is not None else rid)
    return ", ".join(parts)
