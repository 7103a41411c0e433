"""A cap at a delta is a privacy filter fixed when it is set (docs/explanation/accounting.md).

- Gaussian DP (`--filter gaussian`): releases of sigma/sensitivity m_i are admitted while the
  composed mu = sqrt(sum 1 / m_i^2) has an epsilon at the cap's whole delta within the cap: the
  exact privacy profile of one Gaussian of sensitivity/sigma mu (Balle and Wang 2018, Thm 8;
  Dong, Roth and Su 2022, Cor 2.13), computed here by an mpmath bisection. A pure release enters
  at the mu of randomized response, -2 Phi^-1(1 / (1 + e^eps)); a rho-only or approximate one has
  no mu.
- the running figure (the default for a cap holding anything but Gaussians): the subset's
  statements fixed in advance (conftest's reference_filter), valid at every stopping time;
- Rényi filter at one order A (`--filter renyi`): A is fixed by the cap's epsilon and delta alone
  (conftest's reference), and the
  figure is the summed Rényi divergences at A (a Gaussian's a / (2 m^2); a Laplace's Mironov 2017,
  Prop 6, as dp_accounting evaluates it) converted by Canonne, Kamath and Steinke 2020, Prop 12,
  at half the delta (the other half is the approximate releases' allowance).
Every number is computed here from those closed forms; a filter's figure never falls when a
release is added.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from fractions import Fraction as F

import mpmath
import pytest
from conftest import (REFERENCE_ALLOWANCE, REFERENCE_FILTER_ORDERS, _reference_cap_order, _reference_filter,
                      _reference_prop12)
from dp_accounting.rdp import rdp_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import ndtri
from support import cli_main

from ledger.accounting import budget, cap_decisions, cap_states
from ledger.core.records import Cap, Guarantee, Mechanism, Notion, Release, Status


def balle_wang_epsilon(mu, delta) -> float:
    """The smallest epsilon with Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu) <= delta (Balle and
    Wang 2018, Thm 8), by bisection in mpmath at 50 digits, rounded up to a float."""
    with mpmath.workdps(50):
        mu, delta = mpmath.mpf(mu), mpmath.mpf(delta)
        low, high = mpmath.mpf(0), mpmath.mpf(200)
        for _ in range(300):
            middle = (low + high) / 2
            if mpmath.ncdf(mu / 2 - middle / mu) - mpmath.exp(middle) * mpmath.ncdf(-mu / 2 - middle / mu) <= delta:
                high = middle
            else:
                low = middle
        return float(high)


def new_ledger(tmp_path, delta="1e-6", name="l") -> str:
    url = f"sqlite:///{tmp_path / f'{name}.db'}"
    (tmp_path / f"{name}.yaml").write_text(f"dataset: d\ndelta: {delta}\nvariables: [{{name: a}}, {{name: b}}]\n")
    assert cli_main(url, "dataset", "add", tmp_path / f"{name}.yaml").code == 0
    return url


def plan(path, *mechanisms, reads="[a]", prefix="r"):
    """A file of releases reading `reads`, one per mechanism text, ids prefix0, prefix1, ..."""
    path.write_text("dataset: d\nreleases:\n" + "".join(
        f"  - {{id: {prefix}{k}, reads: {reads}, mechanism: {mechanism}}}\n" for k, mechanism in enumerate(mechanisms)))
    return path


def gaussian(m) -> str:
    return f"{{name: gaussian, sigma: {m}, sensitivity: 1}}"


def declared(guarantee: str) -> str:
    return "{name: declared}, guarantees: [" + guarantee + "]"


# --------------------------------------------------------------------------
# Gaussian DP
# --------------------------------------------------------------------------


@pytest.mark.parametrize("k, m, delta", [(10, 3, "1e-6"), (4, 2, "1e-9"), (25, 20, "1e-5")])
def test_a_gaussian_dp_cap_admits_k_gaussians_exactly_while_their_balle_wang_epsilon_fits(tmp_path, k, m, delta):
    """k Gaussians of sigma/sensitivity m compose to one Gaussian of mu = sqrt(k) / m: a Gaussian-DP
    cap at its figure's epsilon (a hair above) admits the k-th and refuses the (k+1)-th; a hair
    below, it refuses the k-th. The same parameters as had the plan been fixed in advance."""
    exact = balle_wang_epsilon(mpmath.sqrt(k) / m, mpmath.mpf(delta))
    assert balle_wang_epsilon(mpmath.sqrt(k + 1) / m, mpmath.mpf(delta)) > exact * (1 + 1e-3)
    for limit, admitted in ((exact * (1 + 1e-9), True), (exact * (1 - 1e-9), False)):
        url = new_ledger(tmp_path, delta, name=f"l{admitted}")
        assert cli_main(url, "cap", "set", "a", "--epsilon", repr(limit), "--delta", delta,
                        "--filter", "gaussian").code == 0
        held = cli_main(url, "record", plan(tmp_path / "held.yaml", *[gaussian(m)] * (k - 1)))
        assert held.code == 0, held.err
        kth = plan(tmp_path / "kth.yaml", gaussian(m), prefix="k")
        checked = cli_main(url, "check", kth, "--json")
        assert checked.code == (0 if admitted else 1), checked.out
        (cap,) = checked.json()["caps"]
        assert (cap["accountant"], cap["case"]) == ("gdp", "adaptive")
        assert "Gaussian-DP filter" in cap["theorem"]
        assert exact <= cap["after"] <= exact * (1 + 1e-12)
        if admitted:
            assert cli_main(url, "record", kth).code == 0
            past = cli_main(url, "check", plan(tmp_path / "past.yaml", gaussian(m), prefix="x"), "--json")
            assert past.code == 1
            beyond = balle_wang_epsilon(mpmath.sqrt(k + 1) / m, mpmath.mpf(delta))
            assert beyond <= past.json()["caps"][0]["after"] <= beyond * (1 + 1e-12)


def test_a_default_cap_on_gaussians_is_gaussian_dp_and_on_anything_else_the_running_figure(tmp_path):
    """`cap set` without --filter: Gaussian DP when every release the subset already holds is a
    Gaussian (one at least), else the subset's running figure as a filter (the statements fixed in
    advance that `subset` prints, conftest's reference)."""
    url = new_ledger(tmp_path)
    assert cli_main(url, "record", plan(tmp_path / "g.yaml", gaussian(3), gaussian(5))).code == 0
    assert cli_main(url, "record", plan(tmp_path / "l.yaml", "{name: laplace, epsilon: 0.1}", reads="[b]",
                                        prefix="l")).code == 0
    for subset in ("a", "b"):
        assert cli_main(url, "cap", "set", subset, "--epsilon", "6", "--delta", "1e-6").code == 0
    caps = {cap["cap"]: cap for cap in cli_main(url, "cap", "list", "--json").json()}
    assert caps["a"]["accountant"] == "gdp" and "Gaussian-DP filter" in caps["a"]["theorem"]
    expected = balle_wang_epsilon(mpmath.sqrt(mpmath.mpf(1) / 9 + mpmath.mpf(1) / 25), mpmath.mpf("1e-6"))
    assert expected <= caps["a"]["current"] <= expected * (1 + 1e-12)
    # (a pure history is held by its pure sum; a Gaussian more on both shows each cap's filter)
    checked = cli_main(url, "check", plan(tmp_path / "p.yaml", gaussian(20), reads="[a, b]", prefix="p"), "--json")
    theorems = {cap["cap"]: cap["theorem"] for cap in checked.json()["caps"]}
    assert "Gaussian-DP filter" in theorems["a"]
    assert "running figure as a filter" in theorems["b"]
    (b,) = [cap for cap in checked.json()["caps"] if cap["cap"] == "b"]
    # (the smaller of basic's statements and the Rényi accountant's, which knows the Laplace's curve)
    share = 1e-6 * (1 - REFERENCE_ALLOWANCE) / len(REFERENCE_FILTER_ORDERS)
    renyi = min(rdp_privacy_accountant._laplace_rdp(0.1, a) + a / 800 + math.log1p(-1 / a)
                - (math.log(share) + math.log(a)) / (a - 1) for a in REFERENCE_FILTER_ORDERS)
    expected = min(renyi, _reference_filter(pure=0.1, pure_rho=0.1**2 / 2, rho=1 / 800, delta=1e-6))
    assert expected <= b["after"] <= expected * (1 + 1e-8)


# --------------------------------------------------------------------------
# Rényi filter at one order
# --------------------------------------------------------------------------


def test_a_renyi_filter_caps_order_depends_only_on_its_epsilon_and_delta(tmp_path):
    """Two caps of (6, 1e-6) set on subsets holding different releases (none; a Laplace and a
    Gaussian), and one of (9, 1e-6): the first two at one order, 5.6, the third at 4.3 (conftest's
    reference: the order at which the largest zCDP spend fits the cap)."""
    url = new_ledger(tmp_path)
    assert cli_main(url, "record", plan(tmp_path / "r.yaml", "{name: laplace, epsilon: 1}", gaussian(2),
                                        reads="[b]")).code == 0
    for subset, name, epsilon in (("a", "empty", "6"), ("b", "held", "6"), ("b", "larger", "9")):
        assert cli_main(url, "cap", "set", subset, "--name", name, "--epsilon", epsilon, "--delta", "1e-6",
                        "--filter", "renyi").code == 0
    # (an empty history is held by its pure sum, 0; a Laplace more on both shows each cap's filter)
    checked = cli_main(url, "check", plan(tmp_path / "p.yaml", "{name: laplace, epsilon: 0.5}", gaussian(20),
                                          reads="[a, b]", prefix="p"), "--json")
    theorems = {cap["cap"]: cap["theorem"] for cap in checked.json()["caps"]}
    assert (_reference_cap_order(6, 1e-6), _reference_cap_order(9, 1e-6)) == (5.6, 4.3)
    assert "Rényi filter at order 5.6," in theorems["empty"]
    assert "Rényi filter at order 5.6," in theorems["held"]
    assert "Rényi filter at order 4.3," in theorems["larger"]


def test_a_renyi_filter_caps_figure_is_cks_at_its_order_on_the_summed_curves(tmp_path):
    """A cap of 6 at 1e-6 set before any release (order 5.6): 50 Laplace releases of 0.1 and 4
    Gaussians of sigma/sensitivity 5 are held to 50 x Mironov's Laplace curve at 5.6 plus 4 x 5.6 / 50,
    converted by CKS 2020 Prop 12 at half the delta, 4.333 (their running figure, 22 orders at 1/44
    of the delta each, is 4.724); one Gaussian more adds 5.6 / 50 to the divergence."""
    url = new_ledger(tmp_path)
    assert cli_main(url, "cap", "set", "a", "--epsilon", "6", "--delta", "1e-6", "--filter", "renyi").code == 0
    mechanisms = ["{name: laplace, epsilon: 0.1}"] * 50 + [gaussian(5)] * 4
    assert cli_main(url, "record", plan(tmp_path / "r.yaml", *mechanisms)).code == 0
    order = _reference_cap_order(6, 1e-6)
    half = (1 - REFERENCE_ALLOWANCE) * 1e-6
    divergence = 50 * rdp_privacy_accountant._laplace_rdp(0.1, order) + 4 * order / (2 * 5**2)
    expected = _reference_prop12(divergence, order, half)
    assert round(expected, 3) == 4.333
    assert round(_reference_filter(pure=5, pure_rho=50 * 0.1**2 / 2, rho=4 / 50, delta=1e-6), 3) == 4.724
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert (cap["accountant"], cap["case"]) == ("rdp", "adaptive")
    assert expected <= cap["current"] <= expected * (1 + 1e-8)
    (checked,) = cli_main(url, "check", plan(tmp_path / "g.yaml", gaussian(5), prefix="g"), "--json").json()["caps"]
    after = _reference_prop12(divergence + order / 50, order, half)
    assert after <= checked["after"] <= after * (1 + 1e-8)


def test_a_renyi_filter_cap_of_pure_releases_keeps_their_pure_sum_where_smaller(tmp_path):
    """A cap of 6 at 1e-6 (order 5.6) holding 10 Laplace releases of 0.3: the pure sum 3 spends no
    delta and is below the order's statement (3.8), so it is the figure, stated by the pure filter."""
    url = new_ledger(tmp_path)
    assert cli_main(url, "cap", "set", "a", "--epsilon", "6", "--delta", "1e-6", "--filter", "renyi").code == 0
    assert cli_main(url, "record", plan(tmp_path / "r.yaml", *["{name: laplace, epsilon: 0.3}"] * 10)).code == 0
    order = _reference_cap_order(6, 1e-6)
    statement = _reference_prop12(10 * rdp_privacy_accountant._laplace_rdp(0.3, order), order, 5e-7)
    assert statement > 3
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert (cap["accountant"], cap["current_exact"]) == ("basic", "3")


# --------------------------------------------------------------------------
# A filter's figure never falls
# --------------------------------------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@st.composite
def releases(draw, i: int):
    """One release on {a}: a Laplace, a Gaussian, a declared pure, rho or (epsilon, delta) guarantee."""
    kind = draw(st.sampled_from(["laplace", "gaussian", "pure", "rho", "approx"]))
    reads = frozenset("a")
    if kind == "gaussian":
        m = draw(st.sampled_from([F(1), F(3), F(10)]))
        mechanism, guarantee = (Mechanism("gaussian", (("sensitivity", F(1)), ("sigma", m))),
                                Guarantee(reads, Notion.ZCDP, rho=F(1, 2) / m**2))
    elif kind == "laplace":
        e = draw(st.sampled_from([F(1, 10), F(1, 2), F(2)]))
        mechanism, guarantee = Mechanism("laplace", (("epsilon", e),)), Guarantee(reads, Notion.PURE, epsilon=e)
    elif kind == "pure":
        e = draw(st.sampled_from([F(1, 20), F(1, 4), F(1)]))
        mechanism, guarantee = Mechanism("declared"), Guarantee(reads, Notion.PURE, epsilon=e)
    elif kind == "rho":
        mechanism, guarantee = (Mechanism("declared"),
                                Guarantee(reads, Notion.ZCDP, rho=draw(st.sampled_from([F(1, 100), F(1, 4)]))))
    else:
        mechanism = Mechanism("declared")
        guarantee = Guarantee(reads, Notion.APPROX, epsilon=draw(st.sampled_from([F(1, 10), F(1)])),
                              delta=draw(st.sampled_from([F(1, 10**12), F(1, 10**9)])))
    return Release(f"r{i}", "d", reads, mechanism, (guarantee,), status=Status.PUBLISHED,
                   recorded_at=T0 + timedelta(seconds=i), published_at=T0 + timedelta(seconds=i, milliseconds=500))


@st.composite
def histories(draw):
    found = []
    for i in range(draw(st.integers(min_value=1, max_value=6))):
        release = draw(releases(i))
        found += [Release(f"{release.id}-{k}", "d", release.reads, release.mechanism, release.guarantees,
                          status=release.status, recorded_at=release.recorded_at, published_at=release.published_at)
                  for k in range(draw(st.sampled_from([1, 1, 5, 30])))]
    return found


@settings(max_examples=60, deadline=None)
@given(histories(), st.sampled_from([F(1, 10**6), F(1, 10**9)]), st.sampled_from([F(1), F(6), F(30)]))
def test_a_caps_figure_never_falls_when_a_release_is_added(history, delta, epsilon):
    """A Rényi-filter cap (its order fixed by its epsilon and delta), a Gaussian-DP cap and the
    running figure as a cap's filter: the figure each holds the releases to (`cap_decisions.cap_decision` on the running state) only rises
    as releases are added one at a time, whatever their kinds."""
    caps = [Cap("d", "renyi", frozenset("a"), epsilon=epsilon, delta=delta,
                filter=f"renyi:{_reference_cap_order(float(epsilon), float(delta)):g}"),
            Cap("d", "gaussian", frozenset("a"), epsilon=epsilon, delta=delta, filter="gaussian"),
            Cap("d", "running", frozenset("a"), epsilon=epsilon, delta=delta, filter="running")]
    before = {cap.name: (0.0, "basic") for cap in caps}
    for k in range(1, len(history) + 1):
        prefix = history[:k]
        for cap in caps:
            value, accountant = cap_figure(cap, prefix)
            previous, decided_by = before[cap.name]
            # (a pure sum kept within 1/1000 above the Rényi statement, figure_validity.PURE_PREFERENCE, may
            # give way to it: pinned below as a strict xfail)
            floor = previous * (1 - 1e-3) if decided_by == "basic" and cap.name == "renyi" else previous
            assert value >= floor, (cap.name, k, value, previous)
            before[cap.name] = (value, accountant)


def cap_figure(cap, releases) -> tuple[float, str]:
    """The figure a cap's filter holds `releases` to, and the accountant that states it."""
    total = budget.total_from_history(cap, releases, {})
    state = cap_states.state_from_history(cap, releases, {})
    decided = cap_decisions.cap_decision(cap, total.value, total.spend, state)
    return float(decided.value), decided.accountant


def test_a_renyi_caps_figure_does_not_fall_when_a_pure_release_joins_a_pure_history():
    """A Rényi-filter cap of 6 at 1e-9 (its order fixed by them): 30 Laplace releases of 2, whose
    order's statement is just below their pure sum 60, are held to that statement (the smaller of
    two that only grow); a Laplace of 0.1 more does not lower the cap's figure."""
    delta = F(1, 10**9)
    cap = Cap("d", "renyi", frozenset("a"), epsilon=F(6), delta=delta,
              filter=f"renyi:{_reference_cap_order(6, 1e-9):g}")

    def laplace(i, epsilon):
        return Release(f"l{i}", "d", frozenset("a"), Mechanism("laplace", (("epsilon", epsilon),)),
                       (Guarantee(frozenset("a"), Notion.PURE, epsilon=epsilon),), status=Status.PLANNED,
                       recorded_at=T0 + timedelta(seconds=i))

    history = [laplace(i, F(2)) for i in range(30)]
    order = _reference_cap_order(6, 1e-9)
    statement = _reference_prop12(30 * rdp_privacy_accountant._laplace_rdp(2.0, order), order, 5e-10)
    assert 60 * (1 - 1e-3) <= statement < 60
    before, accountant = cap_figure(cap, history)
    assert accountant == "rdp" and before == pytest.approx(statement, rel=1e-9)
    after, _ = cap_figure(cap, [*history, laplace(30, F(1, 10))])
    assert after >= before


# --------------------------------------------------------------------------
# A filter's figure is its own statement alone
# --------------------------------------------------------------------------


def test_a_renyi_caps_figure_does_not_fall_when_a_rho_release_joins_a_pure_history(tmp_path):
    """A cap of 30 at 1e-6 (a Rényi filter at order 2.3) holding 60 pure releases of 0.25: its
    figure is the order's statement (14.11, below the pure sum 15). A rho of 1/100 more raises it,
    by 2.3 / 100 at the order (to 14.136), though the subset's running figure falls below the pure
    sum with it (the 22 fixed orders: 12.657): the cap holds its own statement alone."""
    url = new_ledger(tmp_path)
    assert cli_main(url, "cap", "set", "a", "--epsilon", "30", "--delta", "1e-6", "--filter", "renyi").code == 0
    assert cli_main(url, "record", plan(tmp_path / "p.yaml", *[declared("{epsilon: 0.25}")] * 60)).code == 0
    (before,) = cli_main(url, "cap", "list", "--json").json()
    order = _reference_cap_order(30, 1e-6)
    assert order == 2.3

    def rr(a, e):  # randomized response's Rényi divergence (Mironov 2017, Prop 5)
        p = math.exp(e) / (1 + math.exp(e))
        return math.log(p**a * (1 - p) ** (1 - a) + (1 - p) ** a * p ** (1 - a)) / (a - 1)

    expected = _reference_prop12(60 * rr(order, 0.25), order, 5e-7)
    assert round(expected, 2) == 14.11
    assert expected <= before["current"] <= expected * (1 + 1e-8)
    (checked,) = cli_main(url, "check", plan(tmp_path / "r.yaml", declared("{rho: 0.01}"), prefix="q"),
                          "--json").json()["caps"]
    assert checked["after"] >= checked["current"]
    assert checked["after"] >= _reference_prop12(60 * rr(order, 0.25) + order / 100, order, 5e-7)


def test_a_renyi_caps_figure_is_the_statement_its_theorem_names(tmp_path):
    """One Gaussian of sigma/sensitivity 3 under a cap of 5.4 at 1e-6 (order 6): the cap's theorem
    says "Rényi filter at order 6", whose statement is 6 / 18 converted at half the delta, 2.694:
    that is its figure, not the smaller running figure of the release (22 fixed orders at 1/44 of the
    delta each, 1.8128), a statement whose delta would add to the filter's."""
    url = new_ledger(tmp_path)
    assert cli_main(url, "cap", "set", "a", "--epsilon", "5.4", "--delta", "1e-6", "--filter", "renyi").code == 0
    (cap,) = cli_main(url, "check", plan(tmp_path / "g.yaml", gaussian(3)), "--json").json()["caps"]
    order = _reference_cap_order(5.4, 1e-6)
    assert f"Rényi filter at order {order:g}," in cap["theorem"]
    expected = _reference_prop12(order / 18, order, 5e-7)
    assert round(expected, 3) == 2.694
    assert round(_reference_filter(rho=1 / 18, delta=1e-6), 4) == 1.8128
    assert expected <= cap["after"] <= expected * (1 + 1e-8)


def test_a_gaussian_dp_caps_figure_is_its_gaussian_dp_epsilon(tmp_path):
    """A Gaussian of sigma/sensitivity 10 and four Laplace releases of 0.5 under a Gaussian-DP cap of
    20 at 1e-6: mu^2 = 1/100 + 4 (-2 Phi^-1(1 / (1 + e^0.5)))^2, the cap's figure the Balle-Wang
    epsilon of that mu at the whole delta."""
    url = new_ledger(tmp_path)
    assert cli_main(url, "cap", "set", "a", "--epsilon", "20", "--delta", "1e-6", "--filter", "gaussian").code == 0
    mechanisms = [gaussian(10)] + ["{name: laplace, epsilon: 0.5}"] * 4
    (cap,) = cli_main(url, "check", plan(tmp_path / "r.yaml", *mechanisms), "--json").json()["caps"]
    pure_mu = -2 * ndtri(1 / (1 + math.exp(0.5)))
    expected = balle_wang_epsilon(mpmath.sqrt(mpmath.mpf(1) / 100 + 4 * mpmath.mpf(pure_mu) ** 2), mpmath.mpf("1e-6"))
    assert cap["accountant"] == "gdp"
    assert expected * (1 - 1e-9) <= cap["after"] <= expected * (1 + 1e-9)


def test_a_cap_set_with_filter_renyi_names_the_order_its_epsilon_and_delta_fix(tmp_path):
    url = new_ledger(tmp_path)
    assert cli_main(url, "cap", "set", "a", "--epsilon", "6", "--delta", "1e-6", "--filter", "renyi").code == 0
    (cap,) = cli_main(url, "check", plan(tmp_path / "r.yaml", gaussian(3)), "--json").json()["caps"]
    assert cap["accountant"] == "rdp"
    assert f"Rényi filter at order {_reference_cap_order(6, 1e-6):g}," in cap["theorem"], cap["theorem"]


@pytest.mark.parametrize("guarantee", ["{rho: 0.001}", "{epsilon: 0.01, delta: 1e-12}"])
def test_a_gaussian_dp_cap_refuses_a_release_it_has_no_mu_for(tmp_path, guarantee):
    """Gaussian DP states no mu for a rho without its Gaussian, nor for an (epsilon, delta) claim:
    the cap's figure is ∞ with either, so `check` refuses it, whatever its size."""
    url = new_ledger(tmp_path)
    assert cli_main(url, "cap", "set", "a", "--epsilon", "50", "--delta", "1e-6", "--filter", "gaussian").code == 0
    checked = cli_main(url, "check", plan(tmp_path / "r.yaml", declared(guarantee)), "--json")
    assert checked.json()["caps"][0]["after"] == "inf"
    assert checked.code == 1
