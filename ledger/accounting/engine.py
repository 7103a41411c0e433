"""The accounting engine: the privacy loss of every subset of variables.

Pure functions over frozen records (no I/O). Two implementations of the same
rules live here:

- `release_cost`, `family_cost`, `ledger_cost`: the rules written out release
  by release, as docs/explanation/model.md#the-cost-of-one-release-on-a-subset-2.6 states them. They are the reference the tests
  check the fast path against, and the baseline the benchmark times.
- `LedgerIndex`: the same rules over numpy arrays (reads and guarantees as
  boolean matrices), used for the release-by-variable table and subset
  queries on large ledgers. Totals stay exact: distinct guarantee values are
  scaled to integers over a common denominator and summed as integers.

The cost rule (docs/explanation/model.md#the-cost-of-one-release-on-a-subset), for release r and subset U:
    c_r(U) = 0                        if U ∩ reads(r) is empty         (Tan Prop 3.3)
           = min value(g) over guarantees g with U ∩ reads(r) ⊆ P_g   (Tan Props 3.2, 3.5),
             of its pure and rho guarantees where one covers, else of its (epsilon, delta) ones
             (a side fixed by the release: `charge_options`)
           = ∞ (not protected)         otherwise
and the loss on U is the composition of c_r(U) over releases (Tan Prop 3.4),
with a family of releases on disjoint parts charged once (docs/explanation/model.md#families).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from itertools import combinations, product

from .spend import (
    ALLOWANCE,
    DEFAULT_DELTA,
    UNBOUNDED,
    ZERO,
    Spend,
    compose,
    guarantee_spend,
    pareto,
    spend_max,
    sum_of_two_largest,
)
from ..core.numbers import float_up
from ..core.records import Family, Relation, Release
from ..core.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use: recording never needs it

# --------------------------------------------------------------------------
# Reference rules, release by release
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# Which side of a release is charged: its (epsilon, delta) guarantees or the others
# --------------------------------------------------------------------------
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


Objective = Callable[[Spend], object]
CHOICE_LIMIT = 20_000  # combinations tried when several releases offer incomparable guarantees
WORST_LIMIT = 4_096  # adversarial combinations tried before a Worst is bounded componentwise


@dataclass(frozen=True)
class Worst:
    """A cost the steward does not choose: whichever of `alternatives` applies, the worst.

    A family of releases on disjoint parts (docs/explanation/model.md#families) costs the cost of the one part
    the changed record is in (or, for a move between parts, of the two it leaves and
    joins); the adversary picks the part. When the alternatives are in different
    notions no one of them dominates, and their componentwise maximum would charge
    pieces of several members at once: the loss is the largest composition with any
    one alternative (docs/explanation/model.md#families, the worst member as a whole).
    """

    alternatives: tuple[Spend, ...]

    @property
    def unbounded(self) -> bool:
        return any(a.unbounded for a in self.alternatives)

    @property
    def is_zero(self) -> bool:
        return all(a.is_zero for a in self.alternatives)

    def bound(self) -> Spend:
        """One Spend no smaller than any alternative: the componentwise maximum (valid, looser)."""
        return spend_max(self.alternatives)

    def rank(self) -> tuple[float, float]:
        return max(a.rank() for a in self.alternatives)


Option = Spend | Worst


def alternatives_of(option: Option) -> tuple[Spend, ...]:
    return option.alternatives if isinstance(option, Worst) else (option,)


def _le(a: Spend, b: Spend) -> bool:
    """a is no worse than b in any component."""
    return a.dominates(b)


def worst_of(spends) -> Option:
    """The adversary's choice among `spends`: the one that dominates all, if any; else a
    Worst of those no other dominates (UNBOUNDED when any is)."""
    spends = list(spends)
    if any(s.unbounded for s in spends):
        return UNBOUNDED
    maximal: list[Spend] = []
    for spend in sorted(set(spends), key=Spend.rank, reverse=True):  # a dominating one ranks first
        if not any(_le(spend, other) for other in maximal):
            maximal.append(spend)
    if not maximal:
        return ZERO
    if len(maximal) == 1:
        return maximal[0]
    return Worst(tuple(maximal))


def option_pareto(options) -> tuple[Option, ...]:
    """`pareto` over options that may be Worst: drop an option when another is no worse
    against every alternative the adversary could pick; rank order; ∞ dropped."""
    options = [o for o in options if not o.unbounded]
    if all(isinstance(o, Spend) for o in options):
        return pareto(options)
    ranked = sorted(set(options), key=lambda o: o.rank())
    kept: list[Option] = []
    for option in ranked:
        if not any(_option_le(other, option) for other in kept):
            kept.append(option)
    return tuple(kept)


def _option_le(a: Option, b: Option) -> bool:
    """Every alternative of a is no worse than some alternative of b: a is never worse."""
    return all(any(_le(x, y) for y in alternatives_of(b)) for x in alternatives_of(a))


@dataclass(frozen=True, slots=True)
class AtDelta:
    """The objective "epsilon at `delta`": prefer the smaller epsilon, then the smaller rank.
    (A class, not a closure, so that `_worst_total` knows the delta its figure is stated at.)"""

    delta: Fraction | float
    allowance: Fraction = ALLOWANCE  # the dataset's (Dataset.allowance)

    def __call__(self, spend: Spend) -> tuple[float, tuple[float, float]]:
        return float_up(spend.epsilon(self.delta, self.allowance)), spend.rank()


@lru_cache(maxsize=64)  # one objective per delta: results kept per objective (pair_matrix) are found again
def at_delta(delta, allowance: Fraction = ALLOWANCE) -> AtDelta:
    """Prefer the smaller epsilon at `delta` (with the dataset's `allowance`), then the smaller rank."""
    return AtDelta(delta, allowance)


def _worst_total(base: Spend, options: Sequence[Option], objective: Objective) -> tuple[Spend, object]:
    """base composed with one alternative of each option, the adversary picking the
    alternatives that maximise `objective`: (that total, its key), the total as `_suffered`
    states it."""
    fixed = compose([base, *(o for o in options if isinstance(o, Spend))])
    adversarial = [o.alternatives for o in options if isinstance(o, Worst)]
    if not adversarial or fixed.unbounded:
        return fixed, objective(fixed)
    if math.prod(len(a) for a in adversarial) > WORST_LIMIT:
        total = compose([fixed, *(spend_max(a) for a in adversarial)])  # dominates every pick: valid as it is
        return total, objective(total)
    totals = [compose([fixed, *picked]) for picked in product(*adversarial)]
    worst, worst_key = None, None
    for total in totals:
        key = objective(total)
        if worst is None or key > worst_key:
            worst, worst_key = total, key
    return _suffered(worst, totals, objective), worst_key


def _suffered(worst: Spend, totals: Sequence[Spend], objective: Objective) -> Spend:
    """The worst of the totals the adversary picks from, stated so that its label is true.

    When every total is a pure epsilon, the largest is the loss at every delta. When `worst`
    is no smaller than every other total in every component, it bounds them at every delta
    and is the loss as it is. Otherwise it is the worst only at the objective's
    delta: a family whose members are at pure 2 and at rho 1/200 is worst at pure 2 for
    delta 1e-9, but "epsilon 2 (pure)" would claim delta 0, which the rho member never gives
    (nor does the rho member's figure hold at every delta). The loss is then stated as
    (epsilon*, delta) with epsilon* = the worst figure at that delta: every alternative is
    (epsilon*, delta)-DP (its epsilon at delta is at most epsilon*), so the pair is valid;
    at a smaller delta it claims nothing (∞), at a larger one epsilon* is still an upper
    bound (an alternative's epsilon only falls as delta grows). Objectives in a cap's own
    unit (`budget.objective`: rho, or pure epsilon) measure the worst exactly in that unit.
    """
    if (not isinstance(objective, AtDelta) or all(t.is_pure for t in totals)
            or all(t.dominates(worst) for t in totals)):
        return worst
    # stated at the allowance's share of the delta, so that the statement is an approximate part
    # the dataset's allowance holds: every total is (its figure there, that delta)-DP
    share = objective.allowance * Fraction(objective.delta)
    epsilon = max((t.epsilon(share) for t in totals), key=float_up)
    if math.isinf(epsilon):
        return worst
    return Spend(approx_epsilon=Fraction(epsilon), approx_delta=share)


def choose(base: Spend, choices: Sequence[tuple[Option, ...]], objective: Objective | None = None) -> Spend:
    """The composition base + one alternative per release that minimises `objective`.

    Releases whose guarantees do not dominate one another (a pure epsilon on part of
    what they read and a rho on all of it, say) leave a choice; every choice is a valid
    bound (docs/explanation/model.md#the-cost-of-one-release-on-a-subset), and the smallest is also monotone in the subset (Tan Prop 3.2),
    since a smaller subset only adds alternatives. Identical releases are grouped, and
    every split of each group between its alternatives is tried, up to CHOICE_LIMIT
    combinations; past that each release takes its first-ranked alternative.
    An option that is a `Worst` (a family) is not chosen among but suffered: each
    combination is charged its worst alternative (`_worst_total`).
    The result is the composed total of the chosen combination (for a Worst, at the
    alternative the adversary picks): its figure under `objective` is the loss.

    Valid for releases that may be adaptive: the alternatives a release offers here are of one
    side (`charge_options`, fixed by the release: its pure and rho guarantees, or one (epsilon,
    delta) guarantee), and each fixed-order statement of spend.py is bounded by the per-release
    minimum of pure and rho alternatives, so the choice after the history spends no delta.
    """
    if base.unbounded:
        return UNBOUNDED
    if not choices:
        return base
    objective = objective or at_delta(DEFAULT_DELTA)
    groups: dict[tuple[Option, ...], int] = {}
    singles: list[tuple[Option, ...]] = []
    for options in choices:
        if any(isinstance(o, Worst) for o in options):
            singles.append(options)
        else:
            groups[options] = groups.get(options, 0) + 1
    splits_per_group = [list(_splits(options, count)) for options, count in groups.items()]
    splits_per_group += [list(options) for options in singles]
    combinations_count = math.prod(len(splits) for splits in splits_per_group)
    if combinations_count > CHOICE_LIMIT:
        firsts = [options[0].times(count) for options, count in groups.items()] + [o[0] for o in singles]
        return _worst_total(base, firsts, objective)[0]
    best: Spend | None = None
    best_key = None
    for combination in product(*splits_per_group):
        total, key = _worst_total(base, combination, objective)
        if best is None or key < best_key:
            best, best_key = total, key
    return best


def _splits(options: tuple[Spend, ...], count: int):
    """Every way `count` identical releases can be charged among `options`, composed."""
    if len(options) == 1:
        yield options[0].times(count)
        return
    first, rest = options[0], options[1:]
    for k in range(count, -1, -1):
        for remainder in _splits(rest, count - k):
            yield first.times(k) + remainder


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


def compose_units(base: Spend, units: Iterable[tuple[Spend, ...]], objective: Objective | None = None) -> Spend:
    """base composed with one alternative of each unit (a release or a family): ∞ when a
    unit has none, the only one when it has one, the best choice (`choose`) otherwise."""
    fixed = [base]
    choices = []
    for options in units:
        if not options:
            return UNBOUNDED
        if len(options) == 1 and isinstance(options[0], Spend):
            fixed.append(options[0])
        else:
            choices.append(options)
    return choose(compose(fixed), choices, objective)


# --------------------------------------------------------------------------
# The same rules over arrays
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class SubsetCost:
    """The loss on one subset and the releases that contribute to it."""

    subset: tuple[str, ...]
    spend: Spend
    releases: tuple[str, ...]  # ids of releases (or family members) charging a non-zero cost


@dataclass(frozen=True)
class RiskTable:
    """Tan's Table 1: the cost of each release on each single variable, with the
    whole-dataset column (U = V) and the composed total row.

    `cells[i, j]` and `dataset_wide[i]` index into `values`.
    """

    dataset: str
    variables: tuple[str, ...]
    releases: tuple[Release, ...]
    values: tuple[Spend, ...]
    cells: np.ndarray
    dataset_wide: np.ndarray
    total: tuple[Spend, ...]
    total_dataset_wide: Spend
    allowance: Fraction = ALLOWANCE  # the dataset's (Dataset.allowance): how its figures are stated

    def cell(self, row: int, column: int) -> Spend:
        return self.values[self.cells[row, column]]

    def row_dataset_wide(self, row: int) -> Spend:
        return self.values[self.dataset_wide[row]]


class LedgerIndex:
    """Reads and guarantees of a set of releases as arrays, for fast exact queries.

    Releases are split three ways: *simple* standalone releases (`one_charge`: on each side
    their guarantees are ordered by dominance, so the first-ranked covering one of the side
    charged is always the one to charge) are summed over arrays; family members go through `family_cost`; the rare
    standalone releases with incomparable guarantees go through `choose`, exactly as
    in `ledger_cost`.
    """

    # the dataset's approximate allowance (Dataset.allowance): every figure of the index is stated
    # with it; the builders of a dataset's index set it (`for_dataset`). Until then the default,
    # and an objective keeps its own (a cap's, budget.objective)
    allowance: Fraction = ALLOWANCE
    _stated_allowance = False

    def for_dataset(self, allowance: Fraction) -> "LedgerIndex":
        """This index, its figures stated with its dataset's `allowance`."""
        self.allowance, self._stated_allowance = allowance, True
        return self

    def __init__(self, variables: Sequence[str], releases: Sequence[Release], families: Iterable[Family] = ()):
        self.variables = tuple(variables)
        self.column = {name: j for j, name in enumerate(self.variables)}
        self.releases = tuple(releases)
        self.families = {family.id: family for family in families}
        n_rel, n_var = len(self.releases), len(self.variables)

        # one guarantee_spend per distinct guarantee value, found by its exact parts as integers
        # (hashing Fractions costs a modular inverse each)
        key_of: dict[tuple, int] = {}
        spend_of: list[Spend] = []
        g_release: list[int] = []
        g_keys: list[int] = []
        g_rows: list[int] = []
        g_cols: list[int] = []
        read_rows: list[int] = []
        read_cols: list[int] = []
        self.members: dict[str, list[int]] = {}
        self.ambiguous: list[int] = []
        column = self.column
        for i, release in enumerate(self.releases):
            for name in release.reads:
                read_rows.append(i)
                read_cols.append(column[name])
            if release.family is not None and release.family in self.families:
                self.members.setdefault(release.family, []).append(i)
            values = []
            for guarantee in release.guarantees:
                key = (guarantee.notion, _exact_key(guarantee.epsilon), _exact_key(guarantee.delta),
                       _exact_key(guarantee.rho), guarantee.relation, guarantee.charged_in)
                found = key_of.get(key)
                if found is None:
                    found = key_of[key] = len(spend_of)
                    spend_of.append(guarantee_spend(guarantee))
                k = len(g_release)
                g_release.append(i)
                g_keys.append(found)
                values.append(spend_of[found])
                for name in guarantee.protects:
                    if name in column:
                        g_rows.append(k)
                        g_cols.append(column[name])
            if len(values) > 1 and not one_charge(values):
                self.ambiguous.append(i)
        self.reads = np.zeros((n_rel, n_var), dtype=bool)
        self.reads[read_rows, read_cols] = True
        self.g_release = np.asarray(g_release, dtype=np.int64)
        self.g_protects = np.zeros((len(g_release), n_var), dtype=bool)
        self.g_protects[g_rows, g_cols] = True

        # Distinct guarantee values in rank order, so the smallest id is the first-ranked
        # (and, among comparable values, the dominant) one; then the ∞ and zero sentinels.
        distinct = sorted(set(spend_of), key=Spend.rank)
        value_id = {spend: k for k, spend in enumerate(distinct)}
        self.NONE = len(distinct)  # no covering guarantee: unbounded
        self.ZERO_ID = len(distinct) + 1
        self.values: tuple[Spend, ...] = tuple(distinct) + (UNBOUNDED, ZERO)
        self.value_is_zero = np.asarray([v.is_zero for v in self.values], dtype=bool)
        remap = np.asarray([value_id[spend] for spend in spend_of], dtype=np.int64)  # key -> value id
        self.g_value = remap[np.asarray(g_keys, dtype=np.int64)] if g_keys else np.zeros(0, dtype=np.int64)
        self.release_ids = np.asarray([r.id for r in self.releases], dtype=object)

        self.finish_arrays(self.ambiguous)

    def finish_arrays(self, ambiguous: Sequence[int]) -> None:
        """The arrays derived from the guarantee arrays and the families, however the index was
        filled (from releases here, from the stored accounting rows in `columns.index_for`):
        where each release's guarantees start, which releases are summed over arrays, which
        leave a choice (`ambiguous`: releases with several guarantees), and the families whose
        members' guarantees are not all comparable (mixed notions, say), charged as the worst
        member as a whole through the exact path (docs/explanation/model.md#families), never a componentwise max."""
        n_rel = len(self.releases)
        self.has_guarantee = np.zeros(n_rel, dtype=bool)
        self.has_guarantee[self.g_release] = True
        if len(self.g_release):
            self.g_start = np.flatnonzero(np.r_[True, self.g_release[1:] != self.g_release[:-1]])
        else:
            self.g_start = np.zeros(0, dtype=np.int64)
        self.simple = np.ones(n_rel, dtype=bool)  # summed over arrays
        for rows in self.members.values():
            self.simple[rows] = False
        self.ambiguous = [i for i in ambiguous if self.simple[i]]
        self.simple[self.ambiguous] = False
        self._components = _ExactComponents(self.values, n_rel)
        self.mixed_families = set()
        counts, first = self._guarantee_spans()
        for fid, rows_ in self.members.items():
            member_values = {int(v) for r in rows_ for v in self.g_value[first[r]:first[r] + counts[r]]}
            if len(member_values) > 1 and not _is_chain([self.values[v] for v in member_values]):
                self.mixed_families.add(fid)

    def exact_total(self, ids: np.ndarray) -> Spend:
        """The exact composition of the values with these ids (Tan Prop 3.4)."""
        return self._components.total(ids)

    # -- the cost rule over arrays ------------------------------------------

    def _best(self, candidates: np.ndarray) -> np.ndarray:
        """Per release, the smallest candidate id over its guarantees (NONE if it has none): its
        first-ranked covering guarantee, of its pure and rho ones where one covers, else of its
        (epsilon, delta) ones (`charge_options`: the side fixed by the release)."""
        shape = (len(self.releases),) + candidates.shape[1:]
        best = np.full(shape, self.NONE, dtype=np.int64)
        if len(self.g_release):
            best[self.has_guarantee] = self._first_of_side(candidates, self.g_is_approx, self.g_start)
        return best

    def _first_of_side(self, candidates: np.ndarray, approx: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Per run of guarantees (one release's, from each of `starts`), the smallest candidate id
        of its pure and rho guarantees (`approx` False), or, where none is a candidate (NONE), of
        its (epsilon, delta) ones: the side `charge_options` fixes."""
        if not approx.any():
            return np.minimum.reduceat(candidates, starts, axis=0)
        mask = approx.reshape((-1,) + (1,) * (candidates.ndim - 1))
        exact = np.minimum.reduceat(np.where(mask, self.NONE, candidates), starts, axis=0)
        either = np.minimum.reduceat(np.where(mask, candidates, self.NONE), starts, axis=0)
        return np.where(exact != self.NONE, exact, either)

    def cost_ids(self, columns: Sequence[int]) -> np.ndarray:
        """Per release, the id of c_r(U) for U = the given columns. The last few are kept (a
        table's headline asks for the protected subset's three times: its loss, its figures,
        its releases), read-only."""
        key = tuple(int(j) for j in columns)
        memo = self.__dict__.setdefault("_ids_memo", {})
        found = memo.get(key)
        if found is None:
            found = self._cost_ids(np.asarray(key, dtype=np.int64))
            found.flags.writeable = False
            if len(memo) >= 4:
                memo.pop(next(iter(memo)))
            memo[key] = found
        return found

    def remember_cost_ids(self, columns: Sequence[int], ids: np.ndarray) -> None:
        """`cost_ids(columns)` computed elsewhere (the whole-dataset column of `large_table`)."""
        ids = np.array(ids, dtype=np.int64)
        ids.flags.writeable = False
        self.__dict__.setdefault("_ids_memo", {})[tuple(int(j) for j in columns)] = ids

    def _cost_ids(self, columns: np.ndarray) -> np.ndarray:
        n_rel = len(self.releases)
        if self.g_protects is self.reads and len(self.g_release) == n_rel and self.has_guarantee.all():
            # one guarantee per release, protecting exactly what it reads (columns.index_for shares
            # the matrix then: nearly every ledger): none leaves a variable it reads uncovered, so
            # c_r(U) is that guarantee's value where r reads U, else zero (Tan Prop 3.3), as below
            touched = np.empty(n_rel, dtype=bool)
            for start in range(0, n_rel, _CHUNK):
                touched[start:start + _CHUNK] = self.reads[start:start + _CHUNK][:, columns].any(axis=1)
            return np.where(touched, self.g_value, self.ZERO_ID)
        if n_rel > _CHUNK and len(self.g_release):  # a chunk of releases at a time: no n x |U| copies
            out = np.empty(n_rel, dtype=np.int64)
            bounds = np.searchsorted(self.g_release, np.arange(0, n_rel + _CHUNK, _CHUNK).clip(max=n_rel))
            for k, start in enumerate(range(0, n_rel, _CHUNK)):
                stop = min(start + _CHUNK, n_rel)
                part = rows_of(self, start, stop, bounds[k], bounds[k + 1])
                out[start:stop] = part._cost_ids(columns)
            return out
        reads_u = self.reads[:, columns]
        touched = reads_u.any(axis=1)
        if len(self.g_release):
            uncovered = (reads_u[self.g_release] & ~self.g_protects[:, columns]).any(axis=1)
            candidates = np.where(uncovered, self.NONE, self.g_value)
        else:
            candidates = np.zeros(0, dtype=np.int64)
        return np.where(touched, self._best(candidates), self.ZERO_ID)

    def exactly_read(self) -> np.ndarray:
        """The rows, in order, of the releases that read a variable none of their guarantees
        protects (`Release.exact_variables` not empty: released without noise, docs/explanation/model.md#a-release), a
        chunk of releases at a time (no second n x variables matrix)."""
        n_rel = len(self.releases)
        found = [np.zeros(0, dtype=np.int64)]
        bounds = np.searchsorted(self.g_release, np.arange(0, n_rel + _CHUNK, _CHUNK).clip(max=n_rel))
        for k, start in enumerate(range(0, n_rel, _CHUNK)):
            left = self.reads[start:min(start + _CHUNK, n_rel)].copy()
            owners = self.g_release[bounds[k]:bounds[k + 1]] - start
            if len(owners):  # each release's guarantees are adjacent: their union by one reduceat
                first = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
                covered = np.logical_or.reduceat(self.g_protects[bounds[k]:bounds[k + 1]], first, axis=0)
                left[owners[first]] &= ~covered
            found.append(np.flatnonzero(left.any(axis=1)) + start)
        return np.concatenate(found)

    def stated(self, objective: Objective | None) -> Objective | None:
        """`objective` with this index's allowance: an epsilon at a delta is always the dataset's
        figure there, whichever view asked (`at_delta`)."""
        if self._stated_allowance and isinstance(objective, AtDelta) and objective.allowance != self.allowance:
            return at_delta(objective.delta, self.allowance)
        return objective

    def _others(self, subset: frozenset[str], base: Spend, objective: Objective | None) -> Spend:
        """base composed with the families and the releases with a choice, on `subset`."""
        objective = self.stated(objective)
        units = [family_options(self.families[fid], [self.releases[i] for i in rows], subset)
                 for fid, rows in self.members.items()]
        units += [candidates(self.releases[i], subset) for i in self.ambiguous]
        return compose_units(base, units, objective)

    def subset_spend(self, subset: Iterable[str], objective: Objective | None = None) -> Spend:
        """`subset_cost(subset).spend`, without listing the releases charged."""
        subset = frozenset(subset)
        ids = self.cost_ids([self.column[name] for name in sorted(subset)])
        return self._others(subset, self._components.total(ids[self.simple]), objective)

    def subset_cost(self, subset: Iterable[str], objective: Objective | None = None) -> SubsetCost:
        subset = frozenset(subset)
        ids = self.cost_ids([self.column[name] for name in sorted(subset)])
        spend = self._others(subset, self._components.total(ids[self.simple]), objective)
        charged = ~self.value_is_zero[ids]
        return SubsetCost(
            subset=tuple(sorted(subset, key=self.column.__getitem__)),
            spend=spend,
            releases=tuple(self.release_ids[charged]),
        )

    def table(self, dataset: str, objective: Objective | None = None) -> RiskTable:
        """The release-by-variable matrix (Tan, Table 1) with totals and the whole-dataset column."""
        n_var = len(self.variables)
        cells = self.single_cells()
        dataset_wide = self.cost_ids(range(n_var))
        rows, cols = self.read_entries()  # every other cell is 0 (not read), which adds nothing
        keep = self.simple[rows]
        totals = self._components.entry_totals(cells[rows[keep], cols[keep]], cols[keep], n_var)
        if self.members or self.ambiguous:
            totals = [self._others(frozenset({name}), total, objective) for total, name in zip(totals, self.variables)]
        return self._risk_table(dataset, cells, dataset_wide, totals, objective)

    def _risk_table(self, dataset: str, cells: np.ndarray, dataset_wide: np.ndarray, totals: Iterable[Spend],
                    objective: Objective | None) -> RiskTable:
        """The RiskTable of these cells, whole-dataset column and total row, its whole-dataset
        total composed here (`_others`: families and releases with a choice over every variable)."""
        total_wide = self._others(frozenset(self.variables), self._components.total(dataset_wide[self.simple]),
                                  objective)
        return RiskTable(
            dataset=dataset,
            variables=self.variables,
            releases=self.releases,
            values=self.values,
            cells=cells,
            dataset_wide=dataset_wide,
            total=tuple(totals),
            total_dataset_wide=total_wide,
            allowance=self.allowance,
        )

    def pairs(self, objective: Objective | None = None) -> dict[tuple[str, str], Spend]:
        """The loss on every pair of variables."""
        return {
            (a, b): self.subset_cost((a, b), objective).spend for a, b in combinations(self.variables, 2)
        }

    # -- every pair, and running totals, over arrays (reports) -------

    def pair_matrix(self, objective: Objective | None = None) -> SpendGrid:
        """The loss on every pair {a, b} (and on {a} on the diagonal), as a symmetric grid.

        Equal to `pairs()` (and to `ledger_cost` on each pair), without a subset query
        per pair. For a simple release with at most one guarantee, value v, protected
        set P: c_r({a, b}) is v when r reads a or b and neither of them is in
        reads - P, ∞ when one of them is, 0 otherwise (docs/explanation/model.md#the-cost-of-one-release-on-a-subset). So the finite
        part is, per distinct value v, v times the number of its releases reading a or
        b: n_v(a) + n_v(b) - n_v(a and b), with n_v(a and b) = (R_v^T R_v)[a, b] for
        the 0/1 reads matrix R_v -- a matrix product, exact in float32 below 2^24
        releases. Releases with several guarantees are evaluated pair by pair over
        arrays. A family whose members have at most one guarantee each costs the
        componentwise largest member cost (docs/explanation/model.md#families), also over arrays, except on
        pairs holding a key variable of its partition; those, other families and
        releases with a choice go through the exact path (`family_options`,
        `candidates`, `choose`) on the pairs they read, as `_others` does.
        """
        objective = self.stated(objective)
        memo = self.__dict__.setdefault("_pair_grids", {})
        if objective not in memo:  # (the last one kept: a table's headline asks twice)
            memo.clear()
            memo[objective] = self._pair_matrix(objective)
        return memo[objective]

    def _pair_matrix(self, objective: Objective | None) -> SpendGrid:
        n_var = len(self.variables)
        grid = _GridBuilder(self._components, (n_var, n_var))
        n_guarantees, first = self._guarantee_spans()

        single = np.flatnonzero(self.simple & (n_guarantees <= 1))
        exact = np.zeros(n_var, dtype=bool)
        for start in range(0, len(single), _CHUNK):  # read without protection: ∞ (docs/explanation/model.md#the-cost-of-one-release-on-a-subset)
            part = single[start:start + _CHUNK]
            exact |= (self.reads[part] & ~self._single_protects(part, first)).any(axis=0)
        grid.unbounded |= exact[:, None] | exact[None, :]
        guaranteed = first[single] >= 0
        rows = single[guaranteed]
        values = self.g_value[first[rows]]
        groups = np.full(len(self.releases), -1, dtype=np.int64)
        groups[rows] = values
        counts = self.pair_counts(groups, len(self.values))
        for value in np.unique(values):
            grid.add_count(int(value), counts[value])

        for r in np.flatnonzero(self.simple & (n_guarantees > 1)):
            grid.add_ids(self._pair_ids(r, first, n_guarantees))

        # families: the largest member cost, over arrays, where no key variable is in the pair
        exact_units: list[tuple[np.ndarray, str | None, int | None]] = []  # (pairs it must see, family, release)
        for fid, rows_ in self.members.items():
            family = self.families[fid]
            if fid in self.mixed_families or any(n_guarantees[r] > 1 for r in rows_):
                read = self.reads[rows_].any(axis=0)
                exact_units.append((read[:, None] | read[None, :], fid, None))
                continue
            largest = _GridBuilder(self._components, (n_var, n_var))
            for r in rows_:
                largest.max_ids(self._pair_ids(r, first, n_guarantees))
            keyed = np.zeros(n_var, dtype=bool)
            if family.partition is not None:
                keyed[[self.column[name] for name in family.partition if name in self.column]] = True
            with_key = keyed[:, None] | keyed[None, :]
            grid.add_grid(largest, where=~with_key)
            if with_key.any():
                exact_units.append((with_key, fid, None))
        for i in self.ambiguous:
            read = self.reads[i]
            exact_units.append((read[:, None] | read[None, :], None, i))
        if exact_units:
            needed = np.triu(np.logical_or.reduce([pairs_ for pairs_, _, _ in exact_units]))
            memo: dict = {}
            for i, j in zip(*np.nonzero(needed)):
                subset = frozenset({self.variables[i], self.variables[j]})
                families = {fid: self.members[fid] for pairs_, fid, _ in exact_units if fid and pairs_[i, j]}
                releases = [r for pairs_, fid, r in exact_units if r is not None and pairs_[i, j]]
                spend = self._units_cost(subset, grid.spend(i, j), families, releases, objective, memo)
                grid.set(i, j, spend)
                grid.set(j, i, spend)
        return grid.done()

    def pair_counts(self, groups: np.ndarray, n_groups: int) -> np.ndarray:
        """Per group g and pair {a, b}: how many releases r with groups[r] = g (-1: none) read a
        or b, n_g(a) + n_g(b) - n_g(a and b) (n_g(a) on the diagonal), as int64 (n_groups, n, n).

        The counts of both, n_g(a and b), are counted from the pairs of variables each release
        reads (a release reads a few variables: a handful of pairs, not n^2 cells), grouped
        by one bincount; a release reading more than PAIR_SPARSE_LIMIT variables enters by a
        0/1 matrix product instead (exact in float32 below 2^24 releases per chunk)."""
        n = len(self.variables)
        owner, key, wide = self._read_pairs()
        both = np.zeros(n_groups * n * n, dtype=np.int64)
        step = 4 * _CHUNK
        for start in range(0, len(owner), step):
            g = groups[owner[start:start + step]]
            keep = g >= 0
            both += np.bincount(g[keep] * (n * n) + key[start:start + step][keep], minlength=n_groups * n * n)
        both = both.reshape(n_groups, n, n)  # a <= b only (a == b: the release reads a)
        diagonal = np.einsum("gii->gi", both).copy()
        both = both + both.transpose(0, 2, 1)
        both[:, np.arange(n), np.arange(n)] = diagonal
        wide_groups = groups[wide]
        for g in np.unique(wide_groups[wide_groups >= 0]):
            rows = wide[wide_groups == g]
            for start in range(0, len(rows), _CHUNK):
                reads = self.reads[rows[start:start + _CHUNK]].astype(np.float32)
                both[g] += np.rint(reads.T @ reads).astype(np.int64)
        alone = np.einsum("gii->gi", both)
        return alone[:, :, None] + alone[:, None, :] - both

    def _read_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pairs {a, b} (a <= b) of variables read by the same release, for the releases
        reading at most PAIR_SPARSE_LIMIT variables: (release, a * n + b) as two int32 arrays;
        and the other releases. Built once per index (`pair_matrix` and the accountants'
        `pair_rdp` group the same pairs two ways)."""
        cached = self.__dict__.get("_pairs_read")
        if cached is not None:
            return cached
        n = len(self.variables)
        all_rows, all_cols = self.read_entries()
        width = np.bincount(all_rows, minlength=len(self.releases))
        narrow = width <= PAIR_SPARSE_LIMIT
        deepest = int(width[narrow].max()) if narrow.any() else 0
        if narrow.all():  # (nearly always: no copy)
            rows, cols = all_rows, all_cols
        else:
            keep = narrow[all_rows]
            rows, cols = all_rows[keep], all_cols[keep]
        # int32 throughout: a * n + b < n^2 (n variables, far below 46,341)
        wide_ints = np.int64 if n * n >= 2**31 else np.int32
        rows, cols = rows.astype(np.int32, copy=False), cols.astype(wide_ints, copy=False)
        owners, keys = [rows], [(cols * (n + 1)).astype(np.int32)]  # a == b
        for d in range(1, deepest):  # the d-th next variable of the same release
            same = np.flatnonzero(rows[d:] == rows[:-d])  # (positions: each column gathered once)
            owners.append(rows[same])
            keys.append((cols[same] * n + cols[same + d]).astype(np.int32, copy=False))
        found = self.__dict__["_pairs_read"] = (np.concatenate(owners), np.concatenate(keys), np.flatnonzero(~narrow))
        return found

    def read_entries(self) -> tuple[np.ndarray, np.ndarray]:
        """The (release, variable) pairs of `reads`, release by release and each release's
        variables in order (np.nonzero, a chunk at a time), as int32 arrays; built once."""
        cached = self.__dict__.get("_read_entries")
        if cached is None:
            rows_, cols_ = [], []
            n = max(self.reads.shape[1], 1)
            for start in range(0, len(self.releases), _CHUNK):
                # the flat positions of a chunk, split by divmod: the same entries in the same
                # (row-major) order as np.nonzero of the 2-D chunk, in about a third of its time
                rows, cols = np.divmod(np.flatnonzero(self.reads[start:start + _CHUNK]), n)
                rows_.append((rows + start).astype(np.int32))
                cols_.append(cols.astype(np.int32))
            cached = self.__dict__["_read_entries"] = (
                np.concatenate(rows_) if rows_ else np.zeros(0, dtype=np.int32),
                np.concatenate(cols_) if cols_ else np.zeros(0, dtype=np.int32))
        return cached

    def running_totals(self, order: Sequence[int], checkpoints: Sequence[int],
                       objective: Objective | None = None) -> SpendGrid:
        """The loss on each single variable of the releases order[:c], for each c in `checkpoints`.

        Row k, column j of the result is the loss on {variables[j]} of the first
        checkpoints[k] releases of `order` (indices into `releases`): the total row of
        Table 1 as it stood after them (Tan Prop 3.4), for charts of the loss over time.
        Simple releases are summed between checkpoints, then cumulated; a family of
        members with at most one guarantee each costs the running componentwise maximum
        of its members' cells (docs/explanation/model.md#families) except on its key variables, which go, with
        other families and releases with a choice, through the exact path.
        """
        objective = self.stated(objective)
        order = np.asarray(order, dtype=np.int64)
        checkpoints = np.asarray(checkpoints, dtype=np.int64)
        n_var = len(self.variables)
        grid = _GridBuilder(self._components, (len(checkpoints), n_var))
        if len(order) == 0 or len(checkpoints) == 0:
            return grid.done()
        position = np.full(len(self.releases), len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        member_rows = np.asarray(sorted({r for rows_ in self.members.values() for r in rows_}), dtype=np.int64)
        if len(self.releases) <= _CHUNK:
            cells = self.single_cells()
            ordered = cells[order].copy()
            ordered[~self.simple[order]] = self.ZERO_ID  # families and choices: below
            bounds = np.concatenate([[0], checkpoints])
            for k in range(len(checkpoints)):
                grid.add_row_ids(k, ordered[bounds[k]:max(bounds[k], bounds[k + 1])])
        else:
            # a large index: Table 1's cells a chunk of releases at a time (a million releases over 100
            # variables would be 800 MB, twice), each release added to the grid row of the checkpoint
            # it falls before (sums of integers: the same totals in any order); the members' cells kept
            segment = np.searchsorted(checkpoints, position, side="right")
            member_cells = np.zeros((len(member_rows), n_var), dtype=np.int64)
            for start in range(0, len(self.releases), _CHUNK):
                stop = min(start + _CHUNK, len(self.releases))
                part = rows_of(self, start, stop)
                chunk = part.single_cells()
                lo, hi = np.searchsorted(member_rows, [start, stop])
                member_cells[lo:hi] = chunk[member_rows[lo:hi] - start]
                chunk[~self.simple[start:stop]] = self.ZERO_ID
                where = segment[start:stop]
                for k in np.unique(where[where < len(checkpoints)]).tolist():
                    grid.add_row_ids(k, chunk[where == k])
            cells = _MemberCells(member_rows, member_cells)
        grid.accumulate_rows()

        n_guarantees, _ = self._guarantee_spans()
        exact_families: dict[str, np.ndarray] = {}  # family -> the variables it must see exactly
        for fid, rows_ in self.members.items():
            family = self.families[fid]
            if fid in self.mixed_families or any(n_guarantees[r] > 1 for r in rows_):
                exact_families[fid] = self.reads[rows_].any(axis=0)
                continue
            keyed = np.zeros(n_var, dtype=bool)
            if family.partition is not None:
                keyed[[self.column[name] for name in family.partition if name in self.column]] = True
            members = sorted((position[r], r) for r in rows_ if position[r] < len(order))
            if members:
                at = np.asarray([m for m, _ in members])
                ids = cells[[r for _, r in members]]
                count = np.searchsorted(at, checkpoints, side="left")  # members before each checkpoint
                grid.add_running_max(ids, count, where=~keyed)
            if keyed.any():
                exact_families[fid] = keyed
        if exact_families or self.ambiguous:
            memo: dict = {}
            for k, count in enumerate(checkpoints):
                families = {fid: [r for r in self.members[fid] if position[r] < count] for fid in exact_families}
                families = {fid: rows_ for fid, rows_ in families.items() if rows_}
                ambiguous = [i for i in self.ambiguous if position[i] < count]
                needed = np.zeros(n_var, dtype=bool)
                for fid in families:
                    needed |= exact_families[fid]
                for i in ambiguous:
                    needed |= self.reads[i]
                for j in np.flatnonzero(needed):
                    touching = {fid: rows_ for fid, rows_ in families.items() if exact_families[fid][j]}
                    releases = [i for i in ambiguous if self.reads[i, j]]
                    grid.set(k, j, self._units_cost(frozenset({self.variables[j]}), grid.spend(k, j), touching,
                                                    releases, objective, memo))
        return grid.done()

    def table_by_arrays(self, dataset: str, objective: Objective | None = None) -> RiskTable:
        """The same RiskTable as `table()`, with the total row from `running_totals` (families
        over arrays): what reports use on large ledgers with families."""
        n_rel, n_var = len(self.releases), len(self.variables)
        dataset_wide = self.cost_ids(range(n_var))
        totals = self.running_totals(range(n_rel), [n_rel], objective)
        return self._risk_table(dataset, self.single_cells(), dataset_wide,
                                (totals.spend(0, j) for j in range(n_var)), objective)

    def _guarantee_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """Per release: how many guarantees it has, and the index of its first (-1: none)."""
        n_rel = len(self.releases)
        counts = np.bincount(self.g_release, minlength=n_rel) if len(self.g_release) else np.zeros(n_rel, int)
        first = np.full(n_rel, -1, dtype=np.int64)
        first[self.has_guarantee] = self.g_start
        return counts, first

    def _single_protects(self, rows: np.ndarray, first: np.ndarray) -> np.ndarray:
        protects = np.zeros((len(rows), len(self.variables)), dtype=bool)
        guaranteed = first[rows] >= 0
        protects[guaranteed] = self.g_protects[first[rows][guaranteed]]
        return protects

    def single_cells(self) -> np.ndarray:
        """Per release and variable, the id of c_r({v}) (the cells of Table 1): for a single
        variable v read by r, U ∩ reads(r) = {v}, covered by g iff v ∈ P_g, so the cell is
        the smallest value id among the guarantees protecting v (NONE when none does), 0
        (ZERO_ID) where r does not read v. A release with one guarantee (nearly all) takes
        its value where it protects, without a per-guarantee candidates matrix."""
        n_rel, n_var = len(self.releases), len(self.variables)
        if not len(self.g_release):
            return np.where(self.reads, self.NONE, self.ZERO_ID).astype(np.int64)
        counts, first = self._guarantee_spans()
        several = np.flatnonzero(counts > 1)
        if not len(several):
            # every release has at most one guarantee: the cells are sparse (what each release
            # reads), so fill 0 and set the read entries, without n x |V| temporaries
            best = np.full((n_rel, n_var), self.ZERO_ID, dtype=np.int64)
            rows, cols = self.read_entries()
            g = first[rows]
            has = g >= 0
            value = np.full(len(rows), self.NONE, dtype=np.int64)
            value[has] = np.where(self.g_protects[g[has], cols[has]], self.g_value[g[has]], self.NONE)
            best[rows, cols] = value
            return best
        best = np.full((n_rel, n_var), self.NONE, dtype=np.int64)
        one = np.flatnonzero(counts == 1)
        if len(one):
            g = first[one]
            best[one] = np.where(self.g_protects[g], self.g_value[g][:, None], self.NONE)
        if len(several):
            g = np.concatenate([np.arange(first[r], first[r] + counts[r]) for r in several])
            candidates_ = np.where(self.g_protects[g], self.g_value[g][:, None], self.NONE)
            starts = np.concatenate([[0], np.cumsum(counts[several])[:-1]])
            best[several] = self._first_of_side(candidates_, self.g_is_approx[g], starts)
        best[~self.reads] = self.ZERO_ID
        return best

    @property
    def g_is_approx(self) -> np.ndarray:
        """Per guarantee, whether its value is an (epsilon, delta) charge (`is_approx`), found once."""
        found = self.__dict__.get("_g_is_approx")
        if found is None:
            by_value = np.asarray([is_approx(v) for v in self.values], dtype=bool)
            found = self.__dict__["_g_is_approx"] = by_value[self.g_value]
        return found

    def charged_id(self, r: int, columns: Sequence[int], spans: tuple[np.ndarray, np.ndarray] | None = None) -> int:
        """The id of c_r(U) for U = `columns` (which r reads) of one release, by `_best`'s rule:
        the first-ranked guarantee covering them, of its side (NONE when none covers). `spans`:
        `_guarantee_spans()`, found once by a caller asking for many releases."""
        counts, first = spans if spans is not None else self._guarantee_spans()
        rows_ = np.arange(first[r], first[r] + counts[r]) if first[r] >= 0 else np.zeros(0, dtype=np.int64)
        covering = rows_[self.g_protects[rows_][:, list(columns)].all(axis=1)]
        if not len(covering):
            return self.NONE
        return int(self._first_of_side(self.g_value[covering], self.g_is_approx[covering], np.zeros(1, np.int64))[0])

    def _pair_ids(self, r: int, first: np.ndarray, n_guarantees: np.ndarray) -> np.ndarray:
        """The id of c_r({a, b}) for every pair: the first-ranked guarantee covering what r
        reads of the pair (the smallest id, of its side: `_best`), ∞ when none does, 0 when r
        reads neither."""
        read = self.reads[r]
        if first[r] < 0:  # no guarantee (a family's member): ∞ wherever it reads
            return np.where(read[:, None] | read[None, :], self.NONE, self.ZERO_ID)
        rows_ = np.arange(first[r], first[r] + n_guarantees[r])
        covered = ~read[None, :] | self.g_protects[rows_]  # guarantee x variable
        candidates = np.where(covered[:, :, None] & covered[:, None, :], self.g_value[rows_][:, None, None], self.NONE)
        best = self._first_of_side(candidates, self.g_is_approx[rows_], np.zeros(1, np.int64))[0]
        return np.where(read[:, None] | read[None, :], best, self.ZERO_ID)

    def _units_cost(self, subset: frozenset[str], base: Spend, families: dict[str, list[int]],
                    releases: Sequence[int], objective: Objective | None, memo: dict | None = None) -> Spend:
        """base composed with the given families and releases with a choice, on `subset`
        (`_others` restricted to the units that read the subset: the others cost 0).

        `memo` keeps each unit's options by what they depend on: a family's on the subset's
        part in its members' reads and its partition (and on its members), a release's on
        the subset's part in its reads."""
        memo = {} if memo is None else memo
        units = []
        for fid, rows_ in families.items():
            family = self.families[fid]
            relevant = self.family_reads(fid) | (family.partition or frozenset())
            key = (fid, len(rows_), rows_[-1], subset & relevant)
            if key not in memo:
                memo[key] = self._family_options(family, rows_, subset)
            units.append(memo[key])
        for i in releases:
            key = (i, subset & self.releases[i].reads)
            if key not in memo:
                memo[key] = candidates(self.releases[i], subset)
            units.append(memo[key])
        return compose_units(base, units, objective)

    def unprotected_move(self, subset: Iterable[str]) -> tuple[Family, Release] | None:
        """(family, member) of the first family whose move is unbounded on `subset`
        (`unprotected_move`, docs/explanation/model.md#families), None when no family's is."""
        subset = frozenset(subset)
        for fid, rows_ in self.members.items():
            member = unprotected_move(self.families[fid], [self.releases[i] for i in rows_], subset)
            if member is not None:
                return self.families[fid], member
        return None

    def reads_uncovered(self, subset: Iterable[str]) -> np.ndarray:
        """The rows of the releases that read part of `subset` with no one guarantee covering all
        of it (c_r(U) = ∞, not protected: docs/explanation/model.md#the-cost-of-one-release-on-a-subset)."""
        return np.flatnonzero(self.cost_ids([self.column[name] for name in sorted(frozenset(subset))]) == self.NONE)

    def reads_at(self, row: int) -> frozenset[str]:
        """What the release of `row` reads (from the arrays: a large index holds few releases whole)."""
        return frozenset(self.variables[j] for j in np.flatnonzero(self.reads[row]))

    def exact_at(self, row: int) -> frozenset[str]:
        """What the release of `row` reads that none of its guarantees protects
        (`Release.exact_variables`, from the arrays; its guarantees are adjacent in g_release)."""
        start, stop = np.searchsorted(self.g_release, [row, row + 1])
        covered = self.g_protects[start:stop].any(axis=0) if stop > start else np.zeros(len(self.variables), bool)
        return frozenset(self.variables[j] for j in np.flatnonzero(self.reads[row] & ~covered))

    def family_reads(self, fid: str) -> frozenset[str]:
        cache = self.__dict__.setdefault("_family_reads", {})
        if fid not in cache:
            cache[fid] = frozenset().union(*(self.releases[i].reads for i in self.members[fid]))
        return cache[fid]

    def _family_options(self, family: Family, rows_: Sequence[int], subset: frozenset[str]) -> tuple[Spend, ...]:
        """family_options, with its ∞ case found first: with a key variable in the subset,
        a member that reads the subset and holds no add/remove guarantee covering all it
        reads costs ∞ when a record moves between parts (docs/explanation/model.md#families), and then so
        does the family, whatever the other members cost."""
        members = [self.releases[i] for i in rows_]
        if family.partition is not None and family.partition & subset:
            for member in members:  # a move takes the whole record: add/remove on all it reads
                if subset & member.reads and not any(g.relation == Relation.ADD_REMOVE and member.reads <= g.protects
                                                     for g in member.guarantees):
                    return ()
        return family_options(family, members, subset)


@dataclass(frozen=True)
class SpendGrid:
    """A 2-d array of losses, kept exact: per notion component, integer numerators over
    one denominator (as in `_ExactComponents`), a mask of unbounded cells, and the cells
    computed on the exact path (families, releases with a choice) as Spend values."""

    shape: tuple[int, int]
    unbounded: np.ndarray  # bool, shape
    components: tuple[tuple[str, int, np.ndarray], ...]  # (Spend field, denominator, numerators)
    exceptions: dict[tuple[int, int], Spend]

    def spend(self, i: int, j: int) -> Spend:
        found = self.exceptions.get((i, j))
        if found is not None:
            return found
        if self.unbounded[i, j]:
            return UNBOUNDED
        return Spend(**{field: Fraction(int(numerators[i, j]), denominator)
                        for field, denominator, numerators in self.components})

    def floats(self) -> dict[str, np.ndarray]:
        """Each Spend field as float64 arrays (for charts; printed figures use `spend`)."""
        result = {field: np.zeros(self.shape) for field in _ExactComponents.FIELDS}
        for field, denominator, numerators in self.components:
            if numerators.dtype == object or denominator > 2**60:  # past floats' range: each exactly, rounded up
                result[field] = np.vectorize(lambda n, d=denominator: float_up(Fraction(int(n), d)),
                                             otypes=[np.float64])(numerators)
            else:
                result[field] = numerators.astype(np.float64) / denominator
        for (i, j), spend in self.exceptions.items():
            for field in _ExactComponents.FIELDS:
                result[field][i, j] = 0.0 if spend.unbounded else float_up(getattr(spend, field))
        return result


class _GridBuilder:
    """Accumulates value ids into a SpendGrid, exactly (int64, or Python ints past 2^62)."""

    def __init__(self, components: _ExactComponents, shape: tuple[int, int]):
        self.source = components
        self.shape = shape
        self.unbounded = np.zeros(shape, dtype=bool)
        self.sums = {field: np.zeros(shape, dtype=numerators.dtype) for field, _, numerators in components.components}
        self.exceptions: dict[tuple[int, int], Spend] = {}

    def add_count(self, value: int, count: np.ndarray) -> None:
        """`count` releases of value id `value` in each cell."""
        if value == self.source.unbounded_id:
            self.unbounded |= count > 0
            return
        for field, _, numerators in self.source.components:
            if numerators[value]:
                self.sums[field] = self.sums[field] + numerators[value] * count.astype(numerators.dtype)

    def add_ids(self, ids: np.ndarray) -> None:
        """One release: its value id in each cell."""
        self.unbounded |= ids == self.source.unbounded_id
        for field, _, numerators in self.source.components:
            self.sums[field] = self.sums[field] + numerators[ids]

    def max_ids(self, ids: np.ndarray) -> None:
        """The componentwise maximum with one release's value ids (a family: docs/explanation/model.md#families)."""
        self.unbounded |= ids == self.source.unbounded_id
        for field, _, numerators in self.source.components:
            self.sums[field] = np.maximum(self.sums[field], numerators[ids])

    def add_grid(self, other: _GridBuilder, where: np.ndarray) -> None:
        """Compose another grid of losses into this one, in the cells `where` is true."""
        self.unbounded |= other.unbounded & where
        for field in self.sums:
            self.sums[field] = self.sums[field] + np.where(where, other.sums[field], 0)

    def add_running_max(self, ids: np.ndarray, counts: np.ndarray, where: np.ndarray) -> None:
        """Row k gets, in the columns `where` is true, the componentwise maximum of the
        first counts[k] rows of `ids` (a family's members in recording order)."""
        rows = np.flatnonzero(counts > 0)
        last = counts[rows] - 1
        unbounded = np.logical_or.accumulate(ids == self.source.unbounded_id, axis=0)
        self.unbounded[rows] |= unbounded[last] & where
        for field, _, numerators in self.source.components:
            running = np.maximum.accumulate(numerators[ids], axis=0)
            self.sums[field][rows] += np.where(where, running[last], 0)

    def add_row_ids(self, row: int, ids: np.ndarray) -> None:
        """Releases (rows of `ids`, one column per grid column) added to one grid row."""
        self.unbounded[row] |= (ids == self.source.unbounded_id).any(axis=0)
        for field, _, numerators in self.source.components:
            self.sums[field][row] += numerators[ids].sum(axis=0)

    def accumulate_rows(self) -> None:
        self.unbounded = np.logical_or.accumulate(self.unbounded, axis=0)
        for field in self.sums:
            self.sums[field] = np.cumsum(self.sums[field], axis=0)

    def spend(self, i: int, j: int) -> Spend:
        found = self.exceptions.get((int(i), int(j)))
        if found is not None:
            return found
        if self.unbounded[i, j]:
            return UNBOUNDED
        return Spend(**{field: Fraction(int(self.sums[field][i, j]), denominator)
                        for field, denominator, _ in self.source.components})

    def set(self, i: int, j: int, spend: Spend) -> None:
        self.exceptions[(int(i), int(j))] = spend

    def done(self) -> SpendGrid:
        unbounded = self.unbounded.copy()
        for (i, j), spend in self.exceptions.items():
            unbounded[i, j] = spend.unbounded
        components = tuple((field, denominator, self.sums[field])
                           for field, denominator, _ in self.source.components)
        return SpendGrid(self.shape, unbounded, components, dict(self.exceptions))


def _exact_key(x):
    """An exact number as a hashable key of integers (a Fraction's lowest terms), None as None."""
    return None if x is None else (x.numerator, x.denominator) if isinstance(x, Fraction) else x


def rows_of(index: LedgerIndex, start: int, stop: int, g_start: int | None = None,
            g_stop: int | None = None) -> LedgerIndex:
    """The index restricted to releases start..stop (and their guarantees g_start..g_stop, found
    from `g_release` when not given), sharing its values: what `cost_ids` and `single_cells` read,
    for one chunk of a large index (its Table 1 rows, without the whole n x |V| matrix)."""
    if g_start is None or g_stop is None:
        g_start, g_stop = np.searchsorted(index.g_release, [start, stop])
    part = LedgerIndex.__new__(LedgerIndex)
    part.variables, part.column, part.values, part.NONE, part.ZERO_ID = (
        index.variables, index.column, index.values, index.NONE, index.ZERO_ID)
    part.releases = range(stop - start)  # only its length is used
    part.reads = index.reads[start:stop]
    part.g_release = index.g_release[g_start:g_stop] - start
    part.g_value = index.g_value[g_start:g_stop]
    part.g_protects = index.g_protects[g_start:g_stop]
    part.has_guarantee = index.has_guarantee[start:stop]
    part.g_start = (np.flatnonzero(np.r_[True, part.g_release[1:] != part.g_release[:-1]]) if len(part.g_release)
                    else np.zeros(0, dtype=np.int64))
    return part


class _MemberCells:
    """Rows of Table 1 for family members only (`running_totals` on a large index): indexed by a
    list of release rows, as the whole cell matrix would be."""

    def __init__(self, rows: np.ndarray, cells: np.ndarray):
        self.rows, self.cells = rows, cells

    def __getitem__(self, rows) -> np.ndarray:
        return self.cells[np.searchsorted(self.rows, np.asarray(rows, dtype=np.int64))]


_CHUNK = 65_536  # releases at a time where a pass over arrays would otherwise copy every row
PAIR_SPARSE_LIMIT = 16  # releases reading more variables enter the pair counts by a matrix product


def _is_chain(values: Sequence[Spend]) -> bool:
    """Every two values comparable by dominance (so the first-ranked is always the one to charge)."""
    return all(a.dominates(b) or b.dominates(a) for a, b in combinations(set(values), 2))


def one_charge(values: Sequence[Spend]) -> bool:
    """A release with these guarantees' values has one charge on every subset, found over arrays
    (the first-ranked covering one of its side, `_best`): its pure and rho values are a chain, and
    so are its (epsilon, delta) ones (`charge_options`). A Gaussian declared by (epsilon, delta),
    its claim beside its implied rho, is one; a pure epsilon beside a rho, leaving a choice, is not."""
    return _is_chain([v for v in values if not is_approx(v)]) and _is_chain([v for v in values if is_approx(v)])


class _ExactComponents:
    """Sums Spend values by id, exactly, with integer arithmetic.

    Each notion component (pure, approx epsilon, approx delta, rho) of every
    distinct value is scaled by the lcm of that component's denominators. When
    the scaled numerators could overflow int64 over `n_rows` releases, Python
    integers are used instead (slower, still exact).
    """

    FIELDS = ("pure", "approx_epsilon", "approx_delta", "rho", "pure_rho")

    def __init__(self, values: Sequence[Spend], n_rows: int):
        self.unbounded_id = next(k for k, v in enumerate(values) if v.unbounded)
        self.components: list[tuple[str, int, np.ndarray]] = []
        for field in self.FIELDS:
            fractions = [Fraction(0) if v.unbounded else getattr(v, field) for v in values]
            if not any(fractions):
                continue
            denominator = math.lcm(*(f.denominator for f in fractions))
            numerators = [int(f * denominator) for f in fractions]
            limit = max(abs(n) for n in numerators) * max(n_rows, 1)
            dtype = np.int64 if limit < 2**62 else object
            self.components.append((field, denominator, np.asarray(numerators, dtype=dtype)))

    def total(self, ids: np.ndarray) -> Spend:
        if np.any(ids == self.unbounded_id):
            return UNBOUNDED
        parts = {field: Fraction(int(numerators[ids].sum()), denominator)
                 for field, denominator, numerators in self.components}
        return Spend(**parts)

    def column_totals(self, ids: np.ndarray) -> list[Spend]:
        """Per column, the exact composition of its ids: how many of each value id the column
        holds (one bincount), times each value's integer numerators (a small exact product:
        int64 within the bound checked at construction, Python integers past it)."""
        n_rows, n_cols = ids.shape
        return self.entry_totals(ids.ravel(), np.tile(np.arange(n_cols), n_rows), n_cols)

    def entry_totals(self, ids: np.ndarray, cols: np.ndarray, n_cols: int) -> list[Spend]:
        """`column_totals` from (value id, column) entries: the cells not listed cost 0 (the
        zero value adds nothing), so a table's read entries are enough, without its n x |V| cells."""
        n_values = len(self.components[0][2]) if self.components else self.unbounded_id + 1
        n_values = max(n_values, int(ids.max()) + 1 if ids.size else 0)
        counts = np.bincount(np.asarray(ids, dtype=np.int64) * n_cols + cols, minlength=n_values * n_cols
                             ).reshape(n_values, n_cols)
        unbounded = counts[self.unbounded_id] > 0 if self.unbounded_id < n_values else np.zeros(n_cols, dtype=bool)
        sums = {}
        for field, denominator, numerators in self.components:
            if numerators.dtype == object:
                column = [sum(int(numerators[v]) * int(counts[v, j]) for v in range(len(numerators)) if counts[v, j])
                          for j in range(n_cols)]
            else:
                column = numerators @ counts[:len(numerators)]
            sums[field] = (denominator, column)
        totals = []
        for j in range(n_cols):
            if unbounded[j]:
                totals.append(UNBOUNDED)
                continue
            totals.append(Spend(**{field: Fraction(int(column[j]), denominator)
                                   for field, (denominator, column) in sums.items()}))
        return totals


def index_over(index: LedgerIndex, variables: Sequence[str]) -> LedgerIndex:
    """The same releases over other columns: the dataset's variables as they stood at a moment
    (history.state_as_of). A variable of `variables` the index lacks is read by none of its
    releases (a column of zeros, Tan Prop 3.3); a column of the index not in `variables` is
    dropped, and must be read by none of its releases (the caller keeps every variable read:
    dropping one would drop its cost). Protected sets are cut to the columns kept: a cost
    only asks whether U ∩ reads ⊆ P (docs/explanation/model.md#the-cost-of-one-release-on-a-subset), and U ∩ reads lies in the columns kept. The
    index itself is left as it is."""
    import copy

    variables = tuple(variables)
    if variables == index.variables:
        return index
    kept = [index.column.get(name) for name in variables]
    dropped = [j for j in range(len(index.variables)) if j not in set(k for k in kept if k is not None)]
    if dropped and index.reads[:, dropped].any():
        raise ValueError(f"index_over drops variables its releases read: "
                         f"{[index.variables[j] for j in dropped if index.reads[:, j].any()]}")

    def over(matrix: np.ndarray) -> np.ndarray:
        result = np.zeros((matrix.shape[0], len(variables)), dtype=bool)
        for j, k in enumerate(kept):
            if k is not None:
                result[:, j] = matrix[:, k]
        return result

    projected = copy.copy(index)
    # (over the old columns; the accountants' events are per release)
    for memo in ("_ids_memo", "_pair_grids", "_pairs_read", "_read_entries", "_family_reads", "_family_cases"):
        projected.__dict__.pop(memo, None)
    projected.variables = variables
    projected.column = {name: j for j, name in enumerate(variables)}
    projected.reads = over(index.reads)
    projected.g_protects = over(index.g_protects)
    return projected
