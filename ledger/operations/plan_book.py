"""Plans in the book of record: a solved plan stored as a named, numbered version
(docs/explanation/plans.md, "Plans in the book of record").

`plan record PLAN.yaml --name NAME` solves the plan and, in one transaction, records its
releases as planned (reserving their budget) and appends a `plan.recorded` event whose payload
is the version: every release's solved parameter, the epsilon or rho it was allocated, the cap
that binds it and its expected error. The event is chained like every other, so the versions
are read back from the audit chain itself; there is no other copy to drift from it.

Version N of plan NAME records its releases under the ids NAME/vN/ID (ID: the plan's own id),
so two versions never share a release, and `diff` matches their releases by the plan's id.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from ..core.errors import InputErrors, LedgerError, Refused
from ..core.lazy import lazy_module
from ..core.records import Dataset, Release
from ..input.plan import Plan
from . import transactions
from .plan_noise import Solution, Solved, parameter
from .solve import solve

audit_chain = lazy_module("ledger.store.audit_chain")
row_reads = lazy_module("ledger.store.row_reads")
sessions = lazy_module("ledger.store.sessions")

PLAN_EVENT = "plan.recorded"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")  # as the schemas' names: no "/" or "@"
NAME_LIMIT = 100
ID_LIMIT = 200  # a release id's length (schemas/release.v1.schema.json)
LABEL = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_.:-]*)(@v(?P<version>[1-9][0-9]{0,8}))?$")


@dataclass(frozen=True)
class PlanVersion:
    """One stored version of a plan, as its `plan.recorded` event holds it."""

    name: str
    version: int
    dataset: str
    seq: int  # its event in the audit chain
    at: str
    actor: str
    source: str  # the plan file it was solved from
    releases: tuple[dict, ...]  # per release: key, id, title, reads, mechanism, parameter, value,
    # allocated ({"epsilon": text} or {"rho": text}), binding, std, halfwidth95

    @property
    def label(self) -> str:
        return f"{self.name}@v{self.version}"


def check_name(name: str) -> None:
    if not isinstance(name, str) or not NAME.match(name) or len(name) > NAME_LIMIT:
        raise InputErrors([LedgerError("plan record", "name", f"a plan's name is letters, digits and _ . : - "
                                       f"(at most {NAME_LIMIT}), starting with a letter or digit; found "
                                       f"{str(name)[:40]!r}")])


def parse_label(text: str) -> tuple[str, int | None] | None:
    """NAME or NAME@vN as (name, N or None); None when `text` is neither."""
    found = LABEL.match(text) if isinstance(text, str) else None
    return None if found is None else (found["name"], None if found["version"] is None else int(found["version"]))


# --------------------------------------------------------------------------
# Reading the versions
# --------------------------------------------------------------------------


def versions_in(session, dataset: str | None = None, name: str | None = None) -> list[PlanVersion]:
    """Every stored version (of `dataset`, of plan `name`), in chain order."""
    rows = audit_chain.lifecycle_events(session, [PLAN_EVENT])
    found = [from_event(seq, at, actor, payload) for seq, _kind, _subject, at, actor, payload in rows]
    return [v for v in found if (dataset is None or v.dataset == dataset) and (name is None or v.name == name)]


def against_actual(session, dataset: str) -> list[tuple[PlanVersion, list[Actual]]]:
    """Per stored version of `dataset`'s plans, in chain order, each planned release's allocation
    beside the recorded release (`against`); only the releases the plans name are read."""
    found = versions_in(session, dataset)
    lookup = row_reads.ReleaseLookup(session)
    releases = {rid: lookup[rid] for v in found for rid in release_ids(v) if rid in lookup}
    return [(v, against(v, releases)) for v in found]


def from_event(seq: int, at: str, actor: str, payload: str | Mapping) -> PlanVersion:
    body = (json.loads(payload) if isinstance(payload, str) else payload)["plan"]
    return PlanVersion(body["name"], int(body["version"]), body["dataset"], seq, at, actor, body.get("source", ""),
                       tuple(body["releases"]))


def versions(engine, dataset: str | None = None) -> list[PlanVersion]:
    with sessions.read_session(engine) as session:
        return versions_in(session, dataset)


def version(engine, name: str, number: int | None = None) -> PlanVersion:
    """Version `number` of plan `name` (its latest when None); bad input when there is none."""
    with sessions.read_session(engine) as session:
        found = versions_in(session, name=name)
    if not found:
        raise InputErrors([LedgerError(f"plan {name}", "name", "no plan of this name is recorded in this ledger")])
    if number is None:
        return found[-1]
    for item in found:
        if item.version == number:
            return item
    raise InputErrors([LedgerError(f"plan {name}", "version", f"no version v{number}; it has "
                                   f"{', '.join(f'v{v.version}' for v in found)}")])


# --------------------------------------------------------------------------
# Recording a version
# --------------------------------------------------------------------------


def record(engine, plan: Plan, dataset: Dataset, name: str, actor: str
           ) -> tuple[Solution, transactions.Recorded, PlanVersion]:
    """Solve `plan` as version N + 1 of `name` and record it: its releases as planned (every cap
    checked again as they are written) and its `plan.recorded` event, in one transaction, all
    or nothing. Refused (exit 1) when a cap would break or another version N + 1 was recorded
    meanwhile; bad input (exit 2) for a bad name or a name that belongs to another dataset."""
    check_name(name)
    with sessions.read_session(engine) as session:
        earlier = versions_in(session, name=name)
    if earlier and earlier[-1].dataset != dataset.name:
        raise InputErrors([LedgerError("plan record", "name", f"plan {name!r} is a plan of dataset "
                                       f"{earlier[-1].dataset!r}, not {dataset.name!r}")])
    number = len(earlier) + 1
    solution = solve(engine, _versioned(plan, name, number), dataset, actor)
    body = _body(solution, plan, name, number)
    stored: list[PlanVersion] = []

    def append(session, recorded: transactions.Recorded) -> None:
        if len(versions_in(session, name=name)) != number - 1:
            raise Refused(LedgerError(f"plan {name}", "version", f"v{number} was recorded by another steward "
                                                                 "meanwhile; solve and record the plan again"))
        seq, _ = audit_chain.append_event(session, kind=PLAN_EVENT, subject=f"{name}@v{number}", actor=actor,
                                    payload={"plan": body})
        stored.append(PlanVersion(name, number, dataset.name, seq, "", actor, body["source"],
                                  tuple(body["releases"])))

    builder = transactions.source_builder([solution.release_file()], actor)
    recorded = transactions.record(engine, builder, actor, then=append)
    return solution, recorded, stored[0]


def _versioned(plan: Plan, name: str, number: int) -> Plan:
    """The plan with each release's id as recorded: NAME/vN/ID."""
    long = [p for p in plan.releases if len(f"{name}/v{number}/{p.id}") > ID_LIMIT]
    if long:
        raise InputErrors([LedgerError(p.source, f"{p.at}.id", f"recorded as {name}/v{number}/{p.id[:20]}..., "
                                       f"longer than {ID_LIMIT} characters: shorten the id or the plan's name")
                           for p in long])
    return replace(plan, releases=tuple(replace(p, id=f"{name}/v{number}/{p.id}") for p in plan.releases))


def _body(solution: Solution, plan: Plan, name: str, number: int) -> dict[str, Any]:
    keys = [p.id for p in plan.releases]
    return {"name": name, "version": number, "dataset": solution.dataset, "source": plan.path,
            "releases": [_entry(key, row) for key, row in zip(keys, solution.rows)]}


def _entry(key: str, row: Solved) -> dict[str, Any]:
    return {"key": key, "id": row.release.id, "title": row.planned.title, "reads": list(row.planned.reads),
            "mechanism": row.planned.family, "parameter": row.parameter, "value": str(row.value),
            "allocated": allocated(row.release), "binding": row.binding, "std": row.std,
            "halfwidth95": row.halfwidth95}


def allocated(release: Release) -> dict[str, str]:
    """The epsilon (Laplace, geometric) or rho (the Gaussians) a release states: what the plan
    allocated it, and what it charges its caps."""
    guarantee = release.guarantees[0]
    if guarantee.rho is not None:
        return {"rho": str(guarantee.rho)}
    return {"epsilon": str(guarantee.epsilon)}


# --------------------------------------------------------------------------
# Comparing versions, and a version against what was recorded
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One release of either version: its parameter before and after, binding cap and std."""

    key: str
    parameter: str
    old: Fraction | None
    new: Fraction | None
    change: float | None  # new / old - 1, when both state the same parameter
    old_binding: str | None
    new_binding: str | None
    old_std: float | None
    new_std: float | None

    @property
    def status(self) -> str:
        if self.old is None:
            return "added"
        if self.new is None:
            return "removed"
        same = (self.old == self.new and self.old_binding == self.new_binding)
        return "same" if same else "changed"


def diff(old: PlanVersion, new: PlanVersion) -> list[Change]:
    """Each release of either version, matched by the plan's own id, old order first."""
    before = {r["key"]: r for r in old.releases}
    after = {r["key"]: r for r in new.releases}
    rows = []
    for key in [*before, *(k for k in after if k not in before)]:
        a, b = before.get(key), after.get(key)
        old_value = None if a is None else Fraction(a["value"])
        new_value = None if b is None else Fraction(b["value"])
        comparable = a is not None and b is not None and a["parameter"] == b["parameter"]
        rows.append(Change(key, (b or a)["parameter"], old_value, new_value,
                           float(new_value / old_value) - 1 if comparable else None,
                           a and a["binding"], b and b["binding"], a and a["std"], b and b["std"]))
    return rows


@dataclass(frozen=True)
class Actual:
    """A planned release beside what the ledger holds of it."""

    planned: Mapping[str, Any]  # the version's entry
    status: str  # planned, approved, published, retracted, cancelled; "missing" if no such release
    parameter: str | None  # the recorded release's parameter and value
    value: Fraction | None
    charge: Mapping[str, str]  # what it charges: {"epsilon": ...} or {"rho": ...}; {} when cancelled


def against(version_: PlanVersion, releases: Mapping[str, Release]) -> list[Actual]:
    """Each planned release of the version beside the recorded release of the same id."""
    rows = []
    for entry in version_.releases:
        release = releases.get(entry["id"])
        if release is None:
            rows.append(Actual(entry, "missing", None, None, {}))
            continue
        name, value = parameter(release)
        charged = release.status.value != "cancelled"
        rows.append(Actual(entry, release.status.value, name, value, allocated(release) if charged else {}))
    return rows


def release_ids(version_: PlanVersion) -> Sequence[str]:
    return [entry["id"] for entry in version_.releases]
