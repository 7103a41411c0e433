"""Tan's propositions as properties of random small ledgers, and the engine against an oracle.

- Prop 3.2: the loss is monotone in the subset U;
- Prop 3.3: the loss is zero on subsets no release reads;
- Prop 3.4: the loss of two ledgers together is the sum of their losses;
- the cost rule (docs/explanation/model.md#the-cost-of-one-release-on-a-subset) and parallel composition (docs/explanation/model.md#families) against an
  oracle written here from the design text, not from `release_cost`;
- `LedgerIndex` (arrays) agrees exactly with the reference functions on every
  subset of the variables.

The oracle keeps a loss as a tuple (pure epsilon, approx epsilon, approx delta,
rho, zCDP of the pure releases = sum of epsilon_i^2 / 2) of Fractions, or None
for "no certified bound".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from itertools import chain, combinations, product

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from ledger.accounting.spend import ZERO, Spend
from ledger.accounting.charge_choice import at_delta
from ledger.accounting.cost_rule import candidates, ledger_cost, release_cost
from ledger.accounting.ledger_index import LedgerIndex
from ledger.core.records import Family, Guarantee, Mechanism, Notion, Relation, Release

from conftest import REFERENCE_ALLOWANCE, _reference_filter

F = Fraction
VARIABLES = ("a", "b", "c", "d")
ALL_SUBSETS = [frozenset(c) for c in chain.from_iterable(combinations(VARIABLES, k) for k in range(len(VARIABLES) + 1))]
NESTED_PAIRS = [(small, large) for small in ALL_SUBSETS for large in ALL_SUBSETS if small <= large]

EPSILONS = (F(0), F(1, 10), F(1, 4), F(1, 2), F(1), F(2), F(104, 4099))
DELTAS = (F(0), F(1, 10**10), F(1, 10**7), F(1, 10**6))
RHOS = (F(1, 200), F(1, 8), F(1, 2), F(2))
ALL_NOTIONS = tuple(Notion)
REPORTING_DELTAS = (F(1, 10**9), F(1, 10**6))


# --------------------------------------------------------------------------
# Random ledgers
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Ledger:
    releases: tuple[Release, ...]
    families: tuple[Family, ...] = ()

    def __repr__(self) -> str:  # compact, so a falsifying example can be read
        def names(s):
            return "{" + ",".join(sorted(s)) + "}"

        def guarantee(g):
            value = {Notion.PURE: f"eps={g.epsilon}", Notion.APPROX: f"eps={g.epsilon},delta={g.delta}",
                     Notion.ZCDP: f"rho={g.rho}"}[g.notion]
            return f"{g.notion}({value}) on {names(g.protects)} [{g.relation}]"

        lines = [f"family {f.id}: {'random' if f.partition is None else 'key ' + names(f.partition)}"
                 for f in self.families]
        lines += [f"{r.id} reads {names(r.reads)}" + (f" in {r.family}" if r.family else "") + ": "
                  + ("; ".join(map(guarantee, r.guarantees)) or "no guarantee") for r in self.releases]
        return "Ledger(\n  " + "\n  ".join(lines) + "\n)"


subsets_of_variables = st.frozensets(st.sampled_from(VARIABLES))


@st.composite
def guarantees(draw, reads: frozenset[str], notions=ALL_NOTIONS) -> Guarantee:
    shape = draw(st.sampled_from(["what it reads", "part of what it reads", "any"]))
    if shape == "what it reads":
        protects = reads
    elif shape == "part of what it reads" and reads:
        protects = draw(st.frozensets(st.sampled_from(sorted(reads))))
    else:
        protects = draw(subsets_of_variables)
    notion = draw(st.sampled_from(notions))
    relation = draw(st.sampled_from(list(Relation)))
    if notion == Notion.PURE:
        return Guarantee(protects, notion, epsilon=draw(st.sampled_from(EPSILONS)), relation=relation)
    if notion == Notion.APPROX:
        return Guarantee(protects, notion, epsilon=draw(st.sampled_from(EPSILONS)),
                         delta=draw(st.sampled_from(DELTAS)), relation=relation)
    return Guarantee(protects, notion, rho=draw(st.sampled_from(RHOS)), relation=relation)


@st.composite
def ledgers(draw, notions=ALL_NOTIONS, with_families=True, prefix="r", max_releases=5) -> Ledger:
    families = []
    if with_families:
        for k in range(draw(st.integers(0, 2))):
            key = draw(st.one_of(st.none(), st.frozensets(st.sampled_from(VARIABLES), min_size=1, max_size=2)))
            families.append(Family(f"F{k}", "survey", partition=key))
    family_ids = [None] + [f.id for f in families]
    releases = []
    for i in range(draw(st.integers(0, max_releases))):
        family_id = draw(st.sampled_from(family_ids))
        reads = draw(subsets_of_variables)
        family = next((f for f in families if f.id == family_id), None)
        if family is not None and family.partition and draw(st.booleans()):
            reads |= family.partition  # the part's records are chosen by the key
        n_guarantees = draw(st.integers(0, 2))
        releases.append(Release(
            id=f"{prefix}{i}",
            dataset="survey",
            reads=reads,
            mechanism=Mechanism("random"),
            guarantees=tuple(draw(guarantees(reads, notions)) for _ in range(n_guarantees)),
            derived_from=() if reads or i == 0 else (f"{prefix}0",),  # reads nothing: computed from outputs
            family=family_id,
        ))
    return Ledger(tuple(releases), tuple(families))


# --------------------------------------------------------------------------
# The oracle, from docs/explanation/model.md#variables-subsets-and-neighbours, docs/explanation/model.md#the-cost-of-one-release-on-a-subset, docs/explanation/model.md#families
# --------------------------------------------------------------------------

ZERO_VALUE = (F(0), F(0), F(0), F(0), F(0))
RANKING_DELTA = F(1, 10**9)


def native_value(g: Guarantee):
    if g.notion == Notion.PURE:
        return pure_value(g.epsilon)
    if g.notion == Notion.APPROX:
        return (F(0), g.epsilon, g.delta, F(0), F(0))
    return (F(0), F(0), F(0), g.rho, F(0))


def pure_value(epsilon):
    return (epsilon, F(0), F(0), F(0), epsilon * epsilon / 2)  # eps-DP is eps^2/2-zCDP (Bun and Steinke, Prop 3.3)


def certified_value(g: Guarantee, relation: Relation):
    """What g certifies for `relation` neighbours; None when nothing."""
    if g.relation == relation:
        return native_value(g)
    if g.relation == Relation.REPLACE:  # a replacement guarantee says nothing about adding a record
        return None
    # a replacement is a removal plus an addition: group privacy of size 2
    if g.notion == Notion.PURE:
        return pure_value(2 * g.epsilon)
    if g.notion == Notion.ZCDP:
        return (F(0), F(0), F(0), 4 * g.rho, F(0))
    with localcontext() as ctx:
        ctx.prec = 40
        e_eps = Decimal(g.epsilon.numerator) / Decimal(g.epsilon.denominator)
        e_eps = e_eps.exp()
    return (F(0), 2 * g.epsilon, g.delta * (1 + F(e_eps)), F(0), F(0))


def notion_of(value) -> str:
    return "zcdp" if value[3] else "approx" if (value[1] or value[2]) else "pure"


def ranking_epsilon(value, cks) -> float:
    """Epsilon of one guarantee's value at delta = 1e-9, how the engine orders alternatives: an
    (epsilon, delta) value within the approximate releases' allowance of that delta, else ∞."""
    kind = notion_of(value)
    if kind == "zcdp":
        return cks(float(value[3]), float(RANKING_DELTA))
    if kind == "approx":
        return float(value[1]) if value[2] <= F(REFERENCE_ALLOWANCE) * RANKING_DELTA else math.inf
    return float(value[0])


def dominates(better, worse) -> bool:
    return notion_of(better) == notion_of(worse) and better != worse and all(b <= w for b, w in zip(better, worse))


def charged_choices(candidates, cks) -> set:
    """Guarantees the rule may charge: the minimum value (at the ranking delta, ties within 1e-6
    allowed), and never one that another covering guarantee beats in every parameter."""
    candidates = set(candidates)
    undominated = [c for c in candidates if not any(dominates(d, c) for d in candidates)]
    rank = {c: ranking_epsilon(c, cks) for c in undominated}
    best = min(rank.values())
    if math.isinf(best):  # every one ∞ at the ranking delta ((epsilon, delta) values above it): the
        # engine's second key decides (Spend.rank: the sum of the components)
        total = {c: float(sum(c)) for c in undominated}
        least = min(total.values())
        return {c for c in undominated if total[c] <= least * (1 + 1e-6) + 1e-15}
    return {c for c in undominated if rank[c] <= best * (1 + 1e-6) or rank[c] == best}


def charged_side(release: Release, relation: Relation, covering: list) -> tuple[list, bool]:
    """The covering values of the side a release is charged by (docs/explanation/accounting.md; README, "Which
    guarantee is charged"), and whether it is the (epsilon, delta) side. The side is fixed by the
    release and the subset, since choosing it after the history would spend the delta twice: its
    pure and rho values (a zero value among them) where one covers, else its (epsilon, delta) ones."""
    others = [v for v in covering if notion_of(v) != "approx"]
    if others:
        return others, False
    return covering, True


def oracle_release(release: Release, subset: frozenset[str], relation: Relation, cks) -> set:
    """docs/explanation/model.md#the-cost-of-one-release-on-a-subset: the set of costs c_r(U) the rule allows (one element unless guarantees tie)."""
    if not subset & release.reads:
        return {ZERO_VALUE}  # Tan Prop 3.3
    covering = [certified_value(g, relation) for g in release.guarantees if subset & release.reads <= g.protects]
    covering = [value for value in covering if value is not None]
    if not covering:
        return {None}  # exact variables: not protected
    return charged_choices(charged_side(release, relation, covering)[0], cks)


def add(x, y):
    return None if x is None or y is None else tuple(a + b for a, b in zip(x, y))


def largest(values):
    values = list(values)
    if any(v is None for v in values):
        return None
    return tuple(max(column, default=F(0)) for column in zip(ZERO_VALUE, *values))


def oracle_release_any(release: Release, subset: frozenset[str], cks, relation=Relation.REPLACE) -> set:
    """docs/explanation/model.md#the-cost-of-one-release-on-a-subset read as "any covering guarantee is a valid cost": every undominated one."""
    if not subset & release.reads:
        return {ZERO_VALUE}
    covering = {certified_value(g, relation) for g in release.guarantees
                if subset & release.reads <= g.protects} - {None}
    if not covering:
        return {None}
    side, by_approx = charged_side(release, relation, list(covering))
    if by_approx:  # of (epsilon, delta) values, the first-ranked only: their deltas differ
        return charged_choices(side, cks)
    return {c for c in side if not any(dominates(d, c) for d in side)}


def oracle_family(family: Family, members, subset: frozenset[str], cks) -> set:
    """docs/explanation/model.md#families, over every allowed choice of the members' costs: each choice gives the
    set of alternatives the adversary picks from (the worst member as a whole, never a
    componentwise maximum), as a frozenset (frozenset({None}) for ∞)."""
    replace = [oracle_release_any(m, subset, cks, Relation.REPLACE) for m in members]
    if not any(subset & m.reads for m in members):
        return {frozenset({ZERO_VALUE})}
    if family.partition is None or not family.partition & subset:
        return {adversary(choice) for choice in product(*replace)}  # the change stays in one part
    # a move takes the whole record: add/remove on everything the member reads
    add_remove = [oracle_release_any(m, frozenset(m.reads), cks, Relation.ADD_REMOVE) for m in members]
    results = set()
    for stays_choice, moves_choice in product(product(*replace), product(*add_remove)):
        moves = list(moves_choice) + [add(x, y) for x, y in combinations(moves_choice, 2)]
        results.add(adversary([*stays_choice, *moves]))
    return results


def adversary(values) -> frozenset:
    values = list(values)
    return frozenset({None}) if any(v is None for v in values) else frozenset(values)


def oracle_epsilon(value, delta, cks) -> float:
    """docs/explanation/model.md#composition, docs/explanation/accounting.md on a composed value (pure, approx eps, approx delta, rho, pure as rho):
    approximate deltas within the allowance of delta (else ∞), their epsilons added; with rho, the
    statements at the fixed Rényi orders, each at 1/44 of delta (conftest's reference_filter)."""
    if value is None:
        return math.inf
    pure, approx_epsilon, approx_delta, rho, pure_rho = value
    return _reference_filter(pure, pure_rho, rho, approx_epsilon, approx_delta, delta)


def oracle_ledger(ledger: Ledger, subset: frozenset[str], cks) -> set:
    """Tan Prop 3.4: every release (and every family, once) composed, each standalone
    release charged at any of its undominated covering guarantees. Each element is the
    set of totals the adversary picks from for one choice (see `oracle_family`)."""
    family_ids = {f.id for f in ledger.families}
    units = [{frozenset({value}) for value in oracle_release_any(r, subset, cks)}
             for r in ledger.releases if r.family not in family_ids]
    for family in ledger.families:
        members = [r for r in ledger.releases if r.family == family.id]
        if members:
            units.append(oracle_family(family, members, subset, cks))
    totals = {frozenset({ZERO_VALUE})}
    for choices in units:
        totals = {frozenset(add(t, a) for t in total for a in choice) for total in totals for choice in choices}
    return totals


def option_epsilon(option, delta, cks) -> float:
    return max(oracle_epsilon(value, delta, cks) for value in option)


def option_figure(option, delta, cks) -> float:
    """The figure at `delta` of the total `stated_as` states for the adversary's pick among `option`."""
    values = list(option)
    if None in values:
        return math.inf
    if all(v[1] == v[2] == v[3] == 0 for v in values):
        return float(max(v[0] for v in values))
    top = [v for v in values if all(all(a <= b for a, b in zip(w, v)) for w in values)]
    if top:
        return oracle_epsilon(top[0], delta, cks)
    worst = option_epsilon(option, F(REFERENCE_ALLOWANCE) * F(delta), cks)
    return worst if math.isfinite(worst) else option_epsilon(option, delta, cks)


def matches(spend: Spend, value) -> bool:
    if value is None:
        return spend.unbounded
    if spend.unbounded:
        return False
    pure, approx_epsilon, approx_delta, rho, pure_rho = value
    close_delta = abs(spend.approx_delta - approx_delta) <= approx_delta * F(1, 10**12)  # e^eps is irrational
    exact = (spend.pure, spend.approx_epsilon, spend.rho, spend.pure_rho) == (pure, approx_epsilon, rho, pure_rho)
    return exact and close_delta


def stated_as(spend: Spend, option, delta, cks) -> bool:
    """The total the adversary's pick among `option` is stated as (docs/explanation/model.md#families): the largest
    pure epsilon when every one is pure; else the value no smaller in any component than every other one, when there is one (valid at every delta);
    otherwise (epsilon*, delta*) at the allowance's share delta* of `delta` (half), epsilon* the
    largest figure at delta*, which is all that is true of every alternative (a pure label would
    claim delta 0 for a rho member), an approximate part the allowance of `delta` holds."""
    values = list(option)
    if None in values:
        return spend.unbounded
    if all(v[1] == v[2] == v[3] == 0 for v in values):  # every one a pure epsilon: the largest
        largest = max(v[0] for v in values)
        return any(matches(spend, v) for v in values if v[0] == largest)
    top = [v for v in values if all(all(a <= b for a, b in zip(w, v)) for w in values)]
    if top:
        return matches(spend, top[0])
    share = F(REFERENCE_ALLOWANCE) * F(delta)
    worst = option_epsilon(option, share, cks)
    if math.isinf(worst):
        return any(matches(spend, v) for v in values)
    return (not spend.unbounded and spend.pure == 0 and spend.rho == 0 and spend.pure_rho == 0
            and spend.approx_delta == share and math.isclose(float(spend.approx_epsilon), worst, rel_tol=1e-9))


def loss(spend: Spend, delta) -> float:
    return math.inf if spend.unbounded else float(spend.epsilon(delta))


# --------------------------------------------------------------------------
# Pinned counterexamples (found as defects; kept as regression tests)
# --------------------------------------------------------------------------


def _release(id, reads, *guarantees, family=None):
    return Release(id, "survey", frozenset(reads), Mechanism("pinned"), tuple(guarantees), family=family)


def _g(protects, notion, relation=Relation.REPLACE, **values):
    return Guarantee(frozenset(protects), Notion(notion), relation=relation, **{k: F(v) for k, v in values.items()})


MIXED_NOTIONS_NOT_MONOTONE = Ledger((
    _release("r1", "ab", _g("a", "pure", epsilon=F(4, 5)), _g("ab", "zcdp", rho=F(1, 100))),
    _release("r2", "a", _g("a", "zcdp", rho=1)),
))
APPROX_NOT_MONOTONE = Ledger((
    _release("r1", "ab", _g("a", "pure", epsilon=F(1, 2)), _g("ab", "approx", epsilon=F(1, 10), delta=F(1, 10**7))),
))
DOMINATED_APPROX_CHARGED = Ledger((
    _release("r1", "a", _g("a", "approx", epsilon=2, delta=F(1, 10**6)), _g("a", "approx", epsilon=1, delta=F(1, 10**6))),
))
TIE_BROKEN_DIFFERENTLY = Ledger((
    _release("r1", "a", _g("a", "pure", epsilon=1), _g("a", "approx", epsilon=1, delta=0)),
    _release("r2", "a", _g("a", "zcdp", rho=F(1, 2))),
))
# Under replacement, (0, 1e-7) of its own and (4, 8.4e-10) from an add/remove (2, 1e-10) by group
# privacy: both deltas are past the allowance's half of the ranking delta, so neither has an
# epsilon there and the sum of the components ranks them.
RANKED_WITHIN_THE_ALLOWANCE = Ledger((
    _release("r1", "acd", _g("acd", "approx", epsilon=0, delta=F(1, 10**7)),
             _g("acd", "approx", Relation.ADD_REMOVE, epsilon=2, delta=F(1, 10**10))),
))
ADD_REMOVE_GUARANTEE_IGNORED = Ledger(
    tuple(
        _release(f"p{i}", "ab", _g("ab", "pure", epsilon=F(1, 2)),
                 _g("ab", "approx", Relation.ADD_REMOVE, epsilon=F(1, 4), delta=F(1, 10**6)), family="K")
        for i in range(2)
    ),
    (Family("K", "survey", frozenset("a")),),
)
# A family whose members are in different notions, the worst at the asked delta pure: the
# total was stated "epsilon 2 (pure)", claiming delta 0 for the rho member (found by
# test_same_figure_everywhere). It is (2, delta): `stated_as`.
FAMILY_WORST_PURE_AT_DELTA = Ledger(
    (_release("f1", "d", _g("d", "pure", epsilon=2), family="F0"),
     _release("f2", "d", _g("d", "zcdp", rho=F(1, 200)), family="F0")),
    (Family("F0", "survey", None),),
)


# --------------------------------------------------------------------------
# Tan Prop 3.2: monotone in U
# --------------------------------------------------------------------------


@pytest.mark.parametrize("notion", [Notion.PURE, Notion.ZCDP])
@given(data=st.data())
def test_loss_is_monotone_in_the_subset_with_families_in_one_notion(notion, data):
    ledger = data.draw(ledgers(notions=(notion,)), label="ledger")
    for delta in REPORTING_DELTAS:
        cost = {u: ledger_cost(ledger.releases, ledger.families, u, objective=at_delta(delta)) for u in ALL_SUBSETS}
        for small, large in NESTED_PAIRS:
            assert loss(cost[small], delta) <= loss(cost[large], delta) * (1 + 1e-9), (sorted(small), sorted(large))


def side_may_turn(release: Release) -> bool:
    """A release for which the side fixed in advance (`charged_side`) may break monotonicity: an
    (epsilon, delta) guarantee covers a part of what it reads that none of its pure or rho ones
    covers (a smaller subset, where one does, is charged by it), or its (epsilon, delta)
    guarantees cover different parts (the first-ranked is charged, by its figure at 1e-9)."""
    for relation in Relation:
        certified = [(g.protects & release.reads, certified_value(g, relation)) for g in release.guarantees]
        approx = [p for p, v in certified if v is not None and notion_of(v) == "approx"]
        others = [p for p, v in certified if v is not None and notion_of(v) != "approx"]
        if others and not all(any(p <= q for q in others) for p in approx):
            return True
        if len(set(approx)) > 1:
            return True
    return False


@given(ledgers())
@example(MIXED_NOTIONS_NOT_MONOTONE)
@example(APPROX_NOT_MONOTONE)
def test_loss_is_monotone_in_the_subset(ledger):
    # Tan Prop 3.2, for the loss at each reporting delta (the engine minimises at that delta),
    # wherever a side fixed in advance can keep it (test_fixed_sides: where it cannot).
    assume(not any(side_may_turn(r) for r in ledger.releases))
    for delta in REPORTING_DELTAS:
        cost = {u: ledger_cost(ledger.releases, ledger.families, u, objective=at_delta(delta)) for u in ALL_SUBSETS}
        for small, large in NESTED_PAIRS:
            assert loss(cost[small], delta) <= loss(cost[large], delta) * (1 + 1e-9), (
                f"delta={delta}", sorted(small), sorted(large), cost[small], cost[large])


# --------------------------------------------------------------------------
# Tan Prop 3.3: zero on subsets no release reads
# --------------------------------------------------------------------------


@given(ledgers())
def test_loss_is_zero_on_subsets_no_release_reads(ledger):
    read = frozenset().union(*(r.reads for r in ledger.releases))
    index = LedgerIndex(VARIABLES, ledger.releases, ledger.families)
    for subset in ALL_SUBSETS:
        for r in ledger.releases:
            if not subset & r.reads:
                assert release_cost(r, subset) == ZERO
        if not subset & read:
            assert ledger_cost(ledger.releases, ledger.families, subset) == ZERO, sorted(subset)
            assert index.subset_cost(subset).spend == ZERO, sorted(subset)


# --------------------------------------------------------------------------
# Tan Prop 3.4: additive over ledgers
# --------------------------------------------------------------------------


@given(ledgers(with_families=False, prefix="A"), ledgers(with_families=False, prefix="B"))
def test_loss_of_two_ledgers_together_is_the_sum_of_their_losses(first, second):
    # Tan Prop 3.4: the loss of both together is at most the sum of their losses, and exactly
    # the sum when no release has incomparable guarantees to choose between. (With a choice,
    # the engine may charge together what it would not charge apart, and only does so when
    # the composed epsilon is smaller.)
    together = first.releases + second.releases
    indexes = [LedgerIndex(VARIABLES, releases) for releases in (first.releases, second.releases, together)]
    for subset in ALL_SUBSETS:
        reference = [ledger_cost(first.releases, [], subset), ledger_cost(second.releases, [], subset)]
        fast = [index.subset_cost(subset).spend for index in indexes[:2]]
        combined = ledger_cost(together, [], subset)
        assert indexes[2].subset_cost(subset).spend == combined, sorted(subset)
        if all(len(candidates(r, subset)) <= 1 for r in together):
            assert combined == sum_by_hand(*reference), sorted(subset)
            assert combined == sum_by_hand(*fast), sorted(subset)
        else:
            assert loss(combined, RANKING_DELTA) <= loss(sum_by_hand(*reference), RANKING_DELTA) * (1 + 1e-9)


def sum_by_hand(a: Spend, b: Spend) -> Spend:
    if a.unbounded or b.unbounded:
        return Spend(unbounded=True)
    return Spend(a.pure + b.pure, a.approx_epsilon + b.approx_epsilon, a.approx_delta + b.approx_delta,
                 a.rho + b.rho, pure_rho=a.pure_rho + b.pure_rho)


# --------------------------------------------------------------------------
# The cost rule and families against the oracle
# --------------------------------------------------------------------------


@given(ledger=ledgers(with_families=False))
@example(ledger=DOMINATED_APPROX_CHARGED)
@example(ledger=Ledger(ADD_REMOVE_GUARANTEE_IGNORED.releases))
@example(ledger=RANKED_WITHIN_THE_ALLOWANCE)
def test_release_cost_follows_the_rule(ledger, reference_cks):
    for r in ledger.releases:
        for subset in ALL_SUBSETS:
            for relation in Relation:
                allowed = oracle_release(r, subset, relation, reference_cks)
                got = release_cost(r, subset, relation)
                assert any(matches(got, value) for value in allowed), (r.id, sorted(subset), relation, got, allowed)


@given(ledger=ledgers())
@example(ledger=ADD_REMOVE_GUARANTEE_IGNORED)
@example(ledger=FAMILY_WORST_PURE_AT_DELTA)
def test_ledger_cost_follows_the_rules_with_families(ledger, reference_cks):
    # The total is one of the compositions the rules allow, and the smallest of them at the
    # delta it is asked for (releases with incomparable guarantees are charged the one that
    # minimises the composed epsilon).
    for delta in REPORTING_DELTAS:
        for subset in ALL_SUBSETS:
            allowed = oracle_ledger(ledger, subset, reference_cks)
            got = ledger_cost(ledger.releases, ledger.families, subset, objective=at_delta(delta))
            assert any(stated_as(got, option, delta, reference_cks) for option in allowed), (sorted(subset), got)
            best = min(option_figure(option, delta, reference_cks) for option in allowed)
            if not family_member_chooses(ledger, subset):  # (see the pinned xfail below)
                assert loss(got, delta) <= best * (1 + 1e-9) + 1e-12, (f"delta={delta}", sorted(subset), got)
            assert loss(got, delta) >= best * (1 - 1e-9) - 1e-12, (f"delta={delta}", sorted(subset), got)


def family_member_chooses(ledger: Ledger, subset) -> bool:
    """A family member offers several sides on `subset` (pure and rho): its choice decides which
    alternatives the family's worst is stated over."""
    family_ids = {f.id for f in ledger.families}
    return any(r.family in family_ids and len(candidates(r, frozenset(subset))) > 1 for r in ledger.releases)


# A family of two members on a: r0 offers pure 0.1 or rho 1/200, r1 rho 1/8. Charging r0 its rho
# makes r1's the worst member outright (rho 1/8: 3.3845 at 1e-9, conftest's reference); charging its
# pure 0.1 leaves two incomparable members, stated at the allowance's share of the delta (3.4307).
FAMILY_SIDE_CHOSEN_BEFORE_ITS_WORST = Ledger(
    (_release("r0", "a", _g("a", "pure", epsilon=F(1, 10)), _g("a", "zcdp", rho=F(1, 200)), family="F0"),
     _release("r1", "a", _g("a", "zcdp", rho=F(1, 8)), family="F0")),
    (Family("F0", "survey", None),),
)


@pytest.mark.xfail(strict=True, reason="the engine charges a family member's side without the family's worst-member "
                   "statement at the allowance's share of the delta (charge_choice._suffered): a looser figure, not the "
                   "smallest the rules allow")
def test_a_family_members_side_gives_the_smallest_worst_member_figure():
    delta = F(1, 10**9)
    rho_side = _reference_filter(rho=F(1, 8), delta=delta)
    pure_side = max(0.1, _reference_filter(rho=F(1, 8), delta=F(REFERENCE_ALLOWANCE) * delta))
    assert (round(rho_side, 4), round(pure_side, 4)) == (3.3845, 3.4307)
    got = ledger_cost(FAMILY_SIDE_CHOSEN_BEFORE_ITS_WORST.releases, FAMILY_SIDE_CHOSEN_BEFORE_ITS_WORST.families,
                      {"a"}, objective=at_delta(delta))
    assert got.epsilon(delta) == pytest.approx(rho_side, rel=1e-9)


# --------------------------------------------------------------------------
# LedgerIndex against the reference functions, on every subset
# --------------------------------------------------------------------------


def assert_index_agrees(ledger: Ledger):
    releases, families = ledger.releases, ledger.families
    index = LedgerIndex(VARIABLES, releases, families)
    for subset in ALL_SUBSETS:
        fast = index.subset_cost(subset)
        assert fast.spend == ledger_cost(releases, families, subset), sorted(subset)
        charged = tuple(r.id for r in releases if not release_cost(r, subset).is_zero)
        assert fast.releases == charged, sorted(subset)
    table = index.table("survey")
    everything = frozenset(VARIABLES)
    for i, r in enumerate(releases):
        for j, variable in enumerate(VARIABLES):
            assert table.cell(i, j) == release_cost(r, frozenset({variable})), (r.id, variable)
        assert table.row_dataset_wide(i) == release_cost(r, everything), r.id
    assert table.total == tuple(ledger_cost(releases, families, {v}) for v in VARIABLES)
    assert table.total_dataset_wide == ledger_cost(releases, families, everything)
    assert index.pairs() == {(a, b): ledger_cost(releases, families, {a, b}) for a, b in combinations(VARIABLES, 2)}


@pytest.mark.parametrize("notion", [Notion.PURE, Notion.ZCDP])
@given(data=st.data())
def test_index_agrees_with_the_reference_in_one_notion_with_families(notion, data):
    assert_index_agrees(data.draw(ledgers(notions=(notion,), max_releases=6), label="ledger"))


@given(ledgers(max_releases=6))
@example(TIE_BROKEN_DIFFERENTLY)
def test_index_agrees_with_the_reference(ledger):
    assert_index_agrees(ledger)


def test_a_family_worst_at_pure_epsilon_is_not_stated_pure_when_a_member_is_not():
    # Members at pure 2 and rho 1/200 on d, asked at delta 1e-9: the statement is made at the
    # allowance's share of it, 5e-10, where the rho member gives the fixed orders' figure 0.638 < 2
    # (conftest's reference, independently of the engine), so the worst is 2; but only at delta > 0:
    # the statement is (2, 5e-10), never pure, an approximate part the allowance of 1e-9 holds
    # exactly: 2 at 1e-9, ∞ below it, and at delta 0 (a pure cap) nothing is certified.
    share = F(REFERENCE_ALLOWANCE) * F(1, 10**9)
    assert share == F(1, 2 * 10**9)
    assert _reference_filter(rho=F(1, 200), delta=share) < 2
    got = ledger_cost(FAMILY_WORST_PURE_AT_DELTA.releases, FAMILY_WORST_PURE_AT_DELTA.families, {"d"},
                      objective=at_delta(F(1, 10**9)))
    assert (got.pure, got.rho, got.approx_epsilon, got.approx_delta) == (0, 0, 2, share)
    assert got.notion == "approx" and not got.is_pure
    assert got.epsilon(F(1, 10**9)) == 2 and math.isinf(got.epsilon(0))
    assert math.isinf(got.epsilon(F(1, 10**9) - F(1, 10**20)))
