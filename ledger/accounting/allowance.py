"""The approximate releases' allowance: the share of a figure's delta their deltas may use.

An (epsilon, delta) release's approximate part fires with probability at most its delta
(Kairouz, Oh and Viswanath 2015, Lemma 3.4). Under full adaptivity the deltas still to come are
unknown when a figure is printed, so they cannot be taken off the top of it: a fixed share of
every delta, the allowance (spend.ALLOWANCE, half), is kept for them before any release, and the
filters' statements share the rest (spend.filter_delta). `record` refuses a release that would
take a subset's approximate deltas past the allowance of the dataset's delta, so no printed
figure is left without its share.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..core.numbers import format_delta, format_number
from ..core.records import Notion, Release
from .engine import release_cost
from .spend import ALLOWANCE, Spend


@dataclass(frozen=True)
class Overdraft:
    """A subset whose approximate deltas would pass the allowance."""

    subset: tuple[str, ...]
    deltas: Fraction  # the subset's approximate deltas with the plan
    allowance: Fraction  # ALLOWANCE x the dataset's delta
    releases: tuple[str, ...]  # the plan's approximate releases reading it

    @property
    def message(self) -> str:
        return (f"the approximate deltas on {{{', '.join(self.subset)}}} would reach "
                f"{format_delta(self.deltas)}, past its allowance of {format_delta(self.allowance)} "
                f"(half of the dataset's delta), by "
                f"{', '.join(self.releases)}: give them smaller deltas, or a pure or rho guarantee")


def approximate(plan: Sequence[Release]) -> list[Release]:
    """The plan's releases with an (epsilon, delta) guarantee."""
    return [r for r in plan if any(g.notion is Notion.APPROX for g in r.guarantees)]


def subsets_to_check(plan: Sequence[Release]) -> list[frozenset[str]]:
    """Each approximate release's reads, and all of them together."""
    found = [r.reads for r in approximate(plan) if r.reads]
    together = frozenset().union(*found) if found else frozenset()
    return [*dict.fromkeys(found), together] if len(found) > 1 else found


def overdraft(subset: frozenset[str], order: Sequence[str], held: Spend, plan: Iterable[Release],
              delta: Fraction) -> Overdraft | None:
    """The overdraft on `subset` of the plan over `held` (its spend before the plan), or None.
    A subset with no certified bound shows ∞ anyway and is not refused here."""
    if held.unbounded:
        return None
    costs = {r.id: release_cost(r, subset) for r in plan if subset & r.reads}
    if any(c.unbounded for c in costs.values()):
        return None
    total = held.approx_delta + sum((c.approx_delta for c in costs.values()), Fraction(0))
    limit = ALLOWANCE * delta
    if total <= limit:
        return None
    named = tuple(rid for rid, c in costs.items() if c.approx_delta)
    return Overdraft(tuple(n for n in order if n in subset), total, limit, named)
