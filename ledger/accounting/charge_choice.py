"""A unit's alternative charges: the steward's choice among a release's (`choose`) and the adversary's among a family's (`Worst`).

Every choice is a valid bound (docs/explanation/model.md#the-cost-of-one-release-on-a-subset); the smallest
under the objective (`at_delta`: epsilon at a delta) is charged, and a family costs the worst of its
alternatives (docs/explanation/model.md#families).

Invariants: the alternatives are of one side of the release (cost_rule.charge_options), so a choice
after the history spends no delta; past CHOICE_LIMIT combinations each unit takes its first-ranked one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from itertools import product

from ..core.numbers import float_up
from .spend import ALLOWANCE, DEFAULT_DELTA, Spend, UNBOUNDED, ZERO, compose, pareto, spend_max


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
    unit (`cap_measure.objective`: rho, or pure epsilon) measure the worst exactly in that unit.
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
