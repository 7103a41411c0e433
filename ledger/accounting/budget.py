"""Budget caps: running totals, the pre-release check, and the basic headroom of a cap.

Pure functions. A cap bounds the loss on one subset S (docs/explanation/model.md#the-cost-of-one-release-on-a-subset-2.6). The
store keeps, per cap, a running total (`CapTotal`): the composed cost of the
standalone releases with one possible charge, the releases with a choice of
charges (grouped by their alternatives), and each family's current options on
S. Recording a release *applies* it to the totals; the pre-release check
applies a plan to copies of the totals and compares: the same composition, run
as a dry run (STYLE 5). So a check costs the same whatever the length of the
history (it grows only with the number of distinct choices, never with the
number of releases with one charge).

One accounting (docs/explanation/model.md#composition): a cap's figure is `cap_value`, which composes
the total with `charge_choice.compose_units` minimising the cap's own measure, the
same minimising composition `subset` and `table` use (for a cap at delta D,
the figure `subset --delta D` prints). A tighter accountant layers
a second figure on by replacing or wrapping `cap_value`.

A spend in a cap's unit is `cap_measure`'s; why a figure is ∞, in words, `cap_unbounded`'s.

Invariants:
- `apply(total, ...)` equals the total recomputed from the whole history
  (`total_from_history`, `total_from_index`); `audit verify` checks it against the store;
- a figure in a cap's unit is never below the true one: ∞ when the spend
  cannot be stated in that unit (a rho or delta part under a pure cap, an
  approximate part under a rho cap, an exact read of S);
- headroom is a largest *safe* value: it is rounded down, never up. This module gives one
  cap's basic figure (`largest_basic_charge`, with `round_down` and `difference`, the public
  helpers the enforcement builds on) and the `Headroom` record; the headroom printed is the
  enforcement's (operations.cap_accounting.headroom), the only one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from .spend import ALLOWANCE, UNBOUNDED, ZERO, Spend
from .charge_choice import Option, alternatives_of, compose_units
from .cost_rule import candidates, family_options
from .ledger_index import LedgerIndex
from .cap_measure import measure, objective, options_measure, own_measure
from .cap_unbounded import why_family_unbounded, why_release_unbounded, why_unbounded
from ..core.lazy import lazy_module
from ..core.numbers import INF, Number, float_down, float_up, format_number, is_infinite
from ..core.records import CHARGED_STATUSES, Cap, Family, Release

np = lazy_module("numpy")  # imported on first use: recording never needs it

WARN_AT = Fraction(4, 5)  # status "warn" at or above 80% of a cap
DRIVERS_KEPT = 5
FAMILY_DRIVER = "family "  # drivers that are a family, charged once: "family <id>"


@dataclass(frozen=True)
class CapTotal:
    """The running loss on a cap's subset.

    standalone: releases with one possible charge, composed;
    choices: releases with incomparable charges, as (their options, how many), sorted;
    families: each family's options on the subset (charged once: docs/explanation/model.md#families)."""

    standalone: Spend = ZERO
    families: Mapping[str, tuple[Option, ...]] = field(default_factory=dict)
    # the largest single contributions, in the cap's unit, for "what drives it"
    drivers: tuple[tuple[str, Number], ...] = ()
    # the total in the cap's unit, kept so a check need not convert it again (None: not yet known)
    value: Number | None = None
    choices: tuple[tuple[tuple[Spend, ...], int], ...] = ()

    @property
    def spend(self) -> Spend:
        """The composition at the default objective (epsilon at 1e-9); caps use `composed`."""
        return compose_units(self.standalone, self.units())

    def units(self) -> list[tuple[Option, ...]]:
        units: list[tuple[Option, ...]] = []
        for options, count in self.choices:
            units.extend([options] * count)
        units.extend(self.families.values())
        return units


def composed(cap: Cap, total: CapTotal, extra: Spend = ZERO) -> Spend:
    """The total (plus `extra`) composed with the choices that minimise the cap's figure."""
    return compose_units(total.standalone + extra, total.units(), objective(cap))


def cap_value(cap: Cap, total: CapTotal, extra: Spend = ZERO) -> Number:
    """A cap's figure: the one function every command measures a cap with (docs/explanation/model.md#composition)."""
    return measure(cap, composed(cap, total, extra))


def status(cap: Cap, value: Number) -> str:
    limit = cap.limit
    if isinstance(value, float) and not is_infinite(value) and value < 0.75 * float_down(limit):
        return "ok"  # clearly below 80%, whatever the floats' rounding: no exact comparison needed
    if value > limit:
        return "over"
    if value >= WARN_AT * limit:
        return "warn"
    return "ok"


def touches(cap: Cap, release: Release) -> bool:
    return bool(cap.subset & release.reads)


def _add_release(standalone: Spend, choices: dict, options: tuple[Spend, ...]) -> Spend:
    if not options:
        return UNBOUNDED
    if len(options) == 1:
        return standalone + options[0]
    choices[options] = choices.get(options, 0) + 1
    return standalone


def _sorted_choices(choices: Mapping[tuple[Spend, ...], int]) -> tuple[tuple[tuple[Spend, ...], int], ...]:
    return tuple(sorted(choices.items(), key=lambda item: repr(item[0])))


def total_from_parts(cap: Cap, standalone: Spend, choices: Mapping, families: Mapping[str, tuple[Option, ...]],
                     drivers: list) -> CapTotal:
    """The running total of `cap` from its parts: the standalone releases' sum, the releases with a
    choice (options -> count), each family's options and every driver (`top_drivers` keeps the
    largest); its figure in the cap's unit is `cap_value`'s. What `apply`, `total_from_history`,
    `total_from_index` and audit verify's recomputation (store.totals_check) all finish with."""
    families, choices, top = dict(families), _sorted_choices(choices), top_drivers(cap, drivers)
    # with nothing to choose among (no choices, no families) the composition is the standalone sum
    # itself (`compose_units`), so `cap_value` is its measure: the same figure, without composing
    value = (measure(cap, standalone) if not choices and not families
             else cap_value(cap, CapTotal(standalone, families, top, None, choices)))
    return CapTotal(standalone, families, top, value, choices)


def apply(
    total: CapTotal,
    cap: Cap,
    releases: Sequence[Release],
    families: Mapping[str, Family],
    members: Mapping[str, Sequence[Release]],
    own: dict | None = None,
) -> CapTotal:
    """The total after adding `releases`. `members` holds the already-counted members
    of every family a new release joins. `own`: a memo of each release's options and own
    charge on this cap (`_own`), shared with `plan_charges` by `check`."""
    standalone = total.standalone
    choices = dict(total.choices)
    joined: dict[str, list[Release]] = {}
    drivers = list(total.drivers)
    for release in releases:
        if release.status not in CHARGED_STATUSES:
            continue
        if release.family is not None:
            joined.setdefault(release.family, []).append(release)
            continue
        options, value = _own(cap, release, own, measured=False)
        standalone = _add_release(standalone, choices, options)
        if options != (ZERO,):
            drivers.append((release.id, value if value is not None else _own(cap, release, own)[1]))
    new_families = dict(total.families)
    for family_id, new_members in joined.items():
        counted = [m for m in members.get(family_id, ()) if m.status in CHARGED_STATUSES]  # not cancelled ones
        options = family_options(families[family_id], [*counted, *new_members], cap.subset)
        label = FAMILY_DRIVER + family_id
        drivers = [d for d in drivers if d[0] != label]
        if options == (ZERO,):
            new_families.pop(family_id, None)  # a family that reads nothing of the subset: no entry
        else:
            new_families[family_id] = options
            drivers.append((label, options_measure(cap, options)))
    return total_from_parts(cap, standalone, choices, new_families, drivers)


def _own(cap: Cap, release: Release, own: dict | None, measured: bool = True) -> tuple[tuple, Number | None]:
    """A standalone release's options on the cap's subset (`cost_rule.candidates`) and, when
    `measured`, its own charge (`options_measure`), each computed once per `own` memo (one cap,
    one check: `apply` and `plan_charges` ask for the same release)."""
    if own is None:
        options = candidates(release, cap.subset)
        return options, options_measure(cap, options) if measured else None
    found = own.get(id(release))
    if found is None or found[0] is not release:
        found = own[id(release)] = [release, candidates(release, cap.subset), None]
    if measured and found[2] is None:
        found[2] = options_measure(cap, found[1])
    return found[1], found[2]


def total_from_history(cap: Cap, releases: Iterable[Release], families: Mapping[str, Family]) -> CapTotal:
    """The total recomputed from every recorded release (for new caps, and for audit)."""
    counted = [r for r in releases if r.status in CHARGED_STATUSES]
    members: dict[str, list[Release]] = {}
    standalone = ZERO
    choices: dict = {}
    drivers = []
    for release in counted:
        if release.family is not None:
            members.setdefault(release.family, []).append(release)
            continue
        options = candidates(release, cap.subset)
        standalone = _add_release(standalone, choices, options)
        if options != (ZERO,):
            drivers.append((release.id, options_measure(cap, options)))
    family_options_ = {}
    for fid, group in members.items():
        options = family_options(families[fid], group, cap.subset)
        if options != (ZERO,):
            family_options_[fid] = options
            drivers.append((FAMILY_DRIVER + fid, options_measure(cap, options)))
    return total_from_parts(cap, standalone, choices, family_options_, drivers)


def total_from_index(cap: Cap, index: LedgerIndex) -> CapTotal:
    """`total_from_history` over the arrays of a LedgerIndex of the counted releases:
    the releases with one possible charge summed exactly over arrays (the smallest value
    id is their first-ranked, and only undominated, covering guarantee); releases with a
    choice through `candidates`, families through `family_options`."""
    columns = [index.column[name] for name in sorted(cap.subset) if name in index.column]
    ids = index.cost_ids(columns)
    standalone = index.exact_total(ids[index.simple])
    choices: dict = {}
    drivers = []
    for i in index.ambiguous:
        options = candidates(index.releases[i], cap.subset)
        standalone = _add_release(standalone, choices, options)
        if options != (ZERO,):
            drivers.append((index.releases[i].id, options_measure(cap, options)))
    family_options_ = {}
    for fid, rows in index.members.items():
        options = family_options(index.families[fid], [index.releases[i] for i in rows], cap.subset)
        if options != (ZERO,):
            family_options_[fid] = options
            drivers.append((FAMILY_DRIVER + fid, options_measure(cap, options)))
    # drivers: each distinct charge measured once; only rows that can be among the top ones ranked
    rows = np.flatnonzero(~index.value_is_zero[ids] & index.simple)
    value_measure = {int(v): own_measure(cap, index.values[int(v)]) for v in np.unique(ids[rows])}
    as_float = np.zeros(len(index.values))
    for value_id, value in value_measure.items():
        as_float[value_id] = float_up(value)
    row_float = as_float[ids[rows]]
    if len(rows) > DRIVERS_KEPT:
        rows = _first_ranked(rows, row_float, index.release_ids)
        drivers += [(name, value_measure[int(ids[row])]) for name, row in rows]
    else:
        drivers += [(index.release_ids[row], value_measure[int(ids[row])]) for row in rows.tolist()]
    return total_from_parts(cap, standalone, choices, family_options_, drivers)


def _first_ranked(rows: np.ndarray, row_float: np.ndarray, release_ids) -> list[tuple[str, int]]:
    """(id, row) of the rows `top_drivers` can keep among these, in its order (the largest float
    first, then the smallest id): of each float value, largest first, the DRIVERS_KEPT smallest
    ids, until DRIVERS_KEPT are kept. A row left out has DRIVERS_KEPT rows ranked before it,
    so `top_drivers` over every row keeps the same drivers; the ids are read for the tied rows at
    once (at a million releases, tens of thousands tie; one look-up each took seconds)."""
    kept: list[tuple[str, int]] = []
    for value in np.unique(row_float)[::-1]:
        tied = rows[row_float == value]
        names = release_ids[tied]
        kept += sorted(zip((str(n) for n in names), tied.tolist()))[:DRIVERS_KEPT]
        if len(kept) >= DRIVERS_KEPT:
            break
    return kept


def spend_text(spend: Spend) -> str:
    """A Spend for people: `pure 1/2 + (epsilon 1, delta 1/1000000) + rho 1/8`, `∞`, `0`."""
    if spend.unbounded:
        return "∞"
    parts = []
    if spend.pure:  # exact: a difference in the last digit must show
        parts.append(f"pure {spend.pure}")
    if spend.approx_epsilon or spend.approx_delta:
        parts.append(f"(epsilon {spend.approx_epsilon}, delta {spend.approx_delta})")
    if spend.rho:
        parts.append(f"rho {spend.rho}")
    return " + ".join(parts) or "0"


def total_differences(stored: CapTotal, expected: CapTotal) -> list[str]:
    """What differs between two running totals, field by field, in words (audit verify)."""
    def option_text(option) -> str:
        if isinstance(option, Spend):
            return spend_text(option)
        return "worst of " + " | ".join(spend_text(a) for a in alternatives_of(option))

    def fields(total: CapTotal) -> dict[str, str]:
        shown = {"figure": format_number(total.value) if total.value is not None else "not computed",
                 "standalone releases": spend_text(total.standalone)}
        for options, count in total.choices:
            shown[f"{count} release(s) with a choice of " + " or ".join(map(spend_text, options))] = "present"
        for fid, options in total.families.items():
            shown[f"family {fid}"] = " or ".join(map(option_text, options))
        shown["drivers"] = ", ".join(f"{rid} {format_number(v)}" for rid, v in total.drivers) or "none"
        return shown

    before, after = fields(stored), fields(expected)
    return [f"{key}: stored {before.get(key, 'absent')}, recomputed {after.get(key, 'absent')}"
            for key in dict.fromkeys([*before, *after]) if before.get(key) != after.get(key)]


def top_drivers(cap: Cap, drivers: list[tuple[str, Number]]) -> tuple[tuple[str, Number], ...]:
    """The DRIVERS_KEPT largest of (release id or FAMILY_DRIVER + family id, its charge in the
    cap's unit), largest first (rounded up to a float, as shown), ties by id: the ones a total keeps."""
    ranked = sorted(drivers, key=lambda item: (-float_up(item[1]), item[0]))
    return tuple(ranked[:DRIVERS_KEPT])


# --------------------------------------------------------------------------
# The pre-release check
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Charge:
    """One planned release's (or one planned family's) own charge on a cap, in the cap's
    unit, with why it is ∞ when it is."""

    release: str | None  # None for a family
    family: str | None
    value: Number
    reason: str | None = None


@dataclass(frozen=True)
class CapCheck:
    """One cap as a plan would leave it. Figures are in the cap's unit."""

    cap: Cap
    current: Number  # spent (and reserved) already
    charge: Number  # what the plan adds: after - current
    after: Number
    headroom: Number  # cap - after; negative when over
    status: str  # ok / warn / over
    drivers: tuple[tuple[str, Number], ...]  # recorded releases (or families, "family <id>") driving the spend
    after_total: CapTotal = field(default_factory=CapTotal, compare=False, repr=False)  # what recording stores
    charges: tuple[Charge, ...] = ()  # each planned release's own charge (families once)
    reason: str | None = None  # why `after` is ∞, in words
    decision: object = field(default=None, compare=False, repr=False)  # cap_decisions.Decision
    # the running figure of the cap's subset at its delta (what `subset` prints), beside the
    # filter's figure it is decided by; None where it was not asked for (a plan's check)
    running: Number | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.status != "over"


def plan_charges(cap: Cap, plan: Sequence[Release], families: Mapping[str, Family],
                 members: Mapping[str, Sequence[Release]], own: dict | None = None) -> tuple[Charge, ...]:
    """Each planned release's own charge on the cap; a family's members as one family.
    `own`: as in `apply`."""
    charges = []
    joined: dict[str, list[Release]] = {}
    for release in plan:
        if release.status not in CHARGED_STATUSES or not touches(cap, release):
            continue
        if release.family is not None and release.family in families:
            joined.setdefault(release.family, []).append(release)
            continue
        _, value = _own(cap, release, own)
        # (why_release_unbounded is None exactly when the charge is finite: asked only when it is not)
        charges.append(Charge(release.id, None, value, why_release_unbounded(cap, release)
                              if is_infinite(value) else None))
    for fid, new_members in joined.items():
        everyone = [m for m in members.get(fid, ()) if m.status in CHARGED_STATUSES] + new_members
        value = options_measure(cap, family_options(families[fid], everyone, cap.subset))
        charges.append(Charge(None, fid, value, why_family_unbounded(cap, families[fid], everyone)
                              if is_infinite(value) else None))
    return tuple(charges)


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
        own: dict = {}  # each planned release's options and charge on this cap, computed once
        after_total = apply(total, cap, plan, families, members, own)
        current = total.value if total.value is not None else cap_value(cap, total)
        after = after_total.value
        charges = plan_charges(cap, plan, families, members, own)
        reason = None
        if is_infinite(after):
            reason = next((c.reason for c in charges if c.reason), None)
            if reason is None:
                reason = why_unbounded(cap, composed(cap, after_total))
        results.append(
            CapCheck(
                cap=cap,
                current=current,
                charge=plan_charge(cap, plan, families, current, after, own),
                after=after,
                headroom=difference(cap.limit, after, down=True),
                status=status(cap, after),
                drivers=total.drivers,
                after_total=after_total,
                charges=charges,
                reason=reason,
            )
        )
    return results


def plan_charge(cap: Cap, plan: Sequence[Release], families: Mapping[str, Family], current: Number,
                after: Number, own: dict | None = None) -> Number:
    """What a plan adds to a cap: after - current; where the history is already ∞ that
    difference says nothing (∞ - ∞), and the plan's own figure on the cap (its releases
    composed alone, as a first plan would be, its families over their new members) is shown
    instead: what it would add to any finite history, never 0 for a plan that reads the cap."""
    if is_infinite(current):
        return cap_value(cap, apply(CapTotal(), cap, plan, families, {}, own))
    return difference(after, current)


def difference(a: Number, b: Number, *, down: bool = False) -> Number:
    """a - b, exact for Fractions; as floats, rounded up (a charge) or down (a headroom)."""
    a_infinite = isinstance(a, float) and math.isinf(a)  # (is_infinite, once each)
    b_infinite = isinstance(b, float) and math.isinf(b)
    if a_infinite and b_infinite:
        return 0 if a == b else INF
    if a_infinite or b_infinite:
        return (math.inf if a > 0 else -math.inf) if a_infinite else (-math.inf if b > 0 else math.inf)
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a - b
    if a == b:
        return 0.0
    if down:
        return math.nextafter(float_down(a) - float_up(b), -math.inf)
    return math.nextafter(float_up(a) - float_down(b), math.inf)


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
    # which accountant's valid filter decides the binding cap at the headroom
    epsilon_accountant: str | None = None
    rho_accountant: str | None = None
    # what the next release is assumed to be: "any" (any epsilon-DP or rho-zCDP mechanism, the
    # worst case), "laplace" (epsilon only) or "gaussian" (rho only, with `multiplier`, the
    # smallest sigma / sensitivity admitted); a figure the mechanism has not is None
    mechanism: str = "any"
    multiplier: Number | None = None
    # the rho headroom as an epsilon at `delta` (`with_rho_epsilon`)
    delta: Fraction | None = None
    rho_epsilon: Number | None = None


def with_rho_epsilon(room: Headroom, delta: Fraction, allowance: Fraction = ALLOWANCE) -> Headroom:
    """The headroom with its rho stated as an epsilon at `delta`, as every epsilon figure at a
    delta is: a rho-zCDP release by the Canonne-Kamath-Steinke (2020) conversion (Spend.epsilon,
    as `subset --delta` converts a rho total); the Gaussian of the smallest multiplier admitted
    by its exact privacy profile (Balle and Wang 2018, Thm 8), which is smaller. Rounded up."""
    from dataclasses import replace

    from .catalogue import gaussian_epsilon

    rho = room.rho
    if rho is None:
        return replace(room, delta=delta)
    if is_infinite(rho) or not rho:
        return replace(room, delta=delta, rho_epsilon=rho)
    if room.mechanism == "gaussian":
        return replace(room, delta=delta, rho_epsilon=gaussian_epsilon(room.multiplier, delta))
    return replace(room, delta=delta, rho_epsilon=Spend(rho=Fraction(rho)).epsilon(delta, allowance))


def largest_basic_charge(cap: Cap, total: CapTotal, added) -> Number:
    """Largest x >= 0 with cap_value(total + added(x)) <= cap (0 when even x = 0 is over), by
    the basic sums alone: one cap's headroom where the basic composition decides, and the lower
    bound the decided headroom searches up from. The headroom every command prints is
    `operations.cap_accounting.headroom` (the enforcement's decision): there is no
    basic-only headroom beside it."""
    current = total.value if total.value is not None else cap_value(cap, total)
    if current > cap.limit:
        return Fraction(0)
    probe = added(Fraction(1))
    if cap.rho is None and cap.delta is None:  # pure cap: linear in a pure epsilon, impossible for rho
        return cap.limit - current if probe.is_pure else Fraction(0)
    if cap.rho is not None and probe.rho:  # rho cap, rho release: linear
        return cap.limit - current
    # monotone in x: bisect, and keep the feasible end so the answer is never too large
    low, high = Fraction(0), Fraction(1)
    while cap_value(cap, total, added(high)) <= cap.limit:
        low, high = high, high * 2
        if high > 10**6:
            return INF
    for _ in range(60):
        middle = (low + high) / 2
        if cap_value(cap, total, added(middle)) <= cap.limit:
            low = middle
        else:
            high = middle
    return round_down(low)


def round_down(value: Fraction) -> Fraction:
    """A short fraction no larger than value (10^-9 resolution)."""
    return Fraction(math.floor(value * 10**9), 10**9)
