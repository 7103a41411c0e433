"""The report's caps: each cap's spend, headroom, status and drivers, and every value a
changed or removed cap has had (from the audit chain).

Invariant: a cap's figure is the one `cap list` prints.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction

from ..accounting import filters
from ..accounting.budget import CapCheck, CapTotal, check
from ..accounting.ledger_index import LedgerIndex
from ..core.numbers import Number
from ..core.records import Cap, Family, Release, cap_unit_text
from ..operations.meeting_pack import cap_reasons  # (computed below the API; the report shows it)
from ..operations.report_inputs import ReportInputs


@dataclass(frozen=True)
class CapEntry:
    """One cap as the ledger stands (budget.CapCheck of an empty plan). Figures in the cap's unit."""

    name: str
    subset: tuple[str, ...]
    whole_dataset: bool
    unit: str  # epsilon / epsilon at delta / rho
    delta: Fraction | None
    limit: Fraction
    current: Number
    headroom: Number  # limit - current; printed rounded down
    status: str  # ok / warn / over
    drivers: tuple[tuple[str, Number], ...]  # the releases driving the spend, largest first
    decided_by: str | None = None  # the accountant whose valid figure `current` is, and its case
    filter: str | None = None  # the filter a cap at a delta is (filters.short)
    current_why: str | None = None  # why `current` is ∞, when it is (reasons.py)
    driver_why: tuple[str | None, ...] = ()  # per driver, why its charge is ∞ (None: finite)

    @property
    def unit_text(self) -> str:
        """`epsilon at delta 1 × 10⁻⁹`: the one text of a cap's unit (records.cap_unit_text)."""
        return cap_unit_text(self.unit, self.delta)


@dataclass(frozen=True)
class CapHistoryEntry:
    """One value a cap had (a `cap.set` event) or its removal (`cap.removed`), from the audit chain."""

    cap: str
    at: datetime
    actor: str
    action: str  # set / changed / removed
    value: str  # the cap as set (amend.cap_text), or what it was when removed
    reason: str | None


def cap_entries(caps: Sequence[Cap], totals: Mapping[str, CapTotal], releases: Sequence[Release] | None = None,
                families: Mapping[str, Family] | None = None) -> tuple[CapEntry, ...]:
    """Every cap against the stored running totals: the pre-release check of an empty plan.
    With the charged releases, each cap's figure is the one `cap list` prints: the smallest
    valid filter figure (cap_accounting.checks_from_history)."""
    if releases is None:
        return tuple(cap_entry(c) for c in check(list(caps), totals, [], {}, {}, only_touched=False))
    from ..operations.cap_accounting import charged_index, checks_from_history

    checks = checks_from_history(list(caps), releases, families or {}, totals)
    index = charged_index(caps, releases, families or {})  # each ∞ driver's own reason (reasons.driver_reasons)
    return tuple(cap_entry(c, (), index) for c in checks)


def family_map_of(inputs: ReportInputs) -> dict[str, Family]:
    return {f.id: f for f in inputs.families}


def cap_entry(c: CapCheck, public: Collection[str] = (), index: LedgerIndex | None = None) -> CapEntry:
    current_why, driver_why = cap_reasons(c, public, index)
    return CapEntry(name=c.cap.name, subset=c.cap.ordered_subset, whole_dataset=c.cap.whole_dataset,
                    unit=c.cap.unit, delta=c.cap.delta, limit=c.cap.limit, current=c.current,
                    headroom=c.headroom, status=c.status, drivers=c.drivers,
                    current_why=current_why, driver_why=driver_why,
                    # a cap at a delta is where the accountants differ (a pure or rho cap: basic sums)
                    decided_by=None if c.decision is None or c.cap.unit != "epsilon at delta"
                    else f"{c.decision.accountant}, {c.decision.case}",
                    filter=filters.short(c.cap) if c.cap.unit == "epsilon at delta" else None)


def cap_history(inputs: ReportInputs) -> tuple[CapHistoryEntry, ...]:
    """The history of every cap of the dataset that was changed or removed: a changed cap
    keeps every value it had, each an audit event (cap.set, cap.removed)."""
    from ..operations.amend import cap_text
    from ..api.outputs import cap_from_document

    prefix = inputs.dataset.name + "/"
    by_cap: dict[str, list[CapHistoryEntry]] = {}
    for event in inputs.events:
        if event.kind not in ("cap.set", "cap.removed") or not event.subject.startswith(prefix):
            continue
        name = event.subject[len(prefix):]
        data = event.data()
        earlier = by_cap.setdefault(name, [])
        if event.kind == "cap.removed":
            was = data.get("was")
            entry = CapHistoryEntry(name, event.at, event.actor, "removed",
                                    cap_text(cap_from_document(was)) if was else "", data.get("reason"))
        else:
            action = "changed" if earlier and earlier[-1].action != "removed" else "set"
            entry = CapHistoryEntry(name, event.at, event.actor, action, cap_text(cap_from_document(data["cap"])), None)
        earlier.append(entry)
    return tuple(entry for entries in by_cap.values() if len(entries) > 1 or entries[-1].action == "removed"
                 for entry in entries)
