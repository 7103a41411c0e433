"""The accountants on every pair of variables over arrays (`pairs`, the report's pairs panel): basic, the Rényi filter, and the PLD (information only).

Per event k, the releases reading i or j number n_k(i) + n_k(j) - n_k(i and j), a matrix product
of the reads; a pair's summed curve is those counts times the events' curves, converted by
Canonne, Kamath and Steinke (2020), Prop 12 at each filter order.

Invariant: every pair's figures are the ones `subset A B` gives (index_figures.subset_figures).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from ..core.lazy import lazy_module
from ..core.numbers import INF
from .composition_figures import _basic_spend_figure
from .figure_validity import ADAPTIVE, CASES, CONVERSIONS, Figure, THEOREMS
from .index_figures import index_events
from .pair_extras import PairExtras
from .pld_accountant import pld_figure
from .renyi_curves import _MARGIN, _grids, event_curve
from .spend import ORDER_SHARE, filter_delta
from .subset_composition import Composition

np = lazy_module("numpy")  # imported on first use


PAIR_ACCOUNTANTS = ("basic", "rdp", "pld")


# At most this many distinct compositions (event multisets) get a PLD figure in one `pairs`
# (the pairs with the largest Rényi figures first); each costs a PLD composition.
PAIR_PLD_LIMIT = 16


PAIR_PLD_SKIPPED = (f"not computed: pairs compute at most {PAIR_PLD_LIMIT} distinct PLD compositions (the "
                    "pairs with the largest Rényi figures first); `pairs --accountant pld` computes every "
                    "pair's, `subset A B` this one's")


@dataclass
class PairRdp:
    """The Rényi filter's figure of every pair {i, j} (and of {i} on the diagonal) as floats,
    the pairs composed one by one, and the PLD figure of the pairs (information only: had the
    plan been fixed in advance, `pair_pld`)."""

    epsilon: np.ndarray  # n x n, symmetric; inf where not protected or the deltas run out
    slow: dict  # (i, j) -> Composition, composed one by one (none since PairExtras: kept for callers)
    chosen: list = field(default_factory=list)  # the events of the array path
    counts: np.ndarray | None = None  # events x n x n: how many releases of each read i or j
    pld: dict = field(default_factory=dict)  # (i, j), i <= j -> the PLD Figure (information only)
    pld_epsilon: np.ndarray | None = None  # n x n floats of those figures; inf elsewhere
    pld_skipped: int = 0  # pairs left without a PLD figure by PAIR_PLD_LIMIT
    unbounded: np.ndarray | None = None  # n x n: a release or family leaves the pair unprotected


def pair_rdp(index, delta: Fraction, grid, pld_limit: int | None = PAIR_PLD_LIMIT) -> PairRdp:
    """`rdp_figure` for every pair over arrays (see `pair_figures`), one row of pairs at a time:
    the summed curves by a matrix product, the CKS Prop 12 conversion at every filter order by
    broadcasting (`rdp_filter_epsilon`).

    Every pair's events are the ones `IndexEvents.composition` counts for `subset A B`: the
    simple one-guarantee releases counted per event over arrays (`LedgerIndex.pair_counts`),
    the other releases and the families added by `PairExtras` (their cost on {i, j} depends
    only on what they read of it, so each distinct case is composed once, not once per pair)."""
    n = len(index.variables)
    events = index_events(index)
    n_guarantees, first = index._guarantee_spans()
    single = index.simple & (n_guarantees <= 1) & (first >= 0)
    rows = np.flatnonzero(single)
    if len(rows):  # one guarantee that protects everything the release reads (else: unbounded on a part)
        covered = _covered(index, rows, first[rows])
        if not covered.all():
            single[rows[~covered]] = False
            rows = rows[covered]
    value = index.g_value[first[rows]] if len(rows) else np.zeros(0, dtype=np.int64)
    ev = np.where(events.mech[rows] >= 0, events.mech[rows], events.value_event[value]) if len(rows) else value
    several = ev == -2  # a value with several parts: counted part by part with the others
    single[rows[several]] = False
    keep = (ev >= 0) & ~index.value_is_zero[value]
    rows, ev = rows[keep], ev[keep]
    extras = PairExtras(index, events, single)
    kinds = sorted({int(k) for k in np.unique(ev)} | set(extras.counts))
    chosen = [events.events[k] for k in kinds]
    slot_of = np.full(max(kinds, default=0) + 1, -1, dtype=np.int64)
    slot_of[kinds] = np.arange(len(kinds))
    groups = np.full(len(index.releases), -1, dtype=np.int64)
    groups[rows] = slot_of[ev]
    # per event, the releases reading i or j (exact integers, as floats for the products below)
    counts = index.pair_counts(groups, len(kinds)).astype(np.float64)
    for k, extra in extras.counts.items():
        counts[slot_of[k]] += extra
    approx = np.asarray([e.kind == "approx" for e in chosen], dtype=bool)
    orders = _grids()["ORDERS"]
    curves = (np.asarray([event_curve(e) for e in chosen])[~approx] if len(chosen)
              else np.zeros((0, len(orders))))
    a_eps = np.asarray([float(e.a) for e in chosen if e.kind == "approx"], dtype=np.float64)
    a_delta = np.asarray([float(e.b) for e in chosen if e.kind == "approx"], dtype=np.float64)
    # the Rényi filter's figure (rdp_filter_epsilon), what a pair shows (rdp_figure)
    filtered = np.full((n, n), np.inf)
    f_index, f_orders = _grids()["_FILTER_INDEX"], _grids()["FILTER_ORDERS"]
    f_log_term, f_log_a, f_a_1 = np.log1p(-1 / f_orders), np.log(f_orders), f_orders - 1
    remaining_of, approx_of = np.ones((n, n)), np.zeros((n, n))
    for i in range(n):
        c = counts[:, i, i:]  # events x pairs (i, i..n-1)
        plain = c[~approx] if len(chosen) else np.zeros((0, n - i))
        summed = plain.T @ curves  # pairs x orders
        approx_of[i, i:] = c[approx].T @ a_eps if approx.any() else 0.0
        approx_delta = c[approx].T @ a_delta if approx.any() else np.zeros(n - i)
        # filter_delta over arrays: what the allowance leaves, 0 past it (the sums a hair high: never
        # admitted past the exact sum)
        within = approx_delta * (1 + 1e-12) <= float(index.allowance) * float(delta)
        remaining = np.where(within, filter_delta(delta, allowance=index.allowance), 0.0)
        remaining_of[i, i:] = remaining
        sub = summed[:, f_index]  # as rdp_filter_epsilon, the log of each pair's share of delta by math.log
        logs = np.asarray([math.log(r * ORDER_SHARE) if r > 0 else 0.0 for r in remaining.tolist()])
        f_eps = np.maximum((sub + f_log_term - (logs[:, None] + f_log_a) / f_a_1).min(axis=1), 0.0)
        filtered[i, i:] = np.where(~sub.any(axis=1), 0.0, np.nextafter(f_eps * (1 + _MARGIN), np.inf))
    upper = np.triu(np.ones((n, n), dtype=bool))
    live = upper & (remaining_of > 0)
    filtered = np.where(approx_of > 0, np.nextafter((filtered + approx_of) * (1 + _MARGIN), np.inf), filtered)
    filtered[upper & ~live] = np.inf
    # unprotected pairs: ∞ for every accountant (the basic grid knows them)
    unbounded = extras.unbounded.copy()
    if hasattr(grid, "unbounded"):
        unbounded |= np.asarray(grid.unbounded, dtype=bool)
    filtered[unbounded] = np.inf
    epsilon = np.triu(filtered) + np.triu(filtered, 1).T
    found = PairRdp(epsilon, {}, chosen, counts, unbounded=unbounded)
    pair_pld(found, grid, delta, pld_limit)
    return found


def _covered(index, rows: np.ndarray, guarantees: np.ndarray, chunk: int = 65_536) -> np.ndarray:
    """Per release of `rows`, whether its guarantee `guarantees` protects every variable it reads.
    When the index's protects matrix is its reads matrix (every first guarantee protects what its
    release reads, `index_from_rows.index_for`) and each of these releases' guarantee is its own row,
    every one is covered, without a matrix; else a chunk of rows at a time."""
    if index.g_protects is index.reads and np.array_equal(guarantees, rows):
        return np.ones(len(rows), dtype=bool)
    out = np.empty(len(rows), dtype=bool)
    for start in range(0, len(rows), chunk):
        part = slice(start, start + chunk)
        out[part] = ~(index.reads[rows[part]] & ~index.g_protects[guarantees[part]]).any(axis=1)
    return out


def pair_composition(rdp: PairRdp, grid, i: int, j: int) -> Composition:
    """The composition of the pair {i, j} (i < j): the slow path's, or its events counted over arrays."""
    if (i, j) in rdp.slow:
        return rdp.slow[i, j]
    spend = grid.spend(i, j)
    comp = Composition(spend, unbounded=spend.unbounded or (rdp.unbounded is not None and bool(rdp.unbounded[i, j])))
    if rdp.counts is not None:
        for k in np.flatnonzero(rdp.counts[:, i, j]):
            comp.events[rdp.chosen[k]] = int(rdp.counts[k, i, j])
    return comp


def pair_pld(rdp: PairRdp, grid, delta: Fraction, limit: int | None = PAIR_PLD_LIMIT) -> None:
    """The PLD figure of every pair {i, j}, i <= j (information only: had the plan been fixed in
    advance), the same `subset A B --accountant pld` gives: one PLD composition per distinct event
    multiset (pairs read by the same releases' events share it), at most `limit` of them (None:
    every one, `pairs --accountant pld`; 0: none), the pairs with the largest Rényi figures first;
    the pairs left over are counted in `pld_skipped` and their figure says so."""
    n = rdp.epsilon.shape[0]
    rdp.pld_epsilon = np.full((n, n), np.inf)
    upper = np.triu(np.isfinite(rdp.epsilon))  # (the diagonal too: {i} alone, as `subset i`)
    if limit == 0 or not upper.any():
        return
    rows, cols = np.nonzero(upper)
    order = np.lexsort((cols, rows, -rdp.epsilon[rows, cols]))
    computed: dict[tuple, Figure] = {}
    # each pair's key (its event multiset) from the counts, without a Composition per pair: the
    # same key `pair_composition` gives, the Composition built only for the PLDs computed
    keys = [e.key for e in rdp.chosen]
    marked = getattr(grid, "unbounded", None)
    for k in order:
        i, j = int(rows[k]), int(cols[k])
        if (i, j) in rdp.slow or rdp.counts is None or marked is None:
            comp = pair_composition(rdp, grid, i, j)
            key = (tuple(sorted((e.key, c) for e, c in comp.events.items())), comp.unbounded)
        else:
            comp = None
            column = rdp.counts[:, i, j]
            exception = grid.exceptions.get((i, j)) if hasattr(grid, "exceptions") else None
            unbounded = bool(marked[i, j]) if exception is None else exception.unbounded  # (grid.spend's)
            key = (tuple(sorted((keys[e], int(column[e])) for e in np.flatnonzero(column))), unbounded)
        figure = computed.get(key)
        if figure is None:
            if limit is not None and len(computed) >= limit:
                rdp.pld_skipped += 1
                continue
            if comp is None:
                comp = pair_composition(rdp, grid, i, j)
            figure = computed[key] = pld_figure(comp, delta, ADAPTIVE)
        rdp.pld[i, j] = figure
        if figure.available:
            rdp.pld_epsilon[i, j] = rdp.pld_epsilon[j, i] = float(figure.epsilon)


def pair_figure(index, delta: Fraction, grid, rdp: PairRdp, i: int, j: int) -> dict[str, Figure]:
    """The basic, rdp and pld Figures of one pair (i <= j) from the arrays of `pair_rdp` (the PLD
    figure where `pair_pld` made one; else one that is not available, saying why)."""
    i, j = min(i, j), max(i, j)
    case = ADAPTIVE
    spend = grid.spend(i, j)
    comp = rdp.slow.get((i, j))  # (else the pair's basic spend alone: no Composition per pair)
    basic = _basic_spend_figure(spend if comp is None else comp.basic, delta, case, index.allowance)
    value = INF if spend.unbounded else float(rdp.epsilon[i, j])
    figure = Figure("rdp", value, delta, True, case, THEOREMS["rdp"], CONVERSIONS["rdp-filter"])
    pld = rdp.pld.get((i, j))
    if pld is None:
        pld = Figure("pld", INF, delta, False, case, THEOREMS["pld"], CONVERSIONS["pld"],
                     available=False, note="not computed for pairs (information only: " + CASES["fixed"] + ")")
    return {"basic": basic, "rdp": figure, "pld": pld}


def pair_figures(index, delta: Fraction, grid=None, objective=None, diagonal: bool = False,
                 pld_limit: int | None = PAIR_PLD_LIMIT) -> dict[tuple[int, int], dict[str, Figure]]:
    """The basic, Rényi and PLD figures on every pair {i, j} (i < j, column indices), the same
    figures `subset_figures` gives for that pair (the PLD figure, information only, up to
    `pld_limit` distinct compositions: `pair_pld`).

    Over arrays, as `LedgerIndex.pair_matrix`: a simple release with at most one guarantee
    has one event on every subset it touches, so per event k the number of its releases
    reading i or j is n_k(i) + n_k(j) - n_k(i and j), a matrix product of the reads; the
    summed curve of a pair is those counts times the events' curves (`pair_rdp`). Pairs read
    by a release with several guarantees, a family member or a release with a choice are
    composed pair by pair (`IndexEvents.composition`). `diagonal`: also {i} alone, as (i, i)."""
    from .charge_choice import at_delta

    n = len(index.variables)
    if grid is None:
        grid = index.pair_matrix(objective if objective is not None else at_delta(delta))
    if n < (1 if diagonal else 2):
        return {}
    rdp = pair_rdp(index, delta, grid, pld_limit)
    return {(i, j): pair_figure(index, delta, grid, rdp, i, j)
            for i in range(n) for j in range(i if diagonal else i + 1, n)}
