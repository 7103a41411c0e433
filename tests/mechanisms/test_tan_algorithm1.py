"""Tan's Algorithm 1 (section 5.2), corrected per docs/explanation/model.md#notes-on-the-papers-algorithms: exact margins, integers,
unbiasedness, and a recorded epsilon equal to the exact worst-case privacy loss."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.mechanisms import tan
from ledger.mechanisms.noise import make_rng

TABLE2_TOTALS = [231, 392, 777]  # Tan, Table 2, "Total" column


def test_table2_is_the_papers_table():
    counts = tan.table2_counts()
    assert counts.sum(axis=1).tolist() == TABLE2_TOTALS
    assert counts.loc["Bachelor of Science"].tolist() == [1, 13, 44, 92, 131, 75, 21, 15]
    assert counts.loc["Bachelor of Engineering", "$60,000 - $79,999"] == 237
    assert counts.to_numpy().sum() == 1400


def test_table2_records_expand_to_the_same_counts():
    records = tan.table2_records()
    assert len(records) == 1400
    crosstab = pd.crosstab(records["degree_programme"], records["income_band"])
    assert crosstab.to_numpy().tolist() == tan.table2_counts().to_numpy().tolist()


def test_the_papers_table3_keeps_the_table2_margins():
    assert tan.table3_counts().sum(axis=1).tolist() == TABLE2_TOTALS


def test_algorithm1_on_table2_keeps_margins_and_integers():
    noisy, record = tan.algorithm1(tan.table2_counts(), 1.0, make_rng(2024))
    assert noisy.sum(axis=1).tolist() == TABLE2_TOTALS
    assert noisy.dtypes.map(lambda dtype: np.issubdtype(dtype, np.integer)).all()
    assert not noisy.equals(tan.table2_counts())  # noise was added
    assert record.epsilon == 1.0 and record.pair_noise_exponent == pytest.approx(1.0)
    assert record.pair_noise_exponent <= 1.0
    assert record.margin == "degree_programme" and record.protected == "income_band"
    assert record.exact_variables == ("degree_programme",) and record.noised_rows == 3
    assert record.relation == "replace" and record.notion == "pure"


def test_from_records_gives_the_same_table_shape_and_margins():
    noisy, record = tan.consistent_count_table(
        tan.table2_records(), "degree_programme", "income_band", 0.5, rng=make_rng(1)
    )
    assert list(noisy.index) == list(tan.DEGREE_PROGRAMMES)
    assert list(noisy.columns) == list(tan.INCOME_BANDS)
    assert noisy.sum(axis=1).tolist() == TABLE2_TOTALS
    assert record.epsilon == 0.5


def test_algorithm1_is_unbiased_on_table2():
    # E g(i, j) = f(i, j) (Prop 5.1.4). Each of the 8 cells receives 7 pair terms,
    # each of variance 2r/(1-r)^2, r = e^-epsilon.
    epsilon, runs = 1.0, 20_000
    rng = make_rng(99)
    r = math.exp(-epsilon)
    standard_error = math.sqrt(7 * 2 * r / (1 - r) ** 2 / runs)
    for row in tan.table2_counts().to_numpy():
        draws = tan.algorithm1_row(row, epsilon, rng, size=runs)
        assert (draws.sum(axis=1) == row.sum()).all()
        assert np.abs(draws.mean(axis=0) - row).max() < 4.5 * standard_error
        assert np.allclose(draws.var(axis=0), 7 * 2 * r / (1 - r) ** 2, rtol=0.06)


def test_the_dataframe_path_is_unbiased_too():
    rng = make_rng(5)
    runs = np.stack([tan.algorithm1(tan.table2_counts(), 2.0, rng)[0].to_numpy() for _ in range(400)])
    r = math.exp(-2.0)
    standard_error = math.sqrt(7 * 2 * r / (1 - r) ** 2 / 400)
    assert np.abs(runs.mean(axis=0) - tan.table2_counts().to_numpy()).max() < 4.5 * standard_error


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 500), min_size=1, max_size=7), min_size=1, max_size=5).filter(
        lambda rows: len({len(row) for row in rows}) == 1
    ),
    st.floats(0.05, 5.0),
    st.integers(0, 2**32),
)
def test_algorithm1_keeps_every_row_total_for_any_counts(rows, epsilon, seed):
    table = pd.DataFrame(rows)
    noisy, _ = tan.algorithm1(table, epsilon, make_rng(seed))
    assert noisy.sum(axis=1).tolist() == table.sum(axis=1).tolist()
    assert all(np.issubdtype(dtype, np.integer) for dtype in noisy.dtypes)


def test_two_cell_rows_are_noised():
    # the paper's "if n_i > 2" would release a two-cell row exactly (docs/explanation/model.md#notes-on-the-papers-algorithms)
    distribution = tan.row_output_distribution([5, 5], 1.0)
    r = math.exp(-1.0)
    unchanged = distribution.probabilities[(distribution.outputs == [5, 5]).all(axis=1)].sum()
    assert unchanged == pytest.approx((1 - r) / (1 + r))
    draws = tan.algorithm1_row([5, 5], 1.0, make_rng(0), size=200)
    assert (draws[:, 0] != 5).any()


def test_two_cell_distribution_is_the_geometric_law():
    # one pair term: output (5 + z, 5 - z) with probability (1 - r)/(1 + r) r^|z|
    a = 0.7
    distribution = tan.row_output_distribution([5, 5], a)
    r = math.exp(-a)
    for output, probability in zip(distribution.outputs, distribution.probabilities):
        z = output[0] - 5
        assert output[1] == 5 - z
        assert probability == pytest.approx((1 - r) / (1 + r) * r ** abs(z), rel=1e-12, abs=1e-300)
    assert distribution.missing_mass < 1e-12
    assert 1 - distribution.probabilities.sum() <= distribution.missing_mass + 1e-15


def test_three_cell_distribution_matches_an_independent_convolution():
    # cell 0 receives b01 + b02: its law is the convolution of two pair laws
    a = 1.0
    distribution = tan.row_output_distribution([3, 4, 5], a)
    assert (distribution.outputs.sum(axis=1) == 12).all()
    bound = distribution.bound
    r = math.exp(-a)
    pair = np.array([(1 - r) / (1 + r) * r ** abs(z) for z in range(-bound, bound + 1)])
    first_cell = np.convolve(pair, pair)  # values -2T..2T
    for value in range(-3, 4):
        mass = distribution.probabilities[distribution.outputs[:, 0] == 3 + value].sum()
        assert mass == pytest.approx(first_cell[value + 2 * bound], abs=1e-12)


@pytest.mark.parametrize("exponent", [0.5, 1.0, 2.0])
def test_two_cell_privacy_loss_is_exactly_the_exponent_at_the_centre(exponent):
    loss = tan.max_row_privacy_loss([5, 5], exponent)
    assert loss.max_loss == pytest.approx(exponent, abs=1e-12)
    assert loss.loss_lower >= exponent - 1e-6 and loss.loss_upper <= exponent + 1e-5
    # attained in the interior: at the unchanged output (5, 5), P = c vs c r
    assert loss.argmax == (5, 5)


@pytest.mark.parametrize("exponent", [0.5, 1.0, 2.0])
def test_three_cell_privacy_loss_reaches_the_exponent(exponent):
    loss = tan.max_row_privacy_loss([5, 5, 5], exponent)
    # the supremum is the exponent, approached geometrically along the moved pair
    assert abs(loss.max_loss - exponent) < 2e-5
    assert loss.loss_upper <= exponent + 2e-5
    assert loss.loss_lower >= exponent - 2e-5
    loose = tan.max_row_privacy_loss([5, 5, 5], exponent, min_probability=1e-4)
    assert loose.max_loss < loss.max_loss  # further into the tail, closer to the supremum


@pytest.mark.parametrize("counts", [[5, 5], [2, 0], [5, 5, 5], [0, 1, 7]])
def test_recorded_epsilon_equals_the_worst_case_loss(counts):
    _, record = tan.algorithm1(pd.DataFrame([counts]), 0.8, make_rng(0))
    loss = tan.max_row_privacy_loss(counts, record.pair_noise_exponent)
    assert loss.loss_upper <= record.epsilon + 2e-5
    assert loss.max_loss >= record.epsilon - 2e-5


def test_the_papers_calibration_is_half_as_private_as_claimed():
    # Prop 5.1 claims epsilon for exponent epsilon/2; the exact loss is epsilon/2 (docs/explanation/model.md#notes-on-the-papers-algorithms)
    epsilon = 1.0
    loss = tan.max_row_privacy_loss([4, 6, 3], epsilon / 2)
    assert abs(loss.max_loss - epsilon / 2) < 2e-5


def test_nonnegative_post_processing_keeps_totals():
    noisy, _ = tan.algorithm1(tan.table2_counts(), 0.05, make_rng(3))
    assert (noisy.to_numpy() < 0).any()
    cleaned = tan.nonnegative(noisy)
    assert (cleaned.to_numpy() >= 0).all()
    assert cleaned.sum(axis=1).tolist() == TABLE2_TOTALS
    assert tan.nonnegative(tan.table2_counts()).equals(tan.table2_counts())


def test_nonnegative_takes_the_excess_from_the_largest_cells():
    table = pd.DataFrame([[-3, 10, 4, 1]])  # total 12
    assert tan.nonnegative(table).to_numpy().tolist() == [[0, 7, 4, 1]]


def test_demo_prints_a_table3_like_result():
    text = tan.main(seed=1)
    assert "Bachelor of Engineering" in text and "777" in text
