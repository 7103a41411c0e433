"""The report's "Plan against actual" section: per stored plan version of the dataset, each
planned release's allocation (its solved parameter and the epsilon or rho allocated to it)
beside what the ledger holds of it (its status, recorded parameter and charge). Read from the
report's own audit events and releases (operations/plan_book.py stores the versions);
empty, and the section not shown, when the dataset has no stored plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction

from ..core.numbers import format_number
from ..core.records import Release
from ..operations import plan_book


@dataclass(frozen=True)
class PlanRow:
    release: str  # the plan's own id
    recorded_as: str  # the release id it was recorded under
    mechanism: str
    solved: str  # "epsilon 1/2", "sigma 3.5", "rho 1/8"
    allocated: str  # "epsilon 1/2" or "rho 1/8"
    binding: str  # the cap that bound it, "fixed" for a fixed parameter
    status: str  # planned, approved, published, retracted, cancelled, missing
    recorded: str  # the recorded release's parameter, "—" when missing
    charge: str  # what it charges, "—" when cancelled or missing


@dataclass(frozen=True)
class PlanAgainstActual:
    plan: str  # NAME@vN
    event: int  # its plan.recorded event in the audit chain
    recorded_by: str
    recorded_at: str
    rows: tuple[PlanRow, ...]


def plans_against_actual(events: Sequence, releases: Sequence[Release], dataset: str) -> tuple[PlanAgainstActual, ...]:
    """Every stored version of `dataset`'s plans (their `plan.recorded` events), oldest first."""
    by_id = {r.id: r for r in releases}
    found = []
    for event in events:
        if event.kind != plan_book.PLAN_EVENT:
            continue
        version = plan_book.from_event(event.seq, event.at, event.actor, event.payload)
        if version.dataset != dataset:
            continue
        found.append((version, plan_book.against(version, by_id)))
    return plans_of(found)


def plans_of(versions: Sequence[tuple[plan_book.PlanVersion, Sequence[plan_book.Actual]]]
             ) -> tuple[PlanAgainstActual, ...]:
    """The section from plan versions and their releases as the ledger holds them
    (plan_book.against_actual, as a large ledger's report reads them)."""
    return tuple(PlanAgainstActual(version.label, version.seq, version.actor, _moment(version.at),
                                   tuple(_row(actual) for actual in actuals)) for version, actuals in versions)


def _moment(at: str | datetime) -> str:
    """When a version was recorded, as the audit trail prints a moment (the event's own text is ISO 8601)."""
    return str(datetime.fromisoformat(at) if isinstance(at, str) else at)


def _row(actual: plan_book.Actual) -> PlanRow:
    entry = actual.planned
    recorded = "—" if actual.parameter is None else f"{actual.parameter} {_number(actual.value)}"
    charge = "—" if not actual.charge else _pair(actual.charge)
    return PlanRow(entry["key"], entry["id"], entry["mechanism"], f"{entry['parameter']} {_number(entry['value'])}",
                   _pair(entry["allocated"]), entry["binding"] or "fixed", actual.status, recorded, charge)


def _pair(figure) -> str:
    (unit, value), = figure.items()
    return f"{unit} {_number(value)}"


def _number(value) -> str:
    return format_number(Fraction(value))
