"""Three accountants per subset: basic, Rényi DP and privacy-loss distributions (docs/explanation/model.md#composition, docs/explanation/accounting.md).

Concept. A release's cost on a subset U (docs/explanation/model.md#the-cost-of-one-release-on-a-subset) is a guarantee; where the
ledger also knows the mechanism that produced it, a tighter *accounting event*
describes the same cost (like dp_accounting's `DpEvent`):

    event        from                                   Rényi curve (order a)                 PLD
    gaussian     gaussian sigma, sensitivity            a / (2 m^2), m = sigma / sensitivity   dp_accounting Gaussian
                 (or epsilon, delta: m the smallest the
                 claim allows, catalogue.implied_
                 gaussian_multiplier, Balle-Wang Thm 8)
    laplace      laplace scale, sensitivity (or eps)    Mironov 2017, Prop 6                   dp_accounting Laplace
    dlaplace     geometric scale, integer sensitivity   the pure curve at eps = sens / scale   dp_accounting discrete Laplace
    pure         any pure guarantee (declared, Tan's    randomized response's curve            dp_accounting's worst case for
                 pair noise)                                                                    (eps, 0)-DP, i.e. randomized response
    sampled      a Laplace or geometric release run     the smaller, order by order, of        randomized response at the
                 on sample_size of population (without  randomized response's curve at the    amplified epsilon (dp_accounting
                 replacement): amplified epsilon e',    amplified e' and Wang, Balle and       has no PLD for sampling without
                 beta = n'/n, base epsilon e            Kasiviswanathan 2019, Thm 9 with       replacement; randomized response
                                                        randomized response's curve at e       is the worst e'-DP mechanism)
    zcdp         a rho guarantee without sigma          a * rho                                 none: the subset gets no PLD figure
    approx       an (eps, delta) guarantee              basic: deltas taken out of the target   basic, likewise

An event is never invented (STYLE 5): a release whose guarantees are not the
ones its mechanism's parameters imply (explicit claims, old ledgers without
the parameters, families) is charged through its guarantee only, and a
release with no certified bound makes every accountant ∞.

Accountants, all pure functions of the releases:
- `basic`: the engine's composition (Tan Prop 3.4; CKS 2020 for rho), unchanged;
- `rdp`: the curves summed on a fixed grid of orders and converted by Canonne,
  Kamath and Steinke (2020), Proposition 12 (= Asoodeh et al. 2021 / the
  conversion dp_accounting uses), taking the best order; also the zCDP bound
  of the summed rho upper curves at the continuous best order (CKS 2020). In the
  adaptive case the order cannot be chosen after the outputs: the figure is the
  Rényi filter's (`rdp_filter_figure`, below), the one a cap is decided by;
- `pld`: dp_accounting's PLD accountant, pessimistic discretisation (never
  below the true curve), identical events composed by self-composition.

Validity (docs/explanation/accounting.md). Every figure carries its accountant, case, theorem,
conversion and delta. There is one case: fully adaptive (any release may have been chosen after
earlier outputs were seen), so only filters and odometers are valid (Rogers et al. 2016; Feldman
and Zrnic 2021). The PLD figure is information only (had the whole plan been fixed in advance, at
the whole delta); it never decides a cap and is never the headline. The figure a command prints is
the smallest valid one; none is ever below the true bound.

Caps: each is a privacy filter fixed when it is set (`cap_decision`, filters.py): a pure-epsilon
cap keeps the pure sum, a rho cap the sum of rho; a cap at a delta is the running figure, a
Gaussian-DP filter or a Rényi filter at one order. Each decision says which one decided.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from functools import lru_cache

from ..core.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use

from .spend import (ALLOWANCE, CONVERSION_NAME, FILTER_ORDERS, ORDER_SHARE, Spend, filter_delta,
                    within_allowance)
from . import filters
from .catalogue import derive_guarantees, gaussian_multiplier
from ..core.numbers import INF, Number
from ..core.records import CHARGED_STATUSES, Family, Mechanism, Relation, Release, Status

ACCOUNTANTS = ("basic", "rdp", "pld")

# The fixed grid of Rényi orders (dp_accounting's default grid, which is dense where
# the Gaussian and Laplace optima lie, plus very large orders for tiny deltas).
# (built on first use, with numpy: a `check` against a rho or pure cap never needs them)
def _grids():
    if "_GRIDS" not in globals():
        orders = np.asarray([1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64))
                            + [64, 80, 96, 128, 192, 256, 384, 512, 1024], dtype=np.float64)
        # The orders a Rényi filter uses, fixed in this code (so fixed before any cap is set):
        # few, since the delta is split over them.
        filter_orders = np.asarray(FILTER_ORDERS, dtype=np.float64)  # (spend.py: with their shares of delta)
        index = np.asarray([int(np.flatnonzero(np.isclose(orders, a))[0]) for a in filter_orders])
        # the filter's per-order constants of rdp_filter_epsilon, evaluated once: the same arrays
        # (same numpy functions on the same orders), so the same figures to the bit
        constants = (np.log1p(-1 / filter_orders), np.log(filter_orders), filter_orders - 1)
        globals()["_GRIDS"] = {"ORDERS": orders, "FILTER_ORDERS": filter_orders, "_FILTER_INDEX": index,
                               "_FILTER_CONSTANTS": constants}
    return globals()["_GRIDS"]


def __getattr__(name: str):
    """ORDERS, FILTER_ORDERS and _FILTER_INDEX, built on first use."""
    if name in ("ORDERS", "FILTER_ORDERS", "_FILTER_INDEX"):
        return _grids()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PLD_INTERVAL = 1e-3  # dp_accounting's value discretisation interval; pessimistic, so only looser
_MARGIN = 1e-9  # relative allowance for float error in summed curves and conversions (rounded up)

THEOREMS = {
    "basic": "basic composition (Tan Prop 3.4; Dwork and Roth 2014, Thm 3.16) with zCDP summed "
             "(Bun and Steinke 2016, Lemma 2.3)",
    "rdp": "Rényi DP composition (Mironov 2017, Prop 1): randomized response's curve for pure guarantees, "
           "a*rho for zCDP, the Laplace (Mironov 2017, Prop 6) and Gaussian curves",
    "pld": "privacy-loss-distribution composition (Meiser and Mohammadi 2018; Koskela et al. 2020), "
           "dp_accounting's pessimistic PLD accountant",
}
CONVERSIONS = {
    "basic": CONVERSION_NAME,
    "rdp": "Canonne-Kamath-Steinke (2020) Prop 12 conversion at the Rényi orders fixed in advance (the Rényi "
           "filter, Feldman and Zrnic 2021, Thm 4.3), each at 1/22 of the delta the approximate allowance leaves",
    "rdp-filter": "Canonne-Kamath-Steinke (2020) Prop 12 conversion at the Rényi orders fixed in advance (the Rényi "
                  "filter, Feldman and Zrnic 2021, Thm 4.3), each at 1/22 of the delta the approximate allowance "
                  "leaves",
    "pld": "exact hockey-stick divergence of the discretised PLD (pessimistic), at the whole delta, had the whole "
           "plan been fixed in advance (information only)",
}
CASES = {
    "adaptive": "fully adaptive: any release may have been chosen after earlier outputs were seen",
    "fixed": "the tight figure had the whole plan been fixed in advance; not a bound under adaptive choices, "
             "never the headline and never a cap's",
}
# Every figure holds under full adaptivity (the one case a Figure or a Decision states).
ADAPTIVE = "adaptive"


# --------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Event:
    """One release's cost on a subset, as an accounting event (module docstring).

    kind: gaussian (a = noise multiplier sigma / sensitivity), laplace (a = scale /
    sensitivity), dlaplace (a = 1 / scale, b = integer sensitivity), pure (a = epsilon),
    zcdp (a = rho), approx (a = epsilon, b = delta), sampled (a = the amplified epsilon the
    release's guarantee records, b = beta = sample_size / population, c = the base
    mechanism's epsilon). Numbers are exact where recorded so.
    """

    kind: str
    a: Fraction
    b: Fraction | int | None = None
    c: Fraction | None = None

    @property
    def key(self) -> str:
        return (f"{self.kind}:{self.a}" + ("" if self.b is None else f":{self.b}")
                + ("" if self.c is None else f":{self.c}"))

    @staticmethod
    def from_key(key: str) -> Event:
        return _event_from_key(key)

    @property
    def pure_epsilon(self) -> float | None:
        """The pure epsilon the event is certified at, if it is pure (its D_infinity)."""
        if self.kind in ("pure", "sampled"):
            return float(self.a)
        if self.kind == "laplace":
            return max(float(1 / self.a), 5e-324)  # (a Fraction quotient: no overflow for a huge scale)
        if self.kind == "dlaplace":
            return float(self.a) * int(self.b)
        return None


@lru_cache(maxsize=65536)
def _event_from_key(key: str) -> Event:
    """Event.from_key, cached: a cap's running state names its events by key."""
    parts = key.split(":")
    b = None if len(parts) < 3 else (int(parts[2]) if parts[0] == "dlaplace" else Fraction(parts[2]))
    return Event(parts[0], Fraction(parts[1]), b, None if len(parts) < 4 else Fraction(parts[3]))


def spend_events(spend: Spend) -> list[Event]:
    """The events of one unit's guarantee (a release's or a family's cost), one per notion
    part: pure, zcdp, approx. A family charged with parts in several notions (docs/explanation/model.md#families,
    a componentwise bound) is charged every part: their composition bounds it. Callers
    handle unbounded spends before; a zero spend has no event. A family's worst-of-alternatives
    cost (`engine.Worst`) enters as its componentwise maximum, which bounds every alternative."""
    from .engine import Worst

    if isinstance(spend, Worst):
        spend = spend.bound()
    if spend.is_zero or spend.unbounded:
        return []
    events = []
    if spend.pure:
        events.append(Event("pure", spend.pure))
    if spend.rho:
        events.append(Event("zcdp", spend.rho))
    if spend.approx_delta or spend.approx_epsilon:
        events.append(Event("approx", spend.approx_epsilon, spend.approx_delta))
    return events


_EVENT_MECHANISMS = ("gaussian", "laplace", "geometric")


def mechanism_event(release: Release) -> Event | None:
    """The event the release's frozen mechanism parameters describe, or None.

    Only when the release's guarantees are exactly the ones its parameters imply
    (catalogue.derive_guarantees: for these mechanisms, one guarantee on everything
    read), for replacement neighbours: then the event covers everything the release
    reads. A Laplace or geometric release run on a sample (sample_size of population
    recorded, the ledger's catalogue deriving its amplified guarantee: Balle, Barthe and
    Gaboardi 2018, rounded up; docs/explanation/model.md#subsampling) keeps its sampling event, `sampled`. A release
    recorded with its amplified guarantee already worked out (epsilon_before_subsampling, run
    by the ledger) or without the sampling parameters is charged through its guarantee, as
    before."""
    mechanism = release.mechanism
    if mechanism.name not in _EVENT_MECHANISMS:
        return None
    event, derived = _mechanism_event(mechanism)
    if event is None or len(release.guarantees) != len(derived):
        return None
    for guarantee in release.guarantees:
        if guarantee.protects != release.reads or _value(guarantee) not in derived:
            return None
        if guarantee.charged_in not in (None, guarantee.relation):
            return None  # the event is the replace-one mechanism's: charged in another relation, not it
    return event


def release_event(release: Release) -> tuple[str | None, bool]:
    """(the key of the event the release's mechanism parameters describe, whether the release
    is charged through it): `IndexEvents` decides both from the whole release; the accounting
    rows (store.columns) keep them."""
    if release.mechanism.name not in _EVENT_MECHANISMS:
        return None, False
    event, _ = _mechanism_event(release.mechanism)
    if event is None:
        return None, False
    return event.key, mechanism_event(release) is not None


def _plain(value):
    """A parameter as a cheaply hashed key (a Fraction's hash costs a modular power)."""
    return (value.numerator, value.denominator) if type(value) is Fraction else value


def _value(guarantee) -> tuple:
    return (guarantee.notion, guarantee.epsilon, guarantee.delta, guarantee.rho, guarantee.relation)


@lru_cache(maxsize=4096)
def _mechanism_event(mechanism: Mechanism) -> tuple[Event | None, frozenset]:
    """(event, the values of the guarantees the parameters imply), per distinct mechanism."""
    if mechanism.param("sample_size") is not None:
        return _sampled_event(mechanism)
    derived, problems = derive_guarantees(mechanism, frozenset())
    if problems or not derived or any(g.relation != Relation.REPLACE for g in derived):
        return None, frozenset()
    values = frozenset(_value(g) for g in derived)
    if mechanism.name == "gaussian":
        # sigma / sensitivity as recorded, or the smallest an (epsilon, delta) claim allows
        multiplier = gaussian_multiplier(mechanism)
        return (Event("gaussian", multiplier), values) if multiplier else (None, frozenset())
    if mechanism.name == "laplace":
        # dp_accounting's LaplaceDpEvent: noise multiplier scale / L1 sensitivity = 1 / epsilon
        epsilon = derived[0].epsilon
        return (Event("laplace", 1 / Fraction(epsilon)), values) if epsilon else (None, frozenset())
    if mechanism.name == "geometric":
        scale, sensitivity = mechanism.param("scale"), mechanism.param("sensitivity")
        if scale and sensitivity and Fraction(sensitivity).denominator == 1:
            # two-sided geometric P(z) ∝ e^(-|z| / scale): discrete Laplace with a = 1 / scale
            return Event("dlaplace", 1 / Fraction(scale), int(sensitivity)), values
    return None, frozenset()


def _sampled_event(mechanism: Mechanism) -> tuple[Event | None, frozenset]:
    """The sampling event of a Laplace or geometric release run on sample_size of population
    (docs/explanation/model.md#subsampling): its amplified epsilon (the catalogue's, as recorded), beta and the base epsilon."""
    from .catalogue import CATALOGUE

    if (mechanism.name == "gaussian" or mechanism.param("epsilon_before_subsampling") is not None
            or mechanism.param("population") is None):
        return None, frozenset()
    derived, problems = derive_guarantees(mechanism, frozenset())
    base, base_problems = CATALOGUE[mechanism.name](mechanism, frozenset())
    if (problems or base_problems or len(derived) != 1 or len(base) != 1 or derived[0].notion.value != "pure"
            or derived[0].relation != Relation.REPLACE or not derived[0].epsilon or not base[0].epsilon):
        return None, frozenset()
    beta = Fraction(mechanism.param("sample_size"), mechanism.param("population"))
    event = Event("sampled", Fraction(derived[0].epsilon), beta, Fraction(base[0].epsilon))
    return event, frozenset(_value(g) for g in derived)


def unit_events(release: Release, spend: Spend) -> list[Event]:
    """The events charged for a standalone release whose basic cost on the subset is `spend`."""
    if spend.is_zero:
        return []
    event = mechanism_event(release)
    return [event] if event is not None else spend_events(spend)


# --------------------------------------------------------------------------
# Curves
# --------------------------------------------------------------------------


def pure_curve(epsilon: float, orders: np.ndarray | None = None) -> np.ndarray:
    """Randomized response's Rényi curve: the largest of any epsilon-DP mechanism.

    D_a = log((e^(a eps) + e^((1 - a) eps)) / (1 + e^eps)) / (a - 1) (Mironov 2017,
    Prop 5 / Table II, randomized response); every epsilon-DP mechanism is a
    post-processing of randomized response (Kairouz, Oh and Viswanath 2015, §3), so
    by data processing its curve is below. Also bounded by eps (D_infinity) and by
    a eps^2 / 2 (Bun and Steinke 2016, Prop 3.3); the smallest of the three is kept."""
    if orders is None:
        orders = _grids()["ORDERS"]
    eps = float(epsilon)
    if eps == 0:
        return np.zeros_like(orders)
    a = orders
    value = (np.logaddexp(a * eps, (1 - a) * eps) - np.logaddexp(0.0, eps)) / (a - 1)
    value = value * (1 + _MARGIN) + 1e-15 / (a - 1)
    return np.minimum(np.minimum(value, eps), a * eps * eps / 2)


def laplace_curve(multiplier: float, orders: np.ndarray | None = None) -> np.ndarray:
    """The Laplace mechanism's exact Rényi curve, eps = 1 / multiplier (Mironov 2017, Prop 6):
    D_a = eps + log(1 + (a - 1)(e^((1 - 2a) eps) - 1) / (2a - 1)) / (a - 1)."""
    if orders is None:
        orders = _grids()["ORDERS"]
    eps = 1 / float(multiplier)
    a = orders
    value = eps + np.log1p((a - 1) * np.expm1((1 - 2 * a) * eps) / (2 * a - 1)) / (a - 1)
    value = value * (1 + _MARGIN) + 1e-15 / (a - 1)
    return np.minimum(value, pure_curve(eps, orders))


@lru_cache(maxsize=4096)
def event_curve(event: Event) -> np.ndarray:
    """The event's Rényi curve on ORDERS (read-only); approx events have none (zeros:
    they are charged by basic composition beside the curve)."""
    if event.kind == "pure":
        curve = pure_curve(float(event.a))
    elif event.kind == "zcdp":
        curve = _grids()["ORDERS"] * float(event.a) * (1 + _MARGIN)
    elif event.kind == "gaussian":  # rho = 1 / (2 m^2): the Gaussian's curve is exactly a * rho
        curve = _grids()["ORDERS"] * (1 / (2 * float(event.a) ** 2)) * (1 + _MARGIN)
    elif event.kind == "laplace":
        if event.a > Fraction(10**300):  # (a multiplier past the float range: epsilon below it, kept positive)
            curve = pure_curve(max(float(1 / event.a), 5e-324))
        else:
            curve = laplace_curve(float(event.a))
    elif event.kind == "dlaplace":
        curve = pure_curve(float(event.a) * int(event.b))
    elif event.kind == "sampled":
        curve = np.minimum(pure_curve(float(event.a)), sampled_curve(float(event.c), float(event.b)))
    else:
        curve = np.zeros_like(_grids()["ORDERS"])
    curve.setflags(write=False)
    return curve


def subsampled_wor_curve(base: np.ndarray, eps_inf: float, beta: float, orders: Sequence[int]) -> np.ndarray:
    """Wang, Balle and Kasiviswanathan (2019, AISTATS), Theorem 9: sampling without replacement a
    fraction beta of the records, replace-one neighbours, a base mechanism with Rényi curve
    eps(j) at the integer orders j = 2..max_order (base[j - 2]) and eps(inf) = eps_inf. At every
    integer order a >= 2 the subsampled mechanism has Rényi divergence at most

        log(1 + beta^2 C(a, 2) min{4 (e^eps(2) - 1), e^eps(2) min{2, (e^eps(inf) - 1)^2}}
              + sum_{j=3..a} beta^j C(a, j) e^((j - 1) eps(j)) min{2, (e^eps(inf) - 1)^j}) / (a - 1).

    Returns the bound at the integer `orders` (each >= 2, base covering 2..max(orders)),
    evaluated in log space and rounded up by _MARGIN.
    dp_accounting's `_compute_rdp_sample_wor_gaussian` is this theorem for a Gaussian base (with
    the forward-difference strengthening of its Theorem 27 for the j >= 3 terms below order 256)."""
    from scipy.special import gammaln

    orders = np.asarray(orders, dtype=np.int64)
    j = np.arange(2, int(orders.max()) + 1)  # the terms' index
    if beta >= 1:
        return np.asarray(base, dtype=np.float64)[orders - 2] * (1 + _MARGIN)
    log_beta = math.log(beta)
    log_cap = math.log(2.0) if eps_inf == math.inf else None
    # log min{2, (e^eps_inf - 1)^j}
    if log_cap is None:
        log_em1 = math.log(math.expm1(eps_inf)) if eps_inf < 700 else eps_inf
        log_min = np.minimum(math.log(2.0), j * log_em1)
    else:
        log_min = np.full(len(j), log_cap)
    eps2 = float(base[0])
    log_first = min(math.log(4.0) + math.log(math.expm1(eps2)), eps2 + float(log_min[0]))  # the j = 2 term
    log_terms = (j - 1) * np.asarray(base[: len(j)], dtype=np.float64) + log_min + j * log_beta
    log_terms[0] = 2 * log_beta + log_first
    out = np.empty(len(orders))
    for k, a in enumerate(orders):
        i = np.arange(2, a + 1)
        log_comb = gammaln(a + 1) - gammaln(i + 1) - gammaln(a - i + 1)
        total = np.logaddexp.reduce(np.concatenate(([0.0], log_comb + log_terms[: a - 1])))
        out[k] = total / (a - 1)
    return out * (1 + _MARGIN) + 1e-15


def sampled_curve(base_epsilon: float, beta: float, orders: np.ndarray | None = None) -> np.ndarray:
    """A subsampled epsilon-DP release's Rényi curve on the grid: Wang, Balle and Kasiviswanathan
    2019, Theorem 9 with randomized response's curve at the base epsilon (valid for any
    epsilon-DP base mechanism, `pure_curve`) and eps(inf) = the base epsilon, at integer orders;
    a fractional order takes the next integer order's value (Rényi divergence does not fall
    with the order: van Erven and Harremoës 2014, Thm 3). `event_curve` keeps the smaller of
    this and randomized response's curve at the amplified epsilon, order by order."""
    if orders is None:
        orders = _grids()["ORDERS"]
    needed = np.ceil(orders).astype(np.int64)
    integer = np.arange(2, int(needed.max()) + 1, dtype=np.float64)
    distinct = np.unique(needed)
    bound = subsampled_wor_curve(pure_curve(base_epsilon, integer), base_epsilon, beta, distinct)
    return bound[np.searchsorted(distinct, needed)]


def event_rho(event: Event) -> float:
    """A rho with curve <= a * rho at every order (for the continuous-order zCDP bound)."""
    if event.kind in ("zcdp",):
        return float(event.a)
    if event.kind == "gaussian":
        return 1 / (2 * float(event.a) ** 2)
    eps = event.pure_epsilon
    return 0.0 if eps is None else eps * eps / 2  # Bun and Steinke 2016, Prop 3.3


def rdp_epsilon(curve: np.ndarray, delta: float, orders: np.ndarray | None = None) -> tuple[float, float]:
    """(epsilon, order): the CKS 2020 Prop 12 conversion at every order, the smallest, rounded up.

    epsilon = D_a + log(1 - 1/a) - (log delta + log a) / (a - 1)."""
    if orders is None:
        orders = _grids()["ORDERS"]
    if delta <= 0:
        return INF, math.nan
    if not np.any(curve):
        return 0.0, math.nan
    a = orders
    eps = curve + np.log1p(-1 / a) - (math.log(delta) + np.log(a)) / (a - 1)
    k = int(np.argmin(eps))
    return _up(max(float(eps[k]), 0.0)), float(a[k])


# --------------------------------------------------------------------------
# A subset's composition, as data
# --------------------------------------------------------------------------


@dataclass
class Composition:
    """What the accountants need about one subset: event counts and the exact basic spend.
    Built by `composition`."""

    basic: Spend
    events: Counter = field(default_factory=Counter)  # Event -> count (approx events included)
    unbounded: bool = False
    known_curve: np.ndarray | None = None  # the summed curve, when computed over arrays
    allowance: Fraction = ALLOWANCE  # the dataset's (Dataset.allowance): how its figures are stated

    def curve(self) -> np.ndarray:
        if self.known_curve is not None:
            return self.known_curve
        return summed_curve((event.key, count) for event, count in self.events.items() if event.kind != "approx")

    def approx(self) -> tuple[Fraction, Fraction]:
        eps, delta = Fraction(0), Fraction(0)
        for event, count in self.events.items():
            if event.kind == "approx":
                eps += count * event.a
                delta += count * event.b
        return eps, delta



def _naive(moment: datetime) -> datetime:
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)  # naive: UTC


def published_moment(release: Release) -> datetime | None:
    """When a charged release's output became public: its publication time; a release
    recorded as already published without one was published when recorded (at the latest)."""
    if release.published_at is not None:
        return release.published_at
    if release.status in (Status.PUBLISHED, Status.RETRACTED):
        return release.recorded_at or datetime.min
    return None


def composition(releases: Iterable[Release], families: Iterable[Family], subset: Iterable[str],
                basic: Spend | None = None) -> Composition:
    """The reference path: every release's event on `subset`, families charged by their
    guarantee (docs/explanation/model.md#families), release by release (`index_composition` is the fast path)."""
    from .engine import family_cost, ledger_cost, release_cost

    subset = frozenset(subset)
    releases = [r for r in releases if r.status in CHARGED_STATUSES]
    family_map = {f.id: f for f in families}
    comp = Composition(basic if basic is not None else ledger_cost(releases, family_map.values(), subset))
    members: dict[str, list[Release]] = {}
    for release in releases:
        if release.family is not None and release.family in family_map:
            # every member: a record moving between a keyed family's parts changes what a member
            # that reads nothing of the subset releases too (docs/explanation/model.md#families), as ledger_cost charges it
            members.setdefault(release.family, []).append(release)
        if not subset & release.reads:
            continue
        if release.family is not None and release.family in family_map:
            continue
        spend = release_cost(release, subset)
        if spend.unbounded:
            comp.unbounded = True
            continue
        comp.events.update(unit_events(release, spend))
    for fid, group in members.items():  # (0 where no member reads the subset: engine.family_options)
        spend = family_cost(family_map[fid], group, subset)
        if spend.unbounded:
            comp.unbounded = True
        else:
            comp.events.update(spend_events(spend))
    if comp.basic.unbounded:
        comp.unbounded = True
    return comp


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """One accountant's epsilon for one subset at one delta, with what makes it valid."""

    accountant: str
    epsilon: Number  # INF when not protected or not available at this delta
    delta: Fraction | None  # None: a pure epsilon (no delta)
    valid: bool
    case: str  # ADAPTIVE: every figure holds under full adaptivity
    theorem: str
    conversion: str | None
    available: bool = True  # False: the accountant cannot represent some release here
    note: str = ""
    order: float | None = None  # the Rényi order that gave the rdp figure

    def to_json(self) -> dict:
        from ..core.numbers import figure_fields

        return {"accountant": self.accountant, **figure_fields("epsilon", self.epsilon),
                **figure_fields("delta", self.delta), "valid": self.valid,
                "available": self.available, "case": self.case, "theorem": self.theorem,
                "conversion": self.conversion, "note": self.note}


def basic_figure(comp: Composition, delta: Fraction, case: str) -> Figure:
    return _basic_spend_figure(comp.basic, delta, case, comp.allowance)


def _basic_spend_figure(spend, delta: Fraction, case: str, allowance: Fraction) -> Figure:
    pure = spend.is_pure and not spend.unbounded
    return Figure("basic", spend.epsilon(delta, allowance), None if pure else delta, True, case, THEOREMS["basic"],
                  None if pure or not spend.rho else CONVERSIONS["basic"])


def rdp_figure(comp: Composition, delta: Fraction, case: str) -> Figure:
    """The Rényi accountant's figure: the Rényi filter's at the orders fixed in advance, the
    delta the allowance leaves split over them (`rdp_filter_figure`, Feldman and Zrnic 2021,
    Thm 4.3 at each order). The order is never chosen after the outputs were seen."""
    if comp.unbounded:
        return Figure("rdp", INF, delta, True, case, THEOREMS["rdp"], CONVERSIONS["rdp-filter"])
    approx_delta = comp.approx()[1]
    note = ("the approximate releases' deltas pass the allowance at this delta"
            if not within_allowance(approx_delta, delta, comp.allowance) else
            "approximate guarantees by basic composition" if approx_delta else "")
    return Figure("rdp", rdp_filter_figure(comp, delta), delta, True, case, THEOREMS["rdp"],
                  CONVERSIONS["rdp-filter"], note=note)


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
    error (~1e-12 relative), and the property test (tests/test_accountant_consistency.py)
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


def figures(comp: Composition, delta: Fraction, invalid_pld: bool = True) -> dict[str, Figure]:
    """The three accountants' figures for one subset at `delta`. `invalid_pld=False`: the PLD
    figure, never valid (information only), is not computed (`best` never chooses it;
    dp_accounting is not even imported): a Figure marked not available."""
    case = ADAPTIVE
    pld = pld_figure(comp, delta, case) if invalid_pld else _pld_not_computed(comp, delta, case)
    return {"basic": basic_figure(comp, delta, case), "rdp": rdp_figure(comp, delta, case), "pld": pld}


PURE_PREFERENCE = 1e-3  # a figure at delta replaces a pure one only when smaller by more than this share


def best(found: Mapping[str, Figure]) -> Figure:
    """The smallest valid figure. Ties go to the earlier accountant (basic, rdp, pld); a pure
    basic figure (which holds at delta 0, a stronger statement) is kept unless a figure at
    the delta is smaller by more than PURE_PREFERENCE of it (one pure release of 0.4 stays
    0.4, not 0.3999999984 at 1e-9)."""
    candidates = [f for f in found.values() if f.valid and f.available]
    chosen = _smallest(candidates, lambda f: float(f.epsilon), lambda f: f.accountant)
    basic = found.get("basic")
    if (basic is not None and basic.delta is None and chosen is not basic
            and float(chosen.epsilon) >= float(basic.epsilon) * (1 - PURE_PREFERENCE)):
        return basic
    return chosen


TIE = 1e-9  # figures this close (relative) are one figure: the same statement summed in another order


def _smallest(items, value_of, accountant_of):
    """The item of the smallest value, the earlier accountant (basic, rdp, pld) among those within
    TIE of it: basic's and the Rényi filter's zCDP statement are the same one, their sums of rho
    formed in other orders (over arrays for pairs), so which one is named must not turn on ulps."""
    low = min(value_of(item) for item in items)
    close = [item for item in items if value_of(item) <= low * (1 + TIE)]  # (∞ <= ∞: all ∞ are close)
    return min(close, key=lambda item: ACCOUNTANTS.index(accountant_of(item)))


def _up(value: float) -> float:
    if math.isinf(value):
        return value
    return math.nextafter(value * (1 + _MARGIN), math.inf)


# --------------------------------------------------------------------------
# The fast path: a LedgerIndex's arrays (the table, subset queries on large ledgers)
# --------------------------------------------------------------------------


class IndexEvents:
    """Per release of a LedgerIndex: its mechanism event (id, -1 none), its recording and
    publication moments as numbers (the report's cumulative chart orders releases by them), and
    per guarantee value id its event id; built once per index."""

    def __init__(self, index):
        self.index = index
        events: list[Event] = []
        ids: dict[Event, int] = {}

        def event_id(event: Event | None) -> int:
            if event is None:
                return -1
            if event not in ids:
                ids[event] = len(events)
                events.append(event)
            return ids[event]

        # per distinct mechanism and guarantee value, keyed by integers, so that 100,000
        # releases cost dictionary lookups, not Fraction hashing
        by_mechanism: dict = {}
        by_guarantee: dict = {}
        mech = np.full(len(index.releases), -1, dtype=np.int64)
        _, first_guarantee = index._guarantee_spans()
        g_value = index.g_value.tolist()
        first_guarantee = first_guarantee.tolist()
        fraction = Fraction
        for i, release in enumerate(index.releases):
            mechanism = release.mechanism
            if mechanism.name not in _EVENT_MECHANISMS:
                continue
            key = (mechanism.name, tuple((k, v.numerator, v.denominator) if type(v) is fraction else (k, v)
                                         for k, v in mechanism.params))
            found = by_mechanism.get(key)
            if found is None:
                event, derived = _mechanism_event(mechanism)
                found = by_mechanism[key] = (event_id(event), derived, mechanism)  # (kept alive: ids stay unique)
            if found[0] < 0 or len(release.guarantees) != len(found[1]):
                continue
            ok = True
            for offset, guarantee in enumerate(release.guarantees):
                # the index's value id and the relation name the guarantee's value exactly (for one
                # relation the value is a function of the charged spend, and back)
                gkey = (key, g_value[first_guarantee[i] + offset], guarantee.relation)
                matches = by_guarantee.get(gkey)
                if matches is None:
                    matches = by_guarantee[gkey] = (_value(guarantee) in found[1], guarantee)
                if not matches[0] or guarantee.protects != release.reads:
                    ok = False
                    break
            if ok:
                mech[i] = found[0]
        self.mech = mech
        # a guarantee value has one notion, so one event (several parts: -2, handled one by one)
        self.value_event = np.asarray([_single(event_id, spend_events(v)) for v in index.values], dtype=np.int64)
        self.events = events
        self.event_id = event_id
        self.recorded = _stamps([r.recorded_at for r in index.releases])
        published = [published_moment(r) for r in index.releases]
        self.published = _stamps([None if m == datetime.min else m for m in published])
        self.published[[k for k, m in enumerate(published) if m is None]] = np.inf
        self.published[[k for k, m in enumerate(published) if m == datetime.min]] = -np.inf

    def composition(self, ids: np.ndarray, subset: frozenset[str], basic: Spend) -> Composition:
        """The subset's Composition from per-release value ids (LedgerIndex.cost_ids or a
        column of the table's cells), simple releases over arrays, the rest one by one."""
        from .engine import release_cost

        index = self.index
        comp = Composition(basic, allowance=index.allowance)
        touched = ids != index.ZERO_ID
        if basic.unbounded or np.any(ids[index.simple] == index.NONE):
            comp.unbounded = True
        simple = index.simple & touched & ~index.value_is_zero[ids]
        ev = np.where(self.mech >= 0, self.mech, self.value_event[ids])[simple]
        for value in np.unique(ids[simple][ev == -2]) if np.any(ev == -2) else ():
            count = int(np.sum((ids[simple] == value) & (ev == -2)))
            for event in spend_events(index.values[int(value)]):
                comp.events[event] += count
        ev = ev[ev >= 0]
        if len(ev):
            counts = np.bincount(ev)
            for k in np.flatnonzero(counts):
                comp.events[self.events[k]] += int(counts[k])
        # families in id order: an index of the releases touching a subset meets them in another
        # order than the whole index, and the events' order is the order the curves are summed in
        for fid, rows in sorted(index.members.items()):
            if not touched[rows].any():
                continue
            spend = family_cases(index, fid).cost(touched[rows], subset)
            if spend.unbounded:
                comp.unbounded = True
            else:
                comp.events.update(spend_events(spend))
        for i in index.ambiguous:
            if touched[i]:
                spend = release_cost(index.releases[i], subset)
                if spend.unbounded:
                    comp.unbounded = True
                else:
                    comp.events.update(unit_events(index.releases[i], spend))
        return comp


class FamilyCases:
    """`engine.family_cost` of one family on subsets, composed once per distinct case.

    When every member costs one value on every part of what it reads (one candidate on every
    nonempty part, and one add/remove cost), `engine.family_options` has one combination: the
    worst (`engine.worst_of`, a function of the *set* of its inputs) of the touched members'
    values, zero for an untouched member, and, when the subset meets the partition key, the
    moves (every member's add/remove cost, alone or two together: they do not depend on the
    subset). So the cost depends only on (the set of touched members' values, whether a member
    is untouched, whether the key is met), and is composed once per such case. Any other
    family: `family_cost` itself."""

    def __init__(self, index, fid: str):
        from itertools import combinations

        from .engine import UNBOUNDED, ZERO, Relation, _covering, _moves, candidates

        self.family = index.families[fid]
        self.members = [index.releases[i] for i in index.members[fid]]
        self.cache: dict = {}
        self.key = frozenset(self.family.partition or ())
        values: dict = {}
        bits, moves = [], []
        for member in self.members:
            parts = sorted(member.reads)
            if not parts or len(parts) > FAMILY_CASE_READS:
                values = None
                break
            found = {candidates(member, frozenset(part)) or (UNBOUNDED,)
                     for size in range(1, len(parts) + 1) for part in combinations(parts, size)}
            move = _covering(member.guarantees, member.reads, Relation.ADD_REMOVE) or (UNBOUNDED,)
            if len(found) != 1 or len(next(iter(found))) != 1 or len(move) != 1 or len(values) >= PAIR_FAMILY_VALUES:
                values = None
                break
            bits.append(1 << values.setdefault(next(iter(found))[0], len(values)))
            moves.append(move[0])
        self.uniform = values is not None
        if self.uniform:
            self.values = list(values)
            self.bits = np.asarray(bits, dtype=np.int64)
            self.moves = _moves(moves) if self.key else []
            self.zero, self.unbounded = ZERO, UNBOUNDED

    def cost(self, touched: np.ndarray, subset: frozenset[str]):
        """c_F(U) (`engine.family_cost`), `touched`: which members read something of U."""
        from .engine import family_cost

        if not self.uniform:
            return family_cost(self.family, self.members, subset)
        mask = int(np.bitwise_or.reduce(self.bits[touched])) if touched.any() else 0
        return self.case_cost(mask, bool(not touched.all()), bool(self.key & subset))

    def case_cost(self, mask: int, untouched: bool, keyed: bool):
        """The cost of a uniform family when the touched members' values are the bits of `mask`,
        some member is `untouched`, and the subset meets the key (`keyed`)."""
        from .engine import option_pareto, worst_of

        case = (mask, untouched, keyed)
        found = self.cache.get(case)
        if found is None:
            spends = [v for b, v in enumerate(self.values) if (mask >> b) & 1]
            spends += [self.zero] if untouched else []
            spends += self.moves if keyed else []
            options = option_pareto([worst_of(spends)])
            found = self.cache[case] = options[0] if options else self.unbounded
        return found


FAMILY_CASE_READS = 4  # members reading more variables are composed by family_cost itself (2^k parts)


def family_cases(index, fid: str) -> FamilyCases:
    """The index's FamilyCases of family `fid`, made once."""
    found = index.__dict__.setdefault("_family_cases", {})
    cases = found.get(fid)
    if cases is None:
        cases = found[fid] = FamilyCases(index, fid)
    return cases


def _single(event_id, events: list[Event]) -> int:
    if not events:
        return -1
    return event_id(events[0]) if len(events) == 1 else -2


def stored_index_events(index, stored: np.ndarray, events: Sequence[Event], charged: np.ndarray,
                        recorded: np.ndarray, published: np.ndarray) -> IndexEvents:
    """The `IndexEvents` of an index built from stored accounting rows (columns.index_for), without the whole releases. Per release of the index: `stored`, the event its
    mechanism's parameters describe, as a position in `events` (-1: none); `charged`, whether
    it is charged through that event (`mechanism_event`); its times as `IndexEvents` keeps
    them (recorded: seconds since the epoch, -inf unknown; published: `published_moment` in
    seconds, inf none, -inf datetime.min). `events` must be in the order `IndexEvents.__init__`
    meets them (by their first charged release of the dataset); the guarantee values' events
    follow, so every float sum runs in the same order and the figures are the same. Cached
    on the index, where `index_events` finds it."""
    found = IndexEvents.__new__(IndexEvents)
    found.index = index
    found.events = list(events)
    ids = {event: k for k, event in enumerate(found.events)}

    def event_id(event: Event | None) -> int:
        if event is None:
            return -1
        if event not in ids:
            ids[event] = len(found.events)
            found.events.append(event)
        return ids[event]

    found.event_id = event_id
    stored = np.asarray(stored, dtype=np.int64).reshape(len(index.releases))
    found.mech = np.where(np.asarray(charged, dtype=bool), stored, -1)
    found.value_event = np.asarray([_single(event_id, spend_events(v)) for v in index.values], dtype=np.int64)
    found.recorded = np.asarray(recorded, dtype=np.float64)
    found.published = np.asarray(published, dtype=np.float64)
    index.__dict__["_accountant_events"] = found
    return found


def index_events(index) -> IndexEvents:
    cached = index.__dict__.get("_accountant_events")
    if cached is None:
        cached = index.__dict__["_accountant_events"] = IndexEvents(index)
    return cached


def subset_figures(index, subset: Iterable[str], delta: Fraction, basic: Spend, invalid_pld: bool = True
                   ) -> dict[str, Figure]:
    """The three figures for one subset of a LedgerIndex (`basic` from `subset_cost`);
    `invalid_pld`: as `figures`."""
    subset = frozenset(subset)
    ids = index.cost_ids([index.column[name] for name in sorted(subset)])
    return figures(index_events(index).composition(ids, subset, basic), delta, invalid_pld)


def table_figures(index, table, delta: Fraction, accountants: Sequence[str] = ("basic", "rdp"),
                  invalid_pld: bool = True) -> tuple[list[dict[str, Figure]], dict[str, Figure]]:
    """Per variable (the total row of Tan's Table 1) and for the whole dataset, the figures
    of the named accountants (PLD only when asked: it is the slow one; `invalid_pld=False`:
    not computed, as `figures`). The single-variable columns are composed together over
    arrays: event counts by one bincount, curves by one matrix product."""
    events = index_events(index)
    n_rel, n_var = table.cells.shape
    cells = table.cells
    simple = index.simple
    several = np.flatnonzero(events.value_event == -2)  # guarantee values with several parts
    if len(several) and np.isin(cells[simple], several).any():  # then column by column
        per_variable = [_some(events.composition(cells[:, j], frozenset({name}), table.total[j]), delta, accountants,
                               invalid_pld)
                        for j, name in enumerate(index.variables)]
    else:
        # the cells a release does not read are 0 (ZERO_ID): the read entries hold every other
        rows, cols = index.read_entries()
        ids = cells[rows, cols]
        keep = simple[rows] & (ids != index.ZERO_ID)
        rows, cols, ids = rows[keep], cols[keep], ids[keep]
        event_ids = np.where(events.mech[rows] >= 0, events.mech[rows], events.value_event[ids])
        keep = ~index.value_is_zero[ids] & (event_ids >= 0)
        n_events = max(len(events.events), 1)
        counts = np.bincount(cols[keep] * n_events + event_ids[keep],
                             minlength=n_var * n_events).reshape(n_var, n_events)
        curves = np.asarray([event_curve(e) for e in events.events]) if events.events else np.zeros((1, len(_grids()["ORDERS"])))
        summed = counts @ curves
        unbounded = np.zeros(n_var, dtype=bool)
        unbounded[cols[ids == index.NONE]] = True
        others = bool(index.members) or bool(index.ambiguous)
        per_variable = []
        for j, name in enumerate(index.variables):
            comp = Composition(table.total[j], Counter({events.events[k]: int(counts[j, k])
                                                        for k in np.flatnonzero(counts[j])}),
                               bool(unbounded[j]) or table.total[j].unbounded, allowance=index.allowance)
            if others:  # families and releases with a choice, one by one
                extra = events.composition(np.where(simple, index.ZERO_ID, cells[:, j]), frozenset({name}), Spend())
                comp.events.update(extra.events)
                comp.unbounded |= extra.unbounded
            else:
                comp.known_curve = summed[j]
            per_variable.append(_some(comp, delta, accountants, invalid_pld))
    comp = events.composition(table.dataset_wide, frozenset(index.variables), table.total_dataset_wide)
    return per_variable, _some(comp, delta, accountants, invalid_pld)


def _some(comp: Composition, delta: Fraction, accountants: Sequence[str], invalid_pld: bool = True
          ) -> dict[str, Figure]:
    case = ADAPTIVE
    makers = {"basic": basic_figure, "rdp": rdp_figure, "pld": pld_figure}
    if not invalid_pld:
        makers["pld"] = _pld_not_computed
    return {name: makers[name](comp, delta, case) for name in accountants}


def _pld_not_computed(comp: Composition, delta: Fraction, case: str) -> Figure:
    """The PLD figure (never valid: information only) where it is not asked for: not computed
    (`best` never chooses it), as `figures(invalid_pld=False)` says it."""
    return Figure("pld", INF, delta, False, case, THEOREMS["pld"], CONVERSIONS["pld"], available=False,
                  note="not computed (information only: " + CASES["fixed"] + ")")


_EPOCH = datetime(1970, 1, 1)
from datetime import UTC as _UTC  # noqa: E402


def _stamp(moment: datetime) -> float:
    """Seconds since the epoch, a naive time read as UTC."""
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=_UTC)).timestamp()


def _stamps(moments) -> np.ndarray:
    """`_stamp` of each moment (None: -inf); a run of the same object converted once (a file's
    releases share their recording time)."""
    out = np.empty(len(moments), dtype=np.float64)
    last, value = None, -np.inf
    for k, moment in enumerate(moments):
        if moment is not last:  # the same object as the previous release's: converted once
            last = moment
            value = -np.inf if moment is None else (
                moment.timestamp() if moment.tzinfo is not None else moment.replace(tzinfo=_UTC).timestamp())
        out[k] = value
    return out


# --------------------------------------------------------------------------
# Caps: running state per cap, and which valid filter decides (docs/explanation/accounting.md)
# --------------------------------------------------------------------------

# A state of another version is stale: recomputed from the accounting rows when read
# (cap_accounting.current_states); `audit verify` compares the current version's states only.
# 5: the events alone (no lifecycle moments: no case is inferred from them).
STATE_VERSION = 5


def cap_key(cap) -> str:
    """What a cap's running state belongs to: a replaced cap starts a new state."""
    known = _CAP_KEYS.get(id(cap))  # (a cap is frozen: its key, once per cap object)
    if known is not None and known[0] is cap:
        return known[1]
    key = "|".join([",".join(sorted(cap.subset)), str(cap.epsilon), str(cap.delta), str(cap.rho)])
    if len(_CAP_KEYS) >= 4096:
        _CAP_KEYS.clear()
    _CAP_KEYS[id(cap)] = (cap, key)
    return key


_CAP_KEYS: dict[int, tuple] = {}


def state_from_composition(cap, comp: Composition, family_events: Mapping[str, list[str]] | None = None) -> dict:
    events = Counter(comp.events)
    for keys in (family_events or {}).values():
        for key in keys:
            events[Event.from_key(key)] -= 1  # kept apart: a family's events change as members join
    return {
        "v": STATE_VERSION, "cap": cap_key(cap), "orders": [float(a) for a in _grids()["FILTER_ORDERS"]],
        "events": {e.key: c for e, c in sorted(events.items(), key=lambda item: item[0].key) if c > 0},
        "families": dict(family_events or {}), "unbounded": comp.unbounded,
    }


def state_from_history(cap, releases: Iterable[Release], families: Mapping[str, Family]) -> dict:
    """A cap's running state recomputed from every recorded release."""
    from .engine import family_cost

    releases = [r for r in releases if r.status in CHARGED_STATUSES]
    comp = composition(releases, families.values(), cap.subset, basic=Spend())
    family_events: dict[str, list[str]] = {}
    members: dict[str, list[Release]] = {}
    first_reading: dict[str, int] = {}  # the families' order: their first member reading the subset
    for k, release in enumerate(releases):  # every member (docs/explanation/model.md#families, as ledger_cost charges them)
        if release.family is not None and release.family in families:
            members.setdefault(release.family, []).append(release)
            if cap.subset & release.reads:
                first_reading.setdefault(release.family, k)
    for fid in first_reading:  # (in that order, as `state_from_index`)
        spend = family_cost(families[fid], members[fid], cap.subset)
        if not spend.unbounded and spend_events(spend):
            family_events[fid] = [e.key for e in spend_events(spend)]
    return state_from_composition(cap, comp, family_events)


def state_from_index(cap, index) -> dict:
    """`state_from_history` over a LedgerIndex of the charged releases (the accounting rows,
    columns.index_for): the subset's events from the index's arrays
    (`IndexEvents.composition`, families and releases with a choice one by one), and each
    family's events from its members read whole, as `state_from_history` takes them. The state
    is a function of event counts only (`state_from_composition` sorts the events), so it is
    the same dict."""
    from .engine import family_cost

    subset = frozenset(cap.subset)
    ids = index.cost_ids([index.column[name] for name in sorted(subset) if name in index.column])
    comp = index_events(index).composition(ids, subset, Spend())
    touching = {}
    for fid, rows in index.members.items():
        group = [index.releases[i] for i in rows]
        first = next((i for i, member in zip(rows, group) if subset & member.reads), None)
        if first is not None:  # every member, as ledger_cost charges the family (docs/explanation/model.md#families)
            touching[fid] = (first, group)
    family_events: dict[str, list[str]] = {}
    # in the order their first member reading the subset was recorded, as `state_from_history`
    # meets them (`state_composition` counts the families' events in this order)
    for fid, (_, group) in sorted(touching.items(), key=lambda item: item[1][0]):
        spend = family_cost(index.families[fid], group, subset)
        if not spend.unbounded and spend_events(spend):
            family_events[fid] = [e.key for e in spend_events(spend)]
    return state_from_composition(cap, comp, family_events)


def state_differences(stored: dict, expected: dict) -> list[str]:
    """What differs between a stored running state and the one recomputed from the releases,
    field by field, in words (`audit verify`)."""
    found = []
    for key in dict.fromkeys([*expected, *stored]):
        a, b = stored.get(key), expected.get(key)
        if key == "events":
            a, b = {k: int(v) for k, v in (a or {}).items()}, {k: int(v) for k, v in (b or {}).items()}
        if a != b:
            found.append(f"{key}: stored {json_text(stored.get(key))}, recomputed {json_text(expected.get(key))}")
    return found


def json_text(value) -> str:
    import json

    return json.dumps(value, sort_keys=True, default=str)


def state_is_current(cap, state: dict | None) -> bool:
    return bool(state) and state.get("v") == STATE_VERSION and state.get("cap") == cap_key(cap)


def state_apply(state: dict, cap, releases: Sequence[Release], families: Mapping[str, Family],
                members: Mapping[str, Sequence[Release]]) -> dict:
    """The state after recording `releases`.

    Works on the state's own fields: only what the plan touches is decoded (a check costs the
    same whatever the history's length, and little: no event of the history is rebuilt)."""
    from .engine import family_cost, release_cost

    events = dict(state["events"])  # (counts only grow here: no zero is ever kept)
    family_events = dict(state["families"])
    unbounded = state["unbounded"]
    joined: dict[str, list[Release]] = {}
    for release in releases:
        if release.status not in CHARGED_STATUSES:
            continue
        if release.family is not None and release.family in families and not cap.subset & release.reads:
            joined.setdefault(release.family, []).append(release)  # its moves count (docs/explanation/model.md#families)
            continue
        if not cap.subset & release.reads:
            continue
        if release.family is not None and release.family in families:
            joined.setdefault(release.family, []).append(release)
            continue
        spend = release_cost(release, cap.subset)
        if spend.unbounded:
            unbounded = True
        else:
            for event in unit_events(release, spend):
                key = event.key
                events[key] = int(events.get(key, 0)) + 1
    for fid, new in joined.items():
        everyone = [m for m in members.get(fid, ()) if m.status in CHARGED_STATUSES] + new
        spend = family_cost(families[fid], everyone, cap.subset)  # (0 where no member reads it)
        if spend.unbounded:
            unbounded = True
            family_events.pop(fid, None)
        elif spend_events(spend):
            family_events[fid] = [e.key for e in spend_events(spend)]
        else:
            family_events.pop(fid, None)
    return {**state, "v": STATE_VERSION, "cap": cap_key(cap), "events": events,
            "families": family_events, "unbounded": unbounded}


def state_composition(state: dict, basic: Spend) -> Composition:
    events = Counter({Event.from_key(k): int(c) for k, c in state["events"].items()})
    for keys in state["families"].values():
        for key in keys:
            events[Event.from_key(key)] += 1
    return Composition(basic, events, state["unbounded"] or basic.unbounded)


@dataclass(frozen=True)
class Decision:
    """Which accountant's valid figure a cap is checked with, under which case and theorem."""

    accountant: str
    value: Number  # in the cap's unit
    case: str  # ADAPTIVE: a filter holds whatever the order of its releases
    theorem: str

    def to_json(self, cap, admitted: bool) -> dict:
        from ..core.numbers import to_json

        return {"cap": f"{cap.dataset}/{cap.name}", "accountant": self.accountant, "case": self.case,
                "theorem": self.theorem, "figure": to_json(self.value), "limit": to_json(cap.limit, down=True),
                "admitted": admitted}


FILTER_THEOREMS = {
    "basic-pure": "pure-epsilon filter: the sum of epsilons (Rogers, Roth, Ullman and Vadhan 2016)",
    "basic": "the running figure (an odometer valid at every stopping time): the pure sum with approximate "
             "epsilons beside it, and the Rényi statements at the orders fixed in advance, each at 1/22 of the "
             "half of the delta the approximate allowance leaves (Feldman and Zrnic 2021, Theorem 4.3)",
}


def running_theorem(allowance: Fraction) -> str:
    """FILTER_THEOREMS["basic"] for a dataset's allowance (the default: half the delta)."""
    if allowance == ALLOWANCE:
        return FILTER_THEOREMS["basic"]
    return FILTER_THEOREMS["basic"].replace("the half of the delta", f"the {1 - allowance} of the delta")


def rdp_filter_epsilon(curve: np.ndarray, delta: float) -> float:
    """The Rényi filter's epsilon: at each of the fixed orders the CKS conversion at its share of
    delta (ORDER_SHARE, spend.py), the smallest (module docstring)."""
    if delta <= 0:
        return INF
    grids = _grids()
    sub = curve[grids["_FILTER_INDEX"]]
    if not sub.any():
        return 0.0
    # a = FILTER_ORDERS: eps = sub + log1p(-1/a) - (log(delta ORDER_SHARE) + log(a)) / (a - 1)
    log1p_inverse, log_order, order_less_one = grids["_FILTER_CONSTANTS"]
    eps = sub + log1p_inverse - (math.log(delta * ORDER_SHARE) + log_order) / order_less_one
    return _up(max(float(eps.min()), 0.0))


def rdp_filter_figure(comp: Composition, delta: Fraction) -> float:
    """The Rényi filter's epsilon for a cap at `delta` (valid when releases are adaptive):
    every curve the ledger knows (randomized response's for pure guarantees, a * rho for
    zCDP, the Laplace and Gaussian curves) summed at the orders FILTER_ORDERS fixed in this
    code (Feldman and Zrnic 2021, Theorem 4.3 holds for any RDP curve at a fixed order); the
    approximate (epsilon, delta) guarantees by the basic filter beside it, their deltas taken
    out of the cap's delta first and their epsilons added (an (eps, delta) mechanism is, but
    for probability delta, eps-pure, whose loss is at most eps at every order: Kairouz, Oh
    and Viswanath 2015, Lemma 3.4)."""
    approx_eps, approx_delta = comp.approx()
    remaining = filter_delta(delta, approx_delta, comp.allowance)
    if remaining <= 0:
        return INF
    value = rdp_filter_epsilon(comp.curve(), remaining)
    # (not the summed rho converted at its best order: that order follows the realized total, a
    # filter only for a rho budget fixed in advance, not a figure valid at every stopping time;
    # spend.py's module docstring)
    return _up(value + float(approx_eps)) if approx_eps else value


@lru_cache(maxsize=65536)
def _key_summary(key: str) -> tuple:
    """Per event key: (its curve or None for an approximate event, its rho bound, its
    approximate epsilon and delta), so a cap's state is summed without building Events."""
    event = Event.from_key(key)
    if event.kind == "approx":
        return None, 0.0, event.a, event.b
    return event_curve(event), event_rho(event), 0, 0


def summed_curve(items) -> np.ndarray:
    """The sum of count x curve over (event key, count) items, in one canonical order (counts merged
    per key, keys sorted, added one after another): the same bits whichever path lists the events
    (a composition, a cap's running state), so `subset` and `cap list` print the same last digit."""
    counts: dict[str, int] = {}
    for key, count in items:
        counts[key] = counts.get(key, 0) + count
    if not counts:
        return np.zeros_like(_grids()["ORDERS"])
    keys = tuple(sorted(counts))
    return np.asarray([counts[key] for key in keys], dtype=np.float64) @ _curve_matrix(keys)


@lru_cache(maxsize=4096)
def _state_sums(items: tuple) -> tuple:
    """(summed curve, summed rho bound, approximate epsilon, approximate delta) of a state's
    (event key, count) items: a decoded state, cached by its content."""
    plain = []
    rho, approx_eps, approx_delta = 0.0, Fraction(0), Fraction(0)
    for key, count in items:
        curve, r, a, b = _key_summary(key)
        if curve is None:
            approx_eps += count * a
            approx_delta += count * b
        else:
            plain.append((key, count))
            rho += count * r
    total = summed_curve(plain)  # (the composition's bits: Composition.curve)
    total.setflags(write=False)
    return total, rho, approx_eps, approx_delta


@lru_cache(maxsize=256)
def _curve_matrix(keys: tuple[str, ...]) -> np.ndarray:
    """The curves of these event keys stacked, one row each (`summed_curve`): a running state's keys
    change only when a new kind of event joins it, its counts at every record; the same matrix
    as stacking them again, so the same sums."""
    matrix = np.asarray([_key_summary(key)[0] for key in keys])
    matrix.setflags(write=False)
    return matrix


def _filter_from_state(state: dict, delta: Fraction, allowance: Fraction = ALLOWANCE) -> float:
    """`rdp_filter_figure` of a running state, from its cached sums (the Rényi filter at the fixed
    orders, approximate guarantees by basic beside them)."""
    items = tuple(state["events"].items())  # (in the state's own order: a cache key, not a meaning)
    if state["families"]:
        items += tuple((key, 1) for keys in state["families"].values() for key in keys)
    return _filter_value(items, delta, allowance)


@lru_cache(maxsize=4096)
def _filter_value(items: tuple, delta: Fraction, allowance: Fraction) -> float:
    curve, rho, approx_eps, approx_delta = _state_sums(items)
    remaining = filter_delta(delta, approx_delta, allowance)
    if remaining <= 0:
        return INF
    value = rdp_filter_epsilon(curve, remaining)  # (as rdp_filter_figure)
    return _up(value + float(approx_eps)) if approx_eps else value


def cap_decision(cap, basic_value: Number, spend: Spend | None, state: dict | None) -> Decision:
    """The figure a cap is checked with: its filter's (filters.py), fixed when the cap was set.

    A pure-epsilon cap keeps the pure sum, a rho cap the sum of rho. A cap at a delta is a
    Gaussian-DP filter or a Rényi filter at one order (`Cap.filter`); a Rényi filter whose
    admitted releases are all pure also holds by their pure sum, which spends no delta (it
    bounds the loss on every outcome), and takes it where it is smaller. Every figure can only
    rise when a release joins, so a check admits exactly what the filter admits."""
    if cap.rho is not None:
        return Decision("basic", basic_value, ADAPTIVE, filters.describe(cap))
    if cap.delta is None:
        return Decision("basic", basic_value, ADAPTIVE, filters.describe(cap))
    if state is None:  # (no running state to read the filter's sums from: the running figure, an odometer)
        return Decision("basic", basic_value, ADAPTIVE, running_theorem(cap.allowance))
    if state["unbounded"] or math.isinf(float(basic_value)) or (spend is not None and spend.unbounded):
        return Decision("basic", INF, ADAPTIVE, filters.describe(cap))
    items = _state_items(state)
    kind, order = filters.kind_of(cap.filter)
    if kind == filters.RUNNING:  # the odometer's statements, one union at the cap's delta (spend.py)
        rdp = _filter_value(items, cap.delta, cap.allowance)
        smaller = float(basic_value) > float(rdp) * (1 + TIE)  # (as `best` chooses: the subset's figure)
        if smaller and _state_is_pure(state):
            smaller = float(rdp) < float(basic_value) * (1 - PURE_PREFERENCE)
        return Decision("rdp" if smaller else "basic", rdp if smaller else basic_value, ADAPTIVE,
                        filters.describe(cap))
    if kind == filters.GAUSSIAN:
        counts: Counter = Counter()
        for key, count in items:
            event = Event.from_key(key)
            counts[(event.kind, event.a, event.b)] += count
        return Decision("gdp", filters.gaussian_figure(counts, cap.delta), ADAPTIVE, filters.describe(cap))
    order = order or cap_order(cap)
    curve, _rho, approx_eps, approx_delta = _state_sums(items)
    if not within_allowance(approx_delta, cap.delta, cap.allowance):
        return Decision("rdp", INF, ADAPTIVE, filters.describe(cap))
    at = int(np.flatnonzero(np.isclose(_grids()["ORDERS"], order))[0])
    value = filters.renyi_figure(float(curve[at]), order, cap.delta, float(approx_eps), cap.allowance)
    pure = spend.is_pure if spend is not None else _state_is_pure(state)
    if pure and float(basic_value) <= value:  # (the smaller of two that only grow: it never falls)
        return Decision("basic", basic_value, ADAPTIVE, FILTER_THEOREMS["basic-pure"])
    return Decision("rdp", value, ADAPTIVE, filters.describe(cap))


def cap_order(cap) -> float:
    """The order of a Rényi-filter cap: fixed by its epsilon, its delta and its dataset's allowance
    alone (filters.renyi_order)."""
    return filters.renyi_order(cap.epsilon, cap.delta, _grids()["ORDERS"], cap.allowance)


def choose_filter(cap, state: dict | None) -> str:
    """The filter a cap at a delta is given when it is set: Gaussian DP when the releases it
    already holds are Gaussian and there is at least one (exact for them), else the running
    figure's statements. A cap set with a filter keeps it; "renyi" gets its order (`cap_order`)."""
    if cap.filter == filters.RENYI:
        return f"{filters.RENYI}:{cap_order(cap):g}"
    if cap.filter is not None:
        return cap.filter
    keys = [] if state is None else [key for key, _ in _state_items(state)]
    if keys and all(key.startswith("gaussian:") for key in keys):
        return filters.GAUSSIAN
    return filters.RUNNING


def _state_items(state: dict) -> tuple:
    items = tuple(state["events"].items())
    if state["families"]:
        items += tuple((key, 1) for keys in state["families"].values() for key in keys)
    return items


_PURE_KINDS = ("pure", "laplace", "dlaplace", "sampled")


def _state_is_pure(state: dict) -> bool:
    keys = [*state["events"], *(key for keys in state["families"].values() for key in keys)]
    return all(key.split(":", 1)[0] in _PURE_KINDS for key in keys)




# --------------------------------------------------------------------------
# Every pair of variables over arrays: basic and rdp (pairs, the report's pairs panel)
# --------------------------------------------------------------------------


PAIR_ACCOUNTANTS = ("basic", "rdp", "pld")
# At most this many distinct compositions (event multisets) get a PLD figure in one `pairs`
# (the pairs with the largest Rényi figures first); each costs a PLD composition.
PAIR_PLD_LIMIT = 16
PAIR_PLD_SKIPPED = (f"not computed: pairs compute at most {PAIR_PLD_LIMIT} distinct PLD compositions (the "
                    "pairs with the largest Rényi figures first); `pairs --accountant pld` computes every "
                    "pair's, `subset A B` this one's")


@dataclass
class PairRdp:
    """The Rényi filter's figure of every pair {i, j} (and of {i} on the diagonal) as floats,
    the pairs composed one by one, and the PLD figure of the pairs (information only: had the
    plan been fixed in advance, `pair_pld`)."""

    epsilon: np.ndarray  # n x n, symmetric; inf where not protected or the deltas run out
    slow: dict  # (i, j) -> Composition, composed one by one (none since PairExtras: kept for callers)
    chosen: list = field(default_factory=list)  # the events of the array path
    counts: np.ndarray | None = None  # events x n x n: how many releases of each read i or j
    pld: dict = field(default_factory=dict)  # (i, j), i <= j -> the PLD Figure (information only)
    pld_epsilon: np.ndarray | None = None  # n x n floats of those figures; inf elsewhere
    pld_skipped: int = 0  # pairs left without a PLD figure by PAIR_PLD_LIMIT
    unbounded: np.ndarray | None = None  # n x n: a release or family leaves the pair unprotected


def pair_rdp(index, delta: Fraction, grid, pld_limit: int | None = PAIR_PLD_LIMIT) -> PairRdp:
    """`rdp_figure` for every pair over arrays (see `pair_figures`), one row of pairs at a time:
    the summed curves by a matrix product, the CKS Prop 12 conversion at every filter order by
    broadcasting (`rdp_filter_epsilon`).

    Every pair's events are the ones `IndexEvents.composition` counts for `subset A B`: the
    simple one-guarantee releases counted per event over arrays (`LedgerIndex.pair_counts`),
    the other releases and the families added by `PairExtras` (their cost on {i, j} depends
    only on what they read of it, so each distinct case is composed once, not once per pair)."""
    n = len(index.variables)
    events = index_events(index)
    n_guarantees, first = index._guarantee_spans()
    single = index.simple & (n_guarantees <= 1) & (first >= 0)
    rows = np.flatnonzero(single)
    if len(rows):  # one guarantee that protects everything the release reads (else: unbounded on a part)
        covered = _covered(index, rows, first[rows])
        if not covered.all():
            single[rows[~covered]] = False
            rows = rows[covered]
    value = index.g_value[first[rows]] if len(rows) else np.zeros(0, dtype=np.int64)
    ev = np.where(events.mech[rows] >= 0, events.mech[rows], events.value_event[value]) if len(rows) else value
    several = ev == -2  # a value with several parts: counted part by part with the others
    single[rows[several]] = False
    keep = (ev >= 0) & ~index.value_is_zero[value]
    rows, ev = rows[keep], ev[keep]
    extras = PairExtras(index, events, single)
    kinds = sorted({int(k) for k in np.unique(ev)} | set(extras.counts))
    chosen = [events.events[k] for k in kinds]
    slot_of = np.full(max(kinds, default=0) + 1, -1, dtype=np.int64)
    slot_of[kinds] = np.arange(len(kinds))
    groups = np.full(len(index.releases), -1, dtype=np.int64)
    groups[rows] = slot_of[ev]
    # per event, the releases reading i or j (exact integers, as floats for the products below)
    counts = index.pair_counts(groups, len(kinds)).astype(np.float64)
    for k, extra in extras.counts.items():
        counts[slot_of[k]] += extra
    approx = np.asarray([e.kind == "approx" for e in chosen], dtype=bool)
    orders = _grids()["ORDERS"]
    curves = (np.asarray([event_curve(e) for e in chosen])[~approx] if len(chosen)
              else np.zeros((0, len(orders))))
    a_eps = np.asarray([float(e.a) for e in chosen if e.kind == "approx"], dtype=np.float64)
    a_delta = np.asarray([float(e.b) for e in chosen if e.kind == "approx"], dtype=np.float64)
    # the Rényi filter's figure (rdp_filter_epsilon), what a pair shows (rdp_figure)
    filtered = np.full((n, n), np.inf)
    f_index, f_orders = _grids()["_FILTER_INDEX"], _grids()["FILTER_ORDERS"]
    f_log_term, f_log_a, f_a_1 = np.log1p(-1 / f_orders), np.log(f_orders), f_orders - 1
    remaining_of, approx_of = np.ones((n, n)), np.zeros((n, n))
    for i in range(n):
        c = counts[:, i, i:]  # events x pairs (i, i..n-1)
        plain = c[~approx] if len(chosen) else np.zeros((0, n - i))
        summed = plain.T @ curves  # pairs x orders
        approx_of[i, i:] = c[approx].T @ a_eps if approx.any() else 0.0
        approx_delta = c[approx].T @ a_delta if approx.any() else np.zeros(n - i)
        # filter_delta over arrays: what the allowance leaves, 0 past it (the sums a hair high: never
        # admitted past the exact sum)
        within = approx_delta * (1 + 1e-12) <= float(index.allowance) * float(delta)
        remaining = np.where(within, filter_delta(delta, allowance=index.allowance), 0.0)
        remaining_of[i, i:] = remaining
        sub = summed[:, f_index]  # as rdp_filter_epsilon, the log of each pair's share of delta by math.log
        logs = np.asarray([math.log(r * ORDER_SHARE) if r > 0 else 0.0 for r in remaining.tolist()])
        f_eps = np.maximum((sub + f_log_term - (logs[:, None] + f_log_a) / f_a_1).min(axis=1), 0.0)
        filtered[i, i:] = np.where(~sub.any(axis=1), 0.0, np.nextafter(f_eps * (1 + _MARGIN), np.inf))
    upper = np.triu(np.ones((n, n), dtype=bool))
    live = upper & (remaining_of > 0)
    filtered = np.where(approx_of > 0, np.nextafter((filtered + approx_of) * (1 + _MARGIN), np.inf), filtered)
    filtered[upper & ~live] = np.inf
    # unprotected pairs: ∞ for every accountant (the basic grid knows them)
    unbounded = extras.unbounded.copy()
    if hasattr(grid, "unbounded"):
        unbounded |= np.asarray(grid.unbounded, dtype=bool)
    filtered[unbounded] = np.inf
    epsilon = np.triu(filtered) + np.triu(filtered, 1).T
    found = PairRdp(epsilon, {}, chosen, counts, unbounded=unbounded)
    pair_pld(found, grid, delta, pld_limit)
    return found


def _covered(index, rows: np.ndarray, guarantees: np.ndarray, chunk: int = 65_536) -> np.ndarray:
    """Per release of `rows`, whether its guarantee `guarantees` protects every variable it reads.
    When the index's protects matrix is its reads matrix (every first guarantee protects what its
    release reads, `columns.index_for`) and each of these releases' guarantee is its own row,
    every one is covered, without a matrix; else a chunk of rows at a time."""
    if index.g_protects is index.reads and np.array_equal(guarantees, rows):
        return np.ones(len(rows), dtype=bool)
    out = np.empty(len(rows), dtype=bool)
    for start in range(0, len(rows), chunk):
        part = slice(start, start + chunk)
        out[part] = ~(index.reads[rows[part]] & ~index.g_protects[guarantees[part]]).any(axis=1)
    return out


PAIR_FAMILY_VALUES = 60  # distinct member costs a family's cases are keyed by (FamilyCases: bits of an int64)


class PairExtras:
    """Per event, how many units of the releases outside the array path of `pair_rdp` and of
    the families charge each pair {i, j} (i <= j; {i} alone on the diagonal), and the pairs one
    of them leaves unbounded: what `IndexEvents.composition` adds for them on that subset.

    A release's or a family's cost on U depends only on U ∩ what it reads (docs/explanation/model.md#the-cost-of-one-release-on-a-subset, docs/explanation/model.md#families;
    `engine.candidates`, `engine.family_options`), so it is composed once per distinct case:
    - a release outside the array path (several guarantees, a value of several parts, a
      choice): once per variable a it reads ({a}: every pair {a, x} with x not read by it, by a
      matrix product of the reads) and once per pair of variables it reads;
    - a family whose every member costs one value on every part of what it reads (and has one
      add/remove cost): once per distinct case of `FamilyCases` (the set of touched members'
      values, a member untouched or not, the key met or not), the cases of all pairs at once;
    - any other family: once per distinct U ∩ (its reads and key)."""

    def __init__(self, index, events: IndexEvents, single: np.ndarray):
        n = len(index.variables)
        self.index, self.events, self.n = index, events, n
        self.counts: dict[int, np.ndarray] = {}  # event id -> n x n counts (symmetric)
        self.unbounded = np.zeros((n, n), dtype=bool)
        self._codes: dict[tuple, int] = {}
        self._code_events: list[tuple] = []  # code -> ((event id, count), ...) or None (unbounded)
        in_family = np.zeros(len(index.releases), dtype=bool)
        for rows in index.members.values():
            in_family[rows] = True
        others = np.flatnonzero(~single & ~in_family & index.reads.any(axis=1))
        if len(others):
            self._releases(others)
        for fid, rows in index.members.items():
            self._family(fid, rows)

    def _code(self, found: tuple | None) -> int:
        code = self._codes.get(found)
        if code is None:
            code = self._codes[found] = len(self._code_events)
            self._code_events.append(found)
        return code

    def _spend_code(self, spend, release=None) -> int:
        """The code of a unit's cost: its events (`unit_events` for a standalone release with a
        choice, `spend_events` otherwise), or unbounded."""
        if spend.unbounded:
            return self._code(None)
        listed = unit_events(release, spend) if release is not None else spend_events(spend)
        found = Counter(self.events.event_id(e) for e in listed)
        return self._code(tuple(sorted(found.items())))

    def _add(self, code: int, where: np.ndarray) -> None:
        """Charge `code` once to the pairs counted in `where` (n x n, counts, symmetric)."""
        found = self._code_events[code]
        if found is None:
            self.unbounded |= where > 0
            return
        for k, count in found:
            total = self.counts.get(k)
            if total is None:
                total = self.counts[k] = np.zeros((self.n, self.n))
            total += count * where

    def _release_code(self, r: int, columns: tuple[int, ...]) -> int:
        """The code of release r's cost on the variables `columns` it reads, as `composition`
        charges it: a release with a choice by `release_cost`, a simple one by its best covering
        guarantee's value id (`LedgerIndex._cost_ids`) and its mechanism's event where it has one."""
        index = self.index
        if r in self._ambiguous:
            from .engine import release_cost

            release = index.releases[r]
            return self._spend_code(release_cost(release, frozenset(index.variables[c] for c in columns)), release)
        best = index.charged_id(r, columns, (self._n_guarantees, self._first))
        if best == index.NONE:
            return self._code(None)
        if index.value_is_zero[best]:
            return self._code(())
        mech = int(self.events.mech[r])
        event = mech if mech >= 0 else int(self.events.value_event[best])
        if event == -2:
            return self._spend_code(index.values[best])
        return self._code(((event, 1),))

    def _releases(self, others: np.ndarray) -> None:
        index, n = self.index, self.n
        self._ambiguous = set(index.ambiguous)
        self._n_guarantees, self._first = index._guarantee_spans()
        reads = index.reads[others]
        alone: dict[int, np.ndarray] = {}  # code -> (releases x n) 0/1: the release reads a, costing code on {a}
        pairs: dict[int, list] = {}  # code -> [(a, b), ...]: a release reads both, costing code on {a, b}
        for t, r in enumerate(others.tolist()):
            columns = np.flatnonzero(reads[t]).tolist()
            for a in columns:
                code = self._release_code(r, (a,))
                if code not in alone:
                    alone[code] = np.zeros(reads.shape, dtype=np.float64)
                alone[code][t, a] = 1
            for x, a in enumerate(columns):
                for b in columns[x + 1:]:
                    pairs.setdefault(self._release_code(r, (a, b)), []).append((a, b))
        missing = (~reads).astype(np.float64)
        for code, matrix in alone.items():
            where = matrix.T @ missing  # {a, x}: a read, x not
            where = where + where.T
            where[np.arange(n), np.arange(n)] += matrix.sum(axis=0)
            self._add(code, where)
        for code, listed in pairs.items():
            a, b = np.asarray(listed, dtype=np.int64).T
            where = np.zeros((n, n))
            np.add.at(where, (a, b), 1)
            np.add.at(where, (b, a), 1)
            self._add(code, where)

    def _family(self, fid: str, rows: list[int]) -> None:
        from .engine import family_cost

        index, n = self.index, self.n
        cases = family_cases(index, fid)
        variables = index.variables
        reads = index.reads[rows]  # members x n
        key = np.zeros(n, dtype=bool)
        key[[index.column[v] for v in cases.key if v in index.column]] = True
        both = reads.T.astype(np.float64) @ reads.astype(np.float64)  # members reading a and b
        alone = np.diagonal(both).copy()
        touched_count = alone[:, None] + alone[None, :] - both  # members reading a or b
        np.fill_diagonal(touched_count, alone)
        touched = touched_count > 0
        codes = np.full((n, n), -1, dtype=np.int64)
        if not cases.uniform:
            # any family: its cost on U depends on U only through U ∩ (its reads and key)
            scope = reads.any(axis=0) | key
            found: dict[frozenset, int] = {}
            for i, j in zip(*np.nonzero(np.triu(touched))):
                i, j = int(i), int(j)
                case = frozenset(c for c in (i, j) if scope[c])
                code = found.get(case)
                if code is None:
                    subset = frozenset({variables[i], variables[j]})
                    code = found[case] = self._spend_code(family_cost(cases.family, cases.members, subset))
                codes[i, j] = codes[j, i] = code
        else:
            # FamilyCases: the cost is a function of (the touched members' values, a member
            # untouched, the key met), found per pair over arrays and composed once per case
            bits = np.zeros(n, dtype=np.int64)
            for m in range(len(rows)):
                bits[reads[m]] |= cases.bits[m]
            mask = bits[:, None] | bits[None, :]
            keyed = key[:, None] | key[None, :]
            untouched = touched_count < len(rows)
            case = (mask << 2) | (keyed.astype(np.int64) << 1) | untouched.astype(np.int64)
            case = np.where(touched, case, -1).ravel()
            distinct, inverse = np.unique(case, return_inverse=True)
            flat = np.full(len(distinct), -1, dtype=np.int64)
            for c, value in enumerate(distinct.tolist()):
                if value >= 0:
                    flat[c] = self._spend_code(cases.case_cost(value >> 2, bool(value & 1), bool(value & 2)))
            codes = flat[inverse.ravel()].reshape(n, n)
        self._add_codes(codes)

    def _add_codes(self, codes: np.ndarray) -> None:
        """Charge each pair the code in `codes` (n x n, -1: none), every event at once."""
        valid = codes >= 0
        present = np.unique(codes[valid]).tolist()
        weights: dict[int, np.ndarray] = {}
        none = np.zeros(len(self._code_events) + 1, dtype=bool)
        for code in present:
            found = self._code_events[code]
            if found is None:
                none[code] = True
                continue
            for k, count in found:
                weights.setdefault(k, np.zeros(len(self._code_events) + 1))[code] += count
        safe = np.where(valid, codes, len(self._code_events))  # (the last slot: weight 0, not unbounded)
        if none.any():
            self.unbounded |= none[safe]
        for k, weight in weights.items():
            total = self.counts.get(k)
            if total is None:
                total = self.counts[k] = np.zeros((self.n, self.n))
            total += weight[safe]


def cks_floats(rho: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """accounting.cks_epsilon over arrays: the Canonne, Kamath and Steinke (2020) bound
    (Proposition 12 / Corollary 13) at the Renyi order found by the same safeguarded
    Newton iteration (accounting.cks_order), guarded by the simple bound
    rho + 2 sqrt(rho ln(1/delta)) (Bun and Steinke 2016, Prop 1.3), rounded up."""
    rho = np.asarray(rho, dtype=np.float64)
    delta = np.broadcast_to(np.asarray(delta, dtype=np.float64), rho.shape)
    result = np.zeros(rho.shape)
    live = rho > 0
    if not live.any():
        return result
    # each distinct (rho, delta) once: totals repeat across checkpoints and pairs
    distinct, back = np.unique(np.stack([rho[live], delta[live]]), axis=1, return_inverse=True)
    with np.errstate(all="ignore"):  # extreme rho: the simple bound below, never a warning or a NaN
        values = _cks_distinct(distinct[0], distinct[1])
        simple = distinct[0] + 2 * np.sqrt(distinct[0] * np.log(1 / distinct[1]))
        values = np.where(np.isfinite(values) & (distinct[0] <= 1e12), np.minimum(values, simple), simple)
    result[live] = values[back.ravel()]
    return result


def _cks_distinct(r: np.ndarray, delta: np.ndarray) -> np.ndarray:
    log_inv = np.log(1 / delta)
    # the root of h(x) = r x^2 + ln(1 + x) - ln(1/delta) in (0, sqrt(ln(1/delta) / r)), x = alpha - 1
    low, high = np.zeros(r.shape), np.sqrt(log_inv / r)
    x = high.copy()
    for _ in range(200):
        value = r * x * x + np.log1p(x) - log_inv
        high = np.where(value > 0, x, high)
        low = np.where(value > 0, low, x)
        following = x - value / (2 * r * x + 1 / (1 + x))
        following = np.where((low < following) & (following < high), following, (low + high) / 2)
        done = (np.abs(following - x) <= 1e-15 * x) | (high - low <= 1e-15 * high)
        x = following
        if done.all():
            break
    alpha = 1 + x
    bound = alpha * r + (log_inv - np.log(alpha)) / (alpha - 1) + np.log1p(-1 / alpha)
    best = np.minimum(bound, r + 2 * np.sqrt(r * log_inv))
    return np.nextafter(np.maximum(best, 0.0) * (1 + 1e-12), np.inf)  # as accounting._up


def pair_composition(rdp: PairRdp, grid, i: int, j: int) -> Composition:
    """The composition of the pair {i, j} (i < j): the slow path's, or its events counted over arrays."""
    if (i, j) in rdp.slow:
        return rdp.slow[i, j]
    spend = grid.spend(i, j)
    comp = Composition(spend, unbounded=spend.unbounded or (rdp.unbounded is not None and bool(rdp.unbounded[i, j])))
    if rdp.counts is not None:
        for k in np.flatnonzero(rdp.counts[:, i, j]):
            comp.events[rdp.chosen[k]] = int(rdp.counts[k, i, j])
    return comp


def pair_pld(rdp: PairRdp, grid, delta: Fraction, limit: int | None = PAIR_PLD_LIMIT) -> None:
    """The PLD figure of every pair {i, j}, i <= j (information only: had the plan been fixed in
    advance), the same `subset A B --accountant pld` gives: one PLD composition per distinct event
    multiset (pairs read by the same releases' events share it), at most `limit` of them (None:
    every one, `pairs --accountant pld`; 0: none), the pairs with the largest Rényi figures first;
    the pairs left over are counted in `pld_skipped` and their figure says so."""
    n = rdp.epsilon.shape[0]
    rdp.pld_epsilon = np.full((n, n), np.inf)
    upper = np.triu(np.isfinite(rdp.epsilon))  # (the diagonal too: {i} alone, as `subset i`)
    if limit == 0 or not upper.any():
        return
    rows, cols = np.nonzero(upper)
    order = np.lexsort((cols, rows, -rdp.epsilon[rows, cols]))
    computed: dict[tuple, Figure] = {}
    # each pair's key (its event multiset) from the counts, without a Composition per pair: the
    # same key `pair_composition` gives, the Composition built only for the PLDs computed
    keys = [e.key for e in rdp.chosen]
    marked = getattr(grid, "unbounded", None)
    for k in order:
        i, j = int(rows[k]), int(cols[k])
        if (i, j) in rdp.slow or rdp.counts is None or marked is None:
            comp = pair_composition(rdp, grid, i, j)
            key = (tuple(sorted((e.key, c) for e, c in comp.events.items())), comp.unbounded)
        else:
            comp = None
            column = rdp.counts[:, i, j]
            exception = grid.exceptions.get((i, j)) if hasattr(grid, "exceptions") else None
            unbounded = bool(marked[i, j]) if exception is None else exception.unbounded  # (grid.spend's)
            key = (tuple(sorted((keys[e], int(column[e])) for e in np.flatnonzero(column))), unbounded)
        figure = computed.get(key)
        if figure is None:
            if limit is not None and len(computed) >= limit:
                rdp.pld_skipped += 1
                continue
            if comp is None:
                comp = pair_composition(rdp, grid, i, j)
            figure = computed[key] = pld_figure(comp, delta, ADAPTIVE)
        rdp.pld[i, j] = figure
        if figure.available:
            rdp.pld_epsilon[i, j] = rdp.pld_epsilon[j, i] = float(figure.epsilon)


def pair_figure(index, delta: Fraction, grid, rdp: PairRdp, i: int, j: int) -> dict[str, Figure]:
    """The basic, rdp and pld Figures of one pair (i <= j) from the arrays of `pair_rdp` (the PLD
    figure where `pair_pld` made one; else one that is not available, saying why)."""
    i, j = min(i, j), max(i, j)
    case = ADAPTIVE
    spend = grid.spend(i, j)
    comp = rdp.slow.get((i, j))  # (else the pair's basic spend alone: no Composition per pair)
    basic = _basic_spend_figure(spend if comp is None else comp.basic, delta, case, index.allowance)
    value = INF if spend.unbounded else float(rdp.epsilon[i, j])
    figure = Figure("rdp", value, delta, True, case, THEOREMS["rdp"], CONVERSIONS["rdp-filter"])
    pld = rdp.pld.get((i, j))
    if pld is None:
        pld = Figure("pld", INF, delta, False, case, THEOREMS["pld"], CONVERSIONS["pld"],
                     available=False, note="not computed for pairs (information only: " + CASES["fixed"] + ")")
    return {"basic": basic, "rdp": figure, "pld": pld}


def pair_figures(index, delta: Fraction, grid=None, objective=None, diagonal: bool = False,
                 pld_limit: int | None = PAIR_PLD_LIMIT) -> dict[tuple[int, int], dict[str, Figure]]:
    """The basic, Rényi and PLD figures on every pair {i, j} (i < j, column indices), the same
    figures `subset_figures` gives for that pair (the PLD figure, information only, up to
    `pld_limit` distinct compositions: `pair_pld`).

    Over arrays, as `LedgerIndex.pair_matrix`: a simple release with at most one guarantee
    has one event on every subset it touches, so per event k the number of its releases
    reading i or j is n_k(i) + n_k(j) - n_k(i and j), a matrix product of the reads; the
    summed curve of a pair is those counts times the events' curves (`pair_rdp`). Pairs read
    by a release with several guarantees, a family member or a release with a choice are
    composed pair by pair (`IndexEvents.composition`). `diagonal`: also {i} alone, as (i, i)."""
    from .engine import at_delta

    n = len(index.variables)
    if grid is None:
        grid = index.pair_matrix(objective if objective is not None else at_delta(delta))
    if n < (1 if diagonal else 2):
        return {}
    rdp = pair_rdp(index, delta, grid, pld_limit)
    return {(i, j): pair_figure(index, delta, grid, rdp, i, j)
            for i in range(n) for j in range(i if diagonal else i + 1, n)}
