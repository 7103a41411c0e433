"""The worst pair: the pair of variables whose figure `pairs` shows is the largest, found without
making every pair's figure.

`pairs` makes each pair's figures exactly (Spend sums as Fractions, a Figure per accountant) and
shows one; the worst is the pair of the largest float it prints (`safe_float`), the first in
`pairs` order on a tie. Here every pair gets, over arrays, an upper bound of that float; the pairs
are taken by decreasing bound, each one's figures made exactly as `pairs` makes them
(`every_pair.pair_figure`, the shown one chosen as `pairs` chooses), and the search stops at the
first bound below the largest figure made (or equal to it and later in `pairs` order): no pair
left can pass it, so the answer is the full scan's, pair and figure.

The bounds, each from the pair's own sums (`LedgerIndex.pair_matrix`, `every_pair.pair_rdp`):
- rdp: the value of the pair's rdp figure is already a float over arrays (`PairRdp.epsilon`,
  the value `pair_figure` states; ∞ where the pair is unprotected).
- basic: `Spend.epsilon` of the pair's exact sums, evaluated over arrays with every sum rounded
  up. Within each case of `Spend.epsilon` (pure; approximate; with rho), decided here by the same
  zero tests on the same sums, the figure is non-decreasing in every sum: a pure or approximate
  total is the sum of the epsilons (basic composition, Tan Prop 3.4; Dwork and Roth 2014,
  Thm 3.16), ∞ once the approximate deltas pass the allowance; a total with rho is the Rényi
  filter's smallest statement over fixed orders (Feldman and Zrnic 2021, Thm 4.3), at each order
  min(pure, a pure_rho) + a rho plus constants of the order and delta (Bun and Steinke 2016,
  Prop 3.3; Canonne, Kamath and Steinke 2020, Prop 12), a minimum of non-decreasing functions.
  Rounding is monotone, so the same operations on larger inputs give a larger float.
- shown (`figure_validity.best`, the smallest valid figure): either the basic or the rdp figure;
  never above the basic one, and above the rdp one only when best keeps basic within TIE or, pure,
  within PURE_PREFERENCE of it: never above rdp / (1 - PURE_PREFERENCE).
- pld: information only, one PLD composition per pair; it has no bound here, and its worst pair
  is found by the full scan (`pairs --accountant pld`).
A cell the arrays do not state (`SpendGrid.exceptions`, `PairRdp.slow`: composed pair by pair)
is bounded by ∞, its figures made first. Every bound is raised by BOUND_MARGIN, far past the few
roundings of a sum made a float.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from fractions import Fraction

from ..core.lazy import lazy_module
from ..core.numbers import float_down, safe_float
from .every_pair import PairRdp, pair_figure, pair_rdp
from .exact_sums import SpendGrid
from .figure_validity import PURE_PREFERENCE, Figure
from .spend import _ORDER_CONSTANTS, ORDER_SHARE, filter_delta

np = lazy_module("numpy")  # imported on first use

BOUND_MARGIN = 1e-9  # relative: each bound raised by this (a float sum is off by a few 2^-53 at most)

BOUNDED = ("basic", "rdp", None)  # the accountants whose pairs have bounds here (None: the figure shown)

Choose = Callable[[Mapping[str, Figure], "str | None"], Figure]


def worst_pair(index, delta: Fraction, accountant: str | None, choose: Choose, grid: SpendGrid | None = None
               ) -> tuple[int, int, Figure] | None:
    """(i, j, the figure shown) of the pair {i, j} (i < j, column indices) whose shown figure
    (`choose(pair_figure(...), accountant)`, as `pairs`) is the largest float, the first in
    `pairs` order (by i, then j) on a tie; None with fewer than two variables. The figures of
    the pairs whose bound passes the worst so far only (module docstring); `accountant` must be
    one of BOUNDED."""
    from .charge_choice import at_delta

    if accountant not in BOUNDED:
        raise ValueError(f"the worst pair has bounds for {BOUNDED} only. Found {accountant!r}.")
    n = len(index.variables)
    if n < 2:
        return None
    if grid is None:
        grid = index.pair_matrix(at_delta(delta))
    rdp = pair_rdp(index, delta, grid, pld_limit=0)  # (as `pairs`: no PLD, information only)
    bound = pair_bounds(index, delta, grid, rdp, accountant)
    rows, cols = np.triu_indices(n, 1)
    upper = bound[rows, cols]
    order = np.lexsort((np.arange(len(upper)), -upper))  # by decreasing bound, then `pairs` order
    found: tuple[int, int, Figure] | None = None
    largest, first = -math.inf, -1
    for k in order.tolist():
        if upper[k] < largest or (upper[k] == largest and k > first):
            break  # (every bound left is below, or equal and later: none can pass the worst)
        i, j = int(rows[k]), int(cols[k])
        shown = choose(pair_figure(index, delta, grid, rdp, i, j), accountant)
        value = safe_float(shown.epsilon)
        if found is None or value > largest or (value == largest and k < first):
            found, largest, first = (i, j, shown), value, k
    return found


def pair_bounds(index, delta: Fraction, grid: SpendGrid, rdp: PairRdp, accountant: str | None) -> np.ndarray:
    """Per pair {i, j} (n x n, the upper triangle read), a float at or above the one `pairs` prints
    for it under `accountant` (module docstring)."""
    rdp_bound = np.asarray(rdp.epsilon, dtype=np.float64)
    if accountant == "rdp":
        bound = rdp_bound.copy()
    else:
        bound = basic_bounds(grid, delta, index.allowance)
        if accountant is None:
            bound = np.minimum(bound, rdp_bound / (1 - PURE_PREFERENCE))
    bound = np.nextafter(bound * (1 + BOUND_MARGIN), np.inf)
    bound[np.asarray(grid.unbounded, dtype=bool)] = np.inf
    for i, j in [*grid.exceptions, *rdp.slow]:
        bound[i, j] = bound[j, i] = np.inf
    return bound


def basic_bounds(grid: SpendGrid, delta: Fraction, allowance: Fraction) -> np.ndarray:
    """`Spend.epsilon(delta, allowance)` of every cell's sums, evaluated over arrays at the sums
    rounded up: at or above the exact figure (module docstring); ∞ wherever the case is not
    certain (approximate deltas at the allowance's edge)."""
    sums = grid.floats()  # (each nearest or rounded up: raised by BOUND_MARGIN below)
    up = {name: values * (1 + BOUND_MARGIN) for name, values in sums.items()}
    pure, approx_epsilon, rho = up["pure"], up["approx_epsilon"], up["rho"]
    # a pure part without its zCDP form is one release's: epsilon^2 / 2 (Spend.__post_init__)
    pure_rho = np.where((sums["pure_rho"] == 0) & (sums["pure"] > 0), pure * pure / 2 * (1 + BOUND_MARGIN),
                        up["pure_rho"])
    has_approx = (sums["approx_epsilon"] > 0) | (sums["approx_delta"] > 0)
    has_rho = sums["rho"] > 0
    within = up["approx_delta"] <= float_down(allowance * delta)  # (certainly within; else ∞, a bound)
    bound = np.where(has_approx | has_rho, pure + approx_epsilon, pure)
    remaining = filter_delta(delta, allowance=allowance) * ORDER_SHARE
    if has_rho.any():
        orders = _order_bounds(pure, pure_rho, rho, remaining)
        with_approx = _nudged(approx_epsilon + orders)
        bound = np.where(has_rho, np.where(sums["approx_epsilon"] > 0, with_approx, orders), bound)
    return np.where((has_approx | has_rho) & ~within, np.inf, bound)


def _order_bounds(pure: np.ndarray, pure_rho: np.ndarray, rho: np.ndarray, delta: float) -> np.ndarray:
    """`spend.order_epsilon` over arrays: the same operations in the same order, each order's
    statement at `delta` (its share), nudged up as it is."""
    if delta <= 0:
        return np.full(pure.shape, np.inf)
    log_delta = math.log(delta)
    best = np.full(pure.shape, np.inf)
    for a, log1p_inverse, log_a, a_less_one in _ORDER_CONSTANTS:
        best = np.minimum(best, np.minimum(pure, a * pure_rho) + a * rho + log1p_inverse
                          - (log_delta + log_a) / a_less_one)
    return _nudged(np.maximum(best, 0.0))


def _nudged(values: np.ndarray) -> np.ndarray:
    """`spend._up` over arrays."""
    return np.nextafter(values * (1 + 1e-12), np.inf)
