"""What a privacy figure means for an attacker: the power of the best test at a false-positive rate.

Concept. A guarantee between two neighbouring datasets bounds every hypothesis test an attacker
can run on the output to tell them apart (is this person's record in the data; which of two
values do this person's variables take). Its trade-off curve f gives, at each false-positive
rate alpha, the smallest false-negative rate any test can reach, so 1 - f(alpha) is the largest
true-positive rate (power) at that false-positive rate (Dong, Roth and Su 2022, "Gaussian
differential privacy", JRSS-B 84(1); theorem numbers below are those of arXiv:1905.02383v3):
- (epsilon, delta)-DP: f(alpha) = max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha))
  (their eq. (5) and Prop 2.5; Wasserman and Zhou 2010; Kairouz, Oh and Viswanath 2015, the
  hypothesis-testing form of (epsilon, delta)-DP);
- mu-GDP: f(alpha) = Phi(Phi^-1(1 - alpha) - mu) (their Def 2.6), so the power is
  Phi(Phi^-1(alpha) + mu). The Gaussian mechanism of L2 sensitivity s and noise sigma is
  (s / sigma)-GDP (Thm 2.7) and Gaussians compose to mu = sqrt(sum mu_i^2), exactly (Cor 3.3),
  and as a filter under full adaptivity (Smith and Thakurta 2022).
mu-GDP holds if and only if (epsilon, delta(epsilon))-DP holds for every epsilon >= 0 with
    delta(epsilon) = Phi(-epsilon / mu + mu / 2) - e^epsilon Phi(-epsilon / mu - mu / 2)
(Cor 2.13; the same function as Balle and Wang 2018, Thm 8, for the Gaussian mechanism), so a
Gaussian-only budget is stated exactly by `gdp_epsilon` and `gdp_mu`.

Invariants: every power returned is an upper bound (a figure rounded towards the attacker);
`gdp_epsilon` never returns an epsilon below the exact one and `gdp_mu` never a mu above the
exact one, however small delta (1e-10) or large epsilon (e^epsilon past the largest float).
Pure functions; scipy.special's compiled ufuncs are imported on the first call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.lazy import submodule_alone

FALSE_POSITIVE_RATES = (0.01, 0.05)  # the rates a review board reads: 1 in 100, 1 in 20


def _special():
    """scipy.special's compiled ufuncs (`ndtr`, `ndtri`, `erfcx`), without scipy.special's
    package `__init__` (ledger.core.lazy.submodule_alone)."""
    return submodule_alone("scipy.special", "_ufuncs")


def _check_rate(name: str, value: float) -> float:
    value = float(value)
    if not 0 <= value <= 1:
        raise ValueError(f"`{name}` must be in [0, 1]. Found {value}.")
    return value


def _check_nonnegative(name: str, value: float) -> float:
    value = float(value)
    if not value >= 0:  # (NaN too)
        raise ValueError(f"`{name}` must be non-negative. Found {value}.")
    return value


def tpr_at(alpha: float, *, epsilon: float, delta: float) -> float:
    """The largest true-positive rate of any test at false-positive rate `alpha` against an
    (epsilon, delta)-DP mechanism: 1 - f_{eps,delta}(alpha) = min(1, delta + e^eps alpha,
    1 - e^-eps (1 - delta - alpha)) (Dong, Roth and Su 2022, eq. (5) and Prop 2.5; Kairouz, Oh
    and Viswanath 2015). An infinite epsilon bounds nothing: 1."""
    alpha, delta = _check_rate("alpha", alpha), _check_rate("delta", delta)
    epsilon = _check_nonnegative("epsilon", epsilon)
    if math.isinf(epsilon):
        return 1.0
    if alpha == 0:
        through_alpha = delta
    elif epsilon < 700:
        through_alpha = delta + alpha * math.exp(epsilon)
    else:  # e^eps past the floats: e^eps alpha in logs (only its passing 1 matters)
        through_alpha = delta + math.exp(min(epsilon + math.log(alpha), 1.0))
    # 1 - e^-eps (1 - delta - alpha), one ulp up: each step is monotone in epsilon, delta and alpha in
    # floating point (a sum of two rounded terms is not), and the rate stays an upper bound
    through_complement = math.nextafter(1.0 - math.exp(-epsilon) * (1.0 - delta - alpha), 2.0)
    # (at least alpha: a trade-off curve lies below 1 - alpha, Dong, Roth and Su 2022, Prop 2.2)
    return max(alpha, min(1.0, through_alpha, through_complement))


def gdp_tpr_at(alpha: float, mu: float) -> float:
    """The largest true-positive rate at false-positive rate `alpha` against a mu-GDP mechanism:
    1 - G_mu(alpha) = Phi(Phi^-1(alpha) + mu) (Dong, Roth and Su 2022, Def 2.6 and eq. (6))."""
    alpha, mu = _check_rate("alpha", alpha), _check_nonnegative("mu", mu)
    if math.isinf(mu):  # the two output distributions apart: a test without false positives finds everyone
        return 1.0
    if alpha in (0.0, 1.0) or mu == 0:
        return alpha
    special = _special()
    return min(1.0, max(alpha, float(special.ndtr(special.ndtri(alpha) + mu))))  # (Prop 2.2, as above)


def _gdp_delta_parts(epsilon: float, mu: float) -> tuple[float, float]:
    """(delta(epsilon), an upper bound on its float error) for mu-GDP at a finite epsilon >= 0
    and 0 < mu < inf, with u = mu / 2 - epsilon / mu and v = u - mu, written so that no term
    overflows, underflows before delta does, or cancels where a sum of positive terms exists:
    - u < 0: since e^epsilon phi(v) = phi(u), e^epsilon Phi(v) = erfcx(-v / sqrt 2) e^(-u^2 / 2) / 2
      and delta = e^(-u^2 / 2) (erfcx(-u / sqrt 2) - erfcx(-v / sqrt 2)) / 2 (no e^epsilon);
    - u >= 0: delta = (erf(u / sqrt 2) + erf(-v / sqrt 2)) / 2 - (e^epsilon - 1) Phi(v), with
      expm1 below epsilon = 1: exact at epsilon = 0, where delta(0) = 2 Phi(mu / 2) - 1 is tiny
      for a tiny mu."""
    special = _special()
    u = mu / 2 - epsilon / mu
    v = u - mu
    if u < 0:
        gauss = math.exp(-u * u / 2)
        first = float(special.erfcx(-u / math.sqrt(2)))
        delta = 0.5 * gauss * (first - float(special.erfcx(-v / math.sqrt(2))))
        scale = 0.5 * gauss * first  # Phi(u), the larger term
    else:
        scale = 0.5 * (math.erf(u / math.sqrt(2)) + math.erf(-v / math.sqrt(2)))  # Phi(u) - Phi(v)
        if epsilon < 1:
            delta = scale - math.expm1(epsilon) * float(special.ndtr(v))
        else:  # (e^epsilon - 1) Phi(v), with e^epsilon Phi(v) as above: e^epsilon may pass the floats
            excess = 0.5 * float(special.erfcx(-v / math.sqrt(2))) * math.exp(-u * u / 2) - float(special.ndtr(v))
            delta = scale - excess
    # scipy's erfcx is within 9e-16 of its value (8 ulps), erf, ndtr and exp within a few ulps; the
    # common factor e^(-u^2 / 2) moves by |u| times the rounding of u (about 2e-16 max(|u|, mu)) and
    # of u^2 / 2: about 1e-15 (2.5 + 0.4 u^2 + 0.3 |u| mu) of the larger term, allowed twice over
    error = 1e-15 * (5 + u * u + abs(u) * mu) * scale
    return max(delta, 0.0), error


def gdp_delta(epsilon: float, mu: float) -> float:
    """The smallest delta at which a mu-GDP mechanism is (epsilon, delta)-DP:
    Phi(-epsilon / mu + mu / 2) - e^epsilon Phi(-epsilon / mu - mu / 2) (Dong, Roth and Su 2022,
    Cor 2.13; Balle and Wang 2018, Thm 8 with mu = sensitivity / sigma)."""
    epsilon, mu = _check_nonnegative("epsilon", epsilon), _check_nonnegative("mu", mu)
    if mu == 0 or math.isinf(epsilon):
        return 0.0
    if math.isinf(mu):
        return 1.0
    return _gdp_delta_parts(epsilon, mu)[0]


def _surely_within(epsilon: float, mu: float, delta: float) -> bool:
    """delta(epsilon) of mu-GDP is at most `delta`, with the float error counted against it."""
    value, error = _gdp_delta_parts(epsilon, mu)
    return value + error <= delta


def _boundary(inside, low: float, high: float) -> tuple[float, float]:
    """Bisection on floats to adjacent values: `inside` holds at exactly one end of [low, high]
    and changes once between them; returns the last pair (low, high) it narrowed to."""
    for _ in range(2200):  # (halving the float format's whole range of exponents and digits)
        middle = low + (high - low) / 2
        if not low < middle < high:
            break
        if inside(middle) == inside(low):
            low = middle
        else:
            high = middle
    return low, high


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest epsilon at which a mu-GDP mechanism is (epsilon, delta)-DP, rounded up: the
    root of `gdp_delta`(epsilon, mu) = delta (Dong, Roth and Su 2022, Cor 2.13), the delta
    evaluated with its float error counted against it, to adjacent floats (within about 1e-12 of
    the exact epsilon, relative, or 1e-14 absolute).
    A Gaussian composition's epsilon exactly (Cor 3.3); infinite when delta is 0 and mu > 0."""
    mu, delta = _check_nonnegative("mu", mu), _check_rate("delta", delta)
    if mu == 0 or delta == 1:
        return 0.0
    if delta == 0 or math.isinf(mu):
        return math.inf
    if _surely_within(0.0, mu, delta):
        return 0.0
    # mu-GDP is (mu^2 / 2)-zCDP, so epsilon <= mu^2 / 2 + mu sqrt(2 log(1 / delta)) (Bun and
    # Steinke 2016, Prop 1.3); the doubling covers the float error of the test at that bound
    high = mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1.0
    while not _surely_within(high, mu, delta):
        high *= 2
    return _boundary(lambda e: _surely_within(e, mu, delta), 0.0, high)[1]


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest mu whose epsilon at `delta` is at most `epsilon`, rounded down: the mu-GDP
    that a Gaussian-only budget of (epsilon, delta) allows (Dong, Roth and Su 2022, Cor 2.13:
    delta(epsilon) increases in mu). 0 when delta is 0 (no Gaussian is pure-DP)."""
    epsilon, delta = _check_nonnegative("epsilon", epsilon), _check_rate("delta", delta)
    if delta == 0:
        return 0.0
    if delta == 1 or math.isinf(epsilon):
        return math.inf
    high = 1.0
    while _surely_within(epsilon, high, delta):
        high *= 2
    return _boundary(lambda m: m == 0 or _surely_within(epsilon, m, delta), 0.0, high)[0]


def pure_mu(epsilon: float) -> float:
    """The mu every epsilon-DP mechanism satisfies, -2 Phi^-1(1 / (1 + e^eps)), rounded up: the
    Gaussian trade-off curve meets the epsilon-DP one on the diagonal at that mu and, convex, lies
    below its two chords (Dong, Roth and Su 2022, the symmetric point of Def 2.6 and eq. (5))."""
    if math.isinf(epsilon):
        return math.inf
    quantile = float(_special().ndtri(1 / (1 + math.exp(epsilon))))
    return math.nextafter(-2 * quantile * (1 + 1e-12), math.inf)


@dataclass(frozen=True)
class Risk:
    """The strongest attack a figure allows at one false-positive rate: `fpr`, the share of
    people the test wrongly flags, and `tpr`, an upper bound on the share it rightly flags."""

    fpr: float
    tpr: float


def figure_risks(epsilon: float, delta: float | None,
                 fprs: Sequence[float] = FALSE_POSITIVE_RATES) -> tuple[Risk, ...]:
    """The attack bound of an (epsilon, delta) figure (`delta` None: a pure epsilon) at each
    false-positive rate (`tpr_at`); the power rounded up to 6 decimals, a bound still (the float
    noise of its computation, below 1e-12, is not rounded up: 0.34 stays 0.34)."""
    delta = 0.0 if delta is None else float(delta)

    def up(power: float) -> float:
        return min(1.0, math.ceil(power * 1e6 - 1e-6) / 1e6)

    return tuple(Risk(fpr, up(tpr_at(fpr, epsilon=float(epsilon), delta=delta))) for fpr in fprs)


def _one_in(rate: float) -> str:
    """0.01 -> "1 time in 100"; a rate that is not one in a whole number, as a percentage."""
    whole = round(1 / rate) if rate > 0 else 0
    if whole and math.isclose(rate * whole, 1, rel_tol=1e-9):
        return f"1 time in {whole}"
    return f"{rate * 100:g}% of the time"


def _percent_up(rate: float) -> str:
    """A power as a percentage rounded up (it is an upper bound): 0.3401 -> "35%"; above 99%,
    with as many decimals as keep it below 100% (0.99971 -> "99.98%")."""
    for places in range(0, 7):
        scale = 10 ** places
        shown = math.ceil(rate * 100 * scale - 1e-9) / scale
        if shown < 100:
            return f"{shown:.{places}f}%"
    return "100%"


def short_sentence(risks: Sequence[Risk]) -> str:
    """`risk_sentence` in a report headline's few words: a test of one person's protected values at
    the first false-positive rate, the others in brackets."""
    first, *others = risks

    def power(risk: Risk) -> str:
        return "every time" if risk.tpr >= 1 else f"at most {_percent_up(risk.tpr)} of the time"

    text = f"a test of one person's protected values, wrong {_one_in(first.fpr)}, is right {power(first)}"
    if others:
        text += " (" + "; ".join(f"wrong {_one_in(r.fpr)}: {power(r)}" for r in others) + ")"
    return text


def risk_sentence(risks: Sequence[Risk], *, variables: Sequence[str] | None = None) -> str:
    """One plain sentence of what `risks` allow an attacker: the first risk in full, the others
    in brackets. `variables` None: a membership test (is one person's record in the data); else
    an attribute test between two values of that person's `variables` (Tan's U-neighbours)."""
    if not risks:
        raise ValueError("`risks` must name at least one false-positive rate. Found none.")
    if variables is None:
        test, negative, positive = ("whether one person's record is in the data",
                                    "on people who are not", "on people who are")
    elif len(variables) > 4:  # (a headline's protected subset: named as such, not listed)
        test, negative, positive = ("which of two sets of values one person's protected variables take",
                                    "when it is the first", "when it is the second")
    else:
        names = variables[0] + " takes" if len(variables) == 1 else "{" + ", ".join(variables) + "} take"
        test, negative, positive = (f"which of two values one person's {names}",
                                    "when it is the first", "when it is the second")

    def power(risk: Risk) -> str:
        if risk.tpr >= 1:
            return "can be right every time"
        return f"is right at most {_percent_up(risk.tpr)} of the time"

    first, *others = risks
    text = (f"an attacker testing {test}, wrong about {_one_in(first.fpr)} {negative}, "
            f"{power(first)} {positive}")
    if others:
        text += " (" + "; ".join(f"wrong {_one_in(r.fpr)}: {power(r).removeprefix('is ')}" for r in others) + ")"
    return text
