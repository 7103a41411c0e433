"""Tan's Table 1 as data: the cost of each release on each single variable, the whole-dataset column and the composed total row; and one subset's loss.

Invariant: cells index into `values` (exact Spend values); the totals are exact compositions (Tan Prop 3.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..core.lazy import lazy_module
from ..core.records import Release
from .spend import ALLOWANCE, Spend

np = lazy_module("numpy")  # imported on first use


@dataclass(frozen=True)
class SubsetCost:
    """The loss on one subset and the releases that contribute to it."""

    subset: tuple[str, ...]
    spend: Spend
    releases: tuple[str, ...]  # ids of releases (or family members) charging a non-zero cost


@dataclass(frozen=True)
class RiskTable:
    """Tan's Table 1: the cost of each release on each single variable, with the
    whole-dataset column (U = V) and the composed total row.

    `cells[i, j]` and `dataset_wide[i]` index into `values`.
    """

    dataset: str
    variables: tuple[str, ...]
    releases: tuple[Release, ...]
    values: tuple[Spend, ...]
    cells: np.ndarray
    dataset_wide: np.ndarray
    total: tuple[Spend, ...]
    total_dataset_wide: Spend
    allowance: Fraction = ALLOWANCE  # the dataset's (Dataset.allowance): how its figures are stated

    def cell(self, row: int, column: int) -> Spend:
        return self.values[self.cells[row, column]]

    def row_dataset_wide(self, row: int) -> Spend:
        return self.values[self.dataset_wide[row]]
