"""The mechanisms the ledger knows, and the guarantee each one's parameters imply.

A release file may state its guarantees; when it does not, they are derived
here from the mechanism's parameters (docs/explanation/model.md#a-release). A mechanism name not in
`CATALOGUE` is refused, never guessed (STYLE 5). Every derivation cites its
source. Explicit guarantees in the file replace the derived ones: they are the
steward's certified claim, and may protect only part of what is read.

Sensitivities belong to a neighbour relation (docs/explanation/model.md#variables-subsets-and-neighbours): the `sensitivity`
parameter is the sensitivity under the mechanism's `relation` (replace by
default), and the derived guarantee is stated for that relation.

`PARAMETERS` states, for every mechanism of `CATALOGUE`, the parameters it
accepts; a release file, an adapter and `run` are held to it
(`unknown_parameters`), so a misspelt parameter is refused rather than ignored
by a derivation that then states a guarantee without it.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from ..core.errors import did_you_mean
from ..core.numbers import float_up
from ..core.records import Guarantee, Mechanism, Notion, Relation
from .relation import charged

NUMERIC_PARAMS = ("epsilon", "delta", "rho", "scale", "sigma", "sensitivity")


@dataclass(frozen=True, slots=True)
class Problem:
    field: str  # parameter name under `mechanism`
    message: str
    # only a parameter the derivation needs is absent: explicit guarantees then stand on their
    # own. Any other problem (parameters that contradict each other, a sampling event the
    # ledger cannot certify) stands with them too: a claim cannot be checked against it.
    missing: bool = False


Derivation = Callable[[Mechanism, frozenset[str]], tuple[tuple[Guarantee, ...], list[Problem]]]


def _relation(mechanism: Mechanism) -> Relation:
    return Relation(mechanism.param("relation", Relation.REPLACE.value))


def _scale_mechanism(mechanism: Mechanism, reads: frozenset[str]):
    """Geometric (Ghosh, Roughgarden and Sundararajan 2009) and Laplace (Dwork et al.
    2006) noise: epsilon = sensitivity / scale, pure, on everything read."""
    epsilon = mechanism.param("epsilon")
    scale, sensitivity = mechanism.param("scale"), mechanism.param("sensitivity")
    problems: list[Problem] = []
    if epsilon is None:
        if scale is None or sensitivity is None:
            return (), [Problem("epsilon", f"{mechanism.name} needs epsilon, or scale and sensitivity", missing=True)]
        if scale <= 0:
            return (), [Problem("scale", f"must be positive. Found {scale}.")]
        epsilon = sensitivity / scale
    elif scale is not None and sensitivity is not None and sensitivity / scale != epsilon:
        return (), [Problem("epsilon", f"is {epsilon} but sensitivity / scale is {sensitivity / scale}")]
    guarantee = Guarantee(reads, Notion.PURE, epsilon=epsilon, relation=_relation(mechanism))
    return (guarantee,), problems


def _gaussian(mechanism: Mechanism, reads: frozenset[str]):
    """Gaussian noise: rho = sensitivity^2 / (2 sigma^2), zCDP (Bun and Steinke 2016,
    Prop 1.6); or, when only (epsilon, delta) is given, that claim and the zCDP bound it
    implies of a Gaussian (`implied_gaussian_multiplier`)."""
    rho, sigma, sensitivity = mechanism.param("rho"), mechanism.param("sigma"), mechanism.param("sensitivity")
    epsilon, delta = mechanism.param("epsilon"), mechanism.param("delta")
    relation = _relation(mechanism)
    if sigma is not None and sensitivity is not None:
        if sigma <= 0:
            return (), [Problem("sigma", f"must be positive. Found {sigma}.")]
        implied = sensitivity * sensitivity / (2 * sigma * sigma)
        if rho is not None and rho != implied:
            return (), [Problem("rho", f"is {rho} but sensitivity^2 / (2 sigma^2) is {implied}")]
        rho = implied
    if rho is not None:
        return (Guarantee(reads, Notion.ZCDP, rho=rho, relation=relation),), []
    if epsilon is not None and delta is not None:
        claim = Guarantee(reads, Notion.APPROX, epsilon=epsilon, delta=delta, relation=relation)
        multiplier = implied_gaussian_multiplier(epsilon, delta)
        if multiplier is None:
            return (claim,), []
        # The claim is the steward's; the zCDP guarantee is what it implies of a Gaussian
        # (`implied_gaussian_multiplier`): both are valid, and each subset and delta is charged
        # the better one (docs/explanation/model.md#the-cost-of-one-release-on-a-subset, min over covering guarantees).
        rho = _significant_up(1 / (2 * multiplier * multiplier))  # rounded UP: a larger rho is valid too
        implied = Guarantee(reads, Notion.ZCDP, rho=rho, relation=relation)
        return (claim, implied), []
    return (), [Problem("sigma", "gaussian needs sigma and sensitivity, rho, or epsilon and delta", missing=True)]


def gaussian_multiplier(mechanism: Mechanism) -> Fraction | None:
    """sigma / sensitivity of a Gaussian release: as recorded, or, for one declared only by
    (epsilon, delta), the smallest the claim allows (`implied_gaussian_multiplier`); None
    when neither is known (a rho alone: its curve is a * rho, not a multiplier's)."""
    if mechanism.name != "gaussian":
        return None
    sigma, sensitivity = mechanism.param("sigma"), mechanism.param("sensitivity")
    if sigma is not None:
        return Fraction(sigma) / Fraction(sensitivity) if sensitivity else None
    epsilon, delta = mechanism.param("epsilon"), mechanism.param("delta")
    if mechanism.param("rho") is not None or epsilon is None or delta is None:
        return None
    return implied_gaussian_multiplier(epsilon, delta)


_MULTIPLIER_DIGITS = 12  # significant digits kept of an implied multiplier (rounded down)


@lru_cache(maxsize=4096)
def implied_gaussian_multiplier(epsilon: Fraction, delta: Fraction) -> Fraction | None:
    """A lower bound on sigma / sensitivity of any Gaussian mechanism that is (epsilon, delta)-DP.

    Why a Gaussian declared only by (epsilon, delta) has a finite loss at every other delta'
    (docs/explanation/model.md#a-release-2.4: the release's cost is any guarantee its mechanism certifies): the Gaussian
    mechanism with m = sigma / sensitivity is (epsilon, delta)-DP if and only if
        delta >= Phi(1 / (2m) - epsilon m) - e^epsilon Phi(-1 / (2m) - epsilon m)
    (Balle and Wang 2018, Theorem 8), whose right side decreases in m. So the claim implies
    m >= m*, the smallest m satisfying it, and the mechanism is a post-processing of the
    Gaussian with multiplier m* (more noise is added noise): every figure of that Gaussian,
    its exact privacy profile (the PLD accountant), its Rényi curve and its zCDP bound
    rho = 1 / (2 m*^2) (Bun and Steinke 2016, Prop 1.6), bounds the release. The value returned
    is at most m* (bisection on a certified lower bound of the delta above, then rounded DOWN to
    12 significant digits), so rho = 1 / (2 m^2) is rounded UP and every figure from it is valid.
    None when the claim implies nothing (delta 0: a Gaussian has no pure bound)."""
    if not 0 < delta < 1 or epsilon < 0:
        return None
    # A larger delta and a larger epsilon (delta decreases in epsilon) certify only a smaller m*.
    target, eps = float_up(delta), float_up(epsilon)
    if math.isinf(eps):
        return None

    def certified(m: float) -> bool:  # the Gaussian with multiplier m is surely not (eps, target)-DP: m < m*
        return _gaussian_delta_below(m, eps) > target

    low, high = 1.0, 1.0
    if certified(1.0):
        while certified(high):
            high *= 2
            if high > 1e150:
                return None
        low = high / 2
    else:
        while not certified(low):
            low /= 2
            if low < 1e-150:
                return None
        high = low * 2
    for _ in range(200):  # certified(low) and not certified(high) throughout
        middle = (low + high) / 2
        if not low < middle < high or high - low <= 1e-15 * low:
            break
        if certified(middle):
            low = middle
        else:
            high = middle
    floor = decimal.Context(prec=_MULTIPLIER_DIGITS, rounding=decimal.ROUND_FLOOR).create_decimal(low)
    return Fraction(floor)


def _log_ndtr(x: float) -> float:
    """log Phi(x), the standard normal's log CDF, with the math module only (no scipy import for
    recording a release): log(erfc(-x / sqrt 2) / 2) where erfc does not underflow, log1p of the
    upper tail for x > 0, and below x = -30 the asymptotic series of Mills' ratio (Abramowitz and
    Stegun 26.2.12) to the x^-10 term, whose remainder is below 1e-15 there."""
    if x > 0:
        return math.log1p(-0.5 * math.erfc(x / math.sqrt(2)))
    if x > -30:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2)))
    inverse = 1 / (x * x)
    series = 1 + inverse * (-1 + inverse * (3 + inverse * (-15 + inverse * (105 - 945 * inverse))))
    return -x * x / 2 - math.log(-x) - 0.5 * math.log(2 * math.pi) + math.log(series)


def _significant_up(value: Fraction, digits: int = _MULTIPLIER_DIGITS) -> Fraction:
    """`value` (> 0) rounded up to `digits` significant decimal digits, exactly."""
    shift = digits - 1 - math.floor(math.log10(value))
    scale = Fraction(10) ** shift
    return Fraction(math.ceil(value * scale)) / scale


# The allowances of `_balle_wang_delta` (and of privacy_loss.gaussian_deltas, its vectorised upper
# bound): on each logarithm, relative to its size, and on the result, for the rounding of exp and expm1
BALLE_WANG_LOG_SLACK = 1e-13
BALLE_WANG_ROUNDING = 1e-12


def _balle_wang_delta(mu: float, epsilon: float, up: bool) -> float:
    """The exact delta(epsilon) of the Gaussian mechanism with sensitivity / sigma = `mu`
    (Balle and Wang 2018, Theorem 8, the analytic Gaussian mechanism), bounded in the
    direction asked: from above (`up`: a delta never too small, so an epsilon found from it is
    never too small) or from below (a multiplier found from it is never too large):
        delta = Phi(mu / 2 - epsilon / mu) - e^epsilon Phi(-mu / 2 - epsilon / mu)
              = Phi(a) (1 - exp(epsilon + log Phi(b) - log Phi(a))),
    in log space (no cancellation of two tiny terms, no overflow of e^epsilon), each logarithm
    allowed an error of 1e-13 of its size in the direction asked (`_log_ndtr` is accurate to a
    few ulps; the float arguments' error moves log Phi(x) by about 2e-16 x^2, about 4e-16 of its
    size), and the result moved by a relative 1e-12 for the rounding of exp and expm1."""
    if not mu > 0:
        return 0.0
    log_first = _log_ndtr(mu / 2 - epsilon / mu)
    log_second = epsilon + _log_ndtr(-mu / 2 - epsilon / mu)
    if math.isinf(log_first):  # Phi(a) below the smallest float: delta is 0 to float precision
        return math.ulp(0.0) if up else 0.0
    # (log_second is -inf only when Phi(b) is below e^-1e300: then delta is Phi(a))
    slack = BALLE_WANG_LOG_SLACK * (1 + abs(log_first) + (abs(log_second) if math.isfinite(log_second) else 0.0))
    if up:
        first, gap = log_first + slack, log_second - log_first - 2 * slack
    else:
        first, gap = log_first - slack, log_second - log_first + 2 * slack
    if not gap < 0:  # the terms agree within the allowance: up, the delta is 0; down, 0 is all that is sure
        return 0.0
    value = math.exp(first) * -math.expm1(gap)
    if up:
        return min(1.0, math.nextafter(value * (1 + BALLE_WANG_ROUNDING), math.inf))
    # (below the normal floats a relative allowance is lost to the subnormals' spacing: 0 is sure)
    return value * (1 - BALLE_WANG_ROUNDING) if value >= 1e-290 else 0.0


def _gaussian_delta_below(multiplier: float, epsilon: float) -> float:
    """A lower bound on the exact delta(epsilon) of the Gaussian with sigma / sensitivity =
    `multiplier` (Balle and Wang 2018, Theorem 8: `_balle_wang_delta`, rounded down)."""
    return _balle_wang_delta(1 / multiplier, epsilon, up=False)


def _exact(mechanism: Mechanism, reads: frozenset[str]):
    """No noise: no bound on anything read (docs/explanation/model.md#the-cost-of-one-release-on-a-subset, ∞)."""
    for name in ("epsilon", "rho"):
        if mechanism.param(name) is not None:
            return (), [Problem(name, "an exact release has no privacy parameter")]
    return (), []


def _post_processing(mechanism: Mechanism, reads: frozenset[str]):
    """Computed only from other releases' outputs (docs/explanation/model.md#post-processing-and-lineage): reads nothing, costs 0."""
    if reads:
        return (), [Problem("name", f"post-processing reads no data, but reads lists {sorted(reads)}")]
    return (), []


def _tan_consistent_counts(mechanism: Mechanism, reads: frozenset[str]):
    """Tan, Algorithm 1: epsilon on the protected variable(s) (Prop 5.1, with the
    n_i >= 2 correction of docs/explanation/model.md#notes-on-the-papers-algorithms); the margin variables are released exactly."""
    epsilon, protects = mechanism.param("epsilon"), mechanism.param("protects")
    if epsilon is None:
        return (), [Problem("epsilon", "tan-consistent-counts needs epsilon", missing=True)]
    if not protects:
        return (), [Problem("protects", "tan-consistent-counts needs the protected variable(s), "
                                        "in `protects` or as an explicit guarantee", missing=True)]
    return (Guarantee(frozenset(protects), Notion.PURE, epsilon=epsilon, relation=_relation(mechanism)),), []


def _pufferfish_only(mechanism: Mechanism, reads: frozenset[str]):
    """A Pufferfish-family mechanism (Bailie's p%, Zhang et al.'s attribute-private
    Gaussian, a perfectly sample-private mapping): no DP guarantee, so ∞ on what it
    reads in every DP total; its own guarantee is recorded under `pufferfish` and
    reported apart (docs/explanation/model.md#pufferfish-guarantees)."""
    return (), []


def _declared(mechanism: Mechanism, reads: frozenset[str]):
    """A mechanism described only by its explicit guarantees."""
    return (), [Problem("name", "a declared mechanism needs explicit guarantees", missing=True)]


CATALOGUE: dict[str, Derivation] = {
    "geometric": _scale_mechanism,
    "laplace": _scale_mechanism,
    "gaussian": _gaussian,
    "exact": _exact,
    "post-processing": _post_processing,
    "tan-consistent-counts": _tan_consistent_counts,
    "declared": _declared,
    "p-percent": _pufferfish_only,
    "attribute-gaussian": _pufferfish_only,
    "modular-sum": _pufferfish_only,
}


def derive_guarantees(mechanism: Mechanism, reads: frozenset[str]) -> tuple[tuple[Guarantee, ...], list[Problem]]:
    derivation = CATALOGUE.get(mechanism.name)
    if derivation is None:
        known = ", ".join(sorted(CATALOGUE))
        return (), [Problem("name", f"unknown mechanism {mechanism.name!r}{did_you_mean(mechanism.name, CATALOGUE)}; "
                                    f"known: {known}")]
    sampling = sampling_problems(mechanism)
    if sampling:
        return (), sampling
    guarantees, problems = derivation(mechanism, reads)
    if problems or mechanism.param("sample_size") is None or mechanism.param("epsilon_before_subsampling") is not None:
        return guarantees, problems  # (a mechanism run by the ledger records its amplified guarantee itself)
    return _amplified(mechanism, guarantees)


SAMPLING_PARAMS = ("sample_size", "population")


def sampling_problems(mechanism: Mechanism) -> list[Problem]:
    """The sampling event (sample_size of population, without replacement; docs/explanation/model.md#subsampling): both
    positive integers, the sample no larger than the population."""
    values = {name: mechanism.param(name) for name in SAMPLING_PARAMS}
    if all(value is None for value in values.values()):
        return []
    for name, value in values.items():
        if value is None:
            return [Problem(name, "a subsampled release needs both sample_size and population")]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            return [Problem(name, f"must be a positive integer. Found {value!r}.")]
    if values["sample_size"] > values["population"]:
        return [Problem("sample_size", f"must be at most the population ({values['population']}). "
                                       f"Found {values['sample_size']}.")]
    sampling = mechanism.param("sampling")
    if sampling is not None and sampling != "without replacement":
        # Balle, Barthe and Gaboardi's bound is for a sample without replacement: drawn with
        # replacement, the sample can hold the changed record several times, each copy moving
        # the output, so neither the amplified nor the mechanism's own epsilon bounds it
        return [Problem("sampling", f"a sample drawn {sampling} can hold a record several times; the ledger "
                                    "certifies samples drawn without replacement (sample_size of population): "
                                    "declare the guarantee of the whole procedure instead")]
    return []


def _amplified(mechanism: Mechanism, guarantees):
    """A pure guarantee of a mechanism run on a sample drawn without replacement, amplified by
    Balle, Barthe and Gaboardi (2018): ln(1 + beta (e^eps - 1)), rounded up (docs/explanation/model.md#subsampling)."""
    from fractions import Fraction

    from ..mechanisms.subsampling import subsampled_epsilon

    beta = Fraction(mechanism.param("sample_size"), mechanism.param("population"))
    result = []
    for guarantee in guarantees:
        if guarantee.notion != Notion.PURE or guarantee.relation != Relation.REPLACE:
            return (), [Problem("sample_size", "amplification by subsampling is certified here for pure "
                                               "guarantees under replacement neighbours only")]
        if guarantee.epsilon:
            epsilon = min(guarantee.epsilon, Fraction(subsampled_epsilon(guarantee.epsilon, beta)))
            guarantee = Guarantee(guarantee.protects, guarantee.notion, epsilon=epsilon, relation=guarantee.relation)
        result.append(guarantee)
    return tuple(result), []


def needs_explicit_guarantees(mechanism: Mechanism) -> bool:
    return mechanism.name == "declared"


# --------------------------------------------------------------------------
# The parameters each mechanism accepts
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Parameters:
    """The parameters one mechanism accepts, wherever its release comes from (a file, an
    adapter, `run`). `needs`: the sets its guarantee is derived from, any one of them (none for
    a mechanism whose guarantee is stated, or that has none); `reads`: the others that its
    derivation or the check of a claim reads (docs/explanation/model.md#variables-subsets-and-neighbours, docs/explanation/model.md#composition, docs/explanation/model.md#subsampling); `describes`: what was
    computed and how, kept for the audit trail and read by no derivation."""

    needs: tuple[tuple[str, ...], ...] = ()
    reads: tuple[str, ...] = ()
    describes: tuple[str, ...] = ()
    names: tuple[str, ...] = dataclasses.field(init=False)  # every name accepted, each once, in the order above

    def __post_init__(self) -> None:
        named = dict.fromkeys([*(name for need in self.needs for name in need), *self.reads, *self.describes])
        object.__setattr__(self, "names", tuple(named))


# the sampling event (sampling_problems, _amplified; docs/explanation/model.md#subsampling)
_SAMPLING = (*SAMPLING_PARAMS, "sampling", "epsilon_before_subsampling")
# what `run` computed (operations.recording)
_QUERY = ("query", "column", "columns", "lower", "upper", "n")
# what an adapter read of another library's object (ledger.adapters)
_LIBRARY = ("library", "class", "event", "count", "noise_multiplier", "sampling_probability")
_NOISE = (*_QUERY, *_LIBRARY)

PARAMETERS: dict[str, Parameters] = {
    "geometric": Parameters((("epsilon",), ("scale", "sensitivity")), ("relation", *_SAMPLING), _NOISE),
    "laplace": Parameters((("epsilon",), ("scale", "sensitivity")), ("relation", *_SAMPLING), _NOISE),
    "gaussian": Parameters((("sigma", "sensitivity"), ("rho",), ("epsilon", "delta")), ("relation", *_SAMPLING),
                           _NOISE),
    "exact": Parameters((), _SAMPLING, _LIBRARY),
    "post-processing": Parameters((), (), ("method",)),
    "tan-consistent-counts": Parameters((("epsilon", "protects"),), ("margin", "protected", "relation", *_SAMPLING),
                                        ("nonnegative", "pair_noise_exponent", "noised_rows", "exact_variables")),
    "declared": Parameters((), _SAMPLING, ("epsilon", "delta", "rho", "sensitivity", "relation", *_LIBRARY,
                                           "output_measure", "input_metric", "d_in", "noise")),
    "p-percent": Parameters((), (), ("p", "epsilon", "laplace_scale", "contributor", "linked", "cells",
                                     "protected_contributors")),
    "attribute-gaussian": Parameters((), (), ("query", "protected", "epsilon", "delta", "diameters", "sigma2", "n")),
    "modular-sum": Parameters((), (), ("variable", "modulus", "rows")),
}


def unknown_parameters(name: str, keys) -> list[Problem]:
    """A problem for each of `keys` that mechanism `name` does not accept (`PARAMETERS`), with
    the nearest names it does accept, or all of them when none is near (none for a name not in
    the catalogue: `derive_guarantees` refuses the name itself)."""
    accepted = PARAMETERS.get(name)
    if accepted is None:
        return []
    problems = []
    for key in keys:
        if key == "name" or key in accepted.names:
            continue
        near = did_you_mean(key, accepted.names)
        others = [other for other, parameters in PARAMETERS.items() if key in parameters.names]
        message = f"{name} takes no parameter {key!r}"
        if others and not near:
            message += f", a parameter of {', '.join(others[:3])}{', ...' if len(others) > 3 else ''}"
        message += near or f" (it takes {', '.join(accepted.names) or 'none'})"
        problems.append(Problem(key, message))
    return problems



# --------------------------------------------------------------------------
# Explicit guarantees may not claim more than the parameters imply (docs/explanation/model.md#composition)
# --------------------------------------------------------------------------


def exactly_released(mechanism: Mechanism, reads: frozenset[str]) -> tuple[frozenset[str], bool]:
    """The variables the mechanism releases exactly, and whether that set is known in full.

    Tan's Algorithm 1 releases its margin variable(s) exactly (Tan Section 5): the
    `margin` parameter, or what is read but not in `protects` / `protected`. When the
    file names neither, at least one variable it reads is a margin: (empty, False).
    A noise mechanism (laplace, geometric, gaussian) perturbs everything it reads."""
    if mechanism.name != "tan-consistent-counts":
        return frozenset(), True
    margin = mechanism.param("margin")
    if margin:
        return frozenset([margin] if isinstance(margin, str) else margin) & reads, True
    protected = mechanism.param("protects") or mechanism.param("protected")
    if protected:
        protected = frozenset([protected] if isinstance(protected, str) else protected)
        return reads - protected, True
    return frozenset(), False


def gaussian_delta(rho: float, epsilon: float) -> float:
    """An upper bound on the exact delta(epsilon) of a Gaussian mechanism with
    sensitivity / sigma = sqrt(2 rho) (Balle and Wang 2018, Theorem 8: `_balle_wang_delta`,
    rounded up)."""
    return _balle_wang_delta(math.sqrt(2 * rho), epsilon, up=True) if rho > 0 else 0.0


def gaussian_epsilon(multiplier: Fraction, delta: Fraction) -> float:
    """The smallest epsilon (to 1e-12, rounded up) at which the Gaussian with sigma / sensitivity
    = `multiplier` is (epsilon, delta)-DP: its exact privacy profile (Balle and Wang 2018, Thm 8),
    by bisection on `gaussian_delta` (which is nudged up: the epsilon found is never too small)."""
    rho = float_up(1 / (2 * Fraction(multiplier) ** 2))
    target = float(delta)
    if Fraction(target) > delta:
        target = math.nextafter(target, 0.0)
    low, high = 0.0, max(1.0, 2 * rho + 2 * math.sqrt(2 * rho * math.log(1 / target)))  # Bun-Steinke bound, doubled
    if gaussian_delta(rho, 0.0) <= target:
        return 0.0
    while gaussian_delta(rho, high) > target:
        high *= 2
    while high - low > 1e-12 * max(1.0, high):
        middle = (low + high) / 2
        if gaussian_delta(rho, middle) <= target:
            high = middle
        else:
            low = middle
    return high


def _in_relation(derived: Guarantee, relation: Relation) -> Guarantee | None:
    """What a derived guarantee implies for neighbours under `relation` (`relation.charged`,
    docs/explanation/model.md#variables-subsets-and-neighbours), or None (a replacement guarantee implies nothing for add/remove)."""
    return charged(derived, relation)


def _figure(guarantee: Guarantee) -> str:
    if guarantee.notion == Notion.PURE:
        return f"epsilon {guarantee.epsilon}"
    if guarantee.notion == Notion.APPROX:
        return f"(epsilon {guarantee.epsilon}, delta {guarantee.delta})"
    return f"rho {guarantee.rho}"


def _implied_by(claim: Guarantee, derived: Guarantee, mechanism: Mechanism) -> str | None:
    """None when `derived` (in the claim's relation) implies `claim`'s figure; else why not."""
    own = f"{mechanism.name}'s parameters give {_figure(derived)} ({derived.relation})"
    if derived.notion == Notion.PURE:
        if claim.notion == Notion.PURE:
            return None if claim.epsilon >= derived.epsilon else own
        if claim.notion == Notion.APPROX:
            if claim.epsilon >= derived.epsilon:
                return None
            if mechanism.name == "laplace":
                # Laplace's exact privacy profile: delta(eps') = 1 - e^((eps' - eps) / 2)
                # (Balle, Barthe, Gaboardi, Hsu, Sato 2020, Lemma 1)
                needed = -math.expm1((float(claim.epsilon) - float(derived.epsilon)) / 2)
                if float(claim.delta) >= needed * (1 + 1e-9):
                    return None
                return own + f", which at epsilon {claim.epsilon} needs delta >= {needed:.6g}"
            return own
        # pure epsilon implies epsilon^2 / 2 zCDP (Bun and Steinke 2016, Prop 1.4)
        implied = derived.epsilon * derived.epsilon / 2
        return None if claim.rho >= implied else own + f", that is rho {implied}"
    if derived.notion == Notion.ZCDP:
        if claim.notion == Notion.PURE:
            return own + ": a Gaussian has no pure-epsilon bound"
        if claim.notion == Notion.ZCDP:
            return None if claim.rho >= derived.rho else own
        if mechanism.name != "gaussian":
            return own + ": no (epsilon, delta) figure is implied"
        needed = gaussian_delta(float(derived.rho), float(claim.epsilon))
        if claim.delta >= Fraction(needed):
            return None
        return own + (f", whose exact delta at epsilon {claim.epsilon} is {needed:.6g} "
                      "(Balle and Wang 2018)")
    # derived (epsilon, delta): only weaker points of the same notion are implied
    if claim.notion == Notion.APPROX and claim.epsilon >= derived.epsilon and claim.delta >= derived.delta:
        return None
    return own + ("" if claim.notion == Notion.APPROX else ": an (epsilon, delta) guarantee implies "
                  f"no {'pure epsilon' if claim.notion == Notion.PURE else 'zCDP'} bound")


def overclaims(mechanism: Mechanism, reads: frozenset[str],
               explicit: tuple[Guarantee, ...]) -> list[tuple[int, str, str]]:
    """Explicit guarantees stronger than what the mechanism's parameters imply (docs/explanation/model.md#composition):
    (index of the guarantee, field, message) for each. A derived guarantee is the most
    a steward may claim: an explicit one may protect less, or state a larger figure,
    never protect a variable the mechanism releases exactly nor state a smaller figure
    in the same notion and relation; a figure in another notion must be implied by
    the mechanism (a Gaussian has no pure-epsilon bound; its (epsilon, delta) must be at
    least the exact Balle-Wang delta). Without derivable parameters nothing is compared."""
    problems: list[tuple[int, str, str]] = []
    exact, known = exactly_released(mechanism, reads)
    derived, derivation_problems = derive_guarantees(mechanism, reads)
    if CATALOGUE.get(mechanism.name) is _pufferfish_only:
        # no DP guarantee at all: a DP figure for it would enter DP totals as a theorem (docs/explanation/model.md#pufferfish-guarantees)
        return [(index, "epsilon" if claim.notion != Notion.ZCDP else "rho",
                 f"claims {_figure(claim)}, but {mechanism.name} gives no differential-privacy guarantee (a "
                 "Pufferfish-family guarantee: record it under `pufferfish`, reported apart, docs/explanation/model.md#pufferfish-guarantees)")
                for index, claim in enumerate(explicit)]
    if derivation_problems and mechanism.name == "tan-consistent-counts" and mechanism.param("epsilon") is not None:
        # protected variables named only by `margin` or by the claim itself: Tan's epsilon (Prop 5.1)
        # still bounds whatever is protected, so a claim below it on what is not released exactly
        # is stronger than the parameters (every claim on an exact variable is refused above)
        derived = (Guarantee(reads - exact, Notion.PURE, epsilon=mechanism.param("epsilon"),
                             relation=_relation(mechanism)),)
        derivation_problems = []
    for index, claim in enumerate(explicit):
        covered = claim.protects & reads
        shown = exact & covered
        if shown:
            problems.append((index, "protects", f"claims protection of {', '.join(sorted(shown))}, which "
                                                f"{mechanism.name} releases exactly (no guarantee covers it)"))
            continue
        if not known and reads and reads <= claim.protects:
            problems.append((index, "protects", f"claims protection of everything read "
                                                f"({', '.join(sorted(reads))}), but {mechanism.name} releases "
                                                "its margin variable(s) exactly; name them with `margin`"))
            continue
        if not derived or derivation_problems:
            continue
        reasons = []
        for guarantee in derived:
            if not covered <= guarantee.protects:
                continue
            in_relation = _in_relation(guarantee, claim.relation)
            if in_relation is None:
                # a replacement guarantee implies nothing for add/remove, but the claim is charged
                # for replacement neighbours by group privacy (docs/explanation/model.md#variables-subsets-and-neighbours: spend.guarantee_spend),
                # and that form may not be below what the parameters give for them
                converted = _in_relation(claim, guarantee.relation)
                if converted is None:
                    reasons = []
                    break
                reason = _implied_by(converted, guarantee, mechanism)
                if reason is not None:
                    reason += f" (the claim is {_figure(converted)} for {guarantee.relation.value} neighbours)"
            else:
                reason = _implied_by(claim, in_relation, mechanism)
            if reason is None:
                reasons = []
                break
            reasons.append(reason)
        if reasons:
            field = {Notion.PURE: "epsilon", Notion.APPROX: "epsilon", Notion.ZCDP: "rho"}[claim.notion]
            problems.append((index, field, f"claims {_figure(claim)} ({claim.relation}), stronger than "
                                           f"{reasons[0]}; a guarantee derived from the parameters is the most "
                                           "that may be claimed"))
    return problems
