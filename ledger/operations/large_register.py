"""The complete register of a large ledger, read from the release rows a page at a time (keyset
paging by seq along the seq index: memory does not grow with the ledger), each release's figures of
Table 1 from the index's value ids. The register's text is the command line's to write
(cli/report_register.py); what it reads is read here, in one snapshot refused when the ledger has
changed since the page was read (report_reading.same_ledger).
"""

from __future__ import annotations

from collections.abc import Iterator

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
