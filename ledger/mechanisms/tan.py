"""Tan's Algorithm 1: noisy count tables whose margins are exact.

Concept (Tan, "Privacy on a subset of dataset variables", section 5.2): to
release counts by a margin variable V1 (not private, released exactly) and a
protected variable U1, add to every row i of the table the noise vector b M,
where b holds one independent two-sided geometric draw per *pair* of cells of
the row and M in M(n_i) has, for each pair (j, k), +1 in column j and -1 in
column k. Each pair term moves counts between two cells of one row, so

- row totals are exact:        sum_j g(i, j) = sum_j f(i, j)      (Prop 5.1.2)
- cells are integers:          g(i, j) in Z                       (Prop 5.1.3)
- cells are unbiased:          E g(i, j) = f(i, j)                (Prop 5.1.4)

Privacy on U (Tan, Definition 2.2). U-neighbours replace the U-values of one
record and keep its margin value, so a change moves one count from cell j to
cell k of one row. Shifting only the pair term b_jk by one maps the outputs
on one dataset onto the outputs on the other, and each pair term has
P(Z = z) proportional to e^(-a|z|), so the privacy loss is at most a. For a
two-cell row |ln P(o | D1)/P(o | D2)| = a at every output o (including the
unchanged one); with more cells a is the supremum, approached geometrically
in the tail of the moved pair (`row_privacy_loss` computes the loss exactly
for 2 and 3 cells, with the truncation of the geometric tails accounted for).

Two corrections to the printed algorithm (docs/explanation/model.md#notes-on-the-papers-algorithms):
1. The paper adds noise only "if n_i > 2": a two-cell row would be released
   exactly and a change between its cells fully revealed (infinite loss).
   Here every row with n_i >= 2 cells is noised.
2. Prop 5.1.1 claims epsilon-privacy for pair noise with exponent epsilon/2,
   but by the argument above that calibration is epsilon/2-private. Here the
   pair noise has exponent a = epsilon, P(Z = z) = (1 - e^-eps)/(1 + e^-eps)
   e^(-eps|z|) (the paper's printed constant (1 - e^(eps/2))/(1 + e^(eps/2))
   is negative, a sign slip), so the recorded guarantee epsilon *is* the
   worst-case privacy loss on U, with half the paper's noise exponent.
   (The exponent is 1/scale with the scale rounded up from 1/epsilon, so
   a <= epsilon holds exactly.)

The margin variable is released exactly: the release reads it, no guarantee
covers it (docs/explanation/model.md#a-release). Categories come from a public list or a categorical
dtype (every cell exists whatever the data), as in noise.contingency_table.

`nonnegative` is optional post-processing (docs/explanation/model.md#post-processing-and-lineage: it costs nothing): it
keeps row totals and integers but gives up unbiasedness.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import _validate as check
from ._validate import REPLACE, Number
from .errors import MechanismInputError
from .noise import _laplace_scale, _rng, contingency_table, two_sided_geometric

# ---------------------------------------------------------------------------
# Tan's Table 2 (section 5.1): graduates by degree programme and income band

DEGREE_PROGRAMMES = ("Bachelor of Arts", "Bachelor of Science", "Bachelor of Engineering")
INCOME_BANDS = (
    "<$30,000",
    "$30,000 - $39,999",
    "$40,000 - $49,999",
    "$50,000 - $59,999",
    "$60,000 - $79,999",
    "$80,000 - $99,999",
    "$100,000 - $119,999",
    "$120,000 and above",
)
_TABLE2 = (
    (5, 10, 47, 68, 54, 33, 12, 2),  # total 231
    (1, 13, 44, 92, 131, 75, 21, 15),  # total 392
    (2, 25, 78, 218, 237, 153, 46, 18),  # total 777
)
_TABLE3 = (  # the paper's example of a noisy, margin-consistent release
    (4, 12, 47, 66, 55, 37, 5, 5),
    (5, 12, 44, 91, 133, 73, 20, 14),
    (4, 20, 74, 218, 238, 155, 52, 16),
)


def table2_counts() -> pd.DataFrame:
    """Tan's Table 2 as a count table: rows degree programme (the margin), columns income band."""
    return _table(_TABLE2)


def table3_counts() -> pd.DataFrame:
    """Tan's Table 3, the paper's example output (for comparison in demos)."""
    return _table(_TABLE3)


def table2_records() -> pd.DataFrame:
    """Table 2 expanded to its 1400 graduate records (categorical columns, all categories kept)."""
    counts = table2_counts()
    degrees, incomes = [], []
    for degree, row in counts.iterrows():
        for income, count in row.items():
            degrees += [degree] * int(count)
            incomes += [income] * int(count)
    return pd.DataFrame(
        {
            "degree_programme": pd.Categorical(degrees, categories=DEGREE_PROGRAMMES),
            "income_band": pd.Categorical(incomes, categories=INCOME_BANDS, ordered=True),
        }
    )


def _table(rows: tuple[tuple[int, ...], ...]) -> pd.DataFrame:
    return pd.DataFrame(
        np.array(rows, dtype=np.int64),
        index=pd.Index(DEGREE_PROGRAMMES, name="degree_programme"),
        columns=pd.Index(INCOME_BANDS, name="income_band"),
    )


# ---------------------------------------------------------------------------
# the release record


@dataclass(frozen=True, slots=True)
class TanAlgorithm1:
    """A margin-consistent count table from Tan's Algorithm 1 (corrected, see module doc).

    epsilon: the pure guarantee on the protected variable under replacement
        (Tan's U-neighbours), equal to the worst-case privacy loss.
    pair_noise_exponent: a in P(Z = z) proportional to e^(-a|z|); a <= epsilon.
    exact_variables: the margin, released exactly (no guarantee covers it).
    noised_rows: rows with at least two cells (all of them, unless the table has one column).
    """

    margin: str
    protected: str
    epsilon: Number
    pair_noise_exponent: float
    noised_rows: int
    exact_variables: tuple[str, ...]
    relation: str = REPLACE
    notion: str = "pure"


# ---------------------------------------------------------------------------
# the algorithm


def pair_matrix(n_cells: int) -> np.ndarray:
    """A matrix of M(n) (Tan, section 5.2): one row per pair j < k, +1 in column j, -1 in column k."""
    n_cells = check.positive_int("n_cells", n_cells, minimum=2)
    pairs = list(itertools.combinations(range(n_cells), 2))
    matrix = np.zeros((len(pairs), n_cells), dtype=np.int64)
    for row, (j, k) in enumerate(pairs):
        matrix[row, j] = 1
        matrix[row, k] = -1
    return matrix


def algorithm1_row(
    counts: Sequence[int] | np.ndarray,
    epsilon: Number,
    rng: np.random.Generator | None = None,
    size: int | None = None,
) -> np.ndarray:
    """One row of Algorithm 1: counts + b M, b one geometric draw (exponent epsilon) per pair.

    Every row with two or more cells is noised (the paper's "n_i > 2" would
    release two-cell rows exactly). With `size`, returns `size` independent
    runs as a (size, n) array.
    """
    counts = check.count_array("counts", counts)
    if counts.ndim != 1:
        raise MechanismInputError("counts", f"one row of counts is needed, found shape {counts.shape}")
    epsilon = check.positive_number("epsilon", epsilon)
    rng = _rng(rng)
    runs = 1 if size is None else check.positive_int("size", size)
    if counts.size < 2:
        noisy = np.broadcast_to(counts, (runs, counts.size)).copy()
    else:
        matrix = pair_matrix(counts.size)
        scale = _laplace_scale(1, epsilon)  # exponent 1/scale <= epsilon
        pair_noise = two_sided_geometric(rng, scale, size=(runs, matrix.shape[0]))
        noisy = counts + pair_noise @ matrix
    return noisy[0] if size is None else noisy


def algorithm1(
    counts: pd.DataFrame,
    epsilon: Number,
    rng: np.random.Generator | None = None,
) -> tuple[pd.DataFrame, TanAlgorithm1]:
    """Algorithm 1 on a count table: rows are the margin's categories (exact totals),
    columns the protected variable's. Returns the noisy table and its record."""
    if not isinstance(counts, pd.DataFrame):
        raise MechanismInputError("counts", f"must be a pandas DataFrame of counts, found {type(counts).__name__}")
    values = check.count_array("counts", counts.to_numpy())
    epsilon = check.positive_number("epsilon", epsilon)
    rng = _rng(rng)
    noisy = np.vstack([algorithm1_row(row, epsilon, rng) for row in values])
    margin = str(counts.index.name or "margin")
    protected = str(counts.columns.name or "protected")
    record = TanAlgorithm1(
        margin=margin,
        protected=protected,
        epsilon=epsilon,
        pair_noise_exponent=1.0 / _laplace_scale(1, epsilon),
        noised_rows=len(values) if values.shape[1] >= 2 else 0,
        exact_variables=(margin,),
    )
    return pd.DataFrame(noisy, index=counts.index, columns=counts.columns), record


def consistent_count_table(
    data: pd.DataFrame,
    margin: str,
    protected: str,
    epsilon: Number,
    *,
    categories: Mapping[str, Sequence[Any]] | None = None,
    rng: np.random.Generator | None = None,
) -> tuple[pd.DataFrame, TanAlgorithm1]:
    """Counts by (margin, protected) from records, with exact margin totals, by Algorithm 1."""
    data = check.dataframe("data", data)
    for field, name in (("margin", margin), ("protected", protected)):
        if name not in data.columns:
            raise MechanismInputError(field, f"variable {name!r} is not in the data; its variables are {list(data.columns)!r}")
    if margin == protected:
        raise MechanismInputError("protected", f"must differ from the margin variable, found {protected!r} for both")
    flat = contingency_table(data, [margin, protected], categories)
    rows, columns = flat.index.unique(margin), flat.index.unique(protected)  # product order, margin major
    table = pd.DataFrame(
        flat.to_numpy().reshape(len(rows), len(columns)),
        index=pd.Index(rows, name=margin),
        columns=pd.Index(columns, name=protected),
    )
    return algorithm1(table, epsilon, rng)


def nonnegative(table: pd.DataFrame) -> pd.DataFrame:
    """Post-processing: clip negative cells to 0 and take the excess off the largest cells.

    Keeps every row total and integer cells (Prop 5.1.2-3); unbiasedness
    (Prop 5.1.4) is lost. Reads no data, so it costs no privacy (docs/explanation/model.md#post-processing-and-lineage).
    """
    values = check.count_array("table", np.where(table.to_numpy() < 0, 0, table.to_numpy()))
    original = table.to_numpy().astype(np.int64)
    result = values.copy()
    for row in range(result.shape[0]):
        excess = int(result[row].sum() - original[row].sum())
        cells = result[row]
        while excess > 0:
            largest = int(np.argmax(cells))
            others = np.delete(cells, largest)
            runner_up = int(others.max()) if others.size else 0
            take = min(excess, max(1, int(cells[largest]) - runner_up))
            cells[largest] -= take
            excess -= take
    return pd.DataFrame(result, index=table.index, columns=table.columns)


def format_table(table: pd.DataFrame) -> str:
    """A Table-3-like text rendering: a Total column, then the cells."""
    shown = table.copy()
    shown.insert(0, "Total", table.sum(axis=1))
    return shown.to_string()


# ---------------------------------------------------------------------------
# exact output distribution of one row, and its privacy loss


@dataclass(frozen=True, slots=True, eq=False)
class RowDistribution:
    """The output distribution of `algorithm1_row(counts)` with pair-noise exponent `exponent`.

    Each pair term is enumerated over -bound..bound; `missing_mass` bounds the
    probability of everything left out (union bound over the pairs), so for
    every output o: probabilities[o] <= P(o) <= probabilities[o] + missing_mass.
    outputs: (k, n) integer output rows; probabilities: (k,).
    """

    counts: tuple[int, ...]
    exponent: float
    bound: int
    missing_mass: float
    outputs: np.ndarray
    probabilities: np.ndarray


@dataclass(frozen=True, slots=True)
class RowPrivacyLoss:
    """max |ln P(o | D1)/P(o | D2)| over the outputs o with P >= min_probability on both.

    D1 = counts, D2 = counts with one record moved from cell `source` to cell
    `target`. max_loss uses the enumerated probabilities; the true maximum over
    the same outputs lies in [loss_lower, loss_upper] (truncation accounted).
    argmax: the output row where max_loss is reached.
    """

    counts: tuple[int, ...]
    source: int
    target: int
    exponent: float
    max_loss: float
    loss_lower: float
    loss_upper: float
    argmax: tuple[int, ...]
    probability_at_argmax: float
    min_probability: float
    missing_mass: float


def pair_noise_pmf(exponent: float, bound: int) -> np.ndarray:
    """P(Z = z) = (1 - r)/(1 + r) r^|z|, r = e^-exponent, for z = -bound..bound."""
    ratio = math.exp(-exponent)
    z = np.arange(-bound, bound + 1)
    return (1 - ratio) / (1 + ratio) * ratio ** np.abs(z)


def truncation_bound(exponent: float, n_pairs: int, tail_mass: float = 1e-12) -> tuple[int, float]:
    """Smallest T with n_pairs * P(|Z| > T) <= tail_mass; returns (T, that missing mass).

    P(|Z| > T) = 2 r^(T+1)/(1 + r), r = e^-exponent (sum of the geometric tails).
    """
    exponent = float(check.positive_number("exponent", exponent))
    tail_mass = float(check.open_unit_interval("tail_mass", tail_mass))
    ratio = math.exp(-exponent)
    bound = 0
    while n_pairs * 2 * ratio ** (bound + 1) / (1 + ratio) > tail_mass:
        bound += 1
    return bound, n_pairs * 2 * ratio ** (bound + 1) / (1 + ratio)


def _noise_grid(n_cells: int, exponent: float, tail_mass: float) -> tuple[np.ndarray, int, int, float]:
    """Distribution of the first n-1 coordinates of b M (the last is minus their sum),
    on a grid centred at 0 of half-width (n-1) T, by convolving the pair terms.
    Returns (grid, half-width, T, missing mass)."""
    n_pairs = n_cells * (n_cells - 1) // 2
    bound, missing = truncation_bound(exponent, n_pairs, tail_mass)
    pmf = pair_noise_pmf(exponent, bound)
    half = (n_cells - 1) * bound
    grid = np.zeros((2 * half + 1,) * (n_cells - 1))
    grid[(half,) * (n_cells - 1)] = 1.0
    for j, k in itertools.combinations(range(n_cells), 2):
        # the pair term b adds +b to coordinate j and -b to coordinate k (dropped if k is the last)
        shifted = np.zeros_like(grid)
        for b, weight in zip(range(-bound, bound + 1), pmf):
            moved = np.roll(grid, b, axis=j)
            if k < n_cells - 1:
                moved = np.roll(moved, -b, axis=k)
            shifted += weight * moved
        grid = shifted
    return grid, half, bound, missing


def _check_small_row(counts: Sequence[int] | np.ndarray) -> np.ndarray:
    counts = check.count_array("counts", counts)
    if counts.ndim != 1 or counts.size not in (2, 3):
        raise MechanismInputError("counts", f"exact enumeration is offered for rows of 2 or 3 cells, found {counts.shape}")
    return counts


def row_output_distribution(
    counts: Sequence[int] | np.ndarray, exponent: float, *, tail_mass: float = 1e-12
) -> RowDistribution:
    """The exact output distribution of one 2- or 3-cell row under pair noise with `exponent`,
    by convolving the pair terms truncated where the left-out mass is below `tail_mass`."""
    counts = _check_small_row(counts)
    grid, half, bound, missing = _noise_grid(counts.size, float(exponent), tail_mass)
    positions = np.argwhere(grid > 0)
    noise = positions - half
    noise = np.hstack([noise, -noise.sum(axis=1, keepdims=True)])
    return RowDistribution(
        counts=tuple(int(c) for c in counts),
        exponent=float(exponent),
        bound=bound,
        missing_mass=missing,
        outputs=counts + noise,
        probabilities=grid[tuple(positions.T)],
    )


def row_privacy_loss(
    counts: Sequence[int] | np.ndarray,
    source: int,
    target: int,
    exponent: float,
    *,
    tail_mass: float = 1e-12,
    min_probability: float = 1e-7,
) -> RowPrivacyLoss:
    """The largest |ln P(o | D1)/P(o | D2)| between D1 = counts and D2 = counts with one
    record moved from cell `source` to cell `target`, over outputs with probability
    >= min_probability under both (exact enumeration, 2 or 3 cells)."""
    counts = _check_small_row(counts)
    n = counts.size
    for field, cell in (("source", source), ("target", target)):
        if isinstance(cell, bool) or not isinstance(cell, (int, np.integer)) or not 0 <= cell < n:
            raise MechanismInputError(field, f"must be a cell index in 0..{n - 1}, found {cell!r}")
    if source == target:
        raise MechanismInputError("target", f"must differ from source, found {target!r} for both")
    if counts[source] < 1:
        raise MechanismInputError("source", f"cell {source} has no record to move, count {counts[source]}")
    grid, half, _, missing = _noise_grid(n, float(exponent), tail_mass)
    # P(o | D1) = grid[o - f1], P(o | D2) = grid[o - f2], o - f2 = (o - f1) + (f1 - f2)
    shift = np.zeros(n, dtype=np.int64)
    shift[source] += 1
    shift[target] -= 1
    shift = shift[:-1]
    first, second = _overlap(grid, shift)
    usable = (first >= min_probability) & (second >= min_probability)
    if not usable.any():
        raise MechanismInputError("min_probability", f"no output has probability >= {min_probability!r}")
    loss = np.where(usable, np.abs(np.log(np.where(usable, first, 1) / np.where(usable, second, 1))), -np.inf)
    # among outputs at the maximum (to rounding), report the most probable one
    at_max = loss >= loss.max() - 1e-9
    best = np.unravel_index(int(np.argmax(np.where(at_max, first, -1.0))), loss.shape)
    low = np.log(first[usable] / (second[usable] + missing))
    high = np.log((first[usable] + missing) / second[usable])
    upper = float(np.maximum(np.abs(low), np.abs(high)).max())
    lower_each = np.where((low <= 0) & (high >= 0), 0.0, np.minimum(np.abs(low), np.abs(high)))
    # grid index of the D1 noise at `best`, back to an output row
    start = np.maximum(0, -shift)
    noise = np.array(best) + start - half
    noise = np.append(noise, -noise.sum())
    return RowPrivacyLoss(
        counts=tuple(int(c) for c in counts),
        source=int(source),
        target=int(target),
        exponent=float(exponent),
        max_loss=float(loss[best]),
        loss_lower=float(lower_each.max()),
        loss_upper=upper,
        argmax=tuple(int(x) for x in counts + noise),
        probability_at_argmax=float(first[best]),
        min_probability=float(min_probability),
        missing_mass=missing,
    )


def max_row_privacy_loss(
    counts: Sequence[int] | np.ndarray, exponent: float, *, tail_mass: float = 1e-12, min_probability: float = 1e-7
) -> RowPrivacyLoss:
    """The largest row_privacy_loss over every move of one record between two cells of the row."""
    counts = _check_small_row(counts)
    results = [
        row_privacy_loss(counts, j, k, exponent, tail_mass=tail_mass, min_probability=min_probability)
        for j, k in itertools.permutations(range(counts.size), 2)
        if counts[j] >= 1
    ]
    if not results:
        raise MechanismInputError("counts", "the row has no record to move")
    return max(results, key=lambda result: result.max_loss)


def _overlap(grid: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Views a[v] = grid[v], b[v] = grid[v + shift] over the v where both are on the grid."""
    first_slices, second_slices = [], []
    for axis, step in enumerate(shift):
        size = grid.shape[axis]
        lo, hi = max(0, -step), min(size, size - step)
        first_slices.append(slice(lo, hi))
        second_slices.append(slice(lo + step, hi + step))
    return grid[tuple(first_slices)], grid[tuple(second_slices)]


def main(seed: int | None = None, epsilon: float = 1.0) -> str:
    """Demo: Algorithm 1 on Tan's Table 2, shown beside the exact table (Table-3-like)."""
    from .noise import make_rng

    noisy, record = algorithm1(table2_counts(), epsilon, make_rng(seed))
    return "\n\n".join(
        [
            "Table 2 (exact):",
            format_table(table2_counts()),
            f"Algorithm 1, epsilon = {record.epsilon} on {record.protected!r}, "
            f"{record.margin!r} exact (pair-noise exponent {record.pair_noise_exponent:g}):",
            format_table(noisy),
        ]
    )


if __name__ == "__main__":  # python -m ledger.mechanisms.tan
    print(main())
