"""Rules every recorded release meets, from a file or handed over whole (the API, an adapter).

A status a file may state with its lifecycle fields (no moment in the future, no approval
carried: four eyes), membership of a family of its dataset whose key it reads, and a part
named exactly when it is in a family. Invariant: the same rules, whichever way a release arrives.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..accounting.catalogue import derive_guarantees, overclaims, unknown_parameters
from ..core.errors import LedgerError
from ..core.records import Family, Release, Status
from .documents import Collector, Path_
from .limits import field_name
from .schema_check import Taint
from .utc_moments import MomentOutOfRange, in_utc, utc_moment


APPROVAL_FIELDS = ("approved_by", "approved_at")  # refused in a release file (`lifecycle_fields`)


def lifecycle_fields(entry: dict, out: Collector, at: Path_, recorded_at: datetime | None,
                      refused: Taint | None = None):
    """A release file's status and when it was published: no status is planned; published
    carries published_at, never in the future. A file never carries an approval
    (APPROVAL_FIELDS): approving is a step by another person, `approve` (four eyes; a file
    stating approved or published is its recorder's own approval, which only a dataset that
    waives separation of duties allows: operations/people.check_recorded). `refused`: the
    values the schema refused (an unknown status: its rules are not checked; the moments are)."""
    refused = refused or Taint()
    if refused.within(at + ("status",)):
        status = None  # (an unknown status, reported by the schema: the rules of none apply)
    else:
        status = Status(entry.get("status", Status.PLANNED.value))
    moments = {}
    for key in ("published_at",):
        if key in entry and not refused.within(at + (key,)):
            try:
                moment = utc_moment(entry[key])
            except MomentOutOfRange as exc:
                out.add(at + (key,), str(exc))
                continue
            if moment is None:
                out.add(at + (key,), f"not an ISO date-time: {entry[key]!r}")
            elif recorded_at is not None and moment > in_utc(recorded_at):
                out.add(at + (key,), f"{entry[key]!r} is in the future (now: {in_utc(recorded_at).isoformat()})")
            else:
                moments[key] = moment
    for key in APPROVAL_FIELDS:
        if key in entry:
            out.add(at + (key,), "an approval is never stated with a release (four eyes: approving is a "
                                 "step by a person other than the recorder); record it without "
                                 f"{' and '.join(APPROVAL_FIELDS)} and approve it with `privacy-ledger approve ID` "
                                 "as another person")
    if status is Status.PLANNED and "published_at" in entry:
        out.add(at + ("published_at",), "a planned release has no published_at; give status: published")
    if status is Status.APPROVED and "published_at" in entry:
        out.add(at + ("published_at",), "an approved release is not published yet; give status: published")
    if status is Status.PUBLISHED and "published_at" not in entry:
        out.add(at + ("published_at",), "a release recorded as published needs published_at "
                                        "(when it was published)")
    return status, moments.get("published_at")


def family_membership(family: str | None, dataset: str, reads: frozenset[str], known: Mapping[str, Family],
                       out, at: Path_) -> None:
    """A member names a declared family of its own dataset, and reads the family's key."""
    if family is None:
        return
    found = known.get(family)
    if found is None:
        out.add(at + ("family",), f"unknown family {family!r}; declare it under `families`")
    elif found.dataset != dataset:
        out.add(at + ("family",), f"family {family!r} belongs to dataset {found.dataset!r}, "
                                  f"but this release reads dataset {dataset!r}")
    elif found.partition is not None and not found.partition <= reads:
        # which records a part holds depends on the key: its output depends on them (docs/explanation/model.md#families)
        missing = ", ".join(sorted(found.partition - reads))
        out.add(at + ("reads",), f"release is in family {family!r}, partitioned by "
                                 f"{', '.join(sorted(found.partition))}; it must list {missing} in reads")


def part_named(family: str | None, part: str | None, out, at: Path_) -> None:
    """A family member names the part of the records it is computed on; a release outside any
    family names none (docs/explanation/model.md#families: a family's members are charged in parallel, as on disjoint
    parts, which the ledger can check only if each says which part it covers)."""
    if family is not None and part is None:
        out.add(at + ("part",), f"release is in family {family!r} but names no part: give `part`, the part of "
                                "the records it is computed on (a short name, such as degree=PhD or stratum 3). "
                                "The members of a family are charged in parallel, as releases on disjoint parts; "
                                "two on one part compose sequentially, and the ledger can refuse a part named twice "
                                "only if each member names its own")
    elif family is None and part is not None:
        out.add(at + ("part",), f"part {part!r} given, but the release is in no family: a part is the share of "
                                "the records a family member is computed on; give `family` too, or leave `part` out")


class _ReleaseCollector:
    """Errors of a `Release` handed over whole, each named by the release and its field."""

    def __init__(self, release: Release):
        self.where = f"release {release.id}"
        self.errors: list[LedgerError] = []

    def add(self, at: Path_, message: str) -> None:
        self.errors.append(LedgerError(self.where, field_name(at), message))


RECORDABLE_STATUSES = (Status.PLANNED, Status.APPROVED, Status.PUBLISHED)  # as the release schema's enum


def check_release_record(release: Release, recorded_at: datetime, families: Mapping[str, Family]) -> list[LedgerError]:
    """A `Release` handed over whole (the Python API, an adapter) meets the rules a release file
    meets: a recorded family of its dataset whose key it reads (docs/explanation/model.md#families); a status a file may
    state, with its lifecycle fields (`lifecycle_fields`: no moment in the future, no approval
    carried); parameters that do not contradict each other; no guarantee
    stronger than its parameters imply (`overclaims`, docs/explanation/model.md#composition). The
    recording moment and person are the ledger's own (`operations.source_builder`), never the
    record's: the audit trail and the as-of views read it, and another recorder would waive
    separation of duties."""
    out = _ReleaseCollector(release)
    family_membership(release.family, release.dataset, release.reads, families, out, ())
    part_named(release.family, release.part, out, ())
    if release.status not in RECORDABLE_STATUSES:
        out.add(("status",), f"a release is recorded planned, approved or published; found {release.status.value}")
    else:
        entry: dict[str, Any] = {"status": release.status.value}
        for key in ("approved_by", "approved_at", "published_at"):
            value = getattr(release, key)
            if value is None and key == "published_at" and release.status is Status.PUBLISHED:
                value = recorded_at  # (an adapter's output, published when recorded: source_builder)
            if value is not None:
                entry[key] = value if key == "approved_by" else in_utc(value).isoformat()
        lifecycle_fields(entry, out, (), recorded_at)
    derived, problems = derive_guarantees(release.mechanism, release.reads)
    for problem in unknown_parameters(release.mechanism.name, dict(release.mechanism.params)) + problems:
        if not problem.missing:
            out.add(("mechanism", problem.field), problem.message)
    if tuple(release.guarantees) != tuple(derived):  # explicit guarantees, as a file's `guarantees`
        for index, field_, message in overclaims(release.mechanism, release.reads, tuple(release.guarantees)):
            out.add(("guarantees", index, field_), message)
    return out.errors
