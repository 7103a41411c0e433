"""A cap's decision: which valid filter (filters.py) a cap is checked with, fixed when the cap is set.

A pure-epsilon cap keeps the pure sum, a rho cap the sum of rho (Rogers, Roth, Ullman and Vadhan
2016); a cap at a delta is the running figure, a Gaussian-DP filter or a Rényi filter at one order
(Feldman and Zrnic 2021, Thm 4.3).

Invariants: each decision names the accountant and theorem that decided; every figure can only rise
when a release joins, so a check admits exactly what the filter admits.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from ..core.lazy import lazy_module
from ..core.numbers import INF, Number
from .dp_events import Event
from .figure_validity import ADAPTIVE, PURE_PREFERENCE, TIE
from .renyi_curves import _grids, _state_sums, _up, rdp_filter_epsilon
from .spend import ALLOWANCE, Spend, filter_delta, within_allowance
from . import filters

np = lazy_module("numpy")  # imported on first use


@dataclass(frozen=True)
class Decision:
    """Which accountant's valid figure a cap is checked with, under which case and theorem."""

    accountant: str
    value: Number  # in the cap's unit
    case: str  # ADAPTIVE: a filter holds whatever the order of its releases
    theorem: str

    def to_json(self, cap, admitted: bool) -> dict:
        from ..core.numbers import to_json

        return {"cap": f"{cap.dataset}/{cap.name}", "accountant": self.accountant, "case": self.case,
                "theorem": self.theorem, "figure": to_json(self.value), "limit": to_json(cap.limit, down=True),
                "admitted": admitted}


FILTER_THEOREMS = {
    "basic-pure": "pure-epsilon filter: the sum of epsilons (Rogers, Roth, Ullman and Vadhan 2016)",
    "basic": "the running figure (an odometer valid at every stopping time): the pure sum with approximate "
             "epsilons beside it, and the Rényi statements at the orders fixed in advance, each at 1/22 of the "
             "half of the delta the approximate allowance leaves (Feldman and Zrnic 2021, Theorem 4.3)",
}


def running_theorem(allowance: Fraction) -> str:
    """FILTER_THEOREMS["basic"] for a dataset's allowance (the default: half the delta)."""
    if allowance == ALLOWANCE:
        return FILTER_THEOREMS["basic"]
    return FILTER_THEOREMS["basic"].replace("the half of the delta", f"the {1 - allowance} of the delta")


def _filter_from_state(state: dict, delta: Fraction, allowance: Fraction = ALLOWANCE) -> float:
    """`rdp_filter_figure` of a running state, from its cached sums (the Rényi filter at the fixed
    orders, approximate guarantees by basic beside them)."""
    items = tuple(state["events"].items())  # (in the state's own order: a cache key, not a meaning)
    if state["families"]:
        items += tuple((key, 1) for keys in state["families"].values() for key in keys)
    return _filter_value(items, delta, allowance)


@lru_cache(maxsize=4096)
def _filter_value(items: tuple, delta: Fraction, allowance: Fraction) -> float:
    curve, rho, approx_eps, approx_delta = _state_sums(items)
    remaining = filter_delta(delta, approx_delta, allowance)
    if remaining <= 0:
        return INF
    value = rdp_filter_epsilon(curve, remaining)  # (as rdp_filter_figure)
    return _up(value + float(approx_eps)) if approx_eps else value


def cap_decision(cap, basic_value: Number, spend: Spend | None, state: dict | None) -> Decision:
    """The figure a cap is checked with: its filter's (filters.py), fixed when the cap was set.

    A pure-epsilon cap keeps the pure sum, a rho cap the sum of rho. A cap at a delta is a
    Gaussian-DP filter or a Rényi filter at one order (`Cap.filter`); a Rényi filter whose
    admitted releases are all pure also holds by their pure sum, which spends no delta (it
    bounds the loss on every outcome), and takes it where it is smaller. Every figure can only
    rise when a release joins, so a check admits exactly what the filter admits."""
    if cap.rho is not None:
        return Decision("basic", basic_value, ADAPTIVE, filters.describe(cap))
    if cap.delta is None:
        return Decision("basic", basic_value, ADAPTIVE, filters.describe(cap))
    if state is None:  # (no running state to read the filter's sums from: the running figure, an odometer)
        return Decision("basic", basic_value, ADAPTIVE, running_theorem(cap.allowance))
    if state["unbounded"] or math.isinf(float(basic_value)) or (spend is not None and spend.unbounded):
        return Decision("basic", INF, ADAPTIVE, filters.describe(cap))
    items = _state_items(state)
    kind, order = filters.kind_of(cap.filter)
    if kind == filters.RUNNING:  # the odometer's statements, one union at the cap's delta (spend.py)
        rdp = _filter_value(items, cap.delta, cap.allowance)
        smaller = float(basic_value) > float(rdp) * (1 + TIE)  # (as `best` chooses: the subset's figure)
        if smaller and _state_is_pure(state):
            smaller = float(rdp) < float(basic_value) * (1 - PURE_PREFERENCE)
        return Decision("rdp" if smaller else "basic", rdp if smaller else basic_value, ADAPTIVE,
                        filters.describe(cap))
    if kind == filters.GAUSSIAN:
        counts: Counter = Counter()
        for key, count in items:
            event = Event.from_key(key)
            counts[(event.kind, event.a, event.b)] += count
        return Decision("gdp", filters.gaussian_figure(counts, cap.delta), ADAPTIVE, filters.describe(cap))
    order = order or cap_order(cap)
    curve, _rho, approx_eps, approx_delta = _state_sums(items)
    if not within_allowance(approx_delta, cap.delta, cap.allowance):
        return Decision("rdp", INF, ADAPTIVE, filters.describe(cap))
    at = int(np.flatnonzero(np.isclose(_grids()["ORDERS"], order))[0])
    value = filters.renyi_figure(float(curve[at]), order, cap.delta, float(approx_eps), cap.allowance)
    pure = spend.is_pure if spend is not None else _state_is_pure(state)
    if pure and float(basic_value) <= value:  # (the smaller of two that only grow: it never falls)
        return Decision("basic", basic_value, ADAPTIVE, FILTER_THEOREMS["basic-pure"])
    return Decision("rdp", value, ADAPTIVE, filters.describe(cap))


def cap_order(cap) -> float:
    """The order of a Rényi-filter cap: fixed by its epsilon, its delta and its dataset's allowance
    alone (filters.renyi_order)."""
    return filters.renyi_order(cap.epsilon, cap.delta, _grids()["ORDERS"], cap.allowance)


def choose_filter(cap, state: dict | None) -> str:
    """The filter a cap at a delta is given when it is set: Gaussian DP when the releases it
    already holds are Gaussian and there is at least one (exact for them), else the running
    figure's statements. A cap set with a filter keeps it; "renyi" gets its order (`cap_order`)."""
    if cap.filter == filters.RENYI:
        return f"{filters.RENYI}:{cap_order(cap):g}"
    if cap.filter is not None:
        return cap.filter
    keys = [] if state is None else [key for key, _ in _state_items(state)]
    if keys and all(key.startswith("gaussian:") for key in keys):
        return filters.GAUSSIAN
    return filters.RUNNING


def _state_items(state: dict) -> tuple:
    items = tuple(state["events"].items())
    if state["families"]:
        items += tuple((key, 1) for keys in state["families"].values() for key in keys)
    return items


_PURE_KINDS = ("pure", "laplace", "dlaplace", "sampled")


def _state_is_pure(state: dict) -> bool:
    keys = [*state["events"], *(key for keys in state["families"].values() for key in keys)]
    return all(key.split(":", 1)[0] in _PURE_KINDS for key in keys)
