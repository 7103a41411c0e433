"""Privacy loss values and how they compose (docs/explanation/model.md#composition).

A `Spend` is the privacy loss on one subset of variables, kept *per notion*:
pure epsilon, approximate (epsilon, delta), and rho-zCDP are summed separately
(basic composition, Tan Prop 3.4; zCDP composition, Bun and Steinke 2016
Lemma 2.3) and are only combined when an epsilon at a stated delta is asked
for. Nothing adds rho and epsilon by plain addition.

Every figure holds under full adaptivity (see docs/explanation/accounting.md): any release
may have been chosen after earlier outputs were seen, and the history may stop at any moment.
The running figure of a subset is an *odometer* (Rogers, Roth, Ullman and Vadhan 2016) in the
hockey-stick sense: for the history stopped at any stopping time tau (one that may watch the
outputs), E[(1 - e^(eps_tau - L_tau))+] <= delta at the figure eps_tau printed then. It is an
expectation bound, proved by optional stopping, not Rogers et al.'s tail bound on the
probability that the loss ever passes the figure. The delta is split before any release:
- the approximate releases' deltas come from the ALLOWANCE (a fixed fraction of the delta):
  their approximate parts fire with probability at most their summed deltas (Kairouz, Oh and
  Viswanath 2015, Lemma 3.4; the structure of Whitehouse, Ramdas, Rogers and Wu 2023, Thm 1),
  and a subset whose approximate deltas pass the allowance has no figure at that delta (∞);
- the pure sum, with approximate epsilons beside it, spends nothing more (basic composition
  holds pointwise);
- the rest, `filter_delta`, is shared evenly by the Rényi statements at the orders
  FILTER_ORDERS (ORDER_SHARE each; Feldman and Zrnic 2021, Thm 4.3: at a fixed order
  exp((a - 1)(L_t - sum of the releases' divergences)) is a supermartingale), each converted
  by Canonne, Kamath and Steinke (2020) Prop 12. The smallest statement is the figure, valid by
  a union bound over statements fixed in advance.
Converting the summed rho at the order best for it (CKS 2020, Corollary 13) is not among them:
that order follows the realised total, chosen after the outputs. It is a filter only for a rho
budget fixed in advance (Feldman and Zrnic 2021, Remark 4.4), which is how a rho cap states its
guarantee (filters.py).

Invariants:
- components are exact Fractions; `Spend.epsilon()` is exact for pure and
  approximate totals, and a float rounded up when a zCDP conversion is used;
- `UNBOUNDED` absorbs everything: a subset any release reads without a
  certified bound is "not protected", shown as ∞, never as a number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from ..core.numbers import INF, Number, float_down, float_up
from ..core.records import DEFAULT_ALLOWANCE, Guarantee, Notion, Relation
from .relation import charged

ZERO_FRACTION = Fraction(0)
DEFAULT_DELTA = Fraction(1, 10**9)  # delta for epsilon figures when neither the dataset nor the user gives one

CONVERSION_NAME = ("Canonne-Kamath-Steinke (2020) conversion at Rényi orders fixed in advance, the delta left by "
                   "the approximate releases' allowance shared evenly among them")
CONVERSION_SHORT = "CKS 2020"

FILTER_ORDERS = (1.2, 1.5, 1.8, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 128, 256, 512, 1024)
ORDER_SHARE = 1 / len(FILTER_ORDERS)  # of `filter_delta`, for each order's statement
# The share of every delta a figure is stated at that the approximate releases' deltas may use,
# when no dataset is in question; a dataset's figures use its own (Dataset.allowance).
ALLOWANCE = DEFAULT_ALLOWANCE


def allowance_words(allowance: Fraction) -> str:
    """An allowance as figures say it: "half" (the default), else the fraction ("1/4")."""
    return "half" if allowance == Fraction(1, 2) else str(allowance)


def within_allowance(approx_delta: Fraction, delta: Number, allowance: Fraction = ALLOWANCE) -> bool:
    """Whether approximate deltas summing to `approx_delta` fit the allowance of a figure at `delta`."""
    return approx_delta <= allowance * (delta if isinstance(delta, Fraction) else Fraction(delta))


def filter_delta(delta: Number, approx_delta: Fraction = ZERO_FRACTION, allowance: Fraction = ALLOWANCE) -> float:
    """The delta the filter's statements share at a figure's `delta`: what the allowance leaves,
    fixed before any release (never what the approximate releases happen to leave); 0 when their
    deltas pass the allowance, so the figure is ∞. Rounded down (a smaller delta is only looser)."""
    if not within_allowance(approx_delta, delta, allowance):
        return 0.0
    return max(float_down((1 - allowance) * (delta if isinstance(delta, Fraction) else Fraction(delta))), 0.0)


@dataclass(frozen=True, slots=True)
class Spend:
    """Privacy loss on one subset, per notion."""

    pure: Fraction = ZERO_FRACTION  # pure epsilon, adds (Tan Prop 3.4)
    approx_epsilon: Fraction = ZERO_FRACTION  # (epsilon, delta): both add (basic composition,
    approx_delta: Fraction = ZERO_FRACTION  # Dwork and Roth 2014, Theorem 3.16)
    rho: Fraction = ZERO_FRACTION  # zCDP: rho adds (Bun and Steinke 2016, Lemma 2.3)
    unbounded: bool = False
    # The pure part as zCDP, converted release by release: sum of epsilon_i^2 / 2
    # (Bun and Steinke 2016, Prop 3.3), never more than (sum of epsilon_i)^2 / 2.
    pure_rho: Fraction = ZERO_FRACTION

    def __post_init__(self) -> None:
        # A pure epsilon given without its zCDP form is one release: epsilon^2 / 2.
        if self.pure and not self.pure_rho:
            object.__setattr__(self, "pure_rho", self.pure * self.pure / 2)

    def __add__(self, other: Spend) -> Spend:
        if self.unbounded or other.unbounded:
            return UNBOUNDED
        if other.is_zero:
            return self
        if self.is_zero:
            return other
        return Spend(
            _plus(self.pure, other.pure),
            _plus(self.approx_epsilon, other.approx_epsilon),
            _plus(self.approx_delta, other.approx_delta),
            _plus(self.rho, other.rho),
            pure_rho=_plus(self.pure_rho, other.pure_rho),
        )

    def times(self, count: int) -> Spend:
        """The composition of `count` releases each costing this."""
        if count == 0:
            return ZERO
        if self.unbounded:
            return UNBOUNDED
        return Spend(self.pure * count, self.approx_epsilon * count, self.approx_delta * count, self.rho * count,
                     pure_rho=self.pure_rho * count)

    @property
    def is_zero(self) -> bool:
        # (truth tests: comparing Fractions with == costs several times more)
        return not (self.unbounded or self.pure or self.approx_epsilon or self.approx_delta or self.rho
                    or self.pure_rho)

    @property
    def is_pure(self) -> bool:
        """True when the total is a pure epsilon (no delta, no rho)."""
        return not (self.unbounded or self.approx_delta or self.approx_epsilon or self.rho)

    @property
    def notion(self) -> str:
        """The label shown beside a total: pure, approx, zcdp, mixed or unbounded."""
        if self.unbounded:
            return "unbounded"
        has_approx = self.approx_epsilon != 0 or self.approx_delta != 0
        if self.rho and has_approx:
            return "mixed"
        if self.rho:
            return "zcdp" if self.pure == 0 else "mixed"
        if has_approx:
            return "approx"
        return "pure"

    def epsilon(self, delta: Number, allowance: Fraction = ALLOWANCE) -> Number:
        """An epsilon such that the total is (epsilon, delta)-private; ∞ when none is certified.
        `allowance`: the dataset's (Dataset.allowance), the share of `delta` approximate parts may use.

        - pure only: the exact sum (delta does not matter);
        - with approximate parts: their deltas within the allowance of `delta`
          (else ∞), their epsilons added (basic composition);
        - with rho: the Rényi statements at the fixed orders (`order_epsilon`,
          ORDER_SHARE of `filter_delta` each; every pure release's curve at most
          min(epsilon, a epsilon^2 / 2), Bun and Steinke 2016, Prop 3.3): the
          shares make the smallest valid for adaptive releases stopped at any
          moment (module docstring).
        """
        if self.unbounded:
            return INF
        if self.is_pure:
            return self.pure
        if not within_allowance(self.approx_delta, delta, allowance):
            return INF
        if not self.rho:
            return self.pure + self.approx_epsilon
        remaining = filter_delta(delta, allowance=allowance)
        if remaining <= 0:
            return INF
        orders = order_epsilon(float_up(self.pure), float_up(self.pure_rho), float_up(self.rho),
                               remaining * ORDER_SHARE)
        if not self.approx_epsilon:
            return orders
        return _up(float_up(self.approx_epsilon) + orders)

    def own_epsilon(self, delta: Number, allowance: Fraction = ALLOWANCE) -> Number:
        """A release's own cell: the same statement as a subset's total (`epsilon`), so a total is
        never below the only cell it sums."""
        return self.epsilon(delta, allowance)

    def zcdp_rho(self) -> Fraction | None:
        """The total as rho-zCDP, or None when it has an approximate (delta) part."""
        if self.unbounded or self.approx_delta or self.approx_epsilon:
            return None
        return self.rho + self.pure_rho  # each pure release as epsilon^2 / 2 (Bun and Steinke 2016, Prop 3.3)

    def rank(self) -> tuple[float, float]:
        """Orders alternative guarantees of one release: epsilon at the default delta, then
        the sum of the components. A linear extension of componentwise dominance: a
        guarantee that is no worse in every component never ranks after one that is.
        Any covering guarantee is a valid bound (docs/explanation/model.md#the-cost-of-one-release-on-a-subset); this only picks one."""
        if self.unbounded:
            return (math.inf, math.inf)
        components = self.pure + self.approx_epsilon + self.approx_delta + self.rho + self.pure_rho
        return (float_up(self.epsilon(DEFAULT_DELTA)), float_up(components))

    def dominates(self, other: Spend) -> bool:
        """No worse in any component: then no composition can prefer `other`."""
        if other.unbounded:
            return True
        if self.unbounded:
            return False
        return (self.pure <= other.pure and self.approx_epsilon <= other.approx_epsilon
                and self.approx_delta <= other.approx_delta and self.rho <= other.rho
                and self.pure_rho <= other.pure_rho)


ZERO = Spend()
UNBOUNDED = Spend(unbounded=True)


def pure_spend(epsilon: Fraction) -> Spend:
    """One epsilon-DP release: pure epsilon, and epsilon^2 / 2 should it be counted in zCDP."""
    return Spend(pure=epsilon, pure_rho=epsilon * epsilon / 2)  # (the default, stated)


def guarantee_spend(guarantee: Guarantee, relation: Relation | None = None) -> Spend:
    """The loss a guarantee certifies for neighbours under `relation`: by default the relation
    of the dataset it is charged in (`Guarantee.charge_relation`). As stated in that relation;
    in the other, converted by `relation.charged` (docs/explanation/model.md#variables-subsets-and-neighbours: add/remove to replace-one by
    group privacy, k = 2); unbounded when nothing follows (replace-one to add/remove)."""
    target = charged(guarantee, guarantee.charge_relation if relation is None else relation)
    return UNBOUNDED if target is None else _native_spend(target)


def _native_spend(guarantee: Guarantee) -> Spend:
    if guarantee.notion == Notion.PURE:
        return pure_spend(guarantee.epsilon)
    if guarantee.notion == Notion.APPROX:
        return Spend(approx_epsilon=guarantee.epsilon, approx_delta=guarantee.delta)
    if guarantee.notion == Notion.ZCDP:
        return Spend(rho=guarantee.rho)
    raise ValueError(f"unsupported notion {guarantee.notion!r}")


def pareto(spends) -> tuple[Spend, ...]:
    """The alternatives no other alternative dominates, in rank order (duplicates dropped)."""
    spends = list(spends)
    if len(spends) <= 1:
        return tuple(spends)
    ranked = sorted(set(spends), key=Spend.rank)
    kept: list[Spend] = []
    for spend in ranked:
        if not any(other.dominates(spend) for other in kept):
            kept.append(spend)
    return tuple(kept)


def compose(spends) -> Spend:
    """Sequential composition of independent releases (Tan Prop 3.4, per notion)."""
    total = ZERO
    for spend in spends:
        total = total + spend
        if total.unbounded:
            return UNBOUNDED
    return total


def spend_max(spends) -> Spend:
    """A bound that holds for whichever one of `spends` applies: the componentwise max."""
    result = ZERO
    for spend in spends:
        if spend.unbounded:
            return UNBOUNDED
        result = Spend(
            max(result.pure, spend.pure),
            max(result.approx_epsilon, spend.approx_epsilon),
            max(result.approx_delta, spend.approx_delta),
            max(result.rho, spend.rho),
            pure_rho=max(result.pure_rho, spend.pure_rho),
        )
    return result


def sum_of_two_largest(spends) -> Spend:
    """Upper bound on the sum of any two of `spends`: per component, the two largest.

    Used when a changed record leaves one part of a family and joins another
    (docs/explanation/model.md#families): a removal from one part and an addition to another.
    """
    spends = list(spends)
    if any(spend.unbounded for spend in spends):
        return UNBOUNDED

    def top_two(values):
        return sum(sorted(values, reverse=True)[:2], ZERO_FRACTION)

    return Spend(
        top_two(s.pure for s in spends),
        top_two(s.approx_epsilon for s in spends),
        top_two(s.approx_delta for s in spends),
        top_two(s.rho for s in spends),
        pure_rho=top_two(s.pure_rho for s in spends),
    )


@lru_cache(maxsize=65536)
def cks_epsilon(rho: Fraction | float, delta: float) -> float:
    """Smallest epsilon such that rho-zCDP implies (epsilon, delta)-DP, by
    Canonne, Kamath and Steinke (2020), Proposition 12 / Corollary 13:

        epsilon = inf over alpha > 1 of
                  alpha rho + (ln(1/delta) + (alpha - 1) ln(1 - 1/alpha) - ln(alpha)) / (alpha - 1)

    Every alpha gives a valid bound, so the minimiser can only make the answer looser,
    never invalid; the bound is evaluated at the alpha found and rounded up. It is never
    larger than the simple bound rho + 2 sqrt(rho ln(1/delta)) (Bun and Steinke 2016,
    Prop 1.3), which is evaluated too as a guard.
    """
    rho = float_up(rho)
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1). Found {delta}.")
    if rho < 0:
        raise ValueError(f"rho must be non-negative. Found {rho}.")
    if rho == 0:
        return 0.0
    if math.isinf(rho):
        return math.inf
    log_inv_delta = math.log(1 / delta)
    simple = rho + 2 * math.sqrt(rho * log_inv_delta)  # valid at any rho (Bun and Steinke 2016, Prop 1.3)
    if rho > 1e12 or rho < 1e-200:  # the optimal order is within ulps of 1, or past the float range: simple bound
        return _up(simple)
    order = cks_order(rho, log_inv_delta)
    best = cks_bound(order, rho, log_inv_delta)
    return _up(max(simple if math.isnan(best) else min(best, simple), 0.0))


@lru_cache(maxsize=65536)
def order_epsilon(pure: float, pure_rho: float, rho: float, delta: float) -> float:
    """The Rényi filter's epsilon at the orders FILTER_ORDERS, each at `delta` (its share), of a
    total known only by its sums: rho-zCDP parts (the curve a * rho) and pure parts, whose curve
    at order a is at most min(pure, a * pure_rho) (an epsilon-DP release's Rényi divergence is at
    most epsilon, and at most a * epsilon^2 / 2, Bun and Steinke 2016, Prop 3.3; summed release by
    release, each sum bounds the sum of the minima). CKS (2020) Prop 12 at each order, the
    smallest, rounded up: the formula of renyi_curves.rdp_filter_epsilon. The pure sum enters
    inside each order's statement, which a fixed order allows (Feldman and Zrnic 2021, Thm 4.3
    with the pure releases' loss bounded pointwise), not added after a conversion whose order
    would follow it."""
    if delta <= 0:
        return math.inf
    if rho == 0 and pure == 0:
        return 0.0
    log_delta = math.log(delta)
    best = min(min(pure, a * pure_rho) + a * rho + log1p_inverse - (log_delta + log_a) / a_less_one
               for a, log1p_inverse, log_a, a_less_one in _ORDER_CONSTANTS)
    return _up(max(best, 0.0))


# Per order of FILTER_ORDERS: (a, log1p(-1/a), log(a), a - 1), the constants of `order_epsilon`'s
# formula evaluated once (the same floats, in the same expression: the same figure to the bit).
_ORDER_CONSTANTS = tuple((a, math.log1p(-1 / a), math.log(a), a - 1) for a in FILTER_ORDERS)


def cks_bound(alpha: float, rho: float, log_inv_delta: float) -> float:
    """The CKS (2020) Corollary 13 bound at Renyi order alpha > 1, with
    (alpha - 1) ln(1 - 1/alpha) / (alpha - 1) simplified to ln(1 - 1/alpha)."""
    return alpha * rho + (log_inv_delta - math.log(alpha)) / (alpha - 1) + math.log1p(-1 / alpha)


def cks_order(rho: float, log_inv_delta: float) -> float:
    """The Renyi order that minimises `cks_bound`.

    The bound's derivative in alpha is rho - (ln(1/delta) - ln alpha) / (alpha - 1)^2,
    so with x = alpha - 1 the minimum is the one root of the increasing function
    h(x) = rho x^2 + ln(1 + x) - ln(1/delta): negative at 0, positive at
    x0 = sqrt(ln(1/delta) / rho). Newton's method inside that bracket, bisecting when
    a step would leave it, finds it to the last bits in a few steps."""
    low, high = 0.0, math.sqrt(log_inv_delta / rho)
    x = high
    for _ in range(200):
        value = rho * x * x + math.log1p(x) - log_inv_delta
        if value > 0:
            high = x
        else:
            low = x
        step = value / (2 * rho * x + 1 / (1 + x))
        following = x - step
        if not low < following < high:
            following = (low + high) / 2
        if abs(following - x) <= 1e-15 * x or high - low <= 1e-15 * high:
            x = following
            break
        x = following
    return 1 + x


def _plus(a: Fraction, b: Fraction) -> Fraction:
    """a + b, skipping Fraction arithmetic when either is zero (most components are)."""
    if not b:
        return a
    if not a:
        return b
    return a + b


def _up(value: float) -> float:
    """Nudge a float bound up past any rounding error in its evaluation."""
    return math.nextafter(value * (1 + 1e-12), math.inf)
