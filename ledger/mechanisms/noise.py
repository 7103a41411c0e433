"""Random source, noise primitives and the basic noisy queries.

Concept: a query's output moves by at most its *sensitivity* Δ between
neighbouring datasets; adding noise of scale Δ/ε (two-sided geometric for
integers, Laplace for reals) makes it ε-DP, and Gaussian noise of standard
deviation σ makes it Δ²/(2σ²)-zCDP. Sensitivity belongs to a neighbour
relation (docs/explanation/model.md#variables-subsets-and-neighbours), so every function here takes `relation` ("replace",
the default, or "add-remove") and computes Δ for it:

    query                     replace (bounded)    add-remove (unbounded)
    histogram / crosstab (L1) 2                    1
    count where a predicate   1                    1
    count of all records      0  (n is public)     1
    sum clipped to [lo, hi]   hi - lo              max(|lo|, |hi|)
    mean clipped, public n    (hi - lo) / n        refused (n is not public)

Invariants:
- every output comes with a frozen record of the mechanism parameters and
  the guarantee that follows from them: ε = Δ/scale for geometric and
  Laplace noise, ρ = Δ²/(2σ²) for Gaussian noise;
- the scale is rounded *up* from Δ/ε (and σ from Δ/√(2ρ)) so the recorded
  guarantee is never below the true one, with floats read through their
  shortest decimal form as the ledger reads them (ledger/core/numbers.py);
- contingency tables include every combination of the categories, observed
  or not: which cells exist must not depend on the data.

Randomness: `make_rng(None)` seeds numpy's PCG64 from `secrets.randbits(128)`.
The seed is cryptographically sound; the generator and floating-point Laplace
and Gaussian sampling are not hardened against side channels or the
floating-point attack of Mironov (2012). Integer (geometric) noise has no
floating-point output.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from . import _validate as check
from ._validate import ADD_REMOVE, REPLACE, Number
from .errors import MechanismInputError

# ---------------------------------------------------------------------------
# random source


def make_rng(seed: int | None = None) -> np.random.Generator:
    """A numpy Generator: seeded from `secrets.randbits(128)` when `seed` is None,
    else from `seed` (reproducible runs and tests only)."""
    if seed is None:
        return np.random.default_rng(secrets.randbits(128))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise MechanismInputError("seed", f"must be a non-negative integer or None, found {seed!r}")
    return np.random.default_rng(int(seed))


def _rng(rng: np.random.Generator | None) -> np.random.Generator:
    if rng is None:
        return make_rng(None)
    if not isinstance(rng, np.random.Generator):
        raise MechanismInputError("rng", f"must be a numpy.random.Generator, found {type(rng).__name__}")
    return rng


# ---------------------------------------------------------------------------
# noise primitives


def two_sided_geometric(rng: np.random.Generator, scale: float, size: Any = None) -> Any:
    """Integer noise with P(Z = z) = (1-r)/(1+r) r^|z|, r = e^(-1/scale)
    (Ghosh, Roughgarden and Sundararajan 2009).

    Sampled exactly as G1 - G2 of two independent geometric variables with
    success probability 1 - r: the difference of two such variables has
    exactly this law. scale 0 gives no noise.
    """
    scale = float(scale)
    if scale < 0 or not math.isfinite(scale):
        raise MechanismInputError("scale", f"must be a finite number >= 0, found {scale!r}")
    if scale == 0:
        return np.zeros(size, dtype=np.int64) if size is not None else 0
    success = -math.expm1(-1.0 / scale)  # 1 - r, accurate for large scales
    first = rng.geometric(success, size=size)
    second = rng.geometric(success, size=size)
    return np.asarray(first - second, dtype=np.int64) if size is not None else int(first - second)


def laplace(rng: np.random.Generator, scale: float, size: Any = None) -> Any:
    """Laplace(0, scale) noise, density exp(-|z|/scale)/(2 scale) (Dwork et al. 2006)."""
    scale = float(scale)
    if scale < 0 or not math.isfinite(scale):
        raise MechanismInputError("scale", f"must be a finite number >= 0, found {scale!r}")
    if scale == 0:
        return np.zeros(size) if size is not None else 0.0
    return rng.laplace(0.0, scale, size=size)


def gaussian(rng: np.random.Generator, sigma: float, size: Any = None) -> Any:
    """N(0, sigma^2) noise."""
    sigma = float(sigma)
    if sigma < 0 or not math.isfinite(sigma):
        raise MechanismInputError("sigma", f"must be a finite number >= 0, found {sigma!r}")
    if sigma == 0:
        return np.zeros(size) if size is not None else 0.0
    return rng.normal(0.0, sigma, size=size)


# ---------------------------------------------------------------------------
# what was done, as data


@dataclass(frozen=True, slots=True)
class GeometricMechanism:
    """Two-sided geometric noise of `scale` on every integer output.

    query: "count" or "crosstab". sensitivity: L1 sensitivity under `relation`.
    epsilon: the pure guarantee, sensitivity/scale <= epsilon (Ghosh et al. 2009).
    scale 0 (sensitivity 0) means the output was released exactly at epsilon 0.
    variables: the variables the output is tabulated by.
    """

    query: str
    sensitivity: int
    scale: float
    epsilon: Number
    relation: str
    variables: tuple[str, ...] = ()
    notion: str = "pure"


@dataclass(frozen=True, slots=True)
class LaplaceMechanism:
    """Laplace noise of `scale` on a clipped sum or mean.

    bounds: the clipping interval [lower, upper]; n: the public record count
    (mean only). epsilon: the pure guarantee, sensitivity/scale <= epsilon
    (Dwork, McSherry, Nissim and Smith 2006, Prop 1).
    """

    query: str
    sensitivity: float
    scale: float
    epsilon: Number
    relation: str
    bounds: tuple[float, float]
    variables: tuple[str, ...] = ()
    n: int | None = None
    notion: str = "pure"


@dataclass(frozen=True, slots=True)
class GaussianMechanism:
    """Gaussian noise of standard deviation `sigma` on a clipped sum or mean.

    rho: the zCDP guarantee, sensitivity^2/(2 sigma^2) <= rho
    (Bun and Steinke 2016, Prop 1.6). Other fields as for LaplaceMechanism.
    """

    query: str
    sensitivity: float
    sigma: float
    rho: Number
    relation: str
    bounds: tuple[float, float]
    variables: tuple[str, ...] = ()
    n: int | None = None
    notion: str = "zcdp"


# ---------------------------------------------------------------------------
# sensitivity (docs/explanation/model.md#variables-subsets-and-neighbours)


def histogram_sensitivity(relation: str = REPLACE) -> int:
    """L1 sensitivity of a full histogram: a replacement moves one count between
    two cells (2); an addition or removal changes one cell (1)."""
    return 2 if check.relation(relation) == REPLACE else 1


def sum_sensitivity(lower: float, upper: float, relation: str = REPLACE) -> float:
    """Sensitivity of a sum of values clipped to [lower, upper]: a replacement
    moves one value across the interval (upper - lower); an addition or removal
    adds or drops one value (max(|lower|, |upper|))."""
    lower, upper = _bounds(lower, upper)
    if check.relation(relation) == REPLACE:
        return _read_up(Fraction(upper) - Fraction(lower))
    return _read_up(max(abs(Fraction(lower)), abs(Fraction(upper))))


def mean_sensitivity(lower: float, upper: float, n: int, relation: str = REPLACE) -> float:
    """Sensitivity of a clipped mean with public n under replacement: (upper - lower)/n.

    Under add/remove n is not public and the mean has no fixed sensitivity:
    refused (release a noisy sum and a noisy count instead).
    """
    lower, upper = _bounds(lower, upper)
    n = check.positive_int("n", n)
    if check.relation(relation) != REPLACE:
        raise MechanismInputError(
            "relation", f"a mean needs a public n, which only 'replace' neighbours give; found {relation!r}"
        )
    return _read_up((Fraction(upper) - Fraction(lower)) / n)


def _read_up(exact: Fraction) -> float:
    """The smallest float whose reading (`_exact`: its shortest decimal form, as the ledger reads
    a float) is at least `exact`. A sensitivity is the exact difference of the float bounds the
    data are clipped to (over n, for a mean); the float nearest to it, or its shortest decimal
    form, can be below it, and a scale worked out from it would record an epsilon below the
    true one (by a relative 1e-16: (1 - 0) / 3 is read as 0.3333333333333333 < 1/3)."""
    value = float(exact)
    while _exact(value) < exact:
        value = math.nextafter(value, math.inf)
    return value


# ---------------------------------------------------------------------------
# queries


def noisy_count(
    data: pd.DataFrame,
    epsilon: Number,
    *,
    where: Sequence[bool] | np.ndarray | pd.Series | None = None,
    relation: str = REPLACE,
    rng: np.random.Generator | None = None,
) -> tuple[int, GeometricMechanism]:
    """Count of the records (those where the boolean mask `where` holds) plus geometric noise.

    Sensitivity 1 with a predicate; without one, 0 under replacement (n is
    public, so the count is released exactly at epsilon 0, docs/explanation/model.md#a-release) and 1
    under add/remove.
    """
    data = check.dataframe("data", data, allow_empty=True)
    epsilon = check.positive_number("epsilon", epsilon)
    relation = check.relation(relation)
    rng = _rng(rng)
    if where is None:
        true_count = len(data)
        sensitivity = 0 if relation == REPLACE else 1
    else:
        mask = np.asarray(where)
        if mask.dtype != bool or mask.shape != (len(data),):
            raise MechanismInputError(
                "where", f"must be a boolean mask with one entry per record ({len(data)}), found {mask.dtype} {mask.shape}"
            )
        true_count = int(mask.sum())
        sensitivity = 1
    scale = _laplace_scale(sensitivity, epsilon)
    record = GeometricMechanism(
        "count", sensitivity, scale, epsilon if sensitivity else 0, relation
    )
    return true_count + int(two_sided_geometric(rng, scale)), record


def contingency_table(
    data: pd.DataFrame, columns: Sequence[str], categories: Mapping[str, Sequence[Any]] | None = None
) -> pd.Series:
    """Exact counts for every combination of the categories of `columns` (a full crosstab).

    Categories come from `categories[column]` when given (the public list:
    use it), else the column's categorical dtype, else the sorted observed
    values. A value outside its column's categories is refused, never dropped.
    """
    data = check.dataframe("data", data, allow_empty=True)
    columns = check.columns_present("columns", data, columns)
    if not columns:
        raise MechanismInputError("columns", "at least one variable is needed for a table, found none")
    levels = [category_levels(data, column, categories) for column in columns]
    codes = []
    for column, column_levels in zip(columns, levels):
        column_codes = pd.Index(column_levels).get_indexer(np.asarray(data[column], dtype=object))
        if (column_codes < 0).any():
            bad = data[column].to_numpy()[column_codes < 0][0]
            raise MechanismInputError(
                "categories", f"variable {column!r} has value {bad!r} outside its categories {list(column_levels)!r}"
            )
        codes.append(column_codes.astype(np.int64))
    shape = tuple(len(column_levels) for column_levels in levels)
    flat = np.ravel_multi_index(codes, shape) if len(data) else np.zeros(0, dtype=np.int64)
    counts = np.bincount(flat, minlength=math.prod(shape)).astype(np.int64)
    index = (
        pd.MultiIndex.from_product(levels, names=columns)
        if len(columns) > 1
        else pd.Index(levels[0], name=columns[0])
    )
    return pd.Series(counts, index=index, name="count")


def noisy_crosstab(
    data: pd.DataFrame,
    columns: Sequence[str],
    epsilon: Number,
    *,
    relation: str = REPLACE,
    categories: Mapping[str, Sequence[Any]] | None = None,
    rng: np.random.Generator | None = None,
) -> tuple[pd.Series, GeometricMechanism]:
    """Every cell of the contingency table of `columns` plus independent geometric noise
    of scale Δ/ε, Δ = histogram_sensitivity(relation) (Ghosh et al. 2009)."""
    epsilon = check.positive_number("epsilon", epsilon)
    relation = check.relation(relation)
    rng = _rng(rng)
    table = contingency_table(data, columns, categories)
    sensitivity = histogram_sensitivity(relation)
    scale = _laplace_scale(sensitivity, epsilon)
    noisy = table + two_sided_geometric(rng, scale, size=len(table))
    record = GeometricMechanism("crosstab", sensitivity, scale, epsilon, relation, tuple(columns))
    return noisy.astype(np.int64), record


def laplace_sum(
    data: pd.DataFrame,
    column: str,
    lower: float,
    upper: float,
    epsilon: Number,
    *,
    relation: str = REPLACE,
    rng: np.random.Generator | None = None,
) -> tuple[float, LaplaceMechanism]:
    """Sum of `column` clipped to [lower, upper] plus Laplace(Δ/ε) noise, Δ = sum_sensitivity."""
    epsilon = check.positive_number("epsilon", epsilon)
    relation = check.relation(relation)
    values, bounds = _clipped(data, column, lower, upper, allow_empty=True)
    sensitivity = sum_sensitivity(*bounds, relation)
    scale = _laplace_scale(sensitivity, epsilon)
    noisy = float(values.sum()) + float(laplace(_rng(rng), scale))
    return noisy, LaplaceMechanism("sum", sensitivity, scale, epsilon, relation, bounds, (column,))


def laplace_mean(
    data: pd.DataFrame,
    column: str,
    lower: float,
    upper: float,
    epsilon: Number,
    *,
    relation: str = REPLACE,
    rng: np.random.Generator | None = None,
) -> tuple[float, LaplaceMechanism]:
    """Mean of `column` clipped to [lower, upper] over the public n records plus
    Laplace(Δ/ε) noise, Δ = (upper - lower)/n (replacement neighbours only)."""
    epsilon = check.positive_number("epsilon", epsilon)
    values, bounds = _clipped(data, column, lower, upper)
    sensitivity = mean_sensitivity(*bounds, len(values), relation)
    scale = _laplace_scale(sensitivity, epsilon)
    noisy = float(values.mean()) + float(laplace(_rng(rng), scale))
    record = LaplaceMechanism("mean", sensitivity, scale, epsilon, REPLACE, bounds, (column,), len(values))
    return noisy, record


def gaussian_sum(
    data: pd.DataFrame,
    column: str,
    lower: float,
    upper: float,
    rho: Number,
    *,
    relation: str = REPLACE,
    rng: np.random.Generator | None = None,
) -> tuple[float, GaussianMechanism]:
    """Sum of `column` clipped to [lower, upper] plus N(0, σ²), σ = Δ/√(2ρ): ρ-zCDP
    (Bun and Steinke 2016, Prop 1.6)."""
    rho = check.positive_number("rho", rho)
    relation = check.relation(relation)
    values, bounds = _clipped(data, column, lower, upper, allow_empty=True)
    sensitivity = sum_sensitivity(*bounds, relation)
    sigma = _gaussian_sigma(sensitivity, rho)
    noisy = float(values.sum()) + float(gaussian(_rng(rng), sigma))
    return noisy, GaussianMechanism("sum", sensitivity, sigma, rho, relation, bounds, (column,))


def gaussian_mean(
    data: pd.DataFrame,
    column: str,
    lower: float,
    upper: float,
    rho: Number,
    *,
    relation: str = REPLACE,
    rng: np.random.Generator | None = None,
) -> tuple[float, GaussianMechanism]:
    """Clipped mean over the public n plus N(0, σ²), σ = Δ/√(2ρ), Δ = (upper - lower)/n."""
    rho = check.positive_number("rho", rho)
    values, bounds = _clipped(data, column, lower, upper)
    sensitivity = mean_sensitivity(*bounds, len(values), relation)
    sigma = _gaussian_sigma(sensitivity, rho)
    noisy = float(values.mean()) + float(gaussian(_rng(rng), sigma))
    record = GaussianMechanism("mean", sensitivity, sigma, rho, REPLACE, bounds, (column,), len(values))
    return noisy, record


# ---------------------------------------------------------------------------
# helpers


def category_levels(
    data: pd.DataFrame, column: str, categories: Mapping[str, Sequence[Any]] | None = None
) -> list[Any]:
    """The categories of `column`: given, else from a categorical dtype, else the sorted observed values."""
    if data[column].isna().any():
        raise MechanismInputError(column, f"variable {column!r} has missing values; recode them as a category first")
    if categories is not None and column in categories:
        levels = list(categories[column])
        if len(set(levels)) != len(levels):
            raise MechanismInputError("categories", f"categories of {column!r} repeat a value: {levels!r}")
    elif isinstance(data[column].dtype, pd.CategoricalDtype):
        levels = list(data[column].cat.categories)
    else:
        levels = sorted(pd.unique(data[column]).tolist())
    if not levels:
        raise MechanismInputError("categories", f"variable {column!r} has no categories")
    return levels


def _exact(value: Number) -> Fraction:
    """A number as the ledger reads it: floats through their shortest decimal form."""
    if isinstance(value, float):
        return Fraction(repr(value))
    return Fraction(value)


def _laplace_scale(sensitivity: Number, epsilon: Number) -> float:
    """Δ/ε rounded up to a float, so Δ/scale <= ε holds exactly."""
    if sensitivity == 0:
        return 0.0
    exact = _exact(sensitivity) / _exact(epsilon)
    scale = float(exact)
    while Fraction(scale) < exact:
        scale = math.nextafter(scale, math.inf)
    return scale


def _gaussian_sigma(sensitivity: Number, rho: Number) -> float:
    """Δ/√(2ρ) rounded up, so Δ²/(2σ²) <= ρ holds exactly (Bun and Steinke 2016, Prop 1.6)."""
    if sensitivity == 0:
        return 0.0
    variance = _exact(sensitivity) ** 2 / (2 * _exact(rho))
    # a few ulps from the answer: the variance itself as a float can underflow (a sensitivity of
    # 1e-200), and a walk up from 0 one float at a time then never ends
    sigma = float(_exact(sensitivity)) / math.sqrt(2 * float(_exact(rho)))
    while Fraction(sigma) ** 2 < variance:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def _bounds(lower: float, upper: float) -> tuple[float, float]:
    lower = check.finite_number("lower", lower)
    upper = check.finite_number("upper", upper)
    if not lower < upper:
        raise MechanismInputError("bounds", f"need lower < upper, found [{lower!r}, {upper!r}]")
    return lower, upper


def _clipped(
    data: pd.DataFrame, column: str, lower: float, upper: float, *, allow_empty: bool = False
) -> tuple[np.ndarray, tuple[float, float]]:
    data = check.dataframe("data", data, allow_empty=allow_empty)
    check.columns_present("column", data, [column])
    bounds = _bounds(lower, upper)
    values = check.numeric_column("column", data, column)
    return np.clip(values, *bounds), bounds


__all__ = [
    "ADD_REMOVE",
    "REPLACE",
    "GaussianMechanism",
    "GeometricMechanism",
    "LaplaceMechanism",
    "category_levels",
    "contingency_table",
    "gaussian",
    "gaussian_mean",
    "gaussian_sum",
    "histogram_sensitivity",
    "laplace",
    "laplace_mean",
    "laplace_sum",
    "make_rng",
    "mean_sensitivity",
    "noisy_count",
    "noisy_crosstab",
    "sum_sensitivity",
    "two_sided_geometric",
]
