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

Per cap, a running state (event counts and lifecycle times on its subset) is
kept in the store beside the basic running total, so a check costs the same
whatever the history's length; a missing or stale state is recomputed from the
history once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from sqlmodel import Session

from . import accountants, budget, store
from .records import Family, Release


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
        cap = check.cap
        state = states.get(cap.name)
        after_state = None
        if state is not None:
            after_state = accountants.state_apply(state, cap, plan, families, members, published)
            after_states[cap.name] = after_state
        before_spend = totals.get(cap.name, budget.CapTotal()).spend
        before = accountants.cap_decision(cap, check.current, before_spend, state)
        after = accountants.cap_decision(cap, check.after, check.after_total.spend, after_state)
        refined.append(_with(check, before, after))
    return refined, after_states


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
    if stale:
        history = store.snapshot(session, dataset)
        families = {f.id: f for f in history.families.values() if f.dataset == dataset}
        releases = [r for r in history.releases.values() if r.dataset == dataset]
        for cap in stale:
            states[cap.name] = accountants.state_from_history(cap, releases, families)
    return states


def decisions_json(checks: Sequence[budget.CapCheck]) -> list[dict]:
    """What the audit event of an admitted step records: per cap, who decided, how."""
    result = []
    for check in checks:
        decision = check.decision or accountants.Decision("basic", check.after, "adaptive",
                                                          accountants.FILTER_THEOREMS["basic"])
        result.append(decision.to_json(check.cap, check.ok))
    return result


def decision_text(check: budget.CapCheck) -> str:
    decision = check.decision
    if decision is None:
        return "decided by basic"
    return f"decided by {decision.accountant} ({decision.case}): {decision.theorem}"


def is_finite(value) -> bool:
    return not math.isinf(float(value))
