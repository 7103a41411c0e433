"""A Gaussian release declared only by (epsilon, delta) (no sigma): the claim implies
sigma / sensitivity >= m*, the smallest multiplier the analytic Gaussian allows (Balle and
Wang 2018, Theorem 8), so at any other delta' it costs at most what the Gaussian with m*
costs (catalogue.implied_gaussian_multiplier).

Expected figures come from this file's own bisection on the Balle-Wang delta with mpmath
(tests/exact_profiles.py), not from the ledger's code.
"""

from __future__ import annotations

import math
import textwrap
from fractions import Fraction

import mpmath
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support import cli_main, dump_tables

from conftest import _reference_filter

import ledger
from exact_profiles import epsilon_at, gaussian_delta
from ledger.accounting import composition_figures, dp_events, figure_validity, subset_composition
from ledger.accounting.catalogue import derive_guarantees, implied_gaussian_multiplier
from ledger.core.records import Mechanism, Notion, Release, Status

F = Fraction


def smallest_multiplier(epsilon, delta) -> tuple[mpmath.mpf, mpmath.mpf]:
    """(low, high) around m*, the smallest sigma / sensitivity with a Gaussian delta(epsilon)
    <= delta (Balle and Wang 2018, Thm 8), by bisection in mpmath at 40 digits: delta(low) >
    delta >= delta(high), high / low - 1 < 1e-25."""
    delta = mpmath.mpf(delta.numerator) / delta.denominator if isinstance(delta, Fraction) else mpmath.mpf(delta)
    epsilon = mpmath.mpf(epsilon.numerator) / epsilon.denominator if isinstance(epsilon, Fraction) \
        else mpmath.mpf(epsilon)

    def private(m):  # exact_profiles.gaussian_delta takes s = sensitivity / sigma = 1 / m
        return gaussian_delta(epsilon, 1 / m) <= delta

    low, high = mpmath.mpf("1e-6"), mpmath.mpf("1e6")
    assert not private(low) and private(high)
    while high / low - 1 > mpmath.mpf("1e-25"):
        middle = mpmath.sqrt(low * high)
        if private(middle):
            high = middle
        else:
            low = middle
    return low, high


CLAIMS = [(F(1), F(1, 10**5)), (F(1, 10), F(1, 10**9)), (F(5), F(1, 10**12)), (F(0), F(1, 1000)),
          (F(3, 2), F(1, 10**30)), (F(20), F(1, 10**6)), (F(1, 1000), F(1, 10**3))]


@pytest.mark.parametrize("epsilon, delta", CLAIMS)
def test_the_implied_multiplier_is_the_balle_wang_minimum_rounded_down(epsilon, delta):
    low, high = smallest_multiplier(epsilon, delta)
    ours = implied_gaussian_multiplier(epsilon, delta)
    assert mpmath.mpf(ours.numerator) / ours.denominator <= low  # never above m*: the bound stays valid
    assert float(ours) >= float(low) * (1 - 1e-9)  # and only by the rounding and the error allowances


@pytest.mark.parametrize("epsilon, delta", CLAIMS)
def test_the_implied_gaussian_recovers_the_claim_at_its_own_delta(epsilon, delta):
    """The Gaussian with the implied multiplier, at the release's own delta, has the claimed
    epsilon within rounding, never below (its exact profile, computed here)."""
    ours = implied_gaussian_multiplier(epsilon, delta)
    recovered = epsilon_at(mpmath.mpf(delta.numerator) / delta.denominator, s=1 / mpmath.mpf(float(ours)),
                           high=100.0)
    assert float(epsilon) <= recovered + 1e-12 and recovered <= float(epsilon) + 1e-8


def test_the_claim_and_the_zcdp_bound_it_implies_are_both_derived():
    mechanism = Mechanism("gaussian", (("delta", F(1, 10**5)), ("epsilon", F(1))))
    claim, implied = derive_guarantees(mechanism, frozenset({"a"}))[0]
    low, _ = smallest_multiplier(F(1), F(1, 10**5))
    assert (claim.notion, claim.epsilon, claim.delta) == (Notion.APPROX, 1, F(1, 10**5))
    assert implied.notion == Notion.ZCDP and implied.protects == frozenset({"a"})
    assert implied.rho >= 1 / (2 * F(float(low)) ** 2) * (1 - F(1, 10**15))  # rounded up
    assert float(implied.rho) <= float(1 / (2 * low**2)) * (1 + 1e-10)
    generic = Mechanism("declared")  # a generic (epsilon, delta) claim implies nothing of a Gaussian
    assert dp_events._mechanism_event(generic)[0] is None


def _release(epsilon, delta, sensitivity=None) -> Release:
    params = {"epsilon": epsilon, "delta": delta}
    if sensitivity is not None:
        params["sensitivity"] = sensitivity
    mechanism = Mechanism("gaussian", tuple(sorted(params.items())))
    guarantees, problems = derive_guarantees(mechanism, frozenset({"a"}))
    assert not problems
    return Release("g", "d", frozenset({"a"}), mechanism, guarantees, status=Status.PLANNED)


def _printed(release: Release, delta: Fraction) -> float:
    """The figure every command prints for {a}: the smallest valid accountant's."""
    comp = subset_composition.composition([release], [], {"a"})
    return float(figure_validity.best(composition_figures.figures(comp, delta)).epsilon)


@settings(max_examples=40, deadline=None)
@given(epsilon=st.fractions(min_value=F(1, 100), max_value=F(4)).map(lambda x: x.limit_denominator(1000)),
       delta_exponent=st.integers(min_value=3, max_value=12),
       other_exponent=st.integers(min_value=2, max_value=15),
       extra=st.floats(min_value=0, max_value=3), sensitivity=st.sampled_from([None, F(1), F(7, 2)]))
def test_never_below_the_true_figure_of_any_gaussian_the_claim_allows(epsilon, delta_exponent, other_exponent,
                                                                     extra, sensitivity):
    """Any Gaussian (sigma / sensitivity = m >= m*) satisfying the claim has at the other delta'
    a true epsilon no larger than the ledger's figure for the release. For m* the figure is the
    running figure of its rho 1 / (2 m*^2) (the fixed orders at 1/44 of delta' each, conftest's
    reference), whatever the claim's own delta: the claim is never charged beside it."""
    delta, other = F(1, 10**delta_exponent), F(1, 10**other_exponent)
    _, high = smallest_multiplier(epsilon, delta)
    m = high * (1 + mpmath.mpf(extra))  # consistent with the claim: delta(epsilon; m) <= delta
    assert gaussian_delta(mpmath.mpf(epsilon.numerator) / epsilon.denominator, 1 / m) <= mpmath.mpf(delta)
    true = epsilon_at(mpmath.mpf(1) / 10**other_exponent, s=1 / m, high=200.0)
    printed = _printed(_release(epsilon, delta, sensitivity), other)
    assert math.isfinite(printed) and printed >= true - 1e-12
    if extra == 0:  # the implied multiplier is m* rounded down: its rho within float error of m*'s
        expected = _reference_filter(rho=float(1 / (2 * high**2)), delta=float(other))
        assert printed == pytest.approx(expected, rel=1e-6)


DATASET = """\
dataset: survey
delta: 1e-9
variables: [{name: income}, {name: age}]
"""

GAUSSIAN = """\
dataset: survey
releases:
  - id: g
    reads: [income]
    mechanism: {name: gaussian, epsilon: 1, delta: 1e-5}
"""


def _ledger(tmp_path, releases: str = GAUSSIAN, cap: bool = True, dataset: str = DATASET):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    (tmp_path / "d.yaml").write_text(dataset)
    (tmp_path / "r.yaml").write_text(releases)
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    if cap:  # (a cap at 1e-9 refused the Gaussian before: its loss was ∞ there)
        assert cli_main(url, "cap", "set", "income", "--epsilon", "50", "--delta", "1e-9").code == 0
    recorded = cli_main(url, "record", tmp_path / "r.yaml")
    assert recorded.code == 0, recorded.err
    return url


def test_every_command_prints_the_implied_gaussians_finite_figure_at_a_smaller_delta(tmp_path):
    """At the dataset's delta 1e-9 (below the release's 1e-5, and its allowance 5e-10 far below it)
    the claim alone would be ∞, or refused; it is the implied Gaussian's figure: the running figure
    of its rho (22 fixed orders, 1/44 of the delta each), the same in subset, table, check and the
    API; the cap set before it is the running figure as a filter, which holds it to that figure."""
    url = _ledger(tmp_path)
    low, _ = smallest_multiplier(F(1), F(1, 10**5))
    rho = float(1 / (2 * low**2))  # the worst Gaussian the claim allows
    true = epsilon_at(mpmath.mpf("1e-9"), s=1 / low, high=100.0)
    expected = _reference_filter(rho=rho, delta=1e-9)
    assert expected > true
    subset = cli_main(url, "subset", "income", "--json").json()["epsilon"]
    assert math.isfinite(subset) and subset == pytest.approx(expected, rel=1e-6)
    assert cli_main(url, "table", "--json").json()["total_shown"]["values"]["income"] == subset
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert "running figure as a filter" in cap["theorem"]
    assert cap["current"] == subset
    (tmp_path / "p.yaml").write_text("dataset: survey\nreleases:\n"
                                     "  - {id: p, reads: [income], mechanism: {name: laplace, epsilon: 1}}\n")
    checked = cli_main(url, "check", tmp_path / "p.yaml", "--json")
    assert checked.code == 0 and checked.json()["caps"][0]["current"] == cap["current"]
    book = ledger.open(url)
    assert book.subset(["income"]).epsilon == subset
    assert cli_main(url, "audit", "verify").code == 0


def test_at_its_own_delta_the_release_is_charged_by_its_rho_never_by_the_claim(tmp_path):
    # the release is charged by the rho its claim implies (the side fixed for a release offering
    # both, test_fixed_sides), at every delta: at the claim's own delta 1e-5 the running figure of
    # that rho (the fixed orders at 1/44 of it, 1.315), above the claim's 1 and the exact figure of
    # the worst Gaussian it allows (Balle and Wang 2018, Thm 8, this file's mpmath bisection: 1)
    url = _ledger(tmp_path)
    low, _ = smallest_multiplier(F(1), F(1, 10**5))
    assert epsilon_at(mpmath.mpf("1e-5"), s=1 / low, high=100.0) == pytest.approx(1, abs=1e-9)
    shown = cli_main(url, "subset", "income", "--delta", "1e-5", "--json").json()
    assert shown["case"] == "adaptive"
    expected = _reference_filter(rho=float(1 / (2 * low**2)), delta=1e-5)
    assert round(expected, 3) == 1.315
    assert shown["epsilon"] == pytest.approx(expected, rel=1e-6)
    # the PLD, information only, at the whole delta: the claim itself, never below it
    pld = cli_main(url, "subset", "income", "--delta", "1e-5", "--accountant", "pld", "--json").json()
    assert 1 <= pld["epsilon"] <= 1 + 5e-3


OWN_DELTA = DATASET.replace("delta: 1e-9", "delta: 2e-5")  # (its allowance, 1e-5, holds one claim)


def test_a_generic_epsilon_delta_claim_past_the_allowance_is_refused(tmp_path):
    """A claim (1, 1e-5) with nothing implied: its delta is past the allowance of the dataset's
    delta 1e-9 (half of it), so `record` refuses it, exit 1, nothing written, naming the subset.
    Where the allowance holds it (a dataset at 2e-5), it is recorded, and at a smaller delta its
    subset has no figure."""
    generic = textwrap.dedent("""\
        dataset: survey
        releases:
          - id: d
            reads: [income]
            mechanism: {name: declared}
            guarantees: [{epsilon: 1, delta: 1e-5}]
        """)
    url = f"sqlite:///{tmp_path / 'refused.db'}"
    (tmp_path / "d.yaml").write_text(DATASET)
    (tmp_path / "r.yaml").write_text(generic)
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    before = dump_tables(url)
    refused = cli_main(url, "record", tmp_path / "r.yaml")
    assert refused.code == 1
    assert "allowance would be passed" in refused.err and "{income}" in refused.err, refused.err
    assert dump_tables(url) == before
    url = _ledger(tmp_path, generic, cap=False, dataset=OWN_DELTA)
    assert cli_main(url, "subset", "income", "--json").json()["epsilon"] == 1
    assert cli_main(url, "subset", "income", "--delta", "1e-9", "--json").json()["epsilon"] == "inf"


def test_a_ledger_of_schema_10_gives_its_rows_the_implied_event_and_keeps_its_record(tmp_path, monkeypatch):
    """A Gaussian (epsilon, delta) release recorded by schema 10 holds the claim alone (the book
    of record is not rewritten): the schema 11 upgrade gives its accounting row the implied
    multiplier's event, not charged through it, once, with an audit event; `audit verify` agrees."""
    from test_accounting_rows import sql

    from ledger.accounting import catalogue

    with monkeypatch.context() as patched:  # schema 10 derived no implied multiplier
        patched.setattr(catalogue, "implied_gaussian_multiplier", lambda epsilon, delta: None)
        dp_events._mechanism_event.cache_clear()
        url = _ledger(tmp_path, cap=False, dataset=OWN_DELTA)  # (the claim alone must fit the allowance)
    dp_events._mechanism_event.cache_clear()
    before = cli_main(url, "subset", "income", "--delta", "1e-9", "--json").json()
    assert before["epsilon"] == "inf"
    (events,), = sql(url, "SELECT count(*) FROM audit_events")[0]
    sql(url, "UPDATE ledger_meta SET value = '10' WHERE key = 'schema_version'")
    assert cli_main(url, "subset", "income", "--delta", "1e-9", "--json").json() == before
    migrated, rows = sql(url, f"SELECT kind, subject FROM audit_events WHERE seq > {events}",
                         "SELECT e.key, charged_by_event FROM release_accounting JOIN accounting_events e "
                         "ON e.id = event WHERE release = 'g'")
    assert migrated == [("ledger.migrated", "schema 11"), ("ledger.migrated", "schema 12"),
                        ("ledger.migrated", "schema 13"), ("ledger.migrated", "schema 14"), ("ledger.migrated", "schema 15"),
                        ("ledger.migrated", "schema 16"), ("ledger.migrated", "schema 17"), ("ledger.migrated", "schema 18"),
                        ("ledger.migrated", "schema 19"), ("ledger.migrated", "schema 20")]
    multiplier = implied_gaussian_multiplier(F(1), F(1, 10**5))
    assert rows == [(f"gaussian:{multiplier}", 0)]
    assert cli_main(url, "audit", "verify").code == 0
    cli_main(url, "subset", "income")
    assert sql(url, "SELECT count(*) FROM audit_events")[0] == [(events + 10,)]  # once each (schemas 11-20)


@pytest.mark.parametrize("x", [-1000.0, -60.0, -37.5, -30.0001, -30.0, -29.999, -23.654, -8.0, -1.0, -1e-9, 0.0,
                               1e-9, 0.7, 5.0, 9.0])
def test_the_normal_log_cdf_is_within_its_allowance(x):
    """`_log_ndtr` (no scipy for recording) against mpmath: far inside the 1e-13 of its size
    `_gaussian_delta_below` allows toward a smaller delta."""
    from ledger.accounting.catalogue import _log_ndtr

    exact = mpmath.log(mpmath.ncdf(mpmath.mpf(x)))
    assert abs(_log_ndtr(x) - exact) <= 1e-15 * (1 + abs(exact))


def test_a_retry_of_a_file_recorded_before_schema_11_is_the_same_release(tmp_path, monkeypatch):
    """Recording the same file again after the upgrade is a safe retry (exit 0, nothing
    written): the file states the mechanism's (epsilon, delta) and no guarantees, as it did;
    only what the catalogue derives from it gained the implied Gaussian's zCDP bound. A file
    stating other guarantees for the id is still refused, naming them."""
    from test_accounting_rows import sql

    from ledger.accounting import catalogue

    with monkeypatch.context() as patched:  # schema 10 derived no implied multiplier
        patched.setattr(catalogue, "implied_gaussian_multiplier", lambda epsilon, delta: None)
        dp_events._mechanism_event.cache_clear()
        url = _ledger(tmp_path, cap=False, dataset=OWN_DELTA)  # (the claim alone must fit the allowance)
    dp_events._mechanism_event.cache_clear()
    sql(url, "UPDATE ledger_meta SET value = '10' WHERE key = 'schema_version'")
    cli_main(url, "subset", "income")  # the upgrade
    before = dump_tables(url)
    retried = cli_main(url, "record", tmp_path / "r.yaml")
    assert retried.code == 0, retried.err
    assert "already recorded" in retried.out
    assert dump_tables(url) == before
    (tmp_path / "other.yaml").write_text(GAUSSIAN + "    guarantees: [{epsilon: 2, delta: 1e-5}]\n")
    refused = cli_main(url, "record", tmp_path / "other.yaml")
    assert refused.code == 2 and "fields that differ: guarantees" in refused.err
    assert dump_tables(url) == before


def _exact_balle_wang(mu: float, epsilon: float) -> mpmath.mpf:
    """delta(epsilon) of the Gaussian with sensitivity / sigma = mu (Balle and Wang 2018, Thm 8),
    in mpmath at 80 digits (the float arguments taken exactly)."""
    with mpmath.workdps(80):
        m, e = mpmath.mpf(mu), mpmath.mpf(epsilon)
        return mpmath.ncdf(m / 2 - e / m) - mpmath.exp(e) * mpmath.ncdf(-m / 2 - e / m)


def _check_balle_wang_bounds(multiplier: float, epsilon: float) -> None:
    """`gaussian_delta` (up: overclaims, the headroom's epsilon) is never below the exact delta,
    `_gaussian_delta_below` (down: the implied multiplier) never above it, both from the one
    formula, and each within 1e-4 of it (1e-4: the allowance of 1e-13 on each logarithm, where
    the two terms nearly cancel) while the delta is a normal float."""
    from ledger.accounting.catalogue import _gaussian_delta_below, gaussian_delta

    rho = 1 / (2 * multiplier * multiplier)
    exact = _exact_balle_wang(math.sqrt(2 * rho), epsilon)  # the up direction's mu, from its float rho
    up = gaussian_delta(rho, epsilon)
    assert up >= exact
    exact_below = _exact_balle_wang(1 / multiplier, epsilon)
    down = _gaussian_delta_below(multiplier, epsilon)
    assert down <= exact_below
    if exact > 1e-290:
        assert up <= exact * (1 + mpmath.mpf("1e-4"))
    if exact_below > 1e-290:
        assert down >= exact_below * (1 - mpmath.mpf("1e-4"))


@pytest.mark.parametrize("multiplier", [1e-3, 0.05, 0.5, 1.0, 2.0, 10.0, 100.0, 8918.123582246053])
@pytest.mark.parametrize("epsilon", [0.0, 1e-6, 0.004032114059214565, 0.5, 1.0, 3.0, 10.0, 50.0, 300.0])
def test_the_balle_wang_delta_is_bounded_each_way_against_mpmath(multiplier, epsilon):
    """(multiplier 8918, epsilon 0.00403: the terms cancel to 3e-6 of each; scipy's linear
    difference, nudged up by 1e-9, was 1.1e-8 below the exact delta there.)"""
    _check_balle_wang_bounds(multiplier, epsilon)


@settings(max_examples=300, deadline=None)
@given(log_multiplier=st.floats(min_value=-3, max_value=4), log_epsilon=st.floats(min_value=-7, max_value=2.5))
@example(log_multiplier=1.96875, log_epsilon=-0.38671875)  # a subnormal delta: rounded down to 0
def test_the_balle_wang_delta_bounds_hold_anywhere(log_multiplier, log_epsilon):
    _check_balle_wang_bounds(10**log_multiplier, 10**log_epsilon)
