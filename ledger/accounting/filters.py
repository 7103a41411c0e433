"""A budget (cap) is a privacy filter fixed when it is set (docs/explanation/accounting.md).

A filter admits releases one at a time, each chosen after the outputs of the earlier ones, and
guarantees its stated (epsilon, delta) for whatever it admitted, whenever the history stops
(Rogers, Roth, Ullman and Vadhan 2016). Each cap is one filter of a recorded kind:

    kind       cap                 admits while                                   theorem
    pure       epsilon             the sum of pure epsilons <= epsilon            basic composition
    rho        rho                 the sum of rho <= rho (pure as eps^2 / 2)      Feldman and Zrnic 2021, Remark 4.4
    running    epsilon at delta    the subset's running figure <= epsilon         an odometer stopped is a filter
                                   (spend.py: the pure sum, 22 Rényi orders)      (Rogers, Roth, Ullman, Vadhan 2016)
    gaussian   epsilon at delta    sum of mu_i^2 <= mu^2, mu the Gaussian DP      Smith and Thakurta 2022 (fully
                                   parameter whose epsilon at delta is the cap    adaptive GDP composition)
    renyi:A    epsilon at delta    the Rényi divergences at order A, summed,      Feldman and Zrnic 2021, Thm 4.3;
                                   converted at (1 - allowance) delta <= epsilon  CKS 2020, Prop 12

A Gaussian-DP filter admits Gaussian releases exactly (mu = sensitivity / sigma, Dong, Roth and
Su 2022, Thm 2.7) and pure ones through the mu every epsilon-DP mechanism satisfies (the
symmetric point of the trade-off curves: mu = -2 Phi^-1(1 / (1 + e^eps))); it admits no rho-only
or approximate release, so its conversion uses the whole delta. A Rényi filter's approximate
releases draw their deltas from the dataset's allowance and their epsilons add at the order
(Kairouz, Oh and Viswanath 2015, Lemma 3.4). The order A is fixed when the cap is set: the
order at which the rho budget equivalent to the cap (CKS 2020, Corollary 13) converts best.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..core.numbers import INF, Number, float_down
from .risk import gdp_epsilon, pure_mu
from .spend import ALLOWANCE

GAUSSIAN = "gaussian"
RENYI = "renyi"
RUNNING = "running"

THEOREMS = {
    "pure": "pure-epsilon filter: the sum of epsilons (basic composition; Rogers, Roth, Ullman and Vadhan 2016)",
    "rho": "zCDP filter: the sum of rho (Feldman and Zrnic 2021, Remark 4.4), converted to epsilon at the "
           "budget's best order (Canonne, Kamath and Steinke 2020, Corollary 13)",
    RUNNING: "the running figure as a filter: admitted while the subset's running figure (the pure sum, and the "
             "Rényi orders fixed in advance at 1/22 of half the delta each) stays within the cap, valid at every "
             "stopping time (Feldman and Zrnic 2021, Thm 4.3; Rogers, Roth, Ullman and Vadhan 2016)",
    GAUSSIAN: "Gaussian-DP filter: sum of mu_i^2 within mu^2 (Smith and Thakurta 2022, fully adaptive "
              "composition), epsilon at the whole delta (Dong, Roth and Su 2022, Cor 2.13)",
    RENYI: "Rényi filter at order {order:g}, fixed when the cap was set (Feldman and Zrnic 2021, Thm 4.3), "
           "converted at (1 - allowance) x delta (Canonne, Kamath and Steinke 2020, Prop 12)",
}


def kind_of(filter_text: str | None) -> tuple[str, float | None]:
    """("gaussian" or "running", None) or ("renyi", order) from a cap's stored filter text."""
    if not filter_text:
        return RUNNING, None
    name, _, order = filter_text.partition(":")
    return name, float(order) if order else None


def describe(cap) -> str:
    """The one sentence every command and report says of a cap's filter."""
    if cap.rho is not None:
        return THEOREMS["rho"]
    if cap.delta is None:
        return THEOREMS["pure"]
    name, order = kind_of(cap.filter)
    text = THEOREMS[name].format(order=order or 0)
    if name == RUNNING and cap.allowance != ALLOWANCE:  # (the dataset's allowance is not the default half)
        text = text.replace("at 1/22 of half the delta each", f"at 1/22 each of the {1 - cap.allowance} of the "
                                                              "delta the dataset's approximate allowance leaves")
    return text


def short(cap) -> str:
    """The filter in a table cell's few words: `running figure`, `Gaussian DP`, `Rényi order 6.4`,
    `pure sum`, `zCDP sum`."""
    if cap.rho is not None:
        return "zCDP sum"
    if cap.delta is None:
        return "pure sum"
    name, order = kind_of(cap.filter)
    return {RUNNING: "running figure", GAUSSIAN: "Gaussian DP"}.get(name) or f"Rényi order {order or 0:g}"


# --------------------------------------------------------------------------
# Gaussian DP (Dong, Roth and Su 2022)
# --------------------------------------------------------------------------


def event_mu(kind: str, a: Fraction, b=None) -> float:
    """mu of one accounting event (dp_events.Event), INF where Gaussian DP states none."""
    if kind == "gaussian":
        return INF if not a else float(1 / Fraction(a))
    if kind == "laplace":
        return pure_mu(float(1 / Fraction(a))) if a else INF
    if kind == "dlaplace":
        return pure_mu(float(a) * int(b))
    if kind in ("pure", "sampled"):
        return pure_mu(float(a))
    return INF


def gaussian_figure(counts: dict[tuple, int], delta: Number) -> float:
    """A Gaussian-DP filter's epsilon at the cap's whole `delta` of (kind, a, b) -> count."""
    total = 0.0
    for (kind, a, b), count in counts.items():
        if count <= 0:
            continue
        mu = event_mu(kind, a, b)
        if math.isinf(mu):
            return INF
        total += count * mu * mu
    return gdp_epsilon(math.sqrt(total), float_down(delta)) if total else 0.0


# --------------------------------------------------------------------------
# Rényi DP at one order
# --------------------------------------------------------------------------


def renyi_order(epsilon: Fraction, delta: Fraction, orders, allowance: Fraction = ALLOWANCE) -> float:
    """The order fixed for a Rényi-filter cap of (epsilon, delta): of the grid `orders`, the one
    that admits the most zCDP-like spend (the largest rho whose curve a * rho fits the budget at
    that order), i.e. the best order for the rho budget equivalent to the cap."""
    target = float_down((1 - allowance) * delta)
    log_inverse = math.log(1 / target)
    best, best_rho = float(orders[0]), -1.0
    for a in (float(x) for x in orders):
        room = float(epsilon) - ((log_inverse - math.log(a)) / (a - 1) + math.log1p(-1 / a))
        rho = room / a
        if rho > best_rho:
            best, best_rho = a, rho
    return best


def renyi_figure(divergence: float, order: float, delta: Number, approx_epsilon: float = 0.0,
                 allowance: Fraction = ALLOWANCE) -> float:
    """A Rényi filter's epsilon at its fixed `order`: the summed divergences plus the approximate
    epsilons, converted by CKS (2020) Prop 12 at (1 - allowance) delta, rounded up."""
    if math.isinf(divergence):
        return INF
    target = float_down((1 - allowance) * (delta if isinstance(delta, Fraction) else Fraction(delta)))
    if target <= 0:
        return INF
    total = divergence + approx_epsilon
    if total <= 0:
        return 0.0
    value = total + math.log1p(-1 / order) - (math.log(target) + math.log(order)) / (order - 1)
    return math.nextafter(max(value, 0.0) * (1 + 1e-12), math.inf)


__all__ = ["GAUSSIAN", "RENYI", "RUNNING", "THEOREMS", "kind_of", "describe", "short", "event_mu", "gaussian_figure",
           "renyi_order", "renyi_figure"]
