"""The cost rule per subset, release by release: the reference the array path (ledger_index.LedgerIndex) is checked against.

The cost rule (docs/explanation/model.md#the-cost-of-one-release-on-a-subset), for release r and subset U:
    c_r(U) = 0                        if U ∩ reads(r) is empty         (Tan Prop 3.3)
           = min value(g) over guarantees g with U ∩ reads(r) ⊆ P_g   (Tan Props 3.2, 3.5),
             of its pure and rho guarantees where one covers, else of its (epsilon, delta) ones
             (a side fixed by the release: `charge_options`)
           = ∞ (not protected)         otherwise
and the loss on U is the composition of c_r(U) over releases (Tan Prop 3.4), with a family of
releases on disjoint parts charged once (docs/explanation/model.md#families).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import combinations, product

from ..core.records import Family, Relation, Release
from .charge_choice import CHOICE_LIMIT, Objective, Option, compose_units, option_pareto, worst_of
from .spend import Spend, UNBOUNDED, ZERO, guarantee_spend, pareto


def candidates(release: Release, subset: frozenset[str], relation: Relation | None = None) -> tuple[Spend, ...]:
    """Every cost c_r(U) may be charged at (docs/explanation/model.md#the-cost-of-one-release-on-a-subset), without dominated ones, in rank order,
    for neighbours under `relation` (default: its dataset's, `spend.guarantee_spend`).

    (ZERO,) when the release reads nothing of U (Tan Prop 3.3); () when no guarantee
    covers what it reads of U: not protected.
    """
    touched = subset & release.reads
    if not touched:
        return (ZERO,)  # Tan Prop 3.3: independent of the values of U
    return _covering(release.guarantees, touched, relation)


@lru_cache(maxsize=65536)
def _covering(guarantees: tuple, touched: frozenset[str], relation: Relation | None) -> tuple[Spend, ...]:
    # cached: a ledger's releases repeat the same guarantees, and totals ask for them again and again
    covering = [guarantee_spend(g, relation) for g in guarantees
                if touched <= g.protects]  # Tan Props 3.2 and 3.5: private on every subset of P
    return charge_options(covering)


# Which side of a release is charged: its (epsilon, delta) guarantees or the others
#
# A release may be adaptive (docs/explanation/accounting.md): each figure is one of spend.py's statements, each at a
# share of the delta fixed in advance. A release charged by an (epsilon, delta) guarantee spends
# that delta off the top of every statement; one charged by a pure or rho guarantee spends none.
# Choosing after the history which releases take which side would be a choice among as many
# families of statements, each at the whole delta (valid only by a union bound over all of them).
# So the side is fixed by the release and what it reads of the subset asked about:
# - its pure and rho guarantees wherever one covers (they are finite in every unit a figure or a
#   cap is stated in: epsilon at any delta, pure epsilon, rho), else its (epsilon, delta) ones;
# - of several (epsilon, delta) guarantees, the first-ranked covering one (their deltas differ,
#   and choosing after the history would again spend the smallest delta of each);
# - among pure and rho guarantees the choice stays free: each fixed-order statement of spend.py is
#   bounded by the per-release minimum of those (`choose`).
# A smaller subset only adds covering guarantees; the loss stays monotone in the subset (Tan Prop
# 3.2) unless an (epsilon, delta) guarantee covers a set of what the release reads that no pure or
# rho one does (then a smaller subset, where one does, may cost more) or several (epsilon, delta)
# guarantees cover different sets: valid, not the tightest (README, "Which guarantee is charged").
# A Gaussian declared by (epsilon, delta) keeps its claim beside its implied rho (both protect the
# same variables): it is charged by the rho, whose composition is the smaller one.


def is_approx(spend: Spend) -> bool:
    """An (epsilon, delta) charge: spends a delta of its own."""
    return bool(spend.approx_epsilon or spend.approx_delta)


def charge_options(covering: Sequence[Spend]) -> tuple[Spend, ...]:
    """The options a release is charged among, from its covering guarantees' charges, without
    dominated ones and ∞, in rank order: the pure and rho ones where there is one, else the
    first-ranked (epsilon, delta) one (see above)."""
    options = tuple(s for s in pareto(covering) if not s.unbounded)
    exact = tuple(s for s in options if not is_approx(s))
    return exact if exact else options[:1]


def release_cost(release: Release, subset: frozenset[str], relation: Relation | None = None) -> Spend:
    """c_r(U), docs/explanation/model.md#the-cost-of-one-release-on-a-subset: the first-ranked covering guarantee, ∞ when none covers."""
    options = candidates(release, subset, relation)
    return options[0] if options else UNBOUNDED


def family_options(family: Family, members: Sequence[Release], subset: frozenset[str]) -> tuple[Option, ...]:
    """Every cost c_F(U) may be charged at, for releases on disjoint parts of the records
    (Clifton et al.; docs/explanation/model.md#families), without dominated ones, in rank order; () is ∞.

    - random split, or no key variable in U: a U-neighbour change stays in one
      part, so the family costs the cost of one member, whichever the changed
      record is in: the worst member as a whole (`worst_of`);
    - a key variable in U: the changed record may stay in its part (a
      replacement there, charged on U ∩ reads) or move to another (a removal of
      the whole record from one part and an addition to another, or to a part no
      member releases): the worst of every member's replacement cost and every
      sum of one or two members' add/remove costs, where an add/remove cost must
      come from a guarantee protecting *everything the member reads* (the record
      takes its unprotected values with it). Parts without one give ∞.
    Members with incomparable guarantees leave a choice: every combination is
    tried (up to CHOICE_LIMIT; past that, each member's first-ranked one).
    """
    if not any(subset & member.reads for member in members):
        return (ZERO,)
    keyed = family.partition is not None and bool(family.partition & subset)
    per_member = []
    for member in members:
        stays = candidates(member, subset) or (UNBOUNDED,)  # in the dataset's relation
        if keyed:
            moves = (_covering(member.guarantees, member.reads, Relation.ADD_REMOVE) if member.reads
                     else (ZERO,)) or (UNBOUNDED,)
            per_member.append((stays, moves))
        else:
            per_member.append((stays,))
    if math.prod(len(options) for member in per_member for options in member) > CHOICE_LIMIT:
        per_member = [tuple(options[:1] for options in member) for member in per_member]
    results = []
    for chosen in product(*(product(*member) for member in per_member)):
        alternatives = [choice[0] for choice in chosen]
        if keyed:
            alternatives += _moves([choice[1] for choice in chosen])
        results.append(worst_of(alternatives))
    return option_pareto(results)


def unprotected_move(family: Family, members: Sequence[Release], subset: frozenset[str]) -> Release | None:
    """The member that makes c_F(U) = ∞ by a move (docs/explanation/model.md#families), None when there is none: with a
    key variable in U (and a member reading U), a record moving between parts takes everything a
    member reads with it, so a member with no add/remove guarantee protecting all it reads leaves
    the move unbounded (`family_options` gives () then). The first such member, in order."""
    if family.partition is None or not family.partition & subset or not any(subset & m.reads for m in members):
        return None
    return next((m for m in members if m.reads and not any(
        g.relation == Relation.ADD_REMOVE and m.reads <= g.protects for g in m.guarantees)), None)


def _moves(costs: Sequence[Spend]) -> list[Spend]:
    """A record leaving one part and joining another: every member's add/remove cost
    alone (the other part is not released) and every sum of two members' costs
    (docs/explanation/model.md#families), over distinct values (a value with itself only when two members have it)."""
    counts: dict[Spend, int] = {}
    for cost in costs:
        counts[cost] = counts.get(cost, 0) + 1
    distinct = list(counts)
    if any(c.unbounded for c in distinct):
        return [UNBOUNDED]
    result = list(distinct)
    for i, a in enumerate(distinct):
        if counts[a] > 1:
            result.append(a + a)
        for b in distinct[i + 1:]:
            result.append(a + b)
    return result


def family_cost(family: Family, members: Sequence[Release], subset: frozenset[str]) -> Option:
    """c_F(U), docs/explanation/model.md#families: the family's first-ranked cost, ∞ when none is certified
    (a `Worst` when its members' costs are in different notions)."""
    options = family_options(family, members, subset)
    return options[0] if options else UNBOUNDED


def ledger_cost(releases: Iterable[Release], families: Iterable[Family], subset: Iterable[str],
                objective: Objective | None = None) -> Spend:
    """The loss on `subset` of every release together (Tan Prop 3.4), families charged once,
    each release's alternatives chosen to minimise `objective` (default: epsilon at 1e-9)."""
    subset = frozenset(subset)
    by_family: dict[str, list[Release]] = {}
    family_map = {family.id: family for family in families}
    units: list[tuple[Spend, ...]] = []
    for release in releases:
        if release.family is not None and release.family in family_map:
            by_family.setdefault(release.family, []).append(release)
        else:
            units.append(candidates(release, subset))
    units += [family_options(family_map[fid], members, subset) for fid, members in by_family.items()]
    return compose_units(ZERO, units, objective)


def _is_chain(values: Sequence[Spend]) -> bool:
    """Every two values comparable by dominance (so the first-ranked is always the one to charge)."""
    return all(a.dominates(b) or b.dominates(a) for a, b in combinations(set(values), 2))


def one_charge(values: Sequence[Spend]) -> bool:
    """A release with these guarantees' values has one charge on every subset, found over arrays
    (the first-ranked covering one of its side, `_best`): its pure and rho values are a chain, and
    so are its (epsilon, delta) ones (`charge_options`). A Gaussian declared by (epsilon, delta),
    its claim beside its implied rho, is one; a pure epsilon beside a rho, leaving a choice, is not."""
    return _is_chain([v for v in values if not is_approx(v)]) and _is_chain([v for v in values if is_approx(v)])
