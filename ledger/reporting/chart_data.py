"""What the report's two charts are drawn from: the loss on every pair of variables
(`Pairs`, its colours by `epsilon_floats`) and cumulative epsilon per variable over time
(`Timeline`).

Both report.py (which computes them) and charts.py (which draws them) import this
module, so neither imports the other. report.py re-exports the three classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..accounting.spend import ALLOWANCE, FILTER_ORDERS, ORDER_SHARE, filter_delta
from ..core.numbers import Number, is_infinite
from ..core.lazy import lazy_module

if TYPE_CHECKING:
    from ..accounting.engine import SpendGrid

np = lazy_module("numpy")  # imported on first use (issue 13)


@dataclass(frozen=True)
class PairFigure:
    a: str
    b: str
    epsilon: Number
    why: str | None = None  # why it is ∞, when it is (reasons.unbounded_reason: the words `subset` prints)


@dataclass(frozen=True)
class Pairs:
    """The loss on every pair of variables (LedgerIndex.pair_matrix).

    matrix: with at most PAIRS_ANNOTATED variables, every figure, matrix[i][j] the loss
    on {variables[i], variables[j]} (the diagonal: on the single variable); else None.
    colour: epsilon per cell as floats (∞ as inf), for the heat map's colours only.
    svg: the heat map (charts.heat_map_svg), "" when charts are not drawn.
    """

    variables: tuple[str, ...]
    count: int  # pairs
    unprotected: int  # pairs whose loss is ∞
    highest: tuple[PairFigure, ...]
    matrix: tuple[tuple[Number, ...], ...] | None
    colour: np.ndarray
    svg: str
    protected_only: bool = False  # `highest` ranks pairs of protected variables only (DESIGN 2.11)
    public: tuple[str, ...] = ()  # variables classified public (their ∞ is expected)
    reasons: tuple[tuple[str, ...], ...] | None = None  # `why`, where a keyed family may be the cause

    @property
    def why(self) -> tuple[tuple[str, ...], ...] | None:
        """Per cell of `matrix`, why it is ∞ when it is: `reasons` when given (report.pair_figures,
        with a keyed family: reasons.keyed_reason), else by classification (reasons.subset_reason):
        neutral where a public variable is released exactly and no protected member is ∞ alone;
        else an alarm."""
        if self.matrix is None:
            return None
        if self.reasons is not None:
            return self.reasons
        from .reasons import subset_reason

        names = self.variables
        infinite = {names[i] for i in range(len(names)) if is_infinite(self.matrix[i][i])}
        return tuple(tuple(subset_reason({a, b}, self.public, infinite) for b in names) for a in names)


@dataclass(frozen=True)
class Timeline:
    """Cumulative epsilon per variable over time (LedgerIndex.running_totals).

    x: the checkpoints' times by publication date (history.charged_from), or release
    ordinals when every release counts from one instant (`axis` "time" or "order"). y[k, j]: epsilon on variable
    j after checkpoint k, floats for drawing (∞ as inf). `envelope`: the checkpoints
    are a sample of the recording times, so each value is drawn from the previous
    checkpoint on (an upper envelope, never below the loss it stands for).
    """

    axis: str
    x: tuple[Any, ...]
    labels: tuple[str, ...]  # with axis "order": the release at each point
    variables: tuple[str, ...]
    y: np.ndarray
    envelope: bool
    highlighted: tuple[str, ...]
    end: datetime  # the report's time: the last level is drawn on to it
    svg: str
    caps: tuple[tuple[str, float], ...] = ()  # (cap name, its epsilon limit, rounded down): drawn as lines
    public: tuple[str, ...] = ()  # variables classified public: their ∞ is drawn neutrally


def epsilon_floats(grid: SpendGrid, delta: Fraction, allowance: Fraction = ALLOWANCE) -> np.ndarray:
    """`Spend.epsilon(delta, allowance)` for every cell of a grid, as floats, for drawing.

    The same rules as accounting.Spend.epsilon (pure: the sum; approximate deltas
    taken from delta, ∞ past it; with rho, the Rényi statements at the fixed orders,
    spend.order_epsilon), over numpy arrays: a heat
    map of 19,900 pairs needs 19,900 conversions. Each value is a valid upper bound
    (any Renyi order gives one, DESIGN 2.4); printed figures come from Spend.epsilon.
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
