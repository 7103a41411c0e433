"""The values the façade returns: a subset's loss, an audit event, a plan's check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..accounting import budget
from ..accounting.risk import Risk, figure_risks
from ..core.numbers import Number, safe_float
from ..operations import transactions as operations


Recorded = operations.Recorded


BudgetRefused = operations.BudgetRefused  # a step that would break a cap (exit 1, nothing written)


def exact_fraction(value: Number) -> Fraction | None:
    return value if isinstance(value, Fraction) else None


@dataclass(frozen=True)
class SubsetLoss:
    """The privacy loss on one subset of variables (Tan, Prop 3.4 composition)."""

    dataset: str
    variables: tuple[str, ...]
    epsilon: float  # a safe upper bound; math.inf when not protected
    exact: Fraction | None  # the exact epsilon where one exists
    delta: Fraction | None  # the delta epsilon is stated at; None for a pure total
    rho: Fraction | None  # the total as rho-zCDP, when it has no (epsilon, delta) part
    notion: str  # pure, approx, zcdp, mixed or unbounded
    releases: tuple[str, ...]  # the releases charging it
    accountant: str = "basic"  # which accountant gave `epsilon`: the smallest valid one
    case: str = "adaptive"  # every figure holds under fully adaptive choices (docs/explanation/accounting.md)
    accountants: Mapping[str, Any] = field(default_factory=dict)  # name -> accountants.Figure, all three
    reason: str | None = None  # why the figure is ∞ (operations/reasons.py), as `subset` prints it

    @property
    def risk(self) -> tuple[Risk, ...]:
        """The strongest attack this figure allows, at 1% and 5% false positives: `subset --json`'s
        `risk` (accounting/risk.py: the (epsilon, delta) trade-off curve, Dong, Roth and Su 2022)."""
        return figure_risks(self.epsilon, None if self.delta is None else safe_float(self.delta))

    @property
    def statement(self) -> str:
        """The figure in one sentence: the releases composed, by which theorem, and what the
        figure allows an attacker (`subset --explain`'s words, operations/explain.py)."""
        from ..core.numbers import format_delta, format_number
        from ..operations.explain import figure_explanation
        from ..operations.reasons import infinity_text

        if self.exact is None and self.epsilon == float("inf"):
            return figure_explanation(self.variables, self.releases, infinity_text(self.reason), self.risk,
                                      theorem=None, case=None)
        shown = self.accountants.get(self.accountant)
        figure = f"epsilon {format_number(self.exact if self.exact is not None else self.epsilon)}" + (
            " (pure)" if self.delta is None else f" at delta {format_delta(self.delta)}")
        return figure_explanation(self.variables, self.releases, figure, self.risk,
                                  theorem=getattr(shown, "theorem", self.accountant), case=self.case)


@dataclass(frozen=True)
class AuditEvent:
    """One audit-trail event about a release: when, who, what, and the reason given."""

    seq: int
    at: str
    actor: str
    kind: str  # release.recorded, release.approved, release.published, ...
    reason: str | None


@dataclass(frozen=True)
class PlanCheck:
    """The pre-release check of a plan: every cap it touches, as it would leave it."""

    checks: tuple[budget.CapCheck, ...]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)
