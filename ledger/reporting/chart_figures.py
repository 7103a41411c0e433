"""The figures the report's two charts show, computed from the ledger index: the loss on every
pair of variables (`Pairs`) and on each variable over time (`Timeline`).

Invariant: the exact figures are those the report prints beside the charts; floats are
for colours and curves only, and a cap's line is drawn at or below its limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from fractions import Fraction

from ..accounting.grid_figures import epsilon_floats  # (the report draws with it)
from ..accounting.history import charged_from
from ..accounting.ledger_index import LedgerIndex
from ..core.lazy import lazy_module
from ..core.numbers import Number, is_infinite
from ..core.records import Cap
from ..operations import reasons
from ..operations.meeting_pack import aware  # (computed below the API; the report shows it)
from .chart_data import PairFigure, Pairs, Timeline

np = lazy_module("numpy")  # imported on first use: recording never needs it


PAIRS_ANNOTATED = 24  # up to this many variables, every heat-map cell carries its figure
HIGHEST_PAIRS = 15  # pairs listed with exact figures under the heat map
TIMELINE_POINTS = 200  # at most this many points per variable in the chart over time
TIMELINE_LABELLED = 8  # variables drawn in colour and named; the others in grey


def _pair_figure(index: LedgerIndex, a: str, b: str, spend, delta: Fraction, public: Sequence[str]) -> PairFigure:
    """One of the highest pairs; an unbounded one with its reason in the words `subset a b` prints
    (reasons.unbounded_reason; the headline's worst pair is given its reason the same way)."""
    why = reasons.unbounded_reason(index, (a, b), public) if spend.unbounded else None
    return PairFigure(a, b, spend.epsilon(delta, index.allowance), why)


def pair_figures(index: LedgerIndex, delta: Fraction, objective, protected: Sequence[str] | None = None,
                 best: bool = False) -> Pairs:
    """Every pair of variables: exact figures for the highest pairs (and for every pair of
    a small dataset), float epsilons for the heat map's colours. With `protected` (the
    variables not classified public, docs/explanation/model.md#public-and-protected-variables), the highest pairs are pairs of protected
    variables, and `unprotected` counts those only: a public variable's ∞ is expected.
    `best`: each pair's figure is the one `pairs` prints, the smallest valid one of the basic,
    Rényi and PLD accountants (every_pair.pair_figures)."""
    variables = index.variables
    n = len(variables)
    grid = index.pair_matrix(objective)
    colour = epsilon_floats(grid, delta, index.allowance)
    if best and n >= 2:
        from ..operations.shown_figures import best_pair_grid

        grid, colour = best_pair_grid(index, delta, grid, colour)
    upper = np.triu_indices(n, k=1)
    public: tuple[str, ...] = ()
    if protected is not None and len(protected) < n:
        keep = np.isin(np.asarray(variables, dtype=object), np.asarray(list(protected), dtype=object))
        both = keep[upper[0]] & keep[upper[1]]
        upper = (upper[0][both], upper[1][both])
        public = tuple(v for v, k in zip(variables, keep) if not k)
    values = colour[upper]
    order = np.lexsort((upper[1], upper[0], -values))[:HIGHEST_PAIRS]  # largest first, ∞ first of all
    highest = tuple(_pair_figure(index, variables[upper[0][k]], variables[upper[1][k]],
                                 grid.spend(upper[0][k], upper[1][k]), delta, public) for k in order)
    matrix = None
    if n <= PAIRS_ANNOTATED:
        figures = {}
        for i in range(n):
            for j in range(i, n):
                figures[i, j] = figures[j, i] = grid.spend(i, j).epsilon(delta, index.allowance)
        matrix = tuple(tuple(figures[i, j] for j in range(n)) for i in range(n))
    pairs = Pairs(variables=variables, count=n * (n - 1) // 2, unprotected=int(np.isinf(values).sum()),
                  highest=highest, matrix=matrix, colour=colour, svg="", protected_only=bool(public), public=public)
    if matrix is not None and any(family.partition for family in index.families.values()):
        # a keyed family's move may be why a cell is ∞ (reasons.keyed_reason): the words `subset` prints
        by_classification = pairs.why
        pairs = replace(pairs, reasons=tuple(
            tuple(reasons.keyed_reason(index, {variables[i], variables[j]}, public, by_classification[i][j])
                  if is_infinite(matrix[i][j]) else by_classification[i][j] for j in range(n)) for i in range(n)))
    return pairs


def timeline_of(index: LedgerIndex, delta: Fraction, objective, now: datetime,
                public: Sequence[str] = (), caps: Sequence[Cap] = (), stamps: np.ndarray | None = None,
                final: Sequence[Number] | None = None) -> Timeline | None:
    """The loss on each variable over time, by publication date (None with no charged release).

    A release enters when it started to count (history.charged_from): its publication
    date, or the date it was planned when that came first (a reservation), so history
    recorded late is drawn when it was published. Caps in epsilon are drawn as lines.
    `stamps` (a large ledger): those moments as seconds since 1970 (nan: unknown),
    from the stored accounting rows (`charged_from_stamps`), instead of each Release's.
    `final`: the running figure per variable the risk table shows now; each point is the smaller of
    the basic composition then and it (both bound the running figure then, which only grows), so
    the line ends on the table's figure."""
    releases = index.releases
    if not releases or not index.variables:
        return None
    if stamps is not None:
        order, ends, distinct = _order_by_stamps(np.asarray(stamps, dtype=np.float64))
        times = _StampTimes(stamps)
    else:
        times = [charged_from(r) for r in releases]
        known = all(t is not None for t in times)
        order = sorted(range(len(releases)), key=lambda i: (times[i], i) if known else (0, i))
        distinct = known and len({times[i] for i in order}) > 1
        if distinct:
            # a checkpoint after the last release of each recording instant
            ends = [k + 1 for k in range(len(order))
                    if k + 1 == len(order) or times[order[k + 1]] != times[order[k]]]
        else:
            ends = list(range(1, len(order) + 1))
    envelope = len(ends) > TIMELINE_POINTS
    if envelope:
        picks = np.unique(np.linspace(0, len(ends) - 1, TIMELINE_POINTS).round().astype(int))
        ends = [ends[k] for k in picks]
    grid = index.running_totals(order, ends, objective)
    y = epsilon_floats(grid, delta, index.allowance)
    if final is not None:
        y = np.minimum(y, np.asarray([float(v) for v in final], dtype=np.float64)[None, :])
    if distinct:
        x = tuple(aware(times[order[e - 1]]) for e in ends)
        labels = ()
    else:
        x = tuple(ends)
        labels = tuple(releases[order[e - 1]].id for e in ends)
    final = y[-1]
    # protected variables first: a public variable's ∞ is expected (docs/explanation/model.md#public-and-protected-variables), drawn in grey
    ranked = sorted(range(len(index.variables)), key=lambda j: (index.variables[j] in public, -final[j], j))
    highlighted = tuple(index.variables[j] for j in ranked[:TIMELINE_LABELLED]
                        if final[j] > 0 and index.variables[j] not in public)
    lines = tuple((cap.name, float(round_down_float(cap.limit))) for cap in caps
                  if cap.rho is None and cap.limit is not None)
    return Timeline(axis="time" if distinct else "order", x=x, labels=labels, variables=index.variables, y=y,
                    envelope=envelope, highlighted=highlighted, end=aware(now), svg="", public=tuple(public),
                    caps=lines)


class _StampTimes:
    """Moments by release position, from seconds since 1970 (read only at the points drawn)."""

    def __init__(self, stamps: np.ndarray):
        self.stamps = stamps

    def __getitem__(self, i: int) -> datetime:
        return datetime.fromtimestamp(float(self.stamps[i]), UTC)


def _order_by_stamps(stamps: np.ndarray) -> tuple[list[int], list[int], bool]:
    """`timeline_of`'s order, checkpoints and whether the moments differ, over arrays: by
    moment then position when every moment is known, else by position."""
    n = len(stamps)
    known = not np.isnan(stamps).any()
    order = np.lexsort((np.arange(n), stamps)) if known else np.arange(n)
    ordered = stamps[order]
    changes = ordered[1:] != ordered[:-1]
    distinct = bool(known and changes.any())
    if distinct:  # a checkpoint after the last release of each recording instant
        ends = (np.flatnonzero(np.append(changes, True)) + 1).tolist()
    else:
        ends = list(range(1, n + 1))
    return order.tolist(), ends, distinct


def charged_from_stamps(recorded: np.ndarray, published: np.ndarray) -> np.ndarray:
    """history.charged_from over the stored times (index_figures.IndexEvents: recorded in seconds,
    -inf unknown; published in seconds, inf none, -inf datetime.min): the earlier of the two
    known moments, nan when neither is. A publication at datetime.min is the accountants' reading
    of a release recorded as published with neither moment (`published_moment`); its
    `published_at` is None, so `charged_from` knows no moment of it: unknown here too."""
    recorded = np.where(recorded == -np.inf, np.inf, recorded)
    published = np.where(published == -np.inf, np.inf, published)
    moment = np.minimum(recorded, published)
    return np.where(np.isinf(moment), np.nan, moment)


def round_down_float(value: Fraction) -> float:
    """A cap's limit as a float not above it (a cap is rounded down)."""
    result = float(value)
    return result if Fraction(result) <= value else math.nextafter(result, -math.inf)


# --------------------------------------------------------------------------
# Epsilon over arrays, for colours and curves only
# --------------------------------------------------------------------------


def cks_floats(rho: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """cks_conversion.cks_floats (where `pairs` uses it too)."""
    from ..accounting.cks_conversion import cks_floats as over_arrays

    return over_arrays(rho, delta)
