"""Attribute-private Gaussian mechanism (Zhang, Ohrimenko and Cummings, Algorithm 1, section 4.3)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ledger.mechanisms import attribute
from ledger.mechanisms.noise import make_rng

NAMES = ["height", "weight", "sat", "age"]
# a covariance built as L L^T, so positive definite by construction
_L = np.array([[2.0, 0, 0, 0], [1.5, 1.0, 0, 0], [0.3, -0.4, 1.2, 0], [0.0, 0.1, 0.2, 0.5]])
COVARIANCE = pd.DataFrame(_L @ _L.T, index=NAMES, columns=NAMES)


def conditional_variance_of_mean(covariance: np.ndarray, query: int, secret: int, n: int) -> float:
    """Var(mean_query | mean_secret) as the Schur complement of the sample means' covariance V/n."""
    sigma = covariance / n
    joint = sigma[np.ix_([query, secret], [query, secret])]
    return float(joint[0, 0] - joint[0, 1:] @ np.linalg.inv(joint[1:, 1:]) @ joint[1:, 0])


def regression_slope(covariance: np.ndarray, query: int, secret: int) -> float:
    """E[mean_query | mean_secret = a] moves by this per unit of a (Sigma_qs Sigma_ss^-1)."""
    return covariance[query, secret] / covariance[secret, secret]


@pytest.mark.parametrize("protected", [["height"], ["height", "sat"], ["sat", "age", "height"]])
def test_variance_against_the_conditional_gaussian(protected):
    n, epsilon, delta, width = 40, 0.5, 1e-5, 3.0
    sigma2, sensitivities, variances = attribute.attribute_private_variance(
        COVARIANCE, "weight", protected, n, width, epsilon, delta
    )
    matrix = COVARIANCE.to_numpy()
    c = math.sqrt(2 * math.log(1.25 / delta))
    j = NAMES.index("weight")
    expected = 0.0
    for k, name in enumerate(protected):
        i = NAMES.index(name)
        conditional = conditional_variance_of_mean(matrix, j, i, n)
        shift = abs(regression_slope(matrix, j, i)) * width  # |E[F | a] - E[F | b]| over the diameter
        assert variances[k] == pytest.approx(conditional, rel=1e-12)
        assert sensitivities[k] == pytest.approx(shift, rel=1e-12)
        expected = max(expected, (c * shift / epsilon) ** 2 - conditional)
    assert sigma2 == pytest.approx(expected, rel=1e-12)


def test_conditional_variance_and_sensitivity_by_simulation():
    # draw datasets of n Gaussian records; regress mean(weight) on mean(height)
    n, datasets = 25, 20_000
    rng = np.random.default_rng(3)
    records = rng.multivariate_normal(np.zeros(4), COVARIANCE.to_numpy(), size=(datasets, n))
    means = records.mean(axis=1)
    slope, intercept, *_ = stats.linregress(means[:, 0], means[:, 1])
    residual = means[:, 1] - (intercept + slope * means[:, 0])
    _, sensitivities, variances = attribute.attribute_private_variance(COVARIANCE, "weight", ["height"], n, 1.0, 0.5, 1e-5)
    assert slope == pytest.approx(sensitivities[0], rel=0.03)  # diameter 1: Delta = slope
    assert residual.var() == pytest.approx(variances[0], rel=0.04)


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 0.9])
def test_released_mean_satisfies_epsilon_delta_exactly(epsilon):
    # Given a secret, the output is N(mu_a, s^2), s^2 = Var(F | g_i) + sigma^2. The exact delta of
    # two Gaussians with mean gap D at epsilon (Balle and Wang 2018, Theorem 8) must be <= delta.
    delta, n, width = 1e-6, 30, 2.0
    sigma2, sensitivities, variances = attribute.attribute_private_variance(
        COVARIANCE, "weight", ["height", "sat"], n, width, epsilon, delta
    )
    for gap, conditional in zip(sensitivities, variances):
        s = math.sqrt(conditional + sigma2)
        exact = stats.norm.cdf(gap / (2 * s) - epsilon * s / gap) - math.exp(epsilon) * stats.norm.cdf(
            -gap / (2 * s) - epsilon * s / gap
        )
        assert exact <= delta


def test_uncorrelated_query_needs_no_noise():
    names = ["x", "y"]
    covariance = pd.DataFrame([[1.0, 0.0], [0.0, 4.0]], index=names, columns=names)
    data = pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [5.0, 7.0, 9.0]})
    value, guarantee = attribute.attribute_private_mean(data, "y", ["x"], covariance, 10.0, 0.5, 1e-5, rng=make_rng(0))
    assert guarantee.sigma2 == 0.0 and value == 7.0


def test_noise_grows_with_the_correlation():
    names = ["x", "y"]
    sigmas = []
    for covariance_xy in [0.1, 0.5, 0.9]:
        covariance = pd.DataFrame([[1.0, covariance_xy], [covariance_xy, 1.0]], index=names, columns=names)
        sigmas.append(attribute.attribute_private_variance(covariance, "y", ["x"], 10, 1.0, 0.5, 1e-5)[0])
    assert sigmas[0] < sigmas[1] < sigmas[2]  # Zhang et al., remark after section 4.3


def test_sampling_noise_can_cover_the_whole_requirement():
    # sigma^2 is clamped at 0 when Var(F | g_i) already exceeds (c Delta/eps)^2
    names = ["x", "y"]
    covariance = pd.DataFrame([[1.0, 0.01], [0.01, 100.0]], index=names, columns=names)
    sigma2, _, variances = attribute.attribute_private_variance(covariance, "y", ["x"], 2, 0.1, 0.9, 0.1)
    assert sigma2 == 0.0 and variances[0] > 0


def test_release_record_states_secrets_and_assumptions():
    rng = np.random.default_rng(1)
    data = pd.DataFrame(rng.multivariate_normal(np.zeros(4), COVARIANCE.to_numpy(), size=50), columns=NAMES)
    value, guarantee = attribute.attribute_private_mean(
        data, "weight", ["height"], COVARIANCE, {"height": 2.0}, 0.5, 1e-5, rng=make_rng(2)
    )
    assert guarantee.secrets == ("height",) and guarantee.query == "weight"
    assert guarantee.epsilon == 0.5 and guarantee.delta == 1e-5 and guarantee.n == 50
    assert guarantee.diameters == (2.0,) and guarantee.attributes == tuple(NAMES)
    assert np.allclose(guarantee.covariance, COVARIANCE.to_numpy())
    assert guarantee.sigma2 > 0 and value != data["weight"].mean()
    assert guarantee.notion == "dataset-attribute-privacy"


def test_added_noise_has_the_computed_variance():
    rng = np.random.default_rng(1)
    data = pd.DataFrame(rng.multivariate_normal(np.zeros(4), COVARIANCE.to_numpy(), size=50), columns=NAMES)
    noise_rng = make_rng(7)
    values = np.array(
        [
            attribute.attribute_private_mean(data, "weight", ["height"], COVARIANCE, 1.0, 0.5, 1e-3, rng=noise_rng)[0]
            for _ in range(3000)
        ]
    )
    sigma2 = attribute.attribute_private_variance(COVARIANCE, "weight", ["height"], 50, 1.0, 0.5, 1e-3)[0]
    assert values.var() == pytest.approx(sigma2, rel=0.08)
    assert abs(values.mean() - data["weight"].mean()) < 5 * math.sqrt(sigma2 / 3000)
