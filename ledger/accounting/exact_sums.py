"""Exact sums of Spend values by id over arrays: per notion component, integer numerators over one denominator.

Invariant: sums are exact (int64 within a bound checked up front, Python integers past it); floats
are made only for charts (`SpendGrid.floats`, rounded up).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..core.lazy import lazy_module
from ..core.numbers import float_up
from .spend import Spend, UNBOUNDED

np = lazy_module("numpy")  # imported on first use


@dataclass(frozen=True)
class SpendGrid:
    """A 2-d array of losses, kept exact: per notion component, integer numerators over
    one denominator (as in `_ExactComponents`), a mask of unbounded cells, and the cells
    computed on the exact path (families, releases with a choice) as Spend values."""

    shape: tuple[int, int]
    unbounded: np.ndarray  # bool, shape
    components: tuple[tuple[str, int, np.ndarray], ...]  # (Spend field, denominator, numerators)
    exceptions: dict[tuple[int, int], Spend]

    def spend(self, i: int, j: int) -> Spend:
        found = self.exceptions.get((i, j))
        if found is not None:
            return found
        if self.unbounded[i, j]:
            return UNBOUNDED
        return Spend(**{field: Fraction(int(numerators[i, j]), denominator)
                        for field, denominator, numerators in self.components})

    def floats(self) -> dict[str, np.ndarray]:
        """Each Spend field as float64 arrays (for charts; printed figures use `spend`)."""
        result = {field: np.zeros(self.shape) for field in _ExactComponents.FIELDS}
        for field, denominator, numerators in self.components:
            if numerators.dtype == object or denominator > 2**60:  # past floats' range: each exactly, rounded up
                result[field] = np.vectorize(lambda n, d=denominator: float_up(Fraction(int(n), d)),
                                             otypes=[np.float64])(numerators)
            else:
                result[field] = numerators.astype(np.float64) / denominator
        for (i, j), spend in self.exceptions.items():
            for field in _ExactComponents.FIELDS:
                result[field][i, j] = 0.0 if spend.unbounded else float_up(getattr(spend, field))
        return result


class _GridBuilder:
    """Accumulates value ids into a SpendGrid, exactly (int64, or Python ints past 2^62)."""

    def __init__(self, components: _ExactComponents, shape: tuple[int, int]):
        self.source = components
        self.shape = shape
        self.unbounded = np.zeros(shape, dtype=bool)
        self.sums = {field: np.zeros(shape, dtype=numerators.dtype) for field, _, numerators in components.components}
        self.exceptions: dict[tuple[int, int], Spend] = {}

    def add_count(self, value: int, count: np.ndarray) -> None:
        """`count` releases of value id `value` in each cell."""
        if value == self.source.unbounded_id:
            self.unbounded |= count > 0
            return
        for field, _, numerators in self.source.components:
            if numerators[value]:
                self.sums[field] = self.sums[field] + numerators[value] * count.astype(numerators.dtype)

    def add_ids(self, ids: np.ndarray) -> None:
        """One release: its value id in each cell."""
        self.unbounded |= ids == self.source.unbounded_id
        for field, _, numerators in self.source.components:
            self.sums[field] = self.sums[field] + numerators[ids]

    def max_ids(self, ids: np.ndarray) -> None:
        """The componentwise maximum with one release's value ids (a family: docs/explanation/model.md#families)."""
        self.unbounded |= ids == self.source.unbounded_id
        for field, _, numerators in self.source.components:
            self.sums[field] = np.maximum(self.sums[field], numerators[ids])

    def add_grid(self, other: _GridBuilder, where: np.ndarray) -> None:
        """Compose another grid of losses into this one, in the cells `where` is true."""
        self.unbounded |= other.unbounded & where
        for field in self.sums:
            self.sums[field] = self.sums[field] + np.where(where, other.sums[field], 0)

    def add_running_max(self, ids: np.ndarray, counts: np.ndarray, where: np.ndarray) -> None:
        """Row k gets, in the columns `where` is true, the componentwise maximum of the
        first counts[k] rows of `ids` (a family's members in recording order)."""
        rows = np.flatnonzero(counts > 0)
        last = counts[rows] - 1
        unbounded = np.logical_or.accumulate(ids == self.source.unbounded_id, axis=0)
        self.unbounded[rows] |= unbounded[last] & where
        for field, _, numerators in self.source.components:
            running = np.maximum.accumulate(numerators[ids], axis=0)
            self.sums[field][rows] += np.where(where, running[last], 0)

    def add_row_ids(self, row: int, ids: np.ndarray) -> None:
        """Releases (rows of `ids`, one column per grid column) added to one grid row."""
        self.unbounded[row] |= (ids == self.source.unbounded_id).any(axis=0)
        for field, _, numerators in self.source.components:
            self.sums[field][row] += numerators[ids].sum(axis=0)

    def accumulate_rows(self) -> None:
        self.unbounded = np.logical_or.accumulate(self.unbounded, axis=0)
        for field in self.sums:
            self.sums[field] = np.cumsum(self.sums[field], axis=0)

    def spend(self, i: int, j: int) -> Spend:
        found = self.exceptions.get((int(i), int(j)))
        if found is not None:
            return found
        if self.unbounded[i, j]:
            return UNBOUNDED
        return Spend(**{field: Fraction(int(self.sums[field][i, j]), denominator)
                        for field, denominator, _ in self.source.components})

    def set(self, i: int, j: int, spend: Spend) -> None:
        self.exceptions[(int(i), int(j))] = spend

    def done(self) -> SpendGrid:
        unbounded = self.unbounded.copy()
        for (i, j), spend in self.exceptions.items():
            unbounded[i, j] = spend.unbounded
        components = tuple((field, denominator, self.sums[field])
                           for field, denominator, _ in self.source.components)
        return SpendGrid(self.shape, unbounded, components, dict(self.exceptions))


class _ExactComponents:
    """Sums Spend values by id, exactly, with integer arithmetic.

    Each notion component (pure, approx epsilon, approx delta, rho) of every
    distinct value is scaled by the lcm of that component's denominators. When
    the scaled numerators could overflow int64 over `n_rows` releases, Python
    integers are used instead (slower, still exact).
    """

    FIELDS = ("pure", "approx_epsilon", "approx_delta", "rho", "pure_rho")

    def __init__(self, values: Sequence[Spend], n_rows: int):
        self.unbounded_id = next(k for k, v in enumerate(values) if v.unbounded)
        self.components: list[tuple[str, int, np.ndarray]] = []
        for field in self.FIELDS:
            fractions = [Fraction(0) if v.unbounded else getattr(v, field) for v in values]
            if not any(fractions):
                continue
            denominator = math.lcm(*(f.denominator for f in fractions))
            numerators = [int(f * denominator) for f in fractions]
            limit = max(abs(n) for n in numerators) * max(n_rows, 1)
            dtype = np.int64 if limit < 2**62 else object
            self.components.append((field, denominator, np.asarray(numerators, dtype=dtype)))

    def total(self, ids: np.ndarray) -> Spend:
        if np.any(ids == self.unbounded_id):
            return UNBOUNDED
        parts = {field: Fraction(int(numerators[ids].sum()), denominator)
                 for field, denominator, numerators in self.components}
        return Spend(**parts)

    def column_totals(self, ids: np.ndarray) -> list[Spend]:
        """Per column, the exact composition of its ids: how many of each value id the column
        holds (one bincount), times each value's integer numerators (a small exact product:
        int64 within the bound checked at construction, Python integers past it)."""
        n_rows, n_cols = ids.shape
        return self.entry_totals(ids.ravel(), np.tile(np.arange(n_cols), n_rows), n_cols)

    def entry_totals(self, ids: np.ndarray, cols: np.ndarray, n_cols: int) -> list[Spend]:
        """`column_totals` from (value id, column) entries: the cells not listed cost 0 (the
        zero value adds nothing), so a table's read entries are enough, without its n x |V| cells."""
        n_values = len(self.components[0][2]) if self.components else self.unbounded_id + 1
        n_values = max(n_values, int(ids.max()) + 1 if ids.size else 0)
        counts = np.bincount(np.asarray(ids, dtype=np.int64) * n_cols + cols, minlength=n_values * n_cols
                             ).reshape(n_values, n_cols)
        unbounded = counts[self.unbounded_id] > 0 if self.unbounded_id < n_values else np.zeros(n_cols, dtype=bool)
        sums = {}
        for field, denominator, numerators in self.components:
            if numerators.dtype == object:
                column = [sum(int(numerators[v]) * int(counts[v, j]) for v in range(len(numerators)) if counts[v, j])
                          for j in range(n_cols)]
            else:
                column = numerators @ counts[:len(numerators)]
            sums[field] = (denominator, column)
        totals = []
        for j in range(n_cols):
            if unbounded[j]:
                totals.append(UNBOUNDED)
                continue
            totals.append(Spend(**{field: Fraction(int(column[j]), denominator)
                                   for field, (denominator, column) in sums.items()}))
        return totals
