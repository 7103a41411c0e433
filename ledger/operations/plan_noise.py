"""A planned release's share as the parameter written, its expected error, and the solved
release file (docs/explanation/plans.md, "From a share to the noise").

A share is an epsilon (laplace, geometric) or a rho (gaussian, discrete-gaussian). An epsilon
or a discrete Gaussian's rho is written exactly (rounded down to 12 significant digits only
past a 30-digit denominator); a Gaussian's sigma = sensitivity / sqrt(2 rho) rounded up (Bun
and Steinke 2016, Prop 1.6; the discrete Gaussian: Canonne, Kamath and Steinke 2020, Thm 14).
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from ..accounting.catalogue import derive_guarantees
from ..accounting.relation import in_dataset
from ..core.errors import InputErrors, LedgerError
from ..core.numbers import NumberError, to_fraction
from ..core.records import Dataset, Guarantee, Mechanism, Notion, Release, Status
from ..input.plan import PlannedRelease

DIGITS = 12  # significant digits kept of a parameter that is not exact
EXACT = 10**30  # a share is written exactly while its denominator is at most this
Z95 = 1.959963984540054  # the standard normal's 97.5% quantile


@dataclass(frozen=True)
class Solved:
    """One planned release as solved: the parameter written, the cap that binds it, its error."""

    planned: PlannedRelease
    release: Release
    parameter: str  # epsilon, sigma or rho
    value: Fraction
    binding: str | None  # the cap that stopped its share growing; None for a fixed parameter
    std: float  # the noise's standard deviation (a bound for the discrete Gaussian)
    halfwidth95: float  # the half-width of the noise's central 95% interval (a bound where marked)


@dataclass(frozen=True)
class Solution:
    dataset: str
    rows: tuple[Solved, ...]

    def release_file(self) -> dict:
        """The release file (`record` and `check` read it) of the solved plan."""
        return {"dataset": self.dataset, "releases": [entry(row) for row in self.rows]}


# --------------------------------------------------------------------------
# Shares as parameters
# --------------------------------------------------------------------------


def rounded_down(value: Fraction) -> Fraction:
    """`value` itself when its denominator is at most EXACT, else rounded down to DIGITS significant digits."""
    if value.denominator <= EXACT:
        return value
    return significant_down(value)


def significant_down(value: Fraction) -> Fraction:
    """`value` (> 0) rounded down to DIGITS significant digits."""
    scale = Fraction(10) ** (DIGITS - 1 - math.floor(math.log10(value)))
    return Fraction(math.floor(value * scale)) / scale


def sigma_up(sensitivity: Fraction, rho: Fraction) -> Fraction:
    """The smallest sigma to DIGITS significant digits, rounded up, whose Gaussian is at most
    rho-zCDP: sigma >= sensitivity / sqrt(2 rho) (Bun and Steinke 2016, Prop 1.6)."""
    guess = math.nextafter(float(sensitivity) / math.sqrt(2 * float(rho)), math.inf)
    sigma = Fraction(decimal.Context(prec=DIGITS, rounding=decimal.ROUND_CEILING).create_decimal(guess))
    while sensitivity * sensitivity > 2 * rho * sigma * sigma:  # (float error: never below the root)
        sigma *= 1 + Fraction(1, 10**(DIGITS - 1))
    return sigma


def release_at(planned: PlannedRelease, share: Fraction, dataset: Dataset, now) -> Release:
    """The planned release with share `share` (epsilon or rho), as the release file states it."""
    reads = frozenset(planned.reads)
    sensitivity = planned.sensitivity
    if planned.family == "discrete-gaussian":
        rho = share if planned.fixed is not None else rounded_down(share)
        mechanism = Mechanism("declared", (("noise", "discrete-gaussian"), ("sensitivity", sensitivity)))
        guarantees = (Guarantee(reads, Notion.ZCDP, rho=rho),)
    else:
        if planned.family == "gaussian":
            sigma = planned.sigma if planned.sigma is not None else sigma_up(sensitivity, share)
            params = (("sensitivity", sensitivity), ("sigma", sigma))
        else:
            epsilon = share if planned.fixed is not None else rounded_down(share)
            params = (("epsilon", epsilon), ("scale", sensitivity / epsilon), ("sensitivity", sensitivity))
        mechanism = Mechanism(planned.family, params)
        guarantees, _ = derive_guarantees(mechanism, reads)
    release = Release(planned.id, dataset.name, reads, mechanism, guarantees, title=planned.title,
                      status=Status.PLANNED, recorded_at=now)
    return in_dataset(release, dataset)


def parameter(release: Release) -> tuple[str, Fraction]:
    """The parameter a solved release is known by: epsilon, sigma, or (a discrete Gaussian) rho."""
    if release.mechanism.name == "declared":
        return "rho", release.guarantees[0].rho
    if release.mechanism.name == "gaussian":
        return "sigma", release.mechanism.param("sigma")
    return "epsilon", release.mechanism.param("epsilon")


def expected_error(family: str, sensitivity: Fraction, name: str, value: Fraction) -> tuple[float, float]:
    """(standard deviation, 95% half-width) of the noise. Laplace of scale b: sqrt(2) b and
    b ln 20; two-sided geometric of alpha = e^(-eps / sensitivity): sqrt(2 alpha) / (1 - alpha) and
    the smallest k with P(|X| > k) = 2 alpha^(k+1) / (1 + alpha) <= 5% (Ghosh, Roughgarden and
    Sundararajan 2009); Gaussian: sigma and 1.96 sigma; discrete Gaussian: bounds, sigma (its
    variance is at most sigma^2) and sigma sqrt(2 ln 40) (its sub-Gaussian tail), Canonne,
    Kamath and Steinke 2020, Prop 19 and Prop 25."""
    if family == "laplace":
        scale = float(sensitivity / value)
        return math.sqrt(2) * scale, scale * math.log(20)
    if family == "geometric":
        alpha = math.exp(-float(value / sensitivity))
        k = max(0, math.ceil(math.log(0.05 * (1 + alpha) / 2) / math.log(alpha) - 1 - 1e-12))
        return math.sqrt(2 * alpha) / (1 - alpha), float(k)
    sigma = float(value) if name == "sigma" else float(sensitivity) / math.sqrt(2 * float(value))
    if family == "gaussian":
        return sigma, Z95 * sigma
    return sigma, sigma * math.sqrt(2 * math.log(40))


def error_at(planned: PlannedRelease, share: Fraction) -> tuple[float, float]:
    """(standard deviation, 95% half-width) of the planned release at `share`, as written."""
    if planned.family == "gaussian":
        return expected_error(planned.family, planned.sensitivity, "sigma", sigma_up(planned.sensitivity, share))
    return expected_error(planned.family, planned.sensitivity, "rho" if planned.zcdp else "epsilon", share)


def floor_share(planned: PlannedRelease) -> Fraction:
    """The smallest share (to 1e-9, rounded up) whose noise meets the release's accuracy floors
    (`max_std`, `max_halfwidth95`); 0 without a floor. The error falls as the share grows: the
    share is found by bisection on `error_at`."""
    if planned.max_std is None and planned.max_halfwidth95 is None:
        return Fraction(0)

    def meets(share: Fraction) -> bool:
        std, halfwidth = error_at(planned, share)
        return ((planned.max_std is None or std <= planned.max_std)
                and (planned.max_halfwidth95 is None or halfwidth <= planned.max_halfwidth95))

    low, high = Fraction(0), Fraction(1)
    while not meets(high):
        low, high = high, high * 2
        if high > 10**12:  # (no noise of this family meets the floor: no cap will hold the share)
            return high
    while high - low > high * Fraction(1, 10**9):
        middle = significant_down((low + high) / 2)
        if not low < middle < high:
            break
        low, high = (low, middle) if meets(middle) else (middle, high)
    return high


def solved_parameters(document) -> dict[str, tuple[str, Fraction]]:
    """Each release of a solved release file (a `Document`) by id: the parameter it is known by
    (`parameter`) and its value; InputErrors naming the file and field where one has none."""
    data = document.data if isinstance(document.data, Mapping) else {}
    releases = data.get("releases") if isinstance(data.get("releases"), list) else None
    if releases is None:
        raise InputErrors([LedgerError(document.source(), "releases", "a release file lists its releases")])
    found, errors = {}, []
    for index, item in enumerate(releases):
        at = ("releases", index)
        try:
            mechanism = item["mechanism"]
            name = {"declared": "rho", "gaussian": "sigma"}.get(mechanism["name"], "epsilon")
            value = item["guarantees"][0]["rho"] if name == "rho" else mechanism[name]
            found[str(item["id"])] = (name, to_fraction(value))
        except (KeyError, TypeError, IndexError, NumberError):
            errors.append(LedgerError(document.source(at), f"releases[{index}]", "not a solved release: no "
                                      "epsilon (laplace, geometric), sigma (gaussian) or rho (declared)"))
    if errors:
        raise InputErrors(errors)
    return found


def entry(row: Solved) -> dict:
    """A solved release as an entry of a release file."""
    release = row.release
    mechanism = {"name": release.mechanism.name, **{k: entry_text(v) for k, v in release.mechanism.params}}
    found = {"id": release.id, **({"title": release.title} if release.title else {}),
             "reads": list(row.planned.reads), "mechanism": mechanism}
    if release.mechanism.name == "declared":
        found["guarantees"] = [{"protects": list(row.planned.reads), "rho": entry_text(row.value)}]
    return found


def entry_text(value) -> str:
    """A parameter as a release file states it: the exact number, as a decimal where it is one."""
    if not isinstance(value, Fraction):
        return value
    if value.denominator == 1:
        return str(value.numerator)
    rest, places = value.denominator, {2: 0, 5: 0}
    for p in places:
        while rest % p == 0:
            rest //= p
            places[p] += 1
    if rest == 1:  # a decimal: 1 / (2^a 5^b) has max(a, b) digits after the point, written exactly
        return decimal_text(value, max(places.values()))
    return f"{value.numerator}/{value.denominator}"


def decimal_text(value: Fraction, digits: int) -> str:
    """`value`, whose denominator divides 10^digits, as a decimal with exactly `digits` places at most."""
    scaled = value * 10**digits  # an integer
    sign, whole = ("-" if scaled < 0 else ""), abs(int(scaled))
    integer, fraction = divmod(whole, 10**digits)
    text = f"{integer}.{fraction:0{digits}d}".rstrip("0").rstrip(".")
    return sign + text


# --------------------------------------------------------------------------
