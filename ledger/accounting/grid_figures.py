"""Spend.epsilon over the arrays of a SpendGrid: one conversion for every cell of a heat map.

The same rules as `spend.Spend.epsilon` (pure: the sum; approximate deltas drawn from the
allowance, ∞ past it; with rho, the Rényi statements at the fixed orders, CKS 2020 Prop 12),
vectorised: a heat map of 19,900 pairs needs 19,900 conversions. Each value is a valid upper
bound, rounded up; printed figures come from `Spend.epsilon` itself.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .exact_sums import SpendGrid
from .spend import ALLOWANCE, FILTER_ORDERS, ORDER_SHARE, filter_delta


def epsilon_floats(grid: SpendGrid, delta: Fraction, allowance: Fraction = ALLOWANCE) -> np.ndarray:
    """`Spend.epsilon(delta, allowance)` for every cell of a grid, as floats, for drawing.

    The same rules as accounting.Spend.epsilon (pure: the sum; approximate deltas
    taken from delta, ∞ past it; with rho, the Rényi statements at the fixed orders,
    spend.order_epsilon), over numpy arrays: a heat
    map of 19,900 pairs needs 19,900 conversions. Each value is a valid upper bound
    (any Rényi order gives one); printed figures come from Spend.epsilon.
    """
    f = grid.floats()
    pure, approx_eps, approx_delta, rho, pure_rho = (f[k] for k in ("pure", "approx_epsilon", "approx_delta",
                                                                    "rho", "pure_rho"))
    result = pure.copy()
    within = approx_delta <= float(allowance) * float(delta)  # (spend.within_allowance over arrays)
    remaining = np.where(within, filter_delta(delta, allowance=allowance), 0.0)
    approx_only = (rho == 0) & ((approx_eps != 0) | (approx_delta != 0))
    result[approx_only] = np.where(within[approx_only], (pure + approx_eps)[approx_only], np.inf)
    with_rho = rho != 0
    if with_rho.any():
        rem = remaining[with_rho]
        ok = rem > 0
        safe = np.where(ok, rem, 0.5)
        beside = (approx_eps[with_rho] != 0) | (approx_delta[with_rho] != 0)
        # spend.order_epsilon over arrays: at each fixed order min(pure, a * pure_rho) + a * rho, CKS Prop 12
        a = np.asarray(FILTER_ORDERS, dtype=np.float64)
        curve = np.minimum(pure[with_rho][:, None], a * pure_rho[with_rho][:, None]) + a * rho[with_rho][:, None]
        orders = _up(np.maximum((curve + np.log1p(-1 / a) - (np.log(safe * ORDER_SHARE)[:, None] + np.log(a))
                                 / (a - 1)).min(axis=1), 0.0))
        value = np.where(beside, _up(approx_eps[with_rho] + orders), orders)
        result[with_rho] = np.where(ok, value, np.inf)
    result[grid.unbounded] = np.inf
    return result


def _up(values: np.ndarray) -> np.ndarray:
    """Nudge float bounds up past rounding error (accounting._up, over arrays)."""
    return np.nextafter(values * (1 + 1e-12), np.inf)
