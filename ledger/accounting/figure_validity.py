"""A figure: one accountant's epsilon for one subset at one delta, with what makes it valid; and the one shown (`best`).

Accountants: `basic` (Tan Prop 3.4; CKS 2020 for rho), `rdp` (the Rényi filter, Feldman and Zrnic
2021, Thm 4.3), `pld` (dp_accounting's PLD accountant, information only). There is one case:
fully adaptive (any release may have been chosen after earlier outputs were seen), so only
filters and odometers are valid (Rogers et al. 2016; Feldman and Zrnic 2021).

Invariants: every figure carries its accountant, case, theorem, conversion and delta; the figure
shown is the smallest valid one; the PLD figure is never valid, so never shown nor a cap's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from ..core.numbers import Number
from .spend import CONVERSION_NAME


ACCOUNTANTS = ("basic", "rdp", "pld")


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
