"""Budget caps as pure functions: a cap's spend in its own unit, the status thresholds,
running totals, the pre-release check and headroom.

Releases and caps are built here as records, with no store. Expected figures are
computed by hand from the releases' parameters:
- a pure cap sums epsilon exactly (Tan Prop 3.4) and cannot hold a rho or delta part;
- a rho cap sums rho, each pure release entering as epsilon^2 / 2 (Bun and
  Steinke 2016, Prop 3.3), never (sum of epsilon)^2 / 2; it cannot hold a delta part;
- an epsilon-at-delta cap takes the approximate parts' epsilon and delta out first
  (basic composition), then, at each of the 22 Rényi orders fixed in advance,
  min(pure, a * sum of epsilon^2 / 2) + a * rho converted by Canonne, Kamath and Steinke
  (2020), Prop 12, at 1/44 of the delta (the other half is the approximate releases'
  allowance), the smallest: the tests' own closed form (`reference_filter`, conftest.py); one
  release's own charge (a driver) is the same figure of it alone; a rho cap's epsilon is its rho
  converted at the whole delta (CKS 2020, Corollary 13, by the tests' own search: `reference_cks`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import brentq

from ledger.accounting.spend import Spend, pure_spend
from ledger.accounting.budget import (
    CapTotal,
    apply,
    largest_basic_charge,
    check,
    status,
    total_from_history,
    total_from_index,
)
from ledger.accounting.cap_measure import measure
from ledger.accounting.ledger_index import LedgerIndex
from ledger.core.records import (
    Cap,
    Family,
    Guarantee,
    Mechanism,
    Notion,
    Relation,
    Release,
    Status,
)

F = Fraction
INF = math.inf
DELTA = F(1, 10**9)
VARIABLES = frozenset({"income", "diagnosis", "medication", "age", "sex"})

INCOME = Cap("clinic", "income", frozenset({"income"}), epsilon=F(1))
HEALTH = Cap("clinic", "health", frozenset({"diagnosis", "medication"}), rho=F(1, 2))
ALL = Cap("clinic", "all", VARIABLES, epsilon=F(10), delta=DELTA, whole_dataset=True)
DEMOGRAPHICS = Cap("clinic", "demographics", frozenset({"age", "sex"}), epsilon=F(2))
CAPS = (ALL, DEMOGRAPHICS, HEALTH, INCOME)

HALVES = Family("halves", "clinic", None)  # a random split
BY_AGE = Family("by-age", "clinic", frozenset({"age"}))  # split by a key variable
FAMILIES = {HALVES.id: HALVES, BY_AGE.id: BY_AGE}


def released(id, reads, *guarantees, status=Status.PUBLISHED, family=None) -> Release:
    return Release(id, "clinic", frozenset(reads), Mechanism("declared"), tuple(guarantees), status=status,
                   family=family)


def pure(epsilon, protects=None, relation=Relation.REPLACE) -> Guarantee:
    return Guarantee(frozenset(protects or VARIABLES), Notion.PURE, epsilon=F(epsilon), relation=relation)


def zcdp(rho, protects=None) -> Guarantee:
    return Guarantee(frozenset(protects or VARIABLES), Notion.ZCDP, rho=F(rho))


def approx(epsilon, delta, protects=None) -> Guarantee:
    return Guarantee(frozenset(protects or VARIABLES), Notion.APPROX, epsilon=F(epsilon), delta=F(delta))


def spent(cap: Cap, *releases: Release):
    return measure(cap, total_from_history(cap, releases, FAMILIES).spend)


# --------------------------------------------------------------------------
# A cap's spend, in its unit
# --------------------------------------------------------------------------


def test_a_pure_cap_sums_epsilon_exactly():
    tenths = [released(f"r{k}", ["income"], pure("0.1")) for k in range(10)]
    value = spent(INCOME, *tenths)
    assert value == 1 and type(value) is Fraction
    # a release reading none of the subset costs it nothing (Tan Prop 3.3)
    assert spent(INCOME, *tenths, released("other", ["age"], pure(5))) == 1


@pytest.mark.parametrize("release", [
    released("g", ["income"], zcdp("1/200")),
    released("a", ["income"], approx("0.1", "1e-12")),
    released("x", ["income"]),  # read without any guarantee: not protected
])
def test_a_pure_cap_cannot_hold_rho_delta_or_an_unprotected_read(release):
    assert spent(INCOME, released("p", ["income"], pure("0.1")), release) == INF


def test_a_rho_cap_counts_each_pure_release_as_half_its_square():
    releases = [
        released("p1", ["diagnosis"], pure("1/2")),
        released("p2", ["medication"], pure("1/2")),
        released("g", ["diagnosis"], zcdp("1/8")),  # Gaussian sigma 2, sensitivity 1: 1 / (2 * 4)
    ]
    # 1/8 + 1/8 + 1/8, not (1/2 + 1/2)^2 / 2 + 1/8 = 5/8
    assert spent(HEALTH, *releases) == F(3, 8)


def test_a_rho_cap_cannot_hold_an_approximate_release():
    assert spent(HEALTH, released("a", ["diagnosis"], approx(1, "1e-12"))) == INF


def test_an_epsilon_at_delta_cap_converts_with_cks(reference_filter):
    releases = [
        released("p1", ["income"], pure("1/2")),
        released("p2", ["diagnosis"], pure("1/2")),
        released("g", ["medication"], zcdp("1/8")),
    ]
    # pure 1 (as zCDP: 1/8 + 1/8), rho 1/8: the fixed orders, 1/44 of the delta each
    expected = reference_filter(pure=1, pure_rho=1 / 4, rho=1 / 8, delta=1e-9)
    assert spent(ALL, *releases) == pytest.approx(expected, rel=1e-7)

    # an (epsilon, delta) part: its delta leaves 1e-9 - 1e-10 for the fixed orders
    with_approx = [*releases, released("a", ["age"], approx("0.25", "1e-10"))]
    expected = reference_filter(pure=1, pure_rho=1 / 4, rho=1 / 8, approx_epsilon=0.25, approx_delta=1e-10, delta=1e-9)
    assert spent(ALL, *with_approx) == pytest.approx(expected, rel=1e-7)


def test_an_epsilon_at_delta_cap_of_pure_releases_is_their_exact_sum():
    value = spent(ALL, released("p1", ["income"], pure("0.3")), released("p2", ["age"], pure("0.4")))
    assert value == F(7, 10)


def test_deltas_beyond_the_caps_delta_leave_no_bound():
    releases = [released("a1", ["age"], approx(1, "6e-10")), released("a2", ["sex"], approx(1, "6e-10"))]
    assert spent(ALL, *releases) == INF


# --------------------------------------------------------------------------
# ok / warn (at or above 80% of the cap) / over
# --------------------------------------------------------------------------


@pytest.mark.parametrize("cap", CAPS, ids=lambda cap: cap.name)
@pytest.mark.parametrize("share, expected", [
    (F(0), "ok"),
    (F(4, 5) - F(1, 10**12), "ok"),
    (F(4, 5), "warn"),  # exactly 80%
    (F(1), "warn"),  # exactly at the cap: it holds
    (F(1) + F(1, 10**12), "over"),
])
def test_status_thresholds_are_exact(cap, share, expected):
    assert status(cap, share * cap.limit) == expected


def test_an_unbounded_spend_is_over():
    assert status(INCOME, INF) == "over"


# --------------------------------------------------------------------------
# Running totals: applying releases one by one equals recomputing the history
# --------------------------------------------------------------------------

GUARANTEES = st.one_of(
    st.builds(pure, st.fractions(0, 2, max_denominator=20)),
    st.builds(pure, st.fractions(0, 2, max_denominator=20), relation=st.just(Relation.ADD_REMOVE)),
    st.builds(zcdp, st.fractions(0, 1, max_denominator=50)),
    st.builds(approx, st.fractions(0, 1, max_denominator=10), st.sampled_from([F(0), F(1, 10**11), F(1, 10**10)])),
)


@st.composite
def histories(draw):
    releases = []
    for k in range(draw(st.integers(1, 12))):
        family = draw(st.sampled_from([None, None, "halves", "by-age"]))
        reads = set(draw(st.sets(st.sampled_from(sorted(VARIABLES)), min_size=0, max_size=3)))
        if family == "by-age":
            reads.add("age")  # a keyed family's members read the key
        guarantees = tuple(draw(st.lists(GUARANTEES, max_size=2)))
        state = draw(st.sampled_from(list(Status)))
        releases.append(released(f"r{k:02d}", reads, *guarantees, status=state, family=family))
    return releases


@given(histories())
def test_applying_releases_one_by_one_equals_the_total_recomputed_from_history(releases):
    for cap in CAPS:
        total = CapTotal()
        counted: dict[str, list[Release]] = {}
        for release in releases:
            total = apply(total, cap, [release], FAMILIES, counted)
            if release.family is not None and release.status != Status.CANCELLED:
                counted.setdefault(release.family, []).append(release)
        expected = total_from_history(cap, releases, FAMILIES)
        assert total.spend == expected.spend
        assert dict(total.families) == dict(expected.families)
        assert total.drivers == expected.drivers
        # and all at once
        assert apply(CapTotal(), cap, releases, FAMILIES, {}).spend == expected.spend


@given(histories())
def test_audit_recomputes_the_same_totals_over_arrays(releases):
    # `audit verify` recomputes every running total with LedgerIndex arrays; it must agree
    # with the release-by-release recomputation exactly, drivers and stored figure included.
    counted = [r for r in releases if r.status != Status.CANCELLED]
    index = LedgerIndex(sorted(VARIABLES), counted, FAMILIES.values())
    for cap in CAPS:
        assert total_from_index(cap, index) == total_from_history(cap, releases, FAMILIES), cap.name


@given(st.lists(st.tuples(st.text("abz09", min_size=1, max_size=3), st.sampled_from(["1/4", "1/2", "1"]),
                          st.sampled_from([pure, zcdp])), min_size=1, max_size=40, unique_by=lambda t: t[0]))
def test_the_drivers_named_from_many_tied_rows_are_the_history_s(drawn):
    """`total_from_index` names the drivers of many tied rows from their ids read at once
    (`_first_ranked`: at a million releases one look-up per tied row took seconds): the drivers
    are still `total_from_history`'s, the largest first and, among equals, the smallest ids,
    whatever order the ids were recorded in (more rows tie than are kept, at several values)."""
    releases = [released(rid, ["income"], make(value, {"income"})) for rid, value, make in drawn]
    index = LedgerIndex(sorted(VARIABLES), releases, FAMILIES.values())
    for cap in CAPS:
        assert total_from_index(cap, index) == total_from_history(cap, releases, FAMILIES), cap.name


def test_cancelled_releases_are_not_charged_and_retracted_ones_are():
    releases = [
        released("planned", ["income"], pure("0.1"), status=Status.PLANNED),
        released("approved", ["income"], pure("0.2"), status=Status.APPROVED),
        released("published", ["income"], pure("0.3"), status=Status.PUBLISHED),
        released("retracted", ["income"], pure("0.15"), status=Status.RETRACTED),
        released("cancelled", ["income"], pure(5), status=Status.CANCELLED),
    ]
    assert spent(INCOME, *releases) == F(75, 100)
    total = apply(CapTotal(), INCOME, releases, FAMILIES, {})
    assert measure(INCOME, total.spend) == F(75, 100)
    assert "cancelled" not in dict(total.drivers)


def test_a_family_on_a_random_split_is_charged_its_largest_member():
    members = [released("m1", ["income"], pure("0.5"), family="halves"),
               released("m2", ["income"], pure("0.2"), family="halves")]
    assert spent(INCOME, *members) == F(1, 2)
    after = apply(CapTotal(), INCOME, members[1:], FAMILIES, {"halves": members[:1]})
    assert measure(INCOME, after.spend) == F(1, 2)


# --------------------------------------------------------------------------
# The pre-release check
# --------------------------------------------------------------------------

HISTORY = [
    released("a", ["income"], pure("0.5")),
    released("b", ["diagnosis"], zcdp("1/8")),
    released("c", ["diagnosis"], pure("0.5")),
]


def totals_of(releases) -> dict[str, CapTotal]:
    return {cap.name: total_from_history(cap, releases, FAMILIES) for cap in CAPS}


def test_check_reports_current_charge_after_headroom_status_and_drivers(reference_filter):
    plan = [released("p", ["income", "diagnosis"], pure("0.3"))]
    checks = {c.cap.name: c for c in check(CAPS, totals_of(HISTORY), plan, FAMILIES, {})}
    assert set(checks) == {"all", "health", "income"}  # demographics is not touched

    income = checks["income"]
    assert (income.current, income.charge, income.after, income.headroom) == (F(1, 2), F(3, 10), F(4, 5), F(1, 5))
    assert income.status == "warn"  # exactly 80%
    assert income.drivers == (("a", F(1, 2)),)

    health = checks["health"]  # rho: 1/8 (b) + 0.5^2/2 (c); the plan adds 0.3^2/2
    assert (health.current, health.charge, health.after) == (F(1, 4), F(9, 200), F(59, 200))
    assert health.headroom == F(1, 2) - F(59, 200)
    assert health.status == "ok"
    assert health.drivers == (("b", F(1, 8)), ("c", F(1, 8)))

    every = checks["all"]  # pure 1 (as zCDP 1/8 + 1/8), rho 1/8; then pure 1.3 (zCDP + 0.045)
    before = reference_filter(pure=1, pure_rho=1 / 4, rho=1 / 8, delta=1e-9)
    after = reference_filter(pure=1.3, pure_rho=1 / 4 + 0.045, rho=1 / 8, delta=1e-9)
    assert every.current == pytest.approx(before, rel=1e-7)
    assert every.after == pytest.approx(after, rel=1e-7)
    assert every.charge == pytest.approx(after - before, rel=1e-6)
    assert every.headroom == pytest.approx(10 - after, rel=1e-7)
    assert every.status == "ok"
    assert [rid for rid, _ in every.drivers] == ["b", "a", "c"]  # rho 1/8's figure > 0.5
    # a release's own charge is the figure of it alone, the same statement as a total's (docs/explanation/accounting.md)
    assert dict(every.drivers)["b"] == pytest.approx(reference_filter(rho=1 / 8, delta=1e-9), rel=1e-7)


def test_check_after_total_is_what_recording_the_plan_would_store():
    plan = [released("p", ["income", "diagnosis"], pure("0.3")), released("q", ["age"], zcdp("1/100"))]
    for c in check(CAPS, totals_of(HISTORY), plan, FAMILIES, {}):
        expected = total_from_history(c.cap, [*HISTORY, *plan], FAMILIES)
        assert c.after_total.spend == expected.spend


def test_a_plan_over_a_cap_is_over_with_negative_headroom():
    (income,) = check([INCOME], totals_of(HISTORY), [released("p", ["income"], pure("0.6"))], FAMILIES, {})
    assert (income.after, income.headroom, income.status, income.ok) == (F(11, 10), F(-1, 10), "over", False)


def test_drivers_are_the_largest_recorded_contributions():
    history = [released(f"r{k}", ["income"], pure(F(k + 1, 100))) for k in range(7)]
    (income,) = check([INCOME], totals_of(history), [released("p", ["income"], pure("0.01"))], FAMILIES, {})
    assert income.drivers == tuple((f"r{k}", F(k + 1, 100)) for k in (6, 5, 4, 3, 2))


def test_check_of_every_cap_includes_untouched_ones():
    checks = check(CAPS, totals_of(HISTORY), [], FAMILIES, {}, only_touched=False)
    assert {c.cap.name for c in checks} == {c.name for c in CAPS}
    assert all(c.charge == 0 for c in checks)


# --------------------------------------------------------------------------
# Headroom: the largest new release that fits
# --------------------------------------------------------------------------


def rho_spend(rho) -> Spend:
    return Spend(rho=rho)


def test_headroom_under_a_pure_cap_is_the_cap_minus_the_spend():
    total = totals_of(HISTORY)["income"]
    assert largest_basic_charge(INCOME, total, pure_spend) == F(1, 2)
    # a rho release cannot fit under a pure cap at all
    assert largest_basic_charge(INCOME, total, rho_spend) == 0


def test_headroom_under_a_rho_cap_is_rounded_down(reference_cks):
    total = totals_of(HISTORY)["health"]
    rho_spent = F(1, 4)
    assert largest_basic_charge(HEALTH, total, rho_spend) == F(1, 2) - rho_spent
    epsilon = largest_basic_charge(HEALTH, total, pure_spend)
    largest = math.sqrt(2 * (0.5 - 0.25))
    assert largest - 1e-9 - 1e-15 <= epsilon <= largest
    # exactly: that epsilon fits, as epsilon^2 / 2 on top of the rho spent
    assert rho_spent + F(epsilon) ** 2 / 2 <= F(1, 2)
    assert rho_spent + (F(epsilon) + F(1, 10**6)) ** 2 / 2 > F(1, 2)


def test_headroom_under_an_epsilon_at_delta_cap_solves_the_cks_bound(reference_filter):
    total = totals_of(HISTORY)["all"]  # on all: pure 1 (zCDP 1/4), rho 1/8

    def after(x):
        return reference_filter(pure=1 + x, pure_rho=1 / 4 + x * x / 2, rho=1 / 8, delta=1e-9) - 10

    expected = brentq(after, 0, 10, xtol=1e-12)
    epsilon = largest_basic_charge(ALL, total, pure_spend)
    assert epsilon == pytest.approx(expected, abs=1e-6)
    assert measure(ALL, total.spend + pure_spend(F(epsilon))) <= 10
    assert measure(ALL, total.spend + pure_spend(F(epsilon) + F(1, 10**5))) > 10

    def after_rho(r):
        return reference_filter(pure=1, pure_rho=1 / 4, rho=1 / 8 + r, delta=1e-9) - 10

    rho = largest_basic_charge(ALL, total, rho_spend)
    assert rho == pytest.approx(brentq(after_rho, 0, 10, xtol=1e-12), abs=1e-6)
    assert measure(ALL, total.spend + Spend(rho=F(rho))) <= 10


def test_headroom_of_an_over_cap_or_unprotected_read_is_zero():
    over = totals_of([released("big", ["income"], pure(2))])["income"]
    assert largest_basic_charge(INCOME, over, pure_spend) == 0
    unprotected = totals_of([released("x", ["income"])])["income"]
    assert largest_basic_charge(INCOME, unprotected, pure_spend) == 0


def test_the_headroom_every_command_prints_is_the_only_one():
    """The basic-only headroom (min over caps of `largest_basic_charge`) lived beside the
    enforcement's (operations.cap_accounting.headroom, what `headroom`, `check` and the API print); only the
    per-cap basic figure stays, the decided search's lower bound. (The smallest over caps, the
    binding cap and an uncapped subset: tests/cli/test_caps_cli.py, through the command.)"""
    from ledger.accounting import budget

    assert not hasattr(budget, "headroom")
