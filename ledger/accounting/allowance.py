"""The approximate releases' allowance: the share of a figure's delta their deltas may use.

An (epsilon, delta) release's approximate part fires with probability at most its delta
(Kairouz, Oh and Viswanath 2015, Lemma 3.4). Under full adaptivity the deltas still to come are
unknown when a figure is printed, so they cannot be taken off the top of it: a fixed share of
every delta, the allowance (the dataset's, Dataset.allowance: half by default), is kept for them
before any release, and the filters' statements share the rest (spend.filter_delta). `record`
refuses a release that would take the approximate deltas the dataset holds past the allowance of
its delta (an upper bound on every subset's: `deltas_held`), so no printed figure is left without
its share.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..core.lazy import lazy_module
from ..core.numbers import format_delta
from ..core.records import Notion, Release
from .spend import ALLOWANCE, allowance_words, guarantee_spend

np = lazy_module("numpy")  # (a plan of pure releases never reads the arrays)


@dataclass(frozen=True)
class Overdraft:
    """A subset whose approximate deltas would pass the allowance."""

    subset: tuple[str, ...]
    deltas: Fraction  # the subset's approximate deltas with the plan
    allowance: Fraction  # the dataset's allowance x its delta
    releases: tuple[str, ...]  # the plan's approximate releases reading it
    share: Fraction = ALLOWANCE  # the dataset's allowance (Dataset.allowance)

    @property
    def message(self) -> str:
        return (f"the approximate deltas on {{{', '.join(self.subset)}}} would reach "
                f"{format_delta(self.deltas)}, past its allowance of {format_delta(self.allowance)} "
                f"({allowance_words(self.share)} of the dataset's delta), by "
                f"{', '.join(self.releases)}: give them smaller deltas, or a pure or rho guarantee")


def approximate(plan: Sequence[Release]) -> list[Release]:
    """The plan's releases with an (epsilon, delta) guarantee they may be charged by."""
    return [r for r in plan if largest_delta(r)]


def largest_delta(release: Release) -> Fraction:
    """The largest delta any subset may be charged for the release: of its (epsilon, delta)
    guarantees as charged in its dataset's relation (guarantee_spend); none for a release charged
    through its mechanism's event (`deltas_indexed`)."""
    from .dp_events import mechanism_event

    found = [guarantee_spend(g).approx_delta for g in release.guarantees if g.notion is Notion.APPROX]
    largest = max((d for d in found if d is not None), default=Fraction(0))
    return largest if largest and mechanism_event(release) is None else Fraction(0)


def deltas_held(releases: Iterable[Release]) -> Fraction:
    """An upper bound on the approximate deltas of every subset: each standalone release's largest
    delta, and per family the two largest of its members' (a record changed within one part, or
    moved between two, docs/explanation/model.md#families). Every subset's approximate deltas are at most this sum."""
    total = Fraction(0)
    families: dict[str, list[Fraction]] = {}
    for release in releases:
        delta = largest_delta(release)
        if not delta:
            continue
        if release.family is None:
            total += delta
        else:
            families.setdefault(release.family, []).append(delta)
    for deltas in families.values():
        total += sum(sorted(deltas, reverse=True)[:2], Fraction(0))
    return total


def deltas_indexed(index) -> tuple[Fraction, frozenset[str]]:
    """`deltas_held` of a LedgerIndex's charged releases (its guarantee arrays, whatever its rows
    hold of each release), and the variables its approximate releases read. A release charged
    through its mechanism's event (a Gaussian declared by (epsilon, delta): dp_events.Event) draws
    no delta: its figure is its noise's curve."""
    from .index_figures import index_events

    by_event = index_events(index).mech >= 0
    per_release: dict[int, Fraction] = {}
    for k, value in enumerate(index.g_value.tolist()):
        delta = index.values[value].approx_delta
        if delta and not by_event[int(index.g_release[k])]:
            i = int(index.g_release[k])
            per_release[i] = max(per_release.get(i, Fraction(0)), delta)
    family_of = {i: fid for fid, rows in index.members.items() for i in rows}
    total = Fraction(0)
    families: dict[str, list[Fraction]] = {}
    for i, delta in per_release.items():
        if i in family_of:
            families.setdefault(family_of[i], []).append(delta)
        else:
            total += delta
    for deltas in families.values():
        total += sum(sorted(deltas, reverse=True)[:2], Fraction(0))
    names = index.variables
    read = frozenset(names[j] for j in np.flatnonzero(index.reads[list(per_release)].any(axis=0))) \
        if per_release else frozenset()
    return total, read


def overdraft(index, plan: Sequence[Release], order: Sequence[str], delta: Fraction,
              share: Fraction = ALLOWANCE) -> Overdraft | None:
    """The overdraft of the plan over the charged releases of `index`, or None: refused when the
    bound `deltas_held` of both passes the allowance (`share`, the dataset's) of the dataset's
    delta (so no subset, however wide, can pass it), naming the variables the approximate releases
    read."""
    mine = approximate(plan)
    if not mine:
        return None
    held, read = deltas_indexed(index)
    total = held + deltas_held(plan)
    limit = share * delta
    if total <= limit:
        return None
    read = read.union(*(r.reads for r in plan if largest_delta(r)))
    return Overdraft(tuple(n for n in order if n in read), total, limit, tuple(r.id for r in mine), share)
