"""Magnitude tables: sensitivity rules for cells, and Bailie's p% mechanism.

(a) Cell sensitivity assessment, in the style of tau-Argus. For a cell with
total X and contributors' values (each contributor's records summed first)
x1 >= x2 >= ... :

- p% rule (de Wolf and Hundepool 2012, as quoted by Bailie 2020): the cell is
  sensitive when  X - x1 - x2 < (p/100) x1  (the second-largest contributor
  could estimate the largest to within p%);
- frequency (threshold) rule: fewer than `threshold` contributors;
- (n, k) dominance rule: the n largest contributors hold more than k% of X.

Defaults are common agency choices, stated here so a report can cite them:
p = 10, threshold = 3, dominance (n = 2, k = 85). All three are parameters.
A cell is unsafe when any rule fires. Assessment describes risk; it applies
no treatment and carries no privacy guarantee.

(b) Bailie's p% mechanism (Bailie 2020, "An application to ABS agricultural
statistics"): every variable linearly related to a protected contributor's
sensitive value x^S is multiplied by e^nu, nu ~ Laplace(0, b),

    b = -(4/epsilon) ln(1 - p)                      (Bailie 2020, item 4)

with one draw per protected contributor, shared by all its linked variables
and records. It satisfies epsilon-Pufferfish with secrets "x^S lies in
[(1-p)x, (1+p)x]" for every x, discriminative pairs the neighbouring intervals
[(1-p)x, (1+p)x] and [(1+p)x, (1+p)^2/(1-p) x], and data-evolution scenarios in
which each linked variable is a fixed multiple of x^S. Proof sketch (Bailie):
in logs the secret is an interval of half-width c <= -ln(1-p) (as
1 + p < 1/(1-p)), and Laplace noise of scale 4c/epsilon separates neighbouring
intervals [x-c, x+c], [x+c, x+3c] (Kifer and Machanavajjhala 2014, Lemma 8.1).

Here p is a fraction in (0, 1) (0.1 is 10%), whereas the p% *rule* takes
p_percent in percent. The guarantee is Pufferfish, not DP: it does not
compose and is recorded apart from DP totals (docs/explanation/model.md#pufferfish-guarantees).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import _validate as check
from ._validate import Number
from .errors import MechanismInputError
from .noise import _rng

SAFE = "safe"
UNSAFE = "unsafe"

P_PERCENT_RULE = "p%"
FREQUENCY_RULE = "frequency"
DOMINANCE_RULE = "dominance"

DEFAULT_P_PERCENT = 10.0
DEFAULT_THRESHOLD = 3
DEFAULT_DOMINANCE = (2, 85.0)


# ---------------------------------------------------------------------------
# (a) sensitivity rules


@dataclass(frozen=True, slots=True, eq=False)
class CellAssessment:
    """Per-cell rule outcomes and the tau-Argus style summary.

    cells: one row per cell: the key columns, contributors, total, largest,
        second, top_n (sum of the n largest), the three rule flags, `rules`
        (the names of the rules that fired, comma-separated) and `status`.
    summary: index status (safe, unsafe); columns cells, respondents (the
        contributors of those cells, summed over cells) and value (their totals).
    """

    cells: pd.DataFrame
    summary: pd.DataFrame
    p_percent: float
    threshold: int
    dominance: tuple[int, float]


def p_percent_rule(total: float, largest: float, second: float, p_percent: float = DEFAULT_P_PERCENT) -> bool:
    """True (sensitive) when X - x1 - x2 < (p/100) x1 (de Wolf and Hundepool 2012)."""
    return total - largest - second < p_percent / 100.0 * largest


def frequency_rule(contributors: int, threshold: int = DEFAULT_THRESHOLD) -> bool:
    """True (sensitive) when the cell has fewer than `threshold` contributors."""
    return contributors < threshold


def dominance_rule(total: float, top_n: float, k_percent: float) -> bool:
    """True (sensitive) when the n largest contributions exceed k% of the total."""
    return top_n > k_percent / 100.0 * total


def assess_cells(
    microdata: pd.DataFrame,
    cell_keys: Sequence[str],
    contributor: str,
    value: str,
    *,
    p_percent: float = DEFAULT_P_PERCENT,
    threshold: int = DEFAULT_THRESHOLD,
    dominance: tuple[int, float] = DEFAULT_DOMINANCE,
) -> CellAssessment:
    """Apply the p%, frequency and (n, k) dominance rules to every cell of a magnitude table.

    microdata: one row per record, with the cell-key columns, a contributor id
    and a non-negative numeric `value`. A contributor's records in one cell are
    summed before the rules are applied (it is one respondent).
    """
    microdata = check.dataframe("microdata", microdata)
    keys = check.columns_present("cell_keys", microdata, cell_keys)
    if not keys:
        raise MechanismInputError("cell_keys", "at least one cell-key variable is needed, found none")
    check.columns_present("contributor", microdata, [contributor])
    check.columns_present("value", microdata, [value])
    check.numeric_column("value", microdata, value, non_negative=True)
    p_percent = float(check.positive_number("p_percent", p_percent))
    threshold = check.positive_int("threshold", threshold)
    n_top, k_percent = _dominance(dominance)
    for name in [*keys, contributor]:
        if microdata[name].isna().any():
            raise MechanismInputError(name, f"variable {name!r} has missing values")

    per_contributor = (
        microdata.groupby([*keys, contributor], observed=True, sort=True)[value].sum().reset_index()
    )
    rows = []
    for cell, group in per_contributor.groupby(keys, observed=True, sort=True):
        cell = cell if isinstance(cell, tuple) else (cell,)
        values = np.sort(group[value].to_numpy(dtype=float))[::-1]
        total = float(values.sum())
        largest = float(values[0])
        second = float(values[1]) if values.size > 1 else 0.0
        top_n = float(values[:n_top].sum())
        fired = {
            P_PERCENT_RULE: p_percent_rule(total, largest, second, p_percent),
            FREQUENCY_RULE: frequency_rule(values.size, threshold),
            DOMINANCE_RULE: dominance_rule(total, top_n, k_percent),
        }
        rows.append(
            {
                **dict(zip(keys, cell)),
                "contributors": int(values.size),
                "total": total,
                "largest": largest,
                "second": second,
                "top_n": top_n,
                P_PERCENT_RULE: fired[P_PERCENT_RULE],
                FREQUENCY_RULE: fired[FREQUENCY_RULE],
                DOMINANCE_RULE: fired[DOMINANCE_RULE],
                "rules": ",".join(rule for rule, hit in fired.items() if hit),
                "status": UNSAFE if any(fired.values()) else SAFE,
            }
        )
    cells = pd.DataFrame(rows)
    summary = (
        cells.groupby("status")
        .agg(cells=("status", "size"), respondents=("contributors", "sum"), value=("total", "sum"))
        .reindex([SAFE, UNSAFE], fill_value=0)
    )
    summary.index.name = "status"
    return CellAssessment(cells, summary, p_percent, threshold, (n_top, k_percent))


def _dominance(dominance: object) -> tuple[int, float]:
    if not isinstance(dominance, (tuple, list)) or len(dominance) != 2:
        raise MechanismInputError("dominance", f"must be a pair (n, k), found {dominance!r}")
    n_top = check.positive_int("dominance", dominance[0])
    k_percent = float(check.positive_number("dominance", dominance[1]))
    if k_percent > 100:
        raise MechanismInputError("dominance", f"k must be a percentage in (0, 100], found {dominance[1]!r}")
    return n_top, k_percent


# ---------------------------------------------------------------------------
# (b) Bailie's p% mechanism


@dataclass(frozen=True, slots=True)
class PPercentGuarantee:
    """epsilon-Pufferfish p% protection of each protected contributor's sensitive value.

    secrets: x^S in [(1-p)x, (1+p)x], every x. pairs: that interval against
    [(1+p)x, (1+p)^2/(1-p) x]. scenarios: each linked variable is a fixed
    multiple of x^S. laplace_scale: b = -(4/epsilon) ln(1-p) (Bailie 2020).
    """

    p: Number
    epsilon: Number
    laplace_scale: float
    contributor: str
    linked_variables: tuple[str, ...]
    protected_contributors: int
    secrets: str = "x^S in [(1-p)x, (1+p)x] for every x"
    pairs: str = "[(1-p)x, (1+p)x] vs [(1+p)x, (1+p)^2/(1-p) x]"
    assumption: str = "every linked variable is a fixed multiple of the sensitive value (linear relation)"
    notion: str = "pufferfish"


def bailie_scale(p: Number, epsilon: Number) -> float:
    """b = -(4/epsilon) ln(1 - p) (Bailie 2020; Kifer and Machanavajjhala 2014, Lemma 8.1)."""
    p = check.open_unit_interval("p", p)
    epsilon = check.positive_number("epsilon", epsilon)
    return -4.0 / float(epsilon) * math.log1p(-float(p))


def p_percent_mechanism(
    microdata: pd.DataFrame,
    contributor: str,
    linked: Sequence[str],
    p: Number,
    epsilon: Number,
    *,
    protected: Iterable[Any] | None = None,
    rng: np.random.Generator | None = None,
) -> tuple[pd.DataFrame, PPercentGuarantee]:
    """Noisy microdata: the `linked` variables of each protected contributor multiplied by
    e^nu, nu ~ Laplace(0, b), one draw per contributor (all its records and linked variables).

    protected: the contributor ids to protect (default: all). Other rows are unchanged.
    """
    microdata = check.dataframe("microdata", microdata)
    check.columns_present("contributor", microdata, [contributor])
    linked = check.columns_present("linked", microdata, linked)
    if not linked:
        raise MechanismInputError("linked", "at least one variable linked to the sensitive value is needed, found none")
    for name in linked:
        check.numeric_column("linked", microdata, name, non_negative=True)
    if microdata[contributor].isna().any():
        raise MechanismInputError("contributor", f"variable {contributor!r} has missing ids")
    scale = bailie_scale(p, epsilon)
    rng = _rng(rng)

    ids = pd.unique(microdata[contributor])
    if protected is None:
        chosen = ids
    else:
        chosen = pd.unique(pd.Series(list(protected), dtype=object))
        unknown = [c for c in chosen if c not in set(ids)]
        if unknown:
            raise MechanismInputError("protected", f"contributor ids not in the data: {unknown[:5]!r}")
    draws = pd.Series(rng.laplace(0.0, scale, size=len(chosen)), index=pd.Index(chosen, dtype=object))
    factor = np.exp(microdata[contributor].astype(object).map(draws).fillna(0.0).to_numpy(dtype=float))

    noisy = microdata.copy()
    for name in linked:
        noisy[name] = microdata[name].to_numpy(dtype=float) * factor
    guarantee = PPercentGuarantee(
        p=p,
        epsilon=epsilon,
        laplace_scale=scale,
        contributor=contributor,
        linked_variables=tuple(linked),
        protected_contributors=len(chosen),
    )
    return noisy, guarantee


def p_percent_cell_totals(
    microdata: pd.DataFrame,
    cell_keys: Sequence[str],
    contributor: str,
    linked: Sequence[str],
    p: Number,
    epsilon: Number,
    *,
    protected: Iterable[Any] | None = None,
    rng: np.random.Generator | None = None,
) -> tuple[pd.DataFrame, PPercentGuarantee]:
    """Cell totals of the linked variables from the noisy microdata (post-processing of it)."""
    microdata = check.dataframe("microdata", microdata)
    keys = check.columns_present("cell_keys", microdata, cell_keys)
    noisy, guarantee = p_percent_mechanism(microdata, contributor, linked, p, epsilon, protected=protected, rng=rng)
    totals = noisy.groupby(keys, observed=True, sort=True)[list(linked)].sum()
    return totals, guarantee
