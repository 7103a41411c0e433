"""The cost rule, composition and families on ledgers written in the test (docs/explanation/model.md#the-cost-of-one-release-on-a-subset-2.6).

Every expected number is from Tan's paper (Example 3.6, Table 1) or computed
by hand in the comment beside it.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import chain, combinations

import pytest

from ledger.accounting.spend import UNBOUNDED, ZERO, Spend
from ledger.accounting.charge_choice import at_delta
from ledger.accounting.cost_rule import family_cost, ledger_cost, release_cost
from ledger.accounting.ledger_index import LedgerIndex
from ledger.core.numbers import INF, to_fraction
from ledger.core.records import Family, Guarantee, Mechanism, Notion, Relation, Release

F = Fraction
ADD_REMOVE, REPLACE = Relation.ADD_REMOVE, Relation.REPLACE


def release(id, reads, *guarantees, family=None, derived_from=()):
    return Release(
        id=id,
        dataset="census",
        reads=frozenset(reads),
        mechanism=Mechanism("test"),
        guarantees=tuple(guarantees),
        family=family,
        derived_from=tuple(derived_from),
    )


def pure(epsilon, protects, relation=REPLACE):
    return Guarantee(frozenset(protects), Notion.PURE, epsilon=F(epsilon), relation=relation)


def approx(epsilon, delta, protects, relation=REPLACE):
    return Guarantee(frozenset(protects), Notion.APPROX, epsilon=F(epsilon), delta=F(delta), relation=relation)


def zcdp(rho, protects, relation=REPLACE):
    return Guarantee(frozenset(protects), Notion.ZCDP, rho=F(rho), relation=relation)


def subsets(variables):
    return [frozenset(c) for c in chain.from_iterable(combinations(variables, k) for k in range(len(variables) + 1))]


def eps(*epsilons):
    """Pure releases composed (Tan Prop 3.4): epsilons add; each counts epsilon^2 / 2 in zCDP."""
    return Spend(pure=sum(map(F, epsilons), F(0)), pure_rho=sum((F(e) ** 2 / 2 for e in epsilons), F(0)))


def n_times(n, epsilon):
    return eps(*[epsilon] * n)


# --------------------------------------------------------------------------
# Tan, Example 3.6 and Table 1
# --------------------------------------------------------------------------

AGE, SEX, REGION, RACE, OTHER = "age", "sex", "residential region", "race", "other"
TAN_VARIABLES = (AGE, SEX, REGION, RACE, OTHER)

# Table 1 as printed: epsilon of each release on each singleton subset
TAN_TABLE_1 = {
    "Table A": {AGE: 1, SEX: 1, REGION: 0, RACE: 0, OTHER: 0},
    "Table B": {AGE: 0, SEX: 0, REGION: 1, RACE: 1, OTHER: 0},
    "Table C": {AGE: 1, SEX: 0, REGION: 1, RACE: 0, OTHER: 0},
}
TAN_TOTAL_ROW = {AGE: 2, SEX: 1, REGION: 2, RACE: 1, OTHER: 0}  # "Tables A, B & C"
# The whole-dataset column (U = V, ordinary bounded DP, Prop 3.1): each table is 1-DP, three compose to 3.
TAN_WHOLE_DATASET = {"Table A": 1, "Table B": 1, "Table C": 1}
TAN_WHOLE_DATASET_TOTAL = 3


def tan_example_3_6():
    """Three count tables, each an independent eps = 1 DP algorithm on the variables it uses."""
    return [
        release("Table A", {AGE, SEX}, pure(1, {AGE, SEX})),
        release("Table B", {REGION, RACE}, pure(1, {REGION, RACE})),
        release("Table C", {REGION, AGE}, pure(1, {REGION, AGE})),
    ]


def test_tan_table_1_cell_by_cell():
    releases = tan_example_3_6()
    table = LedgerIndex(TAN_VARIABLES, releases).table("census")
    assert table.variables == TAN_VARIABLES
    assert [r.id for r in table.releases] == list(TAN_TABLE_1)
    for i, (release_id, row) in enumerate(TAN_TABLE_1.items()):
        for j, variable in enumerate(TAN_VARIABLES):
            assert table.cell(i, j) == n_times(row[variable], 1), (release_id, variable)
        assert table.row_dataset_wide(i) == n_times(TAN_WHOLE_DATASET[release_id], 1), release_id
    # each eps = 1 table counted once per unit of the paper's total: 2 = 1 + 1
    assert table.total == tuple(n_times(TAN_TOTAL_ROW[v], 1) for v in TAN_VARIABLES)
    assert table.total_dataset_wide == n_times(TAN_WHOLE_DATASET_TOTAL, 1)
    assert [spend.pure for spend in table.total] == [2, 1, 2, 1, 0]  # as printed


def test_tan_table_1_by_the_reference_rules():
    releases = {r.id: r for r in tan_example_3_6()}
    for release_id, row in TAN_TABLE_1.items():
        for variable, value in row.items():
            assert release_cost(releases[release_id], frozenset({variable})) == n_times(value, 1)
        assert release_cost(releases[release_id], frozenset(TAN_VARIABLES)) == n_times(TAN_WHOLE_DATASET[release_id], 1)
    for variable, value in TAN_TOTAL_ROW.items():
        assert ledger_cost(releases.values(), [], {variable}) == n_times(value, 1)
    assert ledger_cost(releases.values(), [], TAN_VARIABLES) == n_times(TAN_WHOLE_DATASET_TOTAL, 1)


def test_tan_subsets_beyond_the_table():
    # {age, sex}: A (1) + C (1, age only is read) = 2; {region, race}: B + C = 2; {sex, race}: A + B = 2
    releases = tan_example_3_6()
    index = LedgerIndex(TAN_VARIABLES, releases)
    for subset, value in [({AGE, SEX}, 2), ({REGION, RACE}, 2), ({SEX, RACE}, 2), ({SEX, OTHER}, 1), ({OTHER}, 0)]:
        assert ledger_cost(releases, [], subset) == n_times(value, 1)
        assert index.subset_cost(subset).spend == n_times(value, 1)
    assert index.subset_cost({SEX, OTHER}).releases == ("Table A",)
    assert index.pairs()[(AGE, SEX)] == n_times(2, 1)


# --------------------------------------------------------------------------
# Exact variables, exact releases, derived releases (docs/explanation/model.md#a-release, docs/explanation/model.md#the-cost-of-one-release-on-a-subset, docs/explanation/model.md#post-processing-and-lineage)
# --------------------------------------------------------------------------


def test_a_variable_read_but_not_protected_is_unbounded():
    r = release("r", {"a", "b"}, pure(F(1, 2), {"a"}))
    assert r.exact_variables == {"b"}
    assert release_cost(r, frozenset({"a"})) == eps(F(1, 2))
    assert release_cost(r, frozenset({"b"})) == UNBOUNDED
    assert release_cost(r, frozenset({"a", "b"})) == UNBOUNDED
    assert release_cost(r, frozenset({"c"})) == ZERO
    assert ledger_cost([r], [], {"b"}).epsilon(F(1, 10**9)) == INF

    table = LedgerIndex(("a", "b", "c"), [r]).table("census")
    assert [table.cell(0, j) for j in range(3)] == [eps(F(1, 2)), UNBOUNDED, ZERO]
    assert table.row_dataset_wide(0) == UNBOUNDED
    assert table.total_dataset_wide == UNBOUNDED


def test_a_release_without_guarantee_is_unbounded_on_what_it_touches_and_free_elsewhere():
    exact = release("published-exactly", {"a", "b"})
    index = LedgerIndex(("a", "b", "c"), [exact])
    for subset in subsets(("a", "b", "c")):
        expected = UNBOUNDED if subset & {"a", "b"} else ZERO
        assert release_cost(exact, subset) == expected, subset
        assert ledger_cost([exact], [], subset) == expected, subset
        assert index.subset_cost(subset).spend == expected, subset


def test_derived_releases_cost_nothing():
    source = release("r1", {"a"}, pure(F(1, 4), {"a"}))
    derived = release("r2", set(), derived_from=["r1"])  # computed from r1's output only
    for subset in subsets(("a", "b")):
        assert release_cost(derived, subset) == ZERO
        assert ledger_cost([source, derived], [], subset) == ledger_cost([source], [], subset)
    table = LedgerIndex(("a", "b"), [source, derived]).table("census")
    assert [table.cell(1, j) for j in range(2)] == [ZERO, ZERO]
    assert table.total == (eps(F(1, 4)), ZERO)


def test_the_smallest_covering_guarantee_is_charged():
    # Tan's Algorithm 1 style: eps 1/2 on {income}, and a looser eps 2 on {income, region}
    r = release("r", {"income", "region"}, pure(F(1, 2), {"income"}), pure(2, {"income", "region"}))
    assert release_cost(r, frozenset({"income"})) == eps(F(1, 2))
    assert release_cost(r, frozenset({"region"})) == eps(2)
    assert release_cost(r, frozenset({"income", "region", "other"})) == eps(2)


# --------------------------------------------------------------------------
# Exactness: ten releases of 0.1 total exactly 1 (docs/explanation/model.md#composition, numbers.py)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("written", ["0.1", 0.1, F(1, 10)], ids=["string", "float", "fraction"])
def test_ten_releases_of_a_tenth_total_exactly_one(written):
    releases = [release(f"r{i}", {"a"}, pure(to_fraction(written), {"a"})) for i in range(10)]
    assert sum([0.1] * 10) != 1  # what float addition would have reported
    total = ledger_cost(releases, [], {"a"})
    assert total == Spend(pure=F(1), pure_rho=10 * F(1, 200))
    assert isinstance(total.pure, Fraction) and total.pure == 1
    index = LedgerIndex(("a", "b"), releases)
    assert index.subset_cost({"a"}).spend.pure == F(1)
    table = index.table("census")
    assert table.total[0].pure == F(1)
    assert table.total_dataset_wide.pure == F(1)


# --------------------------------------------------------------------------
# Families: parallel composition (docs/explanation/model.md#families)
# --------------------------------------------------------------------------


def random_split_family():
    family = Family("F", "census", partition=None)
    members = [
        release("m1", {"a", "b"}, pure(F(1, 4), {"a", "b"}), family="F"),
        release("m2", {"a"}, pure(F(1, 2), {"a"}), family="F"),
        release("m3", {"b"}, pure(F(1, 3), {"b"}), family="F"),
    ]
    return family, members


def test_random_split_family_costs_its_largest_member():
    family, members = random_split_family()
    index = LedgerIndex(("a", "b", "c"), members, [family])
    # {a}: max(1/4, 1/2, 0); {b}: max(1/4, 0, 1/3); {a, b}: max(1/4, 1/2, 1/3); sequentially 3/4, 7/12, 13/12
    for subset, value in [({"a"}, F(1, 2)), ({"b"}, F(1, 3)), ({"a", "b"}, F(1, 2)), ({"c"}, 0)]:
        assert family_cost(family, members, frozenset(subset)) == eps(value), subset
        assert ledger_cost(members, [family], subset) == eps(value), subset
        assert index.subset_cost(subset).spend == eps(value), subset
    assert ledger_cost(members, [], {"a", "b"}) == eps(F(1, 4), F(1, 2), F(1, 3))  # not a family: 13/12
    table = index.table("census")
    assert table.total == (eps(F(1, 2)), eps(F(1, 3)), ZERO)
    assert table.total_dataset_wide == eps(F(1, 2))


def regional_family(*guarantee_sets):
    """One release per region, computed on that region's records, reading region and income."""
    family = Family("by-region", "census", partition=frozenset({"region"}))
    members = [
        release(f"part{i}", {"region", "income"}, *guarantees, family="by-region")
        for i, guarantees in enumerate(guarantee_sets)
    ]
    return family, members


BOTH = {"region", "income"}


def test_key_family_on_a_subset_without_the_key_costs_its_largest_member():
    family, members = regional_family([pure(F(1, 2), BOTH)], [pure(F(1, 3), BOTH)], [pure(F(1, 5), BOTH)])
    # {income}: a change of income keeps the record in its part: max(1/2, 1/3, 1/5)
    assert ledger_cost(members, [family], {"income"}) == eps(F(1, 2))
    assert LedgerIndex(("region", "income"), members, [family]).subset_cost({"income"}).spend == eps(F(1, 2))


def test_key_family_with_add_remove_guarantees_on_a_subset_with_the_key():
    family, members = regional_family(
        [pure(F(1, 2), BOTH, ADD_REMOVE)], [pure(F(1, 3), BOTH, ADD_REMOVE)], [pure(F(1, 5), BOTH, ADD_REMOVE)]
    )
    # stays in its part: largest replacement cost 2 * 1/2 = 1 (zCDP 1/2); moves: 1/2 + 1/3 = 5/6
    # (zCDP 1/8 + 1/18 = 13/72); the larger of each: 1 and 1/2
    for subset in ({"region"}, BOTH):
        assert ledger_cost(members, [family], subset) == eps(1)
        assert LedgerIndex(("region", "income"), members, [family]).subset_cost(subset).spend == eps(1)
    # {income} only: no part changes, each replacement costs 2 eps: max(1, 2/3, 2/5) = 1
    assert ledger_cost(members, [family], {"income"}) == eps(1)


def test_key_family_where_moving_costs_more_than_staying():
    family, members = regional_family(
        [pure(F(1, 10), BOTH), pure(F(1, 2), BOTH, ADD_REMOVE)],  # replace 1/10 beats 2 * 1/2
        [pure(F(1, 3), BOTH, ADD_REMOVE)],
        [pure(F(1, 5), BOTH, ADD_REMOVE)],
    )
    # stays: max(1/10, 2/3, 2/5) = 2/3, zCDP (2/3)^2 / 2 = 2/9;
    # moves: 1/2 + 1/3 = 5/6, zCDP 1/8 + 1/18 = 13/72; the worst as a whole at the default
    # delta: 5/6
    expected = Spend(pure=F(5, 6), pure_rho=F(13, 72))
    assert ledger_cost(members, [family], {"region"}) == expected
    assert LedgerIndex(("region", "income"), members, [family]).subset_cost({"region"}).spend == expected
    table = LedgerIndex(("region", "income"), members, [family]).table("census")
    assert table.total == (expected, eps(F(2, 3)))  # {income}: max(1/10, 2/3, 2/5)
    assert table.total_dataset_wide == expected


def test_key_family_certified_only_for_replacement_is_unbounded_on_the_key():
    family, members = regional_family([pure(F(1, 2), BOTH)], [pure(F(1, 3), BOTH)])
    index = LedgerIndex(("region", "income"), members, [family])
    for subset in ({"region"}, BOTH):
        assert ledger_cost(members, [family], subset) == UNBOUNDED
        assert index.subset_cost(subset).spend == UNBOUNDED
    assert ledger_cost(members, [family], {"income"}) == eps(F(1, 2))


def test_a_family_composes_with_other_releases():
    family, members = random_split_family()
    other = release("census-total", {"a"}, pure(F(1, 10), {"a"}))
    # the family's 1/2 on {a}, then 1/10
    assert ledger_cost([*members, other], [family], {"a"}) == eps(F(1, 2), F(1, 10))
    index = LedgerIndex(("a", "b"), [other, *members], [family])
    assert index.subset_cost({"a"}).spend == eps(F(1, 2), F(1, 10))
    assert index.table("census").total == (eps(F(1, 2), F(1, 10)), eps(F(1, 3)))


# --------------------------------------------------------------------------
# Ties, dominance and mixed notions (once defects, now regression tests)
# --------------------------------------------------------------------------


def test_a_dominated_approximate_guarantee_is_not_charged():
    # (1, 10^-6) is better than (2, 10^-6) at every delta. Both are "∞ at delta = 10^-9",
    # the delta at which release_cost ranks guarantees, so it keeps whichever is listed first.
    r = release("r", {"a"}, approx(2, F(1, 10**6), {"a"}), approx(1, F(1, 10**6), {"a"}))
    expected = Spend(approx_epsilon=F(1), approx_delta=F(1, 10**6))
    assert release_cost(r, frozenset({"a"})) == expected
    assert LedgerIndex(("a",), [r]).subset_cost({"a"}).spend == expected


@pytest.mark.parametrize(
    "guarantees",
    [
        (approx(1, F(1, 10**6), {"a"}), approx(2, F(1, 10**6), {"a"})),
        (approx(2, F(1, 10**6), {"a"}), approx(1, F(1, 10**6), {"a"})),
        (pure(1, {"a"}), approx(1, 0, {"a"})),
        (approx(1, 0, {"a"}), pure(1, {"a"})),
    ],
    ids=["approx-tie-1-first", "approx-tie-2-first", "pure-first", "approx-delta-0-first"],
)
def test_index_and_reference_charge_the_same_guarantee_on_ties(guarantees):
    # release_cost keeps the first of equally ranked guarantees; LedgerIndex orders distinct values
    # by (rank, rho, delta, pure) and then by set order, whatever the release lists first.
    r = release("r", {"a"}, *guarantees)
    gaussian = release("g", {"a"}, zcdp(F(1, 2), {"a"}))
    reference = ledger_cost([r, gaussian], [], {"a"})
    fast = LedgerIndex(("a",), [r, gaussian]).subset_cost({"a"}).spend
    assert fast == reference
    assert fast.epsilon(F(1, 10**6)) == reference.epsilon(F(1, 10**6))


def test_loss_is_monotone_in_the_subset_when_pure_and_zcdp_guarantees_mix():
    # Tan Prop 3.2: a bound on {a, b} is a bound on {a}. r1 charges pure 4/5 on {a} (4/5 < 0.81,
    # the epsilon of rho = 1/100 at delta 1e-9) but rho = 1/100 on {a, b}; next to r2's rho = 1
    # the pure 4/5 costs more: loss({a}) = 10.32 > loss({a, b}) = 9.57 at delta = 1e-9.
    r1 = release("r1", {"a", "b"}, pure(F(4, 5), {"a"}), zcdp(F(1, 100), {"a", "b"}))
    r2 = release("r2", {"a"}, zcdp(1, {"a"}))
    delta = F(1, 10**9)
    small = ledger_cost([r1, r2], [], {"a"}).epsilon(delta)
    large = ledger_cost([r1, r2], [], {"a", "b"}).epsilon(delta)
    assert small <= large


def test_the_side_a_release_is_charged_by_is_fixed_even_where_monotonicity_then_fails():
    # r1 offers pure 1/2 on {a} and (1/10, 10^-7) on {a, b}. Choosing (1/10, 10^-7) on {a} too
    # kept the loss monotone, but chose the (epsilon, delta) side after the history (valid only
    # by a union bound, B2); the side is fixed by the release and the subset: its pure guarantee
    # where it covers. At delta 10^-6: loss({a}) = 1/2 > loss({a, b}) = 1/10, both valid
    # (README, "Which guarantee is charged": the documented exception); at 10^-9 the approximate
    # guarantee bounds nothing and {a} keeps its finite 1/2.
    r1 = release("r1", {"a", "b"}, pure(F(1, 2), {"a"}), approx(F(1, 10), F(1, 10**7), {"a", "b"}))
    delta = F(1, 10**6)
    at = at_delta(delta)
    assert ledger_cost([r1], [], {"a"}, at).epsilon(delta) == F(1, 2)
    assert ledger_cost([r1], [], {"a", "b"}, at).epsilon(delta) == F(1, 10)
    assert ledger_cost([r1], [], {"a"}, at_delta(F(1, 10**9))).epsilon(F(1, 10**9)) == F(1, 2)


def test_an_add_remove_guarantee_is_used_whatever_its_place_in_the_list():
    # Each part: pure 1/2 for replacement, and (1/4, 10^-6) for add/remove. Keyed on region, on {region}.
    # Staying (a replacement in one part) may be charged at pure 1/2, or at the add/remove
    # guarantee doubled by group privacy: (1/2, (1 + e^(1/4)) 10^-6) (docs/explanation/model.md#variables-subsets-and-neighbours).
    # Moving (a removal from one part, an addition to another) is (1/4 + 1/4, 10^-6 + 10^-6).
    # Charging both as approximate DP gives (1/2, (1 + e^(1/4)) 10^-6), better in every way than
    # pure 1/2 next to (1/2, 2 10^-6), whatever order the guarantees are listed in.
    replace_first = (pure(F(1, 2), BOTH), approx(F(1, 4), F(1, 10**6), BOTH, ADD_REMOVE))
    doubled_delta = (1 + math.exp(0.25)) * 1e-6  # 2.2840254166877414e-06
    for guarantees in (replace_first, replace_first[::-1]):
        family, members = regional_family(guarantees, guarantees)
        got = ledger_cost(members, [family], {"region"})
        assert (got.pure, got.rho, got.approx_epsilon) == (0, 0, F(1, 2)), guarantees[0].relation
        # staying at pure 1/2 and moving at (1/2, 2 10^-6) is the worst as a whole
        # (1/2, 2 10^-6): better than the doubled delta (the componentwise max charged before)
        assert got.approx_delta == F(2, 10**6), guarantees[0].relation
        assert got.approx_delta < F(doubled_delta)
