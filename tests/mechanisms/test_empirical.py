"""Empirical privacy-loss checks: run a mechanism many times on two neighbouring inputs and
bound the privacy loss from the output histograms.

For every output bin with enough mass on both inputs, Clopper-Pearson intervals
on the two bin probabilities (Bonferroni over the bins, overall confidence
1 - 1e-6) give a lower confidence bound on the ratio P(bin | D1)/P(bin | D2) and
its inverse. If the mechanism is epsilon-private, that lower bound exceeds
e^epsilon with probability at most 1e-6. A last test shows the check has power:
it flags a guarantee recorded at half the true loss.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from ledger.mechanisms import noise, tan
from ledger.mechanisms.noise import make_rng

RUNS = 200_000
MIN_COUNT = 500
ALPHA = 1e-6


def loss_lower_bound(first: np.ndarray, second: np.ndarray, edges=None) -> tuple[float, float]:
    """(lower confidence bound, point estimate) of max_bin |ln P1(bin)/P2(bin)|.

    first, second: (runs,) or (runs, d) outputs on the two inputs; integer outputs are
    binned by value, real ones by `edges`. Bins with at least MIN_COUNT runs on either
    input are used (a bin empty on the other input bounds the loss from below too)."""
    if edges is not None:
        first, second = np.digitize(first, edges), np.digitize(second, edges)
    both = np.vstack([first.reshape(len(first), -1), second.reshape(len(second), -1)])
    both = both - both.min(axis=0)
    codes = np.ravel_multi_index(tuple(both.T), tuple(both.max(axis=0) + 1))
    count_first = np.bincount(codes[: len(first)], minlength=codes.max() + 1)
    count_second = np.bincount(codes[len(first) :], minlength=codes.max() + 1)
    usable = np.maximum(count_first, count_second) >= MIN_COUNT
    k1, k2 = count_first[usable], count_second[usable]
    level = ALPHA / usable.sum()  # Bonferroni over the bins, two sides each
    low1, high1 = _clopper_pearson(k1, len(first), level)
    low2, high2 = _clopper_pearson(k2, len(second), level)
    with np.errstate(divide="ignore"):
        lower = max(np.log(low1 / high2).max(), np.log(low2 / high1).max())
    seen = (k1 > 0) & (k2 > 0)
    point = np.abs(np.log((k1[seen] / len(first)) / (k2[seen] / len(second)))).max() if seen.any() else math.inf
    return float(lower), float(point)


def _clopper_pearson(k: np.ndarray, n: int, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact two-sided binomial interval at confidence 1 - level."""
    low = np.where(k > 0, stats.beta.ppf(level / 2, np.maximum(k, 1), n - k + 1), 0.0)
    high = np.where(k < n, stats.beta.ppf(1 - level / 2, k + 1, np.maximum(n - k, 1)), 1.0)
    return low, high


def test_geometric_count_loss_within_epsilon():
    epsilon = 1.0
    data = np.arange(30)
    _, record = noise.noisy_count(pd.DataFrame({"x": data}), epsilon, where=data < 10, rng=make_rng(0))
    rng = make_rng(1)
    on_first = 10 + noise.two_sided_geometric(rng, record.scale, size=RUNS)
    on_second = 11 + noise.two_sided_geometric(rng, record.scale, size=RUNS)  # one more record matches
    lower, point = loss_lower_bound(on_first, on_second)
    assert lower <= record.epsilon
    assert point > 0.9 * record.epsilon  # the bins do reach the worst case


def test_geometric_histogram_under_replacement_within_epsilon():
    # replacing one record moves a count between the two cells: (5, 5) vs (4, 6)
    epsilon = 1.0
    _, record = noise.noisy_crosstab(pd.DataFrame({"c": ["a", "b"]}), ["c"], epsilon, rng=make_rng(0))
    rng = make_rng(2)
    on_first = np.array([5, 5]) + noise.two_sided_geometric(rng, record.scale, size=(RUNS, 2))
    on_second = np.array([4, 6]) + noise.two_sided_geometric(rng, record.scale, size=(RUNS, 2))
    lower, point = loss_lower_bound(on_first, on_second)
    assert lower <= record.epsilon
    assert point > 0.8 * record.epsilon


def test_laplace_sum_loss_within_epsilon():
    epsilon = 0.8
    first = pd.DataFrame({"v": [1.0, 5.0, 9.0, 0.0]})
    second = pd.DataFrame({"v": [1.0, 5.0, 9.0, 10.0]})  # one record replaced, across [0, 10]
    _, record = noise.laplace_sum(first, "v", 0.0, 10.0, epsilon, rng=make_rng(0))
    rng = make_rng(3)
    # the mechanism's output on each neighbour: the clipped sum plus its Laplace noise
    on_first = first["v"].clip(0, 10).sum() + noise.laplace(rng, record.scale, size=RUNS)
    on_second = second["v"].clip(0, 10).sum() + noise.laplace(rng, record.scale, size=RUNS)
    edges = np.arange(-40.0, 80.0, 2.0)
    lower, point = loss_lower_bound(on_first, on_second, edges)
    assert lower <= record.epsilon
    assert point > 0.8 * record.epsilon


def test_tan_two_cell_row_loss_within_epsilon():
    epsilon = 1.0
    _, record = tan.algorithm1(tan.table2_counts(), epsilon, make_rng(0))
    rng = make_rng(4)
    on_first = tan.algorithm1_row([5, 5], record.epsilon, rng, size=RUNS)[:, 0]
    on_second = tan.algorithm1_row([4, 6], record.epsilon, rng, size=RUNS)[:, 0]
    lower, point = loss_lower_bound(on_first, on_second)
    assert lower <= record.epsilon
    assert point > 0.9 * record.epsilon


def test_tan_three_cell_row_loss_within_epsilon():
    epsilon = 1.0
    rng = make_rng(5)
    on_first = tan.algorithm1_row([5, 5, 5], epsilon, rng, size=RUNS)
    on_second = tan.algorithm1_row([4, 6, 5], epsilon, rng, size=RUNS)
    lower, point = loss_lower_bound(on_first, on_second)
    assert lower <= epsilon
    assert point > 0.6 * epsilon


def test_the_check_flags_an_overclaimed_guarantee():
    # the pair noise with exponent 1 recorded as 0.5-private (half its true loss) is caught
    rng = make_rng(6)
    on_first = tan.algorithm1_row([5, 5, 5], 1.0, rng, size=RUNS)
    on_second = tan.algorithm1_row([4, 6, 5], 1.0, rng, size=RUNS)
    lower, _ = loss_lower_bound(on_first, on_second)
    assert lower > 0.5
    # and a two-cell row released exactly (the paper's "n_i > 2") is caught at any epsilon
    lower, point = loss_lower_bound(np.full(RUNS, 5), np.full(RUNS, 4))
    assert lower > 9 and point == math.inf
