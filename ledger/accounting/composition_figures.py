"""The accountants' figures of one composition: basic, the Rényi filter, and the PLD (information only), all three at once (`figures`).

basic: the composed spend's epsilon (Tan Prop 3.4; CKS 2020, Prop 12 for rho). rdp: the Rényi filter
at the orders fixed in advance (Feldman and Zrnic 2021, Thm 4.3), the approximate guarantees by
basic composition beside it (Kairouz, Oh and Viswanath 2015, Lemma 3.4).

Invariant: every figure holds under full adaptivity (figure_validity.ADAPTIVE) but the PLD's.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from ..core.numbers import INF
from .figure_validity import ADAPTIVE, CASES, CONVERSIONS, Figure, THEOREMS
from .pld_accountant import pld_figure
from .renyi_curves import _up, rdp_filter_epsilon
from .spend import filter_delta, within_allowance
from .subset_composition import Composition


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


def figures(comp: Composition, delta: Fraction, invalid_pld: bool = True) -> dict[str, Figure]:
    """The three accountants' figures for one subset at `delta`. `invalid_pld=False`: the PLD
    figure, never valid (information only), is not computed (`best` never chooses it;
    dp_accounting is not even imported): a Figure marked not available."""
    case = ADAPTIVE
    pld = pld_figure(comp, delta, case) if invalid_pld else _pld_not_computed(comp, delta, case)
    return {"basic": basic_figure(comp, delta, case), "rdp": rdp_figure(comp, delta, case), "pld": pld}


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
