"""Solve a plan: the noise of each planned release that uses the budget left as fully as the
caps it touches allow (docs/explanation/plans.md; the filters: docs/explanation/accounting.md).

Each weighted release i takes the share w_i t of a common t: an epsilon for the epsilon-DP
families (laplace, geometric), a rho for the zCDP ones (gaussian, discrete-gaussian). The
caps are kept by water-filling: the largest t every cap touched by an unsettled release
admits is found; the cap with the smallest one binds, its unsettled releases are settled at
w_i t, and the rest go on with what is left. Each cap's largest t is found by its filter:

    pure cap      sum of epsilons                 t = room / sum w_i                 exact
    rho cap       rho_i = w_i t (Gaussians),      a t + b t^2 = room                 exact when b = 0
                  eps_i^2 / 2 (Laplace, as zCDP,
                  Bun and Steinke 2016, Prop 3.3)
    Gaussian DP   mu_i^2 = 2 w_i t                t = (mu^2 - mu_0^2) / (2 sum w_i)  mu from
                  (mu = sensitivity / sigma,      Dong, Roth and Su 2022, Cor 2.13 (`gdp_mu`),
                  Dong, Roth and Su 2022, Thm 2.7) checked by the cap's decision
    others        the cap's own decision          a root search on the cap's figure

Pure and rho caps are decided by these sums exactly (cap_measure.measure); the others by the
decision `check` makes (`cap_accounting.decide`) at every step. A share becomes the parameter
written: an epsilon or a discrete Gaussian's rho kept exact (rounded down to 12 significant
digits only past a 30-digit denominator); sigma = sensitivity / sqrt(2 rho) rounded up (Bun and
Steinke 2016, Prop 1.6; the discrete Gaussian: Canonne, Kamath and Steinke 2020, Thm 14).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction

from ..accounting import budget, cap_measure, cap_states, filters
from ..accounting.cost_rule import candidates
from ..accounting.risk import gdp_mu
from ..core.errors import InputErrors, LedgerError, Refused
from ..core.lazy import lazy_module
from ..core.numbers import INF, float_down, is_infinite
from ..core.records import Cap, Dataset, Release
from ..input.plan import Plan, PlannedRelease
from . import cap_accounting, transactions
from .plan_noise import (DIGITS, Solution, Solved, expected_error, floor_share, parameter, release_at,
                         significant_down)

configuration = lazy_module("ledger.store.configuration")  # the ORM, imported when a plan is solved
row_reads = lazy_module("ledger.store.row_reads")  # the ORM, imported when a plan is solved
running_totals = lazy_module("ledger.store.running_totals")  # the ORM, imported when a plan is solved
session_state = lazy_module("ledger.store.session_state")  # the ORM, imported when a plan is solved
sessions = lazy_module("ledger.store.sessions")  # the ORM, imported when a plan is solved

# --------------------------------------------------------------------------
# One cap: the largest common t it admits
# --------------------------------------------------------------------------


class CapRoom:
    """One cap touched by the plan, with its running total and accountant state."""

    def __init__(self, cap: Cap, total: budget.CapTotal, state: dict | None, members: Sequence[PlannedRelease]):
        self.cap, self.total, self.state, self.members = cap, total, state, list(members)
        if cap.rho is not None:
            self.kind = "rho"
        elif cap.delta is None:
            self.kind = "pure"
        else:
            self.kind = filters.kind_of(cap.filter)[0]
        self._units: dict[str, budget.Number] = {}
        self._charges: dict[str, budget.Number] = {}  # settled releases' (settled once: never stale)

    def unit(self, planned: PlannedRelease, release: Release) -> budget.Number:
        """The release's own charge on the cap at share 1 (its share's coefficient)."""
        if planned.id not in self._units:
            self._units[planned.id] = cap_measure.options_measure(self.cap, candidates(release, self.cap.subset))
        return self._units[planned.id]

    def largest(self, weights: Mapping[str, Fraction], settled: Mapping[str, Release], probe,
                hint: Fraction | None = None, floors: Mapping[str, Fraction] | None = None) -> Fraction:
        """The largest t at which the cap admits its settled releases and every unsettled one
        (weights) at share max(w t, its floor's share); `probe(planned, share)` builds a release;
        `hint`: a t to start a search from. 0 when even the floors' shares do not fit."""
        floors = floors or {}
        active = [p for p in self.members if p.id in weights]
        fixed = [settled[p.id] for p in self.members if p.id in settled]
        if self.kind in ("pure", "rho"):  # (decided by these sums exactly: cap_measure.measure)
            return self._sums(active, weights, floors, fixed, probe)
        total, state = self._after(fixed)  # the settled releases applied once, not at every step
        found = None
        if self.kind == filters.GAUSSIAN and all(p.family == "gaussian" and p.id not in floors for p in active):
            found = self._gaussian_dp(active, weights, total, state)

        def decided(t: Fraction | None) -> budget.CapCheck:  # (None: t = 0, the floors' shares alone)
            shares = ((p, max(weights[p.id] * (t or 0), floors.get(p.id, 0))) for p in active)
            return _decided(self.cap, total, state, [probe(p, share) for p, share in shares if share > 0])

        if found is not None and (found <= 0 or decided(found).ok):  # (else searched from it)
            return max(found, Fraction(0))
        return _search(decided, self.cap.limit, found or hint)

    def charge(self, release: Release) -> budget.Number:
        """A settled release's own charge on the cap (a pure or rho cap: its sum's term)."""
        if release.id not in self._charges:
            self._charges[release.id] = cap_measure.options_measure(self.cap, candidates(release, self.cap.subset))
        return self._charges[release.id]

    def _after(self, fixed: Sequence[Release]) -> tuple[budget.CapTotal, dict | None]:
        """The running total and accountant state with the settled releases recorded."""
        if not fixed:
            return self.total, self.state
        total = budget.apply(self.total, self.cap, fixed, {}, {})
        state = None if self.state is None else cap_states.state_apply(self.state, self.cap, fixed, {}, {})
        return total, state

    def _sums(self, active, weights, floors: Mapping[str, Fraction], fixed: Sequence[Release], probe) -> Fraction:
        """Pure and rho caps: the sum of u_i max(w_i t, f_i)^d_i, f_i a floor's share, d_i = 1 but
        2 for an epsilon under a rho cap (eps^2 / 2: Bun and Steinke 2016, Prop 3.3). Piecewise
        linear or quadratic in t: the piece where it meets the room is found at the breakpoints
        f_i / w_i, and solved there."""
        total = self.total
        room = self.cap.limit - (total.value if total.value is not None else budget.cap_value(self.cap, total))
        for release in fixed:
            room -= self.charge(release)
        terms = []  # (breakpoint, unit, degree, weight, floor's share)
        if is_infinite(room):
            return Fraction(0)
        for p in active:
            unit = self.unit(p, probe(_exact_share(p), Fraction(1)))
            if is_infinite(unit):  # (a Gaussian under a pure cap: it holds none)
                return Fraction(0)
            w, f = weights[p.id], floors.get(p.id, Fraction(0))
            terms.append((f / w, unit, 2 if self.kind == "rho" and not p.zcdp else 1, w, f))
        a = b = Fraction(0)
        c = sum((u * f**d for _, u, d, _, f in terms), Fraction(0))  # every share at its floor
        if c > room or room <= 0:
            return Fraction(0)
        for point, u, d, w, f in sorted(terms, key=lambda term: term[0]):
            if a * point + b * point * point + c > room:
                break  # the root is below this breakpoint
            c -= u * f**d
            if d == 1:
                a += u * w
            else:
                b += u * w * w
        return _root(a, b, room - c)

    def _gaussian_dp(self, active, weights, total: budget.CapTotal, state: dict | None) -> Fraction | None:
        """A Gaussian-DP cap over Gaussians: mu^2 adds (Dong, Roth and Su 2022, Cor 3.3), so
        t = (mu^2 - mu_0^2) / (2 sum w_i), mu the cap's (`gdp_mu`), mu_0 the spend's."""
        spent = _decided(self.cap, total, state, [])
        if is_infinite(spent.after):
            return Fraction(0)
        delta = float_down(self.cap.delta)
        mu = gdp_mu(float_down(self.cap.limit), delta)
        mu0 = gdp_mu(float(spent.after), delta) if spent.after else 0.0
        squares = sum(2 * weights[p.id] for p in active)  # mu_i^2 = (sensitivity / sigma)^2 = 2 rho_i
        room = (mu * mu - mu0 * mu0) / float(squares) if squares else None
        return None if room is None else (significant_down(Fraction(room)) if room > 0 else Fraction(0))


def _root(a: Fraction, b: Fraction, room: Fraction) -> Fraction:
    """The largest t >= 0 with a t + b t^2 <= room: exact when b = 0, else rounded down."""
    if not b:
        return room / a
    t = Fraction(2 * float(room) / (float(a) + math.sqrt(float(a) ** 2 + 4 * float(b) * float(room))))
    t = significant_down(t)
    while a * t + b * t * t > room:
        t *= 1 - Fraction(1, 10**DIGITS)
    return t


def _exact_share(planned: PlannedRelease) -> PlannedRelease:
    """The release stated by its share exactly (a Gaussian's sigma is rounded, its rho is not):
    what a share's coefficient on a cap is measured with."""
    family = "discrete-gaussian" if planned.zcdp else planned.family
    return replace(planned, family=family, fixed=Fraction(1), sigma=None)


def _decided(cap: Cap, total: budget.CapTotal, state: dict | None, plan: Sequence[Release]) -> budget.CapCheck:
    """The cap's own decision on `plan` (`cap_accounting.decide`, the function `check` calls)."""
    (check,) = budget.check([cap], {cap.name: total}, plan, {}, {}, only_touched=False)
    return cap_accounting.decide(check, total, state, plan, {}, {})[0]


def _search(decided, limit: Fraction, guess: Fraction | None) -> Fraction:
    """The largest t (to 1e-9, relative) the cap admits, INF when unbounded. The cap's figure
    rises with t from its spend at t = 0; the root of figure(t) = limit is bracketed by secant
    steps from `guess`, then narrowed by the Illinois variant of regula falsi, each step keeping
    an admitted lower end (halving where the figure is infinite)."""
    low, f_low = Fraction(0), float(decided(None).after) - float(limit)
    if f_low > 0:
        return Fraction(0)
    high, f_high = guess if guess and guess > 0 else Fraction(1), None
    while True:
        found = decided(high)
        if not found.ok:
            f_high = float(found.after) - float(limit)
            break
        step = _secant_step(low, f_low, high, float(found.after) - float(limit))
        low, f_low, high = high, float(found.after) - float(limit), significant_down(high + step)
        if high > 10**9:
            return INF
    side = 0
    for _ in range(100):
        if low and high - low <= low * Fraction(1, 10**9):
            break
        middle = _between(low, high, f_low, f_high)
        found = decided(middle)
        f_middle = float(found.after) - float(limit)
        if found.ok:
            low, f_low = middle, f_middle
            f_high = f_high / 2 if side == 1 else f_high  # (Illinois: a side kept twice is halved)
            side = 1
        else:
            high, f_high = middle, f_middle
            f_low = f_low / 2 if side == -1 else f_low
            side = -1
    return low


def _secant_step(t0: Fraction, f0: float, t1: Fraction, f1: float) -> Fraction:
    """How far past t1 (admitted) to look for the root: the secant's step, a fiftieth more, at least
    a hundredth of t1 and at most t1."""
    slope = (f1 - f0) / float(t1 - t0) if t1 > t0 else 0.0
    step = 1.02 * -f1 / slope if slope > 0 and math.isfinite(slope) else float(t1)
    return Fraction(min(max(step, float(t1) / 100), float(t1)))


def _between(low: Fraction, high: Fraction, f_low: float, f_high: float) -> Fraction:
    """The regula falsi point of [low, high], kept inside it; the middle where it cannot be used."""
    width = high - low
    if math.isfinite(f_high) and f_high > f_low:
        share = min(max(-f_low / (f_high - f_low), 1e-3), 1 - 1e-3)
        point = significant_down(low + width * Fraction(share))
    else:
        point = significant_down(low + width / 2)
    return point if low < point < high else low + width / 2


# --------------------------------------------------------------------------
# The plan: water-filling over the caps
# --------------------------------------------------------------------------


def water_fill(plan: Sequence[PlannedRelease], rooms: Sequence[CapRoom], probe, dataset: str
               ) -> dict[str, tuple[Release, str | None]]:
    """Each planned release as settled, with the cap that binds it (None: a fixed parameter).
    A weighted release with an accuracy floor takes at least the share the floor needs
    (`floor_share`); the others share what is left by their weights."""
    settled = {p.id: probe(p, p.fixed) for p in plan if p.fixed is not None}
    found: dict[str, tuple[Release, str | None]] = {p: (r, None) for p, r in settled.items()}
    weights = {p.id: p.weight for p in plan if p.weight is not None}
    floors = {p.id: f for p in plan if p.weight is not None and (f := floor_share(p)) > 0}
    by_id = {p.id: p for p in plan}
    cache: dict[str, Fraction] = {}
    stale: set[str] = set()  # caps whose cached t is a lower bound (some releases settled since)

    def largest(room: CapRoom, hint: Fraction | None) -> Fraction:
        return room.largest(weights, settled, probe, hint, floors)

    while weights:
        live = [room for room in rooms if any(p.id in weights for p in room.members)]
        if not live:
            raise _unbounded(dataset, [by_id[i] for i in weights])
        for room in sorted(live, key=lambda room: room.kind not in ("pure", "rho")):  # closed forms first
            if room.cap.name not in cache:
                cache[room.cap.name] = largest(room, _hint(cache))
        binding = _binding(live, cache, stale, lambda room: largest(room, cache[room.cap.name] or None))
        t = cache.pop(binding.cap.name)
        frozen = [p for p in binding.members if p.id in weights]
        if t <= 0 or is_infinite(t):
            raise _no_room(binding, frozen, t, floors)
        for p in frozen:
            settled[p.id] = probe(p, max(weights.pop(p.id) * t, floors.get(p.id, Fraction(0))))
            found[p.id] = (settled[p.id], binding.cap.name)
        touched = {p.id for p in frozen}
        stale |= {room.cap.name for room in rooms if any(p.id in touched for p in room.members)}
    return found


def _hint(cache: Mapping[str, Fraction]) -> Fraction | None:
    """Where a search starts: the smallest positive t found so far."""
    return min((t for t in cache.values() if 0 < t < INF), default=None)


def _binding(live: Sequence[CapRoom], cache: dict[str, Fraction], stale: set[str], largest) -> CapRoom:
    """The cap with the smallest t. A cap's t only grows as releases settle at a t below it, so a
    stale t is a lower bound: only a stale cap that comes first is solved again (lazy greedy)."""
    while True:
        first = min(live, key=lambda room: cache[room.cap.name])
        if first.cap.name not in stale:
            return first
        cache[first.cap.name] = largest(first)
        stale.discard(first.cap.name)


def _unbounded(dataset: str, releases: Sequence[PlannedRelease]) -> InputErrors:
    return InputErrors([LedgerError(p.source, f"{p.at}.weight", f"no cap of dataset {dataset} reads any of "
                                    f"{', '.join(p.reads)}: nothing bounds its share; give it a fixed parameter")
                        for p in releases])


def _no_room(room: CapRoom, releases: Sequence[PlannedRelease], t, floors: Mapping[str, Fraction]) -> Refused:
    where = f"cap {room.cap.dataset}/{room.cap.name}"
    if is_infinite(t):
        return Refused(LedgerError(where, "releases", f"the plan cannot be solved: it states no bound for "
                                                      f"{', '.join(p.id for p in releases)}"))
    floored = [p for p in releases if p.id in floors]
    if floored:
        words = "; ".join(f"{p.id} ({_floor_words(p)})" for p in floored)
        return Refused(LedgerError(where, "releases", f"the plan is infeasible: the accuracy floors of its releases "
                                                      f"need more than {where} leaves: {words}"))
    return Refused(LedgerError(where, "releases", f"the plan cannot be solved: it admits none of them "
                                                  f"({filters.short(room.cap)}, limit {room.cap.limit}): "
                                                  f"{', '.join(p.id for p in releases)}"))


# --------------------------------------------------------------------------
# Against the ledger
# --------------------------------------------------------------------------


def solve(engine, plan: Plan, dataset: Dataset, actor: str) -> Solution:
    """The plan solved against the caps of `dataset` as the ledger stands; refused (`Refused`,
    exit 1) when a cap has no room for its releases or an accuracy floor is not met, and
    checked by `check` itself before it is returned."""
    _known_variables(plan, dataset)
    now = session_state.now()

    def probe(planned: PlannedRelease, share: Fraction) -> Release:
        return release_at(planned, share, dataset, now)

    read = frozenset().union(*(p.reads for p in plan.releases))
    with sessions.read_session(engine) as session:
        _new_ids(plan, row_reads.ReleaseLookup(session))
        caps = [cap for cap in configuration.caps(session, dataset.name) if cap.subset & read]
        totals = running_totals.cap_totals(session, dataset.name, [cap.name for cap in caps])
        states = cap_accounting.current_states(session, dataset.name, caps)
    rooms = [CapRoom(cap, totals.get(cap.name, budget.CapTotal()), states.get(cap.name),
                     [p for p in plan.releases if cap.subset & frozenset(p.reads)]) for cap in caps]
    found = water_fill(plan.releases, rooms, probe, dataset.name)
    solution = Solution(dataset.name, tuple(_row(p, *found[p.id]) for p in plan.releases))
    _floors(solution)
    checks = transactions.check(engine, transactions.source_builder([solution.release_file()], actor))
    over = [c for c in checks if not c.ok]
    if over:  # (cannot happen: each share is one the cap's own decision admitted) never hand it out
        raise transactions.BudgetRefused(checks, "the solved plan")
    return solution


def _known_variables(plan: Plan, dataset: Dataset) -> None:
    known = set(dataset.variable_names)
    errors = [LedgerError(p.source, f"{p.at}.reads", f"unknown variable(s) {', '.join(sorted(set(p.reads) - known))} "
                                                     f"in dataset {dataset.name!r}")
              for p in plan.releases if not set(p.reads) <= known]
    if errors:
        raise InputErrors(errors)


def _new_ids(plan: Plan, recorded) -> None:
    """A plan's releases are new: one already in the ledger is bad input, named in the plan."""
    errors = [LedgerError(p.source, f"{p.at}.id", f"release {p.id!r} is already recorded in this ledger; "
                                                  "a plan solves new releases (give it another id)")
              for p in plan.releases if p.id in recorded]
    if errors:
        raise InputErrors(errors)


def _row(planned: PlannedRelease, release: Release, binding: str | None) -> Solved:
    name, value = parameter(release)
    std, halfwidth = expected_error(planned.family, planned.sensitivity, name, value)
    return Solved(planned, release, name, value, binding, std, halfwidth)


def _floors(solution: Solution) -> None:
    """A fixed parameter whose noise misses its own release's accuracy floor is bad input; a
    solved share always meets its floor (`floor_share`), and is refused, naming its cap, if
    rounding ever made it miss."""
    missed = [row for row in solution.rows
              if (row.planned.max_std is not None and row.std > row.planned.max_std)
              or (row.planned.max_halfwidth95 is not None and row.halfwidth95 > row.planned.max_halfwidth95)]
    fixed = [row for row in missed if row.binding is None]
    if fixed:
        raise InputErrors([LedgerError(row.planned.source, row.planned.at, f"its fixed parameter gives std "
                                       f"{row.std:.6g} and 95% half-width {row.halfwidth95:.6g}, beyond its "
                                       f"floor ({_floor_words(row.planned)})") for row in fixed])
    if missed:
        where = f"cap {solution.dataset}/{missed[0].binding}"
        words = "; ".join(f"{row.planned.id} (std {row.std:.6g}, 95% half-width {row.halfwidth95:.6g}, "
                          f"floor {_floor_words(row.planned)})" for row in missed if row.binding == missed[0].binding)
        raise Refused(LedgerError(where, "releases", f"the plan is infeasible: its accuracy floors need more "
                                                     f"than {where} leaves: {words}"))


def _floor_words(planned: PlannedRelease) -> str:
    parts = []
    if planned.max_std is not None:
        parts.append(f"max_std {float(planned.max_std):.6g}")
    if planned.max_halfwidth95 is not None:
        parts.append(f"max_halfwidth95 {float(planned.max_halfwidth95):.6g}")
    return ", ".join(parts)
