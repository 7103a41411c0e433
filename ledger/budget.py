"""Budget caps: running totals, the pre-release check, and headroom.

Pure functions. A cap bounds the loss on one subset S (DESIGN 2.3-2.6). The
store keeps, per cap, a running total (`CapTotal`): the composed cost of
standalone releases plus the current cost of each family on S. Recording a
release *applies* it to the totals; the pre-release check applies a plan to
copies of the totals and compares: the same composition, run as a dry run
(STYLE 5). So a check costs the same whatever the length of the history.

Invariants:
- `apply(total, ...)` equals the total recomputed from the whole history
  (`total_from_history`); `audit verify` checks it against the store;
- a figure in a cap's unit is never below the true one: ∞ when the spend
  cannot be stated in that unit (a rho or delta part under a pure cap, an
  approximate part under a rho cap, an exact read of S);
- headroom is a largest *safe* value: it is rounded down, never up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from .accounting import ZERO, Spend, compose, pure_spend
from .engine import LedgerIndex, family_cost, release_cost
from .numbers import INF, Number
from .records import CHARGED_STATUSES, Cap, Family, Release
from .lazy import lazy_module

np = lazy_module("numpy")  # imported on first use: recording never needs it (issue 13)

WARN_AT = Fraction(4, 5)  # status "warn" at or above 80% of a cap
DRIVERS_KEPT = 5


@dataclass(frozen=True)
class CapTotal:
    """The running loss on a cap's subset: standalone releases composed, plus each
    family's current cost (families compose by max / top-two, not by sum)."""

    standalone: Spend = ZERO
    families: Mapping[str, Spend] = field(default_factory=dict)
    # the largest single contributions, in the cap's unit, for "what drives it"
    drivers: tuple[tuple[str, Number], ...] = ()
    # the total in the cap's unit, kept so a check need not convert it again (None: not yet known)
    value: Number | None = None

    @property
    def spend(self) -> Spend:
        return compose([self.standalone, *self.families.values()])


def measure(cap: Cap, spend: Spend) -> Number:
    """The spend in the cap's unit (see records.Cap)."""
    if spend.unbounded:
        return INF
    if cap.rho is not None:
        rho = spend.zcdp_rho()  # pure epsilon enters as epsilon^2 / 2 (Bun and Steinke 2016, Prop 3.3)
        return INF if rho is None else rho
    if cap.delta is None:
        return spend.pure if spend.is_pure else INF
    return spend.epsilon(cap.delta)


def why_unbounded(cap: Cap, spend: Spend) -> str:
    """Why a spend has no finite figure in a cap's unit."""
    if spend.unbounded:
        return "a release reads the subset without a certified bound (not protected)"
    if cap.rho is not None:
        return "it includes (epsilon, delta) releases, which a rho cap cannot hold"
    if cap.delta is None:
        return "it includes (epsilon, delta) or zCDP releases, which a pure epsilon cap cannot hold"
    return "the releases' deltas add up to more than the cap's delta"


def status(cap: Cap, value: Number) -> str:
    limit = cap.limit
    if isinstance(value, float) and not math.isinf(value) and value < 0.75 * float(limit):
        return "ok"  # clearly below 80%, whatever the floats' rounding: no exact comparison needed
    if value > limit:
        return "over"
    if value >= WARN_AT * limit:
        return "warn"
    return "ok"


def touches(cap: Cap, release: Release) -> bool:
    return bool(cap.subset & release.reads)


def apply(
    total: CapTotal,
    cap: Cap,
    releases: Sequence[Release],
    families: Mapping[str, Family],
    members: Mapping[str, Sequence[Release]],
) -> CapTotal:
    """The total after adding `releases`. `members` holds the already-counted members
    of every family a new release joins."""
    standalone = total.standalone
    joined: dict[str, list[Release]] = {}
    drivers = list(total.drivers)
    for release in releases:
        if release.status not in CHARGED_STATUSES:
            continue
        cost = release_cost(release, cap.subset)
        if release.family is not None:
            joined.setdefault(release.family, []).append(release)
        else:
            standalone = standalone + cost
        if not cost.is_zero:
            drivers.append((release.id, measure(cap, cost)))
    new_families = dict(total.families)
    for family_id, new_members in joined.items():
        counted = [m for m in members.get(family_id, ()) if m.status in CHARGED_STATUSES]  # not cancelled ones
        everyone = [*counted, *new_members]
        new_families[family_id] = family_cost(families[family_id], everyone, cap.subset)
        if new_families[family_id].is_zero:
            del new_families[family_id]  # a family that reads nothing of the subset: no entry
    result = CapTotal(standalone, new_families, _top(cap, drivers))
    return CapTotal(standalone, new_families, result.drivers, measure(cap, result.spend))


def total_from_history(cap: Cap, releases: Iterable[Release], families: Mapping[str, Family]) -> CapTotal:
    """The total recomputed from every recorded release (for new caps, and for audit)."""
    counted = [r for r in releases if r.status in CHARGED_STATUSES]
    members: dict[str, list[Release]] = {}
    standalone = []
    drivers = []
    for release in counted:
        cost = release_cost(release, cap.subset)
        if release.family is not None:
            members.setdefault(release.family, []).append(release)
        else:
            standalone.append(cost)
        if not cost.is_zero:
            drivers.append((release.id, measure(cap, cost)))
    family_spends = {fid: spend for fid, group in members.items()
                     if not (spend := family_cost(families[fid], group, cap.subset)).is_zero}
    result = CapTotal(compose(standalone), family_spends, _top(cap, drivers))
    return CapTotal(result.standalone, family_spends, result.drivers, measure(cap, result.spend))


def total_from_index(cap: Cap, index: LedgerIndex) -> CapTotal:
    """`total_from_history` over the arrays of a LedgerIndex of the counted releases:
    the same first-ranked charge per release (the smallest value id is the first-ranked
    covering guarantee), summed exactly; families through `family_cost`."""
    columns = [index.column[name] for name in sorted(cap.subset) if name in index.column]
    ids = index.cost_ids(columns)
    standalone_rows = np.ones(len(index.releases), dtype=bool)
    for rows in index.members.values():
        standalone_rows[rows] = False
    standalone = index.exact_total(ids[standalone_rows])
    family_spends = {}
    for fid, rows in index.members.items():
        spend = family_cost(index.families[fid], [index.releases[i] for i in rows], cap.subset)
        if not spend.is_zero:
            family_spends[fid] = spend
    # drivers: each distinct charge measured once; only rows that can be among the top ones ranked
    rows = np.flatnonzero(~index.value_is_zero[ids])
    value_measure = {int(v): measure(cap, index.values[int(v)]) for v in np.unique(ids[rows])}
    as_float = np.zeros(len(index.values))
    for value_id, value in value_measure.items():
        as_float[value_id] = float(value)
    row_float = as_float[ids[rows]]
    if len(rows) > DRIVERS_KEPT:
        rows = rows[row_float >= np.partition(row_float, -DRIVERS_KEPT)[-DRIVERS_KEPT]]  # ties kept
    drivers = [(index.releases[row].id, value_measure[int(ids[row])]) for row in rows]
    result = CapTotal(standalone, family_spends, _top(cap, drivers))
    return CapTotal(standalone, family_spends, result.drivers, measure(cap, result.spend))


def _top(cap: Cap, drivers: list[tuple[str, Number]]) -> tuple[tuple[str, Number], ...]:
    ranked = sorted(drivers, key=lambda item: (-float(item[1]), item[0]))
    return tuple(ranked[:DRIVERS_KEPT])


# --------------------------------------------------------------------------
# The pre-release check
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class CapCheck:
    """One cap as a plan would leave it. Figures are in the cap's unit."""

    cap: Cap
    current: Number  # spent (and reserved) already
    charge: Number  # what the plan adds: after - current
    after: Number
    headroom: Number  # cap - after; negative when over
    status: str  # ok / warn / over
    drivers: tuple[tuple[str, Number], ...]  # recorded releases driving the current spend
    after_total: CapTotal = field(default_factory=CapTotal, compare=False, repr=False)  # what recording stores

    @property
    def ok(self) -> bool:
        return self.status != "over"


def check(
    caps: Sequence[Cap],
    totals: Mapping[str, CapTotal],
    plan: Sequence[Release],
    families: Mapping[str, Family],
    members: Mapping[str, Sequence[Release]],
    *,
    only_touched: bool = True,
) -> list[CapCheck]:
    """Every cap the plan touches (or every cap), before and after the plan."""
    results = []
    for cap in caps:
        if only_touched and not any(touches(cap, release) for release in plan):
            continue
        total = totals.get(cap.name, CapTotal())
        after_total = apply(total, cap, plan, families, members)
        current = total.value if total.value is not None else measure(cap, total.spend)
        after = after_total.value
        results.append(
            CapCheck(
                cap=cap,
                current=current,
                charge=_difference(after, current),
                after=after,
                headroom=_difference(cap.limit, after),
                status=status(cap, after),
                drivers=total.drivers,
                after_total=after_total,
            )
        )
    return results


def _difference(a: Number, b: Number) -> Number:
    if math.isinf(a) and math.isinf(b):
        return 0 if a == b else INF
    if math.isinf(a) or math.isinf(b):
        return a - b
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a - b
    return float(a) - float(b)


# --------------------------------------------------------------------------
# Headroom: the largest new release that fits
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Headroom:
    """The largest pure epsilon, and the largest rho, a new release reading exactly
    `variables` (and protecting them) could take without breaking any cap."""

    variables: tuple[str, ...]
    epsilon: Number
    epsilon_binding: Cap | None
    rho: Number
    rho_binding: Cap | None


def headroom(variables: Iterable[str], caps: Sequence[Cap], totals: Mapping[str, CapTotal]) -> Headroom:
    variables = frozenset(variables)
    best_epsilon: tuple[Number, Cap | None] = (INF, None)
    best_rho: tuple[Number, Cap | None] = (INF, None)
    for cap in caps:
        if not cap.subset & variables:
            continue
        current = totals.get(cap.name, CapTotal()).spend
        epsilon = _largest(cap, current, pure_spend)
        rho = _largest(cap, current, lambda x: Spend(rho=x))
        if epsilon < best_epsilon[0]:
            best_epsilon = (epsilon, cap)
        if rho < best_rho[0]:
            best_rho = (rho, cap)
    return Headroom(tuple(sorted(variables)), best_epsilon[0], best_epsilon[1], best_rho[0], best_rho[1])


def _largest(cap: Cap, current: Spend, added) -> Number:
    """Largest x >= 0 with measure(current + added(x)) <= cap (0 when even x = 0 is over)."""
    if measure(cap, current + added(Fraction(0))) > cap.limit:
        return Fraction(0)
    probe = added(Fraction(1))
    if cap.rho is None and cap.delta is None:  # pure cap: linear in a pure epsilon, impossible for rho
        return cap.limit - current.pure if probe.is_pure else Fraction(0)
    if cap.rho is not None and probe.rho:  # rho cap, rho release: linear
        return cap.limit - current.zcdp_rho()
    # monotone in x: bisect, and keep the feasible end so the answer is never too large
    low, high = Fraction(0), Fraction(1)
    while measure(cap, current + added(high)) <= cap.limit:
        low, high = high, high * 2
        if high > 10**6:
            return INF
    for _ in range(60):
        middle = (low + high) / 2
        if measure(cap, current + added(middle)) <= cap.limit:
            low = middle
        else:
            high = middle
    return _round_down(low)


def _round_down(value: Fraction) -> Fraction:
    """A short fraction no larger than value (10^-9 resolution)."""
    return Fraction(math.floor(value * 10**9), 10**9)

