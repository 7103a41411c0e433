"""What the report's two charts are drawn from: the loss on every pair of variables
(`Pairs`, its colours by accounting.grid_figures.epsilon_floats) and cumulative epsilon per variable over time
(`Timeline`).

Both report.py (which computes them) and charts.py (which draws them) import this
module, so neither imports the other. report.py re-exports the three classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..core.numbers import Number, is_infinite
from ..core.lazy import lazy_module

if TYPE_CHECKING:
    pass

np = lazy_module("numpy")  # imported on first use


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
    protected_only: bool = False  # `highest` ranks pairs of protected variables only (docs/explanation/model.md#public-and-protected-variables)
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
        from ..operations.reasons import subset_reason

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


