"""Table 1 of a large LedgerIndex in bounded memory (`large_table`): the total row, the whole-dataset
column, the `shown` largest release rows and the accountants' figures, computed a chunk of releases
at a time, so memory does not grow with the history (the cells of Table 1 at a million releases
over 100 variables would be 800 MB).

The total row is summed exactly chunk by chunk (integer numerators over each component's common
denominator, as `_ExactComponents` does), then families and releases with a choice are composed
in through the exact path (`LedgerIndex._others`). The accountants' inputs per variable are
gathered the same way: event counts (integers), whether a cell is ∞, the latest recording and
earliest publication among the releases reading it (a maximum and a minimum), then composed as
`index_figures.table_figures` composes them, in the same order, so the figures are the same.

Invariant: on the rows it keeps, `large_table` equals `index.table()` and `table_figures`
(tests/store/test_scale.py, tests/store/test_accounting_rows.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from ..core.lazy import lazy_module
from . import composition_figures, dp_events, figure_validity, index_figures, pld_accountant, renyi_curves, subset_composition
from .index_chunks import rows_of
from .risk_table import RiskTable
from .spend import UNBOUNDED, Spend

np = lazy_module("numpy")  # imported on first use


def table_in_chunks(index, dataset: str, objective, delta: Fraction, shown: int, chunk: int = 65_536):
    """`index.table()` with the release rows limited to the `shown` largest on the whole
    dataset (in recording order), computed `chunk` releases at a time (`large_table`)."""
    return large_table(index, dataset, objective, delta, shown, (), chunk)[0]


def large_table(index, dataset: str, objective, delta: Fraction, shown: int, accountants: Sequence[str],
                chunk: int = 65_536):
    """`index.table()` with the release rows limited to the `shown` largest on the whole
    dataset (in recording order), and `index_figures.table_figures` of the named accountants,
    computed `chunk` releases at a time (see the module docstring). Returns (RiskTable,
    per-variable figures, whole-dataset figures). Leaves on the index `cell_value_ids`: the ids
    of the values other than zero that some cell of the whole table holds (np.unique of
    `index.table()`'s cells and whole-dataset column, zero left out)."""
    n_rel, n_var = len(index.releases), len(index.variables)
    n_guarantees, first_guarantee = index._guarantee_spans()
    single = index.simple & (n_guarantees <= 1)  # a cell is this release's one value, ∞ or 0
    single_value = np.where(first_guarantee >= 0, index.g_value[first_guarantee.clip(min=0)], index.NONE) \
        if len(index.g_value) else np.full(n_rel, index.NONE, dtype=np.int64)
    g_bounds = np.searchsorted(index.g_release, np.arange(0, n_rel + chunk, chunk).clip(max=n_rel))
    events = index_figures.index_events(index) if accountants else None
    tally = None if events is None else _EventCounts(index, events, single_value)
    cells = _Cells(per_value=np.zeros((len(index.values), n_var), dtype=np.int64),
                   unbounded=np.zeros(n_var, dtype=bool), dataset_wide=np.empty(n_rel, dtype=np.int64))
    one_rows = np.flatnonzero(single)
    # the common case: each of these releases has one guarantee, protecting exactly what it
    # reads (the index's protects matrix is its reads matrix and its guarantee is its own row):
    # every cell read is its value, none is ∞, so the cells are counted per (value, event)
    # and variable from the read entries by one bincount, not a chunk of matrices at a time
    fast = index.g_protects is index.reads and np.array_equal(first_guarantee[one_rows], one_rows)
    if fast:
        _count_read_entries(index, cells, tally, single_value, one_rows)
    for k, start in enumerate(range(0, n_rel, chunk)):
        stop = min(start + chunk, n_rel)
        one = single[start:stop]
        if not fast:
            _count_single_rows(index, cells, tally, start, stop, np.flatnonzero(one), single_value, first_guarantee)
        if not one.all():
            _count_other_rows(index, cells, tally, start, stop, np.flatnonzero(~one), g_bounds[k], g_bounds[k + 1])
    totals = _totals(index, cells, objective)
    table, total_wide = _shown_table(index, cells, dataset, objective, delta, totals, shown)
    if events is None:
        return table, [], {}
    per_variable = _variable_figures(index, tally, cells, totals, delta, accountants)
    wide = _figures(events.composition(cells.dataset_wide, frozenset(index.variables), total_wide), delta,
                    accountants)
    return table, per_variable, wide


@dataclass
class _Cells:
    """What Table 1's cells add up to, gathered a chunk of releases at a time."""

    per_value: np.ndarray  # simple cells of each value id, per variable (values x variables)
    unbounded: np.ndarray  # per variable: some simple cell of it is ∞
    dataset_wide: np.ndarray  # per release: the value id of its whole-dataset cost
    in_cells: set[int] = field(default_factory=set)  # value ids of the cells the exact path makes (cell_value_ids)


class _EventCounts:
    """The accountants' inputs per variable, gathered with the cells: how many cells of each
    event (`counts`), the cells of a value with several parts (`several`, as
    index_figures._single marks them: -2), and the cells of the rows the exact path composes
    (`others`: families, choices)."""

    def __init__(self, index, events, single_value):
        self.events = events
        self.value_is_zero = index.value_is_zero
        self.n_events = max(len(events.events), 1)
        self.counts = np.zeros((len(index.variables), self.n_events), dtype=np.int64)
        self.several: dict[tuple[int, int], int] = {}  # (variable, value id) -> cells
        self.multi = False  # some simple cell's value has several parts: table_figures composes column by column
        self.others: dict = {}  # row -> its cells
        self.row_event = np.where(events.mech >= 0, events.mech, events.value_event[single_value])

    def add_cells(self, j_cells, values, event_ids, weights) -> None:
        """Accountant counts for simple cells: per variable j, value id, event id, how many."""
        keep = ~self.value_is_zero[values] & (event_ids >= 0)
        np.add.at(self.counts, (j_cells[keep], event_ids[keep]), weights[keep])
        self.multi = self.multi or bool((self.events.value_event[values][weights > 0] == -2).any())
        several = self.several
        for j, value, weight in zip(j_cells[event_ids == -2], values[event_ids == -2], weights[event_ids == -2]):
            if weight:
                several[int(j), int(value)] = several.get((int(j), int(value)), 0) + int(weight)


def _count_read_entries(index, cells: _Cells, tally: _EventCounts | None, single_value, one_rows) -> None:
    """The cells of the releases `one_rows` (one guarantee each, protecting exactly what it
    reads), counted per (value, event) and variable from the read entries by one bincount."""
    n_rel, n_var = len(index.releases), len(index.variables)
    entry_rows, entry_cols = index.read_entries()
    width = np.bincount(entry_rows, minlength=n_rel)
    values = single_value[one_rows]
    cells.dataset_wide[one_rows] = np.where(width[one_rows] == 0, index.ZERO_ID, values)  # (0: reads nothing)
    stride = 1 if tally is None else tally.n_events + 2
    group = np.full(n_rel, -1, dtype=np.int64)
    group[one_rows] = values * stride + (0 if tally is None else tally.row_event[one_rows] + 2)
    keys = group[entry_rows]
    kept = keys >= 0
    n_keys = int(group.max()) + 1 if len(one_rows) else 0
    cells_per_key = np.bincount(keys[kept] * n_var + entry_cols[kept], minlength=n_keys * n_var).reshape(
        n_keys, n_var)
    del keys, kept
    for key in np.flatnonzero(cells_per_key.any(axis=1)):
        column = cells_per_key[key]
        value = int(key) // stride
        cells.per_value[value] += column
        if tally is not None:
            tally.add_cells(np.arange(n_var), np.full(n_var, value), np.full(n_var, int(key) % stride - 2), column)


def _count_single_rows(index, cells: _Cells, tally: _EventCounts | None, start: int, stop: int, rows,
                       single_value, first_guarantee) -> None:
    """The cells of the releases `rows` (of the chunk from `start`) with at most one guarantee
    (value v, protects P): the cell of a variable read is v when P protects it, ∞ when not; the
    whole-dataset cost is v when P covers every variable read, ∞ when not, 0 when nothing is read
    (docs/explanation/model.md#the-cost-of-one-release-on-a-subset), without the cells."""
    n_var = len(index.variables)
    values = single_value[start:stop][rows]
    read = index.reads[start:stop][rows]
    protects = np.zeros_like(read)
    has = first_guarantee[start:stop][rows] >= 0
    protects[has] = index.g_protects[first_guarantee[start:stop][rows][has]]
    covered, exposed = read & protects, read & ~protects
    cells.unbounded |= exposed.any(axis=0)
    cells.dataset_wide[start + rows] = np.where(~read.any(axis=1), index.ZERO_ID,
                                                np.where(exposed.any(axis=1), index.NONE, values))
    groups = values if tally is None else values * (tally.n_events + 2) + (tally.row_event[start:stop][rows] + 2)
    for key in np.unique(groups):
        members = groups == key
        column = covered[members].sum(axis=0)
        value = int(values[members][0])
        cells.per_value[value] += column
        if tally is not None:
            event = int(tally.row_event[start + rows[members][0]])
            tally.add_cells(np.arange(n_var), np.full(n_var, value), np.full(n_var, event), column)


def _count_other_rows(index, cells: _Cells, tally: _EventCounts | None, start: int, stop: int, rest,
                      g_start: int, g_stop: int) -> None:
    """The cells of the other releases `rest` of the chunk from `start` (several guarantees,
    families, choices), as index.table makes them."""
    n_var = len(index.variables)
    part = rows_of(index, start, stop, g_start, g_stop)
    found = part.single_cells()
    cells.in_cells.update(np.unique(found[rest]).tolist())
    cells.dataset_wide[start + rest] = part.cost_ids(range(n_var))[rest]
    simple_rest = rest[index.simple[start + rest]]
    if len(simple_rest):
        simple = found[simple_rest]
        cells.unbounded |= (simple == index._components.unbounded_id).any(axis=0)
        np.add.at(cells.per_value, (simple, np.broadcast_to(np.arange(n_var), simple.shape)), 1)
        if tally is not None:
            r_, j_ = np.nonzero(simple != index.ZERO_ID)
            ids = simple[r_, j_]
            mech = tally.events.mech[start + simple_rest[r_]]
            tally.add_cells(j_, ids, np.where(mech >= 0, mech, tally.events.value_event[ids]),
                            np.ones(len(ids), np.int64))
    if tally is not None:
        tally.others.update((start + int(r), found[r]) for r in rest if not index.simple[start + r])


def _totals(index, cells: _Cells, objective) -> list[Spend]:
    """The total row: each variable's simple cells summed exactly (integer numerators over each
    component's common denominator), then families and choices composed in (the exact path)."""
    components = index._components
    n_values, n_var = cells.per_value.shape
    per_value = cells.per_value
    sums = {field: [sum(int(numerators[v]) * int(per_value[v, j]) for v in range(n_values) if per_value[v, j])
                    for j in range(n_var)] for field, _, numerators in components.components}
    totals = [UNBOUNDED if cells.unbounded[j] else Spend(**{field: Fraction(sums[field][j], denominator)
                                                            for field, denominator, _ in components.components})
              for j in range(n_var)]
    if index.members or index.ambiguous:
        totals = [index._others(frozenset({name}), total, objective) for total, name in zip(totals, index.variables)]
    return totals


def _shown_table(index, cells: _Cells, dataset: str, objective, delta: Fraction, totals: list[Spend],
                 shown: int) -> tuple[RiskTable, Spend]:
    """(the RiskTable of the `shown` largest rows on the whole dataset, the whole-dataset total);
    leaves on the index the whole-dataset column and `cell_value_ids`."""
    n_var = len(index.variables)
    wide_float = np.asarray([np.inf if v.unbounded else float(v.own_epsilon(delta, index.allowance))
                             for v in index.values])
    dataset_wide = cells.dataset_wide
    index.remember_cost_ids(range(n_var), dataset_wide)  # (the headline's protected subset, when it is every variable)
    # the value ids some cell of Table 1 holds, over every release (the report's basis reads them):
    # a simple release's covered cells (per_value), the others' cells, the whole-dataset column
    in_cells = cells.in_cells
    in_cells.update(np.flatnonzero(cells.per_value.any(axis=1)).tolist(), np.unique(dataset_wide).tolist())
    found = np.asarray(sorted(in_cells), dtype=np.int64)
    index.cell_value_ids = found[~index.value_is_zero[found]]
    total_wide = index._others(frozenset(index.variables), index.exact_total(dataset_wide[index.simple]), objective)
    if shown >= len(dataset_wide):
        rows = np.arange(len(dataset_wide))
    else:
        rows = np.sort(np.argsort(-wide_float[dataset_wide], kind="stable")[:shown])
    shown_cells = _cells_of_rows(index, rows)
    if hasattr(index.releases, "prefetch"):
        index.releases.prefetch(rows)  # the heads of the rows shown, not of every release
    table = RiskTable(dataset=dataset, variables=index.variables, releases=tuple(index.releases[int(r)] for r in rows),
                      values=index.values, cells=shown_cells, dataset_wide=dataset_wide[rows], total=tuple(totals),
                      total_dataset_wide=total_wide, allowance=index.allowance)
    return table, total_wide


SPAN_GAP = 64  # rows apart that one read of the rows between (and their cells) still costs less than two reads


def _cells_of_rows(index, rows, chunk: int = 65_536):
    """Table 1's cells of the release rows `rows` (sorted): rows closer than SPAN_GAP read together,
    by one `rows_of` over their span (at most `chunk` releases), so that every row of a ledger costs
    a pass over its chunks and the 25 largest of a million cost 25 one-row reads."""
    n_var = len(index.variables)
    if not len(rows):
        return np.zeros((0, n_var), dtype=np.int64)
    breaks = np.flatnonzero(np.diff(rows) > SPAN_GAP) + 1
    parts = []
    for run in np.split(rows, breaks):
        for start in range(int(run[0]), int(run[-1]) + 1, chunk):
            stop = min(start + chunk, int(run[-1]) + 1)
            picked = run[(run >= start) & (run < stop)] - start
            parts.append(rows_of(index, start, stop).single_cells()[picked])
    return np.concatenate(parts)


def _figures(comp, delta: Fraction, accountants: Sequence[str]) -> dict:
    """The named accountants' figures of one composition (adaptive: `figure_validity.ADAPTIVE`)."""
    case = figure_validity.ADAPTIVE
    makers = {"basic": composition_figures.basic_figure, "rdp": composition_figures.rdp_figure,
              "pld": pld_accountant.pld_figure}
    return {name: makers[name](comp, delta, case) for name in accountants}


def _variable_figures(index, tally: _EventCounts, cells: _Cells, totals: list[Spend], delta: Fraction,
                      accountants: Sequence[str]) -> list[dict]:
    """Each variable's accountants' figures, composed as `table_figures` composes them: its events
    in the order IndexEvents.composition meets them, the exact path's rows one by one, else the
    Rényi curve summed over the event counts."""
    events, counts, others = tally.events, tally.counts, tally.others
    if events.events:
        curves = np.asarray([renyi_curves.event_curve(e) for e in events.events])
    else:
        curves = np.zeros((1, len(renyi_curves.ORDERS)))
    summed = counts @ curves
    exact_rows = np.asarray(sorted(others), dtype=np.int64)
    per_variable = []
    for j, name in enumerate(index.variables):
        found: Counter = Counter()
        for (jj, value), count in sorted(tally.several.items()):  # as IndexEvents.composition meets them
            if jj == j:
                for event in dp_events.spend_events(index.values[value]):
                    found[event] += count
        for k in np.flatnonzero(counts[j]):
            found[events.events[k]] += int(counts[j, k])
        comp = subset_composition.Composition(totals[j], found, bool(cells.unbounded[j]) or totals[j].unbounded,
                                              allowance=index.allowance)
        if others:  # families and releases with a choice, one by one
            column = np.full(len(index.releases), index.ZERO_ID, dtype=np.int64)
            column[exact_rows] = [others[int(r)][j] for r in exact_rows]
            extra = events.composition(column, frozenset({name}), Spend())
            comp.events.update(extra.events)
            comp.unbounded |= extra.unbounded
        elif not tally.multi:
            comp.known_curve = summed[j]
        per_variable.append(_figures(comp, delta, accountants))
    return per_variable
