"""A spend measured in a cap's unit: pure epsilon, epsilon at the cap's delta, or rho.

One measure for every command (docs/explanation/model.md#composition): the cap's figure, a
release's own charge, the worst of a family's alternatives, and the order a choice of charges is
made in (`objective`). Invariant: a figure is never below the true one; ∞ when the spend cannot
be stated in the cap's unit.
"""

from __future__ import annotations


from .spend import Spend
from .charge_choice import Objective, Option, alternatives_of, at_delta
from ..core.numbers import INF, Number, float_up
from ..core.records import Cap


def objective(cap: Cap) -> Objective:
    """Prefer the smaller figure in the cap's unit, then the smaller rank (`charge_choice.at_delta`
    for a cap at a delta: the choice `subset --delta` makes, and the same statement of a
    family's worst, `charge_choice._suffered`)."""
    if cap.rho is None and cap.delta is not None:
        return at_delta(cap.delta, cap.allowance)  # measure(cap, spend) is spend.epsilon(cap.delta, ...)
    return lambda spend: (float_up(measure(cap, spend)), spend.rank())


def measure(cap: Cap, spend: Spend) -> Number:
    """The spend in the cap's unit (see records.Cap)."""
    if spend.unbounded:
        return INF
    if cap.rho is not None:
        rho = spend.zcdp_rho()  # pure epsilon enters as epsilon^2 / 2 (Bun and Steinke 2016, Prop 3.3)
        return INF if rho is None else rho
    if cap.delta is None:
        return spend.pure if spend.is_pure else INF
    return spend.epsilon(cap.delta, cap.allowance)


def own_measure(cap: Cap, spend: Spend) -> Number:
    """One release's own charge in the cap's unit (`Spend.own_epsilon` for a cap at a delta): what
    a driver or a plan's charge of one release is: one mechanism, at the whole delta."""
    if cap.rho is None and cap.delta is not None and not spend.unbounded:
        return spend.own_epsilon(cap.delta, cap.allowance)
    return measure(cap, spend)


def option_measure(cap: Cap, option: Option) -> Number:
    """One unit's own figure in the cap's unit: the worst of a family's alternatives."""
    if isinstance(option, Spend):  # one alternative: itself (no ranking to do)
        return own_measure(cap, option)
    return max((own_measure(cap, a) for a in alternatives_of(option)), key=float_up)


def options_measure(cap: Cap, options: tuple[Option, ...]) -> Number:
    """A release's (or family's) own charge: its cheapest option, ∞ when it has none."""
    if not options:
        return INF
    if len(options) == 1:  # (the usual release: one option, nothing to rank)
        return option_measure(cap, options[0])
    return min((option_measure(cap, o) for o in options), key=float_up)
