"""Subsampling without replacement: the tight bound ln(1 + beta (e^eps - 1)) (Balle, Barthe and
Gaboardi 2018) that the ledger records, and Clifton et al.'s Theorem 2, checked by brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.mechanisms import subsampling
from ledger.mechanisms.noise import make_rng


def test_formula_by_hand():
    # eps = 1, beta = 0.1: (e * 0.1 + 0.9)/0.9 = 1.3020313...; ln of it = 0.26392559...
    assert subsampling.theorem2_epsilon(1.0, 0.1) == pytest.approx(0.2639255944, rel=1e-9)
    assert subsampling.theorem2_epsilon(1.0, 1.0) == 1.0


def test_record_the_tight_bound():
    # Balle, Barthe and Gaboardi 2018: ln(1 + beta (e - 1)); beta = 0.5: ln((e + 1)/2) = 0.62011450695827...
    assert subsampling.subsampled_epsilon(1.0, 0.5) == pytest.approx(0.6201145069582775, rel=1e-12)
    assert subsampling.subsampled_epsilon(1.0, 0.5) >= math.log((math.e + 1) / 2)
    # the figures: eps 1 on a 10% sample 0.1586 (Clifton: 0.2639); eps 0.1 on 2%: 0.00210 (0.02230)
    assert subsampling.subsampled_epsilon(1.0, 0.1) == pytest.approx(math.log1p(0.1 * math.expm1(1.0)), rel=1e-12)
    assert round(subsampling.subsampled_epsilon(1.0, 0.1), 4) == 0.1586
    assert round(subsampling.subsampled_epsilon(0.1, 0.02), 5) == 0.00210
    assert round(subsampling.theorem2_epsilon(0.1, 0.02), 5) == 0.02230
    # smaller than Clifton et al.'s by exactly -ln(1 - beta) (docs/explanation/model.md#subsampling)
    for beta in (0.01, 0.1, 0.5, 0.9):
        gap = subsampling.theorem2_epsilon(1.0, beta) - subsampling.subsampled_epsilon(1.0, beta)
        assert gap == pytest.approx(-math.log1p(-beta), rel=1e-9)


@settings(max_examples=80, deadline=None)
@given(st.floats(0.01, 10.0), st.floats(0.001, 0.999), st.floats(0.001, 0.999))
def test_monotone_in_beta_and_below_epsilon_exactly_for_small_beta(epsilon, beta_a, beta_b):
    low, high = sorted((beta_a, beta_b))
    assert subsampling.theorem2_epsilon(epsilon, low) <= subsampling.theorem2_epsilon(epsilon, high) + 1e-12
    threshold = math.expm1(epsilon) / (2 * math.exp(epsilon) - 1)
    amplified = subsampling.theorem2_epsilon(epsilon, low) < epsilon
    if abs(low - threshold) > 1e-9:
        assert amplified == (low < threshold)
    assert subsampling.subsampled_epsilon(epsilon, low) <= epsilon


def _randomized_response_counts(bits: tuple[int, ...], n_sample: int, epsilon: float) -> np.ndarray:
    """Exact law of the number of reported ones when each of n_sample records drawn uniformly
    without replacement is reported by randomized response (eps-DP under replacement)."""
    keep = math.exp(epsilon) / (1 + math.exp(epsilon))  # report the true bit
    total = np.zeros(n_sample + 1)
    subsets = list(itertools.combinations(range(len(bits)), n_sample))
    for subset in subsets:
        law = np.array([1.0])
        for index in subset:
            one = keep if bits[index] else 1 - keep
            law = np.convolve(law, [1 - one, one])
        total += law
    return total / len(subsets)


@pytest.mark.parametrize(("n", "n_sample"), [(4, 1), (5, 2), (6, 2), (6, 3), (7, 6)])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
def test_brute_force_loss_is_within_theorem2(n, n_sample, epsilon):
    worst = 0.0
    for bits in itertools.product((0, 1), repeat=n):
        law = _randomized_response_counts(bits, n_sample, epsilon)
        for changed in range(n):  # replace one record: flip its bit
            neighbour = bits[:changed] + (1 - bits[changed],) + bits[changed + 1 :]
            other = _randomized_response_counts(neighbour, n_sample, epsilon)
            worst = max(worst, float(np.abs(np.log(law / other)).max()))
    beta = n_sample / n
    assert worst <= subsampling.subsampled_epsilon(epsilon, beta) + 1e-12  # the tight bound holds
    assert worst <= subsampling.theorem2_epsilon(epsilon, beta) + 1e-12
    assert worst <= epsilon + 1e-12
    if subsampling.theorem2_epsilon(epsilon, beta) < epsilon:
        assert worst < epsilon  # the amplification is real


def test_draw_subsample_is_uniform_without_replacement():
    data = pd.DataFrame({"id": range(10)})
    sample, record = subsampling.draw_subsample(data, 3, 1.0, make_rng(0))
    assert len(sample) == 3 and sample["id"].is_unique and set(sample["id"]) <= set(range(10))
    assert (record.n_total, record.n_sample, record.beta) == (10, 3, 0.3)
    assert record.epsilon == pytest.approx(math.log1p(0.3 * math.expm1(1.0)))
    assert record.relation == "replace"
    rng = make_rng(1)
    hits = np.zeros(10)
    for _ in range(3000):
        hits[subsampling.draw_subsample(data, 3, 1.0, rng)[0]["id"].to_numpy()] += 1
    # each record is drawn with probability 3/10
    assert np.abs(hits / 3000 - 0.3).max() < 5 * math.sqrt(0.3 * 0.7 / 3000)
