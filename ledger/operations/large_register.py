"""The complete register of a large ledger, read from the release rows a page at a time (keyset
paging by seq along the seq index: memory does not grow with the ledger), each release's figures of
Table 1 from the index's value ids. The register's text is the command line's to write
(cli/report_register.py); what it reads is read here, in one snapshot refused when the ledger has
changed since the page was read (report_reading.same_ledger).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..core.lazy import lazy_module
from .report_reading import lifecycle_events, register_moment, rows_as_they_stood, same_ledger

np = lazy_module("numpy")
report_queries = lazy_module("ledger.store.report_queries")  # the ORM, imported when a register is read

REGISTER_PAGE = 5_000  # releases read (and decoded) at a time for the complete register


def register_basis(large):
    """What both large-register writers read each release's figures from: the index, the delta,
    the number of variables, the index's seqs, the whole-dataset value id of every release, each
    value's epsilon at the delta and whether it is zero (one computation per distinct value)."""
    index, delta = large.index, large.delta
    n_var = len(index.variables)
    seqs = np.asarray(index.releases.seqs, dtype=np.int64)
    wide_ids = large.wide_ids if large.wide_ids is not None else index.cost_ids(range(n_var))
    epsilon_of = [value.own_epsilon(delta, index.allowance) for value in index.values]  # (each a release's own charge)
    zero = np.asarray([v.is_zero for v in index.values], dtype=bool)
    return index, delta, n_var, seqs, wide_ids, epsilon_of, zero


def positions(seqs, page_seqs):
    """(each page seq's position among the index's `seqs`, whether it is there)."""
    at = np.searchsorted(seqs, page_seqs)
    inside = (at < len(seqs)) & (seqs[at.clip(max=len(seqs) - 1)] == page_seqs) if len(seqs) else \
        np.zeros(len(page_seqs), dtype=bool)
    return at, inside


@dataclass(frozen=True)
class PageFigures:
    """The figures of Table 1 of a page of release rows, as value ids (each cell's text is the
    register writer's to make, once per distinct cell):
    - `charged`: whether each release of the page is charged;
    - `shown`: the page positions of the charged releases the index holds (the others' figures are blank);
    - `cells`: the distinct nonzero cells of those releases, each a key (`RegisterFigures.cell`);
    - `which`: every nonzero cell, release after release and by variable within one, as its place in `cells`;
    - `bounds`: the cells of the t-th shown release are `which[bounds[t]:bounds[t + 1]]`;
    - `wide`: the whole-dataset value id of each shown release (`RegisterFigures.epsilon`)."""

    charged: list[bool]
    shown: list[int]
    cells: list[int]
    which: list[int]
    bounds: list[int]
    wide: list[int]


class RegisterFigures:
    """Each page's figures of Table 1 for the complete register of a large report, from the
    index's value ids (register_basis: each distinct value's epsilon computed once)."""

    def __init__(self, large):
        from ..core.records import CHARGED_STATUSES

        self.index, _, _, self.seqs, self.wide_ids, self.epsilon_of, self.zero = register_basis(large)
        self.n_values = len(self.epsilon_of)
        self.charged_names = frozenset(s.value for s in CHARGED_STATUSES)

    def epsilon(self, value_id: int):
        """A value's epsilon at the report's delta (its release's own charge)."""
        return self.epsilon_of[value_id]

    def cell(self, key: int) -> tuple[str, object]:
        """A cell of `PageFigures.cells` as (its variable, its epsilon)."""
        j, value_id = divmod(key, self.n_values)  # (key: variable * n_values + value id)
        return self.index.variables[j], self.epsilon_of[value_id]

    def page(self, seqs, statuses) -> PageFigures:
        """The figures of the page whose releases have these seqs and (stored) statuses."""
        from ..accounting.index_chunks import rows_of

        charged = np.fromiter((s in self.charged_names for s in statuses), dtype=bool, count=len(statuses))
        at, inside = positions(self.seqs, np.asarray(seqs, dtype=np.int64))
        shown = np.flatnonzero(inside & charged)
        if not len(shown):
            return PageFigures(charged.tolist(), [], [], [], [0], [])
        a, b = int(at[inside].min()), int(at[inside].max()) + 1
        ids = rows_of(self.index, a, b).single_cells()[at[shown] - a]
        row, j = np.nonzero(~self.zero[ids])
        keys = j.astype(np.int64) * self.n_values + ids[row, j]
        distinct, which = np.unique(keys, return_inverse=True)
        bounds = np.searchsorted(row, np.arange(len(shown) + 1))
        return PageFigures(charged.tolist(), shown.tolist(), distinct.tolist(), which.reshape(-1).tolist(), bounds.tolist(),
                           self.wide_ids[at[shown]].tolist())


def register_releases(session, large, head: tuple[int, str] | None = None, page: int = REGISTER_PAGE) -> Iterator:
    """The register's releases, in recording order, each as (the Release as it stood (at --as-of),
    its nonzero cells of Table 1 as (variable, epsilon), its whole-dataset epsilon, its later
    lifecycle steps), `page` release rows at a time."""
    from ..accounting.index_chunks import rows_of
    from ..core.records import CHARGED_STATUSES

    index, delta, n_var, seqs, wide_ids, epsilon_of, zero = register_basis(large)
    variables = index.variables
    same_ledger(session, head)
    then, until = register_moment(session, large)
    steps = lifecycle_events(session, until=until)
    after = -1
    while True:
        rows = report_queries.release_page(session, large.dataset.name, after, page)
        if not rows:
            return
        after = rows[-1][0]
        at, inside = positions(seqs, np.asarray([seq for seq, _ in rows], dtype=np.int64))
        cells = None
        if inside.any():
            a, b = int(at[inside].min()), int(at[inside].max()) + 1
            cells = rows_of(index, a, b).single_cells()
        for k, (_, release) in enumerate(rows):
            if then is not None:  # the release as it stood then (not yet in the ledger: not listed)
                if then.status(release) is None:
                    continue
                release = then.release(release)
            found, wide = (), None
            if inside[k] and release.status in CHARGED_STATUSES:
                i = int(at[k])
                ids = cells[i - a]
                found = tuple((variables[j], epsilon_of[ids[j]]) for j in np.flatnonzero(~zero[ids]).tolist())
                wide = epsilon_of[wide_ids[i]]
            yield release, found, wide, steps.get(release.id, {})


def register_pages(session, large, head: tuple[int, str] | None = None, page: int = REGISTER_PAGE,
                   after: int = -1, upto: int | None = None) -> Iterator[tuple[list[tuple], dict]]:
    """The register's raw release rows (report_queries.REGISTER_FIELDS, as they stood at --as-of),
    `page` at a time, of the releases whose seq is in (after, upto], each page with the releases'
    later lifecycle steps (the same for every page)."""
    same_ledger(session, head)
    then, until = register_moment(session, large)
    steps = lifecycle_events(session, until=until)
    while True:
        rows = report_queries.register_page(session, large.dataset.name, after, upto, page)
        if not rows:
            return
        after = rows[-1][0]
        if then is not None:
            rows = rows_as_they_stood(rows, then)
            if not rows:
                continue
        yield rows, steps
