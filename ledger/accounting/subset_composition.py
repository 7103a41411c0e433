"""A subset's composition as data: the accounting events of every release charged on it, and its exact basic spend.

`composition` is the reference path, release by release (index_figures.IndexEvents is the fast
path over a LedgerIndex's arrays). A standalone release enters by its mechanism's event where it
has one (dp_events.unit_events), a family by the events of its guarantee (docs/explanation/model.md#families).

Invariant: an unbounded cost makes the composition unbounded, whatever the other releases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction

from ..core.lazy import lazy_module
from ..core.records import CHARGED_STATUSES, Family, Release
from .dp_events import spend_events, unit_events
from .renyi_curves import summed_curve
from .spend import ALLOWANCE, Spend

np = lazy_module("numpy")  # imported on first use


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


def composition(releases: Iterable[Release], families: Iterable[Family], subset: Iterable[str],
                basic: Spend | None = None) -> Composition:
    """The reference path: every release's event on `subset`, families charged by their
    guarantee (docs/explanation/model.md#families), release by release (`index_composition` is the fast path)."""
    from .cost_rule import family_cost, ledger_cost, release_cost

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
    for fid, group in members.items():  # (0 where no member reads the subset: cost_rule.family_options)
        spend = family_cost(family_map[fid], group, subset)
        if spend.unbounded:
            comp.unbounded = True
        else:
            comp.events.update(spend_events(spend))
    if comp.basic.unbounded:
        comp.unbounded = True
    return comp
