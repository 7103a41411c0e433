"""Tan's Table 1 as the report shows it: column blocks that fit a printed page, the total row
with why an ∞ is ∞, a sparse layout past MATRIX_CELL_LIMIT cells, and the CSV frame.

Invariant: `matrix` always holds the full table; each distinct value is converted to epsilon once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from ..accounting.ledger_index import LedgerIndex
from ..accounting.risk_table import RiskTable
from ..core.lazy import lazy_module
from ..core.numbers import Number, is_infinite
from ..operations import reasons

np = lazy_module("numpy")  # imported on first use: recording never needs it


MATRIX_CELL_LIMIT = 20_000  # release rows x variables shown as Tan's matrix; past it, sparse rows
BLOCK_VARIABLES = 10  # variables per column block of the risk table: fits a landscape page
# The risk table prints its variable names vertically when a header's longest word is wider than its
# column on a 1024-pixel screen, the narrowest laid out with the columns side by side (A4 is wider): a
# header ("{name}") breaks at its spaces only, never inside a word. 772 px of table beside the release
# column (968 px less 14rem) shared by a block's columns and the whole-dataset column, less a cell's
# padding (11 px), at ~7.6 px a character (the headers' bold 12 px DejaVu Sans; measured ~7.2). The
# rule was "more than 6 columns and a name over 12 characters": "{variable_000}" (14 with its braces)
# spilled out of its header into the next one.
HEADER_ROW_PX = 772
HEADER_PADDING_PX = 11
HEADER_CHARACTER_PX = 7.6


TOTAL_LABEL = "All releases (composed)"


@dataclass(frozen=True)
class RiskRow:
    """One release in one column block: its epsilon on each variable of the block."""

    release: str
    title: str
    status: str
    values: tuple[Number, ...]
    dataset_wide: Number
    wide_public: bool = False  # its whole-dataset ∞ comes from public variables only: neutral
    family: str | None = None  # a member of a family: the family is charged once in the total (docs/explanation/model.md#families)

    @property
    def wide_why(self) -> str:
        """Why its whole-dataset figure is ∞, when it is (reasons.py)."""
        return reasons.PUBLIC if self.wide_public else reasons.NOT_PROTECTED


@dataclass(frozen=True)
class RiskBlock:
    """Columns first..last (1-based) of Tan's Table 1; the whole-dataset column is
    printed in the last block only (`wide`)."""

    first: int
    last: int
    variables: tuple[str, ...]
    rows: tuple[RiskRow, ...]  # empty in the sparse layout
    total: tuple[Number, ...]
    wide: bool


@dataclass(frozen=True)
class SparseRow:
    """A release's non-zero cells of Table 1 (the sparse layout for large ledgers)."""

    release: str
    title: str
    status: str
    cells: tuple[tuple[str, Number], ...]  # (variable, epsilon), in column order
    dataset_wide: Number


@dataclass(frozen=True)
class RiskTableView:
    """Tan's Table 1 with the whole-dataset column, as epsilons at `delta`.

    layout "matrix": every block has every release row. layout "sparse" (more than
    MATRIX_CELL_LIMIT cells): blocks carry the total row only, and `sparse` the
    non-zero cells of each release. `matrix` always holds the full table (for CSV):
    row i is release i's epsilon on each variable, then on the whole dataset.
    """

    variables: tuple[str, ...]
    layout: str
    blocks: tuple[RiskBlock, ...]
    sparse: tuple[SparseRow, ...]
    total_label: str
    total: tuple[Number, ...]
    total_dataset_wide: Number
    releases: tuple[str, ...]
    matrix: _Matrix  # the full table as value ids; `matrix.mapped(f)` formats it
    unprotected: tuple[str, ...]  # variables whose composed total is ∞
    public: tuple[str, ...] = ()  # variables classified public: their ∞ is expected (docs/explanation/model.md#public-and-protected-variables)
    total_wide_public: bool = False  # the total's whole-dataset ∞ comes from public variables only
    rotate: bool = False  # variable names too long for a column: headers printed vertically
    family_note: str = ""  # said under the table when some rows are members of a family
    # per variable whose total is ∞ for a keyed family's move (reasons.keyed_reason), that reason
    total_reasons: Mapping[str, str] = field(default_factory=dict)
    total_wide_reason: str | None = None  # the same for the total's whole-dataset figure

    @property
    def why(self) -> dict[str, str]:
        """Per variable, why an ∞ in its column is ∞ (reasons.variable_reason): a public variable
        is released exactly (neutral), a protected one is not protected (an alarm)."""
        public = set(self.public)
        return {name: reasons.variable_reason(name, public) for name in self.variables}

    @property
    def total_why(self) -> dict[str, str]:
        """`why` for the total row, where a keyed family's move may be the cause (total_reasons)."""
        return {**self.why, **self.total_reasons}

    @property
    def total_wide_why(self) -> str:
        if self.total_wide_reason is not None:
            return self.total_wide_reason
        return reasons.PUBLIC if self.total_wide_public else reasons.NOT_PROTECTED


def cells_of_rows(table: RiskTable, risk: RiskTableView) -> Callable[[int], tuple[tuple, Number]]:
    """Row k of Table 1 -> (its non-zero cells as (variable, epsilon), its whole-dataset epsilon)."""
    zero = np.asarray([v.is_zero for v in table.values], dtype=bool)
    epsilon_of = risk.matrix.epsilon_of
    variables = table.variables

    def cells(k: int) -> tuple[tuple, Number]:
        ids = table.cells[k]
        return (tuple((variables[j], epsilon_of[ids[j]]) for j in np.flatnonzero(~zero[ids]).tolist()),
                epsilon_of[table.dataset_wide[k]])

    return cells


def largest_rows(table: RiskTable, risk: RiskTableView, count: int) -> list[int]:
    """The rows of the `count` largest releases on the whole dataset (∞ first), in recording order."""
    if not len(table.dataset_wide):
        return []
    by_value = np.asarray([math.inf if is_infinite(v) else float(v) for v in risk.matrix.epsilon_of])
    wide = by_value[table.dataset_wide]
    return sorted(np.argsort(-wide, kind="stable")[:count].tolist())


def total_reasons(risk: RiskTableView, index: LedgerIndex) -> dict:
    """The total row's reasons where they are not its classification's (a keyed family's move,
    reasons.keyed_reason: the words `subset` prints for the variable, or for the whole dataset):
    `total_reasons` and `total_wide_reason` of the RiskTableView."""
    public = set(risk.public)
    found = {}
    for name, value in zip(risk.variables, risk.total):
        if is_infinite(value):
            why = reasons.keyed_reason(index, (name,), public, reasons.variable_reason(name, public))
            if why != reasons.variable_reason(name, public):
                found[name] = why
    wide = None
    if is_infinite(risk.total_dataset_wide):
        why = reasons.keyed_reason(index, risk.variables, public, risk.total_wide_why)
        wide = why if why != risk.total_wide_why else None
    return {"total_reasons": found, "total_wide_reason": wide}


def risk_table(table: RiskTable, delta: Fraction, public: Sequence[str] = (), shown=None,
               per_release: bool = True) -> RiskTableView:
    """Tan's Table 1 (risk_table.RiskTable) as epsilons at `delta`, in column blocks. `public`:
    the variables classified public; a whole-dataset ∞ that comes from them only is neutral.
    `shown`: the total row's figures as `table` prints them (shown_figures.TableAccounts.shown:
    the smallest valid figure per column); else the basic composition.
    `per_release=False` (a summarised report): the total row only, in the sparse layout, with no
    per-release rows (the complete register carries each release's cells)."""
    variables = table.variables
    public_column = np.asarray([name in public for name in variables], dtype=bool)
    infinite_ids = np.asarray([value.unbounded for value in table.values], dtype=bool)
    protected_inf = (infinite_ids[table.cells] & ~public_column).any(axis=1) if len(table.cells) else \
        np.zeros(0, dtype=bool)
    allowance = table.allowance
    epsilon_of = [value.own_epsilon(delta, allowance) for value in table.values]  # one conversion per distinct value
    total = tuple(spend.epsilon(delta, allowance) for spend in table.total)
    total_wide = table.total_dataset_wide.epsilon(delta, allowance)
    if shown is not None:
        total, total_wide = tuple(f.epsilon for f in shown[0]), shown[1].epsilon
    n_rows, n_var = table.cells.shape
    layout = "matrix" if n_rows * n_var <= MATRIX_CELL_LIMIT and per_release else "sparse"
    wide = [epsilon_of[i] for i in table.dataset_wide]
    zero_ids = np.asarray([v.is_zero for v in table.values], dtype=bool)
    releases = table.releases
    blocks = []
    for start in range(0, max(n_var, 1), BLOCK_VARIABLES):
        stop = min(start + BLOCK_VARIABLES, n_var)
        last = stop >= n_var
        rows = ()
        if layout == "matrix":
            rows = tuple(
                RiskRow(release=r.id, title=r.title, status=r.status.value,
                        values=tuple(epsilon_of[i] for i in table.cells[k, start:stop]), dataset_wide=wide[k],
                        wide_public=bool(public_column.any() and is_infinite(wide[k]) and not protected_inf[k]),
                        family=r.family)
                for k, r in enumerate(releases)
            )
        blocks.append(RiskBlock(first=start + 1, last=stop, variables=variables[start:stop], rows=rows,
                                total=total[start:stop], wide=last))
    sparse = ()
    if layout == "sparse" and per_release:
        rows, columns = np.nonzero(~zero_ids[table.cells])  # row by row, each row's columns in order
        cells = list(zip([variables[j] for j in columns.tolist()],
                         [epsilon_of[i] for i in table.cells[rows, columns].tolist()]))
        starts = np.searchsorted(rows, np.arange(n_rows + 1)).tolist()  # row k: cells[starts[k]:starts[k + 1]]
        sparse = tuple(
            SparseRow(release=r.id, title=r.title, status=r.status.value,
                      cells=tuple(cells[starts[k]:starts[k + 1]]), dataset_wide=wide[k])
            for k, r in enumerate(releases)
        )
    return RiskTableView(
        variables=variables,
        layout=layout,
        blocks=tuple(blocks),
        sparse=sparse,
        total_label=TOTAL_LABEL,
        total=total,
        total_dataset_wide=total_wide,
        releases=tuple(r.id for r in releases),
        matrix=_Matrix(table.cells, table.dataset_wide, epsilon_of),
        unprotected=tuple(v for v, t in zip(variables, total) if is_infinite(t)),
        public=tuple(public),
        # neutral only when the whole dataset is ∞ and every protected total is finite (as each row's wide_public)
        total_wide_public=bool(public) and is_infinite(total_wide)
        and not any(is_infinite(t) for v, t in zip(variables, total) if v not in public),
        rotate=names_rotated(variables),
        family_note=_family_note(releases),
    )


def names_rotated(variables) -> bool:
    """Whether the risk table prints its variable names vertically: the longest word of a header
    (`{name}`) is wider than a column of a block (HEADER_ROW_PX and what follows it)."""
    if not variables:
        return False
    room = HEADER_ROW_PX / (min(len(variables), BLOCK_VARIABLES) + 1) - HEADER_PADDING_PX
    longest = max(len(word) for name in variables for word in ("{" + name + "}").split())
    return longest * HEADER_CHARACTER_PX > room


def _family_note(releases) -> str:
    """Under the risk table: the families whose members are rows, each charged once."""
    return named_family_note({r.family for r in releases if r.family})


def named_family_note(names) -> str:
    families = sorted(names)
    if not families:
        return ""
    return (f"Rows marked \"family\" are members of {', '.join(families)}: releases on disjoint parts of "
            "the records, charged once in the total (the worst member, or a record moving between parts; "
            "docs/explanation/model.md#families), not added row by row.")


class _Matrix:
    """Table 1 in full, kept as value ids (risk_table.RiskTable): row k is release k's epsilon
    on each variable, then on the whole dataset."""

    def __init__(self, cells: np.ndarray, wide: np.ndarray, epsilon_of: list[Number]):
        self.ids = np.column_stack([cells, wide]) if len(cells) else np.zeros((0, cells.shape[1] + 1), dtype=int)
        self.epsilon_of = epsilon_of

    def mapped(self, function) -> np.ndarray:
        """`function` of every cell's epsilon, evaluated once per distinct value."""
        lookup = np.empty(len(self.epsilon_of), dtype=object)
        lookup[:] = [function(value) for value in self.epsilon_of]
        return lookup[self.ids]

    def __iter__(self):
        return iter(self.mapped(lambda value: value).tolist())


def risk_frame(risk: RiskTableView):
    """Tan's Table 1 as a pandas DataFrame (the CSV export): a row per charged release and
    the composed total row. Numeric cells: first a float column per variable and the
    whole-dataset column (ordinary DP), each float at or above the exact loss
    (numbers.to_json), ∞ as inf; then the same columns exact ("293764/114921", "inf"), empty
    where the figure has no exact value (a zCDP conversion: JSON's null, numbers.fraction_text)."""
    import pandas as pd

    from ..core.numbers import fraction_text as exact_text
    from ..core.numbers import to_json

    def upper_float(value: Number) -> float:
        number = to_json(value)
        return math.inf if number == "inf" else float(number)

    names = ["{" + name + "}" for name in risk.variables] + ["whole dataset (ordinary DP)"]
    floats = risk.matrix.mapped(upper_float)
    exact = risk.matrix.mapped(exact_text)
    total = (*risk.total, risk.total_dataset_wide)
    float_rows = np.vstack([floats, [[upper_float(v) for v in total]]]) if len(floats) else \
        np.asarray([[upper_float(v) for v in total]], dtype=object)
    exact_rows = np.vstack([exact, [[exact_text(v) for v in total]]]) if len(exact) else \
        np.asarray([[exact_text(v) for v in total]], dtype=object)
    index = pd.Index([*risk.releases, risk.total_label], name="release")
    frame = pd.concat([pd.DataFrame(float_rows.astype(float), columns=names, index=index),
                       pd.DataFrame(exact_rows, columns=[f"{name} exact" for name in names], index=index)], axis=1)
    return frame
