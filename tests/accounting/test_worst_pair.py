"""The worst pair found by its bounds (accounting/worst_pair.py) is the full scan's: over every
pair's figures as `pairs` makes them (operations.shown_figures.pair_accountants), the pair of the
largest printed float, the first in `pairs` order on a tie, with the same figure and accountant;
and every pair's bound is at or above the float `pairs` prints for it.

Random ledgers of test_engine_properties (families keyed and random, several guarantees, every
notion, unprotected reads: many pairs tie at ∞), and wider ones of one guarantee a release on
twelve variables, where the bounds leave most pairs' figures unmade."""

from __future__ import annotations

from fractions import Fraction
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine_properties import EPSILONS, RHOS, VARIABLES, ledgers

from ledger.accounting import every_pair, worst_pair as worst_pair_module
from ledger.accounting.charge_choice import at_delta
from ledger.accounting.ledger_index import LedgerIndex
from ledger.accounting.worst_pair import BOUNDED, pair_bounds, worst_pair
from ledger.core.numbers import safe_float
from ledger.core.records import Guarantee, Mechanism, Notion, Relation, Release
from ledger.operations.shown_figures import choose, pair_accountants

F = Fraction
DELTAS = (F(1, 10**9), F(1, 10**6), F(1, 10**4), F(2, 10**7))
WIDE = tuple(f"v{k:02d}" for k in range(12))


def full_scan(index, delta, accountant):
    """(variable, variable, printed float, accountant) of the worst row of `pairs`: the largest
    float, the first listed on a tie (as pandas' idxmax)."""
    rows = [(a, b, safe_float(shown.epsilon), shown.accountant)
            for (a, b), (_, shown) in pair_accountants(index, delta, accountant).items()]
    if not rows:
        return None
    largest = max(row[2] for row in rows)
    return next(row for row in rows if row[2] == largest)


def bounded(index, delta, accountant):
    found = worst_pair(index, delta, accountant, choose)
    if found is None:
        return None
    i, j, shown = found
    return index.variables[i], index.variables[j], safe_float(shown.epsilon), shown.accountant


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledger=ledgers(max_releases=7), delta=st.sampled_from(DELTAS), accountant=st.sampled_from(BOUNDED))
def test_the_worst_pair_by_bounds_is_the_full_scans_on_random_ledgers(ledger, delta, accountant):
    index = LedgerIndex(VARIABLES, ledger.releases, ledger.families)
    assert_bounds_hold(index, delta, accountant)
    assert bounded(index, delta, accountant) == full_scan(index, delta, accountant)


def assert_bounds_hold(index, delta, accountant):
    """Every pair's bound is at or above the float `pairs` prints for it (the search's lemma)."""
    grid = index.pair_matrix(at_delta(delta))
    rdp = every_pair.pair_rdp(index, delta, grid, pld_limit=0)
    bound = pair_bounds(index, delta, grid, rdp, accountant)
    names = index.variables
    for (a, b), (_, shown) in pair_accountants(index, delta, accountant).items():
        i, j = names.index(a), names.index(b)
        assert bound[i, j] >= safe_float(shown.epsilon), (a, b, bound[i, j], shown)


@st.composite
def wide_ledgers(draw) -> list[Release]:
    """Releases of one guarantee protecting what they read (pure, approximate or zCDP), a few
    repeated (pairs of the same figure: ties to break as `pairs` lists them)."""
    releases = []
    for k in range(draw(st.integers(1, 25))):
        reads = draw(st.frozensets(st.sampled_from(WIDE), min_size=1, max_size=4))
        notion = draw(st.sampled_from(list(Notion)))
        epsilon = draw(st.sampled_from(EPSILONS[1:]))
        guarantee = (Guarantee(reads, notion, epsilon=epsilon) if notion == Notion.PURE else
                     Guarantee(reads, notion, epsilon=epsilon, delta=F(1, 10**draw(st.integers(7, 11))))
                     if notion == Notion.APPROX else Guarantee(reads, notion, rho=draw(st.sampled_from(RHOS))))
        release = Release(id=f"w{k}", dataset="survey", reads=reads, mechanism=Mechanism("random"),
                          guarantees=(guarantee,))
        releases += [release] * draw(st.integers(1, 2))
    return [r if n == 0 else Release(id=f"{r.id}-{n}", dataset="survey", reads=r.reads, mechanism=r.mechanism,
                                     guarantees=r.guarantees)
            for n, r in enumerate(releases)]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(releases=wide_ledgers(), delta=st.sampled_from(DELTAS), accountant=st.sampled_from(BOUNDED))
def test_the_worst_pair_by_bounds_is_the_full_scans_on_wide_ledgers(releases, delta, accountant):
    index = LedgerIndex(WIDE, releases)
    assert_bounds_hold(index, delta, accountant)
    assert bounded(index, delta, accountant) == full_scan(index, delta, accountant)


@pytest.mark.parametrize("accountant", BOUNDED)
def test_only_the_pairs_whose_bound_passes_the_worst_get_their_figures_made(accountant):
    """A release of epsilon 1 on v00, one on v01, one of 1/10 on each other variable: the pair
    {v00, v01} is the worst (2, every other pair at most 1.1), and its figures are the only ones made."""
    def release(name, epsilon):
        return Release(id=f"on-{name}", dataset="survey", reads=frozenset({name}), mechanism=Mechanism("random"),
                       guarantees=(Guarantee(frozenset({name}), Notion.PURE, epsilon=epsilon, relation=Relation.REPLACE),))

    releases = [release(name, F(1) if name in WIDE[:2] else F(1, 10)) for name in WIDE]
    index = LedgerIndex(WIDE, releases)
    delta = F(1, 10**9)
    with mock.patch.object(worst_pair_module, "pair_figure", wraps=every_pair.pair_figure) as made:
        found = bounded(index, delta, accountant)
    assert found == full_scan(index, delta, accountant)
    assert found[:2] == ("v00", "v01")
    assert made.call_count == 1


def test_the_pld_has_no_bound_here():
    with pytest.raises(ValueError, match="'pld'"):
        worst_pair(LedgerIndex(WIDE, []), F(1, 10**9), "pld", choose)


def test_a_pure_basic_figure_kept_over_a_smaller_rdp_one_is_within_the_bound():
    """`best` keeps a pure basic figure over an rdp one smaller by less than PURE_PREFERENCE of it:
    the bound of the figure shown allows for it (rdp / (1 - PURE_PREFERENCE))."""
    from dataclasses import replace

    from ledger.accounting.figure_validity import PURE_PREFERENCE

    pair = frozenset(WIDE[:2])
    index = LedgerIndex(WIDE[:2], [Release(id="r", dataset="survey", reads=pair, mechanism=Mechanism("random"),
                                           guarantees=(Guarantee(pair, Notion.PURE, epsilon=F(1)),))])
    delta = F(1, 10**9)
    grid = index.pair_matrix(at_delta(delta))
    rdp = every_pair.pair_rdp(index, delta, grid, pld_limit=0)
    rdp = replace(rdp, epsilon=rdp.epsilon * 0 + (1 - PURE_PREFERENCE / 2))  # (rdp just below basic's 1)
    shown = choose(every_pair.pair_figure(index, delta, grid, rdp, 0, 1), None)
    assert (shown.accountant, shown.epsilon) == ("basic", 1)
    assert pair_bounds(index, delta, grid, rdp, None)[0, 1] >= 1
