"""Attribute-private Gaussian mechanism for a mean (Zhang, Ohrimenko and Cummings).

Concept: dataset attribute privacy (Zhang et al., Definition 3) protects a
*global* property of the dataset, here the mean g(X_i) of each protected
attribute i in C, not any one record. It is (epsilon, delta)-Pufferfish with
secrets "g(X_i) = a" for a in the support U^i, pairs of such secrets on the same
attribute, and scenarios in which the n records are i.i.d. draws from a
distribution in the assumed family.

Instantiation (Zhang et al., section 4.3): records are i.i.d. multivariate
Gaussian with covariance V; the query is F(X) = mean of attribute j. Given
g(X_i) = a, F(X) ~ N(mu_j + (V_ij/V_ii)(a - mu_i), (V_jj - V_ij^2/V_ii)/n), so

    Delta_i F   = |V_ij|/V_ii * d(U^i)                    (section 4.3; Algorithm 1, Eq. 1)
    Var(F | g_i) = (V_jj - V_ij^2/V_ii) / n               (section 4.3)
    sigma^2     = max_{i in C} (c Delta_i F/epsilon)^2 - Var(F | g_i),  clamped at 0
                                                          (Algorithm 1; section 4.3)
    c           = sqrt(2 ln(1.25/delta))                  (Algorithm 1)

d(U^i) is the diameter max |a - b| of the set of values the protected mean can
take (section 4.3, "the diameter of U"). The mechanism returns F(X) + N(0, sigma^2);
the sampling noise of F itself supplies the rest of the variance (Theorem 1).

Invariants and limits:
- the guarantee holds only under the assumed covariance and the Gaussian
  record model; both are recorded with it;
- Theorem 1 reduces to the Gaussian mechanism of Dwork and Roth (2014,
  Theorem A.1), whose constant c is proven for epsilon < 1: epsilon >= 1 is
  refused rather than certified on an unproven bound;
- a Pufferfish guarantee: it does not compose and stays out of DP totals
  (docs/explanation/model.md#pufferfish-guarantees).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import _validate as check
from ._validate import Number
from .errors import MechanismInputError
from .noise import _rng, gaussian

PSD_TOLERANCE = 1e-12


@dataclass(frozen=True, slots=True)
class AttributePrivacyGuarantee:
    """(epsilon, delta)-dataset attribute privacy for the means of `secrets` (Zhang et al., Def. 3).

    query: the attribute whose mean was released. sigma2: the added noise
    variance. sensitivity / conditional_variance: Delta_i F and Var(F | g_i)
    per protected attribute, in the order of `secrets`. covariance: the
    assumed V over `attributes` (row-major). diameters: d(U^i) per secret.
    """

    query: str
    secrets: tuple[str, ...]
    epsilon: Number
    delta: Number
    sigma2: float
    n: int
    sensitivity: tuple[float, ...]
    conditional_variance: tuple[float, ...]
    diameters: tuple[float, ...]
    attributes: tuple[str, ...]
    covariance: tuple[tuple[float, ...], ...]
    assumption: str = "records i.i.d. multivariate Gaussian with the recorded covariance"
    notion: str = "dataset-attribute-privacy"


def gaussian_constant(delta: Number) -> float:
    """c = sqrt(2 ln(1.25/delta)) (Zhang et al., Algorithm 1; Dwork and Roth 2014, Theorem A.1)."""
    delta = check.open_unit_interval("delta", delta)
    return math.sqrt(2.0 * math.log(1.25 / float(delta)))


def attribute_private_variance(
    covariance: pd.DataFrame,
    query: str,
    protected: Sequence[str],
    n: int,
    diameters: float | Mapping[str, float],
    epsilon: Number,
    delta: Number,
) -> tuple[float, tuple[float, ...], tuple[float, ...]]:
    """sigma^2 of Algorithm 1 for the mean of `query` protecting the means of `protected`
    (Zhang et al., section 4.3), with Delta_i F and Var(F | g_i) per protected attribute."""
    matrix = _covariance(covariance)
    names = list(covariance.columns)
    secrets = _protected(protected, query, names)
    n = check.positive_int("n", n)
    epsilon = check.positive_number("epsilon", epsilon)
    if epsilon >= 1:
        raise MechanismInputError(
            "epsilon",
            f"the Gaussian constant c = sqrt(2 ln(1.25/delta)) is proven for epsilon < 1 "
            f"(Dwork and Roth 2014, Theorem A.1), found {epsilon!r}",
        )
    c = gaussian_constant(delta)
    widths = _diameters(diameters, secrets)
    j = names.index(query)
    sigma2 = 0.0
    sensitivities, variances = [], []
    for name, width in zip(secrets, widths):
        i = names.index(name)
        v_ii, v_ij, v_jj = matrix[i, i], matrix[i, j], matrix[j, j]
        if v_ii <= 0:
            raise MechanismInputError("covariance", f"protected attribute {name!r} has variance {v_ii!r}; it must be > 0")
        sensitivity = abs(v_ij) / v_ii * width  # Delta_i F = (V_ij/V_ii) d(U), section 4.3
        conditional = max(0.0, (v_jj - v_ij**2 / v_ii) / n)  # Var(F | g_i), section 4.3
        sensitivities.append(float(sensitivity))
        variances.append(float(conditional))
        sigma2 = max(sigma2, (c * sensitivity / float(epsilon)) ** 2 - conditional)  # Algorithm 1
    return float(sigma2), tuple(sensitivities), tuple(variances)


def attribute_private_mean(
    data: pd.DataFrame,
    query: str,
    protected: Sequence[str],
    covariance: pd.DataFrame,
    diameters: float | Mapping[str, float],
    epsilon: Number,
    delta: Number,
    *,
    rng: np.random.Generator | None = None,
) -> tuple[float, AttributePrivacyGuarantee]:
    """The mean of `query` plus N(0, sigma^2) of Algorithm 1 (Zhang et al., section 4.3),
    protecting the means of the `protected` attributes under the assumed covariance."""
    data = check.dataframe("data", data)
    check.columns_present("query", data, [query])
    check.columns_present("protected", data, list(protected))
    values = check.numeric_column("query", data, query)
    sigma2, sensitivities, variances = attribute_private_variance(
        covariance, query, protected, len(data), diameters, epsilon, delta
    )
    noisy = float(values.mean()) + float(gaussian(_rng(rng), math.sqrt(sigma2)))
    matrix = _covariance(covariance)
    guarantee = AttributePrivacyGuarantee(
        query=query,
        secrets=tuple(protected),
        epsilon=epsilon,
        delta=delta,
        sigma2=sigma2,
        n=len(data),
        sensitivity=sensitivities,
        conditional_variance=variances,
        diameters=_diameters(diameters, list(protected)),
        attributes=tuple(str(c) for c in covariance.columns),
        covariance=tuple(tuple(float(x) for x in row) for row in matrix),
    )
    return noisy, guarantee


def _covariance(covariance: object) -> np.ndarray:
    if not isinstance(covariance, pd.DataFrame):
        raise MechanismInputError(
            "covariance", f"must be a DataFrame labelled by attribute, found {type(covariance).__name__}"
        )
    if list(covariance.index) != list(covariance.columns):
        raise MechanismInputError(
            "covariance",
            f"rows {list(covariance.index)!r} and columns {list(covariance.columns)!r} "
            "must name the same attributes in the same order",
        )
    try:
        matrix = covariance.to_numpy(dtype=float)
    except (TypeError, ValueError):
        raise MechanismInputError("covariance", "entries must be numbers") from None
    if matrix.size == 0 or not np.all(np.isfinite(matrix)):
        raise MechanismInputError("covariance", f"must be a non-empty matrix of finite numbers, found {matrix.tolist()!r}")
    if not np.allclose(matrix, matrix.T, rtol=1e-12, atol=1e-12):
        raise MechanismInputError("covariance", f"must be symmetric, found {matrix.tolist()!r}")
    smallest = float(np.linalg.eigvalsh(matrix).min())
    if smallest < -PSD_TOLERANCE:
        raise MechanismInputError("covariance", f"must be positive semi-definite, smallest eigenvalue {smallest!r}")
    return matrix


def _protected(protected: Sequence[str], query: str, names: list[str]) -> list[str]:
    if isinstance(protected, str) or not list(protected):
        raise MechanismInputError("protected", f"must be a non-empty list of attributes, found {protected!r}")
    secrets = list(protected)
    if query not in names:
        raise MechanismInputError("query", f"attribute {query!r} is not in the covariance; it has {names!r}")
    missing = [name for name in secrets if name not in names]
    if missing:
        raise MechanismInputError("protected", f"attribute(s) {missing!r} not in the covariance; it has {names!r}")
    return secrets


def _diameters(diameters: float | Mapping[str, float], secrets: Sequence[str]) -> tuple[float, ...]:
    if isinstance(diameters, Mapping):
        missing = [name for name in secrets if name not in diameters]
        if missing:
            raise MechanismInputError("diameters", f"no diameter d(U) given for {missing!r}")
        widths = [diameters[name] for name in secrets]
    else:
        widths = [diameters] * len(secrets)
    return tuple(float(check.positive_number("diameters", width)) for width in widths)
