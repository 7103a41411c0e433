"""Rényi curves: each event's Rényi divergence on a fixed grid of orders, their sums, and the conversion to (epsilon, delta).

The grid is dp_accounting's default orders; the Rényi filter's orders (spend.FILTER_ORDERS) are
fixed in this code, so before any cap is set. Curves: randomized response's for pure guarantees
(Mironov 2017, Prop 5), Laplace (Mironov 2017, Prop 6), a * rho for zCDP and the Gaussian,
subsampling without replacement (Wang, Balle and Kasiviswanathan 2019, Thm 9). Conversion:
Canonne, Kamath and Steinke (2020), Prop 12.

Invariants: every curve and figure is rounded up (`_MARGIN`, `_up`), never down; a sum of curves
runs in one canonical order (`summed_curve`), so every path gives the same bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

from ..core.lazy import lazy_module
from ..core.numbers import INF
from .dp_events import Event
from .spend import FILTER_ORDERS, ORDER_SHARE

np = lazy_module("numpy")  # imported on first use


# The fixed grid of Rényi orders (dp_accounting's default grid, which is dense where
# the Gaussian and Laplace optima lie, plus very large orders for tiny deltas).
# (built on first use, with numpy: a `check` against a rho or pure cap never needs them)
def _grids():
    if "_GRIDS" not in globals():
        orders = np.asarray([1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64))
                            + [64, 80, 96, 128, 192, 256, 384, 512, 1024], dtype=np.float64)
        # The orders a Rényi filter uses, fixed in this code (so fixed before any cap is set):
        # few, since the delta is split over them.
        filter_orders = np.asarray(FILTER_ORDERS, dtype=np.float64)  # (spend.py: with their shares of delta)
        index = np.asarray([int(np.flatnonzero(np.isclose(orders, a))[0]) for a in filter_orders])
        # the filter's per-order constants of rdp_filter_epsilon, evaluated once: the same arrays
        # (same numpy functions on the same orders), so the same figures to the bit
        constants = (np.log1p(-1 / filter_orders), np.log(filter_orders), filter_orders - 1)
        globals()["_GRIDS"] = {"ORDERS": orders, "FILTER_ORDERS": filter_orders, "_FILTER_INDEX": index,
                               "_FILTER_CONSTANTS": constants}
    return globals()["_GRIDS"]


def __getattr__(name: str):
    """ORDERS, FILTER_ORDERS and _FILTER_INDEX, built on first use."""
    if name in ("ORDERS", "FILTER_ORDERS", "_FILTER_INDEX"):
        return _grids()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_MARGIN = 1e-9  # relative allowance for float error in summed curves and conversions (rounded up)


def pure_curve(epsilon: float, orders: np.ndarray | None = None) -> np.ndarray:
    """Randomized response's Rényi curve: the largest of any epsilon-DP mechanism.

    D_a = log((e^(a eps) + e^((1 - a) eps)) / (1 + e^eps)) / (a - 1) (Mironov 2017,
    Prop 5 / Table II, randomized response); every epsilon-DP mechanism is a
    post-processing of randomized response (Kairouz, Oh and Viswanath 2015, §3), so
    by data processing its curve is below. Also bounded by eps (D_infinity) and by
    a eps^2 / 2 (Bun and Steinke 2016, Prop 3.3); the smallest of the three is kept."""
    if orders is None:
        orders = _grids()["ORDERS"]
    eps = float(epsilon)
    if eps == 0:
        return np.zeros_like(orders)
    a = orders
    value = (np.logaddexp(a * eps, (1 - a) * eps) - np.logaddexp(0.0, eps)) / (a - 1)
    value = value * (1 + _MARGIN) + 1e-15 / (a - 1)
    return np.minimum(np.minimum(value, eps), a * eps * eps / 2)


def laplace_curve(multiplier: float, orders: np.ndarray | None = None) -> np.ndarray:
    """The Laplace mechanism's exact Rényi curve, eps = 1 / multiplier (Mironov 2017, Prop 6):
    D_a = eps + log(1 + (a - 1)(e^((1 - 2a) eps) - 1) / (2a - 1)) / (a - 1)."""
    if orders is None:
        orders = _grids()["ORDERS"]
    eps = 1 / float(multiplier)
    a = orders
    value = eps + np.log1p((a - 1) * np.expm1((1 - 2 * a) * eps) / (2 * a - 1)) / (a - 1)
    value = value * (1 + _MARGIN) + 1e-15 / (a - 1)
    return np.minimum(value, pure_curve(eps, orders))


@lru_cache(maxsize=4096)
def event_curve(event: Event) -> np.ndarray:
    """The event's Rényi curve on ORDERS (read-only); approx events have none (zeros:
    they are charged by basic composition beside the curve)."""
    if event.kind == "pure":
        curve = pure_curve(float(event.a))
    elif event.kind == "zcdp":
        curve = _grids()["ORDERS"] * float(event.a) * (1 + _MARGIN)
    elif event.kind == "gaussian":  # rho = 1 / (2 m^2): the Gaussian's curve is exactly a * rho
        curve = _grids()["ORDERS"] * (1 / (2 * float(event.a) ** 2)) * (1 + _MARGIN)
    elif event.kind == "laplace":
        if event.a > Fraction(10**300):  # (a multiplier past the float range: epsilon below it, kept positive)
            curve = pure_curve(max(float(1 / event.a), 5e-324))
        else:
            curve = laplace_curve(float(event.a))
    elif event.kind == "dlaplace":
        curve = pure_curve(float(event.a) * int(event.b))
    elif event.kind == "sampled":
        curve = np.minimum(pure_curve(float(event.a)), sampled_curve(float(event.c), float(event.b)))
    else:
        curve = np.zeros_like(_grids()["ORDERS"])
    curve.setflags(write=False)
    return curve


def subsampled_wor_curve(base: np.ndarray, eps_inf: float, beta: float, orders: Sequence[int]) -> np.ndarray:
    """Wang, Balle and Kasiviswanathan (2019, AISTATS), Theorem 9: sampling without replacement a
    fraction beta of the records, replace-one neighbours, a base mechanism with Rényi curve
    eps(j) at the integer orders j = 2..max_order (base[j - 2]) and eps(inf) = eps_inf. At every
    integer order a >= 2 the subsampled mechanism has Rényi divergence at most

        log(1 + beta^2 C(a, 2) min{4 (e^eps(2) - 1), e^eps(2) min{2, (e^eps(inf) - 1)^2}}
              + sum_{j=3..a} beta^j C(a, j) e^((j - 1) eps(j)) min{2, (e^eps(inf) - 1)^j}) / (a - 1).

    Returns the bound at the integer `orders` (each >= 2, base covering 2..max(orders)),
    evaluated in log space and rounded up by _MARGIN.
    dp_accounting's `_compute_rdp_sample_wor_gaussian` is this theorem for a Gaussian base (with
    the forward-difference strengthening of its Theorem 27 for the j >= 3 terms below order 256)."""
    from scipy.special import gammaln

    orders = np.asarray(orders, dtype=np.int64)
    j = np.arange(2, int(orders.max()) + 1)  # the terms' index
    if beta >= 1:
        return np.asarray(base, dtype=np.float64)[orders - 2] * (1 + _MARGIN)
    log_beta = math.log(beta)
    log_cap = math.log(2.0) if eps_inf == math.inf else None
    # log min{2, (e^eps_inf - 1)^j}
    if log_cap is None:
        log_em1 = math.log(math.expm1(eps_inf)) if eps_inf < 700 else eps_inf
        log_min = np.minimum(math.log(2.0), j * log_em1)
    else:
        log_min = np.full(len(j), log_cap)
    eps2 = float(base[0])
    log_first = min(math.log(4.0) + math.log(math.expm1(eps2)), eps2 + float(log_min[0]))  # the j = 2 term
    log_terms = (j - 1) * np.asarray(base[: len(j)], dtype=np.float64) + log_min + j * log_beta
    log_terms[0] = 2 * log_beta + log_first
    out = np.empty(len(orders))
    for k, a in enumerate(orders):
        i = np.arange(2, a + 1)
        log_comb = gammaln(a + 1) - gammaln(i + 1) - gammaln(a - i + 1)
        total = np.logaddexp.reduce(np.concatenate(([0.0], log_comb + log_terms[: a - 1])))
        out[k] = total / (a - 1)
    return out * (1 + _MARGIN) + 1e-15


def sampled_curve(base_epsilon: float, beta: float, orders: np.ndarray | None = None) -> np.ndarray:
    """A subsampled epsilon-DP release's Rényi curve on the grid: Wang, Balle and Kasiviswanathan
    2019, Theorem 9 with randomized response's curve at the base epsilon (valid for any
    epsilon-DP base mechanism, `pure_curve`) and eps(inf) = the base epsilon, at integer orders;
    a fractional order takes the next integer order's value (Rényi divergence does not fall
    with the order: van Erven and Harremoës 2014, Thm 3). `event_curve` keeps the smaller of
    this and randomized response's curve at the amplified epsilon, order by order."""
    if orders is None:
        orders = _grids()["ORDERS"]
    needed = np.ceil(orders).astype(np.int64)
    integer = np.arange(2, int(needed.max()) + 1, dtype=np.float64)
    distinct = np.unique(needed)
    bound = subsampled_wor_curve(pure_curve(base_epsilon, integer), base_epsilon, beta, distinct)
    return bound[np.searchsorted(distinct, needed)]


def event_rho(event: Event) -> float:
    """A rho with curve <= a * rho at every order (for the continuous-order zCDP bound)."""
    if event.kind in ("zcdp",):
        return float(event.a)
    if event.kind == "gaussian":
        return 1 / (2 * float(event.a) ** 2)
    eps = event.pure_epsilon
    return 0.0 if eps is None else eps * eps / 2  # Bun and Steinke 2016, Prop 3.3


def rdp_epsilon(curve: np.ndarray, delta: float, orders: np.ndarray | None = None) -> tuple[float, float]:
    """(epsilon, order): the CKS 2020 Prop 12 conversion at every order, the smallest, rounded up.

    epsilon = D_a + log(1 - 1/a) - (log delta + log a) / (a - 1)."""
    if orders is None:
        orders = _grids()["ORDERS"]
    if delta <= 0:
        return INF, math.nan
    if not np.any(curve):
        return 0.0, math.nan
    a = orders
    eps = curve + np.log1p(-1 / a) - (math.log(delta) + np.log(a)) / (a - 1)
    k = int(np.argmin(eps))
    return _up(max(float(eps[k]), 0.0)), float(a[k])


def _up(value: float) -> float:
    if math.isinf(value):
        return value
    return math.nextafter(value * (1 + _MARGIN), math.inf)


def rdp_filter_epsilon(curve: np.ndarray, delta: float) -> float:
    """The Rényi filter's epsilon: at each of the fixed orders the CKS conversion at its share of
    delta (ORDER_SHARE, spend.py), the smallest (module docstring)."""
    if delta <= 0:
        return INF
    grids = _grids()
    sub = curve[grids["_FILTER_INDEX"]]
    if not sub.any():
        return 0.0
    # a = FILTER_ORDERS: eps = sub + log1p(-1/a) - (log(delta ORDER_SHARE) + log(a)) / (a - 1)
    log1p_inverse, log_order, order_less_one = grids["_FILTER_CONSTANTS"]
    eps = sub + log1p_inverse - (math.log(delta * ORDER_SHARE) + log_order) / order_less_one
    return _up(max(float(eps.min()), 0.0))


@lru_cache(maxsize=65536)
def _key_summary(key: str) -> tuple:
    """Per event key: (its curve or None for an approximate event, its rho bound, its
    approximate epsilon and delta), so a cap's state is summed without building Events."""
    event = Event.from_key(key)
    if event.kind == "approx":
        return None, 0.0, event.a, event.b
    return event_curve(event), event_rho(event), 0, 0


def summed_curve(items) -> np.ndarray:
    """The sum of count x curve over (event key, count) items, in one canonical order (counts merged
    per key, keys sorted, added one after another): the same bits whichever path lists the events
    (a composition, a cap's running state), so `subset` and `cap list` print the same last digit."""
    counts: dict[str, int] = {}
    for key, count in items:
        counts[key] = counts.get(key, 0) + count
    if not counts:
        return np.zeros_like(_grids()["ORDERS"])
    keys = tuple(sorted(counts))
    return np.asarray([counts[key] for key in keys], dtype=np.float64) @ _curve_matrix(keys)


@lru_cache(maxsize=4096)
def _state_sums(items: tuple) -> tuple:
    """(summed curve, summed rho bound, approximate epsilon, approximate delta) of a state's
    (event key, count) items: a decoded state, cached by its content."""
    plain = []
    rho, approx_eps, approx_delta = 0.0, Fraction(0), Fraction(0)
    for key, count in items:
        curve, r, a, b = _key_summary(key)
        if curve is None:
            approx_eps += count * a
            approx_delta += count * b
        else:
            plain.append((key, count))
            rho += count * r
    total = summed_curve(plain)  # (the composition's bits: Composition.curve)
    total.setflags(write=False)
    return total, rho, approx_eps, approx_delta


@lru_cache(maxsize=256)
def _curve_matrix(keys: tuple[str, ...]) -> np.ndarray:
    """The curves of these event keys stacked, one row each (`summed_curve`): a running state's keys
    change only when a new kind of event joins it, its counts at every record; the same matrix
    as stacking them again, so the same sums."""
    matrix = np.asarray([_key_summary(key)[0] for key in keys])
    matrix.setflags(write=False)
    return matrix
