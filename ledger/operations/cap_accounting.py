"""Caps checked with their filters: a layer over `budget.check`.

`budget.check` computes every cap's figure by the basic accountant (its running
`CapTotal`). This layer takes those checks and, for a cap stated at a delta,
replaces the figure by its filter's (accounting/filters.py, cap_decisions.cap_decision):
the running figure's statements, Gaussian DP, or the Rényi divergences at one order
fixed when the cap was set. A pure epsilon cap keeps the pure sum; a rho cap the sum
of rho. Every check carries its `Decision` (accountant, theorem), which recording
writes into the audit event of what it admits, and a refusal prints.

Per cap, a running state (event counts on its subset) is kept in the store beside the
basic running total, so a check costs the same whatever the history's length; a
missing or stale state is recomputed from the history once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from fractions import Fraction

from ..accounting import budget, cap_decisions, cap_states, cap_unbounded, figure_validity, filters, index_figures
from ..accounting.charge_choice import at_delta
from ..accounting.spend import pure_spend
from ..store import configuration, decoded_history, running_totals, session_state, sessions
from ..store.sessions import Session
from ..core.numbers import INF, is_infinite
from ..core.records import CHARGED_STATUSES, Family, Release, in_dataset_order


def refine(session: Session, dataset: str, checks: Sequence[budget.CapCheck], totals: Mapping[str, budget.CapTotal],
           plan: Sequence[Release], families: Mapping[str, Family], members: Mapping[str, Sequence[Release]]
           ) -> tuple[list[budget.CapCheck], dict[str, dict]]:
    """The checks with each cap's best valid figures (before and after the plan), and the
    running states recording would store. `totals` are the basic running totals before."""
    if not checks:
        return [], {}
    states = current_states(session, dataset, [c.cap for c in checks])
    refined, after_states = [], {}
    for check in checks:
        state = states.get(check.cap.name)
        result, after_state = decide(check, totals.get(check.cap.name, budget.CapTotal()), state, plan, families,
                                     members)
        if after_state is not None:
            after_states[check.cap.name] = after_state
        refined.append(result)
    return refined, after_states


def decide(check: budget.CapCheck, total: budget.CapTotal, state: dict | None, plan: Sequence[Release],
           families: Mapping[str, Family], members: Mapping[str, Sequence[Release]]
           ) -> tuple[budget.CapCheck, dict | None]:
    """One cap's basic check with its best valid figures before and after the plan (the one
    decision function: `record`, `check`, `approve`, `publish`, `cap list` and `headroom`),
    and the running state after the plan (None for caps decided by their basic sums)."""
    cap = check.cap
    after_state = None
    if state is not None:
        after_state = cap_states.state_apply(state, cap, plan, families, members)
    # No spend is composed for the decision: with a running state, the state says what the
    # decision needs of it; without one (a cap not at a delta, or a delta cap with no state)
    # `cap_decision` keeps the basic figure and reads no spend.
    before = _decision_before(cap, check.current, state)
    after = cap_decisions.cap_decision(cap, check.after, None, after_state)
    if after_state is not None:
        _DECIDED[(cap.dataset, cap.name)] = (after_state, cap, check.after, after)
    return _with(check, before, after), after_state


# The decision last made per cap, on the state a record leaves and the basic figure after it:
# (that state, the cap, the figure, the Decision). The next record's decision *before* its plan
# is on that very state (the running states and totals this process saved are the ones it reads
# next, while the audit head is unmoved) and figure: the same function of the same objects, so
# it is taken, not made again (`cap_decision` is deterministic; the PLD memo it may give a state
# is already on it). Any other state, cap or figure (other objects) is decided afresh.
_DECIDED: dict[tuple[str, str], tuple] = {}


def _decision_before(cap, value, state: dict | None) -> cap_decisions.Decision:
    found = _DECIDED.get((cap.dataset, cap.name))
    if found is not None and state is not None and found[0] is state and found[1] is cap and found[2] is value:
        return found[3]
    return cap_decisions.cap_decision(cap, value, None, state)


def _with(check: budget.CapCheck, before: cap_decisions.Decision, after: cap_decisions.Decision) -> budget.CapCheck:
    cap = check.cap
    # the cap's figure is its filter's alone: another statement's smaller figure spends the delta again
    current, value = before.value, after.value
    charge = check.charge if is_infinite(current) else budget.difference(value, current)  # budget.plan_charge
    # (the check with these fields replaced, built directly: dataclasses.replace reads the fields anew each call)
    return budget.CapCheck(cap=cap, current=current, charge=charge, after=value,
                           headroom=budget.difference(cap.limit, value, down=True), status=budget.status(cap, value),
                           drivers=check.drivers, after_total=check.after_total, charges=check.charges,
                           reason=check.reason, decision=after)


def with_running(session: Session, dataset: str, checks: Sequence[budget.CapCheck],
                 when: datetime | None = None) -> list[budget.CapCheck]:
    """Each cap at a delta with the running figure of its subset at its delta, the figure `subset`
    prints (index_figures.subset_figures, the smallest valid one), now or at `when`: a cap is decided
    by its filter, and a board reads both."""
    stated = [c for c in checks if c.cap.delta is not None and c.cap.rho is None]
    own = {c.cap.name: c.after for c in stated if filters.kind_of(c.cap.filter)[0] == filters.RUNNING}
    at = [c for c in stated if c.cap.name not in own]  # (a running-figure cap's figure is that figure)
    if not at:
        return [replace(c, running=own[c.cap.name]) if c.cap.name in own else c for c in checks]
    index = index_at(session, dataset, [c.cap for c in at], when)
    running = {}
    for check in at:
        cap = check.cap
        cost = index.subset_cost(cap.subset, at_delta(cap.delta))
        found = index_figures.subset_figures(index, cap.subset, cap.delta, cost.spend, invalid_pld=False)
        running[cap.name] = figure_validity.best(found).epsilon
    running.update(own)
    return [replace(c, running=running[c.cap.name]) if c.cap.name in running else c for c in checks]


def current_states(session: Session, dataset: str, caps) -> dict[str, dict]:
    """Each cap's stored running state, recomputed from the history when missing or stale
    (caps stated at a delta only: the others are decided by their basic sums)."""
    caps = [cap for cap in caps if cap.delta is not None and cap.rho is None]
    stored = running_totals.accountant_states(session, dataset, [cap.name for cap in caps])
    states, stale = {}, []
    for cap in caps:
        state = stored.get(cap.name)
        if cap_states.state_is_current(cap, state):
            states[cap.name] = state
        else:
            stale.append(cap)
    if stale:  # from the accounting rows of the releases reading the caps' subsets, not
        # from every decoded release: `state_from_index` gives `state_from_history`'s dict
        index = running_totals.caps_index(session, dataset, stale)
        for cap in stale:
            states[cap.name] = cap_states.state_from_index(cap, index)
    return states


def checks_from_history(caps, releases: Sequence[Release], families: Mapping[str, Family],
                        totals: Mapping[str, budget.CapTotal] | None = None) -> list[budget.CapCheck]:
    """Every cap as the given releases leave it, each with its best valid figure: the running
    totals (unless given) and accountant states recomputed from the releases (for `cap list
    --as-of` and the report: the same decision as `cap list`)."""
    releases = list(releases)
    if totals is None:
        totals = {cap.name: budget.total_from_history(cap, releases, families) for cap in caps}
    checks = checks_on(caps, totals, lambda cap: cap_states.state_from_history(cap, releases, families))
    return with_reasons(checks, lambda: charged_index(caps, releases, families))


def checks_from_index(caps, index, totals: Mapping[str, budget.CapTotal] | None = None) -> list[budget.CapCheck]:
    """`checks_from_history` over a LedgerIndex of the charged releases (the accounting rows,
    index_from_rows.index_for, at a moment for `cap list --as-of`; or the report's index):
    the running totals (unless given) by `budget.total_from_index` and the accountant states
    by `cap_states.state_from_index`, the same totals and states, so the same decisions."""
    if totals is None:
        totals = {cap.name: budget.total_from_index(cap, index) for cap in caps}
    return with_reasons(checks_on(caps, totals, lambda cap: cap_states.state_from_index(cap, index)), lambda: index)


def checks_on(caps, totals: Mapping[str, budget.CapTotal], state_of) -> list[budget.CapCheck]:
    """Every cap checked on `totals` with no plan, each with its best valid figure (`decide`);
    `state_of(cap)`: its running accountant state (caps stated at a delta only)."""
    checks = budget.check(list(caps), totals, [], {}, {}, only_touched=False)
    result = []
    for check in checks:
        cap = check.cap
        state = state_of(cap) if cap.delta is not None and cap.rho is None else None
        refined, _ = decide(check, totals.get(cap.name, budget.CapTotal()), state, [], {}, {})
        result.append(refined)
    return result


def explained(session: Session, dataset: str, checks: Sequence[budget.CapCheck],
              when: datetime | None = None) -> list[budget.CapCheck]:
    """The checks, each whose figure was ∞ before the plan (no plan charge says why: `cap list`,
    `cap set`, or `check` and `record` on a cap already ∞) with the reason `check` gives a plan's
    charge, from the releases charged (`cap_unbounded.why_index_unbounded`: the release or family that
    makes it ∞, a keyed family's unprotected move included, docs/explanation/model.md#families); the running total
    alone cannot say which. The releases are read only when such a figure is ∞."""
    infinite = [c.cap for c in checks if _unexplained(c)]
    return with_reasons(checks, lambda: index_at(session, dataset, infinite, when))


def _unexplained(c: budget.CapCheck) -> bool:
    return is_infinite(c.current) and not any(charge.reason for charge in c.charges)


def with_reasons(checks: Sequence[budget.CapCheck], index_of) -> list[budget.CapCheck]:
    """`explained` over the LedgerIndex `index_of()` gives (asked for only when a check needs it)."""
    if not any(_unexplained(c) for c in checks):
        return list(checks)
    index = index_of()
    return [replace(c, reason=cap_unbounded.why_index_unbounded(c.cap, index)) if _unexplained(c) else c for c in checks]


def charged_index(caps, releases: Sequence[Release], families: Mapping[str, Family]):
    """The LedgerIndex of the charged releases among `releases` (over what they read and the caps'
    subsets): what `checks_from_history` explains an ∞ cap from, as `cap list` does from the rows."""
    from ..accounting.ledger_index import LedgerIndex

    charged = [r for r in releases if r.status in CHARGED_STATUSES]
    variables = sorted(set().union(*(r.reads for r in charged), *(cap.subset for cap in caps)))
    index = LedgerIndex(variables, charged, families.values())
    return index.for_dataset(caps[0].allowance) if caps else index


def index_at(session: Session, dataset: str, caps, when: datetime | None = None):
    """The LedgerIndex of the releases charged on the caps' subsets, now or as the ledger stood at
    `when` (as `standing_at` reads them: the accounting rows, else the releases as they stood)."""
    if when is None:
        return running_totals.caps_index(session, dataset, caps)
    from ..store import index_from_rows
    from ..accounting.ledger_index import LedgerIndex

    light = configuration.write_context(session)
    variables = light.datasets[dataset].variable_names
    families = {fid: f for fid, f in light.families.items() if f.dataset == dataset}
    index = index_from_rows.index_for(session, variables, dataset, families, when=when)
    if index is not None:
        return index
    from ..accounting.history import releases_as_of
    from ..store.as_of import ended_at

    history = decoded_history.snapshot(session, dataset)
    ended = history.ended if history.ended is not None else ended_at(session.connection())
    then = releases_as_of([r for r in history.releases.values() if r.dataset == dataset], when, ended)
    return LedgerIndex(variables, [r for r in then if r.status in CHARGED_STATUSES],  # (each with its status then)
                       [f for f in history.families.values() if f.dataset == dataset]
                       ).for_dataset(light.datasets[dataset].allowance)


def decisions_json(checks: Sequence[budget.CapCheck]) -> list[dict]:
    """What the audit event of an admitted step records: per cap, who decided, how."""
    result = []
    for check in checks:
        decision = check.decision or cap_decisions.Decision("basic", check.after, figure_validity.ADAPTIVE,
                                                          cap_decisions.running_theorem(check.cap.allowance))
        result.append(decision.to_json(check.cap, check.ok))
    return result


def decision_text(check: budget.CapCheck) -> str:
    decision = check.decision
    if decision is None:
        return "decided by basic"
    return f"decided by {decision.accountant} ({decision.case}): {decision.theorem}"


HEADROOM_MECHANISMS = ("any", "laplace", "gaussian")


def standing_at(session: Session, dataset: str, caps, when: datetime | None):
    """(the caps' basic running totals, their accountant states) as the ledger stands, or as it
    stood at `when` (`cap list --as-of`: the accounting rows of the releases charged then,
    index_from_rows.index_for with the moment; where the rows cannot state the ledger then exactly,
    the whole releases as they stood, history.releases_as_of). States: caps at a delta only."""
    stated = [cap for cap in caps if cap.delta is not None and cap.rho is None]
    if when is None:
        return running_totals.cap_totals(session, dataset, [cap.name for cap in caps]), current_states(session, dataset, caps)
    from ..store import index_from_rows

    light = configuration.write_context(session)
    families = {fid: f for fid, f in light.families.items() if f.dataset == dataset}
    index = index_from_rows.index_for(session, light.datasets[dataset].variable_names, dataset, families, when=when)
    if index is not None:
        return ({cap.name: budget.total_from_index(cap, index) for cap in caps},
                {cap.name: cap_states.state_from_index(cap, index) for cap in stated})
    from ..accounting.history import releases_as_of
    from ..store.as_of import ended_at

    history = decoded_history.snapshot(session, dataset)
    ended = history.ended if history.ended is not None else ended_at(session.connection())
    then = releases_as_of([r for r in history.releases.values() if r.dataset == dataset], when, ended)
    families = {fid: f for fid, f in history.families.items() if f.dataset == dataset}
    return ({cap.name: budget.total_from_history(cap, then, families) for cap in caps},
            {cap.name: cap_states.state_from_history(cap, then, families) for cap in stated})


def headroom(session: Session, dataset: str, variables, caps, *, when: datetime | None = None,
             mechanism: str = "any") -> budget.Headroom:
    """The largest pure epsilon, and the largest rho, a new release reading exactly `variables`
    (and protecting them) could take such that every cap's enforcement (`decide`, the function
    `record` uses) still admits it; with `when`, as the ledger stood then (`standing_at`), the
    release recorded at that moment.

    Per cap, the release is probed as recording would see it: planned now, its cost (mechanism
    "any") a declared pure guarantee (randomized response's curve, the worst case of any
    epsilon-DP mechanism, Kairouz, Oh and Viswanath 2015) or a declared rho (any rho-zCDP
    mechanism); "laplace": a Laplace release of that epsilon (its own Rényi curve and PLD);
    "gaussian": a Gaussian of sigma / sensitivity = m, the smallest m admitted (its rho is
    1 / (2 m^2)). The probe is the release `check` builds from such a plan, so the headroom is
    the boundary `check` draws. A pure cap is linear in a pure epsilon
    and a rho cap in rho (the basic sums); a cap at a delta is searched by bisection from the
    basic headroom (a lower bound: every decision is at most the basic figure), keeping the
    admitted end, so a release of the printed headroom is admitted (never larger)."""
    if mechanism not in HEADROOM_MECHANISMS:
        raise ValueError(f"mechanism must be one of {HEADROOM_MECHANISMS}. Found {mechanism!r}.")
    variables = frozenset(variables)
    caps = [cap for cap in caps if cap.subset & variables]
    totals, states = standing_at(session, dataset, caps, when)
    now = when if when is not None else session_state.now()
    kinds = {"any": ("pure", "rho"), "laplace": ("pure",), "gaussian": ("rho",)}[mechanism]
    found = {}
    for kind in ("pure", "rho"):
        if kind not in kinds:
            found[kind] = (None, None, None)
            continue
        probe_kind = "gaussian" if mechanism == "gaussian" else (mechanism if kind == "pure" else "any") + "-" + kind
        best: tuple = (INF, None)
        for cap in caps:
            value = _largest(cap, totals.get(cap.name, budget.CapTotal()), states.get(cap.name), variables,
                             probe_kind, now)
            if value < best[0]:
                best = (value, cap)
        found[kind] = (*best, _decided_by(best, probe_kind, variables, totals, states, now))
    multiplier, rho = None, found["rho"][0]
    if mechanism == "gaussian":  # the smallest sigma / sensitivity admitted, and its rho
        if is_infinite(rho):
            multiplier = Fraction(0)  # no cap applies: any sigma
        elif not rho:
            multiplier = INF  # no Gaussian fits
        else:
            multiplier = gaussian_multiplier_for(rho)
            rho = 1 / (2 * multiplier * multiplier)
    order = configuration.write_context(session).datasets[dataset].variable_names
    return budget.Headroom(in_dataset_order(order, variables), found["pure"][0], found["pure"][1],
                           rho, found["rho"][1], found["pure"][2], found["rho"][2], mechanism=mechanism,
                           multiplier=multiplier)


def _decided_by(found, probe_kind: str, variables, totals, states, now) -> str | None:
    value, cap = found
    if cap is None or is_infinite(value):
        return None
    total = totals.get(cap.name, budget.CapTotal())
    plan = [_probe(cap, variables, probe_kind, Fraction(value), now)] if value else []
    (check,) = budget.check([cap], {cap.name: total}, plan, {}, {}, only_touched=False)
    result, _ = decide(check, total, states.get(cap.name), plan, {}, {})
    return result.decision.accountant if result.decision is not None else "basic"


def gaussian_multiplier_for(rho: Fraction) -> Fraction:
    """The smallest sigma / sensitivity, to 12 significant digits rounded UP, whose Gaussian is
    at most rho-zCDP: m >= 1 / sqrt(2 rho) (Bun and Steinke 2016, Prop 1.6)."""
    import decimal

    m = Fraction(decimal.Context(prec=12, rounding=decimal.ROUND_CEILING).create_decimal(
        math.nextafter(1 / math.sqrt(2 * float(rho)), math.inf)))
    while 2 * m * m * rho < 1:  # (float error: never below the exact root)
        m = m * (1 + Fraction(1, 10**11))
    return m


def _probe(cap, variables: frozenset, probe_kind: str, value: Fraction, now: datetime) -> Release:
    """The planned release a headroom is probed with (`headroom`): value is its epsilon (any-pure,
    laplace-pure) or rho (any-rho, gaussian: the Gaussian of the smallest multiplier within it)."""
    from ..accounting.catalogue import derive_guarantees
    from ..core.records import Guarantee, Mechanism, Notion, Status

    if probe_kind == "laplace-pure":
        mechanism = Mechanism("laplace", (("epsilon", value),))
    elif probe_kind == "gaussian":
        mechanism = Mechanism("gaussian", (("sensitivity", Fraction(1)), ("sigma", gaussian_multiplier_for(value))))
    else:
        guarantee = (Guarantee(variables, Notion.PURE, epsilon=value) if probe_kind == "any-pure"
                     else Guarantee(variables, Notion.ZCDP, rho=value))
        return Release("headroom-probe", cap.dataset, variables, Mechanism("declared"), (guarantee,),
                       status=Status.PLANNED, recorded_at=now)
    guarantees, _ = derive_guarantees(mechanism, variables)
    return Release("headroom-probe", cap.dataset, variables, mechanism, guarantees, status=Status.PLANNED,
                   recorded_at=now)


def admits(cap, total: budget.CapTotal, state: dict | None, plan: Sequence[Release]) -> bool:
    """Whether the cap's enforcement admits `plan` (standalone releases) on this total and state."""
    (check,) = budget.check([cap], {cap.name: total}, plan, {}, {}, only_touched=False)
    result, _ = decide(check, total, state, plan, {}, {})
    return result.ok


def _largest(cap, total: budget.CapTotal, state: dict | None, variables: frozenset, probe_kind: str,
             now: datetime):
    if probe_kind.endswith("-pure"):
        basic = budget.largest_basic_charge(cap, total, pure_spend)
    else:  # (a Gaussian probe of rho x costs at most x: the rho headroom bounds it)
        basic = budget.largest_basic_charge(cap, total, lambda x: budget.Spend(rho=x))
    if cap.delta is None or cap.rho is not None:
        return basic  # decided by the basic sums: `largest_basic_charge` is that decision, exactly
    if state is None:
        return basic

    def ok(x: Fraction) -> bool:
        return x == 0 or admits(cap, total, state, [_probe(cap, variables, probe_kind, x, now)])

    if is_infinite(basic):
        return basic
    low = Fraction(basic)
    if not ok(low):  # (cannot happen: the decision is never above the basic figure) keep it safe
        return Fraction(0)
    step = max(low, Fraction(1, 10**6))
    high = low + step
    while ok(high):
        low, step = high, step * 2
        high = low + step
        if high > 10**6:
            return INF
    for _ in range(64):  # to 10^-9 relative, whichever is first
        if high - low <= max(low, Fraction(1)) * Fraction(1, 10**10):
            break
        middle = budget.round_down((low + high) / 2)
        if middle <= low:
            break
        if ok(middle):
            low = middle
        else:
            high = middle
    return budget.round_down(low)


def is_finite(value) -> bool:
    return not math.isinf(float(value))


def infinite_driver_reasons(engine, checks: Sequence[budget.CapCheck], when: datetime | None = None
                            ) -> dict[tuple[str, str], tuple[str | None, ...]]:
    """Per cap (dataset, name) with an ∞ driver, each driver's own reason in reasons.py's words
    (reasons.driver_reasons, as the report's caps table), from the releases charged now or at
    `when`; the releases are read only when some driver is ∞."""
    wanted = [c for c in checks if any(is_infinite(value) for _name, value in c.drivers)]
    if not wanted:
        return {}
    from .reasons import driver_reasons

    found = {}
    with sessions.read_session(engine) as session:
        datasets = configuration.write_context(session).datasets
        for dataset in sorted({c.cap.dataset for c in wanted}):
            mine = [c for c in wanted if c.cap.dataset == dataset]
            index = index_at(session, dataset, [c.cap for c in mine], when)
            for c in mine:
                found[(dataset, c.cap.name)] = driver_reasons(c.cap, c.drivers, index,
                                                              datasets[dataset].public_names)
    return found
