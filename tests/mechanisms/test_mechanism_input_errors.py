"""Bad input is refused with MechanismInputError naming the field and showing the value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ledger.mechanisms import (
    attribute,
    noise,
    ppercent,
    sample_privacy,
    subsampling,
    tan,
)
from ledger.mechanisms.errors import MechanismInputError

MICRODATA = pd.DataFrame({"cell": ["a", "a", "b"], "firm": [1, 2, 3], "value": [10.0, 5.0, 7.0]})
SURVEY = pd.DataFrame({"degree": ["BA", "BS", "BA"], "income": ["low", "high", "high"], "age": [30, 40, 50]})
NAMES = ["x", "y"]
COVARIANCE = pd.DataFrame([[1.0, 0.5], [0.5, 1.0]], index=NAMES, columns=NAMES)
GAUSSIAN_DATA = pd.DataFrame({"x": [0.1, 0.2, 0.3], "y": [1.0, 2.0, 3.0]})


def covariance(values):
    return pd.DataFrame(values, index=NAMES, columns=NAMES)


CASES = {
    # (call, field, text that must appear in the message)
    "epsilon zero": (lambda: noise.noisy_crosstab(SURVEY, ["degree"], 0), "epsilon", "0"),
    "epsilon negative": (lambda: noise.laplace_sum(MICRODATA, "value", 0, 10, -1.0), "epsilon", "-1.0"),
    "epsilon infinite": (lambda: tan.algorithm1(tan.table2_counts(), float("inf")), "epsilon", "inf"),
    "epsilon not a number": (lambda: noise.noisy_count(SURVEY, "1"), "epsilon", "'1'"),
    "epsilon boolean": (lambda: noise.noisy_count(SURVEY, True), "epsilon", "True"),
    "rho zero": (lambda: noise.gaussian_sum(MICRODATA, "value", 0, 10, 0.0), "rho", "0.0"),
    "unknown relation": (lambda: noise.noisy_crosstab(SURVEY, ["degree"], 1.0, relation="swap"), "relation", "'swap'"),
    "mean under add/remove": (
        lambda: noise.laplace_mean(MICRODATA, "value", 0, 10, 1.0, relation="add-remove"),
        "relation",
        "'add-remove'",
    ),
    "bounds reversed": (lambda: noise.laplace_sum(MICRODATA, "value", 10, 0, 1.0), "bounds", "10"),
    "sum of a text column": (lambda: noise.laplace_sum(SURVEY, "income", 0, 10, 1.0), "column", "'income'"),
    "missing column": (lambda: noise.laplace_sum(SURVEY, "wage", 0, 10, 1.0), "column", "'wage'"),
    "empty data for a mean": (lambda: noise.laplace_mean(SURVEY.iloc[:0], "age", 0, 100, 1.0), "data", "empty"),
    "mask of the wrong length": (lambda: noise.noisy_count(SURVEY, 1.0, where=np.array([True])), "where", "(1,)"),
    "seed negative": (lambda: noise.make_rng(-3), "seed", "-3"),
    # Tan's Algorithm 1
    "negative count": (lambda: tan.algorithm1(pd.DataFrame([[3, -1]]), 1.0), "counts", "-1"),
    "fractional count": (lambda: tan.algorithm1(pd.DataFrame([[3, 1.5]]), 1.0), "counts", "1.5"),
    "empty table": (lambda: tan.algorithm1(pd.DataFrame(), 1.0), "counts", "empty"),
    "protected variable missing": (
        lambda: tan.consistent_count_table(SURVEY, "degree", "wage_band", 1.0),
        "protected",
        "'wage_band'",
    ),
    "margin variable missing": (lambda: tan.consistent_count_table(SURVEY, "school", "income", 1.0), "margin", "'school'"),
    "empty records": (lambda: tan.consistent_count_table(SURVEY.iloc[:0], "degree", "income", 1.0), "data", "empty"),
    "margin equals protected": (lambda: tan.consistent_count_table(SURVEY, "degree", "degree", 1.0), "protected", "'degree'"),
    "four-cell exact enumeration": (lambda: tan.row_output_distribution([1, 2, 3, 4], 1.0), "counts", "(4,)"),
    "move from an empty cell": (lambda: tan.row_privacy_loss([0, 3], 0, 1, 1.0), "source", "count 0"),
    # p% rules and mechanism
    "non-numeric contributions": (
        lambda: ppercent.assess_cells(MICRODATA.assign(value=["10", "5", "7"]), ["cell"], "firm", "value"),
        "value",
        "'value'",
    ),
    "negative contribution": (
        lambda: ppercent.assess_cells(MICRODATA.assign(value=[10.0, -5.0, 7.0]), ["cell"], "firm", "value"),
        "value",
        "-5.0",
    ),
    "missing contribution": (
        lambda: ppercent.assess_cells(MICRODATA.assign(value=[10.0, None, 7.0]), ["cell"], "firm", "value"),
        "value",
        "nan",
    ),
    "empty microdata": (lambda: ppercent.assess_cells(MICRODATA.iloc[:0], ["cell"], "firm", "value"), "microdata", "empty"),
    "missing cell key": (lambda: ppercent.assess_cells(MICRODATA, ["region"], "firm", "value"), "cell_keys", "'region'"),
    "dominance k above 100": (
        lambda: ppercent.assess_cells(MICRODATA, ["cell"], "firm", "value", dominance=(2, 120)),
        "dominance",
        "120",
    ),
    "p of zero": (lambda: ppercent.p_percent_mechanism(MICRODATA, "firm", ["value"], 0.0, 1.0), "p", "0.0"),
    "p of one": (lambda: ppercent.p_percent_mechanism(MICRODATA, "firm", ["value"], 1.0, 1.0), "p", "1.0"),
    "p as a percentage": (lambda: ppercent.p_percent_mechanism(MICRODATA, "firm", ["value"], 10, 1.0), "p", "10"),
    "p% epsilon zero": (lambda: ppercent.p_percent_mechanism(MICRODATA, "firm", ["value"], 0.1, 0.0), "epsilon", "0.0"),
    "non-numeric linked variable": (
        lambda: ppercent.p_percent_mechanism(MICRODATA, "firm", ["cell"], 0.1, 1.0),
        "linked",
        "'cell'",
    ),
    "unknown protected contributor": (
        lambda: ppercent.p_percent_mechanism(MICRODATA, "firm", ["value"], 0.1, 1.0, protected=[9]),
        "protected",
        "9",
    ),
    # attribute privacy
    "covariance not PSD": (
        lambda: attribute.attribute_private_variance(covariance([[1.0, 2.0], [2.0, 1.0]]), "y", ["x"], 10, 1.0, 0.5, 1e-5),
        "covariance",
        "-1.0",
    ),
    "covariance not symmetric": (
        lambda: attribute.attribute_private_variance(covariance([[1.0, 0.2], [0.3, 1.0]]), "y", ["x"], 10, 1.0, 0.5, 1e-5),
        "covariance",
        "0.3",
    ),
    "delta zero": (lambda: attribute.attribute_private_variance(COVARIANCE, "y", ["x"], 10, 1.0, 0.5, 0.0), "delta", "0.0"),
    "delta one": (lambda: attribute.attribute_private_variance(COVARIANCE, "y", ["x"], 10, 1.0, 0.5, 1.0), "delta", "1.0"),
    "attribute epsilon not below one": (
        lambda: attribute.attribute_private_variance(COVARIANCE, "y", ["x"], 10, 1.0, 1.5, 1e-5),
        "epsilon",
        "1.5",
    ),
    "protected attribute missing": (
        lambda: attribute.attribute_private_mean(GAUSSIAN_DATA, "y", ["z"], COVARIANCE, 1.0, 0.5, 1e-5),
        "protected",
        "'z'",
    ),
    "no diameter for a secret": (
        lambda: attribute.attribute_private_variance(COVARIANCE, "y", ["x"], 10, {"y": 1.0}, 0.5, 1e-5),
        "diameters",
        "'x'",
    ),
    # subsampling
    "beta zero": (lambda: subsampling.theorem2_epsilon(1.0, 0.0), "beta", "0.0"),
    "beta above one": (lambda: subsampling.theorem2_epsilon(1.0, 1.5), "beta", "1.5"),
    "subsample larger than the data": (lambda: subsampling.draw_subsample(SURVEY, 5, 1.0), "n_sample", "5"),
    # perfect sample privacy
    "joint not summing to one": (
        lambda: sample_privacy.sample_leakage(np.full((2, 2), 0.3), np.ones((2, 2, 1))),
        "joint",
        "1.2",
    ),
    "negative probability": (
        lambda: sample_privacy.sample_leakage(np.array([[0.75, -0.25], [0.25, 0.25]]), np.ones((2, 2, 1))),
        "joint",
        "-0.25",
    ),
    "mapping rows not summing to one": (
        lambda: sample_privacy.sample_leakage(np.full((2, 2), 0.25), np.full((2, 2, 2), 0.7)),
        "mapping",
        "1.4",
    ),
    "mapping of the wrong shape": (
        lambda: sample_privacy.sample_leakage(np.full((2, 2), 0.25), np.ones((3, 1))),
        "mapping",
        "(3, 1)",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_refused_with_its_field_and_value(case):
    call, field, shown = CASES[case]
    with pytest.raises(MechanismInputError) as error:
        call()
    assert error.value.field == field
    assert shown in str(error.value)
    assert str(error.value).startswith(f"{field}: ")
    assert isinstance(error.value, ValueError)
