"""Caps checked with the best valid figure: a layer over `budget.check` (issue 11).

`budget.check` computes every cap's figure by the basic accountant (its running
`CapTotal`). This layer takes those checks and, for a cap stated at a delta,
replaces the figure by the smallest one a *valid filter* gives (DESIGN 2.10,
accountants.cap_decision): the Rényi filter at fixed orders when the basic spend
is pure, and the non-adaptive minimum (PLD included) when every release
charged on the cap's subset was recorded before any was published. A pure
epsilon cap keeps the pure sum; a rho cap the sum of rho. Every check carries
its `Decision` (accountant, case, theorem), which recording writes into the
audit event of what it admits, and a refusal prints.

Per cap, a running state (event counts and lifecycle times on its subset, and
for a plan declared in advance the PLD figure it was decided with, keyed by the
digest of that composition's input) is kept in the store beside the basic
running total, so a check costs the same whatever the history's length and
composes one PLD per declared cap (after its plan), not two; a missing or stale
state is recomputed from the history once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from fractions import Fraction

from sqlmodel import Session

from ..accounting import accountants, budget
from ..store import database as store
from ..core.numbers import INF, is_infinite
from ..core.records import Family, Release


def refine(session: Session, dataset: str, checks: Sequence[budget.CapCheck], totals: Mapping[str, budget.CapTotal],
           plan: Sequence[Release], families: Mapping[str, Family], members: Mapping[str, Sequence[Release]],
           published: Mapping[str, datetime] | None = None) -> tuple[list[budget.CapCheck], dict[str, dict]]:
    """The checks with each cap's best valid figures (before and after the plan), and the
    running states recording would store. `totals` are the basic running totals before."""
    if not checks:
        return [], {}
    states = current_states(session, dataset, [c.cap for c in checks])
    refined, after_states = [], {}
    for check in checks:
        state = states.get(check.cap.name)
        result, after_state = decide(check, totals.get(check.cap.name, budget.CapTotal()), state, plan, families,
                                     members, published)
        if after_state is not None:
            after_states[check.cap.name] = after_state
        refined.append(result)
    return refined, after_states


def decide(check: budget.CapCheck, total: budget.CapTotal, state: dict | None, plan: Sequence[Release],
           families: Mapping[str, Family], members: Mapping[str, Sequence[Release]],
           published: Mapping[str, datetime] | None = None) -> tuple[budget.CapCheck, dict | None]:
    """One cap's basic check with its best valid figures before and after the plan (the one
    decision function: `record`, `check`, `approve`, `publish`, `cap list` and `headroom`),
    and the running state after the plan (None for caps decided by their basic sums)."""
    cap = check.cap
    after_state = None
    if state is not None:
        after_state = accountants.state_apply(state, cap, plan, families, members, published)
    # No spend is composed for the decision: with a running state, the state says what the
    # decision needs of it; without one (a cap not at a delta, or a delta cap with no state)
    # `cap_decision` keeps the basic figure and reads no spend.
    before = _decision_before(cap, check.current, state)
    after = accountants.cap_decision(cap, check.after, None, after_state)
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


def _decision_before(cap, value, state: dict | None) -> accountants.Decision:
    found = _DECIDED.get((cap.dataset, cap.name))
    if found is not None and state is not None and found[0] is state and found[1] is cap and found[2] is value:
        return found[3]
    return accountants.cap_decision(cap, value, None, state)


def _with(check: budget.CapCheck, before: accountants.Decision, after: accountants.Decision) -> budget.CapCheck:
    current = min(check.current, before.value, key=float)
    value = min(check.after, after.value, key=float)
    return replace(check, current=current, after=value, charge=budget._difference(value, current),
                   headroom=budget._difference(check.cap.limit, value, down=True), status=budget.status(check.cap, value),
                   decision=after)


def current_states(session: Session, dataset: str, caps) -> dict[str, dict]:
    """Each cap's stored running state, recomputed from the history when missing or stale
    (caps stated at a delta only: the others are decided by their basic sums)."""
    caps = [cap for cap in caps if cap.delta is not None and cap.rho is None]
    stored = store.accountant_states(session, dataset, [cap.name for cap in caps])
    states, stale = {}, []
    for cap in caps:
        state = stored.get(cap.name)
        if accountants.state_is_current(cap, state):
            states[cap.name] = state
        else:
            stale.append(cap)
    if stale:  # from the accounting rows of the releases reading the caps' subsets (issue 13), not
        # from every decoded release: `state_from_index` gives `state_from_history`'s dict
        index = store.caps_index(session, dataset, stale)
        for cap in stale:
            states[cap.name] = accountants.state_from_index(cap, index)
    return states


def checks_from_history(caps, releases: Sequence[Release], families: Mapping[str, Family],
                        totals: Mapping[str, budget.CapTotal] | None = None) -> list[budget.CapCheck]:
    """Every cap as the given releases leave it, each with its best valid figure: the running
    totals (unless given) and accountant states recomputed from the releases (for `cap list
    --as-of` and the report: the same decision as `cap list`)."""
    releases = list(releases)
    if totals is None:
        totals = {cap.name: budget.total_from_history(cap, releases, families) for cap in caps}
    return _decided(caps, totals, lambda cap: accountants.state_from_history(cap, releases, families))


def checks_from_index(caps, index, totals: Mapping[str, budget.CapTotal] | None = None) -> list[budget.CapCheck]:
    """`checks_from_history` over a LedgerIndex of the charged releases (the accounting rows,
    columns.index_for, at a moment for `cap list --as-of`; or the report's index; issue 13):
    the running totals (unless given) by `budget.total_from_index` and the accountant states
    by `accountants.state_from_index`, the same totals and states, so the same decisions."""
    if totals is None:
        totals = {cap.name: budget.total_from_index(cap, index) for cap in caps}
    return _decided(caps, totals, lambda cap: accountants.state_from_index(cap, index))


def _decided(caps, totals: Mapping[str, budget.CapTotal], state_of) -> list[budget.CapCheck]:
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


def decisions_json(checks: Sequence[budget.CapCheck]) -> list[dict]:
    """What the audit event of an admitted step records: per cap, who decided, how."""
    result = []
    for check in checks:
        decision = check.decision or accountants.Decision("basic", check.after, accountants.EITHER_CASE,
                                                          accountants.FILTER_THEOREMS["basic"])
        result.append(decision.to_json(check.cap, check.ok))
    return result


def decision_text(check: budget.CapCheck) -> str:
    decision = check.decision
    if decision is None:
        return "decided by basic"
    return f"decided by {decision.accountant} ({decision.case}): {decision.theorem}"


def headroom(session: Session, dataset: str, variables, caps) -> budget.Headroom:
    """The largest pure epsilon, and the largest rho, a new release reading exactly `variables`
    (and protecting them) could take such that every cap's enforcement (`decide`, the function
    `record` uses) still admits it.

    Per cap, the release is probed as recording would see it: planned now, its cost a declared
    pure guarantee (randomized response's curve, the worst case of any epsilon-DP mechanism,
    Kairouz, Oh and Viswanath 2015) or a declared rho. A pure cap is linear in a pure epsilon
    and a rho cap in rho (the basic sums); a cap at a delta is searched by bisection from the
    basic headroom (a lower bound: every decision is at most the basic figure), keeping the
    admitted end, so a release of the printed headroom is admitted (never larger)."""
    variables = frozenset(variables)
    caps = [cap for cap in caps if cap.subset & variables]
    totals = store.cap_totals(session, dataset, [cap.name for cap in caps])
    states = current_states(session, dataset, caps)
    now = store.now()
    best_epsilon: tuple = (INF, None)
    best_rho: tuple = (INF, None)
    for cap in caps:
        total = totals.get(cap.name, budget.CapTotal())
        epsilon = _largest(cap, total, states.get(cap.name), variables, "pure", now)
        rho = _largest(cap, total, states.get(cap.name), variables, "rho", now)
        if epsilon < best_epsilon[0]:
            best_epsilon = (epsilon, cap)
        if rho < best_rho[0]:
            best_rho = (rho, cap)

    def decided_by(found, kind):
        value, cap = found
        if cap is None or is_infinite(value):
            return None
        total = totals.get(cap.name, budget.CapTotal())
        plan = [_probe(cap, variables, kind, Fraction(value), now)] if value else []
        (check,) = budget.check([cap], {cap.name: total}, plan, {}, {}, only_touched=False)
        result, _ = decide(check, total, states.get(cap.name), plan, {}, {})
        return result.decision.accountant if result.decision is not None else "basic"

    return budget.Headroom(tuple(sorted(variables)), best_epsilon[0], best_epsilon[1], best_rho[0], best_rho[1],
                           decided_by(best_epsilon, "pure"), decided_by(best_rho, "rho"))


def _probe(cap, variables: frozenset, kind: str, value: Fraction, now: datetime) -> Release:
    from ..core.records import Guarantee, Mechanism, Notion, Status

    guarantee = (Guarantee(variables, Notion.PURE, epsilon=value) if kind == "pure"
                 else Guarantee(variables, Notion.ZCDP, rho=value))
    return Release("headroom-probe", cap.dataset, variables, Mechanism("declared"), (guarantee,),
                   status=Status.PLANNED, recorded_at=now)


def admits(cap, total: budget.CapTotal, state: dict | None, plan: Sequence[Release]) -> bool:
    """Whether the cap's enforcement admits `plan` (standalone releases) on this total and state."""
    (check,) = budget.check([cap], {cap.name: total}, plan, {}, {}, only_touched=False)
    result, _ = decide(check, total, state, plan, {}, {})
    return result.ok


def _largest(cap, total: budget.CapTotal, state: dict | None, variables: frozenset, kind: str,
             now: datetime):
    basic = budget._largest(cap, total, budget.pure_spend if kind == "pure" else (lambda x: budget.Spend(rho=x)))
    if cap.delta is None or cap.rho is not None:
        return basic  # decided by the basic sums: `budget._largest` is that decision, exactly
    if state is None:
        return basic

    def ok(x: Fraction) -> bool:
        return x == 0 or admits(cap, total, state, [_probe(cap, variables, kind, x, now)])

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
        middle = budget._round_down((low + high) / 2)
        if middle <= low:
            break
        if ok(middle):
            low = middle
        else:
            high = middle
    return budget._round_down(low)


def is_finite(value) -> bool:
    return not math.isinf(float(value))
