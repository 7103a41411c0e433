"""Privacy amplification by subsampling without replacement (docs/explanation/model.md#subsampling).

Concept: run an epsilon-DP mechanism on n' of the n records, drawn uniformly
without replacement (beta = n'/n). Under replacement neighbours (bounded DP,
n and n' fixed) the result is epsilon'-DP with the tight bound

    epsilon' = ln(1 + beta (e^epsilon - 1))      (Balle, Barthe and Gaboardi 2018, Thm 9 / Table 1,
                                                  sampling without replacement, substitution relation)

attained by randomized response, which is what the ledger records (rounded up). Clifton
et al.'s published bound (Theorem 2),

    epsilon' = ln((e^epsilon * beta + 1 - beta) / (1 - beta)),

is valid but larger by exactly -ln(1 - beta); it stays here (`theorem2_epsilon`) as the
looser reference. The tight bound is never above epsilon, and beta = 1 gives epsilon.

Invariants: the draw uses the caller's rng and nothing about the data; the
record states n, n', beta and both epsilons, and keeps the sampling event
(sample_size of population) so the Rényi and PLD accountants see it. epsilon'
is irrational and is rounded up (ledger/core/numbers.py), so the record is never
below the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from numbers import Real

import numpy as np
import pandas as pd

from ..core.numbers import float_up
from . import _validate as check
from ._validate import REPLACE, Number
from .errors import MechanismInputError
from .noise import _rng


@dataclass(frozen=True, slots=True)
class Subsample:
    """n_sample of n_total records drawn uniformly without replacement.

    epsilon_mechanism: the guarantee of the mechanism run on the subsample.
    epsilon: Balle, Barthe and Gaboardi's epsilon' (never above epsilon_mechanism).
    """

    n_total: int
    n_sample: int
    beta: float
    epsilon_mechanism: Number
    epsilon: float
    relation: str = REPLACE
    notion: str = "pure"


def theorem2_epsilon(epsilon: Number, beta: float) -> float:
    """epsilon' = ln((e^eps beta + 1 - beta)/(1 - beta)) (Clifton et al., Theorem 2), rounded up.

    beta must be in (0, 1); beta == 1 (the whole dataset) returns epsilon.
    """
    epsilon = check.positive_number("epsilon", epsilon)
    if isinstance(beta, bool) or not isinstance(beta, Real) or not math.isfinite(float(beta)):
        raise MechanismInputError("beta", f"must be a number in (0, 1], found {beta!r}")
    if beta == 1:
        return float_up(epsilon)
    beta = check.open_unit_interval("beta", beta)
    # Evaluated in 50-digit decimal arithmetic, then rounded up to the next float: a float
    # evaluation rounded by one ulp can still land below the true value.
    with localcontext() as ctx:
        ctx.prec = 50
        eps, b = _decimal(epsilon), _decimal(beta)
        value = ((eps.exp() * b + 1 - b) / (1 - b)).ln()
        value += value.scaleb(-40)  # past the error of the 50-digit evaluation
    return math.nextafter(float(value), math.inf)


def _decimal(value: Number) -> Decimal:
    if isinstance(value, Fraction):
        return Decimal(value.numerator) / Decimal(value.denominator)
    return Decimal(value)  # a float converts exactly


def tight_epsilon(epsilon: Number, beta: Number) -> float:
    """epsilon' = ln(1 + beta (e^eps - 1)) (Balle, Barthe and Gaboardi 2018), rounded up.

    beta must be in (0, 1]; beta == 1 returns epsilon."""
    epsilon = check.positive_number("epsilon", epsilon)
    if isinstance(beta, bool) or not isinstance(beta, Real) or not math.isfinite(float(beta)):
        raise MechanismInputError("beta", f"must be a number in (0, 1], found {beta!r}")
    if beta == 1:
        return float_up(epsilon)  # never a float below epsilon
    beta = check.open_unit_interval("beta", beta)
    with localcontext() as ctx:  # 50 digits, then up past the evaluation's error, then to a float above
        ctx.prec = 50
        eps, b = _decimal(epsilon), _decimal(beta)
        value = (1 + b * (eps.exp() - 1)).ln()
        value += value.scaleb(-40)
    return math.nextafter(float(value), math.inf)


def subsampled_epsilon(epsilon: Number, beta: Number) -> float:
    """The guarantee to record (docs/explanation/model.md#subsampling): the tight bound, never above epsilon."""
    return min(float_up(epsilon), tight_epsilon(epsilon, beta)) if epsilon > 0 else 0.0  # never a float below epsilon


def draw_subsample(
    data: pd.DataFrame, n_sample: int, epsilon: Number, rng: np.random.Generator | None = None
) -> tuple[pd.DataFrame, Subsample]:
    """n_sample records of `data` drawn uniformly without replacement, and the record of
    the amplified guarantee for an epsilon-DP mechanism run on them."""
    data = check.dataframe("data", data)
    n_sample = check.positive_int("n_sample", n_sample)
    if n_sample > len(data):
        raise MechanismInputError("n_sample", f"must be at most the {len(data)} records, found {n_sample}")
    epsilon = check.positive_number("epsilon", epsilon)
    rows = _rng(rng).choice(len(data), size=n_sample, replace=False)
    beta = Fraction(n_sample, len(data))  # exact: a rounded beta could understate epsilon'
    record = Subsample(len(data), n_sample, float(beta), epsilon, subsampled_epsilon(epsilon, beta))
    return data.iloc[np.sort(rows)], record
