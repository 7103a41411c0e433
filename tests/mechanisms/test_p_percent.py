"""Cell sensitivity rules and Bailie's p% mechanism."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ledger.mechanisms import ppercent
from ledger.mechanisms.noise import make_rng

# A magnitude table by industry. Cell D's contributor "d1" has two records
# (two establishments of one enterprise): it is one respondent of 60.
FARMS = pd.DataFrame(
    [
        ("A", "a1", 100.0), ("A", "a2", 50.0), ("A", "a3", 5.0),
        ("B", "b1", 40.0), ("B", "b2", 30.0), ("B", "b3", 20.0), ("B", "b4", 10.0),
        ("C", "c1", 10.0), ("C", "c2", 10.0),
        ("D", "d1", 30.0), ("D", "d1", 30.0), ("D", "d2", 25.0), ("D", "d3", 15.0),
    ],
    columns=["industry", "enterprise", "turnover"],
)


def assessment(**options):
    return ppercent.assess_cells(FARMS, ["industry"], "enterprise", "turnover", **options)


def test_rules_by_hand_with_the_defaults():
    cells = assessment().cells.set_index("industry")
    # A: X - x1 - x2 = 5 < 10% of 100; top-2 share 150/155 > 85%; 3 respondents
    assert cells.loc["A", "rules"] == "p%,dominance" and cells.loc["A", "status"] == "unsafe"
    # B: 30 >= 4; 70% <= 85%; 4 respondents
    assert cells.loc["B", "rules"] == "" and cells.loc["B", "status"] == "safe"
    # C: 2 respondents < 3; 0 < 1; 100% > 85%
    assert cells.loc["C", "rules"] == "p%,frequency,dominance"
    # D: respondents 60, 25, 15: 15 >= 6; top-2 = 85% is not more than 85%; 3 respondents
    assert cells.loc["D", "contributors"] == 3 and cells.loc["D", "largest"] == 60.0
    assert cells.loc["D", "status"] == "safe"


def test_summary_by_status_in_the_tau_argus_style():
    summary = assessment().summary
    assert summary.loc["safe"].tolist() == [2, 7, 200.0]  # B and D: 4 + 3 respondents, 100 + 100
    assert summary.loc["unsafe"].tolist() == [2, 5, 175.0]  # A and C: 3 + 2 respondents, 155 + 20
    assert list(summary.columns) == ["cells", "respondents", "value"]


def test_the_defaults_are_documented_values():
    result = assessment()
    assert (result.p_percent, result.threshold, result.dominance) == (10.0, 3, (2, 85.0))


def test_rule_parameters_change_the_outcome():
    cells = assessment(p_percent=2.0, dominance=(2, 99.0)).cells.set_index("industry")
    assert cells.loc["A", "status"] == "safe"  # 5 >= 2% of 100, and 96.8% <= 99%
    cells = assessment(threshold=4).cells.set_index("industry")
    assert cells.loc["D", "frequency"] and not cells.loc["B", "frequency"]


def test_single_contributor_cell_fails_the_p_percent_rule():
    assert ppercent.p_percent_rule(total=80.0, largest=80.0, second=0.0)
    assert not ppercent.p_percent_rule(total=0.0, largest=0.0, second=0.0)


def test_several_cell_keys():
    data = FARMS.assign(region=["n", "n", "s", "n", "n", "s", "s", "n", "n", "n", "n", "n", "n"])
    cells = ppercent.assess_cells(data, ["industry", "region"], "enterprise", "turnover").cells
    assert len(cells) == 6 and set(cells.columns) >= {"industry", "region", "status"}


# --- Bailie's mechanism ---------------------------------------------------


def test_laplace_scale_by_hand():
    # b = -(4/eps) ln(1 - p): p = 0.1, eps = 1 gives 4 * 0.105360515...
    assert ppercent.bailie_scale(0.1, 1.0) == pytest.approx(0.42144206263, rel=1e-10)
    assert ppercent.bailie_scale(0.2, 0.5) == pytest.approx(8 * 0.22314355131, rel=1e-10)


@pytest.mark.parametrize("p", [0.01, 0.1, 0.3, 0.6])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
def test_neighbouring_secret_intervals_are_within_e_to_the_epsilon(p, epsilon):
    # In logs the discriminative pair is [ln x + ln(1-p), ln x + ln(1+p)] against
    # [ln x + ln(1+p), ln x + 2 ln(1+p) - ln(1-p)]: any two points of the pair are at most
    # 2 ln((1+p)/(1-p)) apart, and Laplace densities of scale b differ by at most
    # e^(distance/b). Check that bound and the posterior odds under random priors.
    b = ppercent.bailie_scale(p, epsilon)
    width = 2 * math.log((1 + p) / (1 - p))
    assert width / b <= epsilon + 1e-12
    rng = np.random.default_rng(0)
    log_x = 3.0
    first = rng.uniform(log_x + math.log(1 - p), log_x + math.log(1 + p), size=20)
    second = rng.uniform(log_x + math.log(1 + p), log_x + 2 * math.log(1 + p) - math.log(1 - p), size=20)
    weights_first, weights_second = rng.dirichlet(np.ones(20)), rng.dirichlet(np.ones(20))
    outputs = np.linspace(log_x - 10 * b, log_x + 10 * b, 2001)
    likelihood_first = (weights_first * stats.laplace.pdf(outputs[:, None], first, b)).sum(axis=1)
    likelihood_second = (weights_second * stats.laplace.pdf(outputs[:, None], second, b)).sum(axis=1)
    assert np.abs(np.log(likelihood_first / likelihood_second)).max() <= epsilon + 1e-9


def test_one_draw_per_contributor_for_all_its_linked_variables():
    data = FARMS.assign(expenses=FARMS["turnover"] * 0.6)  # linearly related to turnover
    noisy, guarantee = ppercent.p_percent_mechanism(
        data, "enterprise", ["turnover", "expenses"], 0.1, 1.0, rng=make_rng(4)
    )
    factor_turnover = noisy["turnover"] / data["turnover"]
    factor_expenses = noisy["expenses"] / data["expenses"]
    assert np.allclose(factor_turnover, factor_expenses)  # the linear relation survives
    d1 = factor_turnover[data["enterprise"] == "d1"]
    assert d1.nunique() == 1  # both records of d1 share the draw
    assert factor_turnover.nunique() == data["enterprise"].nunique()
    assert noisy["industry"].equals(data["industry"])
    assert guarantee.protected_contributors == 12 and guarantee.linked_variables == ("turnover", "expenses")
    assert guarantee.notion == "pufferfish" and "[(1-p)x, (1+p)x]" in guarantee.secrets


def test_only_protected_contributors_are_perturbed():
    noisy, guarantee = ppercent.p_percent_mechanism(
        FARMS, "enterprise", ["turnover"], 0.1, 1.0, protected=["a1", "d1"], rng=make_rng(4)
    )
    changed = noisy["turnover"] != FARMS["turnover"]
    assert set(FARMS.loc[changed, "enterprise"]) == {"a1", "d1"}
    assert guarantee.protected_contributors == 2


def test_log_factors_follow_the_laplace_law():
    contributors = pd.DataFrame({"id": range(3000), "value": 100.0})
    noisy, guarantee = ppercent.p_percent_mechanism(contributors, "id", ["value"], 0.1, 1.0, rng=make_rng(8))
    log_factors = np.log(noisy["value"] / 100.0)
    assert stats.kstest(log_factors, stats.laplace(0, guarantee.laplace_scale).cdf).pvalue > 1e-3


def test_cell_totals_are_sums_of_the_noisy_microdata():
    totals, _ = ppercent.p_percent_cell_totals(FARMS, ["industry"], "enterprise", ["turnover"], 0.1, 1.0, rng=make_rng(6))
    noisy, _ = ppercent.p_percent_mechanism(FARMS, "enterprise", ["turnover"], 0.1, 1.0, rng=make_rng(6))
    assert np.allclose(totals["turnover"], noisy.groupby("industry")["turnover"].sum())
    assert list(totals.index) == ["A", "B", "C", "D"]
