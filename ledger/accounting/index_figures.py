"""The accountants over a LedgerIndex's arrays: per release its event and times (`IndexEvents`), and the figures of a subset and of Table 1's total row.

Invariant: the same figures as the reference path (subset_composition.composition) on the same
releases, the events summed in the same order (so the same bits); the events are per release,
made once per index and kept on it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from fractions import Fraction

from ..core.lazy import lazy_module
from .composition_figures import _some, figures
from .dp_events import Event, _EVENT_MECHANISMS, _mechanism_event, _value, spend_events, unit_events
from .family_case_costs import family_cases
from .figure_validity import Figure
from .release_times import _stamps, published_moment
from .renyi_curves import _grids, event_curve
from .spend import Spend
from .subset_composition import Composition

np = lazy_module("numpy")  # imported on first use


class IndexEvents:
    """Per release of a LedgerIndex: its mechanism event (id, -1 none), its recording and
    publication moments as numbers (the report's cumulative chart orders releases by them), and
    per guarantee value id its event id; built once per index."""

    def __init__(self, index):
        self.index = index
        events: list[Event] = []
        ids: dict[Event, int] = {}

        def event_id(event: Event | None) -> int:
            if event is None:
                return -1
            if event not in ids:
                ids[event] = len(events)
                events.append(event)
            return ids[event]

        # per distinct mechanism and guarantee value, keyed by integers, so that 100,000
        # releases cost dictionary lookups, not Fraction hashing
        by_mechanism: dict = {}
        by_guarantee: dict = {}
        mech = np.full(len(index.releases), -1, dtype=np.int64)
        _, first_guarantee = index._guarantee_spans()
        g_value = index.g_value.tolist()
        first_guarantee = first_guarantee.tolist()
        fraction = Fraction
        for i, release in enumerate(index.releases):
            mechanism = release.mechanism
            if mechanism.name not in _EVENT_MECHANISMS:
                continue
            key = (mechanism.name, tuple((k, v.numerator, v.denominator) if type(v) is fraction else (k, v)
                                         for k, v in mechanism.params))
            found = by_mechanism.get(key)
            if found is None:
                event, derived = _mechanism_event(mechanism)
                found = by_mechanism[key] = (event_id(event), derived, mechanism)  # (kept alive: ids stay unique)
            if found[0] < 0 or len(release.guarantees) != len(found[1]):
                continue
            ok = True
            for offset, guarantee in enumerate(release.guarantees):
                # the index's value id and the relation name the guarantee's value exactly (for one
                # relation the value is a function of the charged spend, and back)
                gkey = (key, g_value[first_guarantee[i] + offset], guarantee.relation)
                matches = by_guarantee.get(gkey)
                if matches is None:
                    matches = by_guarantee[gkey] = (_value(guarantee) in found[1], guarantee)
                if not matches[0] or guarantee.protects != release.reads or \
                        guarantee.charged_in not in (None, guarantee.relation):
                    ok = False  # (charged in another relation: not the mechanism's event, as mechanism_event)
                    break
            if ok:
                mech[i] = found[0]
        self.mech = mech
        # a guarantee value has one notion, so one event (several parts: -2, handled one by one)
        self.value_event = np.asarray([_single(event_id, spend_events(v)) for v in index.values], dtype=np.int64)
        self.value_unbounded = _unbounded_values(index)
        self.events = events
        self.event_id = event_id
        self.recorded = _stamps([r.recorded_at for r in index.releases])
        published = [published_moment(r) for r in index.releases]
        self.published = _stamps([None if m == datetime.min else m for m in published])
        self.published[[k for k, m in enumerate(published) if m is None]] = np.inf
        self.published[[k for k, m in enumerate(published) if m == datetime.min]] = -np.inf

    def composition(self, ids: np.ndarray, subset: frozenset[str], basic: Spend) -> Composition:
        """The subset's Composition from per-release value ids (LedgerIndex.cost_ids or a
        column of the table's cells), simple releases over arrays, the rest one by one."""
        from .cost_rule import release_cost

        index = self.index
        comp = Composition(basic, allowance=index.allowance)
        touched = ids != index.ZERO_ID
        # a value with no bound (no covering guarantee, or one that does not bound the dataset's
        # neighbours) makes the subset unbounded and adds no event, as `composition` release by release
        value_unbounded = self.value_unbounded
        if basic.unbounded or np.any(value_unbounded[ids[index.simple & touched]]):
            comp.unbounded = True
        simple = index.simple & touched & ~index.value_is_zero[ids] & ~value_unbounded[ids]
        ev = np.where(self.mech >= 0, self.mech, self.value_event[ids])[simple]
        for value in np.unique(ids[simple][ev == -2]) if np.any(ev == -2) else ():
            count = int(np.sum((ids[simple] == value) & (ev == -2)))
            for event in spend_events(index.values[int(value)]):
                comp.events[event] += count
        ev = ev[ev >= 0]
        if len(ev):
            counts = np.bincount(ev)
            for k in np.flatnonzero(counts):
                comp.events[self.events[k]] += int(counts[k])
        # families in id order: an index of the releases touching a subset meets them in another
        # order than the whole index, and the events' order is the order the curves are summed in
        for fid, rows in sorted(index.members.items()):
            if not touched[rows].any():
                continue
            spend = family_cases(index, fid).cost(touched[rows], subset)
            if spend.unbounded:
                comp.unbounded = True
            else:
                comp.events.update(spend_events(spend))
        for i in index.ambiguous:
            if touched[i]:
                spend = release_cost(index.releases[i], subset)
                if spend.unbounded:
                    comp.unbounded = True
                else:
                    comp.events.update(unit_events(index.releases[i], spend))
        return comp


def _unbounded_values(index) -> np.ndarray:
    """Per guarantee value id of the index, whether it bounds nothing (the ∞ sentinel, or a
    guarantee that does not bound the dataset's neighbours)."""
    return np.asarray([value.unbounded for value in index.values], dtype=bool)


def _single(event_id, events: list[Event]) -> int:
    if not events:
        return -1
    return event_id(events[0]) if len(events) == 1 else -2


def stored_index_events(index, stored: np.ndarray, events: Sequence[Event], charged: np.ndarray,
                        recorded: np.ndarray, published: np.ndarray) -> IndexEvents:
    """The `IndexEvents` of an index built from stored accounting rows (index_from_rows.index_for), without the whole releases. Per release of the index: `stored`, the event its
    mechanism's parameters describe, as a position in `events` (-1: none); `charged`, whether
    it is charged through that event (`mechanism_event`); its times as `IndexEvents` keeps
    them (recorded: seconds since the epoch, -inf unknown; published: `published_moment` in
    seconds, inf none, -inf datetime.min). `events` must be in the order `IndexEvents.__init__`
    meets them (by their first charged release of the dataset); the guarantee values' events
    follow, so every float sum runs in the same order and the figures are the same. Cached
    on the index, where `index_events` finds it."""
    found = IndexEvents.__new__(IndexEvents)
    found.index = index
    found.events = list(events)
    ids = {event: k for k, event in enumerate(found.events)}

    def event_id(event: Event | None) -> int:
        if event is None:
            return -1
        if event not in ids:
            ids[event] = len(found.events)
            found.events.append(event)
        return ids[event]

    found.event_id = event_id
    stored = np.asarray(stored, dtype=np.int64).reshape(len(index.releases))
    found.mech = np.where(np.asarray(charged, dtype=bool), stored, -1)
    found.value_event = np.asarray([_single(event_id, spend_events(v)) for v in index.values], dtype=np.int64)
    found.value_unbounded = _unbounded_values(index)
    found.recorded = np.asarray(recorded, dtype=np.float64)
    found.published = np.asarray(published, dtype=np.float64)
    index.__dict__["_accountant_events"] = found
    return found


def index_events(index) -> IndexEvents:
    cached = index.__dict__.get("_accountant_events")
    if cached is None:
        cached = index.__dict__["_accountant_events"] = IndexEvents(index)
    return cached


def subset_figures(index, subset: Iterable[str], delta: Fraction, basic: Spend, invalid_pld: bool = True
                   ) -> dict[str, Figure]:
    """The three figures for one subset of a LedgerIndex (`basic` from `subset_cost`);
    `invalid_pld`: as `figures`."""
    subset = frozenset(subset)
    ids = index.cost_ids([index.column[name] for name in sorted(subset)])
    return figures(index_events(index).composition(ids, subset, basic), delta, invalid_pld)


def table_figures(index, table, delta: Fraction, accountants: Sequence[str] = ("basic", "rdp"),
                  invalid_pld: bool = True) -> tuple[list[dict[str, Figure]], dict[str, Figure]]:
    """Per variable (the total row of Tan's Table 1) and for the whole dataset, the figures
    of the named accountants (PLD only when asked: it is the slow one; `invalid_pld=False`:
    not computed, as `figures`). The single-variable columns are composed together over
    arrays: event counts by one bincount, curves by one matrix product."""
    events = index_events(index)
    n_rel, n_var = table.cells.shape
    cells = table.cells
    simple = index.simple
    several = np.flatnonzero(events.value_event == -2)  # guarantee values with several parts
    if len(several) and np.isin(cells[simple], several).any():  # then column by column
        per_variable = [_some(events.composition(cells[:, j], frozenset({name}), table.total[j]), delta, accountants,
                               invalid_pld)
                        for j, name in enumerate(index.variables)]
    else:
        # the cells a release does not read are 0 (ZERO_ID): the read entries hold every other
        rows, cols = index.read_entries()
        ids = cells[rows, cols]
        keep = simple[rows] & (ids != index.ZERO_ID)
        rows, cols, ids = rows[keep], cols[keep], ids[keep]
        event_ids = np.where(events.mech[rows] >= 0, events.mech[rows], events.value_event[ids])
        keep = ~index.value_is_zero[ids] & (event_ids >= 0)
        n_events = max(len(events.events), 1)
        counts = np.bincount(cols[keep] * n_events + event_ids[keep],
                             minlength=n_var * n_events).reshape(n_var, n_events)
        curves = np.asarray([event_curve(e) for e in events.events]) if events.events else np.zeros((1, len(_grids()["ORDERS"])))
        summed = counts @ curves
        unbounded = np.zeros(n_var, dtype=bool)
        unbounded[cols[ids == index.NONE]] = True
        others = bool(index.members) or bool(index.ambiguous)
        per_variable = []
        for j, name in enumerate(index.variables):
            comp = Composition(table.total[j], Counter({events.events[k]: int(counts[j, k])
                                                        for k in np.flatnonzero(counts[j])}),
                               bool(unbounded[j]) or table.total[j].unbounded, allowance=index.allowance)
            if others:  # families and releases with a choice, one by one
                extra = events.composition(np.where(simple, index.ZERO_ID, cells[:, j]), frozenset({name}), Spend())
                comp.events.update(extra.events)
                comp.unbounded |= extra.unbounded
            else:
                comp.known_curve = summed[j]
            per_variable.append(_some(comp, delta, accountants, invalid_pld))
    comp = events.composition(table.dataset_wide, frozenset(index.variables), table.total_dataset_wide)
    return per_variable, _some(comp, delta, accountants, invalid_pld)
