"""A cap's running state: the event counts of the releases it holds, kept beside it and updated at each record.

Invariants: the state is a function of event counts only (sorted by event key), so recomputing it
from the releases (`state_from_history`, `state_from_index`) gives the same dict as applying the
records one by one (`state_apply`); a state of another STATE_VERSION or another cap is stale.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from ..core.lazy import lazy_module
from ..core.records import CHARGED_STATUSES, Family, Release
from .dp_events import Event, mechanism_event, spend_events, unit_events
from .index_figures import index_events
from .renyi_curves import _grids
from .spend import Spend
from .subset_composition import Composition, composition

np = lazy_module("numpy")  # imported on first use: recording never needs it

# A state of another version is stale: recomputed from the accounting rows when read
# (cap_accounting.current_states); `audit verify` compares the current version's states only.
# 5: the events alone (no lifecycle moments: no case is inferred from them).
STATE_VERSION = 5


def cap_key(cap) -> str:
    """What a cap's running state belongs to: a replaced cap starts a new state."""
    known = _CAP_KEYS.get(id(cap))  # (a cap is frozen: its key, once per cap object)
    if known is not None and known[0] is cap:
        return known[1]
    key = "|".join([",".join(sorted(cap.subset)), str(cap.epsilon), str(cap.delta), str(cap.rho)])
    if len(_CAP_KEYS) >= 4096:
        _CAP_KEYS.clear()
    _CAP_KEYS[id(cap)] = (cap, key)
    return key


_CAP_KEYS: dict[int, tuple] = {}


def state_from_composition(cap, comp: Composition, family_events: Mapping[str, list[str]] | None = None) -> dict:
    events = Counter(comp.events)
    for keys in (family_events or {}).values():
        for key in keys:
            events[Event.from_key(key)] -= 1  # kept apart: a family's events change as members join
    return {
        "v": STATE_VERSION, "cap": cap_key(cap), "orders": [float(a) for a in _grids()["FILTER_ORDERS"]],
        "events": {e.key: c for e, c in sorted(events.items(), key=lambda item: item[0].key) if c > 0},
        "families": dict(family_events or {}), "unbounded": comp.unbounded,
    }


def state_from_history(cap, releases: Iterable[Release], families: Mapping[str, Family]) -> dict:
    """A cap's running state recomputed from every recorded release."""
    from .cost_rule import family_cost

    releases = [r for r in releases if r.status in CHARGED_STATUSES]
    comp = composition(releases, families.values(), cap.subset, basic=Spend())
    family_events: dict[str, list[str]] = {}
    members: dict[str, list[Release]] = {}
    first_reading: dict[str, int] = {}  # the families' order: their first member reading the subset
    for k, release in enumerate(releases):  # every member (docs/explanation/model.md#families, as ledger_cost charges them)
        if release.family is not None and release.family in families:
            members.setdefault(release.family, []).append(release)
            if cap.subset & release.reads:
                first_reading.setdefault(release.family, k)
    for fid in first_reading:  # (in that order, as `state_from_index`)
        spend = family_cost(families[fid], members[fid], cap.subset)
        if not spend.unbounded and spend_events(spend):
            family_events[fid] = [e.key for e in spend_events(spend)]
    return state_from_composition(cap, comp, family_events)


def state_from_index(cap, index) -> dict:
    """`state_from_history` over a LedgerIndex of the charged releases (the accounting rows,
    index_from_rows.index_for): the subset's events from the index's arrays
    (`IndexEvents.composition`, families and releases with a choice one by one), and each
    family's events from its members read whole, as `state_from_history` takes them. The state
    is a function of event counts only (`state_from_composition` sorts the events), so it is
    the same dict."""
    from .cost_rule import family_cost

    subset = frozenset(cap.subset)
    ids = index.cost_ids([index.column[name] for name in sorted(subset) if name in index.column])
    comp = index_events(index).composition(ids, subset, Spend())
    touching = {}
    for fid, rows in index.members.items():
        group = [index.releases[i] for i in rows]
        first = next((i for i, member in zip(rows, group) if subset & member.reads), None)
        if first is not None:  # every member, as ledger_cost charges the family (docs/explanation/model.md#families)
            touching[fid] = (first, group)
    family_events: dict[str, list[str]] = {}
    # in the order their first member reading the subset was recorded, as `state_from_history`
    # meets them (`state_composition` counts the families' events in this order)
    for fid, (_, group) in sorted(touching.items(), key=lambda item: item[1][0]):
        spend = family_cost(index.families[fid], group, subset)
        if not spend.unbounded and spend_events(spend):
            family_events[fid] = [e.key for e in spend_events(spend)]
    return state_from_composition(cap, comp, family_events)


def state_differences(stored: dict, expected: dict) -> list[str]:
    """What differs between a stored running state and the one recomputed from the releases,
    field by field, in words (`audit verify`)."""
    found = []
    for key in dict.fromkeys([*expected, *stored]):
        a, b = stored.get(key), expected.get(key)
        if key == "events":
            a, b = {k: int(v) for k, v in (a or {}).items()}, {k: int(v) for k, v in (b or {}).items()}
        if a != b:
            found.append(f"{key}: stored {json_text(stored.get(key))}, recomputed {json_text(expected.get(key))}")
    return found


def json_text(value) -> str:
    import json

    return json.dumps(value, sort_keys=True, default=str)


def state_is_current(cap, state: dict | None) -> bool:
    return bool(state) and state.get("v") == STATE_VERSION and state.get("cap") == cap_key(cap)


def state_apply(state: dict, cap, releases: Sequence[Release], families: Mapping[str, Family],
                members: Mapping[str, Sequence[Release]]) -> dict:
    """The state after recording `releases`.

    Works on the state's own fields: only what the plan touches is decoded (a check costs the
    same whatever the history's length, and little: no event of the history is rebuilt)."""
    from .cost_rule import family_cost

    events = dict(state["events"])  # (counts only grow here: no zero is ever kept)
    family_events = dict(state["families"])
    unbounded = state["unbounded"]
    joined: dict[str, list[Release]] = {}
    for release in releases:
        if release.status not in CHARGED_STATUSES:
            continue
        if release.family is not None and release.family in families and not cap.subset & release.reads:
            joined.setdefault(release.family, []).append(release)  # its moves count (docs/explanation/model.md#families)
            continue
        if not cap.subset & release.reads:
            continue
        if release.family is not None and release.family in families:
            joined.setdefault(release.family, []).append(release)
            continue
        unbounded |= _count_release(events, release, cap.subset)
    for fid, new in joined.items():
        everyone = [m for m in members.get(fid, ()) if m.status in CHARGED_STATUSES] + new
        spend = family_cost(families[fid], everyone, cap.subset)  # (0 where no member reads it)
        if spend.unbounded:
            unbounded = True
            family_events.pop(fid, None)
        elif spend_events(spend):
            family_events[fid] = [e.key for e in spend_events(spend)]
        else:
            family_events.pop(fid, None)
    return {**state, "v": STATE_VERSION, "cap": cap_key(cap), "events": events,
            "families": family_events, "unbounded": unbounded}


class ChunkEvents:
    """What `state_apply` charges each release of a LedgerIndex on any subset, found once per
    release and shared by every cap (`state_apply_chunk`): its mechanism's event
    (`mechanism_event`, as `unit_events` takes it) and, per guarantee value, that value's
    events. The index holds charged releases that are no family's members."""

    def __init__(self, index) -> None:
        self.index = index
        self.events: list[Event] = []
        ids: dict[Event, int] = {}
        mech = []
        for release in index.releases:
            event = mechanism_event(release)
            if event is not None and event not in ids:
                ids[event] = len(self.events)
                self.events.append(event)
            mech.append(-1 if event is None else ids[event])
        self.mech = np.asarray(mech, dtype=np.int64)
        self.unbounded = np.asarray([value.unbounded for value in index.values], dtype=bool)
        self.value_keys: list[list[str] | None] = [None] * len(index.values)  # spend_events' keys, when asked

    def value_events(self, value_id: int) -> list[str]:
        keys = self.value_keys[value_id]
        if keys is None:
            keys = self.value_keys[value_id] = [e.key for e in spend_events(self.index.values[value_id])]
        return keys


def state_apply_chunk(state: dict, cap, chunk: ChunkEvents) -> dict:
    """`state_apply(state, cap, chunk.index.releases, families, {})` (the releases being no
    family's members), over the index's arrays: each release's cost on the cap's subset is the
    index's (LedgerIndex.cost_ids: c_r(U), the first-ranked covering guarantee, as
    `release_cost` gives it) and its events are the chunk's; the releases with a choice go
    through `release_cost` one by one, as in `state_apply`."""
    index = chunk.index
    events = dict(state["events"])  # (counts only grow here: no zero is ever kept)
    unbounded = state["unbounded"]
    ids = index.cost_ids([index.column[name] for name in sorted(cap.subset) if name in index.column])
    touched = index.simple & (ids != index.ZERO_ID)
    if chunk.unbounded[ids[touched]].any():
        unbounded = True
    charged = touched & ~chunk.unbounded[ids] & ~index.value_is_zero[ids]
    mech = chunk.mech[charged]
    for k, count in _counts(mech[mech >= 0]):
        key = chunk.events[k].key
        events[key] = int(events.get(key, 0)) + count
    for value_id, count in _counts(ids[charged][mech < 0]):
        for key in chunk.value_events(value_id):
            events[key] = int(events.get(key, 0)) + count
    for i in index.ambiguous:
        release = index.releases[i]
        if not cap.subset & release.reads:
            continue
        unbounded |= _count_release(events, release, cap.subset)
    return {**state, "v": STATE_VERSION, "cap": cap_key(cap), "events": events, "unbounded": unbounded}


def _count_release(events: dict, release: Release, subset) -> bool:
    """Add one release's unit events on `subset` to `events`; whether its cost there is unbounded."""
    from .cost_rule import release_cost

    spend = release_cost(release, subset)
    if spend.unbounded:
        return True
    for event in unit_events(release, spend):
        events[event.key] = int(events.get(event.key, 0)) + 1
    return False


def _counts(values) -> list[tuple[int, int]]:
    """(value, how many times it occurs) for each value of an integer array."""
    if not len(values):
        return []
    counts = np.bincount(values)
    return [(int(k), int(counts[k])) for k in np.flatnonzero(counts)]


def state_composition(state: dict, basic: Spend) -> Composition:
    events = Counter({Event.from_key(k): int(c) for k, c in state["events"].items()})
    for keys in state["families"].values():
        for key in keys:
            events[Event.from_key(key)] += 1
    return Composition(basic, events, state["unbounded"] or basic.unbounded)
