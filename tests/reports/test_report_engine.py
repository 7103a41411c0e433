"""The array paths the reports use, against the engine's reference rules (docs/explanation/model.md#the-cost-of-one-release-on-a-subset-2.6).

`LedgerIndex.pair_matrix` must equal `pairs()` and `ledger_cost` on every pair,
`running_totals` must equal `ledger_cost` of every prefix, and `table_by_arrays`
must equal `table()`, on ledgers with every kind of release: pure, approximate and
zCDP guarantees, partial guarantees (exact variables), several guarantees,
incomparable guarantees (a choice), random and keyed families with replace and
add/remove members. `cks_floats` must agree with `accounting.cks_epsilon`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.accounting.spend import Spend, cks_epsilon
from ledger.accounting.charge_choice import at_delta
from ledger.accounting.cost_rule import ledger_cost
from ledger.accounting.ledger_index import LedgerIndex
from ledger.core.records import Family, Guarantee, Mechanism, Notion, Relation, Release
from ledger.accounting.grid_figures import epsilon_floats
from ledger.reporting.chart_figures import cks_floats

F = Fraction
VARIABLES = ("age", "sex", "region", "race", "income", "degree")
DELTA = F(1, 10**9)
FAMILIES = (Family("by-chance", "census", None), Family("by-region", "census", frozenset({"region"})))


def pure(epsilon, *protects, relation=Relation.REPLACE):
    return Guarantee(frozenset(protects), Notion.PURE, epsilon=F(epsilon), relation=relation)


def release(id, reads, *guarantees, family=None):
    return Release(id=id, dataset="census", reads=frozenset(reads), mechanism=Mechanism("test"),
                   guarantees=tuple(guarantees), family=family)


guarantees = st.builds(
    lambda notion, protects, a, b, relation: Guarantee(
        frozenset(protects), notion,
        epsilon=F(a, 4) if notion != Notion.ZCDP else None,
        delta=F(1, 10 ** (6 + b)) if notion == Notion.APPROX else None,
        rho=F(a, 50) if notion == Notion.ZCDP else None,
        relation=relation),
    st.sampled_from(list(Notion)), st.sets(st.sampled_from(VARIABLES), min_size=1, max_size=4),
    st.integers(1, 6), st.integers(0, 4), st.sampled_from(list(Relation)))


@st.composite
def ledgers(draw):
    releases = []
    for k in range(draw(st.integers(0, 10))):
        reads = draw(st.sets(st.sampled_from(VARIABLES), max_size=4))
        kind = draw(st.sampled_from(["full", "full", "partial", "several", "none", "family", "keyed"]))
        family = None
        if kind in ("full", "family") or (kind == "partial" and not reads):
            gs = (pure(F(draw(st.integers(1, 8)), 4), *(reads or {"age"})),)
        elif kind == "partial":
            gs = (Guarantee(frozenset(sorted(reads)[:1]), Notion.PURE, epsilon=F(1, 2)),)
        elif kind == "several":
            gs = tuple(draw(st.lists(guarantees, min_size=2, max_size=3)))
        elif kind == "keyed":
            reads = reads | {"region"}
            relation = draw(st.sampled_from(list(Relation)))
            gs = (pure(F(draw(st.integers(1, 8)), 4), *reads, relation=relation),)
            family = "by-region"
        else:
            gs = ()
        if kind == "family":
            family = "by-chance"
        releases.append(release(f"r{k}", reads, *gs, family=family))
    return releases


@settings(max_examples=120)
@given(ledgers())
def test_pair_matrix_equals_the_subset_query_on_every_pair(releases):
    index = LedgerIndex(VARIABLES, releases, FAMILIES)
    objective = at_delta(DELTA)
    grid = index.pair_matrix(objective)
    for (a, b), spend in index.pairs(objective).items():
        i, j = VARIABLES.index(a), VARIABLES.index(b)
        assert grid.spend(i, j) == spend == grid.spend(j, i)
    table = index.table("census", objective)
    for j in range(len(VARIABLES)):  # the diagonal is the loss on the variable alone
        assert grid.spend(j, j) == table.total[j]


@settings(max_examples=120)
@given(ledgers(), st.randoms(use_true_random=False))
def test_running_totals_equal_the_loss_of_every_prefix(releases, rng):
    index = LedgerIndex(VARIABLES, releases, FAMILIES)
    objective = at_delta(DELTA)
    order = list(range(len(releases)))
    rng.shuffle(order)
    checkpoints = sorted(set(rng.sample(range(len(releases) + 1), min(4, len(releases) + 1))))
    grid = index.running_totals(order, checkpoints, objective)
    for k, count in enumerate(checkpoints):
        prefix = [releases[i] for i in order[:count]]
        for j, name in enumerate(VARIABLES):
            assert grid.spend(k, j) == ledger_cost(prefix, FAMILIES, {name}, objective)


@settings(max_examples=80)
@given(ledgers())
def test_table_by_arrays_equals_table(releases):
    index = LedgerIndex(VARIABLES, releases, FAMILIES)
    objective = at_delta(DELTA)
    expected, actual = index.table("census", objective), index.table_by_arrays("census", objective)
    assert actual.total == expected.total
    assert actual.total_dataset_wide == expected.total_dataset_wide
    assert (actual.cells == expected.cells).all() and (actual.dataset_wide == expected.dataset_wide).all()


def test_tan_example_pairs():
    """Tan, Example 3.6: three eps = 1 tables; a pair costs every table reading either variable."""
    index = LedgerIndex(("age", "sex", "region", "race"), [
        release("Table A", {"age", "sex"}, pure(1, "age", "sex")),
        release("Table B", {"region", "race"}, pure(1, "region", "race")),
        release("Table C", {"region", "age"}, pure(1, "region", "age")),
    ])
    grid = index.pair_matrix()
    figures = {(a, b): grid.spend(i, j).pure for i, a in enumerate(index.variables)
               for j, b in enumerate(index.variables) if i < j}
    assert figures == {("age", "sex"): 2, ("age", "region"): 3, ("age", "race"): 3,
                       ("sex", "region"): 3, ("sex", "race"): 2, ("region", "race"): 2}


def test_a_pair_with_an_exact_variable_is_not_protected():
    # Tan's Algorithm 1: income noised (eps 1/2), degree released exactly
    index = LedgerIndex(("degree", "income", "sex"), [release("t", {"degree", "income"}, pure(F(1, 2), "income"))])
    grid = index.pair_matrix()
    assert grid.spend(0, 1).unbounded and grid.spend(0, 2).unbounded and grid.spend(0, 0).unbounded
    assert grid.spend(1, 2) == Spend(pure=F(1, 2))


def test_cks_floats_agree_with_the_engine_conversion():
    rng = np.random.default_rng(4)
    rho = rng.uniform(1e-4, 8, 300)
    delta = np.where(np.arange(300) % 2, 1e-9, 1e-5)
    expected = np.array([cks_epsilon(float(r), float(d)) for r, d in zip(rho, delta)])
    assert np.allclose(cks_floats(rho, delta), expected, rtol=1e-12, atol=0)
    assert cks_floats(np.zeros(3), np.full(3, 1e-9)).tolist() == [0, 0, 0]


def test_epsilon_floats_agree_with_spend_epsilon():
    index = LedgerIndex(("a", "b", "c"), [
        release("pure", {"a"}, pure(F(1, 3), "a")),
        release("gauss", {"a", "b"}, Guarantee(frozenset({"a", "b"}), Notion.ZCDP, rho=F(1, 20))),
        release("approx", {"c"}, Guarantee(frozenset({"c"}), Notion.APPROX, epsilon=F(1, 2), delta=F(1, 10**10))),
        release("greedy", {"b"}, Guarantee(frozenset({"b"}), Notion.APPROX, epsilon=F(1), delta=F(1, 10**8))),
    ])
    grid = index.pair_matrix()
    floats = epsilon_floats(grid, DELTA)
    for i in range(3):
        for j in range(3):
            exact = grid.spend(i, j).epsilon(DELTA)
            if math.isinf(exact):
                assert math.isinf(floats[i, j])  # the delta of "greedy" is past 1e-9: no bound
            else:
                assert math.isclose(floats[i, j], float(exact), rel_tol=1e-12)


def _whole_table_shown(index, delta):
    """The total row shown, computed independently of `table_figures`: every row's cells at once
    (index.table), every accountant composed over them, the PLD included, the smallest valid
    figure per column."""
    from ledger.accounting.index_figures import table_figures as whole_figures
    from ledger.operations.shown_figures import choose

    per_variable, wide = whole_figures(index, index.table("survey", at_delta(delta)), delta, ["basic", "rdp", "pld"])
    return [choose(found, None) for found in per_variable], choose(wide, None)


def _dataset(names):
    from ledger.core.records import Dataset, Variable

    return Dataset("survey", tuple(Variable(name) for name in names))


@settings(max_examples=60, deadline=None)
@given(ledger=__import__("test_engine_properties").ledgers(), adaptive=st.booleans(),
       mechanism=st.sampled_from(["laplace", "gaussian"]))
def test_the_reports_total_row_is_the_one_table_shows(ledger, adaptive, mechanism):
    """The total row `table` shows (table_view.table_figures: basic and rdp, no PLD figure, which
    cannot be shown: no column declared in advance, docs/explanation/accounting.md) and the
    report's (report.shown_accounts over table_by_arrays) are the smallest valid figure of every
    accountant composed over the whole table, whether recorded adaptively (each release recorded
    after the one before was published) or declared in advance."""
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta

    from ledger.core.records import Status
    from ledger.operations.table_view import table_figures
    from ledger.reporting.report import shown_accounts
    from test_engine_properties import VARIABLES as NAMES

    start = datetime(2024, 1, 1, tzinfo=UTC)
    parameters = {"laplace": (("epsilon", F(1, 2)),), "gaussian": (("sigma", F(40)), ("sensitivity", F(1)))}
    releases = []
    for k, release in enumerate(ledger.releases):
        recorded = start + timedelta(days=k if adaptive else 0)
        releases.append(replace(release, status=Status.PUBLISHED, recorded_at=recorded,
                                published_at=recorded + timedelta(hours=1) if adaptive else start + timedelta(days=99),
                                mechanism=Mechanism(mechanism, parameters[mechanism]) if k % 2 else release.mechanism))
    index = LedgerIndex(NAMES, releases, ledger.families)
    expected = _whole_table_shown(index, DELTA)
    shown_by_table = table_figures(index, _dataset(NAMES), DELTA, headline=False).accounts.shown()
    shown_by_report = shown_accounts(index, index.table_by_arrays("survey", at_delta(DELTA)), DELTA).shown()
    for found in (shown_by_table, shown_by_report):
        assert [f.epsilon for f in found[0]] == [f.epsilon for f in expected[0]]
        assert [f.accountant for f in found[0]] == [f.accountant for f in expected[0]]
        assert (found[1].epsilon, found[1].accountant) == (expected[1].epsilon, expected[1].accountant)


def test_gaussians_show_the_running_figure_whenever_they_were_recorded(reference_filter):
    """Four Gaussian releases on {age} (sigma 2, sensitivity 1: rho 1/8 each), all recorded before
    any was published or each after the previous one's publication: the same figure either way,
    the report's and `table`'s (table_view.table_figures) as every accountant's composed over the
    whole table gives it, the running figure of rho 1/2 (22 orders at delta / 44), never the PLD
    (information only, docs/explanation/accounting.md)."""
    from datetime import UTC, datetime, timedelta

    from ledger.core.records import Status
    from ledger.operations.table_view import table_figures

    start = datetime(2024, 1, 1, tzinfo=UTC)
    shown = []
    for adaptive in (False, True):
        releases = [Release(
            id=f"g{k}", dataset="survey", reads=frozenset({"age"}),
            mechanism=Mechanism("gaussian", (("sensitivity", F(1)), ("sigma", F(2)))),
            guarantees=(Guarantee(frozenset({"age"}), Notion.ZCDP, rho=F(1, 8)),), status=Status.PUBLISHED,
            recorded_at=start + timedelta(days=k if adaptive else 0),
            published_at=start + timedelta(days=k, hours=1) if adaptive else start + timedelta(days=99))
            for k in range(4)]
        index = LedgerIndex(("age", "sex"), releases, ())
        (age, sex), wide = table_figures(index, _dataset(("age", "sex")), DELTA, headline=False).accounts.shown()
        (age_t, sex_t), wide_t = _whole_table_shown(index, DELTA)
        assert age.accountant != "pld" and wide.accountant != "pld"
        assert (age.accountant, age.epsilon, wide.accountant, wide.epsilon) == \
            (age_t.accountant, age_t.epsilon, wide_t.accountant, wide_t.epsilon)
        assert float(age.epsilon) == pytest.approx(reference_filter(rho=0.5, delta=DELTA), rel=1e-9)
        assert sex.epsilon == sex_t.epsilon == 0
        shown.append((age.accountant, age.epsilon, wide.epsilon))
    assert shown[0] == shown[1]
