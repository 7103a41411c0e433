"""The loss on each single variable as it stood after each checkpoint of an order of releases (`running_totals`): charts of the loss over time.

Invariant: row k is the total row of Tan's Table 1 of the first checkpoints[k] releases, exactly
(Tan Prop 3.4), whether the cells are read whole or a chunk of releases at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.lazy import lazy_module
from .charge_choice import Objective
from .exact_sums import SpendGrid, _GridBuilder
from .index_chunks import _CHUNK, rows_of
from .risk_table import RiskTable

np = lazy_module("numpy")  # imported on first use


class RunningTotals:
    """The running totals of a LedgerIndex (a mixin: its methods read the index's arrays and its cost rule)."""

    def running_totals(self, order: Sequence[int], checkpoints: Sequence[int],
                       objective: Objective | None = None) -> SpendGrid:
        """The loss on each single variable of the releases order[:c], for each c in `checkpoints`.

        Row k, column j of the result is the loss on {variables[j]} of the first
        checkpoints[k] releases of `order` (indices into `releases`): the total row of
        Table 1 as it stood after them (Tan Prop 3.4), for charts of the loss over time.
        Simple releases are summed between checkpoints, then cumulated; a family of
        members with at most one guarantee each costs the running componentwise maximum
        of its members' cells (docs/explanation/model.md#families) except on its key variables, which go, with
        other families and releases with a choice, through the exact path. The three paths fill
        one grid, in the checkpoints' positions.
        """
        objective = self.stated(objective)
        order = np.asarray(order, dtype=np.int64)
        checkpoints = np.asarray(checkpoints, dtype=np.int64)
        n_var = len(self.variables)
        grid = _GridBuilder(self._components, (len(checkpoints), n_var))
        if len(order) == 0 or len(checkpoints) == 0:
            return grid.done()
        position = np.full(len(self.releases), len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        cells = self._add_simple_rows(grid, order, checkpoints, position)
        grid.accumulate_rows()
        exact_families = self._add_family_maxima(grid, cells, checkpoints, position, len(order))
        if exact_families or self.ambiguous:
            self._set_exact_cells(grid, checkpoints, position, exact_families, objective)
        return grid.done()

    def _add_simple_rows(self, grid: _GridBuilder, order: np.ndarray, checkpoints: np.ndarray,
                         position: np.ndarray):
        """The simple releases' cells added to the grid row of the checkpoint each falls before
        (not yet cumulated). Returns Table 1's cells, indexed by release row (on a large index,
        the family members' only: `_MemberCells`)."""
        n_var = len(self.variables)
        member_rows = np.asarray(sorted({r for rows_ in self.members.values() for r in rows_}), dtype=np.int64)
        if len(self.releases) <= _CHUNK:
            cells = self.single_cells()
            ordered = cells[order].copy()
            ordered[~self.simple[order]] = self.ZERO_ID  # families and choices: below
            bounds = np.concatenate([[0], checkpoints])
            for k in range(len(checkpoints)):
                grid.add_row_ids(k, ordered[bounds[k]:max(bounds[k], bounds[k + 1])])
        else:
            # a large index: Table 1's cells a chunk of releases at a time (a million releases over 100
            # variables would be 800 MB, twice), each release added to the grid row of the checkpoint
            # it falls before (sums of integers: the same totals in any order); the members' cells kept
            segment = np.searchsorted(checkpoints, position, side="right")
            member_cells = np.zeros((len(member_rows), n_var), dtype=np.int64)
            for start in range(0, len(self.releases), _CHUNK):
                stop = min(start + _CHUNK, len(self.releases))
                part = rows_of(self, start, stop)
                chunk = part.single_cells()
                lo, hi = np.searchsorted(member_rows, [start, stop])
                member_cells[lo:hi] = chunk[member_rows[lo:hi] - start]
                chunk[~self.simple[start:stop]] = self.ZERO_ID
                where = segment[start:stop]
                for k in np.unique(where[where < len(checkpoints)]).tolist():
                    grid.add_row_ids(k, chunk[where == k])
            cells = _MemberCells(member_rows, member_cells)
        return cells

    def _add_family_maxima(self, grid: _GridBuilder, cells, checkpoints: np.ndarray, position: np.ndarray,
                           n_order: int) -> dict[str, np.ndarray]:
        """Each family of members with at most one guarantee each: the running componentwise maximum of
        its members' cells, but on its key variables. Returns family -> the variables it must see
        exactly (all of a mixed family's or one with a member of several guarantees; else its keys)."""
        n_var = len(self.variables)
        n_guarantees, _ = self._guarantee_spans()
        exact_families: dict[str, np.ndarray] = {}  # family -> the variables it must see exactly
        for fid, rows_ in self.members.items():
            family = self.families[fid]
            if fid in self.mixed_families or any(n_guarantees[r] > 1 for r in rows_):
                exact_families[fid] = self.reads[rows_].any(axis=0)
                continue
            keyed = np.zeros(n_var, dtype=bool)
            if family.partition is not None:
                keyed[[self.column[name] for name in family.partition if name in self.column]] = True
            members = sorted((position[r], r) for r in rows_ if position[r] < n_order)
            if members:
                at = np.asarray([m for m, _ in members])
                ids = cells[[r for _, r in members]]
                count = np.searchsorted(at, checkpoints, side="left")  # members before each checkpoint
                grid.add_running_max(ids, count, where=~keyed)
            if keyed.any():
                exact_families[fid] = keyed
        return exact_families

    def _set_exact_cells(self, grid: _GridBuilder, checkpoints: np.ndarray, position: np.ndarray,
                         exact_families: dict[str, np.ndarray], objective: Objective) -> None:
        """The cells the exact path decides (`exact_families`' variables, the releases with a choice),
        set at each checkpoint from the releases before it."""
        n_var = len(self.variables)
        memo: dict = {}
        for k, count in enumerate(checkpoints):
            families = {fid: [r for r in self.members[fid] if position[r] < count] for fid in exact_families}
            families = {fid: rows_ for fid, rows_ in families.items() if rows_}
            ambiguous = [i for i in self.ambiguous if position[i] < count]
            needed = np.zeros(n_var, dtype=bool)
            for fid in families:
                needed |= exact_families[fid]
            for i in ambiguous:
                needed |= self.reads[i]
            for j in np.flatnonzero(needed):
                touching = {fid: rows_ for fid, rows_ in families.items() if exact_families[fid][j]}
                releases = [i for i in ambiguous if self.reads[i, j]]
                grid.set(k, j, self._units_cost(frozenset({self.variables[j]}), grid.spend(k, j), touching,
                                                releases, objective, memo))

    def table_by_arrays(self, dataset: str, objective: Objective | None = None) -> RiskTable:
        """The same RiskTable as `table()`, with the total row from `running_totals` (families
        over arrays): what reports use on large ledgers with families."""
        n_rel, n_var = len(self.releases), len(self.variables)
        dataset_wide = self.cost_ids(range(n_var))
        totals = self.running_totals(range(n_rel), [n_rel], objective)
        return self._risk_table(dataset, self.single_cells(), dataset_wide,
                                (totals.spend(0, j) for j in range(n_var)), objective)


class _MemberCells:
    """Rows of Table 1 for family members only (`running_totals` on a large index): indexed by a
    list of release rows, as the whole cell matrix would be."""

    def __init__(self, rows: np.ndarray, cells: np.ndarray):
        self.rows, self.cells = rows, cells

    def __getitem__(self, rows) -> np.ndarray:
        return self.cells[np.searchsorted(self.rows, np.asarray(rows, dtype=np.int64))]
