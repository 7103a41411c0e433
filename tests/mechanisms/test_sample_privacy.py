"""Perfect sample privacy (Rassouli, Rosas and Gündüz): leakage, optimal mappings, joint leakage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.mechanisms import sample_privacy as sp

TWO_FAIR_BITS = np.full((2, 2), 0.25)
THREE_FAIR_BITS = np.full((2, 2, 2), 0.125)


def h(p: float) -> float:
    return 0.0 if p in (0.0, 1.0) else -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def test_xor_of_two_fair_bits_is_perfectly_sample_private():
    xor = sp.deterministic_mapping(lambda a, b: a ^ b, [2, 2], 2)
    leakage = sp.sample_leakage(TWO_FAIR_BITS, xor)
    assert leakage.perfect and leakage.leakage_bits == (0.0, 0.0)
    assert leakage.utility_bits == pytest.approx(1.0)  # I(X; Y) = H(Y) = 1 bit


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 4), st.integers(2, 3))
def test_modular_sum_of_uniform_samples_is_perfectly_sample_private(modulus, n):
    joint = np.full((modulus,) * n, 1.0 / modulus**n)
    leakage = sp.sample_leakage(joint, sp.modular_sum_mapping([modulus] * n, modulus))
    assert leakage.perfect
    assert leakage.utility_bits == pytest.approx(math.log2(modulus))


def test_modular_sum_leaks_when_a_sample_is_not_uniform():
    # X1 fair, X2 ~ Bernoulli(1/4): Y = X1 xor X2 is X1 through a BSC(1/4),
    # so I(X1; Y) = 1 - h(1/4); X2 is hidden by the fair X1
    joint = np.outer([0.5, 0.5], [0.75, 0.25])
    leakage = sp.sample_leakage(joint, sp.modular_sum_mapping([2, 2], 2))
    assert leakage.leakage_bits[0] == pytest.approx(1 - h(0.25))
    assert leakage.leakage_bits[1] == pytest.approx(0.0, abs=1e-15)
    assert not leakage.perfect


def test_latent_utility():
    # W fair, X1 = W, X2 independent fair: Y = X1 xor X2 says nothing of W
    joint = np.zeros((2, 2, 2))
    for w in range(2):
        for x2 in range(2):
            joint[w, w, x2] = 0.25
    xor = sp.deterministic_mapping(lambda a, b: a ^ b, [2, 2], 2)
    assert sp.sample_leakage(joint, xor, latent=True).utility_bits == pytest.approx(0.0, abs=1e-15)


# --- the optimal mapping (Theorem 1) ---------------------------------------


def test_optimal_self_disclosure_of_two_fair_bits_is_one_bit():
    # I(X; Y) = I(X2; Y | X1) <= H(X2 | X1) = 1 when Y is independent of X1; XOR attains it
    result = sp.optimal_mapping(TWO_FAIR_BITS)
    assert result.utility_bits == pytest.approx(1.0)
    assert result.n_extreme_points == 2
    leakage = sp.sample_leakage(TWO_FAIR_BITS, result.mapping)
    assert leakage.perfect and leakage.utility_bits == pytest.approx(1.0)


def test_optimal_self_disclosure_of_three_fair_bits_is_two_bits():
    # upper bound H(X2, X3 | X1) = 2; (X1 xor X2, X2 xor X3) is sample-private and carries 2 bits
    result = sp.optimal_mapping(THREE_FAIR_BITS)
    assert result.utility_bits == pytest.approx(2.0)
    assert sp.sample_leakage(THREE_FAIR_BITS, result.mapping).perfect
    pair = sp.joint_mapping(
        [
            sp.deterministic_mapping(lambda a, b, c: a ^ b, [2, 2, 2], 2),
            sp.deterministic_mapping(lambda a, b, c: b ^ c, [2, 2, 2], 2),
        ],
        3,
    )
    achieved = sp.sample_leakage(THREE_FAIR_BITS, pair)
    assert achieved.perfect and achieved.utility_bits == pytest.approx(2.0)


def test_a_single_sample_cannot_be_disclosed():
    # W = X1: any Y independent of X1 has I(W; Y) = 0 (Proposition 1)
    joint = np.zeros((2, 2, 2))
    for x1 in range(2):
        for x2 in range(2):
            joint[x1, x1, x2] = [0.2, 0.8][x1] * [0.3, 0.7][x2]
    assert sp.optimal_mapping(joint, latent=True).utility_bits == pytest.approx(0.0, abs=1e-9)


def two_binary_samples_by_hand(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Section III-B: the null space of A is spanned by (1, -1, -1, 1) over (00, 01, 10, 11);
    S has the two extreme points p + t v at t = min(p01, p10) and t = -min(p00, p11)."""
    v = np.array([1.0, -1.0, -1.0, 1.0])
    t_high, t_low = min(p[1], p[2]), -min(p[0], p[3])
    first, second = p + t_high * v, p + t_low * v
    weight = -t_low / (t_high - t_low)  # p = weight * first + (1 - weight) * second
    return first, second, weight


def test_two_correlated_bits_match_the_closed_form():
    p = np.array([0.4, 0.1, 0.2, 0.3])
    first, second, weight = two_binary_samples_by_hand(p)
    assert weight == pytest.approx(0.75)
    entropy = lambda q: -sum(x * math.log2(x) for x in q if x > 0)  # noqa: E731
    expected = entropy(p) - weight * entropy(first) - (1 - weight) * entropy(second)
    result = sp.optimal_mapping(p.reshape(2, 2))
    assert result.utility_bits == pytest.approx(expected, abs=1e-9)
    assert sp.sample_leakage(p.reshape(2, 2), result.mapping).perfect


def test_noisy_observations_of_a_latent_bit_match_the_closed_form():
    # W fair; X1 = W through BSC(0.1), X2 = W through BSC(0.2), independently
    joint = np.zeros((2, 2, 2))
    for w in range(2):
        for x1 in range(2):
            for x2 in range(2):
                joint[w, x1, x2] = 0.5 * (0.9 if x1 == w else 0.1) * (0.8 if x2 == w else 0.2)
    p = joint.sum(axis=0).ravel()
    first, second, weight = two_binary_samples_by_hand(p)
    w_given_x = joint.reshape(2, 4) / p
    posterior_first, posterior_second = w_given_x @ first, w_given_x @ second
    expected = 1.0 - weight * h(posterior_first[0]) - (1 - weight) * h(posterior_second[0])
    result = sp.optimal_mapping(joint, latent=True)
    assert result.utility_bits == pytest.approx(expected, abs=1e-9)
    leakage = sp.sample_leakage(joint, result.mapping, latent=True)
    assert leakage.perfect and leakage.utility_bits == pytest.approx(expected, abs=1e-9)


def test_two_fair_ternary_samples_disclose_log2_3():
    joint = np.full((3, 3), 1 / 9)
    result = sp.optimal_mapping(joint)
    assert result.utility_bits == pytest.approx(math.log2(3))  # bound H(X2 | X1) = log2 3, attained
    assert sp.sample_leakage(joint, result.mapping).perfect


# --- joint leakage ---------------------------------------------------------


def test_the_design_example_y2_equal_x2_is_not_sample_private():
    # docs/explanation/model.md#pufferfish-guarantees cites Y1 = X1 xor X2 and Y2 = X2; Y2 alone reveals X2 entirely
    y1 = sp.deterministic_mapping(lambda a, b: a ^ b, [2, 2], 2)
    y2 = sp.deterministic_mapping(lambda a, b: b, [2, 2], 2)
    assert sp.sample_leakage(TWO_FAIR_BITS, y1).perfect
    assert sp.sample_leakage(TWO_FAIR_BITS, y2).leakage_bits[1] == pytest.approx(1.0)
    both = sp.sample_leakage(TWO_FAIR_BITS, sp.joint_mapping([y1, y2], 2))
    assert both.leakage_bits == pytest.approx((1.0, 1.0))  # together they reveal X1 as well


def test_each_sample_private_but_jointly_revealing():
    # three fair bits: Y1 = X1 xor X2 and Y2 = X1 xor X2 xor X3 are each perfectly
    # sample-private, but Y1 xor Y2 = X3
    y1 = sp.deterministic_mapping(lambda a, b, c: a ^ b, [2, 2, 2], 2)
    y2 = sp.deterministic_mapping(lambda a, b, c: a ^ b ^ c, [2, 2, 2], 2)
    assert sp.sample_leakage(THREE_FAIR_BITS, y1).perfect
    assert sp.sample_leakage(THREE_FAIR_BITS, y2).perfect
    both = sp.sample_leakage(THREE_FAIR_BITS, sp.joint_mapping([y1, y2], 3))
    assert both.leakage_bits == pytest.approx((0.0, 0.0, 1.0), abs=1e-12)
    assert both.max_leakage_bits == pytest.approx(1.0) and not both.perfect


def test_two_fair_bits_cannot_be_split_that_way():
    # any sample-private output of two fair bits depends on X only through X1 xor X2, so a noisy
    # and an exact copy of the XOR stay jointly private
    noisy_xor = np.zeros((2, 2, 2))
    for a in range(2):
        for b in range(2):
            noisy_xor[a, b] = [0.8, 0.2] if a ^ b == 0 else [0.2, 0.8]
    exact_xor = sp.deterministic_mapping(lambda a, b: a ^ b, [2, 2], 2)
    assert sp.sample_leakage(TWO_FAIR_BITS, sp.joint_mapping([noisy_xor, exact_xor], 2)).perfect


def test_joint_mapping_is_a_conditional_product():
    y1 = sp.modular_sum_mapping([3, 3], 3)
    y2 = np.full((3, 3, 2), 0.5)
    joint = sp.joint_mapping([y1, y2], 2)
    assert joint.shape == (3, 3, 3, 2)
    assert np.allclose(joint.sum(axis=(2, 3)), 1.0)
    assert joint[1, 2, 0, 1] == 0.5 and joint[1, 2, 1, 0] == 0.0
