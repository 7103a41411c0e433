"""Every cap's running total and accountant state recomputed from the releases, a chunk at a time,
and compared with the stored ones (part of `verify`).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlmodel import Session, select

from ..accounting.cap_states import (ChunkEvents, state_apply, state_apply_chunk, state_differences, state_from_history,
                                     state_is_current)
from ..accounting.budget import FAMILY_DRIVER, options_measure, top_drivers, total_differences, total_from_index, total_from_parts
from ..accounting.cost_rule import family_options
from ..accounting.ledger_index import LedgerIndex
from ..accounting.spend import ZERO as ZERO_SPEND
from ..core.records import CHARGED_STATUSES, Release
from .codec import cap_total_to_dict
from .running_totals import cap_totals
from .configuration import Configuration
from .session_state import session_connection
from .table_models import CapAccountantRow


class TotalsCheck:
    """Every cap's running total recomputed from the releases, a chunk at a time, and
    compared with the stored one (`budget.total_from_index` per chunk; the chunks' totals
    composed exactly: standalone spends add, choices add their counts, the largest drivers
    of each chunk compete again; a family is charged once over all its members, docs/explanation/model.md#families)."""

    def __init__(self, session: Session, config: "Configuration"):
        self.session, self.config = session, config
        self.parts: dict[str, dict[str, list]] = {
            dataset: {cap.name: [ZERO_SPEND, {}, []] for cap in caps} for dataset, caps in config.caps.items()}
        self.members: dict[str, dict[str, list[Release]]] = {dataset: {} for dataset in config.caps}
        # the running accountant states a decision would read, recomputed chunk by chunk
        # (cap_states.state_apply_chunk from the empty history; family members last, over all of them)
        self.families = {dataset: {f.id: f for f in config.families.values() if f.dataset == dataset}
                         for dataset in config.caps}
        self.stored_states: dict[str, dict[str, dict]] = {}
        self.states: dict[str, dict[str, dict]] = {}
        for dataset, caps in config.caps.items():
            table = CapAccountantRow.__table__  # read from the table itself, never a process's cache
            stored = dict(session_connection(session).execute(select(table.c.cap, table.c.state).where(
                table.c.dataset == dataset)).all())
            by_name = {cap.name: cap for cap in caps}
            self.stored_states[dataset] = {name: state for name, state in stored.items()
                                           if name in by_name and state is not None
                                           and state_is_current(by_name[name], state)}
            self.states[dataset] = {cap.name: state_from_history(cap, (), self.families[dataset])
                                    for cap in caps if cap.name in self.stored_states[dataset]}

    def add(self, releases: Iterable[Release]) -> None:
        by_dataset: dict[str, list[Release]] = {}
        for release in releases:
            if release.dataset in self.parts and release.status in CHARGED_STATUSES:
                if release.family is not None:
                    self.members[release.dataset].setdefault(release.family, []).append(release)
                else:
                    by_dataset.setdefault(release.dataset, []).append(release)
        for dataset, counted in by_dataset.items():
            variables = self.config.datasets[dataset].variable_names
            index = LedgerIndex(variables, counted, ())
            states = self.states[dataset]
            chunk = ChunkEvents(index) if states else None  # each release's events, once for every cap
            for cap in self.config.caps[dataset]:
                if chunk is not None and cap.name in states:
                    states[cap.name] = state_apply_chunk(states[cap.name], cap, chunk)
                part = total_from_index(cap, index)
                kept = self.parts[dataset][cap.name]
                kept[0] = kept[0] + part.standalone
                for options, number in part.choices:
                    kept[1][options] = kept[1].get(options, 0) + number
                kept[2] = list(top_drivers(cap, kept[2] + list(part.drivers)))

    def _state_problems(self, dataset: str) -> list[str]:
        members = [m for group in self.members[dataset].values() for m in group]
        for cap in self.config.caps[dataset]:
            if cap.name in self.states[dataset]:
                self.states[dataset][cap.name] = state_apply(self.states[dataset][cap.name], cap, members,
                                                             self.families[dataset], {})
        problems = []
        for name, expected in self.states[dataset].items():
            differences = state_differences(self.stored_states[dataset][name], expected)
            if differences:
                problems.append(f"cap {dataset}/{name}: the running accountant state differs from the state "
                                f"recomputed from the releases: {'; '.join(differences)}")
        return problems

    def problems(self) -> list[str]:
        problems = []
        for dataset, dataset_caps in self.config.caps.items():
            families = {f.id: f for f in self.config.families.values() if f.dataset == dataset}
            stored = cap_totals(self.session, dataset)
            for cap in dataset_caps:
                standalone, choices, drivers = self.parts[dataset][cap.name]
                found_families = {}
                drivers = list(drivers)
                for fid, group in self.members[dataset].items():
                    options = family_options(families[fid], group, cap.subset)
                    if options != (ZERO_SPEND,):
                        found_families[fid] = options
                        drivers.append((FAMILY_DRIVER + fid, options_measure(cap, options)))
                expected = total_from_parts(cap, standalone, choices, found_families, drivers)
                found = stored.get(cap.name)
                if found is None:
                    problems.append(f"cap {dataset}/{cap.name}: the running total is missing")
                elif cap_total_to_dict(found) != cap_total_to_dict(expected):
                    differences = total_differences(found, expected) or ["its stored form"]
                    problems.append(f"cap {dataset}/{cap.name}: the running total differs from the total "
                                    f"recomputed from the releases: {'; '.join(differences)}")
            problems.extend(self._state_problems(dataset))
        return problems
