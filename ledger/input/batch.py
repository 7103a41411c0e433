"""Checks across every release of one `record` and the ledger: ids, retries, lineage, parts.

A release already recorded is a retry, a no-op when identical (`differences`); a family's
charged members hold distinct parts; derived-from names recorded or batch releases, publishes
after its parents, and forms no cycle. Invariant: a batch whose errors are empty can be
written whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ..accounting.lineage import PUBLISHED_STATUSES, describe, publish_blockers
from ..accounting.relation import in_dataset
from ..core.errors import LedgerError
from ..core.records import CHARGED_STATUSES, Family, Release, Status
from .snapshot import LedgerSnapshot
from .utc_moments import in_utc

if TYPE_CHECKING:
    import networkx as nx


def check_batch(releases: Sequence[Release], families: Sequence[Family], snapshot: LedgerSnapshot) -> list[LedgerError]:
    """Checks across every file of one `record`: ids, lineage, families."""
    errors: list[LedgerError] = []
    seen: dict[str, Release] = {}
    for release in releases:
        if release.id in snapshot.releases:
            # a retry: the same release again is a no-op (the caller drops
            # it, see `already_recorded`); another release under a recorded id is refused
            recorded = snapshot.releases[release.id]
            differing = differences(recorded, release)
            if differing:
                errors.append(LedgerError(release.source, _at(release, "id"),
                                          f"release id {release.id!r} is already recorded with different content "
                                          f"(fields that differ: {', '.join(differing)})"))
            elif recorded.status is Status.CANCELLED:
                # a retry is a no-op because the release is charged once already; a cancelled one
                # is charged nothing, and exit 0 would tell a pipeline its budget is reserved
                errors.append(LedgerError(release.source, _at(release, "id"),
                                          f"release id {release.id!r} was cancelled: it reserves no budget, and "
                                          "a release is never recorded twice; record it under a new id"))
        elif release.id in seen:
            errors.append(LedgerError(release.source, _at(release, "id"), f"duplicate release id {release.id!r}: "
                                                                          f"also at {seen[release.id].source}"))
        seen[release.id] = release
    declared: dict[str, Family] = {}
    for family in families:
        other = declared.get(family.id)
        if other is not None and other != family:
            errors.append(LedgerError(family.source, "families", f"family {family.id!r} declared twice, differently "
                                                                 f"(also at {other.source})"))
        declared[family.id] = family

    errors.extend(_distinct_parts(seen, snapshot))

    # Recorded releases only name parents recorded before them, so a cycle can only
    # run through the new releases: the graph of the batch is enough.
    for release in seen.values():
        for parent in release.derived_from:
            if parent not in snapshot.releases and parent not in seen:
                errors.append(LedgerError(release.source, _at(release, "derived_from"),
                                          f"unknown parent release {parent!r}"))
    for release in seen.values():  # the lineage rule (docs/explanation/model.md#post-processing-and-lineage): published only after its parents
        if release.status in PUBLISHED_STATUSES and release.derived_from:
            known = _BatchAndLedger(seen, snapshot.releases)
            blockers = [p for p in publish_blockers(release, known) if p in known]
            if blockers:
                errors.append(LedgerError(release.source, _at(release, "status"),
                                          f"release {release.id!r} is {release.status.value} but it derives from "
                                          f"releases not published by then: {describe(blockers, known)}; publish "
                                          "them first (or date this one no earlier), or record it as planned"))
    cycle = None
    if any(parent in seen for release in seen.values() for parent in release.derived_from):
        import networkx as nx  # only for a batch whose releases derive from each other

        try:
            cycle = nx.find_cycle(lineage_graph(seen.values()))
        except nx.NetworkXNoCycle:
            pass
    if cycle:
        ids = [edge[0] for edge in cycle] + [cycle[0][0]]
        first = seen[cycle[0][0]]
        errors.append(LedgerError(first.source, _at(first, "derived_from"),
                                  "derived_from forms a cycle: " + " -> ".join(ids)))
    return errors


def _distinct_parts(batch: Mapping[str, Release], snapshot: LedgerSnapshot) -> list[LedgerError]:
    """The charged members of a family hold distinct parts (docs/explanation/model.md#families): a new member's (family,
    part) is held neither by a charged recorded member (any status but cancelled: a retracted
    release was published and still counts) nor by another release of the batch. The family's
    cost is its worst member's, which is valid only for members on disjoint parts: two releases
    on one part compose sequentially (their losses add), so charged in parallel they would be
    under-reported. A release already recorded (a retry: `check_batch` compares it) is skipped."""
    errors: list[LedgerError] = []
    new = [release for release in batch.values() if release.family is not None and release.part is not None
           and release.status in CHARGED_STATUSES and release.id not in snapshot.releases]
    if not new:
        return errors
    wanted = {(release.family, release.part) for release in new}
    held = dict(snapshot.parts_held(wanted)) if snapshot.parts_held is not None else {
        (r.family, r.part): r.id for r in snapshot.releases.values()
        if (r.family, r.part) in wanted and r.status in CHARGED_STATUSES}
    taken: dict[tuple[str, str], Release] = {}
    for release in new:
        key = (release.family, release.part)
        if key in held:
            holder = f"release {held[key]!r}, recorded and charged"
        elif key in taken:
            holder = f"release {taken[key].id!r} of this record (at {taken[key].source})"
        else:
            taken[key] = release
            continue
        errors.append(LedgerError(release.source, _at(release, "part"),
                                  f"part {release.part!r} of family {release.family!r} is already held by {holder}: "
                                  "the members of a family are charged in parallel, as releases on disjoint parts, and "
                                  "two releases on one part compose sequentially (their losses add). Record this "
                                  "one outside the family (no family, no part), or name the part it is computed "
                                  "on if it is another"))
    return errors


class _BatchAndLedger(Mapping):
    """The releases of a batch, then the recorded ones, by id."""

    def __init__(self, batch: Mapping[str, Release], recorded: Mapping[str, Release]):
        self.batch, self.recorded = batch, recorded

    def __getitem__(self, key: str) -> Release:
        return self.batch[key] if key in self.batch else self.recorded[key]

    def __contains__(self, key: object) -> bool:
        return key in self.batch or key in self.recorded

    def __iter__(self):
        return iter(self.batch)

    def __len__(self) -> int:
        return len(self.batch)


# what a release file states about a release, compared when its id is already recorded
CONTENT_FIELDS = ("dataset", "title", "reads", "mechanism", "guarantees", "derived_from", "family", "part", "pufferfish",
                  "output_digest", "output")
STATED_LIFECYCLE = ("published_at",)  # (an approval is never stated: APPROVAL_FIELDS)


def differences(recorded: Release, given: Release) -> list[str]:
    """The fields in which `given` differs from the recorded release of the same id.

    What the file says is compared, not what is derived from it: a file stating no guarantees
    says "what the mechanism implies" (its name and parameters are compared), and the
    catalogue may since derive more from the same parameters (schema 11: a Gaussian declared
    by (epsilon, delta) gained the zCDP bound of its implied multiplier), so the recorded
    guarantees need only be among those the mechanism now implies. Stated guarantees are
    compared as stated. A release given as planned (a file without status) matches whatever
    lifecycle the recorded one has reached since; one given as approved or published must
    state the same status and publication moment (a retracted release was published)."""
    fields = [name for name in CONTENT_FIELDS if _content_differs(recorded, given, name)]
    if given.status is not Status.PLANNED:
        status = Status.PUBLISHED if recorded.status is Status.RETRACTED else recorded.status
        if status is not given.status:
            fields.append("status")
        fields += [name for name in STATED_LIFECYCLE
                   if getattr(given, name) is not None and _same_time(getattr(recorded, name), getattr(given, name))
                   is False]
    return fields


def _content_differs(recorded: Release, given: Release, name: str) -> bool:
    if name == "guarantees" and given.guarantees_derived:  # (none stated, `guarantees: []`, is no derivation)
        derivation = bool(recorded.guarantees) or not given.guarantees
        return not (derivation and set(recorded.guarantees) <= set(given.guarantees))
    return getattr(recorded, name) != getattr(given, name)


def _same_time(a, b) -> bool:
    if isinstance(a, datetime) and isinstance(b, datetime):
        return in_utc(a) == in_utc(b)
    return a == b


def already_recorded(releases: Sequence[Release], snapshot: LedgerSnapshot) -> list[Release]:
    """The releases of a batch recorded before (identical, once `check_batch` passed)."""
    return [release for release in releases if release.id in snapshot.releases]


def _at(release: Release, name: str) -> str:
    return f"{release.source_field}.{name}" if release.source_field else name


def lineage_graph(releases: Iterable[Release]) -> nx.DiGraph:
    """derived-from edges, parent -> child."""
    import networkx as nx

    graph = nx.DiGraph()
    for release in releases:
        graph.add_node(release.id)
        for parent in release.derived_from:
            graph.add_edge(parent, release.id)
    return graph


def finish_batch(releases: list[Release], families: list[Family], errors: list[LedgerError],
                 snapshot: LedgerSnapshot) -> tuple[list[Release], list[Family], list[LedgerError]]:
    """A batch built whole (one `record`, from files or from the API's objects): its releases; the
    families it defines that the ledger does not hold yet, each once; its errors with those of the
    checks across the batch and the ledger (check_batch)."""
    # each release as charged in its dataset's neighbour relation (docs/explanation/model.md#variables-subsets-and-neighbours; relation.in_dataset)
    releases = [in_dataset(r, snapshot.datasets[r.dataset]) if r.dataset in snapshot.datasets else r
                for r in releases]
    errors = [*errors, *check_batch(releases, families, snapshot)]
    new_families = list({family.id: family for family in families if family.id not in snapshot.families}.values())
    return releases, new_families, errors
