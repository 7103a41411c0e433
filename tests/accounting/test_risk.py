"""The attack a privacy figure allows (accounting/risk.py), against computations made without it.

References, each independent of the module under test:
- closed forms in mpmath at 50 digits: the (epsilon, delta) trade-off curve
  f(alpha) = max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)) (Dong, Roth and Su 2022,
  eq. (5), Prop 2.5), the mu-GDP one Phi(Phi^-1(1 - alpha) - mu), and the Gaussian mechanism's
  exact delta as Balle and Wang (2018, Thm 8) state it for a noise sigma and a sensitivity,
  with its epsilon (and mu) at a delta by bisection;
- riskcal (Kulynych et al.): the same two curves, and the Gaussian's curve read off
  dp_accounting's privacy loss distribution;
- dp_accounting's PLD accountant: one Gaussian's epsilon at a delta;
- hypothesis: the propositions (the power grows with epsilon, delta, alpha and mu, and lies
  between alpha and 1; epsilon and mu found are on the safe side of the budget);
- the command line: `subset --explain` says the power of the epsilon and delta it printed.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import cli_ok

from ledger.accounting.risk import (Risk, figure_risks, gdp_delta, gdp_epsilon, gdp_mu, gdp_tpr_at, risk_sentence,
                                    tpr_at)

DIGITS = 50


# --------------------------------------------------------------------------
# References (mpmath, 50 digits)
# --------------------------------------------------------------------------


def reference_tpr(alpha, epsilon, delta) -> mpmath.mpf:
    """1 - f_{eps,delta}(alpha), the trade-off curve of (epsilon, delta)-DP as written in the paper."""
    with mpmath.workdps(DIGITS):
        alpha, epsilon, delta = mpmath.mpf(alpha), mpmath.mpf(epsilon), mpmath.mpf(delta)
        f = max(mpmath.mpf(0), 1 - delta - mpmath.e**epsilon * alpha, mpmath.e**-epsilon * (1 - delta - alpha))
        return 1 - f


def reference_gdp_tpr(alpha, mu) -> mpmath.mpf:
    """1 - G_mu(alpha) = 1 - Phi(Phi^-1(1 - alpha) - mu), Phi^-1(p) = sqrt 2 erfinv(2p - 1)."""
    with mpmath.workdps(DIGITS):
        quantile = mpmath.sqrt(2) * mpmath.erfinv(2 * (1 - mpmath.mpf(alpha)) - 1)
        return 1 - mpmath.ncdf(quantile - mu)


def balle_wang_delta(epsilon, sigma, sensitivity=1) -> mpmath.mpf:
    """The Gaussian mechanism's exact delta at epsilon (Balle and Wang 2018, Thm 8):
    Phi(Delta / (2 sigma) - eps sigma / Delta) - e^eps Phi(-Delta / (2 sigma) - eps sigma / Delta)."""
    with mpmath.workdps(DIGITS):
        epsilon, sigma, sensitivity = mpmath.mpf(epsilon), mpmath.mpf(sigma), mpmath.mpf(sensitivity)
        a = sensitivity / (2 * sigma)
        b = epsilon * sigma / sensitivity
        return mpmath.ncdf(a - b) - mpmath.e**epsilon * mpmath.ncdf(-a - b)


def _bisect(holds, low, high, steps=240) -> tuple[mpmath.mpf, mpmath.mpf]:
    """[low, high] narrowed to the boundary of `holds`, which holds at exactly one end."""
    with mpmath.workdps(DIGITS):
        low, high = mpmath.mpf(low), mpmath.mpf(high)
        at_low = holds(low)
        for _ in range(steps):
            middle = (low + high) / 2
            if holds(middle) == at_low:
                low = middle
            else:
                high = middle
        return low, high


def reference_epsilon(mu, delta) -> mpmath.mpf:
    """The smallest epsilon with delta(epsilon) <= delta for the Gaussian of sensitivity 1, sigma 1 / mu."""
    sigma = 1 / mpmath.mpf(mu)
    if balle_wang_delta(0, sigma) <= delta:
        return mpmath.mpf(0)
    high = mpmath.mpf(mu) ** 2 / 2 + mu * mpmath.sqrt(2 * mpmath.log(1 / mpmath.mpf(delta))) + 1
    return _bisect(lambda e: balle_wang_delta(e, sigma) <= delta, 0, high)[1]


def reference_mu(epsilon, delta) -> mpmath.mpf:
    """The largest mu = 1 / sigma with delta(epsilon) <= delta."""
    high = mpmath.mpf(1)
    while balle_wang_delta(epsilon, 1 / high) <= delta:
        high *= 2
    return _bisect(lambda m: m == 0 or balle_wang_delta(epsilon, 1 / m) <= delta, 0, high)[0]


# --------------------------------------------------------------------------
# 1. The power against an (epsilon, delta) guarantee
# --------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0, 0.1, 1, math.log(34), 10, 50, 800])
@pytest.mark.parametrize("delta", [0, 1e-10, 1e-6, 0.01])
@pytest.mark.parametrize("alpha", [0, 1e-6, 0.01, 0.05, 0.5, 1])
def test_the_power_against_an_epsilon_delta_guarantee_is_one_minus_its_trade_off_curve(epsilon, delta, alpha):
    expected = reference_tpr(alpha, epsilon, delta)
    assert abs(tpr_at(alpha, epsilon=epsilon, delta=delta) - expected) <= 1e-15 + 1e-14 * expected


def test_an_epsilon_of_log_34_lets_a_test_wrong_1_time_in_100_be_right_34_times_in_100():
    """e^eps alpha = 34 * 0.01 on the steep side of the curve; at 5% the flat side, 1 - e^-eps 0.95."""
    assert tpr_at(0.01, epsilon=math.log(34), delta=0) == pytest.approx(0.34, rel=1e-14)
    assert tpr_at(0.05, epsilon=math.log(34), delta=0) == pytest.approx(1 - 0.95 / 34, rel=1e-14)


def test_an_infinite_epsilon_bounds_nothing():
    assert tpr_at(0.01, epsilon=math.inf, delta=0) == 1.0
    assert figure_risks(math.inf, None) == (Risk(0.01, 1.0), Risk(0.05, 1.0))


@pytest.mark.parametrize("epsilon", [0.1, 1, 3.5, 10, 30])
@pytest.mark.parametrize("delta", [0, 1e-10, 1e-6, 0.01])
def test_the_power_against_an_epsilon_delta_guarantee_agrees_with_riskcal(epsilon, delta):
    analysis = pytest.importorskip("riskcal.analysis")
    for alpha in (0.001, 0.01, 0.05, 0.3):
        theirs = 1 - float(analysis.get_beta_from_adp(epsilon, delta, alpha))
        assert tpr_at(alpha, epsilon=epsilon, delta=delta) == pytest.approx(theirs, rel=1e-12, abs=1e-15)


# --------------------------------------------------------------------------
# 2. The power against mu-GDP
# --------------------------------------------------------------------------


@pytest.mark.parametrize("mu", [0, 0.01, 0.5, 1, 2, 5, 10])
@pytest.mark.parametrize("alpha", [1e-9, 0.01, 0.05, 0.5, 0.99])
def test_the_power_against_mu_gdp_is_one_minus_the_gaussian_trade_off_curve(mu, alpha):
    expected = reference_gdp_tpr(alpha, mu)
    assert abs(gdp_tpr_at(alpha, mu) - expected) <= 1e-14 * expected


@pytest.mark.parametrize("mu", [0.1, 0.5, 1, 3])
def test_the_power_against_mu_gdp_agrees_with_riskcal(mu):
    analysis = pytest.importorskip("riskcal.analysis")
    for alpha in (0.001, 0.01, 0.05, 0.3):
        theirs = 1 - float(analysis.get_beta_from_gdp(mu, alpha))
        assert gdp_tpr_at(alpha, mu) == pytest.approx(theirs, rel=1e-12)


@pytest.mark.parametrize("sigma", [0.5, 1, 2])
def test_the_power_against_one_gaussian_matches_riskcals_curve_of_its_dp_accounting_pld(sigma):
    """riskcal's Algorithm 1 on dp_accounting's discretised PLD of the Gaussian mechanism: the same
    curve as 1/sigma-GDP (Dong, Roth and Su 2022, Thm 2.7), up to the PLD's discretisation."""
    analysis = pytest.importorskip("riskcal.analysis")
    from dp_accounting.pld import privacy_loss_distribution

    pld = privacy_loss_distribution.from_gaussian_mechanism(sigma, value_discretization_interval=1e-4)
    for alpha in (0.01, 0.05):
        theirs = 1 - float(analysis.get_beta_from_pld(pld, alpha=alpha))
        assert gdp_tpr_at(alpha, 1 / sigma) == pytest.approx(theirs, abs=1e-5)


# --------------------------------------------------------------------------
# 3. mu-GDP as (epsilon, delta): delta at epsilon, epsilon at delta, mu within a budget
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("sigma", "sensitivity"), [(1, 1), (3, 1), (3, 2), (0.25, 1), (100, 1), (2, 90)])
@pytest.mark.parametrize("epsilon", [0, 0.01, 0.5, 1, 5, 50, 500, 1000])
def test_gdp_delta_is_the_gaussian_mechanisms_exact_delta_of_balle_and_wang(sigma, sensitivity, epsilon):
    expected = balle_wang_delta(epsilon, sigma, sensitivity)
    got = gdp_delta(epsilon, sensitivity / sigma)
    if expected < 1e-300:  # below the floats
        assert got <= 1e-300
    else:
        assert abs(got - expected) <= 1e-12 * expected


@pytest.mark.parametrize("mu", [0.02, 0.1, 0.5, 1, 2, 5, 10, 30, 45])
@pytest.mark.parametrize("delta", [1e-2, 1e-4, 1e-6, 1e-10])
def test_gdp_epsilon_is_the_exact_epsilon_rounded_up(mu, delta):
    """mu 45 at 1e-10 is epsilon 1298: e^epsilon is past the largest float."""
    expected = reference_epsilon(mu, delta)
    got = gdp_epsilon(mu, delta)
    assert expected <= got <= expected * (1 + 1e-12) + 1e-14


@pytest.mark.parametrize("epsilon", [0.01, 0.5, 1, 3, 10, 100, 1000])
@pytest.mark.parametrize("delta", [1e-2, 1e-6, 1e-10])
def test_gdp_mu_is_the_largest_mu_within_the_budget_rounded_down(epsilon, delta):
    expected = reference_mu(epsilon, delta)
    got = gdp_mu(epsilon, delta)
    assert expected * (1 - 1e-12) - 1e-14 <= got <= expected


@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-2])
def test_at_epsilon_0_the_mu_allowed_is_twice_the_normal_quantile_of_half_one_plus_delta(delta):
    """delta(0) = Phi(mu / 2) - Phi(-mu / 2) = erf(mu / (2 sqrt 2)): mu = 2 sqrt 2 erfinv(delta)."""
    with mpmath.workdps(DIGITS):
        expected = 2 * mpmath.sqrt(2) * mpmath.erfinv(mpmath.mpf(delta))
    assert expected * (1 - 1e-12) <= gdp_mu(0, delta) <= expected


@pytest.mark.parametrize("sigma", [0.5, 1, 2, 5])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_gdp_epsilon_of_one_gaussian_matches_dp_accountings_pld_accountant(sigma, delta):
    """dp_accounting's pessimistic PLD (discretisation 1e-4) is never below the exact epsilon by
    more than its discretisation, and within 1e-4 of it relative."""
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant()
    accountant.compose(dp_event.GaussianDpEvent(sigma))
    theirs = accountant.get_epsilon(delta)
    ours = gdp_epsilon(1 / sigma, delta)
    assert theirs >= ours - 1e-4
    assert abs(theirs - ours) <= 1e-4 * ours


def test_a_composition_of_gaussians_is_one_gaussian_of_the_root_sum_of_squares():
    """Gaussians of sigma/sensitivity 3, 2 and 6 compose to mu = sqrt(1/9 + 1/4 + 1/36) = sqrt(7/18)
    (Dong, Roth and Su 2022, Cor 3.3): dp_accounting's PLD of the three agrees with gdp_epsilon."""
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant()
    accountant.compose(dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(m) for m in (3, 2, 6)]))
    ours = gdp_epsilon(math.sqrt(7 / 18), 1e-6)
    assert abs(accountant.get_epsilon(1e-6) - ours) <= 1e-4 * ours


def test_no_gaussian_is_pure_and_a_pure_budget_allows_none():
    assert gdp_epsilon(0.5, 0) == math.inf
    assert gdp_mu(3, 0) == 0
    assert gdp_epsilon(0, 1e-6) == 0


# --------------------------------------------------------------------------
# 4. The propositions (hypothesis)
# --------------------------------------------------------------------------

rates = st.floats(0, 1)
epsilons = st.floats(0, 60)
deltas = st.floats(0, 0.1)
mus = st.floats(0, 30)


@settings(max_examples=300, deadline=None)
@given(alpha=rates, epsilon=epsilons, delta=deltas, more=st.floats(0, 5), more_delta=st.floats(0, 0.1),
       more_alpha=st.floats(0, 1))
def test_the_power_grows_with_epsilon_delta_and_alpha_and_lies_between_alpha_and_1(
        alpha, epsilon, delta, more, more_delta, more_alpha):
    power = tpr_at(alpha, epsilon=epsilon, delta=delta)
    assert alpha <= power <= 1
    assert power <= tpr_at(alpha, epsilon=epsilon + more, delta=delta)
    assert power <= tpr_at(alpha, epsilon=epsilon, delta=min(1.0, delta + more_delta))
    assert power <= tpr_at(min(1.0, alpha + more_alpha), epsilon=epsilon, delta=delta)


@settings(max_examples=300, deadline=None)
@given(alpha=rates, mu=mus, more=st.floats(0, 5), more_alpha=st.floats(0, 1))
def test_the_power_against_gdp_grows_with_mu_and_alpha_and_lies_between_alpha_and_1(alpha, mu, more, more_alpha):
    power = gdp_tpr_at(alpha, mu)
    assert alpha <= power <= 1
    assert power <= gdp_tpr_at(alpha, mu + more)
    assert power <= gdp_tpr_at(min(1.0, alpha + more_alpha), mu)


@settings(max_examples=150, deadline=None)
@given(mu=st.floats(0.01, 40), delta=st.floats(1e-12, 0.5))
def test_the_epsilon_found_keeps_delta_and_the_mu_found_keeps_epsilon(mu, delta):
    """The round trip stays on the safe side: mu-GDP at gdp_epsilon(mu, delta) spends at most delta,
    and the mu a budget allows spends at most its epsilon; the exact delta (mpmath) says so too."""
    epsilon = gdp_epsilon(mu, delta)
    assert balle_wang_delta(epsilon, 1 / mu) <= delta
    allowed = gdp_mu(epsilon, delta)
    assert mu * (1 - 1e-12) <= allowed
    assert balle_wang_delta(epsilon, 1 / allowed) <= delta


# --------------------------------------------------------------------------
# 5. The sentence
# --------------------------------------------------------------------------


def test_the_sentence_states_the_power_rounded_up_at_each_rate():
    """epsilon log 34: 34% at 1 in 100 (e^eps 0.01), and 1 - 0.95 / 34 = 97.2% at 1 in 20, shown 98%."""
    sentence = risk_sentence(figure_risks(math.log(34), None))
    assert sentence == ("an attacker testing whether one person's record is in the data, wrong about 1 time in 100 "
                        "on people who are not, is right at most 34% of the time on people who are "
                        "(wrong 1 time in 20: right at most 98% of the time)")


def test_the_sentence_names_the_variables_an_attribute_test_is_about():
    sentence = risk_sentence([Risk(0.01, 0.0271828)], variables=["income", "age"])
    assert sentence == ("an attacker testing which of two values one person's {income, age} take, wrong about "
                        "1 time in 100 when it is the first, is right at most 3% of the time when it is the second")


def test_a_power_near_certainty_is_not_rounded_to_it():
    """epsilon 8: 1 - e^-8 0.99 = 0.999667..., shown 99.97%, never 100%."""
    assert "right at most 99.97% of the time" in risk_sentence(figure_risks(8, None))


# --------------------------------------------------------------------------
# 6. The command line
# --------------------------------------------------------------------------

DATASET = """\
dataset: d
delta: 1e-6
variables:
  - {name: a, classification: sensitive}
  - {name: b, classification: sensitive}
  - {name: c, classification: sensitive}
  - {name: e, classification: sensitive}
"""

RELEASES = """\
dataset: d
releases:
  - {id: l1, reads: [a], mechanism: {name: laplace, epsilon: 1}}
  - {id: g1, reads: [a, b], mechanism: {name: gaussian, sigma: 3, sensitivity: 1}}
  - {id: g2, reads: [b], mechanism: {name: gaussian, sigma: 2, sensitivity: 1}}
  - {id: l2, reads: [c], mechanism: {name: laplace, epsilon: 1.5}}
  - {id: x, reads: [e], mechanism: {name: exact}}
"""

SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")


@pytest.fixture
def recorded(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(DATASET)
    (tmp_path / "r.yaml").write_text(RELEASES)
    cli_ok(url, "dataset", "add", tmp_path / "d.yaml")
    cli_ok(url, "record", tmp_path / "r.yaml")
    return url


def printed_figure(line: str) -> tuple[mpmath.mpf, mpmath.mpf]:
    """(epsilon, delta) of `subset`'s first line: "epsilon 3.7679 at delta 1 × 10⁻⁶ (...)" or "epsilon 1.5 (pure)"."""
    found = re.search(r"epsilon ([0-9.]+) (?:at delta ([0-9.]+)(?: × 10([⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+))?|\(pure\))", line)
    epsilon = mpmath.mpf(found.group(1))
    if found.group(2) is None:
        return epsilon, mpmath.mpf(0)
    exponent = int(found.group(3).translate(SUPERSCRIPTS)) if found.group(3) else 0
    return epsilon, mpmath.mpf(found.group(2)) * mpmath.mpf(10) ** exponent


def percent_up(power) -> str:
    return f"{int(mpmath.ceil(power * 100))}%"


@pytest.mark.parametrize("variables", [["a", "b"], ["b"], ["c"]])
def test_subset_explain_says_the_power_of_the_printed_epsilon_and_delta(recorded, variables):
    out = cli_ok(recorded, "subset", *variables, "--explain").out
    headline, words = out.splitlines()[0], out.splitlines()[-1]
    epsilon, delta = printed_figure(headline)
    one, five = (percent_up(reference_tpr(alpha, epsilon, delta)) for alpha in (0.01, 0.05))
    names = variables[0] + " takes" if len(variables) == 1 else "{" + ", ".join(variables) + "} take"
    assert words.endswith(f"So an attacker testing which of two values one person's {names}, wrong about 1 time in 100 "
                          f"when it is the first, is right at most {one} of the time when it is the second "
                          f"(wrong 1 time in 20: right at most {five} of the time)."), words


def test_subset_explain_says_what_was_composed_and_by_which_statement(recorded):
    as_json = cli_ok(recorded, "subset", "a", "b", "--json").json()
    words = cli_ok(recorded, "subset", "a", "b", "--explain").out.splitlines()[-1]
    name = as_json["theorem"].split(": ")[0]
    assert words.startswith(f"  in words: 3 releases (l1, g1, g2) composed by {name}, valid under full "
                            "adaptivity, give epsilon "), words
    assert as_json["case"] == "adaptive"
    assert "on {a, b}. So an attacker testing" in words


def test_subset_explain_says_an_unprotected_subset_bounds_no_attack(recorded):
    words = cli_ok(recorded, "subset", "e", "--explain").out.splitlines()[-1]
    assert words.startswith("  in words: 1 release (x) leaves {e} ∞")
    assert "can be right every time when it is the second (wrong 1 time in 20: can be right every time)." in words


def test_subset_json_gives_the_power_at_1_and_5_percent_rounded_up(recorded):
    shown = cli_ok(recorded, "subset", "a", "b", "--json").json()
    assert [r["fpr"] for r in shown["risk"]] == [0.01, 0.05]
    for risk in shown["risk"]:
        exact = reference_tpr(risk["fpr"], shown["epsilon"], shown["delta"])
        assert exact - 1e-12 <= risk["tpr"] <= exact + 1e-6
    pure = cli_ok(recorded, "subset", "c", "--json").json()  # epsilon 1.5, no delta
    assert [r["tpr"] for r in pure["risk"]] == [
        float(mpmath.ceil(reference_tpr(alpha, 1.5, 0) * 10**6) / 10**6) for alpha in (0.01, 0.05)]
    assert [r["tpr"] for r in cli_ok(recorded, "subset", "e", "--json").json()["risk"]] == [1.0, 1.0]


def test_the_python_api_gives_the_risk_the_command_line_prints(recorded):
    import ledger

    loss = ledger.open(recorded).subset(["a", "b"])
    printed = cli_ok(recorded, "subset", "a", "b", "--json").json()["risk"]
    assert [{"fpr": r.fpr, "tpr": r.tpr} for r in loss.risk] == printed


def test_importing_the_risk_module_imports_no_numeric_library():
    """A command that never asks for a power pays nothing for it (ledger/core/lazy.py)."""
    code = ("import sys, ledger.accounting.risk; "
            "print(sorted(m for m in ('numpy', 'scipy', 'mpmath') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_the_reports_headline_says_in_words_what_its_figure_allows_an_attacker(tmp_path):
    """The graduates report: beside the protected subset's figure (epsilon at 1e-9), the attack bound
    at false-positive rates of 1% and 5% from the (epsilon, delta) trade-off curve, computed here;
    and the warning that a correlated public variable is not covered (degree is public)."""
    examples = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples"
    url = f"sqlite:///{tmp_path / 'l.db'}"
    cli_ok(url, "dataset", "add", examples / "graduates.dataset.yaml")
    cli_ok(url, "record", examples / "graduates.releases.yaml")
    cli_ok(url, "report", "--format", "md", "--out", tmp_path / "r.md")
    text = (tmp_path / "r.md").read_text(encoding="utf-8")
    epsilon = float(re.search(r"\*\*Protected subset epsilon\*\* \(every variable not classified public\) \| \*\*([0-9.]+)", text).group(1))
    sentence = next(line for line in text.splitlines() if line.startswith("Meaning: "))

    def percent(alpha):  # 1 - f_{eps,delta}(alpha), Dong, Roth and Su 2022, eq. (5), rounded up to whole percent
        tpr = min(1.0, 1e-9 + math.exp(epsilon) * alpha, 1 - math.exp(-epsilon) * (1 - 1e-9 - alpha))
        return math.ceil(tpr * 100 - 1e-9)

    assert f"right at most {percent(0.01)}% of the time" in sentence and f"at most {percent(0.05)}%" in sentence
    assert "public variable correlated with a protected one" in sentence
