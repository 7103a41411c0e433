"""The PLD accountant: dp_accounting's privacy-loss-distribution composition of a subset's events (information only).

Pessimistic discretisation (Meiser and Mohammadi 2018; Koskela et al. 2020): losses are rounded up
to a grid (`pld_interval`), so the figure is never below the true curve. Identical events compose
by self-composition, every Gaussian together as one (its composed loss is Gaussian, exactly), and
the factors in a balanced product tree whose nodes are kept (`_PRODUCTS`): the next composition
recomposes only the path of the setting that changed.

Invariants: the figure is not valid under adaptive choices (`valid` False): had the whole plan been
fixed in advance, at the whole delta; it never falls when a release joins (`pld_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from functools import lru_cache

from ..core.numbers import INF
from .dp_events import Event
from .figure_validity import CASES, CONVERSIONS, Figure, THEOREMS
from .renyi_curves import _up, event_rho
from .subset_composition import Composition


PLD_INTERVAL = 1e-3  # dp_accounting's value discretisation interval; pessimistic, so only looser


def pld_figure(comp: Composition, delta: Fraction, case: str) -> Figure:
    """dp_accounting's PLD figure of the composition at `delta`.

    Information only (`valid` False): the tight figure had the whole plan been fixed in advance,
    at the whole delta. Composition by PLD is not a valid filter or odometer under full
    adaptivity, so it never decides a cap and is never the headline."""
    valid = False
    if comp.unbounded:
        return Figure("pld", INF, delta, valid, case, THEOREMS["pld"], CONVERSIONS["pld"])
    unsupported = sorted({e.kind for e in comp.events if e.kind == "zcdp"})
    if unsupported:
        return Figure("pld", INF, delta, valid, case, THEOREMS["pld"], CONVERSIONS["pld"], available=False,
                      note="a rho guarantee without its Gaussian parameters has no privacy loss distribution")
    if any(e.kind in ("laplace", "gaussian") and e.a > Fraction(10**300) for e in comp.events):
        return Figure("pld", INF, delta, valid, case, THEOREMS["pld"], CONVERSIONS["pld"], available=False,
                      note="not computed: a noise scale past the float range; basic and rdp apply")
    if any(_event_epsilon(e) > PLD_EPSILON_LIMIT for e in comp.events):
        return Figure("pld", INF, delta, valid, case, THEOREMS["pld"], CONVERSIONS["pld"], available=False,
                      note=f"not computed: a release's epsilon is above {PLD_EPSILON_LIMIT}, where the "
                           "discretised distribution is too large to build; basic and rdp apply")
    approx_eps, approx_delta = comp.approx()
    remaining = float(delta - approx_delta)  # (the plan fixed in advance: the whole delta)
    if remaining <= 0:
        return Figure("pld", INF, delta, valid, case, THEOREMS["pld"], CONVERSIONS["pld"])
    items = tuple(sorted((e.key, c) for e, c in comp.events.items() if e.kind != "approx"))
    interval = pld_interval(comp, remaining)
    eps = _pld_epsilon_of(items, remaining, interval)
    eps = _up(eps + float(approx_eps)) if approx_eps else eps
    notes = ["information: " + CASES["fixed"]]
    if any(e.kind == "sampled" for e in comp.events):
        notes.append(SAMPLED_PLD_NOTE)
    return Figure("pld", eps, delta, valid, case, THEOREMS["pld"], CONVERSIONS["pld"], note="; ".join(notes))


SAMPLED_PLD_NOTE = ("a subsampled release enters as randomized response at its amplified epsilon (the worst "
                    "case for that epsilon; dp_accounting has no PLD for sampling without replacement)")


PLD_EPSILON_LIMIT = 20  # per release; past it a PLD's grid is impractically large (and the figure no tighter)


def _event_epsilon(event: Event) -> float:
    """A release's own pure epsilon where its event has one (Laplace: sensitivity / scale;
    discrete Laplace: parameter times sensitivity), or for a Gaussian sensitivity / sigma; 0 otherwise."""
    if event.kind in ("laplace", "gaussian"):  # (a Gaussian: sensitivity / sigma, a scale of its loss)
        return math.inf if not event.a else float(1 / event.a)
    if event.kind == "dlaplace":
        return float(event.a) * float(event.b or 1)
    if event.kind in ("pure", "sampled"):
        return float(event.a)
    return 0.0


@lru_cache(maxsize=256)
def _pld_epsilon_of(items: tuple, delta: float, interval: float) -> float:
    """`pld_epsilon` of (event key, count) items, cached: a check decides each cap before and
    after the plan, and a subset's figure is asked again by every view."""
    return pld_epsilon({Event.from_key(key): count for key, count in items}, delta, interval)


def pld_epsilon(events: Mapping[Event, int], delta: float, interval: float = PLD_INTERVAL) -> float:
    """dp_accounting's PLD composition of the events (pessimistic); the epsilon at `delta`, rounded up.

    The composed distribution is a product of one component per kind, each a pessimistic
    discretisation on the grid of `interval` (losses rounded up to multiples of it), built so that
    one more release of a setting is one more factor of the product (the monotonicity argument,
    `pld_interval`):
    - Laplace and discrete Laplace: dp_accounting's one-release PLD, self-composed;
    - pure: randomized response at epsilon rounded *up to the grid* (a stronger randomized
      response, so valid: Kairouz, Oh and Viswanath 2015, §3), whose k-fold composition is
      exactly the binomial on the grid, no rounding at all: k + 1 releases are k releases
      composed with one more, exactly;
    - every Gaussian together: one Gaussian with sensitivity / sigma added in quadrature (the
      composed privacy loss of Gaussians is Gaussian, exactly), discretised once.
    The factors (the Gaussian, then the settings by key) are composed in a balanced tree, each
    FFT as short as the two products it joins, and every node of the tree is kept (`_product`):
    the next composition, which changes one setting's count, composes again only the nodes on
    that setting's path to the root."""
    from .privacy_loss import epsilon_for_delta

    precision = math.fsum(count / float(event.a) ** 2 for event, count in events.items()
                          if event.kind == "gaussian" and count > 0)
    leaves = ((("gaussian", _down_float(1 / math.sqrt(precision))),) if precision > 0 else ()) + tuple(
        (event, count) for event, count in sorted(events.items(), key=lambda item: item[0].key)
        if count > 0 and event.kind != "gaussian")
    if not leaves:
        return 0.0
    return _up(max(float(epsilon_for_delta(_product(leaves, interval), delta)), 0.0))


_PRODUCTS: dict = {}  # (interval, leaves) -> the composed PLD of that node of the tree


_PRODUCTS_KEPT = 128  # nodes (each a PLD of up to ~10^5 points): the oldest go first


def _product(leaves: tuple, interval: float):
    """The composed PLD of `leaves` ((event, count), or ("gaussian", multiplier) for the merged
    Gaussian), in a balanced tree: the first half's product composed with the second half's.
    Every node is kept (`_PRODUCTS`), so a composition that differs from an earlier one in one
    leaf composes only the nodes above that leaf; the same leaves give the same tree, so the
    same figure, whichever composition came before."""
    from .privacy_loss import compose

    key = (interval, leaves)
    found = _PRODUCTS.get(key)
    if found is not None:
        return found
    if len(leaves) == 1:
        leaf = leaves[0]
        return _gaussian_pld(leaf[1], interval) if leaf[0] == "gaussian" else _event_pld(leaf[0], leaf[1], interval)
    middle = len(leaves) // 2
    total = compose(_product(leaves[:middle], interval), _product(leaves[middle:], interval))
    if len(_PRODUCTS) >= _PRODUCTS_KEPT:
        _PRODUCTS.pop(next(iter(_PRODUCTS)))
    _PRODUCTS[key] = total
    return total


def _down_float(value: float) -> float:
    """A noise multiplier a little smaller (so the PLD built from it only more pessimistic)."""
    return math.nextafter(value * (1 - 4e-16), 0.0)


@lru_cache(maxsize=1024)
def _gaussian_pld(multiplier: float, interval: float):
    """The PLD of a Gaussian with sensitivity 1 and standard deviation `multiplier`: dp_accounting's
    Connect-the-Dots PLD, its hockey-stick divergences evaluated by numpy (`privacy_loss`)."""
    from .privacy_loss import gaussian

    return gaussian(multiplier, interval)


@lru_cache(maxsize=1024)
def _event_pld(event: Event, count: int, interval: float):
    """The PLD of `count` releases of one setting (a `privacy_loss.Pld`): built and self-composed
    as dp_accounting does, with numpy (`privacy_loss`), so `check` and `record` need not import
    dp_accounting; the discrete Laplace is dp_accounting's own."""
    from . import privacy_loss

    if event.kind == "gaussian":  # count Gaussians compose to one with sigma / sqrt(count) (exactly)
        return _gaussian_pld(_down_float(float(event.a) / math.sqrt(count)), interval)
    if event.kind == "laplace":  # dp_accounting's from_laplace_mechanism, built with numpy
        base = privacy_loss.laplace(float(event.a), interval)
    elif event.kind == "dlaplace":
        from dp_accounting.pld import privacy_loss_distribution as PLD

        base = privacy_loss.from_dp_accounting(PLD.from_discrete_laplace_mechanism(
            parameter=float(event.a), sensitivity=int(event.b), value_discretization_interval=interval,
            pessimistic_estimate=True))
    elif event.kind in ("pure", "sampled"):  # the worst case for (eps, 0)-DP: randomized response
        # (Kairouz et al. 2015); a sampled release at its amplified epsilon: dp_accounting has no PLD
        # for sampling without replacement, and randomized response is the worst eps'-DP mechanism
        return _randomized_response_pld(float(event.a), count, interval)
    else:
        raise ValueError(f"no privacy loss distribution for event {event.key!r}")
    return privacy_loss.self_compose(base, count)  # dp_accounting's self-composition, its bounds computed by numpy


def _randomized_response_pld(epsilon: float, count: int, interval: float):
    """`count` randomized responses at epsilon rounded up to the grid, g = ceil(epsilon / interval)
    steps: the privacy loss is (2k - count) g steps with k ~ Binomial(count, e^e / (1 + e^e)),
    e = g * interval, exactly on the grid (nothing is rounded, so count + 1 releases are
    exactly count releases composed with one more). Randomized response at e >= epsilon is a
    valid worst case for an epsilon-DP release (Kairouz, Oh and Viswanath 2015, §3: every
    epsilon-DP mechanism is a post-processing of randomized response at epsilon, which is one
    of randomized response at e). Atoms below 1e-300 go to the infinite loss (pessimistic)."""
    from .privacy_loss import randomized_response

    return randomized_response(_grid_steps(epsilon, interval), count, interval)


def _grid_steps(epsilon: float, interval: float) -> int:
    """ceil(epsilon / interval), never below the exact quotient (float error rounds up)."""
    steps = math.ceil(epsilon / interval)
    while steps * interval < epsilon:
        steps += 1
    return max(steps, 1)


PLD_STEPS = 20000  # the grid: about 1/20000 of a rough figure


# Between these. The coarsest bounds the rounding a large composition pays: each release's loss
# is rounded up by up to one interval (a pure epsilon onto the grid, a Laplace loss by
# dp_accounting's pessimistic discretisation), so 100,000 releases at 2^-5 were 4.4% above the
# tight figure (above even rdp's), at 2^-8 0.55% in about 0.6 s (benchmarks/bench_accountants.py
# (c)); the finest bounds the grid of a small one (10 pure releases of 1).
PLD_FINEST, PLD_COARSEST = 2.0 ** -14, 2.0 ** -8


def pld_interval(comp: Composition, delta: float) -> float:
    """The discretisation interval: a power of two, about 1/PLD_STEPS of a rough figure, between
    2^-14 and 2^-8. Pessimistic at any interval; finer only costs time.

    Monotonicity. The rough figure
    is a non-decreasing function of the subset's releases, computed with correctly rounded
    sums (`_rough_figure`), so the interval h never gets finer when a release joins, and
    h' = 2^j h when it gets coarser. Write D_h(e) for a setting's discretised factor
    (`pld_epsilon`) and D_h(R) for their product, whose hockey-stick curve delta(eps) gives
    the figure. Adding a release r:
    1. at the same h, D_h(R + r) = D_h(R) x D_h(r) for a Laplace, discrete Laplace or pure r
       (self-composition and the exact binomial on the grid are products); a discretised PLD
       is the privacy loss distribution of a pair of distributions (the rounded-up losses keep
       E[e^-L] <= 1; the deficit is mass of the second distribution alone), the product is the
       product pair, and the first pair is its marginal, so by data processing
       delta_{R+r}(eps) >= delta_R(eps) at every eps; the figure, the smallest eps with
       delta(eps) <= the target, cannot fall;
    2. coarser h' = 2^j h: every loss rounded up to the h'-grid is at least the one rounded up
       to the h-grid (the h'-grid is in the h-grid, ceil_{h'} = ceil_{h'} o ceil_h; randomized
       response at the larger rounded epsilon dominates), so under the coupling of the two
       products factor by factor each composed loss is larger, and delta(eps) = E[(1 - e^(eps - L))+]
       is non-decreasing in the loss: again no fall;
    3. a Gaussian r changes the one merged Gaussian factor from G(mu) to G(mu') with mu' > mu,
       discretised once (a product of discretised Gaussians would be looser by one interval per
       release). The continuous G(mu') = G(mu) x G(sqrt(mu'^2 - mu^2)); for the discretised
       factor, Stein's lemma gives d delta/d mu = (e^eps (e^h - 1) / mu) sum over grid points
       x > eps of q(x) (x + mu^2 / 2), q the N(-mu^2/2, mu^2) density: positive at every eps >= 0,
       which is the whole argument for a subset of Gaussians only (case 1 and 2 then cover the
       other factors). Mixed with other factors, the terms at grid points below -mu^2/2 could in
       principle be negative when the interval is coarse next to mu (a Gaussian whose sigma is
       thousands of times its sensitivity beside much larger releases); there the claim rests on
       the positive terms dominating, not on a proof.
    The figures are evaluated in floating point (dp_accounting's FFT convolutions), so the
    argument is for the exact values of these discretised distributions; each added release
    moves mass up by a share of an interval (~1/5000 of the figure), far above the evaluation
    error (~1e-12 relative), and the property test (tests/accounting/test_accountant_consistency.py)
    asserts it with no tolerance. The figure is at most about one interval per release of a
    pure setting (the rounding of its epsilon), one interval per Laplace release, and one for
    all the Gaussians above the exact PLD of the recorded mechanisms."""
    if comp.unbounded:
        return PLD_INTERVAL
    rough = _rough_figure(comp, delta)
    if math.isinf(rough) or rough <= 0:
        return PLD_FINEST
    return float(min(max(2.0 ** math.floor(math.log2(rough / PLD_STEPS)), PLD_FINEST), PLD_COARSEST))


def _rough_figure(comp: Composition, delta: float) -> float:
    """A rough upper figure, non-decreasing when a release joins (and when the remaining delta
    falls): the smaller of the pure sum (when every event has a pure epsilon) and the zCDP
    bound rho + 2 sqrt(rho ln(1/delta)) of the summed rho bounds (Bun and Steinke 2016, Prop
    1.3). The sums are math.fsum, correctly rounded, so they cannot fall in floating point."""
    items = [(e, c) for e, c in comp.events.items() if e.kind != "approx" and c > 0]
    rho = math.fsum(c * event_rho(e) for e, c in items)
    rough = rho + 2 * math.sqrt(rho * math.log(1 / delta)) if delta < 1 else rho
    if all(e.pure_epsilon is not None for e, _ in items):
        rough = min(rough, math.fsum(c * e.pure_epsilon for e, c in items))
    return rough
