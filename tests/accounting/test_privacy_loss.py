"""The Gaussian PLD built with numpy (ledger/accounting/privacy_loss.py) against dp_accounting's own
construction (the peer) and the exact Gaussian privacy profile (Balle and Wang 2018, Thm 8)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as PLD
from dp_accounting.pld import privacy_loss_mechanism
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from ledger.accounting.privacy_loss import gaussian_deltas, gaussian_pld, to_dp_accounting


def exact_delta(multiplier: float, epsilon: float) -> float:
    """Balle and Wang 2018, Theorem 8, with scipy's normal CDF (a different code path)."""
    a = 1 / multiplier
    return norm.cdf(-epsilon / a + a / 2) - math.exp(epsilon) * norm.cdf(-epsilon / a - a / 2)


@pytest.mark.parametrize("multiplier,interval", [(10, 1e-4), (1, 1e-3), (0.5, 5e-3), (100, 1e-4), (0.1, 0.05)])
def test_the_same_pld_as_dp_accounting_builds(multiplier, interval):
    ours = gaussian_pld(multiplier, interval)
    peer = PLD.from_gaussian_mechanism(standard_deviation=multiplier, value_discretization_interval=interval,
                                       pessimistic_estimate=True, use_connect_dots=True)
    mine, theirs = ours._pmf_remove, peer._pmf_remove
    assert mine._lower_loss == theirs._lower_loss and len(mine._probs) == len(theirs._probs)
    assert np.max(np.abs(mine._probs - theirs._probs)) < 1e-10
    for delta in (1e-3, 1e-6, 1e-9):
        # ours is built from deltas bounded from above (gaussian_deltas): its figure only goes up
        assert ours.get_epsilon_for_delta(delta) == pytest.approx(peer.get_epsilon_for_delta(delta), rel=1e-9)
        assert ours.get_epsilon_for_delta(delta) >= peer.get_epsilon_for_delta(delta)


def mp_delta(multiplier: float, epsilon: float) -> mpmath.mpf:
    """Balle and Wang 2018, Theorem 8, in mpmath at 80 digits, the float arguments taken exactly."""
    with mpmath.workdps(80):
        mu, e = 1 / mpmath.mpf(multiplier), mpmath.mpf(epsilon)
        return mpmath.ncdf(mu / 2 - e / mu) - mpmath.exp(e) * mpmath.ncdf(-mu / 2 - e / mu)


@settings(max_examples=40, deadline=None)
@given(multiplier=st.floats(0.2, 200), epsilon=st.floats(0, 12))
def test_deltas_bound_the_closed_form_from_above_and_match_dp_accounting(multiplier, epsilon):
    """Never below the exact delta; above it by the allowances of catalogue._balle_wang_delta
    (1e-13 of each logarithm, 1e-12 of the result): within 1e-4 of it, and of dp_accounting's
    figure, while the delta is a normal float (where the terms cancel to 1e-6 of each, a relative
    2e-5 above the exact: multiplier 1e5 at its grid's top)."""
    ours = float(gaussian_deltas(multiplier, [epsilon])[0])
    peer = privacy_loss_mechanism.GaussianPrivacyLoss(multiplier, sensitivity=1).get_delta_for_epsilon(epsilon)
    exact = mp_delta(multiplier, epsilon)
    assert ours >= exact
    if exact > 1e-290:
        assert ours <= exact * (1 + mpmath.mpf("1e-4"))
        assert ours == pytest.approx(peer, rel=1e-4)
    assert ours == pytest.approx(max(exact_delta(multiplier, epsilon), 0.0), rel=1e-4, abs=1e-15)


@pytest.mark.parametrize("multiplier", [0.1, 1.0, 10.0, 100.0, 1000.0, 8918.123582246053, 1e5])
def test_deltas_on_the_grid_are_never_below_the_exact_profile(multiplier):
    """At the points of the grid `gaussian` builds a PLD on (the top ones included, where the
    two terms nearly cancel: delta ~ e^-50 there, a 1e-6 part of each term at multiplier 1e5),
    never below the exact delta. dp_accounting's arithmetic, which these deltas copied before,
    was below it at most of these points (by a relative 1.5e-8 at multiplier 1e5, 1e-12 at 10),
    so a PLD built from it could under-report."""
    from scipy import special

    from ledger.accounting.privacy_loss import LOG_MASS_TRUNCATION_BOUND

    interval = 1e-4 / multiplier  # (a grid of 100,000 to 150,000 points: every 997th and the top 50)
    lower_x = float(special.ndtri(0.5 * math.exp(LOG_MASS_TRUNCATION_BOUND)) * multiplier + 0.0) - 1
    upper = math.ceil((-0.5 - lower_x) / multiplier ** 2 / interval)
    points = np.unique(np.concatenate([np.arange(0, upper + 1, 997), np.arange(upper - 50, upper + 1)]))
    epsilons = points * interval
    deltas = gaussian_deltas(multiplier, epsilons)
    peer = privacy_loss_mechanism.GaussianPrivacyLoss(multiplier, sensitivity=1)
    below = 0
    for epsilon, delta in zip(epsilons.tolist(), deltas.tolist()):
        exact = mp_delta(multiplier, epsilon)
        assert delta >= exact, (epsilon, delta, exact)
        assert delta <= exact * (1 + mpmath.mpf("1e-4"))
        below += peer.get_delta_for_epsilon(epsilon) < exact
    assert below > 0  # the region is one where dp_accounting's figure is low


@settings(max_examples=25, deadline=None)
@given(multiplier=st.floats(0.3, 50), delta_exponent=st.integers(3, 12))
def test_never_below_the_exact_profile_and_within_the_grid(multiplier, delta_exponent):
    delta = 10.0 ** -delta_exponent
    interval = 1e-3
    epsilon = gaussian_pld(multiplier, interval).get_epsilon_for_delta(delta)
    # the exact delta at the printed epsilon is at most the target: the figure is valid
    assert exact_delta(multiplier, epsilon) <= delta * (1 + 1e-9)
    # and the figure is within a few grid steps of the exact epsilon (found by bisection)
    low, high = 0.0, epsilon + 1
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if exact_delta(multiplier, middle) > delta else (low, middle)
    assert high <= epsilon <= high + 3 * interval


def test_refuses_what_has_no_pld():
    with pytest.raises(ValueError):
        gaussian_pld(0.0, 1e-3)


@pytest.mark.parametrize("count", [2, 7, 100, 1000])
@pytest.mark.parametrize("make", [
    lambda: PLD.from_laplace_mechanism(parameter=1000, value_discretization_interval=1e-4),
    lambda: PLD.from_laplace_mechanism(parameter=10, value_discretization_interval=1e-3),
    lambda: PLD.from_discrete_laplace_mechanism(parameter=0.1, sensitivity=1, value_discretization_interval=1e-3),
    lambda: gaussian_pld(10, 1e-3),
], ids=["laplace-1000", "laplace-10", "discrete-laplace", "gaussian"])
def test_self_composition_is_dp_accountings(make, count):
    from ledger.accounting.privacy_loss import self_compose

    base = make()
    ours, peer = self_compose(base, count), base.self_compose(count)
    mine, theirs = ours._pmf_remove, peer._pmf_remove
    assert type(mine) is type(theirs)
    if hasattr(theirs, "_probs"):
        assert mine._lower_loss == theirs._lower_loss and len(mine._probs) == len(theirs._probs)
        assert np.max(np.abs(mine._probs - theirs._probs)) < 1e-12
    assert mine._infinity_mass == pytest.approx(theirs._infinity_mass, rel=1e-12, abs=1e-30)
    for delta in (1e-3, 1e-6, 1e-9):
        assert ours.get_epsilon_for_delta(delta) == pytest.approx(peer.get_epsilon_for_delta(delta), rel=1e-12)


def _randomized_response(epsilon: float, interval: float):
    steps = max(1, math.ceil(epsilon / interval))
    p = 1 / (1 + math.exp(-steps * interval))
    return PLD.PrivacyLossDistribution.create_from_rounded_probability({steps: p, -steps: 1 - p}, 0.0, interval,
                                                                       pessimistic_estimate=True)


@pytest.mark.parametrize("interval", [1e-3, 2.0 ** -10])
@pytest.mark.parametrize("left, right", [
    (lambda h: PLD.from_laplace_mechanism(parameter=10, value_discretization_interval=h).self_compose(50),
     lambda h: PLD.from_laplace_mechanism(parameter=3, value_discretization_interval=h)),
    (lambda h: gaussian_pld(4.0, h),
     lambda h: PLD.from_discrete_laplace_mechanism(parameter=0.2, sensitivity=2, value_discretization_interval=h)),
    (lambda h: _randomized_response(0.3, h).self_compose(20), lambda h: gaussian_pld(25.0, h)),
    (lambda h: _randomized_response(0.05, h), lambda h: _randomized_response(0.7, h)),  # small sparse: dp_accounting's
], ids=["laplace-laplace", "gaussian-dlaplace", "rr-gaussian", "sparse"])
def test_composition_is_dp_accountings_bit_for_bit(left, right, interval):
    """Brief h3: `privacy_loss.compose` truncates the convolved tails with numpy; the PMF, the
    infinity mass and the figures are dp_accounting's own, exactly (no tolerance)."""
    from ledger.accounting.privacy_loss import compose

    a, b = left(interval), right(interval)
    ours, peer = compose(a, b), a.compose(b)
    mine, theirs = ours._pmf_remove, peer._pmf_remove
    assert type(mine) is type(theirs)
    if hasattr(theirs, "_probs"):
        assert mine._lower_loss == theirs._lower_loss
        assert np.array_equal(mine._probs, theirs._probs)
    assert mine._infinity_mass == theirs._infinity_mass
    for delta in (1e-3, 1e-6, 1e-9, 1e-12):
        assert ours.get_epsilon_for_delta(delta) == peer.get_epsilon_for_delta(delta)


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=60), st.floats(0.0, 2.0))
@settings(max_examples=300, deadline=None)
def test_the_tail_search_is_dp_accountings_loop(values, threshold):
    from ledger.accounting.privacy_loss import _prefix_within

    s, expected = 0, len(values)
    for i, value in enumerate(np.asarray(values)):  # dp_accounting's _find_prefix_to_truncate
        s += value
        if s > threshold:
            expected = i
            break
    assert _prefix_within(np.asarray(values), threshold) == expected


@given(st.lists(st.tuples(st.sampled_from(["laplace:10", "laplace:3", "dlaplace:1/5:1", "pure:3/10", "pure:1/20",
                                           "gaussian:25", "gaussian:4"]), st.integers(1, 4)),
                min_size=1, max_size=8))
@settings(max_examples=25, deadline=None)
def test_a_composition_from_kept_nodes_is_the_whole_composition_bit_for_bit(changes):
    """`pld_accountant.pld_epsilon` composes its factors in a balanced tree and keeps every node, so a
    composition that changes one setting's count composes again only the nodes above it. Each
    step's PMF and figure equal the same tree composed from scratch with dp_accounting's own
    `compose` (no node kept), whatever was composed before."""
    from ledger.accounting import dp_events, pld_accountant, renyi_curves

    pld_accountant._PRODUCTS.clear()
    interval = 2.0 ** -9

    def scratch_tree(leaves):
        if len(leaves) == 1:  # each leaf against dp_accounting's own in the tests above and below
            leaf = leaves[0]
            return (gaussian_pld(leaf[1], interval) if leaf[0] == "gaussian"
                    else to_dp_accounting(pld_accountant._event_pld(leaf[0], leaf[1], interval)))
        middle = len(leaves) // 2
        return scratch_tree(leaves[:middle]).compose(scratch_tree(leaves[middle:]))

    counts: dict = {}
    for key, more in changes:
        counts[key] = counts.get(key, 0) + more  # one setting's count grows, as a record does
        events = {dp_events.Event.from_key(k): c for k, c in counts.items()}
        precision = math.fsum(c / float(e.a) ** 2 for e, c in events.items() if e.kind == "gaussian")
        leaves = ((("gaussian", pld_accountant._down_float(1 / math.sqrt(precision))),) if precision > 0 else ()) \
            + tuple((e, c) for e, c in sorted(events.items(), key=lambda item: item[0].key) if e.kind != "gaussian")
        kept = to_dp_accounting(pld_accountant._product(leaves, interval))
        scratch = scratch_tree(leaves)
        mine, theirs = kept._pmf_remove, scratch._pmf_remove
        if hasattr(theirs, "_probs"):
            assert mine._lower_loss == theirs._lower_loss and np.array_equal(mine._probs, theirs._probs)
        assert mine._infinity_mass == theirs._infinity_mass
        assert kept.get_epsilon_for_delta(1e-9) == scratch.get_epsilon_for_delta(1e-9)
        assert pld_accountant.pld_epsilon(events, 1e-9, interval) == pytest.approx(renyi_curves._up(
            max(float(scratch.get_epsilon_for_delta(1e-9)), 0.0)), rel=1e-13)


def _same_pmf(ours, peer, exact: bool) -> None:
    mine, theirs = ours._pmf_remove, peer._pmf_remove
    assert type(mine) is type(theirs)
    if hasattr(theirs, "_probs"):
        assert mine._lower_loss == theirs._lower_loss and len(mine._probs) == len(theirs._probs)
        if exact:
            assert np.array_equal(mine._probs, theirs._probs)
        else:
            assert np.max(np.abs(mine._probs - theirs._probs)) < 1e-15
    else:
        assert mine._loss_probs == theirs._loss_probs
    assert mine._infinity_mass == theirs._infinity_mass
    for delta in (1e-3, 1e-6, 1e-9):
        assert ours.get_epsilon_for_delta(delta) == peer.get_epsilon_for_delta(delta)


@pytest.mark.parametrize("left,right", [
    (lambda h: gaussian_pld(3, h), lambda h: PLD.from_laplace_mechanism(parameter=10, value_discretization_interval=h)),
    (lambda h: PLD.from_laplace_mechanism(parameter=5, value_discretization_interval=h).self_compose(300),
     lambda h: gaussian_pld(20, h).self_compose(50)),
    (lambda h: PLD.from_randomized_response(0.3, 2, value_discretization_interval=h), lambda h: PLD.from_randomized_response(0.2, 2, value_discretization_interval=h)),
    (lambda h: PLD.from_laplace_mechanism(parameter=2, value_discretization_interval=h),
     lambda h: PLD.from_randomized_response(0.5, 2, value_discretization_interval=h)),
], ids=["gaussian-laplace", "long-dense", "sparse-sparse", "dense-sparse"])
@pytest.mark.parametrize("interval", [1e-3, 2.0 ** -8])
def test_composition_is_dp_accountings(left, right, interval):
    """The numpy tail truncation finds dp_accounting's cut points exactly: the same PMF."""
    from ledger.accounting.privacy_loss import compose

    a, b = left(interval), right(interval)
    _same_pmf(compose(a, b), a.compose(b), exact=True)


@settings(max_examples=40, deadline=None)
@given(steps=st.integers(1, 300), count=st.integers(1, 3000), exponent=st.integers(6, 14))
def test_randomized_response_is_the_binomial_dp_accounting_builds(steps, count, exponent):
    """`count` randomized responses at steps * interval: the same PMF as dp_accounting's
    `create_from_rounded_probability` of the binomial atoms, and the privacy loss's law is
    the binomial's (mean count * e * tanh(e / 2), Kairouz et al. 2015)."""
    from scipy import stats

    from ledger.accounting.privacy_loss import randomized_response_pld

    interval = 2.0 ** -exponent
    epsilon = steps * interval
    k = np.arange(count + 1)
    probabilities = stats.binom.pmf(k, count, math.exp(-np.logaddexp(0.0, -epsilon)))
    keep = probabilities > 1e-300
    mass = {int(v): float(p) for v, p in zip((2 * k - count)[keep] * steps, probabilities[keep])}
    infinity = max(0.0, 1.0 - math.fsum(mass.values()))
    peer = PLD.PrivacyLossDistribution.create_from_rounded_probability(mass, infinity, interval)
    ours = randomized_response_pld(steps, count, interval)
    _same_pmf(ours, peer, exact=True)
    pmf = ours._pmf_remove.to_dense_pmf()
    losses = (pmf._lower_loss + np.arange(len(pmf._probs))) * interval
    assert float(np.dot(losses, pmf._probs)) == pytest.approx(count * epsilon * math.tanh(epsilon / 2),
                                                              rel=1e-6, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(multiplier=st.floats(0.3, 30), copies=st.integers(1, 400), laplace=st.floats(0.5, 50),
       exponent=st.integers(6, 13), delta_exponent=st.integers(1, 14))
def test_epsilon_for_delta_is_dp_accountings(multiplier, copies, laplace, exponent, delta_exponent):
    """The vectorised scan gives dp_accounting's epsilon (to an ulp or two: numpy's exp and log)
    on dense PLDs of every shape the ledger composes, at deltas from 0.1 to 1e-14."""
    from ledger.accounting.privacy_loss import compose, epsilon_for_delta, self_compose

    interval = 2.0 ** -exponent
    pld = compose(gaussian_pld(multiplier, interval),
                  self_compose(PLD.from_laplace_mechanism(parameter=laplace, value_discretization_interval=interval),
                               copies))
    delta = 10.0 ** -delta_exponent
    assert epsilon_for_delta(pld, delta) == pytest.approx(pld.get_epsilon_for_delta(delta), rel=1e-13, abs=1e-13)


def test_epsilon_for_delta_edge_cases():
    """Infinite mass above delta: unbounded; a delta above every mass: 0; a point mass."""
    from dp_accounting.pld import pld_pmf

    from ledger.accounting.privacy_loss import epsilon_for_delta

    for probs, infinity, lower, delta in [([0.25, 0.5, 0.25], 0.01, -1, 0.001), ([0.25, 0.5, 0.25], 0.0, -1, 0.9),
                                          ([1.0], 0.0, 3, 1e-6), ([0.5, 0.0, 0.5], 1e-9, 800, 1e-6),
                                          ([0.0, 0.0, 1.0], 0.0, 5, 0.5)]:
        pld = PLD.PrivacyLossDistribution(pld_pmf.DensePLDPmf(0.5, lower, np.asarray(probs), infinity, True))
        assert epsilon_for_delta(pld, delta) == pld.get_epsilon_for_delta(delta), (probs, infinity, lower, delta)


def _same_pmf_exactly(ours, peer) -> None:
    """Two dp_accounting PLDs hold the same PMF, float for float, of the same kind."""
    mine, theirs = ours._pmf_remove, peer._pmf_remove
    assert type(mine) is type(theirs)
    if hasattr(theirs, "_probs"):
        assert mine._lower_loss == theirs._lower_loss and np.array_equal(mine._probs, theirs._probs)
    else:
        assert list(mine._loss_probs.items()) == list(theirs._loss_probs.items())
    assert mine._infinity_mass == theirs._infinity_mass
    assert mine._discretization == theirs._discretization


@settings(max_examples=40, deadline=None)
@given(parameter=st.floats(0.05, 5000), exponent=st.integers(4, 14))
def test_the_laplace_pld_is_the_one_dp_accounting_builds_bit_for_bit(parameter, exponent):
    """`privacy_loss.laplace` builds from_laplace_mechanism's PLD without
    importing dp_accounting: the same grid, the same kind (sparse up to 1000 points, else dense)
    and the same floats."""
    from ledger.accounting.privacy_loss import laplace

    interval = 2.0 ** -exponent
    peer = PLD.from_laplace_mechanism(parameter=parameter, value_discretization_interval=interval,
                                      pessimistic_estimate=True)
    _same_pmf_exactly(to_dp_accounting(laplace(parameter, interval)), peer)


@pytest.mark.parametrize("parameter,interval", [(1.0, 1e-3), (0.5, 2.0 ** -12), (1000.0, 1e-4), (3.0, 0.5)])
def test_the_laplace_pld_dense_and_sparse(parameter, interval):
    from ledger.accounting.privacy_loss import laplace

    peer = PLD.from_laplace_mechanism(parameter=parameter, value_discretization_interval=interval)
    _same_pmf_exactly(to_dp_accounting(laplace(parameter, interval)), peer)


@settings(max_examples=40, deadline=None)
@given(multiplier=st.floats(0.1, 500), exponent=st.integers(4, 14))
def test_the_gaussian_grid_is_dp_accountings_connect_dots_bounds(multiplier, exponent):
    """The Gaussian PLD's grid ends, computed without dp_accounting, are its
    GaussianPrivacyLoss.connect_dots_bounds rounded out to the grid, exactly."""
    from ledger.accounting.privacy_loss import gaussian

    interval = 2.0 ** -exponent
    bounds = privacy_loss_mechanism.GaussianPrivacyLoss(
        multiplier, sensitivity=1, pessimistic_estimate=True, log_mass_truncation_bound=-50).connect_dots_bounds()
    lower, upper = math.floor(bounds.epsilon_lower / interval), math.ceil(bounds.epsilon_upper / interval)
    ours = gaussian(multiplier, interval)
    assert (ours.lower_loss, ours.lower_loss + ours.size - 1) == (lower, upper) or (
        ours.sparse and (min(ours.loss_probs), max(ours.loss_probs)) == (lower, upper))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=300), st.lists(st.floats(0.0, 1.0), min_size=1, max_size=300))
def test_the_convolution_is_scipy_signals_fftconvolve_bit_for_bit(one, two):
    from scipy import signal

    from ledger.accounting.privacy_loss import _convolve

    a, b = np.asarray(one), np.asarray(two)
    assert np.array_equal(_convolve(a, b), signal.fftconvolve(a, b))


def test_a_cap_at_a_delta_is_decided_without_dp_accounting(tmp_path):
    """A check and a record against a cap at a delta, every release recorded before any output:
    the cap is a Rényi filter at its one order (2.2 for 50 at 1e-9), and no PLD ever decides it
    (docs/explanation/accounting.md), so its figure needs no dp_accounting, no scipy.stats, scipy.signal nor
    scipy.optimize."""
    import subprocess
    import sys

    from support import cli_main

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    (tmp_path / "d.yaml").write_text("dataset: survey\nvariables:\n  - {name: age}\n  - {name: income}\n"
                                     "caps:\n  - {subset: [age, income], epsilon: 50, delta: 1e-9, filter: renyi}\n")
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    lines = ["dataset: survey", "releases:"]
    for k, mechanism in enumerate(["{name: laplace, epsilon: 0.5}", "{name: gaussian, sigma: 3, sensitivity: 1}",
                                   "{name: laplace, epsilon: 0.5}", "{name: geometric, epsilon: 0.25}"]):
        lines.append(f"  - {{id: r{k}, reads: [age, income], mechanism: {mechanism}}}")
    (tmp_path / "plan.yaml").write_text("\n".join(lines) + "\n")
    assert cli_main(url, "record", tmp_path / "plan.yaml").code == 0
    (tmp_path / "next.yaml").write_text("dataset: survey\nreleases:\n"
                                        "  - {id: n1, reads: [age], mechanism: {name: laplace, epsilon: 0.5}}\n")
    heavy = ("dp_accounting", "scipy.stats", "scipy.signal", "scipy.optimize")
    from conftest import _reference_cap_order

    assert _reference_cap_order(50, 1e-9) == 2.2
    for command in ("check", "record"):
        code = ("import sys\nfrom ledger.cli import app as cli\n"
                f"sys.argv = ['privacy-ledger', '--db', {url!r}, {command!r}, {str(tmp_path / 'next.yaml')!r}]\n"
                "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
                f"print('IMPORTED', [m for m in {heavy!r} if m in sys.modules])")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             cwd=tmp_path).stdout
        assert "IMPORTED []" in out, out
        assert "filter: Rényi filter at order 2.2," in out and "pld" not in out, out


# the PLDs are composed without importing scipy.fft or scipy.special as
# packages (their __init__ imports scipy's array-API layer). What replaces them must give
# scipy's very numbers, bit for bit.

def test_next_fast_len_is_scipys():
    from scipy import fft

    from ledger.accounting.privacy_loss import next_fast_len

    sizes = list(range(1, 5000)) + [int(x) for x in np.random.default_rng(13).integers(5000, 3_000_000, 400)]
    for n in sizes:
        assert next_fast_len(n, True) == fft.next_fast_len(n, True), n
        assert next_fast_len(n) == fft.next_fast_len(n), n


@settings(max_examples=60, deadline=None)
@given(length=st.integers(1, 5000), extra=st.integers(0, 5000), count=st.integers(1, 40), seed=st.integers(0, 99))
def test_the_numpy_transforms_are_scipy_ffts_bit_for_bit(length, extra, count, seed):
    """`_fft` is scipy.fft.fft of a real array (its whole spectrum), and the self-composition's
    power spectrum comes back through numpy's ifft as through scipy's to the last bits (the two
    libraries' pocketfft builds may round a last bit of a complex power differently: within 1e-15
    of probabilities that sum to 1); `_convolve` is scipy.signal.fftconvolve (rfftn / irfftn)."""
    from scipy import fft, signal

    from ledger.accounting.privacy_loss import _convolve, _fft

    rng = np.random.default_rng(seed)
    probs = rng.random(length)
    probs /= probs.sum()
    size = length + extra
    assert np.array_equal(_fft(probs, size), fft.fft(probs, size))
    assert np.allclose(np.real(np.fft.ifft(_fft(probs, size) ** count)),
                       np.real(fft.ifft(fft.fft(probs, size) ** count)), rtol=0, atol=1e-15)
    other = rng.random(1 + extra)
    assert np.array_equal(_convolve(probs, other), signal.fftconvolve(probs, other))


def test_the_special_functions_are_scipy_specials_own():
    """The ufuncs imported without scipy.special's __init__ are the very objects scipy.special
    exports once it is imported; before, neither scipy.special nor scipy.fft nor scipy's
    array-API layer is imported (a fresh process)."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from ledger.accounting import privacy_loss\n"
            "u = privacy_loss._special()\n"
            "print(sorted(m for m in ('scipy.special', 'scipy.fft', 'scipy._lib._array_api') if m in sys.modules))\n"
            "print(u.log_ndtr(-3.0), u.ndtri(0.25))\n"
            "import scipy.special\n"
            "print(scipy.special.log_ndtr is u.log_ndtr, scipy.special.ndtri is u.ndtri, "
            "scipy.special._ufuncs is u, privacy_loss._special() is u)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    from scipy import special

    assert out == ["[]", f"{special.log_ndtr(-3.0)} {special.ndtri(0.25)}", "True True True True"]
